//! Windows: an anonymous pipe can be neither polled nor read with a timeout, so one thread per
//! pipe reads it (blocking) and hands its lines over through a channel that holds one batch: the
//! thread reads ahead by at most one batch before it waits for `recv`. A batch is what one read
//! completed: at most [`BATCH_LINES`] lines, at most one of them longer than a read (up to the
//! cap), so what waits stays bounded as on Unix. `recv`'s timeout is the channel's.
//!
//! The thread ends when the pipe does (the child exits, the client closes stdin) or, after the
//! pump is gone, at its next batch.

use std::{
    collections::VecDeque,
    io::Read,
    marker::PhantomData,
    sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender},
    thread,
    time::Duration,
};

use crate::stdout::{Next, Stdout};

/// The most lines handed over at once.
const BATCH_LINES: usize = 256;

/// A pipe read line by line by a thread of its own.
pub(crate) struct Incoming<P> {
    batches: Receiver<Vec<Next>>,
    pending: VecDeque<Next>,
    /// The thread reported the end (or a failure): later calls answer `Eof`.
    ended: bool,
    pipe: PhantomData<fn(P)>,
}

impl<P: Read + Send + 'static> Incoming<P> {
    /// Starts the reader thread, named after `label`.
    pub(crate) fn new(pipe: P, max: usize, label: &str) -> std::io::Result<Self> {
        let (sender, batches) = mpsc::sync_channel(1);
        let lines = Stdout::new(pipe, max);
        thread::Builder::new()
            .name(format!("stdio-read-{label}"))
            .spawn(move || read_lines(lines, &sender))?;
        Ok(Incoming {
            batches,
            pending: VecDeque::new(),
            ended: false,
            pipe: PhantomData,
        })
    }

    /// The next line, waiting at most `timeout` for more input.
    pub(crate) fn next(&mut self, timeout: Duration) -> Next {
        loop {
            if let Some(next) = self.pending.pop_front() {
                self.ended |= matches!(next, Next::Eof | Next::Failed(_));
                return next;
            }
            if self.ended {
                return Next::Eof;
            }
            match self.batches.recv_timeout(timeout) {
                Ok(batch) => self.pending.extend(batch),
                Err(RecvTimeoutError::Timeout) => return Next::Timeout,
                Err(RecvTimeoutError::Disconnected) => {
                    self.ended = true;
                    return Next::Failed(std::io::Error::other("the reader thread stopped"));
                }
            }
        }
    }

    /// None: nothing here the host could wait on; it reads the pump from a thread.
    pub(crate) fn readable_fd(&self) -> Option<i32> {
        None
    }
}

/// The reader thread: the lines of each read, in batches, until the pipe ends.
fn read_lines<P: Read>(mut lines: Stdout<P>, batches: &SyncSender<Vec<Next>>) {
    loop {
        let mut batch = Vec::new();
        while batch.len() < BATCH_LINES
            && let Some(next) = lines.buffered()
        {
            batch.push(next);
        }
        let mut end = false;
        if batch.is_empty() {
            match lines.fill() {
                Some(last) => {
                    batch.push(last);
                    end = true;
                }
                None => continue,
            }
        }
        if batches.send(batch).is_err() || end {
            return;
        }
    }
}
