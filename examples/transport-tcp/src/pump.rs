//! One TCP connection as a [`Pump`]: a reader thread feeds a bounded queue, `send` writes under
//! its own lock, so a `send` never waits for a `recv` and the reverse.

use std::{
    io::{BufRead, BufReader, Cursor, Read, Write},
    net::{Shutdown, TcpStream},
    sync::{
        Arc, Mutex, MutexGuard,
        atomic::{AtomicBool, Ordering},
        mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel},
    },
    thread,
    time::Duration,
};

use runbyte_plugin_api::{
    LogLevel, log,
    transport::{Pump, Received},
};

use crate::{
    lines::{Line, error_line, null_id_error, read_line},
    wakeable::Wakeable,
};

/// Messages read ahead of the host. When the host falls behind, the reader stops reading and
/// TCP's own flow control slows the peer down.
const QUEUE: usize = 256;

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A thread that panicked while holding one of these locks left plain data behind; go on.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Which end of the connection this process is; it decides what the reader does with an
/// oversized line and how a close is described.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The connector: the peer is a downstream server.
    Client,
    /// A listener session: the peer is an upstream client.
    Server,
}

enum Event {
    Message(String),
    Closed(String),
}

struct Shared {
    /// Who the peer is, for messages: `tcp://127.0.0.1:7000` or `client 127.0.0.1:51234`.
    label: String,
    writer: Mutex<TcpStream>,
    /// A handle for `shutdown` that needs no lock: closing must not wait for a blocked write.
    control: TcpStream,
    closed: AtomicBool,
    /// Set when the listener that accepted this session closes.
    listener_closed: Option<Arc<AtomicBool>>,
}

impl Shared {
    fn write_line(&self, message: &str) -> Result<(), String> {
        let mut line = Vec::with_capacity(message.len() + 1);
        // A raw line break can only be insignificant JSON whitespace (inside a JSON string it
        // must be escaped), so flattening it keeps the message and the framing intact.
        line.extend(message.bytes().map(|b| match b {
            b'\n' | b'\r' => b' ',
            b => b,
        }));
        line.push(b'\n');
        let mut writer = lock(&self.writer);
        writer
            .write_all(&line)
            .and_then(|()| writer.flush())
            .map_err(|e| format!("cannot write to {}: {e}", self.label))
    }
}

/// One connection, from either side.
pub(crate) struct LinePump {
    shared: Arc<Shared>,
    events: Mutex<Receiver<Event>>,
    ended: Mutex<Option<String>>,
}

impl LinePump {
    /// Starts the reader thread for `stream`, whose reading half is `reader` (which may already
    /// hold buffered bytes, such as the lines after an auth line). `on_end` runs when the
    /// reader stops.
    pub(crate) fn start(
        stream: TcpStream,
        reader: BufReader<TcpStream>,
        label: String,
        side: Side,
        max_line: usize,
        listener_closed: Option<Arc<AtomicBool>>,
        on_end: impl FnOnce() + Send + 'static,
    ) -> Result<LinePump, String> {
        let control = stream
            .try_clone()
            .map_err(|e| format!("cannot share the connection to {label}: {e}"))?;
        let shared = Arc::new(Shared {
            label,
            writer: Mutex::new(stream),
            control,
            closed: AtomicBool::new(false),
            listener_closed,
        });
        let (sender, events) = sync_channel(QUEUE);
        let reading = shared.clone();
        // What `reader` already holds, then the rest of the connection, read so that a close
        // from another thread ends the reading on every OS (see [`Wakeable`]).
        let held = reader.buffer().to_vec();
        let watched = shared.clone();
        let rest = Wakeable {
            stream: reader.into_inner(),
            stopped: move || {
                watched.closed.load(Ordering::SeqCst)
                    || watched
                        .listener_closed
                        .as_ref()
                        .is_some_and(|closed| closed.load(Ordering::SeqCst))
            },
        };
        let reader = BufReader::with_capacity(64 * 1024, Cursor::new(held).chain(rest));
        thread::Builder::new()
            .name("tcp-reader".to_owned())
            .spawn(move || {
                let reason = read_loop(reader, &reading, side, max_line, &sender);
                on_end();
                push(&sender, &reading, Event::Closed(reason));
            })
            .map_err(|e| format!("cannot start a reader thread: {e}"))?;
        Ok(LinePump {
            shared,
            events: Mutex::new(events),
            ended: Mutex::new(None),
        })
    }

    fn shutdown(&self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        // Wakes the reader (its read returns 0) and tells the peer.
        let _ = self.shared.control.shutdown(Shutdown::Both);
    }
}

/// Queues `event`, waiting while the queue is full, unless the pump was closed meanwhile.
/// Whether the event was queued.
fn push(sender: &SyncSender<Event>, shared: &Shared, mut event: Event) -> bool {
    loop {
        match sender.try_send(event) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(back)) => {
                if shared.closed.load(Ordering::SeqCst) {
                    return false;
                }
                event = back;
                thread::sleep(Duration::from_millis(2));
            }
        }
    }
}

/// Reads lines until the connection ends; returns why it ended.
fn read_loop(
    mut reader: impl BufRead,
    shared: &Shared,
    side: Side,
    max_line: usize,
    sender: &SyncSender<Event>,
) -> String {
    let label = &shared.label;
    let mut last_word = None;
    loop {
        match read_line(&mut reader, max_line) {
            Line::Text(line) if line.trim().is_empty() => {}
            Line::Text(line) => {
                if side == Side::Client {
                    last_word = null_id_error(&line);
                }
                if !push(sender, shared, Event::Message(line)) {
                    return "closed".to_owned();
                }
            }
            Line::TooLong(length) => {
                log(
                    LogLevel::Warn,
                    &format!("{label}: dropped a {length}-byte line, over the {max_line}-byte cap"),
                );
                if side == Side::Server {
                    let reply = error_line(
                        -32600,
                        &format!("request line of {length} bytes is over the {max_line}-byte cap"),
                    );
                    let _ = shared.write_line(&reply);
                }
            }
            Line::Partial(length) => {
                log(
                    LogLevel::Debug,
                    &format!("{label}: dropped {length} bytes of a line cut short"),
                );
                return ended(shared, side, last_word);
            }
            Line::Eof => return ended(shared, side, last_word),
            Line::Failed(_) if shared.closed.load(Ordering::SeqCst) => return "closed".to_owned(),
            Line::Failed(e) => return format!("reading from {label} failed: {e}"),
        }
    }
}

fn ended(shared: &Shared, side: Side, last_word: Option<String>) -> String {
    if shared.closed.load(Ordering::SeqCst) {
        return "closed".to_owned();
    }
    if let Some(stopped) = &shared.listener_closed
        && stopped.load(Ordering::SeqCst)
    {
        return "closed: the tcp listener stopped".to_owned();
    }
    let label = &shared.label;
    let mut reason = match side {
        Side::Client => format!("{label} closed the connection"),
        Side::Server => format!("{label} disconnected"),
    };
    if let Some(word) = last_word {
        reason.push_str(&format!(" after: {word}"));
    }
    reason
}

impl Pump for LinePump {
    fn send(&self, message: &str) -> Result<(), String> {
        if let Some(reason) = lock(&self.ended).clone() {
            return Err(format!("{} is closed: {reason}", self.shared.label));
        }
        self.shared.write_line(message)
    }

    fn recv(&self, timeout: Duration) -> Received {
        if let Some(reason) = lock(&self.ended).clone() {
            return Received::Closed(reason);
        }
        let event = lock(&self.events).recv_timeout(timeout);
        match event {
            Ok(Event::Message(message)) => Received::Message(message),
            Ok(Event::Closed(reason)) => {
                let reason = lock(&self.ended).get_or_insert(reason).clone();
                Received::Closed(reason)
            }
            Err(RecvTimeoutError::Timeout) => Received::Timeout,
            Err(RecvTimeoutError::Disconnected) => {
                let reason = lock(&self.ended)
                    .get_or_insert_with(|| "closed".to_owned())
                    .clone();
                Received::Closed(reason)
            }
        }
    }

    fn close(&self) {
        lock(&self.ended).get_or_insert_with(|| "closed".to_owned());
        self.shutdown();
    }
}

impl Drop for LinePump {
    fn drop(&mut self) {
        self.shutdown();
    }
}
