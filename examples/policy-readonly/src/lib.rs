//! Build with `cargo build --release -p runbyte-policy-readonly`, load with `[sandbox] policy = ["limits", "readonly"]` (the build folder in `[plugins] dirs`, or `[[plugins.load]] path = ".../librunbyte_policy_readonly.so"`).
//!
//! `readonly`: an example third-party sandbox policy, built against `runbyte-plugin-api` alone.
//! It lets a program call the tools that say they only read, and the ones the operator names.
//!
//! ```toml
//! [sandbox]
//! policy = ["limits", "readonly"]
//!
//! [sandbox.readonly]
//! allow = ["demo/*"]            # may run although not read-only (default: none)
//! deny = ["*/delete_*"]         # never run (default: none)
//! allow-unannotated = false     # tools that carry no readOnlyHint at all (default: false)
//! ask = false                   # ask the user instead of denying (default: false)
//! require-pinned = false        # only tools a person has seen (default: false)
//! ```
//!
//! The verdict on a call to `server/tool`: the first of these rules that applies decides.
//!
//! 0. With `require-pinned = true`, the call's context says the tool's definition is
//!    `"unpinned"` (nothing pinned: `pin = "off"`, or a host older than pins) or `"changed"`
//!    (served by `pin = "warn"` although no person approved it): **denied**, whatever the other
//!    rules say. `"pinned"` and `"approved"` go on to the rules below.
//! 1. A `deny` pattern matches: **denied**. Deny always wins.
//! 2. An `allow` entry *without wildcards* is exactly `server/tool`: **allowed**, even when the
//!    tool is destructive (the operator named that one tool).
//! 3. `destructiveHint` is `true`: **denied**. An `allow` glob never lets a destructive tool
//!    through, so `allow = ["demo/*"]` opens `demo`'s write tools but not its destructive ones.
//! 4. `readOnlyHint` is `true`: **allowed**.
//! 5. An `allow` pattern matches: **allowed** (a write tool that is not destructive).
//! 6. The tool carries no `readOnlyHint` (no annotations, or annotations without that key) and
//!    `allow-unannotated = true`: **allowed**.
//! 7. Otherwise: **denied**, the tool is not read-only.
//!
//! With `ask = true`, a call that rules 3 to 7 would deny is put to the user instead (an `ask`
//! verdict: Runbyte shows the question, the server, the tool and the arguments, and the call
//! runs only if the user approves); a `deny` pattern still denies outright. A client that
//! cannot ask (or `runbyte exec`) gets the denial, with the reason.
//!
//! Defaults, made explicit: a hint counts only when it is literally `true`. An absent
//! `readOnlyHint` therefore means "not read-only" (MCP's own default is `false`), so an
//! unannotated tool is denied unless rule 5 or 6 lets it through. MCP's default for an absent
//! `destructiveHint` is `true`; this policy does not apply it, because a tool that is not
//! read-only is already denied unless the operator allowed it by rule 5 or 6.
//!
//! Patterns match the text `server/tool`: `*` matches any run of characters (none included, `/`
//! included), `?` exactly one character, everything else itself (case-sensitive). A pattern must
//! contain a `/`; `[`, `]`, `{`, `}` and `\` are refused so that no one mistakes them for
//! character classes, alternatives or escapes. Every key is checked when the plugin opens: an
//! unknown key or a bad pattern is an error that names it.
//!
//! `limits` has no opinion (`{}`): pair this policy with `limits` for the execution limits.

mod glob;

use runbyte_plugin_api::{
    export_plugin,
    policy::Policy,
    wire::{Call, PinState, Verdict},
};
use serde::Deserialize;
use serde_json::Value;

use glob::Pattern;

/// `[sandbox.readonly]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Config {
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    deny: Vec<String>,
    #[serde(default)]
    allow_unannotated: bool,
    #[serde(default)]
    ask: bool,
    #[serde(default)]
    require_pinned: bool,
}

/// The `readonly` policy.
#[derive(Debug)]
pub struct ReadOnly {
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
    allow_unannotated: bool,
    ask: bool,
    require_pinned: bool,
}

/// Why a call is not allowed outright.
enum Refusal {
    /// A `deny` pattern matched: never asked.
    Denied(String),
    /// Not read-only: denied, or asked with `ask = true`.
    NotReadOnly(String),
}

fn patterns(key: &str, texts: Vec<String>) -> Result<Vec<Pattern>, String> {
    texts
        .into_iter()
        .enumerate()
        .map(|(index, text)| {
            Pattern::parse(&text)
                .map_err(|why| format!("[sandbox.readonly] `{key}[{index}]` = `{text}`: {why}"))
        })
        .collect()
}

/// A tool's annotation hint, as this policy reads it.
enum Hint<'a> {
    True,
    /// Present, but not `true`: `false`, or a value that is not a boolean.
    Other(&'a Value),
    Absent,
}

fn hint<'a>(annotations: &'a Value, key: &str) -> Hint<'a> {
    match annotations.get(key) {
        None | Some(Value::Null) => Hint::Absent,
        Some(Value::Bool(true)) => Hint::True,
        Some(other) => Hint::Other(other),
    }
}

impl ReadOnly {
    fn verdict(&self, server: &str, tool: &str, annotations: &Value) -> Result<(), Refusal> {
        let target = format!("{server}/{tool}");
        if let Some(pattern) = self.deny.iter().find(|p| p.matches(&target)) {
            return Err(Refusal::Denied(format!(
                "`{target}` matches deny pattern `{pattern}`"
            )));
        }
        if self.allow.iter().any(|p| p.is_exactly(&target)) {
            return Ok(());
        }
        if let Hint::True = hint(annotations, "destructiveHint") {
            return Err(Refusal::NotReadOnly(format!(
                "`{target}` is destructive (annotations: destructiveHint)"
            )));
        }
        let read_only = hint(annotations, "readOnlyHint");
        if let Hint::True = read_only {
            return Ok(());
        }
        if self.allow.iter().any(|p| p.matches(&target)) {
            return Ok(());
        }
        match read_only {
            Hint::Absent if self.allow_unannotated => Ok(()),
            Hint::Absent => Err(Refusal::NotReadOnly(format!(
                "`{target}` is not known to be read-only (annotations: no readOnlyHint) and \
                 matches no allow pattern; allow-unannotated is false"
            ))),
            Hint::Other(value) => Err(Refusal::NotReadOnly(format!(
                "`{target}` is not read-only (annotations: readOnlyHint {value}) and matches no \
                 allow pattern"
            ))),
            Hint::True => Ok(()),
        }
    }
}

impl Policy for ReadOnly {
    fn open(config: &str) -> Result<Self, String> {
        let config: Config =
            serde_json::from_str(config).map_err(|e| format!("[sandbox.readonly]: {e}"))?;
        Ok(ReadOnly {
            allow: patterns("allow", config.allow)?,
            deny: patterns("deny", config.deny)?,
            allow_unannotated: config.allow_unannotated,
            ask: config.ask,
            require_pinned: config.require_pinned,
        })
    }

    fn limits(&self, _context: &str) -> Result<String, String> {
        Ok("{}".to_owned())
    }

    fn check_call(&self, call: &str) -> Result<String, String> {
        let call: Call = serde_json::from_str(call).map_err(|e| format!("bad call JSON: {e}"))?;
        // The host always names both; a call without them is not one to judge.
        for (key, text) in [("server", &call.server), ("tool", &call.tool)] {
            if text.is_empty() {
                return Err(format!("the call has no `{key}` string"));
            }
        }
        let pin = call.context.pin;
        if self.require_pinned && matches!(pin, PinState::Unpinned | PinState::Changed) {
            return Ok(Verdict::deny(format!(
                "`{}/{}` is {} (no person approved its definition); require-pinned is true",
                call.server,
                call.tool,
                pin.as_str()
            ))
            .to_json());
        }
        let annotations = call.annotations.as_deref().unwrap_or(&Value::Null);
        let verdict = match self.verdict(&call.server, &call.tool, annotations) {
            Ok(()) => Verdict::allow(),
            Err(Refusal::NotReadOnly(reason)) if self.ask => Verdict::Ask {
                question: format!("Allow a call that may change something? {reason}."),
                reason: Some(reason),
            },
            Err(Refusal::Denied(reason) | Refusal::NotReadOnly(reason)) => Verdict::deny(reason),
        };
        Ok(verdict.to_json())
    }
}

export_plugin! { kind: policy, name: "readonly", plugin: ReadOnly }

#[cfg(test)]
mod tests;
