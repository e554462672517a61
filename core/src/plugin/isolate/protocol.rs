//! What the host and an isolated plugin's child (`runbyte plugin-host <path> <kind>`) say to each
//! other: one line of JSON per message over the child's stdin and stdout. Like the sandbox's
//! worker channel (`sandbox/protocol.rs`), the child greets first with its protocol version, and a
//! host of another version refuses it before sending anything.
//!
//! ```text
//! child → host   {"t":"ready","version":1}                                     once, at start
//! host → child   {"t":"open","kind":"policy","config":{…}}
//! child → host   {"t":"opened"}   or   {"t":"failed","error":{"kind":"failed","message":"…"}}
//! host → child   {"t":"call","id":7,"op":{"name":"check_call","call":{…}}}
//! child → host   {"t":"reply","id":7,"result":{"Ok":{"json":{"allow":true}}}}
//! host → child   {"t":"call","id":8,"op":{"name":"pump_recv","pump":3,"timeout_ms":1000}}
//! child → host   {"t":"reply","id":8,"result":{"Ok":{"received":{"message":"…"}}}}
//! child → host   {"t":"reply","id":9,"result":{"Err":{"kind":"panicked","message":"…"}}}
//! ```
//!
//! Replies come in any order (calls run concurrently in the child); `id` pairs them. The child
//! exits when its stdin closes. Nothing here does I/O.

use std::time::Duration;

use runbyte_plugin_api::PluginKind;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bumped whenever a message changes shape; a child of another version is refused. The greeting
/// (`{"t":"ready","version":…}`) itself must never change, so that any two versions can tell.
pub(crate) const PROTOCOL_VERSION: u32 = 1;

/// The longest a child's `pump_recv` or `listener_accept` waits per call; the host asks again.
/// Kept short so that a call never comes near the host's own deadline for an answer.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(1);

/// Host to child.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum ToChild {
    /// Open the plugin file the child was started for, as this kind, with this configuration.
    /// Sent once, after the greeting; nothing else comes before it.
    Open { kind: Kind, config: Value },
    /// One call; answered by a [`FromChild::Reply`] with the same id.
    Call { id: u64, op: Op },
}

/// Child to host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum FromChild {
    /// The first line a child writes, before reading anything.
    Ready { version: u32 },
    /// The plugin opened: calls may come.
    Opened,
    /// The plugin would not open; the child exits.
    Failed { error: RemoteError },
    Reply {
        id: u64,
        result: Result<Answer, RemoteError>,
    },
}

/// The plugin kinds, as the wire spells them (`PluginKind` is an ABI type and has no serde form).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Kind {
    Transport,
    Codegen,
    Policy,
}

impl From<PluginKind> for Kind {
    fn from(kind: PluginKind) -> Kind {
        match kind {
            PluginKind::Transport => Kind::Transport,
            PluginKind::Codegen => Kind::Codegen,
            PluginKind::Policy => Kind::Policy,
        }
    }
}

impl From<Kind> for PluginKind {
    fn from(kind: Kind) -> PluginKind {
        match kind {
            Kind::Transport => PluginKind::Transport,
            Kind::Codegen => PluginKind::Codegen,
            Kind::Policy => PluginKind::Policy,
        }
    }
}

/// Every call a plugin of some kind answers. The JSON values are the plugin's own requests and
/// answers (see `runbyte_plugin_api`), carried as they are. Pumps and listeners live in the child;
/// the host names them by the ids `connect`, `listen` and `listener_accept` gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub(crate) enum Op {
    /// Codegen: one `generate` request.
    Generate {
        request: Value,
    },
    /// Policy: the limits for one execution.
    Limits {
        context: Value,
    },
    /// Policy: the verdict on one tool call.
    CheckCall {
        call: Value,
    },
    /// Transport: a client connection; answered with [`Answer::Pump`].
    Connect {
        target: Value,
    },
    /// Transport: a listener; answered with [`Answer::Listener`].
    Listen {
        options: Value,
    },
    PumpSend {
        pump: u64,
        message: String,
    },
    /// Waits up to `timeout_ms` (at most [`MAX_WAIT`]); answered with [`Answer::Received`].
    PumpRecv {
        pump: u64,
        timeout_ms: u64,
    },
    PumpClose {
        pump: u64,
    },
    /// Waits up to `timeout_ms` (at most [`MAX_WAIT`]); answered with [`Answer::Accepted`].
    ListenerAccept {
        listener: u64,
        timeout_ms: u64,
    },
    ListenerAddress {
        listener: u64,
    },
    ListenerClose {
        listener: u64,
    },
}

impl Op {
    /// Its name, for messages.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Op::Generate { .. } => "generate",
            Op::Limits { .. } => "limits",
            Op::CheckCall { .. } => "check_call",
            Op::Connect { .. } => "connect",
            Op::Listen { .. } => "listen",
            Op::PumpSend { .. } => "pump_send",
            Op::PumpRecv { .. } => "pump_recv",
            Op::PumpClose { .. } => "pump_close",
            Op::ListenerAccept { .. } => "listener_accept",
            Op::ListenerAddress { .. } => "listener_address",
            Op::ListenerClose { .. } => "listener_close",
        }
    }
}

/// A call's answer; which one each [`Op`] gets is written beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Answer {
    /// `generate`, `limits`, `check_call`: the plugin's answer.
    Json(Value),
    /// The id of a pump opened in the child.
    Pump(u64),
    /// The id of a listener opened in the child.
    Listener(u64),
    Received(Received),
    /// A session accepted, if one came within the wait.
    Accepted(Option<AcceptedPump>),
    Address(String),
    /// Sends and closes.
    Done,
}

/// What a pump's `recv` got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Received {
    Message(String),
    Timeout,
    Closed(String),
}

/// An accepted upstream session: its pump's id in the child, and who it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AcceptedPump {
    pub pump: u64,
    pub peer: String,
    pub session: String,
}

/// A failure in the child, as it crosses the pipe: the message already names the plugin and the
/// call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RemoteError {
    pub kind: RemoteErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RemoteErrorKind {
    /// The plugin reported an error, answered with something unusable, or was asked for what it
    /// does not have.
    Failed,
    /// The plugin panicked; the child caught it.
    Panicked,
}
