//! A plugin's blocking message pump, adapted into an rmcp transport.
//!
//! One thread per pump reads (`recv` with a short timeout, so the thread notices when the
//! transport is dropped) and one writes, so a slow writer never holds up the reader. Both run
//! outside the tokio runtime: a plugin's pump may block for as long as its I/O does.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc as std_mpsc,
    },
    time::Duration,
};

use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use tokio::sync::mpsc;

use crate::plugin::{Pump, Received};

/// How often the reader thread looks up from a blocking `recv`.
const POLL: Duration = Duration::from_millis(200);

/// What went wrong sending through a pump.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PumpError(String);

/// Why a pump's connection ended, once it has.
#[derive(Clone, Default)]
pub struct CloseReason(Arc<Mutex<Option<String>>>);

impl CloseReason {
    /// The reason, if the connection has ended.
    pub fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|reason| reason.clone())
    }

    fn set(&self, reason: String) {
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(reason);
        }
    }
}

/// An rmcp transport over a [`Pump`], for either role.
pub struct PumpTransport<R: ServiceRole> {
    pump: Pump,
    incoming: mpsc::Receiver<RxJsonRpcMessage<R>>,
    /// The writer thread's queue; `None` when the pump's `send` never blocks and is called here.
    outgoing: Option<std_mpsc::Sender<String>>,
    stop: Arc<AtomicBool>,
    cancel: tokio_util::sync::CancellationToken,
    reason: CloseReason,
}

/// What the reader makes of one line.
enum Parsed<R: ServiceRole> {
    /// A message for rmcp.
    Message(RxJsonRpcMessage<R>),
    /// Not a message; this JSON-RPC error answers it.
    Answer(String),
    /// Not a message, and nothing to answer.
    Skip,
}

/// Reads a pump's messages into rmcp, on a thread of its own or, when the plugin gives a
/// descriptor to wait on, as a task of the runtime.
struct Reader<R: ServiceRole> {
    pump: Pump,
    peer: String,
    on_garbage: OnGarbage,
    reason: CloseReason,
    role: std::marker::PhantomData<fn() -> R>,
}

impl<R: ServiceRole> Reader<R> {
    fn parse(&self, text: &str) -> Parsed<R> {
        match serde_json::from_str::<RxJsonRpcMessage<R>>(text) {
            Ok(message) => Parsed::Message(message),
            Err(error) => match self.on_garbage {
                OnGarbage::Skip => {
                    tracing::warn!(
                        peer = %self.peer,
                        "ignoring a message that is not valid JSON-RPC ({error}): {}",
                        excerpt(text)
                    );
                    Parsed::Skip
                }
                OnGarbage::Answer => {
                    tracing::debug!(peer = %self.peer, "refused a message: {error}");
                    garbage_answer(text, &error).map_or(Parsed::Skip, Parsed::Answer)
                }
            },
        }
    }

    fn answer(pump: &Pump, peer: &str, answer: &str) {
        if let Err(e) = pump.send(answer) {
            tracing::warn!(peer = %peer, "cannot answer a bad message: {e}");
        }
    }

    fn run_blocking(self, incoming: &mpsc::Sender<RxJsonRpcMessage<R>>, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            match self.pump.recv(POLL) {
                Ok(Received::Message(text)) => match self.parse(&text) {
                    Parsed::Message(message) => {
                        if incoming.blocking_send(message).is_err() {
                            return;
                        }
                    }
                    Parsed::Answer(answer) => Self::answer(&self.pump, &self.peer, &answer),
                    Parsed::Skip => {}
                },
                Ok(Received::Timeout) => {}
                Ok(Received::Closed(why)) => return self.reason.set(why),
                Err(error) => return self.reason.set(error.to_string()),
            }
        }
    }

    async fn run_async(
        self,
        fd: i32,
        incoming: mpsc::Sender<RxJsonRpcMessage<R>>,
        cancel: tokio_util::sync::CancellationToken,
    ) {
        // SAFETY: the descriptor stays open as long as the pump that gave it (the plugin's
        // contract for `readable_fd`), and this reader holds the pump until `ready` is dropped.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                PluginFd(fd),
                tokio::io::Interest::READABLE,
            )
        };
        let ready = match registered {
            Ok(ready) => ready,
            Err(error) => {
                // Not pollable after all: read on a thread instead.
                tracing::debug!(peer = %self.peer, "cannot wait on the pump's descriptor ({error})");
                let stop = AtomicBool::new(false);
                let _ =
                    tokio::task::spawn_blocking(move || self.run_blocking(&incoming, &stop)).await;
                return;
            }
        };
        loop {
            let mut guard = tokio::select! {
                guard = ready.readable() => match guard {
                    Ok(guard) => guard,
                    Err(error) => return self.reason.set(error.to_string()),
                },
                () = cancel.cancelled() => return,
            };
            // Everything that is there now; `recv` with a zero timeout does not wait.
            loop {
                match self.pump.recv(Duration::ZERO) {
                    Ok(Received::Message(text)) => match self.parse(&text) {
                        Parsed::Message(message) => {
                            if incoming.send(message).await.is_err() {
                                return;
                            }
                        }
                        Parsed::Answer(answer) => {
                            let (pump, peer) = (self.pump.clone(), self.peer.clone());
                            let _ = tokio::task::spawn_blocking(move || {
                                Self::answer(&pump, &peer, &answer)
                            })
                            .await;
                        }
                        Parsed::Skip => {}
                    },
                    Ok(Received::Timeout) => break,
                    Ok(Received::Closed(why)) => return self.reason.set(why),
                    Err(error) => return self.reason.set(error.to_string()),
                }
            }
            guard.clear_ready();
        }
    }
}

/// A plugin's descriptor, borrowed: the plugin owns and closes it, and keeps it open as long as
/// its pump, which the reader holds.
struct PluginFd(i32);

impl std::os::fd::AsRawFd for PluginFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0
    }
}

/// What to do with a line that does not parse as a message for this role.
#[derive(Clone, Copy)]
pub enum OnGarbage {
    /// Log it with the peer's name and skip it (a downstream server's stray output).
    Skip,
    /// Answer with the JSON-RPC error the spec asks for (-32700, -32600, -32602): an upstream
    /// client deserves to know.
    Answer,
}

impl<R: ServiceRole> PumpTransport<R> {
    /// Starts the reader and writer threads for `pump`. `peer` names the other side in logs.
    pub fn new(pump: Pump, peer: String, on_garbage: OnGarbage) -> Self {
        let (in_tx, incoming) = mpsc::channel(256);
        let stop = Arc::new(AtomicBool::new(false));
        let reason = CloseReason::default();
        let outgoing = if pump.sends_without_blocking() {
            None
        } else {
            let (outgoing, out_rx) = std_mpsc::channel::<String>();
            let (writer_pump, writer_reason, writer_peer) =
                (pump.clone(), reason.clone(), peer.clone());
            let spawned_writer = std::thread::Builder::new()
                .name(format!("pump-write-{peer}"))
                .spawn(move || {
                    while let Ok(message) = out_rx.recv() {
                        if let Err(error) = writer_pump.send(&message) {
                            fail(
                                &writer_pump,
                                &writer_reason,
                                &writer_peer,
                                &error.to_string(),
                            );
                            return;
                        }
                    }
                });
            if let Err(e) = spawned_writer {
                reason.set(format!("cannot start a writer thread: {e}"));
            }
            Some(outgoing)
        };

        let reader = Reader::<R> {
            pump: pump.clone(),
            peer,
            on_garbage,
            reason: reason.clone(),
            role: std::marker::PhantomData,
        };
        let cancel = tokio_util::sync::CancellationToken::new();
        match (pump.readable_fd(), tokio::runtime::Handle::try_current()) {
            // The plugin gives a descriptor: wait on it in the runtime, no thread in between.
            (Some(fd), Ok(runtime)) => {
                runtime.spawn(reader.run_async(fd, in_tx, cancel.clone()));
            }
            _ => {
                let reader_stop = stop.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("pump-read-{}", reader.peer))
                    .spawn(move || reader.run_blocking(&in_tx, &reader_stop));
                if let Err(e) = spawned {
                    reason.set(format!("cannot start a reader thread: {e}"));
                }
            }
        }
        PumpTransport {
            pump,
            incoming,
            outgoing,
            stop,
            cancel,
            reason,
        }
    }

    /// Why the connection ended, shared: it stays readable after the transport is gone.
    pub fn close_reason(&self) -> CloseReason {
        self.reason.clone()
    }
}

impl<R: ServiceRole> Drop for PumpTransport<R> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.cancel.cancel();
    }
}

/// Ends a connection whose sending failed: the reader then reports it closed and every request
/// in flight fails at once.
fn fail(pump: &Pump, reason: &CloseReason, peer: &str, error: &str) {
    tracing::warn!(peer = %peer, "sending failed: {error}");
    reason.set(error.to_owned());
    pump.close();
}

fn excerpt(text: &str) -> String {
    let mut short: String = text.chars().take(200).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

/// The JSON-RPC error answer for a message that did not parse, or `None` when the message was a
/// response or notification (which get no answer).
fn garbage_answer(text: &str, error: &serde_json::Error) -> Option<String> {
    let error_answer = |id: serde_json::Value, code: i64, message: String| {
        Some(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                .to_string(),
        )
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return error_answer(
            serde_json::Value::Null,
            -32700,
            format!("Parse error: {error}"),
        );
    };
    let id = value.get("id").cloned();
    let method = value.get("method").and_then(|m| m.as_str());
    let valid_id = id
        .as_ref()
        .is_some_and(|id| id.is_string() || id.is_number());
    match (
        value.get("jsonrpc").and_then(|v| v.as_str()),
        method,
        valid_id,
    ) {
        (Some("2.0"), Some(method), true) => error_answer(
            id.unwrap_or_default(),
            -32602,
            format!("Invalid params for `{method}`: {error}"),
        ),
        (Some("2.0"), Some(_), false) if id.is_none() => None,
        _ => error_answer(
            if valid_id {
                id.unwrap_or_default()
            } else {
                serde_json::Value::Null
            },
            -32600,
            "Invalid Request: not a JSON-RPC 2.0 request, response or notification".to_owned(),
        ),
    }
}

impl<R: ServiceRole> rmcp::transport::Transport<R> for PumpTransport<R> {
    type Error = PumpError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<R>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Written here when the pump never blocks, else queued for the writer thread (in
        // order); not waited for either way. A write that fails ends the connection, which the
        // reader reports (with the peer's exit status) and rmcp then fails every request in
        // flight: waiting for each write would add a thread hop to every message.
        let closed = |reason: &CloseReason| {
            PumpError(
                reason
                    .get()
                    .unwrap_or_else(|| "the connection is closed".to_owned()),
            )
        };
        let sent = serde_json::to_string(&item)
            .map_err(|e| PumpError(format!("cannot encode a message: {e}")))
            .and_then(|text| match &self.outgoing {
                Some(outgoing) => outgoing.send(text).map_err(|_| closed(&self.reason)),
                None => self.pump.send(&text).map_err(|error| {
                    fail(&self.pump, &self.reason, "a peer", &error.to_string());
                    closed(&self.reason)
                }),
            });
        std::future::ready(sent)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<R>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.stop.store(true, Ordering::Relaxed);
        self.cancel.cancel();
        let pump = self.pump.clone();
        let _ = tokio::task::spawn_blocking(move || pump.close()).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn answer(text: &str) -> serde_json::Value {
        let error = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        serde_json::from_str(&garbage_answer(text, &error).unwrap()).unwrap()
    }

    #[test]
    fn bad_messages_get_the_error_the_spec_asks_for() {
        assert_eq!(answer("{not json")["error"]["code"], -32700);
        assert_eq!(answer(r#"{"hello": 1}"#)["error"]["code"], -32600);
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":3}"#)["error"]["code"],
            -32602
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":3}"#)["id"],
            7
        );
        let error = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        assert!(
            garbage_answer(
                r#"{"jsonrpc":"2.0","method":"notifications/x","params":3}"#,
                &error
            )
            .is_none()
        );
    }
}
