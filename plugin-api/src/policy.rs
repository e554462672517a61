//! Sandbox policies: the limits of an execution and a verdict on each tool call.
//!
//! **`limits(context)`**: `context` is `{"session": "..."}` (and `"listener": "stdio"` when the
//! host says which listener the session came through). The answer is a JSON object whose keys
//! are all optional; the host applies its defaults to what is absent and, when several policies
//! are configured, the strictest value of each key (the smaller number; `"process"` over
//! `"thread"`). Unknown keys are ignored; a known key with a value of the wrong kind fails the
//! execution, naming the policy and the key.
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `timeout-ms` | 30000 | wall-clock time of one execution |
//! | `memory-mb` | 64 | the QuickJS heap |
//! | `stack-kb` | 1024 | the QuickJS stack |
//! | `max-tool-calls` | 1000 | tool calls per execution |
//! | `max-in-flight` | 16 | tool calls running at once |
//! | `call-timeout-ms` | 30000 | one tool call (also bounded by the time left) |
//! | `max-output-bytes` | 65536 | result plus console output returned to the client |
//! | `isolation` | `"process"` | `"process"` (killable worker processes) or `"thread"` |
//!
//! **`check_call(call)`**: `call` is `{"server", "tool", "arguments", "annotations",
//! "context": {"session", "execution", "calls": <calls so far>, "calls-to-server": <calls so
//! far to this server>, "calls-to-tool": <calls so far to this tool>}}`. The answer is
//! `{"allow": true}`, optionally with `"timeout-ms"` for this call, or
//! `{"allow": false, "reason": "..."}`. A denial reaches the program as a thrown `Error`
//! carrying the reason, and the audit log. Anything but an object whose `allow` is `true` is a
//! denial. `{"allow": false, "ask": "<question>"}` asks for a person's approval; hosts that
//! cannot ask (this one, for now) deny the call, with `"reason"` when given.
//!
//! **Which calls a policy judges**: the `limits` answer may carry `"judged-calls"`: `"all"`
//! (the default), `"none"`, or `{"servers": ["github", …]}`. For that execution the host asks
//! `check_call` only about the calls it names and allows the others as `{"allow": true}` would,
//! so a policy that only sets limits, or judges one server, costs the other calls nothing.
//! (It is part of the `limits` answer, not an entry point of its own, so that plugins built
//! before it load unchanged.)
//!
//! With the `wire` feature these shapes are serde types, the table included:
//! `wire::LimitsContext`, `wire::Limits` (with `Limits::DEFAULTS`), `wire::Call` and
//! `wire::Verdict`.

use abi_stable::{
    sabi_trait,
    std_types::{RBox, RResult, RStr, RString},
};

use crate::{PluginError, guard::guard};

/// What a policy plugin implements. Both calls are pure and quick: they run on the path of
/// every execution and every tool call.
pub trait Policy: Send + Sync + Sized + 'static {
    /// Builds the policy from its configuration table (a JSON object, `{}` when absent). An
    /// error names the bad key or value; the host stops at start-up with it.
    fn open(config: &str) -> Result<Self, String>;

    /// The limits for one execution (see the [module documentation](self)).
    fn limits(&self, context: &str) -> Result<String, String>;

    /// The verdict on one tool call (see the [module documentation](self)).
    fn check_call(&self, call: &str) -> Result<String, String>;
}

/// The ABI form of [`Policy`].
#[sabi_trait]
pub trait RawPolicy: Send + Sync {
    /// See [`Policy::limits`].
    fn limits(&self, context: RStr<'_>) -> RResult<RString, PluginError>;
    /// See [`Policy::check_call`].
    #[sabi(last_prefix_field)]
    fn check_call(&self, call: RStr<'_>) -> RResult<RString, PluginError>;
}

/// A boxed [`RawPolicy`] trait object.
pub type RawPolicyBox = RawPolicy_TO<'static, RBox<()>>;

pub(crate) struct PolicyAdapter<T> {
    pub(crate) inner: T,
    pub(crate) plugin: &'static str,
}

impl<T: Policy> RawPolicy for PolicyAdapter<T> {
    fn limits(&self, context: RStr<'_>) -> RResult<RString, PluginError> {
        guard(self.plugin, "limits", || {
            self.inner.limits(context.as_str())
        })
        .map(RString::from)
        .into()
    }

    fn check_call(&self, call: RStr<'_>) -> RResult<RString, PluginError> {
        guard(self.plugin, "check_call", || {
            self.inner.check_call(call.as_str())
        })
        .map(RString::from)
        .into()
    }
}
