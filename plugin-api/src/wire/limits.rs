//! The limits of an execution: the one table of limit keys ([`RANGES`]: unit, default and the
//! values accepted) and [`Limits`], what a policy's `limits` answers and what the `limits`
//! plugin reads from `[sandbox.limits]`.
//!
//! A new limit is a row of [`RANGES`] and a field of [`Limits`] (paired in
//! [`Limits::counts_mut`]), the place that enforces it, and its row in the documentation.

use std::{borrow::Cow, collections::BTreeSet, fmt};

use serde::{
    Deserialize, Deserializer, Serialize, Serializer,
    de::{self, IgnoredAny, MapAccess, Visitor},
    ser::SerializeMap,
};
use serde_json::Value;

/// One numeric limit: its key, its unit, its default and the values accepted.
///
/// A value outside `min..=max` is an error naming the key and the range ([`OutOfRange`]),
/// never clamped. Zero is accepted only where `min` is 0 (`max-tool-calls`: no tool calls at
/// all); no key reads 0 as "the default" or "unlimited".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// The key, as written in a `limits` answer and in `[sandbox.limits]`.
    pub key: &'static str,
    /// What the number counts: `ms`, `MiB`, `KiB`, `calls` or `bytes`.
    pub unit: &'static str,
    /// The value when no policy sets the key.
    pub default: u64,
    /// The smallest value accepted.
    pub min: u64,
    /// The largest value accepted.
    pub max: u64,
}

impl Range {
    /// `value` if it lies in the range, else the error naming the key and the range.
    pub fn check(&self, value: u64) -> Result<u64, OutOfRange> {
        if (self.min..=self.max).contains(&value) {
            return Ok(value);
        }
        Err(OutOfRange {
            key: self.key,
            value,
            range: *self,
        })
    }
}

/// One day in milliseconds: the longest time limit (a deadline must be a representable
/// instant).
const DAY_MS: u64 = 24 * 3600 * 1000;

/// Every numeric limit, in the order of [`Limits`]'s fields: the one list of keys, units,
/// defaults and ranges, read by the host and by the `limits` plugin.
pub const RANGES: [Range; 7] = [
    Range {
        key: "timeout-ms",
        unit: "ms",
        default: 30_000,
        min: 1,
        max: DAY_MS,
    },
    Range {
        key: "memory-mb",
        unit: "MiB",
        default: 64,
        min: 1,
        max: 64 * 1024,
    },
    // Below 64 KiB QuickJS cannot start a program; the engine thread's stack is this plus
    // 16 MiB, which must stay a stack the OS gives.
    Range {
        key: "stack-kb",
        unit: "KiB",
        default: 1024,
        min: 64,
        max: 512 * 1024,
    },
    Range {
        key: "max-tool-calls",
        unit: "calls",
        default: 1000,
        min: 0,
        max: 10_000_000,
    },
    Range {
        key: "max-in-flight",
        unit: "calls",
        default: 16,
        min: 1,
        max: 10_000,
    },
    Range {
        key: "call-timeout-ms",
        unit: "ms",
        default: 30_000,
        min: 1,
        max: DAY_MS,
    },
    Range {
        key: "max-output-bytes",
        unit: "bytes",
        default: 65_536,
        min: 1,
        max: 1 << 30,
    },
];

/// A limit's value outside its [`Range`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfRange {
    /// The key at fault.
    pub key: &'static str,
    /// The value given.
    pub value: u64,
    /// The key's range.
    pub range: Range,
}

impl OutOfRange {
    /// The message with the key under `prefix` (`sandbox.limits.` for a key of that table):
    /// "`sandbox.limits.stack-kb = 8` is out of range: it must be 64 to 524288 (KiB)".
    pub fn describe(&self, prefix: &str) -> String {
        let Range { min, max, unit, .. } = self.range;
        format!(
            "`{prefix}{} = {}` is out of range: it must be {min} to {max} ({unit})",
            self.key, self.value
        )
    }
}

impl fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(""))
    }
}

impl std::error::Error for OutOfRange {}

/// The limits one policy sets for an execution: what `limits` answers.
///
/// Every key is optional: `None` (the key absent) leaves the limit to the other policies and
/// the host's default, which [`Limits::DEFAULTS`] holds (from [`RANGES`]). With several policies
/// the host takes the strictest value of each key ([`Limits::stricter`]), after checking each
/// answer against [`RANGES`] ([`Limits::check`]): a value out of range fails the execution,
/// naming the policy, the key and the range. On the wire the keys are kebab-case, numbers are
/// non-negative integers and `isolation` is `"process"` or `"thread"`:
/// `{"timeout-ms": 5000, "isolation": "thread"}`. Reading ignores unknown keys (a later host may
/// know more) and refuses a known key with a value of the wrong kind, naming the key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// `judged-calls`: the calls this policy's `check_call` judges in the execution; the host
    /// does not ask it about the others. Default [`JudgedCalls::All`]. It belongs to the
    /// answering policy and is not one of [`Limits::keys`].
    pub judged_calls: Option<JudgedCalls>,
}

/// Where a program runs: the value of the `isolation` limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// `"process"`: a pool of worker processes, killed and replaced at the deadline plus a
    /// short grace: nothing the program does can take the host down or outlive its deadline.
    /// The stricter of the two.
    #[default]
    Process,
    /// `"thread"`: a thread of the host process; cheaper, for trusted settings only. A runaway
    /// built-in cannot be stopped, only abandoned at the deadline (it runs on until it finishes
    /// or hits the memory limit).
    Thread,
}

/// The calls a policy judges in one execution: the value of `judged-calls`, `"all"`, `"none"`
/// or `{"servers": ["github", ...]}`. Read leniently: any other value is `All` (the host asks
/// the policy about every call, which is never less safe).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum JudgedCalls {
    /// `"all"`: every call.
    #[default]
    All,
    /// `"none"`: no call; the policy only sets limits.
    None,
    /// `{"servers": [...]}`: the calls to these servers.
    Servers(BTreeSet<String>),
}

impl JudgedCalls {
    /// Whether calls to `server` are judged.
    pub fn covers(&self, server: &str) -> bool {
        match self {
            JudgedCalls::All => true,
            JudgedCalls::None => false,
            JudgedCalls::Servers(servers) => servers.contains(server),
        }
    }

    /// The calls either judges.
    fn either(&self, other: &JudgedCalls) -> JudgedCalls {
        match (self, other) {
            (JudgedCalls::All, _) | (_, JudgedCalls::All) => JudgedCalls::All,
            (JudgedCalls::None, other) | (other, JudgedCalls::None) => other.clone(),
            (JudgedCalls::Servers(a), JudgedCalls::Servers(b)) => {
                JudgedCalls::Servers(a.union(b).cloned().collect())
            }
        }
    }

    /// Reads a `judged-calls` value; anything not understood is `All`.
    fn from_value(value: &Value) -> JudgedCalls {
        match value.as_str() {
            Some("all") => return JudgedCalls::All,
            Some("none") => return JudgedCalls::None,
            _ => {}
        }
        let servers = || -> Option<BTreeSet<String>> {
            let names = value.as_object()?.get("servers")?.as_array()?;
            names
                .iter()
                .map(|name| name.as_str().map(str::to_owned))
                .collect()
        };
        servers().map_or(JudgedCalls::All, JudgedCalls::Servers)
    }
}

impl Serialize for JudgedCalls {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            JudgedCalls::All => serializer.serialize_str("all"),
            JudgedCalls::None => serializer.serialize_str("none"),
            JudgedCalls::Servers(servers) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("servers", servers)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for JudgedCalls {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|value| JudgedCalls::from_value(&value))
    }
}

/// The key of [`Limits::isolation`]; the numeric keys are in [`RANGES`].
const ISOLATION: &str = "isolation";
/// The key of [`Limits::judged_calls`].
const JUDGED_CALLS: &str = "judged-calls";

impl Limits {
    /// The host's defaults, [`RANGES`]' `default` column: the value of every key that no policy
    /// sets (`judged-calls` aside: it is each policy's own).
    pub const DEFAULTS: Limits = Limits {
        timeout_ms: Some(RANGES[0].default),
        memory_mb: Some(RANGES[1].default),
        stack_kb: Some(RANGES[2].default),
        max_tool_calls: Some(RANGES[3].default),
        max_in_flight: Some(RANGES[4].default),
        call_timeout_ms: Some(RANGES[5].default),
        max_output_bytes: Some(RANGES[6].default),
        isolation: Some(Isolation::Process),
        judged_calls: None,
    };

    /// Each numeric limit with its [`Range`]: the one place a row of [`RANGES`] is paired with
    /// its field.
    fn counts_mut(&mut self) -> [(&'static Range, &mut Option<u64>); 7] {
        let [
            timeout,
            memory,
            stack,
            calls,
            in_flight,
            call_timeout,
            output,
        ] = &RANGES;
        [
            (timeout, &mut self.timeout_ms),
            (memory, &mut self.memory_mb),
            (stack, &mut self.stack_kb),
            (calls, &mut self.max_tool_calls),
            (in_flight, &mut self.max_in_flight),
            (call_timeout, &mut self.call_timeout_ms),
            (output, &mut self.max_output_bytes),
        ]
    }

    /// Each numeric limit with its key, set or not, in the order of the fields.
    pub fn counts(&self) -> impl Iterator<Item = (&'static str, Option<u64>)> + use<> {
        let mut copy = self.clone();
        copy.counts_mut()
            .map(|(range, value)| (range.key, *value))
            .into_iter()
    }

    /// Every limit's key, the numeric ones first (in the order of the fields), `isolation`
    /// last.
    pub fn keys() -> impl Iterator<Item = &'static str> {
        RANGES.iter().map(|range| range.key).chain([ISOLATION])
    }

    /// Whether `key` is one of [`Limits::keys`].
    pub fn is_key(key: &str) -> bool {
        Limits::keys().any(|known| known == key)
    }

    /// Whether every key `self` sets lies in its [`Range`]: the first that does not is the
    /// error.
    pub fn check(&self) -> Result<(), OutOfRange> {
        for (range, (_, value)) in RANGES.iter().zip(self.counts()) {
            if let Some(value) = value {
                range.check(value)?;
            }
        }
        Ok(())
    }

    /// `self` with each key that `other` sets made the stricter of the two: the smaller
    /// number, and [`Isolation::Process`] over [`Isolation::Thread`]; `judged_calls` becomes
    /// the calls either judges. A key only one of them sets keeps that value.
    pub fn stricter(&self, other: &Limits) -> Limits {
        let mut this = self.clone();
        let mut other = other.clone();
        for ((_, mine), (_, theirs)) in this.counts_mut().into_iter().zip(other.counts_mut()) {
            *mine = match (*mine, *theirs) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        this.isolation = match (this.isolation, other.isolation) {
            (Some(Isolation::Process), _) | (_, Some(Isolation::Process)) => {
                Some(Isolation::Process)
            }
            (a, b) => a.or(b),
        };
        this.judged_calls = match (&this.judged_calls, &other.judged_calls) {
            (Some(a), Some(b)) => Some(a.either(b)),
            (a, b) => a.clone().or_else(|| b.clone()),
        };
        this
    }

    /// `self` with `fallback`'s value for each key that `self` leaves unset.
    pub fn or(&self, fallback: &Limits) -> Limits {
        let mut this = self.clone();
        let mut fallback = fallback.clone();
        for ((_, mine), (_, theirs)) in this.counts_mut().into_iter().zip(fallback.counts_mut()) {
            *mine = mine.or(*theirs);
        }
        this.isolation = this.isolation.or(fallback.isolation);
        this.judged_calls = this.judged_calls.or(fallback.judged_calls);
        this
    }
}

impl Serialize for Limits {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let set = self.counts().filter(|(_, value)| value.is_some()).count()
            + usize::from(self.isolation.is_some())
            + usize::from(self.judged_calls.is_some());
        let mut map = serializer.serialize_map(Some(set))?;
        for (key, value) in self.counts() {
            if let Some(value) = value {
                map.serialize_entry(key, &value)?;
            }
        }
        if let Some(isolation) = &self.isolation {
            map.serialize_entry(ISOLATION, isolation)?;
        }
        if let Some(judged) = &self.judged_calls {
            map.serialize_entry(JUDGED_CALLS, judged)?;
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
            if key == JUDGED_CALLS {
                limits.judged_calls = Some(map.next_value()?);
                continue;
            }
            match limits
                .counts_mut()
                .into_iter()
                .find(|(range, _)| range.key == key)
            {
                Some((range, slot)) => {
                    let value: Value = map.next_value()?;
                    let number = value.as_u64().ok_or_else(|| {
                        <A::Error as de::Error>::custom(format!(
                            "`{}` must be a positive integer, got {value}",
                            range.key
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
