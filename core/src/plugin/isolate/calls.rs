//! An isolated plugin behind the same `*Calls` traits as one loaded in process: each call becomes
//! an [`Op`] to its child, each answer is checked to be the one that op gets. Pumps and listeners
//! are ids in the child of one generation: a restarted child does not have them.

use std::{sync::Arc, time::Duration};

use serde_json::Value;

use super::{
    parent::IsolatedHost,
    protocol::{self, Answer, MAX_WAIT, Op},
};
use crate::plugin::{
    CallError,
    wrap::{
        CodegenCalls, Incoming, ListenerCalls, PolicyCalls, PumpCalls, Received, TransportCalls,
        millis,
    },
};

impl CodegenCalls for IsolatedHost {
    fn generate(&self, request: &Value) -> Result<Value, CallError> {
        self.json_call(Op::Generate {
            request: request.clone(),
        })
    }
}

impl PolicyCalls for IsolatedHost {
    fn limits(&self, context: &Value) -> Result<Value, CallError> {
        self.json_call(Op::Limits {
            context: context.clone(),
        })
    }

    fn check_call(&self, call: &Value) -> Result<Value, CallError> {
        self.json_call(Op::CheckCall { call: call.clone() })
    }

    fn is_isolated(&self) -> bool {
        true
    }
}

impl TransportCalls for IsolatedHost {
    fn connect(&self, target: &Value) -> Result<Arc<dyn PumpCalls>, CallError> {
        let op = Op::Connect {
            target: target.clone(),
        };
        match self.call(op)? {
            (Answer::Pump(id), generation) => Ok(Arc::new(ChildPump {
                host: self.clone(),
                id,
                generation,
            })),
            (other, _) => Err(self.unexpected("connect", &other)),
        }
    }

    fn listen(&self, options: &Value) -> Result<Arc<dyn ListenerCalls>, CallError> {
        let op = Op::Listen {
            options: options.clone(),
        };
        match self.call(op)? {
            (Answer::Listener(id), generation) => Ok(Arc::new(ChildListener {
                host: self.clone(),
                id,
                generation,
            })),
            (other, _) => Err(self.unexpected("listen", &other)),
        }
    }
}

/// A pump in the child of one generation.
struct ChildPump {
    host: IsolatedHost,
    id: u64,
    generation: u64,
}

impl ChildPump {
    fn done(&self, op: Op) -> Result<(), CallError> {
        let name = op.name();
        match self.host.call_in(self.generation, op)? {
            Answer::Done => Ok(()),
            other => Err(self.host.unexpected(name, &other)),
        }
    }
}

impl PumpCalls for ChildPump {
    fn send(&self, message: &str) -> Result<(), CallError> {
        self.done(Op::PumpSend {
            pump: self.id,
            message: message.to_owned(),
        })
    }

    fn recv(&self, timeout: Duration) -> Result<Received, CallError> {
        let op = Op::PumpRecv {
            pump: self.id,
            timeout_ms: millis(timeout.min(MAX_WAIT)),
        };
        // A lost child ends the connection rather than failing the call: the pump's reader
        // then reports it closed, as it would a server that went away.
        Ok(match self.host.call_in(self.generation, op) {
            Ok(Answer::Received(received)) => match received {
                protocol::Received::Message(message) => Received::Message(message),
                protocol::Received::Timeout => Received::Timeout,
                protocol::Received::Closed(reason) => Received::Closed(reason),
            },
            Ok(other) => Received::Closed(self.host.unexpected("pump_recv", &other).to_string()),
            Err(error) => Received::Closed(error.to_string()),
        })
    }

    fn close(&self) -> Result<(), CallError> {
        self.done(Op::PumpClose { pump: self.id })
    }
}

/// A listener in the child of one generation.
struct ChildListener {
    host: IsolatedHost,
    id: u64,
    generation: u64,
}

impl ListenerCalls for ChildListener {
    fn accept(&self, timeout: Duration) -> Result<Option<Incoming>, CallError> {
        let op = Op::ListenerAccept {
            listener: self.id,
            timeout_ms: millis(timeout.min(MAX_WAIT)),
        };
        match self.host.call_in(self.generation, op)? {
            Answer::Accepted(None) => Ok(None),
            Answer::Accepted(Some(accepted)) => Ok(Some(Incoming {
                pump: Arc::new(ChildPump {
                    host: self.host.clone(),
                    id: accepted.pump,
                    generation: self.generation,
                }),
                peer: accepted.peer,
                session: accepted.session,
            })),
            other => Err(self.host.unexpected("listener_accept", &other)),
        }
    }

    fn address(&self) -> Result<String, CallError> {
        let op = Op::ListenerAddress { listener: self.id };
        match self.host.call_in(self.generation, op)? {
            Answer::Address(address) => Ok(address),
            other => Err(self.host.unexpected("listener_address", &other)),
        }
    }

    fn close(&self) -> Result<(), CallError> {
        let op = Op::ListenerClose { listener: self.id };
        match self.host.call_in(self.generation, op)? {
            Answer::Done => Ok(()),
            other => Err(self.host.unexpected("listener_close", &other)),
        }
    }
}
