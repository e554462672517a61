//! A sandbox policy's calls and answers (see [`crate::policy`] for what they mean); the
//! `limits` answer itself is in [`super::limits`].

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer, de::DeserializeOwned};
use serde_json::Value;

/// What `limits` receives: `{"session"}`, and `"listener"` when the host says which listener
/// the session came through.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsContext {
    /// The client session the execution belongs to (`"cli"` for `runbyte exec`).
    #[serde(default)]
    pub session: String,
    /// The listener the session came through (`"stdio"`, `"http"`), when the host says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener: Option<String>,
}

/// What `check_call` receives: `{"server", "tool", "arguments", "annotations", "context"}`.
///
/// The host always sends every key; each defaults when absent (empty text, `null` arguments, no
/// annotations, zero counts), so that a test may send only what it needs. The text is borrowed
/// where the host writes a call and owned where a plugin reads one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Call<'a> {
    /// The server's name in `runbyte.toml`.
    #[serde(default)]
    pub server: Cow<'a, str>,
    /// The tool's original name, as the server lists it.
    #[serde(default)]
    pub tool: Cow<'a, str>,
    /// The arguments the program passes, as it passes them (usually an object).
    #[serde(default)]
    pub arguments: Cow<'a, Value>,
    /// The tool's MCP annotations (`readOnlyHint`, `destructiveHint`, ...) as the server lists
    /// them; `null` on the wire when it lists none.
    #[serde(default)]
    pub annotations: Option<Cow<'a, Value>>,
    /// Where the call stands in its execution.
    #[serde(default)]
    pub context: CallContext<'a>,
}

/// The context of a [`Call`]: `{"session", "execution", "calls", "calls-to-server",
/// "calls-to-tool", "pin"}`, the counts being the calls made before this one in the same
/// execution, `pin` how the tool's definition stands against what a person approved
/// ([`PinState`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CallContext<'a> {
    /// The client session.
    #[serde(default)]
    pub session: Cow<'a, str>,
    /// The execution, unique in the host process.
    #[serde(default)]
    pub execution: Cow<'a, str>,
    /// Tool calls so far.
    #[serde(default)]
    pub calls: u64,
    /// Tool calls so far to this call's server.
    #[serde(default)]
    pub calls_to_server: u64,
    /// Tool calls so far to this call's tool.
    #[serde(default)]
    pub calls_to_tool: u64,
    /// How the tool's definition stands against its pin. A host that does not send it (one
    /// older than pins) is read as [`PinState::Unpinned`].
    #[serde(default)]
    pub pin: PinState,
}

/// How the definition of a called tool stands against what was pinned (the host's `[servers.*]
/// pin` setting): `"pinned"`, `"changed"`, `"approved"` or `"unpinned"`.
///
/// A policy that trusts only what a person has seen refuses `Unpinned` and `Changed`. Read
/// leniently: a value this crate does not know (a later host's) is `Unpinned`, the state that
/// claims least, so such a policy stays closed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PinState {
    /// `"pinned"`: the definition is the one pinned (at the server's first listing, by
    /// `new-tools = "allow"`, or approved in an earlier run of the host).
    Pinned,
    /// `"changed"`: the definition differs from what was pinned and is served all the same
    /// (`pin = "warn"`): no person approved it.
    Changed,
    /// `"approved"`: a person approved this definition while the host runs (`runbyte pins
    /// approve`, or the answer to `pin = "ask"`'s question).
    Approved,
    /// `"unpinned"` (the default): nothing is pinned for the tool (`pin = "off"`, or a call the
    /// host keeps no pin for, as a program's `readResource`).
    #[default]
    Unpinned,
}

impl PinState {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            PinState::Pinned => "pinned",
            PinState::Changed => "changed",
            PinState::Approved => "approved",
            PinState::Unpinned => "unpinned",
        }
    }
}

impl Serialize for PinState {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for PinState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Ok(match value.as_str() {
            Some("pinned") => PinState::Pinned,
            Some("changed") => PinState::Changed,
            Some("approved") => PinState::Approved,
            _ => PinState::Unpinned,
        })
    }
}

/// What `check_call` answers.
///
/// On the wire: `{"allow": true}`, optionally with `"timeout-ms"`; `{"allow": false, "reason":
/// "..."}`; or, for a call a person should approve, `{"allow": false, "ask": "<the question>"}`
/// with an optional `"reason"`. Reading fails closed: anything but an object whose `allow` is
/// `true` is a denial, and a key whose value has the wrong kind counts as absent, so a verdict
/// is always read and never lets through more than it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The call may run. `timeout_ms` sets this call's timeout, longer or shorter than the
    /// default; the host never lets it run past the time the execution has left.
    Allow {
        /// `timeout-ms`, when the policy sets it.
        timeout_ms: Option<u64>,
    },
    /// The call is refused. The program gets an `Error` carrying the reason, and the audit
    /// log records it.
    Deny {
        /// `reason`: why, in words for the program's author; `None` when the policy gave none.
        reason: Option<String>,
    },
    /// The call may run if a person approves it: the host asks the user through the client of
    /// the execution (an elicitation). A host that cannot ask (no client, or one without the
    /// elicitation capability) denies the call, with `reason` when given; so does any host that
    /// predates `ask`.
    Ask {
        /// `ask`: the question to put to the person.
        question: String,
        /// `reason`: what a host that cannot ask reports as the reason for the denial.
        reason: Option<String>,
    },
}

impl Verdict {
    /// `{"allow": true}`.
    pub fn allow() -> Verdict {
        Verdict::Allow { timeout_ms: None }
    }

    /// `{"allow": false, "reason": reason}`.
    pub fn deny(reason: impl Into<String>) -> Verdict {
        Verdict::Deny {
            reason: Some(reason.into()),
        }
    }

    /// Reads an answer as the host does (see [`Verdict`]): never an error.
    pub fn from_value(answer: &Value) -> Verdict {
        // An array would otherwise be read field by field, in order.
        if !answer.is_object() {
            return Verdict::Deny { reason: None };
        }
        match VerdictText::deserialize(answer) {
            Ok(text) => text.into(),
            Err(_) => Verdict::Deny { reason: None },
        }
    }

    /// The verdict as JSON text, ready to return from `check_call`.
    pub fn to_json(&self) -> String {
        // Text keys and plain values: encoding cannot fail.
        serde_json::to_string(self).unwrap_or_else(|_| r#"{"allow":false}"#.to_owned())
    }
}

impl Serialize for Verdict {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let text = match self {
            Verdict::Allow { timeout_ms } => VerdictText {
                allow: Some(true),
                timeout_ms: *timeout_ms,
                ..VerdictText::default()
            },
            Verdict::Deny { reason } => VerdictText {
                allow: Some(false),
                reason: reason.as_deref().map(Cow::Borrowed),
                ..VerdictText::default()
            },
            Verdict::Ask { question, reason } => VerdictText {
                allow: Some(false),
                reason: reason.as_deref().map(Cow::Borrowed),
                ask: Some(Cow::Borrowed(question.as_str())),
                ..VerdictText::default()
            },
        };
        text.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Verdict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|answer| Verdict::from_value(&answer))
    }
}

/// A verdict's keys as they are written: the one declaration of the verdict's shape.
#[derive(Default, Serialize, Deserialize)]
struct VerdictText<'a> {
    #[serde(default, deserialize_with = "lenient")]
    allow: Option<bool>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    reason: Option<Cow<'a, str>>,
    #[serde(
        rename = "timeout-ms",
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    timeout_ms: Option<u64>,
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    ask: Option<Cow<'a, str>>,
}

impl From<VerdictText<'_>> for Verdict {
    fn from(text: VerdictText<'_>) -> Verdict {
        match text {
            VerdictText {
                allow: Some(true),
                timeout_ms,
                ..
            } => Verdict::Allow { timeout_ms },
            VerdictText {
                ask: Some(question),
                reason,
                ..
            } => Verdict::Ask {
                question: question.into_owned(),
                reason: reason.map(Cow::into_owned),
            },
            VerdictText { reason, .. } => Verdict::Deny {
                reason: reason.map(Cow::into_owned),
            },
        }
    }
}

/// A value of the wrong kind reads as absent.
fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).ok())
}
