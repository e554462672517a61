//! The sandbox's door to the Hub: each tool call counted, passed through every policy, sent,
//! and its result turned into the value the program sees.

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{Arc, Mutex},
};

use futures::{FutureExt, future::BoxFuture};
use rmcp::model::{CallToolResult, ContentBlock};
use runbyte_plugin_api::wire;
use serde_json::Value;

use crate::{
    hub::{CallOptions, Hub},
    plugin::PolicyPlugin,
    relay::Asker,
    sandbox::{ToolBridge, ToolCall},
};

/// Counts of calls so far, for the policies' budgets.
#[derive(Default)]
struct Counts {
    total: u64,
    by_server: HashMap<String, u64>,
    by_tool: HashMap<(String, String), u64>,
}

impl Counts {
    /// Counts one call to `server`/`tool`, giving the counts from before it.
    fn count(&mut self, server: &str, tool: &str) -> Position {
        let calls = self.total;
        self.total += 1;
        let to_server = self.by_server.entry(server.to_owned()).or_default();
        let calls_to_server = *to_server;
        *to_server += 1;
        let to_tool = self
            .by_tool
            .entry((server.to_owned(), tool.to_owned()))
            .or_default();
        let calls_to_tool = *to_tool;
        *to_tool += 1;
        Position {
            calls,
            calls_to_server,
            calls_to_tool,
        }
    }
}

/// Where one call stands in its execution: the calls made before it.
#[derive(Clone, Copy)]
struct Position {
    calls: u64,
    calls_to_server: u64,
    calls_to_tool: u64,
}

/// The sandbox's door: each call passes every policy, then goes to the Hub.
pub struct HubBridge {
    hub: Hub,
    policies: Vec<PolicyPlugin>,
    session: String,
    execution: String,
    counts: Mutex<Counts>,
    audit: Option<crate::audit::AuditLog>,
    /// Who answers what a tool or a policy asks of the user.
    asker: Option<Arc<dyn Asker>>,
}

impl HubBridge {
    /// A bridge for one execution of `session`.
    pub fn new(
        hub: Hub,
        policies: Vec<PolicyPlugin>,
        session: String,
        execution: String,
        audit: Option<crate::audit::AuditLog>,
        asker: Option<Arc<dyn Asker>>,
    ) -> Self {
        HubBridge {
            hub,
            policies,
            session,
            execution,
            counts: Mutex::default(),
            audit,
            asker,
        }
    }

    /// Tool calls made so far.
    pub fn calls(&self) -> u64 {
        self.counts.lock().map(|c| c.total).unwrap_or(0)
    }

    async fn call_tool(
        hub: Hub,
        policies: Vec<PolicyPlugin>,
        asker: Option<Arc<dyn Asker>>,
        (session, execution): (&str, &str),
        position: Position,
        call: ToolCall,
    ) -> Result<Value, String> {
        let spec = hub
            .tool(&call.server, &call.tool)
            .await
            .map_err(|e| e.to_string())?;
        let granted = if policies.is_empty() {
            None
        } else {
            let annotations = spec
                .annotations
                .as_ref()
                .map(|a| Cow::Owned(serde_json::to_value(a).unwrap_or(Value::Null)));
            let asked = wire::Call {
                server: Cow::Borrowed(&call.server),
                tool: Cow::Borrowed(&call.tool),
                arguments: Cow::Borrowed(&call.arguments),
                annotations,
                context: wire::CallContext {
                    session: Cow::Borrowed(session),
                    execution: Cow::Borrowed(execution),
                    calls: position.calls,
                    calls_to_server: position.calls_to_server,
                    calls_to_tool: position.calls_to_tool,
                },
            };
            crate::policy::check_call(&policies, &asked, call.time_left, asker.as_deref()).await?
        };
        let options = CallOptions {
            session: Some(session.to_owned()),
            timeout: Some(granted.unwrap_or(call.timeout)),
            asker,
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
        let position = self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .count(&call.server, &call.tool);
        let (hub, policies, session) = (
            self.hub.clone(),
            self.policies.clone(),
            self.session.clone(),
        );
        let audit = self.audit.clone();
        let execution = self.execution.clone();
        let asker = self.asker.clone();
        async move {
            let started = std::time::Instant::now();
            let (server, tool) = (call.server.clone(), call.tool.clone());
            // An error may quote a server's URL or what it answered: redacted before the
            // program (or the audit log) sees it.
            let result = Self::call_tool(
                hub,
                policies,
                asker,
                (session.as_str(), execution.as_str()),
                position,
                call,
            )
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
