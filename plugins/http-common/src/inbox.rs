//! The receiving half of a pump: what `Pump::recv` reads.
//!
//! Tasks on the private runtime push messages with an [`InboxSender`] (never blocking); the
//! host's thread waits on the [`Inbox`]. The two share no lock, so `send` on the pump never waits
//! behind a blocked `recv`.

use std::{
    sync::{
        Arc, Mutex,
        mpsc::{self, Receiver, RecvTimeoutError, Sender},
    },
    time::Duration,
};

use runbyte_plugin_api::transport::Received;

use crate::{lock, wake::Wake};

enum Item {
    Message(String),
    Closed(String),
}

/// Creates a connected sender and inbox.
pub fn inbox() -> (InboxSender, Inbox) {
    with_wake(None)
}

/// [`inbox`] whose [`Inbox::readable_fd`] is readable whenever `recv` may have something to
/// return, for pumps the host waits on in its event loop. Without a descriptor to spare (the
/// process is out of them) or on a system without one (Windows: see [`crate::wake`]), the inbox
/// has none and the host reads it from a thread instead.
pub fn inbox_with_fd() -> (InboxSender, Inbox) {
    let wake = match Wake::new() {
        Ok(wake) => Some(Arc::new(wake)),
        Err(error) if error.kind() == std::io::ErrorKind::Unsupported => None,
        Err(error) => {
            runbyte_plugin_api::log(
                runbyte_plugin_api::LogLevel::Warn,
                &format!("no descriptor to wait on a session ({error}); it will cost a thread"),
            );
            None
        }
    };
    with_wake(wake)
}

fn with_wake(readable: Option<Arc<Wake>>) -> (InboxSender, Inbox) {
    let (tx, rx) = mpsc::channel();
    let ended = Arc::new(Mutex::new(None));
    (
        InboxSender {
            tx: tx.clone(),
            ended: ended.clone(),
            readable: readable.clone(),
        },
        Inbox {
            rx: Mutex::new(rx),
            wake: tx,
            closed: Mutex::new(None),
            ended,
            readable,
        },
    )
}

/// Pushes messages into an [`Inbox`]; cheap to clone, never blocks.
#[derive(Clone)]
pub struct InboxSender {
    tx: Sender<Item>,
    ended: Arc<Mutex<Option<String>>>,
    readable: Option<Arc<Wake>>,
}

impl InboxSender {
    /// Queues one message; `false` when the inbox is gone.
    pub fn message(&self, message: String) -> bool {
        let sent = self.tx.send(Item::Message(message)).is_ok();
        self.signal();
        sent
    }

    /// After queueing, never before: see [`crate::wake`].
    fn signal(&self) {
        if let Some(readable) = &self.readable {
            readable.signal();
        }
    }

    /// Records that the connection is ending and why, before the last messages (the failed
    /// requests' answers) are queued and [`close`](Self::close) follows: a host that reads those
    /// answers and closes at once then still learns why the connection ended.
    pub fn ending(&self, reason: &str) {
        lock(&self.ended).get_or_insert_with(|| reason.to_owned());
    }

    /// Ends the connection: `recv` answers `Closed(reason)` once the messages queued before it
    /// have been read. The first reason given wins.
    pub fn close(&self, reason: impl Into<String>) {
        let reason = reason.into();
        lock(&self.ended).get_or_insert_with(|| reason.clone());
        let _ = self.tx.send(Item::Closed(reason));
        self.signal();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        lock(&self.ended).is_some()
    }
}

/// What `Pump::recv` reads.
pub struct Inbox {
    rx: Mutex<Receiver<Item>>,
    /// Wakes a `recv` blocked in `recv_timeout` when the pump is closed from another thread.
    wake: Sender<Item>,
    closed: Mutex<Option<String>>,
    /// Set as soon as the connection ends, before `recv` has read what was queued ahead of the
    /// end: what `send` checks.
    ended: Arc<Mutex<Option<String>>>,
    readable: Option<Arc<Wake>>,
}

impl Inbox {
    /// Waits up to `timeout` for the next message.
    pub fn recv(&self, timeout: Duration) -> Received {
        if let Some(reason) = self.closed_reason() {
            return Received::Closed(reason);
        }
        // Before looking at the queue, never after: see [`crate::wake`].
        if let Some(readable) = &self.readable {
            readable.drain();
        }
        let item = lock(&self.rx).recv_timeout(timeout);
        match item {
            Ok(Item::Message(message)) => match self.closed_reason() {
                // Closed by the host while this thread waited: nothing more is delivered.
                Some(reason) => Received::Closed(reason),
                None => Received::Message(message),
            },
            Ok(Item::Closed(reason)) => Received::Closed(self.set_closed(reason)),
            Err(RecvTimeoutError::Timeout) => Received::Timeout,
            Err(RecvTimeoutError::Disconnected) => {
                Received::Closed(self.set_closed("connection ended".to_owned()))
            }
        }
    }

    /// A descriptor that is readable whenever `recv` may have something to return (made by
    /// [`inbox_with_fd`]); valid as long as the inbox.
    pub fn readable_fd(&self) -> Option<i32> {
        self.readable.as_ref().map(|readable| readable.fd())
    }

    /// Closes at once: queued messages are dropped and every later `recv` answers `Closed`.
    /// A connection that had already ended (a 401, the server gone) keeps that reason: the
    /// host closing it after reading the failed answer must not hide why it failed.
    pub fn close_now(&self, reason: &str) {
        let reason = lock(&self.ended)
            .get_or_insert_with(|| reason.to_owned())
            .clone();
        self.set_closed(reason.clone());
        let _ = self.wake.send(Item::Closed(reason));
        if let Some(readable) = &self.readable {
            readable.signal();
        }
    }

    /// Why `recv` answers `Closed`, once it does.
    pub fn closed_reason(&self) -> Option<String> {
        lock(&self.closed).clone()
    }

    /// Why the connection ended, as soon as it has (messages may still be queued before the
    /// end): a pump's `send` refuses with this.
    pub fn ended(&self) -> Option<String> {
        lock(&self.ended).clone()
    }

    fn set_closed(&self, reason: String) -> String {
        lock(&self.closed).get_or_insert(reason).clone()
    }
}
