//! The host's messages to an engine on a host thread: a queue the engine thread parks on.
//!
//! A tool call's reply is the message an engine waits for most, once per call. A
//! `std::sync::mpsc` channel made the waiting engine register with the channel's waker (a lock
//! the host's send takes too) before it slept: on a busy machine the two met there, and the
//! engine slept twice for one reply, a context switch more per call than the hand-off needs.
//! Here the engine looks at the queue and parks; the host pushes and unparks it, which costs no
//! system call unless the engine is asleep.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard, mpsc::RecvTimeoutError},
    thread::{self, Thread},
    time::{Duration, Instant},
};

struct Shared<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    queue: VecDeque<T>,
    /// Woken without a message (see [`Receiver::nudger`]), not yet seen.
    nudged: bool,
    /// The thread that waits, once it has waited: the one to unpark.
    waiter: Option<Thread>,
    sender_gone: bool,
    receiver_gone: bool,
}

impl<T> Shared<T> {
    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Changes the state, then wakes the thread that waits, if one does.
    fn wake_after<R>(&self, change: impl FnOnce(&mut State<T>) -> R) -> R {
        let (changed, waiter) = {
            let mut state = self.state();
            let changed = change(&mut state);
            (changed, state.waiter.clone())
        };
        if let Some(waiter) = waiter {
            waiter.unpark();
        }
        changed
    }

    /// What there is for the reader now (nudges included if `nudges`); else the reading thread
    /// becomes the one to wake, and `None`.
    fn look(&self, nudges: bool) -> Option<Result<Woke<T>, RecvTimeoutError>> {
        let mut state = self.state();
        if let Some(message) = state.queue.pop_front() {
            return Some(Ok(Woke::Message(message)));
        }
        if nudges && std::mem::take(&mut state.nudged) {
            return Some(Ok(Woke::Nudged));
        }
        if state.sender_gone {
            return Some(Err(RecvTimeoutError::Disconnected));
        }
        // A thread kept between executions waits on each execution's mailbox in turn: this
        // one's waiter is whichever thread reads it.
        let current = thread::current();
        if state.waiter.as_ref().is_none_or(|w| w.id() != current.id()) {
            state.waiter = Some(current);
        }
        None
    }

    /// Waits until `deadline` (`None`: for ever) for what [`Shared::look`] finds.
    fn wait(&self, deadline: Option<Instant>, nudges: bool) -> Result<Woke<T>, RecvTimeoutError> {
        loop {
            if let Some(found) = self.look(nudges) {
                return found;
            }
            // Parking returns at once if an unpark came since the look (or, harmlessly, one left
            // over from an earlier wait): the queue is looked at again either way.
            match deadline {
                None => thread::park(),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(RecvTimeoutError::Timeout);
                    }
                    thread::park_timeout(left);
                }
            }
        }
    }
}

/// The host's end.
pub(crate) struct Sender<T>(Arc<Shared<T>>);

/// The engine's end: read by one thread at a time.
pub(crate) struct Receiver<T>(Arc<Shared<T>>);

/// A mailbox's two ends.
pub(crate) fn mailbox<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            queue: VecDeque::new(),
            nudged: false,
            waiter: None,
            sender_gone: false,
            receiver_gone: false,
        }),
    });
    (Sender(shared.clone()), Receiver(shared))
}

impl<T> Sender<T> {
    /// Queues `message` and wakes the engine if it waits; the message back if the engine's end
    /// is gone.
    pub(crate) fn send(&self, message: T) -> Result<(), T> {
        self.0.wake_after(|state| {
            if state.receiver_gone {
                return Err(message);
            }
            state.queue.push_back(message);
            Ok(())
        })
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.0.wake_after(|state| state.sender_gone = true);
    }
}

impl<T> Receiver<T> {
    /// The next message, waiting at most `timeout` for it: `Disconnected` once the queue is
    /// empty and the host's end is gone.
    pub(crate) fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        let deadline = Instant::now().checked_add(timeout);
        match self.0.wait(deadline, false)? {
            Woke::Message(message) => Ok(message),
            // Not looked for: not given.
            Woke::Nudged => Err(RecvTimeoutError::Timeout),
        }
    }
}

/// What [`Receiver::wait`] saw.
#[derive(Debug, PartialEq)]
pub(crate) enum Woke<T> {
    Message(T),
    /// A nudge: something the engine waits on besides messages is ready.
    Nudged,
}

impl<T: Send + 'static> Receiver<T> {
    /// A waker for futures the engine thread polls itself: waking it nudges the engine out of
    /// [`Receiver::wait`].
    pub(crate) fn nudger(&self) -> std::task::Waker {
        std::task::Waker::from(Arc::new(Nudger(self.0.clone())))
    }

    /// The next message or nudge, waiting until `deadline` for either.
    pub(crate) fn wait(&self, deadline: Instant) -> Result<Woke<T>, RecvTimeoutError> {
        self.0.wait(Some(deadline), true)
    }
}

struct Nudger<T>(Arc<Shared<T>>);

impl<T: Send + 'static> std::task::Wake for Nudger<T> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.wake_after(|state| state.nudged = true);
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.receiver_gone = true;
        state.waiter = None;
        state.queue.clear();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn messages_arrive_in_order_and_wake_a_waiting_thread() {
        let (tx, rx) = mailbox();
        let reader = thread::spawn(move || {
            let mut got = Vec::new();
            while let Ok(n) = rx.recv_timeout(Duration::from_secs(60)) {
                got.push(n);
            }
            got
        });
        for n in 0..10_000u32 {
            tx.send(n).unwrap();
            if n % 1000 == 0 {
                // Let the reader fall asleep now and then, so that waking it is tested too.
                thread::sleep(Duration::from_millis(2));
            }
        }
        drop(tx);
        assert_eq!(reader.join().unwrap(), (0..10_000).collect::<Vec<_>>());
    }

    #[test]
    fn a_wait_times_out_and_either_end_going_is_seen() {
        let (tx, rx) = mailbox::<u8>();
        let began = Instant::now();
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(30)),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(began.elapsed() >= Duration::from_millis(30));
        tx.send(1).unwrap();
        tx.send(2).unwrap();
        assert_eq!(rx.recv_timeout(Duration::ZERO), Ok(1));
        // What was sent before the host's end went is still read; then the end is seen.
        drop(tx);
        assert_eq!(rx.recv_timeout(Duration::MAX), Ok(2));
        assert_eq!(
            rx.recv_timeout(Duration::MAX),
            Err(RecvTimeoutError::Disconnected)
        );

        let (tx, rx) = mailbox::<u8>();
        drop(rx);
        assert_eq!(tx.send(3), Err(3));
    }

    #[test]
    fn a_nudge_wakes_a_wait_once_and_messages_come_first() {
        let (tx, rx) = mailbox::<u8>();
        let nudger = rx.nudger();
        let soon = || Instant::now() + Duration::from_millis(30);
        assert_eq!(rx.wait(soon()), Err(RecvTimeoutError::Timeout));
        nudger.wake_by_ref();
        tx.send(1).unwrap();
        assert_eq!(rx.wait(soon()), Ok(Woke::Message(1)));
        assert_eq!(rx.wait(soon()), Ok(Woke::Nudged));
        assert_eq!(rx.wait(soon()), Err(RecvTimeoutError::Timeout));
        // A nudge from another thread wakes a waiting one.
        let waker = nudger.clone();
        let nudging = thread::spawn(move || {
            thread::sleep(Duration::from_millis(20));
            waker.wake();
        });
        let began = Instant::now();
        assert_eq!(
            rx.wait(Instant::now() + Duration::from_secs(60)),
            Ok(Woke::Nudged)
        );
        assert!(began.elapsed() < Duration::from_secs(50));
        nudging.join().unwrap();
    }
}
