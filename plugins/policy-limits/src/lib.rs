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
//! error that names it.

use std::collections::BTreeMap;

use runbyte_plugin_api::{export_plugin, policy::Policy};
use serde::Deserialize;
use serde_json::{Value, json};

/// The execution limits and the per-server overrides, as configured.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Config {
    timeout_ms: Option<u64>,
    memory_mb: Option<u64>,
    stack_kb: Option<u64>,
    max_tool_calls: Option<u64>,
    max_in_flight: Option<u64>,
    call_timeout_ms: Option<u64>,
    max_output_bytes: Option<u64>,
    isolation: Option<Isolation>,
    #[serde(default)]
    servers: BTreeMap<String, ServerLimits>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum Isolation {
    Process,
    Thread,
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

/// The smallest and largest value each numeric key accepts.
const RANGES: &[(&str, u64, u64)] = &[
    ("timeout-ms", 1, 24 * 3600 * 1000),
    ("memory-mb", 1, 64 * 1024),
    ("stack-kb", 16, 1024 * 1024),
    ("max-tool-calls", 0, 10_000_000),
    ("max-in-flight", 1, 10_000),
    ("call-timeout-ms", 1, 24 * 3600 * 1000),
    ("max-output-bytes", 1, 1 << 30),
];

fn check_range(path: &str, key: &str, value: Option<u64>) -> Result<(), String> {
    let Some(value) = value else { return Ok(()) };
    let Some(&(_, min, max)) = RANGES.iter().find(|(name, ..)| *name == key) else {
        return Ok(());
    };
    if value < min || value > max {
        return Err(format!(
            "`{path}{key} = {value}` is out of range: it must be {min} to {max}"
        ));
    }
    Ok(())
}

impl Config {
    fn parse(text: &str) -> Result<Config, String> {
        let config: Config =
            serde_json::from_str(text).map_err(|e| format!("[sandbox.limits]: {e}"))?;
        let top = [
            ("timeout-ms", config.timeout_ms),
            ("memory-mb", config.memory_mb),
            ("stack-kb", config.stack_kb),
            ("max-tool-calls", config.max_tool_calls),
            ("max-in-flight", config.max_in_flight),
            ("call-timeout-ms", config.call_timeout_ms),
            ("max-output-bytes", config.max_output_bytes),
        ];
        for (key, value) in top {
            check_range("sandbox.limits.", key, value)?;
        }
        for (server, limits) in &config.servers {
            let path = format!("sandbox.limits.servers.{server}.");
            check_range(&path, "max-tool-calls", limits.max_tool_calls)?;
            check_range(&path, "call-timeout-ms", limits.call_timeout_ms)?;
            for (tool, limits) in &limits.tools {
                let path = format!("{path}tools.{tool}.");
                check_range(&path, "max-tool-calls", limits.max_tool_calls)?;
                check_range(&path, "call-timeout-ms", limits.call_timeout_ms)?;
            }
        }
        Ok(config)
    }
}

/// The `limits` policy.
pub struct Limits {
    config: Config,
}

impl Limits {
    fn execution_limits(&self) -> Value {
        let c = &self.config;
        let mut out = serde_json::Map::new();
        let mut put = |key: &str, value: Option<u64>| {
            if let Some(value) = value {
                out.insert(key.to_owned(), json!(value));
            }
        };
        put("timeout-ms", c.timeout_ms);
        put("memory-mb", c.memory_mb);
        put("stack-kb", c.stack_kb);
        put("max-tool-calls", c.max_tool_calls);
        put("max-in-flight", c.max_in_flight);
        put("call-timeout-ms", c.call_timeout_ms);
        put("max-output-bytes", c.max_output_bytes);
        if let Some(isolation) = c.isolation {
            let name = match isolation {
                Isolation::Process => "process",
                Isolation::Thread => "thread",
            };
            out.insert("isolation".to_owned(), json!(name));
        }
        Value::Object(out)
    }

    fn verdict(&self, call: &Value) -> Value {
        let server = call["server"].as_str().unwrap_or_default();
        let tool = call["tool"].as_str().unwrap_or_default();
        let context = &call["context"];
        let Some(limits) = self.config.servers.get(server) else {
            return json!({ "allow": true });
        };
        let tool_limits = limits.tools.get(tool);
        let to_server = context["calls-to-server"].as_u64().unwrap_or(0);
        let to_tool = context["calls-to-tool"].as_u64().unwrap_or(0);
        if let Some(max) = limits.max_tool_calls
            && to_server >= max
        {
            return json!({
                "allow": false,
                "reason": format!("server `{server}` allows at most {max} tool calls per execution"),
            });
        }
        if let Some(max) = tool_limits.and_then(|t| t.max_tool_calls)
            && to_tool >= max
        {
            return json!({
                "allow": false,
                "reason": format!("tool `{server}/{tool}` allows at most {max} calls per execution"),
            });
        }
        let timeout = tool_limits
            .and_then(|t| t.call_timeout_ms)
            .or(limits.call_timeout_ms);
        match timeout {
            Some(ms) => json!({ "allow": true, "timeout-ms": ms }),
            None => json!({ "allow": true }),
        }
    }
}

impl Policy for Limits {
    fn open(config: &str) -> Result<Self, String> {
        Ok(Limits {
            config: Config::parse(config)?,
        })
    }

    fn limits(&self, _context: &str) -> Result<String, String> {
        Ok(self.execution_limits().to_string())
    }

    fn check_call(&self, call: &str) -> Result<String, String> {
        let call: Value = serde_json::from_str(call).map_err(|e| format!("bad call JSON: {e}"))?;
        Ok(self.verdict(&call).to_string())
    }
}

export_plugin! { kind: policy, name: "limits", plugin: Limits }

#[cfg(test)]
mod tests;
