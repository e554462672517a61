//! The plugins as the rest of Runbyte holds them: ordinary Rust types (`Result`, `String`,
//! `serde_json::Value`), the same whether the plugin's code runs in this process or in a child
//! `runbyte plugin-host`. Each type delegates to a `*Calls` trait object; the in-process
//! implementations are in `local.rs`, the isolated ones in `isolate/parent.rs`.

use std::{sync::Arc, time::Duration};

use serde_json::Value;

use super::{CallError, PluginInfo};

/// The calls a transport plugin answers.
pub(super) trait TransportCalls: Send + Sync {
    fn connect(&self, target: &Value) -> Result<Arc<dyn PumpCalls>, CallError>;
    fn listen(&self, options: &Value) -> Result<Arc<dyn ListenerCalls>, CallError>;
}

/// The calls one connection's pump answers.
pub(super) trait PumpCalls: Send + Sync {
    /// None unless the pump's descriptors live in this process.
    fn readable_fd(&self) -> Option<i32> {
        None
    }
    /// False unless the pump says so and lives in this process.
    fn sends_without_blocking(&self) -> bool {
        false
    }
    fn send(&self, message: &str) -> Result<(), CallError>;
    fn recv(&self, timeout: Duration) -> Result<Received, CallError>;
    fn close(&self) -> Result<(), CallError>;
}

/// The calls a listener answers.
pub(super) trait ListenerCalls: Send + Sync {
    fn accept(&self, timeout: Duration) -> Result<Option<Incoming>, CallError>;
    fn address(&self) -> Result<String, CallError>;
    fn close(&self) -> Result<(), CallError>;
}

/// An accepted session as a [`ListenerCalls`] gives it.
pub(super) struct Incoming {
    pub pump: Arc<dyn PumpCalls>,
    pub peer: String,
    pub session: String,
}

/// The calls a codegen dialect answers.
pub(super) trait CodegenCalls: Send + Sync {
    fn generate(&self, request: &Value) -> Result<Value, CallError>;
}

/// The calls a sandbox policy answers.
pub(super) trait PolicyCalls: Send + Sync {
    fn limits(&self, context: &Value) -> Result<Value, CallError>;
    fn check_call(&self, call: &Value) -> Result<Value, CallError>;
    /// Whether its calls wait on another process.
    fn is_isolated(&self) -> bool {
        false
    }
}

/// A timeout in whole milliseconds, as the ABI and the isolated channel take it.
pub(super) fn millis(timeout: Duration) -> u64 {
    u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)
}

/// An opened transport plugin.
#[derive(Clone)]
pub struct TransportPlugin {
    info: Arc<PluginInfo>,
    calls: Arc<dyn TransportCalls>,
}

impl TransportPlugin {
    pub(super) fn new(info: Arc<PluginInfo>, calls: Arc<dyn TransportCalls>) -> Self {
        TransportPlugin { info, calls }
    }

    /// What the plugin file says it is.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// Opens a client connection to a downstream server; `target` is described in
    /// `runbyte_plugin_api::transport::Transport::connect`. Blocking: call it off the runtime.
    pub fn connect(&self, target: &Value) -> Result<Pump, CallError> {
        let calls = self.calls.connect(target)?;
        Ok(Pump {
            info: self.info.clone(),
            calls,
        })
    }

    /// Starts accepting upstream clients; `options` as in `Transport::listen`.
    pub fn listen(&self, options: &Value) -> Result<Listener, CallError> {
        let calls = self.calls.listen(options)?;
        Ok(Listener {
            info: self.info.clone(),
            calls,
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
    calls: Arc<dyn PumpCalls>,
}

impl Pump {
    /// The transport plugin behind this pump.
    pub fn plugin(&self) -> &str {
        &self.info.name
    }

    /// A descriptor that becomes readable when `recv` may have a message, if the plugin gives
    /// one (never for an isolated plugin: its descriptors live in another process).
    pub fn readable_fd(&self) -> Option<i32> {
        self.calls.readable_fd()
    }

    /// Whether `send` returns at once, so it may be called from an async task (never for an
    /// isolated plugin: its sends cross a pipe to another process).
    pub fn sends_without_blocking(&self) -> bool {
        self.calls.sends_without_blocking()
    }

    /// Sends one message. Blocking.
    pub fn send(&self, message: &str) -> Result<(), CallError> {
        self.calls.send(message)
    }

    /// Waits up to `timeout` for the next message. Blocking.
    pub fn recv(&self, timeout: Duration) -> Result<Received, CallError> {
        self.calls.recv(timeout)
    }

    /// Ends the connection.
    pub fn close(&self) {
        if let Err(error) = self.calls.close() {
            tracing::debug!("{error}");
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
    calls: Arc<dyn ListenerCalls>,
}

impl Listener {
    /// Waits up to `timeout` for a client session. Blocking.
    pub fn accept(&self, timeout: Duration) -> Result<Option<Accepted>, CallError> {
        let incoming = self.calls.accept(timeout)?;
        Ok(incoming.map(|incoming| Accepted {
            pump: Pump {
                info: self.info.clone(),
                calls: incoming.pump,
            },
            peer: incoming.peer,
            session: incoming.session,
        }))
    }

    /// Where clients reach it.
    pub fn address(&self) -> String {
        self.calls
            .address()
            .unwrap_or_else(|e| format!("<unknown: {e}>"))
    }

    /// Stops accepting and ends every session.
    pub fn close(&self) {
        if let Err(error) = self.calls.close() {
            tracing::warn!("{error}");
        }
    }
}

/// An opened codegen dialect.
#[derive(Clone)]
pub struct CodegenPlugin {
    info: Arc<PluginInfo>,
    calls: Arc<dyn CodegenCalls>,
}

impl CodegenPlugin {
    pub(super) fn new(info: Arc<PluginInfo>, calls: Arc<dyn CodegenCalls>) -> Self {
        CodegenPlugin { info, calls }
    }

    /// What the plugin file says it is.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// One `generate` request (see `runbyte_plugin_api::codegen`).
    pub fn generate(&self, request: &Value) -> Result<Value, CallError> {
        self.calls.generate(request)
    }
}

/// An opened sandbox policy.
#[derive(Clone)]
pub struct PolicyPlugin {
    info: Arc<PluginInfo>,
    calls: Arc<dyn PolicyCalls>,
}

impl PolicyPlugin {
    pub(super) fn new(info: Arc<PluginInfo>, calls: Arc<dyn PolicyCalls>) -> Self {
        PolicyPlugin { info, calls }
    }

    /// Whether the plugin runs in a child process (its calls then wait on a pipe).
    pub fn is_isolated(&self) -> bool {
        self.calls.is_isolated()
    }

    /// What the plugin file says it is.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// The limits for one execution (see `runbyte_plugin_api::policy`).
    pub fn limits(&self, context: &Value) -> Result<Value, CallError> {
        self.calls.limits(context)
    }

    /// The verdict on one tool call.
    pub fn check_call(&self, call: &Value) -> Result<Value, CallError> {
        self.calls.check_call(call)
    }
}
