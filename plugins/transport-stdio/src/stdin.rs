//! Writing to a child's stdin without blocking the caller: the pipe is non-blocking, what it
//! does not take at once waits in a backlog that a helper thread writes out (in order) as the
//! child reads. So `send` returns at once, and the host may call it from its async tasks.

use std::{
    io::{ErrorKind, Write},
    os::fd::AsRawFd,
    process::ChildStdin,
    sync::{Arc, Condvar, Mutex},
    thread,
};

use runbyte_plugin_api::transport::SEND_REFUSED;

/// The most a child that does not read may leave waiting before `send` refuses a message.
pub(crate) const MAX_BACKLOG: usize = 64 << 20;

struct State {
    pipe: Option<ChildStdin>,
    backlog: Vec<u8>,
    helper: bool,
}

/// A child's stdin.
pub(crate) struct Stdin {
    state: Arc<(Mutex<State>, Condvar)>,
    name: String,
}

fn lock(mutex: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Stdin {
    pub(crate) fn new(pipe: ChildStdin, name: String) -> Stdin {
        // SAFETY: fcntl(2) on a descriptor this value owns, changing only its O_NONBLOCK flag.
        unsafe {
            let fd = pipe.as_raw_fd();
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
            }
        }
        let state = State {
            pipe: Some(pipe),
            backlog: Vec::new(),
            helper: false,
        };
        Stdin {
            state: Arc::new((Mutex::new(state), Condvar::new())),
            name,
        }
    }

    /// Writes one line, or queues what the pipe does not take now. Never waits for the child.
    ///
    /// A line that would take the backlog past [`MAX_BACKLOG`] is refused whole, before any of
    /// it is written (half a line would put the stream out of step): the error starts with
    /// [`SEND_REFUSED`], so the host fails only the request it carried and the connection
    /// goes on.
    pub(crate) fn send(&self, message: &str) -> Result<(), String> {
        let (mutex, wake) = &*self.state;
        let mut state = lock(mutex);
        let State { pipe, backlog, .. } = &mut *state;
        let Some(pipe) = pipe.as_mut() else {
            return Err(format!("server `{}` is closed", self.name));
        };
        let size = message.len() + 1;
        if backlog.len() + size > MAX_BACKLOG {
            let waiting = if backlog.is_empty() {
                String::new()
            } else {
                format!(" on top of the {} bytes already waiting", backlog.len())
            };
            return Err(format!(
                "{SEND_REFUSED}a {size}-byte message to server `{}`{waiting} is more than the \
                 {MAX_BACKLOG} bytes that may wait for its stdin",
                self.name
            ));
        }
        let mut line = Vec::with_capacity(size);
        line.extend_from_slice(message.as_bytes());
        line.push(b'\n');
        if backlog.is_empty() {
            let written = write_some(pipe, &line).map_err(|e| self.broken(e))?;
            if written == line.len() {
                return Ok(());
            }
            line.drain(..written);
        }
        state.backlog.extend_from_slice(&line);
        if !state.helper {
            state.helper = true;
            let shared = self.state.clone();
            let spawned = thread::Builder::new()
                .name(format!("stdio-stdin-{}", self.name))
                .spawn(move || drain(&shared));
            if let Err(error) = spawned {
                state.helper = false;
                return Err(format!("cannot start a writer thread: {error}"));
            }
        }
        wake.notify_one();
        Ok(())
    }

    /// Closes the pipe (the polite request to exit); what is still queued is dropped.
    pub(crate) fn close(&self) {
        let (mutex, wake) = &*self.state;
        let mut state = lock(mutex);
        state.pipe = None;
        state.backlog.clear();
        wake.notify_all();
    }

    fn broken(&self, error: std::io::Error) -> String {
        format!("cannot write to server `{}`: {error}", self.name)
    }
}

/// Writes what the pipe takes now; 0 when it is full.
fn write_some(pipe: &mut ChildStdin, bytes: &[u8]) -> std::io::Result<usize> {
    let mut written = 0;
    while written < bytes.len() {
        match pipe.write(&bytes[written..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(error) if error.kind() == ErrorKind::WouldBlock => break,
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(written)
}

/// The helper: writes the backlog out as the child reads, then sleeps until there is more.
fn drain(shared: &(Mutex<State>, Condvar)) {
    let (mutex, wake) = shared;
    let mut state = lock(mutex);
    loop {
        while state.pipe.is_some() && state.backlog.is_empty() {
            state = wake.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        let Some(fd) = state.pipe.as_ref().map(AsRawFd::as_raw_fd) else {
            return;
        };
        // Wait for room without holding the lock, so `send` can queue meanwhile.
        drop(state);
        let mut poll = libc::pollfd {
            fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the call; the descriptor stays open while `pipe` is Some,
        // and a closed one only makes poll report POLLNVAL, which the loop handles by rechecking.
        unsafe { libc::poll(&mut poll, 1, 200) };
        state = lock(mutex);
        let State { pipe, backlog, .. } = &mut *state;
        let Some(pipe) = pipe.as_mut() else { return };
        match write_some(pipe, backlog) {
            Ok(written) => {
                backlog.drain(..written);
            }
            Err(_) => {
                // The child is gone: the reader reports it; nothing more can be written.
                state.pipe = None;
                state.backlog.clear();
                return;
            }
        }
    }
}
