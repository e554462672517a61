//! Reading a child's stdout (or this process's own stdin, for the listener) straight from
//! `recv`: poll(2) for the time the host allows, then read, with lines capped in length. No
//! thread in between, so a message costs the host no hand-over from one thread to another.
//!
//! Reading is linear in the size of a message: the search for the newline resumes where it
//! stopped, reads go straight into the buffer, and the buffer is compacted only when what was
//! consumed outweighs what is left (so each byte is moved at most once, on average).

use std::{
    io::Read,
    os::fd::AsRawFd,
    process::ChildStdout,
    time::{Duration, Instant},
};

use crate::overlong::Overlong;

/// What the next look at stdout found.
pub(crate) enum Next {
    /// One complete line (without its newline; blank lines are skipped).
    Line(String),
    /// Nothing within the timeout.
    Timeout,
    /// A line longer than the cap was skipped; what is known of it.
    TooLong(Overlong),
    /// The child closed its stdout.
    Eof,
    /// Reading failed.
    Failed(std::io::Error),
}

/// The least one read asks for; a long line in progress reads in larger steps (up to
/// [`MAX_READ`]), so a big message takes fewer system calls.
const MIN_READ: usize = 64 * 1024;
const MAX_READ: usize = 1 << 20;

pub(crate) struct Stdout<P = ChildStdout> {
    pipe: P,
    /// What was read, in `buffer[..end]`; past `end`, room for the next read (zeroed once, when
    /// it grew, not before every read).
    buffer: Vec<u8>,
    end: usize,
    /// Where the unread part of `buffer` starts.
    start: usize,
    /// How far past `start` the buffer is known to hold no newline.
    scanned: usize,
    /// An over-long line being dropped, while its end is not yet read.
    skipping: Option<Overlong>,
    max: usize,
}

impl<P: Read + AsRawFd> Stdout<P> {
    pub(crate) fn new(pipe: P, max: usize) -> Self {
        Stdout {
            pipe,
            buffer: Vec::new(),
            end: 0,
            start: 0,
            scanned: 0,
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
            let filled = self.end;
            let want = (filled - self.start).clamp(MIN_READ, MAX_READ);
            if self.buffer.len() < filled + want {
                self.buffer.resize(filled + want, 0);
            }
            let read = self.pipe.read(&mut self.buffer[filled..filled + want]);
            self.end = filled + *read.as_ref().unwrap_or(&0);
            match read {
                Ok(0) => return Next::Eof,
                Ok(_) => {}
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Next::Failed(error),
            }
        }
    }

    /// A complete line from what has been read, if there is one; drops what an over-long line
    /// has filled the buffer with.
    fn take_line(&mut self) -> Option<Next> {
        loop {
            let from = self.start + self.scanned;
            let Some(at) = self.buffer[from..self.end].iter().position(|&b| b == b'\n') else {
                break;
            };
            let end = from + at;
            let line_start = self.start;
            self.start = end + 1;
            self.scanned = 0;
            let line = &self.buffer[line_start..end];
            if let Some(mut skipped) = self.skipping.take() {
                skipped.extend(line);
                return Some(Next::TooLong(skipped));
            }
            if line.len() > self.max {
                let mut skipped = Overlong::default();
                skipped.extend(line);
                return Some(Next::TooLong(skipped));
            }
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Some(Next::Line(String::from_utf8_lossy(line).into_owned()));
        }
        let pending = self.end - self.start;
        if pending > self.max || (self.skipping.is_some() && pending > 0) {
            // Over the cap: keep only what the error report needs, drop the rest.
            self.skipping
                .get_or_insert_with(Overlong::default)
                .extend(&self.buffer[self.start..self.end]);
            self.end = 0;
            self.start = 0;
            self.scanned = 0;
        } else if self.start >= pending {
            // More consumed than left: move what is left to the front (a cost no bigger than
            // what was consumed, so linear over the stream).
            self.buffer.copy_within(self.start..self.end, 0);
            self.end = pending;
            self.start = 0;
            self.scanned = pending;
        } else {
            self.scanned = pending;
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
