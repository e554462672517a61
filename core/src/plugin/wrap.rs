//! Ordinary Rust types over the raw ABI trait objects: `Result`, `String`, `serde_json::Value`.

use std::{sync::Arc, time::Duration};

use abi_stable::std_types::{RResult, RStr};
use runbyte_plugin_api::{
    ErrorKind, PluginKind,
    codegen::RawCodegenBox,
    policy::RawPolicyBox,
    transport::{RawListenerBox, RawPumpBox, RawReceived, RawTransportBox},
};
use serde_json::{Value, json};

use super::{CallError, PluginInfo, isolate::IsolatedHost};

/// Where a plugin's code runs: loaded into this process, or in a child `runbyte plugin-host`.
enum Backend<T> {
    Local(Arc<T>),
    Isolated(Arc<IsolatedHost>),
}

impl<T> Clone for Backend<T> {
    fn clone(&self) -> Self {
        match self {
            Backend::Local(raw) => Backend::Local(raw.clone()),
            Backend::Isolated(host) => Backend::Isolated(host.clone()),
        }
    }
}

fn millis(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)
}

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

/// A pump or listener: in this process, or an id in an isolated plugin's child (of one
/// generation: a restarted child does not have it).
enum Remote<T> {
    Local(Arc<T>),
    Isolated {
        host: Arc<IsolatedHost>,
        id: u64,
        generation: u64,
    },
}

impl<T> Clone for Remote<T> {
    fn clone(&self) -> Self {
        match self {
            Remote::Local(raw) => Remote::Local(raw.clone()),
            Remote::Isolated {
                host,
                id,
                generation,
            } => Remote::Isolated {
                host: host.clone(),
                id: *id,
                generation: *generation,
            },
        }
    }
}

/// An opened transport plugin.
#[derive(Clone)]
pub struct TransportPlugin {
    info: Arc<PluginInfo>,
    backend: Backend<RawTransportBox>,
}

impl TransportPlugin {
    pub(super) fn new(info: PluginInfo, raw: RawTransportBox) -> Self {
        TransportPlugin {
            info: Arc::new(info),
            backend: Backend::Local(Arc::new(raw)),
        }
    }

    pub(super) fn isolated(host: Arc<IsolatedHost>) -> Self {
        TransportPlugin {
            info: host.info().clone(),
            backend: Backend::Isolated(host),
        }
    }

    /// What the plugin file says it is.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// Opens a client connection to a downstream server; `target` is described in
    /// `runbyte_plugin_api::transport::Transport::connect`. Blocking: call it off the runtime.
    pub fn connect(&self, target: &Value) -> Result<Pump, CallError> {
        match &self.backend {
            Backend::Local(raw) => {
                let target = target.to_string();
                let answer = raw.connect(RStr::from(target.as_str()));
                let raw = lift(&self.info, PluginKind::Transport, "connect", answer)?;
                Ok(Pump {
                    info: self.info.clone(),
                    inner: Remote::Local(Arc::new(raw)),
                })
            }
            Backend::Isolated(host) => {
                let (id, generation) = host.request_handle("connect", target.clone(), "pump")?;
                let inner = Remote::Isolated {
                    host: host.clone(),
                    id,
                    generation,
                };
                Ok(Pump {
                    info: self.info.clone(),
                    inner,
                })
            }
        }
    }

    /// Starts accepting upstream clients; `options` as in `Transport::listen`.
    pub fn listen(&self, options: &Value) -> Result<Listener, CallError> {
        match &self.backend {
            Backend::Local(raw) => {
                let options = options.to_string();
                let answer = raw.listen(RStr::from(options.as_str()));
                let raw = lift(&self.info, PluginKind::Transport, "listen", answer)?;
                Ok(Listener {
                    info: self.info.clone(),
                    inner: Remote::Local(Arc::new(raw)),
                })
            }
            Backend::Isolated(host) => {
                let (id, generation) =
                    host.request_handle("listen", options.clone(), "listener")?;
                let inner = Remote::Isolated {
                    host: host.clone(),
                    id,
                    generation,
                };
                Ok(Listener {
                    info: self.info.clone(),
                    inner,
                })
            }
        }
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
    inner: Remote<RawPumpBox>,
}

impl Pump {
    /// The transport plugin behind this pump.
    pub fn plugin(&self) -> &str {
        &self.info.name
    }

    /// A descriptor that becomes readable when `recv` may have a message, if the plugin gives
    /// one (never for an isolated plugin: its descriptors live in another process).
    pub fn readable_fd(&self) -> Option<i32> {
        match &self.inner {
            Remote::Local(raw) => raw.readable_fd().into_option(),
            Remote::Isolated { .. } => None,
        }
    }

    /// Whether `send` returns at once, so it may be called from an async task (never for an
    /// isolated plugin: its sends cross a pipe to another process).
    pub fn sends_without_blocking(&self) -> bool {
        match &self.inner {
            Remote::Local(raw) => raw.sends_without_blocking(),
            Remote::Isolated { .. } => false,
        }
    }

    /// Sends one message. Blocking.
    pub fn send(&self, message: &str) -> Result<(), CallError> {
        match &self.inner {
            Remote::Local(raw) => lift(
                &self.info,
                PluginKind::Transport,
                "send",
                raw.send(RStr::from(message)),
            ),
            Remote::Isolated {
                host,
                id,
                generation,
            } => host
                .request_in(
                    *generation,
                    "pump.send",
                    json!({"pump": id, "message": message}),
                )
                .map(drop),
        }
    }

    /// Waits up to `timeout` for the next message. Blocking.
    pub fn recv(&self, timeout: Duration) -> Result<Received, CallError> {
        match &self.inner {
            Remote::Local(raw) => {
                let received = lift(
                    &self.info,
                    PluginKind::Transport,
                    "recv",
                    raw.recv(millis(timeout)),
                )?;
                Ok(match received {
                    RawReceived::Message(message) => Received::Message(message.into_string()),
                    RawReceived::Timeout => Received::Timeout,
                    RawReceived::Closed(reason) => Received::Closed(reason.into_string()),
                })
            }
            Remote::Isolated {
                host,
                id,
                generation,
            } => {
                let wait = millis(timeout.min(super::isolate::MAX_WAIT));
                let request = json!({"pump": id, "timeout-ms": wait});
                Ok(match host.request_in(*generation, "pump.recv", request) {
                    Ok(answer) => received_from_json(&answer),
                    Err(error) => Received::Closed(error.to_string()),
                })
            }
        }
    }

    /// Ends the connection.
    pub fn close(&self) {
        let result = match &self.inner {
            Remote::Local(raw) => lift(&self.info, PluginKind::Transport, "close", raw.close()),
            Remote::Isolated {
                host,
                id,
                generation,
            } => host
                .request_in(*generation, "pump.close", json!({"pump": id}))
                .map(drop),
        };
        if let Err(error) = result {
            tracing::debug!("{error}");
        }
    }
}

/// A `recv` answer as the isolated host sends it.
pub(super) fn received_to_json(received: &Received) -> Value {
    match received {
        Received::Message(message) => json!({"message": message}),
        Received::Timeout => json!({"timeout": true}),
        Received::Closed(reason) => json!({"closed": reason}),
    }
}

fn received_from_json(answer: &Value) -> Received {
    if let Some(message) = answer.get("message").and_then(Value::as_str) {
        return Received::Message(message.to_owned());
    }
    if let Some(reason) = answer.get("closed").and_then(Value::as_str) {
        return Received::Closed(reason.to_owned());
    }
    Received::Timeout
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
    inner: Remote<RawListenerBox>,
}

impl Listener {
    /// Waits up to `timeout` for a client session. Blocking.
    pub fn accept(&self, timeout: Duration) -> Result<Option<Accepted>, CallError> {
        match &self.inner {
            Remote::Local(raw) => {
                let accepted = lift(
                    &self.info,
                    PluginKind::Transport,
                    "accept",
                    raw.accept(millis(timeout)),
                )?;
                Ok(accepted.into_option().map(|accepted| Accepted {
                    pump: Pump {
                        info: self.info.clone(),
                        inner: Remote::Local(Arc::new(accepted.pump)),
                    },
                    peer: accepted.peer.into_string(),
                    session: accepted.session.into_string(),
                }))
            }
            Remote::Isolated {
                host,
                id,
                generation,
            } => {
                let wait = millis(timeout.min(super::isolate::MAX_WAIT));
                let request = json!({"listener": id, "timeout-ms": wait});
                let answer = host.request_in(*generation, "listener.accept", request)?;
                if answer.is_null() {
                    return Ok(None);
                }
                let text = |key: &str| {
                    answer
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                let pump = answer
                    .get("pump")
                    .and_then(Value::as_u64)
                    .unwrap_or_default();
                Ok(Some(Accepted {
                    pump: Pump {
                        info: self.info.clone(),
                        inner: Remote::Isolated {
                            host: host.clone(),
                            id: pump,
                            generation: *generation,
                        },
                    },
                    peer: text("peer"),
                    session: text("session"),
                }))
            }
        }
    }

    /// Where clients reach it.
    pub fn address(&self) -> String {
        let answer = match &self.inner {
            Remote::Local(raw) => lift(&self.info, PluginKind::Transport, "address", raw.address())
                .map(|a| a.into_string()),
            Remote::Isolated {
                host,
                id,
                generation,
            } => host
                .request_in(*generation, "listener.address", json!({"listener": id}))
                .map(|a| a.as_str().unwrap_or_default().to_owned()),
        };
        answer.unwrap_or_else(|e| format!("<unknown: {e}>"))
    }

    /// Stops accepting and ends every session.
    pub fn close(&self) {
        let result = match &self.inner {
            Remote::Local(raw) => lift(&self.info, PluginKind::Transport, "close", raw.close()),
            Remote::Isolated {
                host,
                id,
                generation,
            } => host
                .request_in(*generation, "listener.close", json!({"listener": id}))
                .map(drop),
        };
        if let Err(error) = result {
            tracing::warn!("{error}");
        }
    }
}

/// An opened codegen dialect.
#[derive(Clone)]
pub struct CodegenPlugin {
    info: Arc<PluginInfo>,
    backend: Backend<RawCodegenBox>,
}

impl CodegenPlugin {
    pub(super) fn new(info: PluginInfo, raw: RawCodegenBox) -> Self {
        CodegenPlugin {
            info: Arc::new(info),
            backend: Backend::Local(Arc::new(raw)),
        }
    }

    pub(super) fn isolated(host: Arc<IsolatedHost>) -> Self {
        CodegenPlugin {
            info: host.info().clone(),
            backend: Backend::Isolated(host),
        }
    }

    /// What the plugin file says it is.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// One `generate` request (see `runbyte_plugin_api::codegen`).
    pub fn generate(&self, request: &Value) -> Result<Value, CallError> {
        match &self.backend {
            Backend::Local(raw) => {
                let request = request.to_string();
                let answer = raw.generate(RStr::from(request.as_str()));
                let answer = lift(&self.info, PluginKind::Codegen, "generate", answer)?;
                parse_answer(&self.info, PluginKind::Codegen, "generate", &answer)
            }
            Backend::Isolated(host) => host.request("generate", request.clone()),
        }
    }
}

/// An opened sandbox policy.
#[derive(Clone)]
pub struct PolicyPlugin {
    info: Arc<PluginInfo>,
    backend: Backend<RawPolicyBox>,
}

impl PolicyPlugin {
    pub(super) fn new(info: PluginInfo, raw: RawPolicyBox) -> Self {
        PolicyPlugin {
            info: Arc::new(info),
            backend: Backend::Local(Arc::new(raw)),
        }
    }

    /// Whether the plugin runs in a child process (its calls then wait on a pipe).
    pub fn is_isolated(&self) -> bool {
        matches!(self.backend, Backend::Isolated(_))
    }

    pub(super) fn isolated(host: Arc<IsolatedHost>) -> Self {
        PolicyPlugin {
            info: host.info().clone(),
            backend: Backend::Isolated(host),
        }
    }

    /// What the plugin file says it is.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// The limits for one execution (see `runbyte_plugin_api::policy`).
    pub fn limits(&self, context: &Value) -> Result<Value, CallError> {
        match &self.backend {
            Backend::Local(raw) => {
                let context = context.to_string();
                let answer = raw.limits(RStr::from(context.as_str()));
                let answer = lift(&self.info, PluginKind::Policy, "limits", answer)?;
                parse_answer(&self.info, PluginKind::Policy, "limits", &answer)
            }
            Backend::Isolated(host) => host.request("limits", context.clone()),
        }
    }

    /// The verdict on one tool call.
    pub fn check_call(&self, call: &Value) -> Result<Value, CallError> {
        match &self.backend {
            Backend::Local(raw) => {
                let call = call.to_string();
                let answer = raw.check_call(RStr::from(call.as_str()));
                let answer = lift(&self.info, PluginKind::Policy, "check_call", answer)?;
                parse_answer(&self.info, PluginKind::Policy, "check_call", &answer)
            }
            Backend::Isolated(host) => host.request("check_call", call.clone()),
        }
    }
}
