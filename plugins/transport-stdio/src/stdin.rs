//! Writing to a child's stdin without blocking the caller: what the pipe does not take at once
//! (on Windows: everything, see [`crate::sys::write`]) waits in a backlog that a helper thread
//! writes out (in order) as the child reads. So `send` returns at once, and the host may call
//! it from its async tasks.

use std::{
    process::ChildStdin,
    sync::{Arc, Condvar, Mutex},
    thread,
};

use runbyte_plugin_api::Signal;

use crate::sys::write::{self as platform, Pipe};

/// The most a child that does not read may leave waiting before `send` refuses a message.
pub(crate) const MAX_BACKLOG: usize = 64 << 20;

pub(crate) struct State {
    pub(crate) pipe: Option<Pipe>,
    /// What waits to be written, in order.
    pub(crate) backlog: Vec<u8>,
    helper: bool,
}

/// A child's stdin.
pub(crate) struct Stdin {
    state: Arc<(Mutex<State>, Condvar)>,
    name: String,
}

pub(crate) fn lock(mutex: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Stdin {
    pub(crate) fn new(pipe: ChildStdin, name: String) -> Stdin {
        let state = State {
            pipe: Some(platform::prepare(pipe)),
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
    /// it is written (half a line would put the stream out of step): the error is written by
    /// [`Signal::refused`], so the host fails only the request it carried and the connection
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
            return Err(Signal::refused(&format!(
                "a {size}-byte message to server `{}`{waiting} is more than the \
                 {MAX_BACKLOG} bytes that may wait for its stdin",
                self.name
            )));
        }
        let mut line = Vec::with_capacity(size);
        line.extend_from_slice(message.as_bytes());
        line.push(b'\n');
        if backlog.is_empty() {
            let written = platform::write_now(pipe, &line).map_err(|e| self.broken(e))?;
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
                .spawn(move || platform::drain(&shared));
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
