//! Plugins loaded into this process: their raw ABI objects behind the `*Calls` traits, with JSON
//! as text across the ABI and errors lifted into [`CallError`] naming the plugin and entry point.

use std::{sync::Arc, time::Duration};

use abi_stable::std_types::{RResult, RStr, RString};
use runbyte_plugin_api::{
    ErrorKind, PluginError as PluginApiError, PluginInstance, PluginKind, Signal,
    codegen::RawCodegenBox,
    policy::RawPolicyBox,
    transport::{RawListenerBox, RawPumpBox, RawReceived, RawTransportBox},
};
use serde_json::Value;

use super::{
    CallError, CodegenPlugin, PluginInfo, PolicyPlugin, TransportPlugin,
    wrap::{
        CodegenCalls, Incoming, ListenerCalls, PolicyCalls, PumpCalls, Received, TransportCalls,
        millis,
    },
};

/// An opened plugin of any kind, wrapped.
pub(super) enum Opened {
    Transport(TransportPlugin),
    Codegen(CodegenPlugin),
    Policy(PolicyPlugin),
}

impl Opened {
    pub(super) fn new(info: PluginInfo, instance: PluginInstance) -> Opened {
        let info = Arc::new(info);
        match instance {
            PluginInstance::Transport(raw) => Opened::Transport(transport(info, raw)),
            PluginInstance::Codegen(raw) => Opened::Codegen(codegen(info, raw)),
            PluginInstance::Policy(raw) => Opened::Policy(policy(info, raw)),
        }
    }
}

pub(super) fn transport(info: Arc<PluginInfo>, raw: RawTransportBox) -> TransportPlugin {
    let calls = Arc::new(LocalTransport {
        info: info.clone(),
        raw,
    });
    TransportPlugin::new(info, calls)
}

pub(super) fn codegen(info: Arc<PluginInfo>, raw: RawCodegenBox) -> CodegenPlugin {
    let calls = Arc::new(LocalCodegen {
        info: info.clone(),
        raw,
    });
    CodegenPlugin::new(info, calls)
}

pub(super) fn policy(info: Arc<PluginInfo>, raw: RawPolicyBox) -> PolicyPlugin {
    let calls = Arc::new(LocalPolicy {
        info: info.clone(),
        raw,
    });
    PolicyPlugin::new(info, calls)
}

fn call_error(
    info: &PluginInfo,
    kind: PluginKind,
    entry: &'static str,
    error: PluginApiError,
) -> CallError {
    let message = error.message.into_string();
    match error.kind {
        ErrorKind::Panicked => CallError::Panicked {
            plugin: info.name.clone(),
            entry,
            message,
        },
        ErrorKind::Failed => refused(CallError::Failed {
            kind,
            plugin: info.name.clone(),
            entry,
            message,
        }),
    }
}

/// `error`, or a [`CallError::Refused`] when it is a `send` that refused one message (said in
/// [`Signal`]'s form, the one place the plugin ABI carries it: see [`Signal`]).
pub(super) fn refused(error: CallError) -> CallError {
    let (plugin, message) = match &error {
        CallError::Failed {
            plugin,
            entry: "send",
            ..
        }
        | CallError::Remote {
            plugin,
            panicked: false,
            ..
        } => (plugin, error.to_string()),
        _ => return error,
    };
    match Signal::read(&message) {
        Some(Signal::Refused { reason }) => CallError::Refused {
            plugin: plugin.clone(),
            reason,
            message,
        },
        _ => error,
    }
}

fn lift<T>(
    info: &PluginInfo,
    kind: PluginKind,
    entry: &'static str,
    result: RResult<T, PluginApiError>,
) -> Result<T, CallError> {
    result
        .into_result()
        .map_err(|e| call_error(info, kind, entry, e))
}

/// A call that takes JSON text and answers JSON text.
fn json_call(
    info: &PluginInfo,
    kind: PluginKind,
    entry: &'static str,
    argument: &Value,
    call: impl FnOnce(RStr<'_>) -> RResult<RString, PluginApiError>,
) -> Result<Value, CallError> {
    let argument = argument.to_string();
    let answer = lift(info, kind, entry, call(RStr::from(argument.as_str())))?;
    serde_json::from_str(&answer).map_err(|e| CallError::BadAnswer {
        kind,
        plugin: info.name.clone(),
        entry,
        message: e.to_string(),
    })
}

struct LocalTransport {
    info: Arc<PluginInfo>,
    raw: RawTransportBox,
}

impl TransportCalls for LocalTransport {
    fn connect(&self, target: &Value) -> Result<Arc<dyn PumpCalls>, CallError> {
        let target = target.to_string();
        let answer = self.raw.connect(RStr::from(target.as_str()));
        let raw = lift(&self.info, PluginKind::Transport, "connect", answer)?;
        Ok(Arc::new(LocalPump {
            info: self.info.clone(),
            raw,
        }))
    }

    fn listen(&self, options: &Value) -> Result<Arc<dyn ListenerCalls>, CallError> {
        let options = options.to_string();
        let answer = self.raw.listen(RStr::from(options.as_str()));
        let raw = lift(&self.info, PluginKind::Transport, "listen", answer)?;
        Ok(Arc::new(LocalListener {
            info: self.info.clone(),
            raw,
        }))
    }
}

struct LocalPump {
    info: Arc<PluginInfo>,
    raw: RawPumpBox,
}

impl PumpCalls for LocalPump {
    fn readable_fd(&self) -> Option<i32> {
        self.raw.readable_fd().into_option()
    }

    fn sends_without_blocking(&self) -> bool {
        self.raw.sends_without_blocking()
    }

    fn send(&self, message: &str) -> Result<(), CallError> {
        let answer = self.raw.send(RStr::from(message));
        lift(&self.info, PluginKind::Transport, "send", answer)
    }

    fn recv(&self, timeout: Duration) -> Result<Received, CallError> {
        let answer = self.raw.recv(millis(timeout));
        Ok(
            match lift(&self.info, PluginKind::Transport, "recv", answer)? {
                RawReceived::Message(message) => Received::Message(message.into_string()),
                RawReceived::Timeout => Received::Timeout,
                RawReceived::Closed(reason) => Received::Closed(reason.into_string()),
            },
        )
    }

    fn close(&self) -> Result<(), CallError> {
        lift(&self.info, PluginKind::Transport, "close", self.raw.close())
    }
}

struct LocalListener {
    info: Arc<PluginInfo>,
    raw: RawListenerBox,
}

impl ListenerCalls for LocalListener {
    fn accept(&self, timeout: Duration) -> Result<Option<Incoming>, CallError> {
        let answer = self.raw.accept(millis(timeout));
        let accepted = lift(&self.info, PluginKind::Transport, "accept", answer)?;
        Ok(accepted.into_option().map(|accepted| Incoming {
            pump: Arc::new(LocalPump {
                info: self.info.clone(),
                raw: accepted.pump,
            }),
            peer: accepted.peer.into_string(),
            session: accepted.session.into_string(),
        }))
    }

    fn address(&self) -> Result<String, CallError> {
        let answer = self.raw.address();
        lift(&self.info, PluginKind::Transport, "address", answer).map(|a| a.into_string())
    }

    fn close(&self) -> Result<(), CallError> {
        lift(&self.info, PluginKind::Transport, "close", self.raw.close())
    }
}

struct LocalCodegen {
    info: Arc<PluginInfo>,
    raw: RawCodegenBox,
}

impl CodegenCalls for LocalCodegen {
    fn generate(&self, request: &Value) -> Result<Value, CallError> {
        json_call(
            &self.info,
            PluginKind::Codegen,
            "generate",
            request,
            |request| self.raw.generate(request),
        )
    }
}

struct LocalPolicy {
    info: Arc<PluginInfo>,
    raw: RawPolicyBox,
}

impl PolicyCalls for LocalPolicy {
    fn limits(&self, context: &Value) -> Result<Value, CallError> {
        json_call(
            &self.info,
            PluginKind::Policy,
            "limits",
            context,
            |context| self.raw.limits(context),
        )
    }

    fn check_call(&self, call: &Value) -> Result<Value, CallError> {
        json_call(&self.info, PluginKind::Policy, "check_call", call, |call| {
            self.raw.check_call(call)
        })
    }
}
