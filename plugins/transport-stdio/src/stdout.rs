//! Splitting a child's stdout (or this process's own stdin, for the listener) into lines capped
//! in length. How the reads wait is the platform's ([`crate::sys::read`]): on Unix `recv`
//! polls for the time the host allows and reads itself (no thread in between, so a message
//! costs the host no hand-over from one thread to another); on Windows a reader thread reads.
//!
//! Reading is linear in the size of a message: the search for the newline resumes where it
//! stopped, reads go straight into the buffer, and the buffer is compacted only when what was
//! consumed outweighs what is left (so each byte is moved at most once, on average).

use std::{io::Read, process::ChildStdout};

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

impl<P: Read> Stdout<P> {
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

    /// The pipe, for the platform's wait.
    #[cfg(unix)]
    pub(crate) fn pipe(&self) -> &P {
        &self.pipe
    }

    /// A complete line from what has been read, if there is one (never reads).
    pub(crate) fn buffered(&mut self) -> Option<Next> {
        self.take_line()
    }

    /// One read, which blocks until the pipe has input; what it brought is for
    /// [`buffered`](Self::buffered). `Some` when the stream ended or failed.
    pub(crate) fn fill(&mut self) -> Option<Next> {
        let filled = self.end;
        let want = (filled - self.start).clamp(MIN_READ, MAX_READ);
        if self.buffer.len() < filled + want {
            self.buffer.resize(filled + want, 0);
        }
        let read = self.pipe.read(&mut self.buffer[filled..filled + want]);
        self.end = filled + *read.as_ref().unwrap_or(&0);
        match read {
            Ok(0) => Some(Next::Eof),
            Ok(_) => None,
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => None,
            Err(error) => Some(Next::Failed(error)),
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
}
