//! A sandbox policy's calls and answers (see [`crate::policy`] for what they mean).

use std::{borrow::Cow, fmt};

use serde::{
    Deserialize, Deserializer, Serialize, Serializer,
    de::{self, DeserializeOwned, IgnoredAny, MapAccess, Visitor},
    ser::SerializeMap,
};
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

/// The limits one policy sets for an execution: what `limits` answers.
///
/// Every key is optional: `None` (the key absent) leaves the limit to the other policies and
/// the host's default, which [`Limits::DEFAULTS`] holds. With several policies the host takes
/// the strictest value of each key ([`Limits::stricter`]). On the wire the keys are
/// kebab-case, numbers are non-negative integers and `isolation` is `"process"` or
/// `"thread"`: `{"timeout-ms": 5000, "isolation": "thread"}`. Reading ignores unknown keys (a
/// later host may know more) and refuses a known key with a value of the wrong kind, naming
/// the key.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// `timeout-ms`: the wall-clock time of one execution, in milliseconds. Default 30000.
    pub timeout_ms: Option<u64>,
    /// `memory-mb`: the QuickJS heap, in MiB. Default 64.
    pub memory_mb: Option<u64>,
    /// `stack-kb`: the QuickJS stack, in KiB. Default 1024.
    pub stack_kb: Option<u64>,
    /// `max-tool-calls`: tool calls per execution. Default 1000.
    pub max_tool_calls: Option<u64>,
    /// `max-in-flight`: tool calls running at once; more wait their turn. Default 16.
    pub max_in_flight: Option<u64>,
    /// `call-timeout-ms`: one tool call, in milliseconds, also bounded by the time the
    /// execution has left. Default 30000.
    pub call_timeout_ms: Option<u64>,
    /// `max-output-bytes`: the result plus console output returned to the client, in bytes.
    /// Default 65536.
    pub max_output_bytes: Option<u64>,
    /// `isolation`: where the program runs. Default [`Isolation::Process`].
    pub isolation: Option<Isolation>,
}

/// Where a program runs: the value of the `isolation` limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// `"process"`: a worker process the host can kill. The stricter of the two.
    Process,
    /// `"thread"`: a thread of the host process; faster, for trusted settings only.
    Thread,
}

/// The key of [`Limits::isolation`]; the numeric keys are in [`Limits::counts_mut`].
const ISOLATION: &str = "isolation";

impl Limits {
    /// The host's defaults: the value of every key that no policy sets.
    pub const DEFAULTS: Limits = Limits {
        timeout_ms: Some(30_000),
        memory_mb: Some(64),
        stack_kb: Some(1024),
        max_tool_calls: Some(1000),
        max_in_flight: Some(16),
        call_timeout_ms: Some(30_000),
        max_output_bytes: Some(65_536),
        isolation: Some(Isolation::Process),
    };

    /// Each numeric limit with its key: the one place a key is paired with its field.
    fn counts_mut(&mut self) -> [(&'static str, &mut Option<u64>); 7] {
        [
            ("timeout-ms", &mut self.timeout_ms),
            ("memory-mb", &mut self.memory_mb),
            ("stack-kb", &mut self.stack_kb),
            ("max-tool-calls", &mut self.max_tool_calls),
            ("max-in-flight", &mut self.max_in_flight),
            ("call-timeout-ms", &mut self.call_timeout_ms),
            ("max-output-bytes", &mut self.max_output_bytes),
        ]
    }

    /// Each numeric limit with its key, set or not, in the order of the fields.
    pub fn counts(&self) -> impl Iterator<Item = (&'static str, Option<u64>)> + use<> {
        let mut copy = *self;
        copy.counts_mut()
            .map(|(key, value)| (key, *value))
            .into_iter()
    }

    /// Every key, the numeric ones first (in the order of the fields), `isolation` last.
    pub fn keys() -> impl Iterator<Item = &'static str> {
        Limits::default()
            .counts()
            .map(|(key, _)| key)
            .chain([ISOLATION])
    }

    /// Whether `key` is one of [`Limits::keys`].
    pub fn is_key(key: &str) -> bool {
        Limits::keys().any(|known| known == key)
    }

    /// `self` with each key that `other` sets made the stricter of the two: the smaller
    /// number, and [`Isolation::Process`] over [`Isolation::Thread`]. A key only one of them
    /// sets keeps that value.
    pub fn stricter(mut self, other: &Limits) -> Limits {
        let mut other = *other;
        for ((_, mine), (_, theirs)) in self.counts_mut().into_iter().zip(other.counts_mut()) {
            *mine = match (*mine, *theirs) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        self.isolation = match (self.isolation, other.isolation) {
            (Some(Isolation::Process), _) | (_, Some(Isolation::Process)) => {
                Some(Isolation::Process)
            }
            (a, b) => a.or(b),
        };
        self
    }

    /// `self` with `fallback`'s value for each key that `self` leaves unset.
    pub fn or(mut self, fallback: &Limits) -> Limits {
        let mut fallback = *fallback;
        for ((_, mine), (_, theirs)) in self.counts_mut().into_iter().zip(fallback.counts_mut()) {
            *mine = mine.or(*theirs);
        }
        self.isolation = self.isolation.or(fallback.isolation);
        self
    }
}

impl Serialize for Limits {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let set = self.counts().filter(|(_, value)| value.is_some()).count()
            + usize::from(self.isolation.is_some());
        let mut map = serializer.serialize_map(Some(set))?;
        for (key, value) in self.counts() {
            if let Some(value) = value {
                map.serialize_entry(key, &value)?;
            }
        }
        if let Some(isolation) = &self.isolation {
            map.serialize_entry(ISOLATION, isolation)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Limits {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(LimitsVisitor)
    }
}

struct LimitsVisitor;

impl<'de> Visitor<'de> for LimitsVisitor {
    type Value = Limits;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("an object of limits")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Limits, A::Error> {
        let mut limits = Limits::default();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if key == ISOLATION {
                let value: Value = map.next_value()?;
                let isolation = Isolation::deserialize(&value).map_err(|_| {
                    <A::Error as de::Error>::custom(format!(
                        "`{ISOLATION}` must be \"process\" or \"thread\", got {value}"
                    ))
                })?;
                limits.isolation = Some(isolation);
                continue;
            }
            match limits
                .counts_mut()
                .into_iter()
                .find(|(known, _)| *known == key)
            {
                Some((key, slot)) => {
                    let value: Value = map.next_value()?;
                    let number = value.as_u64().ok_or_else(|| {
                        <A::Error as de::Error>::custom(format!(
                            "`{key}` must be a positive integer, got {value}"
                        ))
                    })?;
                    *slot = Some(number);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(limits)
    }
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
/// "calls-to-tool"}`, the counts being the calls made before this one in the same execution.
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
