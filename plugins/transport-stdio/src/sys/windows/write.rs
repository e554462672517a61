//! Windows: an anonymous pipe has no non-blocking mode worth the name (`PIPE_NOWAIT` is kept
//! for LAN Manager compatibility only), so `send` writes nothing itself: every message waits in
//! the backlog (the same 64 MiB bound, the same per-request refusal) for the helper, which
//! writes it out blocking, a piece at a time, without holding the lock.
//!
//! Closing drops the writer's handle; while the helper is inside a write to a child that does
//! not read, its own reference keeps the pipe open until the child reads or is terminated (which
//! the stop does after the grace).

use std::{
    io::Write,
    process::ChildStdin,
    sync::{Arc, Condvar, Mutex},
};

use crate::stdin::{State, lock};

/// The pipe as the writer holds it: shared with the helper, which writes without the lock.
pub(crate) type Pipe = Arc<ChildStdin>;

/// The most the helper writes in one piece.
const PIECE: usize = 1 << 20;

pub(crate) fn prepare(pipe: ChildStdin) -> Pipe {
    Arc::new(pipe)
}

/// Nothing is written without the helper: a write could block.
pub(crate) fn write_now(_pipe: &mut Pipe, _bytes: &[u8]) -> std::io::Result<usize> {
    Ok(0)
}

/// The helper: writes the backlog out in order as the child reads, then sleeps until there is
/// more. What it is writing stays counted in the backlog until it is written.
pub(crate) fn drain(shared: &(Mutex<State>, Condvar)) {
    let (mutex, wake) = shared;
    let mut state = lock(mutex);
    loop {
        while state.pipe.is_some() && state.backlog.is_empty() {
            state = wake.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        let Some(pipe) = state.pipe.clone() else {
            return;
        };
        let piece = state.backlog[..state.backlog.len().min(PIECE)].to_vec();
        drop(state);
        let written = (&*pipe).write_all(&piece);
        drop(pipe);
        state = lock(mutex);
        if state.pipe.is_none() {
            // Closed meanwhile: the backlog was dropped with it.
            return;
        }
        if written.is_err() {
            // The child is gone: the reader reports it; nothing more can be written.
            state.pipe = None;
            state.backlog.clear();
            return;
        }
        state.backlog.drain(..piece.len());
    }
}
