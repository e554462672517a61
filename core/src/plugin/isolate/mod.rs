//! Isolated plugins: a plugin marked `isolate = true` runs in a child `runbyte plugin-host`
//! process that makes the same calls over a pipe. A plugin that crashes takes down only that
//! process: its calls in flight fail with an error naming it, and the next call starts it again.
//!
//! - `protocol`: the messages, typed and versioned; no I/O.
//! - `parent`: the host's side, [`IsolatedHost`]: the child's process and the calls in flight.
//! - `calls`: [`IsolatedHost`] behind the same `*Calls` traits as a plugin loaded in process.
//! - `child`: the `runbyte plugin-host` side, and how it uses its threads.

mod calls;
mod child;
mod parent;
mod protocol;
#[cfg(test)]
mod tests;

pub(crate) use child::serve;
pub(super) use parent::IsolatedHost;

/// A lock that a panic elsewhere does not poison for good: the state behind these locks is left
/// whole by every holder.
fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
