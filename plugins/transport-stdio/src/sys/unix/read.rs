//! Unix: `recv` polls the pipe for the time the host allows, then reads, on the caller's thread.

use std::{
    io::Read,
    os::fd::AsRawFd,
    time::{Duration, Instant},
};

use crate::stdout::{Next, Stdout};

/// A pipe read line by line, straight from `recv`.
pub(crate) struct Incoming<P> {
    lines: Stdout<P>,
}

impl<P: Read + AsRawFd + Send + 'static> Incoming<P> {
    /// `_label` names the reader thread where there is one (not here).
    pub(crate) fn new(pipe: P, max: usize, _label: &str) -> std::io::Result<Self> {
        Ok(Incoming {
            lines: Stdout::new(pipe, max),
        })
    }

    /// The next line, waiting at most `timeout` for more input.
    pub(crate) fn next(&mut self, timeout: Duration) -> Next {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(next) = self.lines.buffered() {
                return next;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match wait_readable(self.lines.pipe().as_raw_fd(), left) {
                Ok(true) => {}
                Ok(false) => return Next::Timeout,
                Err(error) => return Next::Failed(error),
            }
            if let Some(end) = self.lines.fill() {
                return end;
            }
        }
    }

    /// The descriptor the host may wait on: readable whenever `next` may have something.
    pub(crate) fn readable_fd(&self) -> Option<i32> {
        Some(self.lines.pipe().as_raw_fd())
    }
}

fn wait_readable(fd: i32, timeout: Duration) -> std::io::Result<bool> {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    loop {
        // SAFETY: one valid pollfd for a file descriptor the caller owns, for the call only.
        let ready = unsafe { libc::poll(&mut poll, 1, millis) };
        match ready {
            0 => return Ok(false),
            n if n > 0 => return Ok(true),
            _ => {
                let error = std::io::Error::last_os_error();
                if error.kind() != std::io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }
    }
}
