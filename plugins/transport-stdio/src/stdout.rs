//! Reading a child's stdout straight from `recv`: poll(2) for the time the host allows, then
//! read, with lines capped in length. No thread in between, so a message costs the host no
//! hand-over from one thread to another.

use std::{
    io::Read,
    os::fd::AsRawFd,
    process::ChildStdout,
    time::{Duration, Instant},
};

/// What the next look at stdout found.
pub(crate) enum Next {
    /// One complete line (without its newline; blank lines are skipped).
    Line(String),
    /// Nothing within the timeout.
    Timeout,
    /// A line longer than the cap was skipped; its length.
    TooLong(usize),
    /// The child closed its stdout.
    Eof,
    /// Reading failed.
    Failed(std::io::Error),
}

pub(crate) struct Stdout {
    pipe: ChildStdout,
    buffer: Vec<u8>,
    /// Where the unread part of `buffer` starts.
    start: usize,
    /// Bytes of an over-long line dropped so far, while its end is not yet read.
    skipping: Option<usize>,
    max: usize,
}

impl Stdout {
    pub(crate) fn new(pipe: ChildStdout, max: usize) -> Self {
        Stdout {
            pipe,
            buffer: Vec::with_capacity(64 * 1024),
            start: 0,
            skipping: None,
            max,
        }
    }

    /// The next line, waiting at most `timeout` for more input.
    pub(crate) fn next(&mut self, timeout: Duration) -> Next {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(next) = self.take_line() {
                return next;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.wait_readable(left) {
                Ok(true) => {}
                Ok(false) => return Next::Timeout,
                Err(error) => return Next::Failed(error),
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.pipe.read(&mut chunk) {
                Ok(0) => return Next::Eof,
                Ok(read) => self.buffer.extend_from_slice(&chunk[..read]),
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Next::Failed(error),
            }
        }
    }

    /// A complete line from what has been read, if there is one; drops what an over-long line
    /// has filled the buffer with.
    fn take_line(&mut self) -> Option<Next> {
        loop {
            let unread = &self.buffer[self.start..];
            let Some(at) = unread.iter().position(|&b| b == b'\n') else {
                break;
            };
            let mut line = &unread[..at];
            self.start += at + 1;
            if let Some(dropped) = self.skipping.take() {
                return Some(Next::TooLong(dropped + at + 1));
            }
            if line.len() > self.max {
                return Some(Next::TooLong(at + 1));
            }
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(Next::Line(String::from_utf8_lossy(line).into_owned()));
        }
        // Keep the buffer small: move the unread part to the front.
        self.buffer.drain(..self.start);
        self.start = 0;
        if self.buffer.len() > self.max {
            *self.skipping.get_or_insert(0) += self.buffer.len();
            self.buffer.clear();
        }
        None
    }

    fn wait_readable(&self, timeout: Duration) -> std::io::Result<bool> {
        let mut poll = libc::pollfd {
            fd: self.pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        loop {
            // SAFETY: one valid pollfd for a file descriptor this struct owns, for the call only.
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
}
