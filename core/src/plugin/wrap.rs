//! Ordinary Rust types over the raw ABI trait objects: `Result`, `String`, `serde_json::Value`.

use std::{sync::Arc, time::Duration};

use abi_stable::std_types::{RResult, RStr};
use runbyte_plugin_api::{
    ErrorKind, PluginKind,
    codegen::RawCodegenBox,
    policy::RawPolicyBox,
    transport::{RawListenerBox, RawPumpBox, RawReceived, RawTransportBox},
};
use serde_json::Value;

use super::{CallError, PluginInfo};

fn call_error(
    info: &PluginInfo,
    kind: PluginKind,
    entry: &'static str,
    error: runbyte_plugin_api::PluginError,
) -> CallError {
    let message = error.message.into_string();
    match error.kind {
        ErrorKind::Panicked => CallError::Panicked {
            plugin: info.name.clone(),
            entry,
            message,
        },
        ErrorKind::Failed => CallError::Failed {
            kind,
            plugin: info.name.clone(),
            entry,
            message,
        },
    }
}

fn lift<T>(
    info: &PluginInfo,
    kind: PluginKind,
    entry: &'static str,
    result: RResult<T, runbyte_plugin_api::PluginError>,
) -> Result<T, CallError> {
    result
        .into_result()
        .map_err(|e| call_error(info, kind, entry, e))
}

fn parse_answer(
    info: &PluginInfo,
    kind: PluginKind,
    entry: &'static str,
    text: &str,
) -> Result<Value, CallError> {
    serde_json::from_str(text).map_err(|e| CallError::BadAnswer {
        kind,
        plugin: info.name.clone(),
        entry,
        message: e.to_string(),
    })
}

/// An opened transport plugin.
#[derive(Clone)]
pub struct TransportPlugin {
    info: Arc<PluginInfo>,
    raw: Arc<RawTransportBox>,
}

impl TransportPlugin {
    pub(super) fn new(info: PluginInfo, raw: RawTransportBox) -> Self {
        TransportPlugin {
            info: Arc::new(info),
            raw: Arc::new(raw),
        }
    }

    /// What the plugin file says it is.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// Opens a client connection to a downstream server; `target` is described in
    /// `runbyte_plugin_api::transport::Transport::connect`. Blocking: call it off the runtime.
    pub fn connect(&self, target: &Value) -> Result<Pump, CallError> {
        let target = target.to_string();
        let raw = lift(
            &self.info,
            PluginKind::Transport,
            "connect",
            self.raw.connect(RStr::from(target.as_str())),
        )?;
        Ok(Pump {
            info: self.info.clone(),
            raw: Arc::new(raw),
        })
    }

    /// Starts accepting upstream clients; `options` as in `Transport::listen`.
    pub fn listen(&self, options: &Value) -> Result<Listener, CallError> {
        let options = options.to_string();
        let raw = lift(
            &self.info,
            PluginKind::Transport,
            "listen",
            self.raw.listen(RStr::from(options.as_str())),
        )?;
        Ok(Listener {
            info: self.info.clone(),
            raw: Arc::new(raw),
        })
    }
}

/// What [`Pump::recv`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// One JSON-RPC message as text.
    Message(String),
    /// Nothing yet.
    Timeout,
    /// The connection is over, and why.
    Closed(String),
}

/// One connection's message pump. Cheap to clone; all clones are the same connection.
#[derive(Clone)]
pub struct Pump {
    info: Arc<PluginInfo>,
    raw: Arc<RawPumpBox>,
}

impl Pump {
    /// The transport plugin behind this pump.
    pub fn plugin(&self) -> &str {
        &self.info.name
    }

    /// Sends one message. Blocking.
    pub fn send(&self, message: &str) -> Result<(), CallError> {
        lift(
            &self.info,
            PluginKind::Transport,
            "send",
            self.raw.send(RStr::from(message)),
        )
    }

    /// Waits up to `timeout` for the next message. Blocking.
    pub fn recv(&self, timeout: Duration) -> Result<Received, CallError> {
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let received = lift(
            &self.info,
            PluginKind::Transport,
            "recv",
            self.raw.recv(millis),
        )?;
        Ok(match received {
            RawReceived::Message(message) => Received::Message(message.into_string()),
            RawReceived::Timeout => Received::Timeout,
            RawReceived::Closed(reason) => Received::Closed(reason.into_string()),
        })
    }

    /// Ends the connection.
    pub fn close(&self) {
        if let Err(error) = lift(&self.info, PluginKind::Transport, "close", self.raw.close()) {
            tracing::warn!("{error}");
        }
    }
}

/// One accepted upstream client session.
pub struct Accepted {
    /// Its messages.
    pub pump: Pump,
    /// Who connected.
    pub peer: String,
    /// The transport's id for the session.
    pub session: String,
}

/// An upstream listener.
#[derive(Clone)]
pub struct Listener {
    info: Arc<PluginInfo>,
    raw: Arc<RawListenerBox>,
}

impl Listener {
    /// Waits up to `timeout` for a client session. Blocking.
    pub fn accept(&self, timeout: Duration) -> Result<Option<Accepted>, CallError> {
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let accepted = lift(
            &self.info,
            PluginKind::Transport,
            "accept",
            self.raw.accept(millis),
        )?;
        Ok(accepted.into_option().map(|accepted| Accepted {
            pump: Pump {
                info: self.info.clone(),
                raw: Arc::new(accepted.pump),
            },
            peer: accepted.peer.into_string(),
            session: accepted.session.into_string(),
        }))
    }

    /// Where clients reach it.
    pub fn address(&self) -> String {
        lift(
            &self.info,
            PluginKind::Transport,
            "address",
            self.raw.address(),
        )
        .map(|a| a.into_string())
        .unwrap_or_else(|e| format!("<unknown: {e}>"))
    }

    /// Stops accepting and ends every session.
    pub fn close(&self) {
        if let Err(error) = lift(&self.info, PluginKind::Transport, "close", self.raw.close()) {
            tracing::warn!("{error}");
        }
    }
}

/// An opened codegen dialect.
#[derive(Clone)]
pub struct CodegenPlugin {
    info: Arc<PluginInfo>,
    raw: Arc<RawCodegenBox>,
}

impl CodegenPlugin {
    pub(super) fn new(info: PluginInfo, raw: RawCodegenBox) -> Self {
        CodegenPlugin {
            info: Arc::new(info),
            raw: Arc::new(raw),
        }
    }

    /// What the plugin file says it is.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// One `generate` request (see `runbyte_plugin_api::codegen`).
    pub fn generate(&self, request: &Value) -> Result<Value, CallError> {
        let request = request.to_string();
        let answer = lift(
            &self.info,
            PluginKind::Codegen,
            "generate",
            self.raw.generate(RStr::from(request.as_str())),
        )?;
        parse_answer(&self.info, PluginKind::Codegen, "generate", &answer)
    }
}

/// An opened sandbox policy.
#[derive(Clone)]
pub struct PolicyPlugin {
    info: Arc<PluginInfo>,
    raw: Arc<RawPolicyBox>,
}

impl PolicyPlugin {
    pub(super) fn new(info: PluginInfo, raw: RawPolicyBox) -> Self {
        PolicyPlugin {
            info: Arc::new(info),
            raw: Arc::new(raw),
        }
    }

    /// What the plugin file says it is.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// The limits for one execution (see `runbyte_plugin_api::policy`).
    pub fn limits(&self, context: &Value) -> Result<Value, CallError> {
        let context = context.to_string();
        let answer = lift(
            &self.info,
            PluginKind::Policy,
            "limits",
            self.raw.limits(RStr::from(context.as_str())),
        )?;
        parse_answer(&self.info, PluginKind::Policy, "limits", &answer)
    }

    /// The verdict on one tool call.
    pub fn check_call(&self, call: &Value) -> Result<Value, CallError> {
        let call = call.to_string();
        let answer = lift(
            &self.info,
            PluginKind::Policy,
            "check_call",
            self.raw.check_call(RStr::from(call.as_str())),
        )?;
        parse_answer(&self.info, PluginKind::Policy, "check_call", &answer)
    }
}
