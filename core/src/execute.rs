//! `execute_code` on the host side: the limits the policies give, the bridge from the sandbox to
//! the policies and the Hub, and what the client gets back.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{FutureExt, future::BoxFuture};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use crate::{
    hub::{CallOptions, Hub},
    plugin::PolicyPlugin,
    sandbox::{ErrorKind, Isolation, Limits, Outcome, ToolBridge, ToolCall},
};

/// The limits for one execution: each policy's answer, the strictest value of each kind winning
/// (process isolation is stricter than thread), and the defaults for what no policy sets.
pub async fn limits(policies: &[PolicyPlugin], context: &Value) -> Result<Limits, String> {
    let mut answers = Vec::with_capacity(policies.len());
    for policy in policies {
        let context = context.clone();
        let answer = ask(policy, move |policy| policy.limits(&context)).await?;
        answers.push((policy.info().name.clone(), answer));
    }
    merge_limits(&answers)
}

/// One call into a policy. In-process policies answer at once; an isolated one waits on its
/// child process, so that call goes to a blocking thread rather than holding up the runtime.
async fn ask(
    policy: &PolicyPlugin,
    call: impl FnOnce(&PolicyPlugin) -> Result<Value, crate::plugin::CallError> + Send + 'static,
) -> Result<Value, String> {
    if !policy.is_isolated() {
        return call(policy).map_err(|e| e.to_string());
    }
    let (policy, name) = (policy.clone(), policy.info().name.clone());
    tokio::task::spawn_blocking(move || call(&policy))
        .await
        .map_err(|e| format!("policy `{name}`: the call's thread failed: {e}"))?
        .map_err(|e| e.to_string())
}

/// Merges policies' `limits` answers (see [`limits`]).
pub fn merge_limits(answers: &[(String, Value)]) -> Result<Limits, String> {
    let mut strictest: HashMap<&str, u64> = HashMap::new();
    let (mut wants_process, mut wants_thread) = (false, false);
    for (name, answer) in answers {
        let Value::Object(answer) = answer else {
            return Err(format!(
                "policy `{name}` answered `limits` with something other than an object"
            ));
        };
        for (key, value) in answer {
            match key.as_str() {
                "isolation" => match value.as_str() {
                    Some("process") => wants_process = true,
                    Some("thread") => wants_thread = true,
                    _ => {
                        return Err(format!(
                            "policy `{name}`: `isolation` must be \"process\" or \"thread\", got {value}"
                        ));
                    }
                },
                key @ ("timeout-ms" | "memory-mb" | "stack-kb" | "max-tool-calls"
                | "max-in-flight" | "call-timeout-ms" | "max-output-bytes") => {
                    let Some(number) = value.as_u64() else {
                        return Err(format!(
                            "policy `{name}`: `{key}` must be a positive integer, got {value}"
                        ));
                    };
                    let slot = strictest.entry(key).or_insert(number);
                    *slot = (*slot).min(number);
                }
                other => tracing::debug!(policy = %name, "ignoring unknown limit `{other}`"),
            }
        }
    }
    let defaults = Limits::default();
    let get = |key: &str| strictest.get(key).copied();
    Ok(Limits {
        timeout: get("timeout-ms").map_or(defaults.timeout, Duration::from_millis),
        memory_bytes: get("memory-mb").map_or(defaults.memory_bytes, |mb| to_usize(mb) << 20),
        stack_bytes: get("stack-kb").map_or(defaults.stack_bytes, |kb| to_usize(kb) << 10),
        max_tool_calls: get("max-tool-calls").map_or(defaults.max_tool_calls, to_u32),
        max_in_flight: get("max-in-flight").map_or(defaults.max_in_flight, to_u32),
        call_timeout: get("call-timeout-ms").map_or(defaults.call_timeout, Duration::from_millis),
        max_output_bytes: get("max-output-bytes").map_or(defaults.max_output_bytes, to_usize),
        isolation: if wants_thread && !wants_process {
            Isolation::Thread
        } else {
            Isolation::Process
        },
    })
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

fn to_u32(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Counts of calls so far, for the policies' budgets.
#[derive(Default)]
struct Counts {
    total: u64,
    by_server: HashMap<String, u64>,
    by_tool: HashMap<(String, String), u64>,
}

/// The sandbox's door: each call passes every policy, then goes to the Hub.
pub struct HubBridge {
    hub: Hub,
    policies: Vec<PolicyPlugin>,
    session: String,
    execution: String,
    counts: Mutex<Counts>,
    audit: Option<crate::audit::AuditLog>,
}

impl HubBridge {
    /// A bridge for one execution of `session`.
    pub fn new(
        hub: Hub,
        policies: Vec<PolicyPlugin>,
        session: String,
        execution: String,
        audit: Option<crate::audit::AuditLog>,
    ) -> Self {
        HubBridge {
            hub,
            policies,
            session,
            execution,
            counts: Mutex::default(),
            audit,
        }
    }

    /// Tool calls made so far.
    pub fn calls(&self) -> u64 {
        self.counts.lock().map(|c| c.total).unwrap_or(0)
    }

    async fn call_tool(
        hub: Hub,
        policies: Vec<PolicyPlugin>,
        context: Value,
        call: ToolCall,
        session: String,
    ) -> Result<Value, String> {
        let spec = hub
            .tool(&call.server, &call.tool)
            .await
            .map_err(|e| e.to_string())?;
        let annotations = spec
            .annotations
            .as_ref()
            .map(|a| serde_json::to_value(a).unwrap_or(Value::Null));
        let request = json!({
            "server": call.server,
            "tool": call.tool,
            "arguments": call.arguments,
            "annotations": annotations.unwrap_or(Value::Null),
            "context": context,
        });
        let mut granted: Option<Duration> = None;
        for policy in &policies {
            let asked = request.clone();
            let verdict = ask(policy, move |policy| policy.check_call(&asked)).await?;
            if verdict.get("allow") != Some(&Value::Bool(true)) {
                let reason = verdict
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("no reason given");
                return Err(format!(
                    "{}/{} was denied by policy `{}`: {reason}",
                    call.server,
                    call.tool,
                    policy.info().name
                ));
            }
            if let Some(ms) = verdict.get("timeout-ms").and_then(Value::as_u64) {
                // A policy may set a tool's timeout, longer or shorter than the default, but never
                // past the time the execution has left; several policies: the shortest.
                let this = Duration::from_millis(ms).min(call.time_left);
                granted = Some(granted.map_or(this, |before| before.min(this)));
            }
        }
        let options = CallOptions {
            session: Some(session),
            timeout: Some(granted.unwrap_or(call.timeout)),
        };
        let result = hub
            .call(&call.server, &call.tool, call.arguments, options)
            .await
            .map_err(|e| e.to_string())?;
        map_result(&call.server, &call.tool, result)
    }
}

impl ToolBridge for HubBridge {
    /// The Hub bounds each call (and cancels it downstream when it runs out).
    fn enforces_timeouts(&self) -> bool {
        true
    }

    fn call(&self, call: ToolCall) -> BoxFuture<'static, Result<Value, String>> {
        let context = {
            let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
            let context = json!({
                "session": self.session,
                "execution": self.execution,
                "calls": counts.total,
                "calls-to-server": counts.by_server.get(&call.server).copied().unwrap_or(0),
                "calls-to-tool": counts.by_tool.get(&(call.server.clone(), call.tool.clone())).copied().unwrap_or(0),
            });
            counts.total += 1;
            *counts.by_server.entry(call.server.clone()).or_default() += 1;
            *counts
                .by_tool
                .entry((call.server.clone(), call.tool.clone()))
                .or_default() += 1;
            context
        };
        let (hub, policies, session) = (
            self.hub.clone(),
            self.policies.clone(),
            self.session.clone(),
        );
        let audit = self.audit.clone();
        let execution = self.execution.clone();
        async move {
            let started = std::time::Instant::now();
            let (server, tool) = (call.server.clone(), call.tool.clone());
            // An error may quote a server's URL or what it answered: redacted before the
            // program (or the audit log) sees it.
            let result = Self::call_tool(hub, policies, context, call, session.clone())
                .await
                .map_err(|error| crate::redact::redact(&error).into_owned());
            if let Some(audit) = audit {
                audit.tool_call(
                    &session,
                    &execution,
                    &server,
                    &tool,
                    started.elapsed(),
                    result.as_ref().err(),
                );
            }
            result
        }
        .boxed()
    }
}

/// A tool's result as the program sees it: `structuredContent` as it is; otherwise each content
/// block, text parsed as JSON when it is JSON, images, audio and resources as content objects;
/// one block is the value itself, several an array. `isError` becomes the call's error.
pub fn map_result(server: &str, tool: &str, result: CallToolResult) -> Result<Value, String> {
    if result.is_error == Some(true) {
        let message: Vec<String> = result
            .content
            .iter()
            .filter_map(|c| c.as_text())
            .map(|t| t.text.clone())
            .collect();
        let message = if message.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            message.join("\n")
        };
        return Err(format!("{server}/{tool}: {message}"));
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    let mut values: Vec<Value> = result.content.iter().map(block_value).collect();
    Ok(match values.len() {
        0 => Value::Null,
        1 => values.remove(0),
        _ => Value::Array(values),
    })
}

fn block_value(block: &ContentBlock) -> Value {
    if let Some(text) = block.as_text() {
        // Only text that looks like JSON is tried: most plain text fails fast either way, but
        // this keeps a long message from being scanned by the parser at all.
        let trimmed = text.text.trim();
        let looks_like_json = trimmed.starts_with(['{', '[', '"'])
            || matches!(trimmed, "null" | "true" | "false")
            || trimmed.parse::<f64>().is_ok();
        if looks_like_json && let Ok(value) = serde_json::from_str(&text.text) {
            return value;
        }
        return Value::String(text.text.clone());
    }
    serde_json::to_value(block).unwrap_or(Value::Null)
}

/// Content blocks a program's result carries: objects shaped like MCP image, audio or resource
/// content. Each is moved out of the JSON into a block of its own and replaced by a note that
/// points at it.
pub fn extract_blocks(value: &mut Value, blocks: &mut Vec<ContentBlock>, depth: usize) {
    if depth > 32 || blocks.len() >= 32 {
        return;
    }
    if let Some(block) = as_block(value) {
        blocks.push(block);
        let index = blocks.len();
        *value = json!({"type": value["type"], "content": format!("see content block {index}")});
        return;
    }
    match value {
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| extract_blocks(item, blocks, depth + 1)),
        Value::Object(fields) => fields
            .values_mut()
            .for_each(|item| extract_blocks(item, blocks, depth + 1)),
        _ => {}
    }
}

fn as_block(value: &Value) -> Option<ContentBlock> {
    let kind = value.get("type")?.as_str()?;
    let shaped = match kind {
        "image" | "audio" => {
            value.get("data").is_some_and(Value::is_string)
                && value.get("mimeType").is_some_and(Value::is_string)
        }
        "resource" => value.get("resource").is_some_and(Value::is_object),
        "resource_link" => value.get("uri").is_some_and(Value::is_string),
        _ => false,
    };
    if !shaped {
        return None;
    }
    serde_json::from_value(value.clone()).ok()
}

/// What the client gets back: the result as JSON text (or the error), the console output, a
/// one-line summary, and any content blocks; all within `max_output_bytes`.
pub fn render(outcome: Outcome, max_output_bytes: usize) -> CallToolResult {
    let mut blocks = Vec::new();
    let (mut body, failed) = match outcome.result {
        Ok(mut value) => {
            extract_blocks(&mut value, &mut blocks, 0);
            (
                serde_json::to_string(&value)
                    .unwrap_or_else(|e| format!("(the result could not be encoded: {e})")),
                false,
            )
        }
        Err(error) => {
            let mut text = String::from(match error.kind {
                ErrorKind::Syntax => "SyntaxError",
                ErrorKind::Runtime => "Uncaught exception",
                ErrorKind::Timeout => "Timeout",
                ErrorKind::Memory => "Out of memory",
                ErrorKind::Stack => "Stack overflow",
                ErrorKind::Limit => "Limit exceeded",
                ErrorKind::Module => "Import error",
                ErrorKind::Cancelled => "Cancelled",
                ErrorKind::Busy => "Busy",
                ErrorKind::Crashed => "Sandbox crashed",
            });
            if let Some((line, column)) = error.position {
                text.push_str(&format!(" at line {line}, column {column}"));
            }
            text.push_str(": ");
            text.push_str(&error.message);
            if let Some(stack) = error.stack.filter(|s| !s.trim().is_empty()) {
                text.push('\n');
                text.push_str(stack.trim_end());
            }
            (text, true)
        }
    };
    let mut logs = String::new();
    for line in &outcome.logs {
        let prefix = if line.level == "log" {
            String::new()
        } else {
            format!("[{}] ", line.level)
        };
        logs.push_str(&prefix);
        logs.push_str(&line.text);
        logs.push('\n');
    }
    let queued = if outcome.queued >= std::time::Duration::from_millis(1) {
        format!(" (after {} ms queued)", outcome.queued.as_millis())
    } else {
        String::new()
    };
    let summary = format!(
        "{} ms{queued} · {} tool call{} · {} failed",
        outcome.duration.saturating_sub(outcome.queued).as_millis(),
        outcome.calls,
        if outcome.calls == 1 { "" } else { "s" },
        outcome.failed_calls
    );
    // The summary always fits; the result comes before the console.
    let budget = max_output_bytes.saturating_sub(summary.len() + 64);
    truncate(&mut body, budget, 0);
    let logs_budget = budget.saturating_sub(body.len());
    truncate(&mut logs, logs_budget, outcome.logs_dropped);
    let mut text = body;
    if !logs.is_empty() {
        text.push_str("\n--- console ---\n");
        text.push_str(logs.trim_end());
    }
    text.push_str("\n--- ");
    text.push_str(&summary);
    text.push_str(" ---");
    // What a downstream answered may quote a configured secret back.
    let text = crate::redact::redact(&text).into_owned();
    let mut content = vec![ContentBlock::text(text)];
    content.extend(blocks);
    if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    }
}

/// Cuts `text` to `budget` bytes (on a char boundary), saying how much was cut, counting
/// `dropped` bytes that never reached it (the sandbox's own cap on console output).
fn truncate(text: &mut String, budget: usize, dropped: usize) {
    if text.len() <= budget && dropped == 0 {
        return;
    }
    let marker_room = 64.min(budget);
    let mut cut = text.len().min(budget - marker_room);
    while cut > 0 && !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let removed = text.len() - cut + dropped;
    text.truncate(cut);
    text.push_str(&format!("…[truncated: {removed} more bytes]"));
}

/// One execution, set up: its limits and its bridge.
pub struct Prepared {
    /// The execution's id, for logs and the audit log.
    pub id: String,
    /// Its limits.
    pub limits: Limits,
    /// Its bridge to the Hub (counting its calls).
    pub bridge: Arc<HubBridge>,
}

/// Sets up one execution of `session`: the policies' limits and a bridge.
pub async fn prepare(runtime: &crate::runtime::Runtime, session: &str) -> Result<Prepared, String> {
    let limits = limits(&runtime.policies, &json!({"session": session}))
        .await
        .map_err(|message| format!("the sandbox policy failed: {message}"))?;
    let id = execution_id();
    let bridge = Arc::new(HubBridge::new(
        runtime.hub.clone(),
        runtime.policies.clone(),
        session.to_owned(),
        id.clone(),
        runtime.audit.clone(),
    ));
    Ok(Prepared { id, limits, bridge })
}

/// The VFS once no server `code` imports is starting, and the limits with the time that took
/// taken from the program's: a server still starting is waited for within the program's time
/// limit, and a program that imports none never waits.
async fn imports_ready(
    runtime: &crate::runtime::Runtime,
    prepared: &Prepared,
    code: &str,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<(Arc<crate::vfs::Snapshot>, Limits), CallToolResult> {
    let deadline = tokio::time::Instant::now() + prepared.limits.timeout;
    let ready = tokio::select! {
        ready = runtime.vfs.ready_for(code, deadline) => ready,
        () = cancel.cancelled() => {
            return Err(CallToolResult::error(vec![ContentBlock::text(
                "Cancelled: while waiting for the servers it imports to start",
            )]));
        }
    };
    let snapshot = ready.map_err(|starting| {
        let starting: Vec<String> = starting
            .iter()
            .map(|folder| format!("`./servers/{folder}`"))
            .collect();
        CallToolResult::error(vec![ContentBlock::text(format!(
            "Timeout: the program imports {} still starting when its {} ms ran out; it did not run",
            starting.join(", "),
            prepared.limits.timeout.as_millis()
        ))])
    })?;
    let mut limits = prepared.limits.clone();
    limits.timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
    Ok((snapshot, limits))
}

/// Runs a prepared execution of `code` to its end and renders what the client gets.
pub async fn run(
    runtime: &crate::runtime::Runtime,
    session: &str,
    prepared: &Prepared,
    code: String,
    cancel: tokio_util::sync::CancellationToken,
) -> CallToolResult {
    let (snapshot, limits) = match imports_ready(runtime, prepared, &code, &cancel).await {
        Ok(ready) => ready,
        Err(refusal) => return refusal,
    };
    let outcome = runtime
        .sandbox()
        .execute(crate::sandbox::Execution {
            source: code,
            limits,
            modules: Arc::new(crate::vfs::Modules(snapshot)),
            bridge: prepared.bridge.clone(),
            cancel,
            client: session.to_owned(),
        })
        .await;
    if let Some(audit) = &runtime.audit {
        let error = outcome.result.as_ref().err().map(|e| e.message.as_str());
        audit.execution(
            session,
            &prepared.id,
            outcome.duration,
            outcome.calls,
            error,
        );
    }
    tracing::info!(
        session,
        execution = %prepared.id,
        ms = outcome.duration.as_millis() as u64,
        calls = outcome.calls,
        ok = outcome.result.is_ok(),
        "execution"
    );
    render(outcome, prepared.limits.max_output_bytes)
}

/// One execution id, unique in this process.
pub fn execution_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!(
        "x{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// Shared handle for the process-wide sandbox (created on first use).
pub type SharedSandbox = Arc<crate::sandbox::Sandbox>;

#[cfg(test)]
mod tests;
