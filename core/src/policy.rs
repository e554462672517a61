//! The sandbox policies, seen from the host: the limits of one execution, built from every
//! policy's answer, and every policy's verdict on each tool call.
//!
//! The shapes are `runbyte_plugin_api::wire`'s: [`wire::Limits`] declares the limit keys, their
//! units and their defaults; [`wire::Verdict`] declares the verdict. This module only adds what
//! the host decides: the strictest answer wins, units become bytes and durations, and a denial
//! becomes the error the program sees.

use std::time::Duration;

use runbyte_plugin_api::wire::{self, Verdict};
use serde::Deserialize;
use serde_json::Value;

use crate::{
    plugin::{CallError, PolicyPlugin},
    relay::Asker,
    sandbox::Limits,
};

/// Builds the limits of one execution, as wasmtime's `StoreLimitsBuilder` builds a store's:
/// each policy's answer is validated where it is added (against [`wire::RANGES`]), the
/// strictest value of each key is kept ([`wire::Limits::stricter`]), and
/// [`wire::Limits::DEFAULTS`] fills what no policy sets.
#[derive(Debug, Clone, Default)]
pub struct LimitsBuilder {
    set: wire::Limits,
}

impl LimitsBuilder {
    /// No policy's answer yet: [`LimitsBuilder::build`] gives the defaults.
    pub fn new() -> Self {
        LimitsBuilder::default()
    }

    /// Adds a policy's answer, read (and so checked) by [`read_answer`].
    pub fn add(mut self, limits: &wire::Limits) -> Self {
        self.set = self.set.stricter(limits);
        self
    }

    /// The limits, in the sandbox's units.
    pub fn build(&self) -> Limits {
        Limits::from(&self.set)
    }
}

/// Reads the `limits` answer of the policy named `policy`. An error names the policy, the key
/// at fault and, for a value out of range, the range; a key this host does not know is ignored
/// (a later host may).
pub fn read_answer(policy: &str, answer: &Value) -> Result<wire::Limits, String> {
    let Value::Object(keys) = answer else {
        return Err(format!(
            "policy `{policy}` answered `limits` with something other than an object"
        ));
    };
    let known = |key: &str| wire::Limits::is_key(key) || key == "judged-calls";
    for key in keys.keys().filter(|key| !known(key)) {
        tracing::debug!(policy, "ignoring unknown limit `{key}`");
    }
    let limits =
        wire::Limits::deserialize(answer).map_err(|error| format!("policy `{policy}`: {error}"))?;
    limits
        .check()
        .map_err(|error| format!("policy `{policy}` answered `limits` with {error}"))?;
    Ok(limits)
}

/// Merges policies' `limits` answers, each with its policy's name, as [`limits`] does.
#[cfg(test)]
pub fn merge_limits(answers: &[(String, Value)]) -> Result<Limits, String> {
    answers
        .iter()
        .try_fold(LimitsBuilder::new(), |builder, (name, answer)| {
            Ok(builder.add(&read_answer(name, answer)?))
        })
        .map(|builder| builder.build())
}

/// The calls a policy's `check_call` judges in one execution (its `limits` answer's
/// `judged-calls`); it would allow the others as they are, so it is not asked about them.
pub use runbyte_plugin_api::wire::JudgedCalls as Judged;

/// A policy, with the calls it judges in one execution.
#[derive(Clone)]
pub struct Judge {
    pub policy: PolicyPlugin,
    pub judged: Judged,
}

/// The limits for one execution, every policy asked and their answers merged; and each policy
/// with the calls it judges in it (all, unless its answer's `judged-calls` says otherwise).
pub async fn limits(
    policies: &[PolicyPlugin],
    context: &wire::LimitsContext,
) -> Result<(Limits, Vec<Judge>), String> {
    let context = serde_json::to_value(context)
        .map_err(|e| format!("cannot encode the limits context: {e}"))?;
    let mut builder = LimitsBuilder::new();
    let mut judges = Vec::with_capacity(policies.len());
    for policy in policies {
        let answer = ask(policy, &context, PolicyPlugin::limits).await?;
        let limits = read_answer(&policy.info().name, &answer)?;
        judges.push(Judge {
            policy: policy.clone(),
            judged: limits.judged_calls.clone().unwrap_or_default(),
        });
        builder = builder.add(&limits);
    }
    Ok((builder.build(), judges))
}

/// Why [`check_call`] did not let a call through.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// A policy's verdict refused it: a denial, or an approval the user did not give.
    #[error("{0}")]
    Denied(String),
    /// A policy could not judge it: the call could not be encoded, or the policy failed.
    #[error("{0}")]
    Failed(String),
}

/// Asks every policy that judges the call's server ([`Judged::covers`]) about it, in order;
/// the first that does not allow it decides. With none, nothing is encoded or asked.
/// `Ok` carries the call's timeout when a policy set one: never past `time_left`, the
/// shortest when several did.
/// An `ask` verdict puts its question to the user through `asker` (an approval form); the call
/// goes on only when the user approves.
pub async fn check_call(
    judges: &[Judge],
    call: &wire::Call<'_>,
    time_left: Duration,
    asker: Option<&dyn Asker>,
) -> Result<Option<Duration>, Refusal> {
    let judging: Vec<&PolicyPlugin> = judges
        .iter()
        .filter(|judge| judge.judged.covers(&call.server))
        .map(|judge| &judge.policy)
        .collect();
    if judging.is_empty() {
        return Ok(None);
    }
    let request = serde_json::to_value(call)
        .map_err(|e| Refusal::Failed(format!("cannot encode the call: {e}")))?;
    let mut granted: Option<Duration> = None;
    for policy in judging {
        let answer = ask(policy, &request, PolicyPlugin::check_call)
            .await
            .map_err(Refusal::Failed)?;
        let reason = match Verdict::from_value(&answer) {
            Verdict::Allow { timeout_ms } => {
                if let Some(ms) = timeout_ms {
                    // A policy may set a tool's timeout, longer or shorter than the default, but
                    // never past the time the execution has left; several policies: the shortest.
                    let this = Duration::from_millis(ms).min(time_left);
                    granted = Some(granted.map_or(this, |before| before.min(this)));
                }
                continue;
            }
            Verdict::Deny { reason } => reason.unwrap_or_else(|| "no reason given".to_owned()),
            Verdict::Ask { question, reason } => match asker {
                None => reason.unwrap_or_else(|| {
                    format!(
                        "it needs a person's approval ({question}), and this execution has no \
                         client to ask"
                    )
                }),
                Some(asker) => {
                    let asked = crate::relay::approval(
                        &question,
                        &call.server,
                        &call.tool,
                        &call.arguments,
                    );
                    match asker
                        .ask_again_able(asked, crate::relay::Origin::Approval)
                        .await
                    {
                        Ok(answer) => match crate::relay::approved(&answer) {
                            Ok(()) => continue,
                            Err(how) => {
                                format!("the user did not approve it ({question}): {how}")
                            }
                        },
                        Err(why) => {
                            format!("it needs a person's approval ({question}), but {why}")
                        }
                    }
                }
            },
        };
        return Err(Refusal::Denied(format!(
            "{}/{} was denied by policy `{}`: {reason}",
            call.server,
            call.tool,
            policy.info().name
        )));
    }
    Ok(granted)
}

/// One call into a policy. In-process policies answer at once; an isolated one waits on its
/// child process, so that call goes to a blocking thread rather than holding up the runtime
/// (and only then is `argument` copied, to move it there).
async fn ask(
    policy: &PolicyPlugin,
    argument: &Value,
    call: fn(&PolicyPlugin, &Value) -> Result<Value, CallError>,
) -> Result<Value, String> {
    if !policy.is_isolated() {
        return call(policy, argument).map_err(|e| e.to_string());
    }
    let (policy, name, argument) = (policy.clone(), policy.info().name.clone(), argument.clone());
    tokio::task::spawn_blocking(move || call(&policy, &argument))
        .await
        .map_err(|e| format!("policy `{name}`: the call's thread failed: {e}"))?
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn a_limits_answer_says_which_calls_its_policy_judges() {
        let judged = |answer: Value| {
            read_answer("p", &answer)
                .unwrap()
                .judged_calls
                .unwrap_or_default()
        };
        assert_eq!(judged(json!({})), Judged::All);
        assert_eq!(judged(json!({"judged-calls": "all"})), Judged::All);
        assert_eq!(judged(json!({"judged-calls": "none"})), Judged::None);
        let servers = judged(json!({"judged-calls": {"servers": ["a", "b"]}}));
        assert!(servers.covers("a") && servers.covers("b") && !servers.covers("c"));
        assert!(!Judged::None.covers("a"));
        for odd in [
            json!("some"),
            json!({"servers": [1]}),
            json!(null),
            json!([]),
        ] {
            assert_eq!(judged(json!({"judged-calls": odd})), Judged::All);
        }
        // The key is not a limit: the limits merge past it.
        merge_limits(&[(
            "p".to_owned(),
            json!({"judged-calls": "none", "timeout-ms": 5}),
        )])
        .unwrap();
    }

    #[test]
    fn a_value_out_of_range_names_the_policy_the_key_and_the_range() {
        let refused = |answer: Value| merge_limits(&[("acme".to_owned(), answer)]).unwrap_err();
        assert_eq!(
            refused(json!({"stack-kb": 16})),
            "policy `acme` answered `limits` with `stack-kb = 16` is out of range: it must be \
             64 to 524288 (KiB)"
        );
        assert_eq!(
            refused(json!({"memory-mb": 0})),
            "policy `acme` answered `limits` with `memory-mb = 0` is out of range: it must be \
             1 to 65536 (MiB)"
        );
        assert!(
            refused(json!({"max-tool-calls": u64::MAX})).contains("`max-tool-calls = "),
            "no value is clamped or saturated"
        );
        // One policy's bad answer fails the merge even when another's is stricter.
        let error = merge_limits(&[
            ("strict".to_owned(), json!({"timeout-ms": 5})),
            ("loose".to_owned(), json!({"timeout-ms": 0})),
        ])
        .unwrap_err();
        assert!(error.starts_with("policy `loose`"), "{error}");
        // Zero tool calls is a limit, not "off" nor "the default".
        let none = merge_limits(&[("p".to_owned(), json!({"max-tool-calls": 0}))]).unwrap();
        assert_eq!(none.max_tool_calls, 0);
    }

    #[test]
    fn the_default_limits_are_the_sandbox_defaults() {
        assert_eq!(LimitsBuilder::new().build(), Limits::default());
        assert_eq!(merge_limits(&[]).unwrap(), Limits::default());
    }

    #[test]
    fn units_become_bytes_and_durations() {
        let read = |answer: Value| read_answer("a", &answer).unwrap();
        let limits = LimitsBuilder::new()
            .add(&read(
                json!({"memory-mb": 2, "stack-kb": 256, "call-timeout-ms": 1500,
                        "max-output-bytes": 100, "max-in-flight": 3, "later": true}),
            ))
            .build();
        assert_eq!(limits.memory_bytes, 2 << 20);
        assert_eq!(limits.stack_bytes, 256 << 10);
        assert_eq!(limits.call_timeout, Duration::from_millis(1500));
        assert_eq!(limits.max_output_bytes, 100);
        assert_eq!(limits.max_in_flight, 3);
        let largest = LimitsBuilder::new()
            .add(&read(
                json!({"max-tool-calls": 10_000_000, "memory-mb": 64 * 1024}),
            ))
            .build();
        assert_eq!(largest.max_tool_calls, 10_000_000);
        assert_eq!(
            largest.memory_bytes,
            (64usize << 10).saturating_mul(1 << 20)
        );
    }

    #[test]
    fn an_answer_that_is_not_an_object_names_the_policy() {
        let error = read_answer("acme", &json!([1])).unwrap_err();
        assert_eq!(
            error,
            "policy `acme` answered `limits` with something other than an object"
        );
    }
}
