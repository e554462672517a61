//! `limits`: Runbyte's default sandbox policy.
//!
//! It reads `[sandbox.limits]` from `runbyte.toml`: the execution limits, and overrides per
//! server and per tool:
//!
//! ```toml
//! [sandbox.limits]
//! timeout-ms = 30000
//! memory-mb = 64
//! max-tool-calls = 1000
//! [sandbox.limits.servers.github]        # this server's calls within one execution
//! max-tool-calls = 50
//! call-timeout-ms = 10000
//! [sandbox.limits.servers.github.tools.search_code]
//! call-timeout-ms = 60000
//! max-tool-calls = 5
//! ```
//!
//! Every key is validated when the plugin opens; an unknown key or a value out of range is an
//! error that names it (and the range: the ranges are plugin-api's `wire::RANGES`, which the
//! host checks every policy's answer against too).

use std::collections::BTreeMap;

use runbyte_plugin_api::{
    export_plugin,
    policy::Policy,
    wire::{Call, JudgedCalls, Limits as ExecutionLimits, Verdict},
};
use serde::Deserialize;
use serde_json::{Map, Value};

/// The execution limits and the per-server overrides, as configured.
#[derive(Debug, Default)]
struct Config {
    /// `[sandbox.limits]`'s own keys: exactly the keys of a `limits` answer.
    limits: ExecutionLimits,
    servers: BTreeMap<String, ServerLimits>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ServerLimits {
    max_tool_calls: Option<u64>,
    call_timeout_ms: Option<u64>,
    #[serde(default)]
    tools: BTreeMap<String, ToolLimits>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct ToolLimits {
    max_tool_calls: Option<u64>,
    call_timeout_ms: Option<u64>,
}

/// Checks every key `limits` sets against the one range table ([`runbyte_plugin_api::wire::RANGES`],
/// the host's too); `path` is where the keys sit in `runbyte.toml`, for the error.
fn check_ranges(path: &str, limits: &ExecutionLimits) -> Result<(), String> {
    limits.check().map_err(|error| error.describe(path))
}

/// The keys a server's or a tool's override may set, as execution limits, for [`check_ranges`].
fn override_limits(max_tool_calls: Option<u64>, call_timeout_ms: Option<u64>) -> ExecutionLimits {
    ExecutionLimits {
        max_tool_calls,
        call_timeout_ms,
        ..ExecutionLimits::default()
    }
}

impl Config {
    fn parse(text: &str) -> Result<Config, String> {
        let mut table: Map<String, Value> =
            serde_json::from_str(text).map_err(|e| format!("[sandbox.limits]: {e}"))?;
        let servers: BTreeMap<String, ServerLimits> = match table.remove("servers") {
            Some(servers) => serde_json::from_value(servers)
                .map_err(|e| format!("[sandbox.limits.servers]: {e}"))?,
            None => BTreeMap::new(),
        };
        if let Some(unknown) = table.keys().find(|key| !ExecutionLimits::is_key(key)) {
            let expected: Vec<String> = ExecutionLimits::keys()
                .chain(["servers"])
                .map(|key| format!("`{key}`"))
                .collect();
            return Err(format!(
                "[sandbox.limits]: unknown field `{unknown}`, expected one of {}",
                expected.join(", ")
            ));
        }
        let limits: ExecutionLimits = serde_json::from_value(Value::Object(table))
            .map_err(|e| format!("[sandbox.limits]: {e}"))?;
        check_ranges("sandbox.limits.", &limits)?;
        for (server, limits) in &servers {
            let path = format!("sandbox.limits.servers.{server}.");
            check_ranges(
                &path,
                &override_limits(limits.max_tool_calls, limits.call_timeout_ms),
            )?;
            for (tool, limits) in &limits.tools {
                check_ranges(
                    &format!("{path}tools.{tool}."),
                    &override_limits(limits.max_tool_calls, limits.call_timeout_ms),
                )?;
            }
        }
        Ok(Config { limits, servers })
    }
}

/// The `limits` policy.
pub struct Limits {
    config: Config,
}

impl Limits {
    fn verdict(&self, call: &Call<'_>) -> Verdict {
        let (server, tool) = (&*call.server, &*call.tool);
        let Some(limits) = self.config.servers.get(server) else {
            return Verdict::allow();
        };
        let tool_limits = limits.tools.get(tool);
        if let Some(max) = limits.max_tool_calls
            && call.context.calls_to_server >= max
        {
            return Verdict::deny(format!(
                "server `{server}` allows at most {max} tool calls per execution"
            ));
        }
        if let Some(max) = tool_limits.and_then(|t| t.max_tool_calls)
            && call.context.calls_to_tool >= max
        {
            return Verdict::deny(format!(
                "tool `{server}/{tool}` allows at most {max} calls per execution"
            ));
        }
        let timeout_ms = tool_limits
            .and_then(|t| t.call_timeout_ms)
            .or(limits.call_timeout_ms);
        Verdict::Allow { timeout_ms }
    }
}

impl Policy for Limits {
    fn open(config: &str) -> Result<Self, String> {
        Ok(Limits {
            config: Config::parse(config)?,
        })
    }

    /// The limits, and the calls it judges: only those of the servers it has limits for (every
    /// other call it would allow as it is, so the host need not ask).
    fn limits(&self, _context: &str) -> Result<String, String> {
        let answer = ExecutionLimits {
            judged_calls: Some(JudgedCalls::Servers(
                self.config.servers.keys().cloned().collect(),
            )),
            ..self.config.limits.clone()
        };
        serde_json::to_string(&answer).map_err(|e| format!("cannot encode: {e}"))
    }

    fn check_call(&self, call: &str) -> Result<String, String> {
        let call: Call = serde_json::from_str(call).map_err(|e| format!("bad call JSON: {e}"))?;
        Ok(self.verdict(&call).to_json())
    }
}

export_plugin! { kind: policy, name: "limits", plugin: Limits }

#[cfg(test)]
mod tests;
