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
    outgoing: std_mpsc::Sender<String>,
    stop: Arc<AtomicBool>,
    reason: CloseReason,
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
        let (outgoing, out_rx) = std_mpsc::channel::<String>();
        let stop = Arc::new(AtomicBool::new(false));
        let reason = CloseReason::default();

        let (writer_pump, writer_reason, writer_peer) =
            (pump.clone(), reason.clone(), peer.clone());
        let spawned_writer = std::thread::Builder::new()
            .name(format!("pump-write-{peer}"))
            .spawn(move || {
                while let Ok(message) = out_rx.recv() {
                    if let Err(error) = writer_pump.send(&message) {
                        // The connection is unusable: end it, so the reader reports it closed
                        // and every request in flight fails at once.
                        tracing::warn!(peer = %writer_peer, "sending failed: {error}");
                        writer_reason.set(error.to_string());
                        writer_pump.close();
                        return;
                    }
                }
            });
        if let Err(e) = spawned_writer {
            reason.set(format!("cannot start a writer thread: {e}"));
        }

        let (reader_pump, reader_stop, reader_reason) =
            (pump.clone(), stop.clone(), reason.clone());
        let answer_pump = pump.clone();
        let spawned_reader = std::thread::Builder::new().name(format!("pump-read-{peer}")).spawn(move || {
            while !reader_stop.load(Ordering::Relaxed) {
                match reader_pump.recv(POLL) {
                    Ok(Received::Message(text)) => match serde_json::from_str::<RxJsonRpcMessage<R>>(&text) {
                        Ok(message) => {
                            if in_tx.blocking_send(message).is_err() {
                                return;
                            }
                        }
                        Err(error) => match on_garbage {
                            OnGarbage::Skip => tracing::warn!(
                                peer = %peer,
                                "ignoring a message that is not valid JSON-RPC ({error}): {}",
                                excerpt(&text)
                            ),
                            OnGarbage::Answer => {
                                let answer = garbage_answer(&text, &error);
                                tracing::debug!(peer = %peer, "refused a message: {error}");
                                if let Some(answer) = answer
                                    && let Err(e) = answer_pump.send(&answer)
                                {
                                    tracing::warn!(peer = %peer, "cannot answer a bad message: {e}");
                                }
                            }
                        },
                    },
                    Ok(Received::Timeout) => {}
                    Ok(Received::Closed(why)) => {
                        reader_reason.set(why);
                        return;
                    }
                    Err(error) => {
                        reader_reason.set(error.to_string());
                        return;
                    }
                }
            }
        });
        if let Err(e) = spawned_reader {
            reason.set(format!("cannot start a reader thread: {e}"));
        }
        PumpTransport {
            pump,
            incoming,
            outgoing,
            stop,
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
    }
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
        // Queued for the writer thread, in order; not waited for. A write that fails ends the
        // connection, which the reader reports (with the peer's exit status) and rmcp then fails
        // every request in flight: waiting here for each write would add a thread hop to every
        // message.
        let queued = serde_json::to_string(&item)
            .map_err(|e| PumpError(format!("cannot encode a message: {e}")))
            .and_then(|text| {
                self.outgoing.send(text).map_err(|_| {
                    PumpError(
                        self.reason
                            .get()
                            .unwrap_or_else(|| "the connection is closed".to_owned()),
                    )
                })
            });
        std::future::ready(queued)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<R>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.stop.store(true, Ordering::Relaxed);
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
