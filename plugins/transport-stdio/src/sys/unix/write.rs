//! Unix: the child's stdin is non-blocking; `send` writes what the pipe takes at once, and the
//! helper waits for room with poll(2) and writes the rest as the child reads.

use std::{
    io::{ErrorKind, Write},
    os::fd::AsRawFd,
    process::ChildStdin,
    sync::{Condvar, Mutex},
};

use crate::stdin::{State, lock};

/// The pipe as the writer holds it.
pub(crate) type Pipe = ChildStdin;

/// Makes the pipe non-blocking.
pub(crate) fn prepare(pipe: ChildStdin) -> Pipe {
    // SAFETY: fcntl(2) on a descriptor this value owns, changing only its O_NONBLOCK flag.
    unsafe {
        let fd = pipe.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
    pipe
}

/// Writes what the pipe takes now; 0 when it is full.
pub(crate) fn write_now(pipe: &mut Pipe, bytes: &[u8]) -> std::io::Result<usize> {
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
pub(crate) fn drain(shared: &(Mutex<State>, Condvar)) {
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
        match write_now(pipe, backlog) {
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
