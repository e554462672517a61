//! One downstream connection: connecting, the client handler, and calls.

// MCP logging is deprecated from the 2026-07-28 revision (SEP-2577), but the revisions Runbyte
// speaks downstream (up to 2025-11-25) still send `notifications/message`.
#![allow(deprecated)]

use std::{sync::Arc, time::Duration};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{
        ClientCapabilities, ClientConfig, ClientRequest, CustomResult, Implementation,
        ListToolsRequest, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
        ServerResult, Tool,
    },
    service::{NotificationContext, RunningService},
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{
    config::ServerConfig,
    plugin::{Pump, TransportPlugin},
    pump::{CloseReason, OnGarbage, PumpTransport, TOO_DEEP},
};

/// The most pages one listing follows: a server whose cursors never end is cut off there.
const MAX_PAGES: usize = 1000;

/// A server's tools as last listed, with what was wrong with the ones that had to be mended or
/// left out (one line each, naming the tool).
#[derive(Debug, Clone, Default)]
pub struct Listed {
    /// The tools, each usable.
    pub tools: Arc<Vec<Tool>>,
    /// What was mended or left out.
    pub warnings: Arc<Vec<String>>,
}

/// The client side of one downstream connection: it passes `list_changed` on to the hub and
/// the server's log messages into ours.
#[derive(Clone)]
pub(super) struct HubClient {
    server: String,
    changes: mpsc::UnboundedSender<String>,
}

impl ClientHandler for HubClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("runbyte", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changes.send(self.server.clone());
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let server = &self.server;
        let data = params.data;
        match params.level {
            LoggingLevel::Debug => tracing::debug!(server, "{data}"),
            LoggingLevel::Info | LoggingLevel::Notice => tracing::info!(server, "{data}"),
            LoggingLevel::Warning => tracing::warn!(server, "{data}"),
            _ => tracing::error!(server, "{data}"),
        }
    }
}

/// A live connection to one downstream server.
pub struct Connection {
    pub(super) service: RunningService<RoleClient, HubClient>,
    pub(super) listed: std::sync::RwLock<Listed>,
    pub(super) reason: CloseReason,
    pump: Pump,
}

impl Connection {
    /// Whether the server is still there.
    pub fn is_alive(&self) -> bool {
        !self.service.is_closed() && self.reason.get().is_none()
    }

    /// Why the connection ended ("exited with status 3; stderr: ..."), once it has.
    pub fn close_reason(&self) -> Option<String> {
        self.reason.get()
    }

    /// The tools as last listed.
    pub fn tools(&self) -> Arc<Vec<Tool>> {
        self.listed().tools
    }

    /// The tools as last listed, with the warnings about them.
    pub fn listed(&self) -> Listed {
        self.listed
            .read()
            .map(|listed| listed.clone())
            .unwrap_or_default()
    }

    /// Lists the tools again (following pagination) and keeps the answer. Each tool is read on
    /// its own: one whose `inputSchema` is missing, null, not an object or too deep is served
    /// untyped, one that cannot be read at all is left out, each with a warning.
    pub async fn relist(&self) -> Result<Listed, String> {
        let mut tools = Vec::new();
        let mut warnings = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_PAGES {
            let request = ClientRequest::ListToolsRequest(ListToolsRequest {
                method: Default::default(),
                params: Some(PaginatedRequestParams::default().with_cursor(cursor)),
                extensions: Default::default(),
            });
            let answer = self
                .service
                .peer()
                .send_request(request)
                .await
                .map_err(|e| e.to_string())?;
            cursor = match answer {
                ServerResult::ListToolsResult(page) => {
                    tools.extend(page.tools);
                    page.next_cursor
                }
                // Not a valid list as a whole (rmcp reads it strictly): tool by tool.
                ServerResult::CustomResult(CustomResult(page)) => {
                    read_page(&page, &mut tools, &mut warnings)?
                }
                _ => return Err("the answer to `tools/list` holds no tools".to_owned()),
            };
            if cursor.is_none() {
                break;
            }
        }
        for warning in &warnings {
            tracing::warn!(server = %self.service.service().server, "{warning}");
        }
        let listed = Listed {
            tools: Arc::new(tools),
            warnings: Arc::new(warnings),
        };
        if let Ok(mut slot) = self.listed.write() {
            *slot = listed.clone();
        }
        Ok(listed)
    }

    /// Ends the connection: the service stops and the transport closes the pump (a child process
    /// is stopped, an HTTP session deleted).
    pub async fn close(&self) {
        self.service.cancellation_token().cancel();
        let pump = self.pump.clone();
        let _ = tokio::task::spawn_blocking(move || pump.close()).await;
    }
}

/// Why a connection that was being opened when the gateway stopped was not kept.
pub(super) const STOPPED: &str = "Runbyte is shutting down";

/// What the transport plugin is told to connect to: the server's table, plus its name.
fn target(name: &str, config: &ServerConfig, fallback: bool) -> serde_json::Value {
    json!({
        "name": name,
        "command": config.command,
        "args": config.args,
        "env": config.env,
        "cwd": config.cwd,
        "url": config.url,
        "headers": config.headers,
        "fallback": if fallback { Some("sse") } else { None },
        "max-message-bytes": config.max_message_bytes,
    })
}

/// Opens a connection: the transport's pump, the MCP handshake, the first `tools/list`.
pub(super) async fn connect(
    name: &str,
    config: &ServerConfig,
    transport: TransportPlugin,
    fallback: bool,
    init_timeout: Duration,
    changes: mpsc::UnboundedSender<String>,
    stop: &CancellationToken,
) -> Result<Connection, String> {
    let target = target(name, config, fallback);
    let pump = tokio::task::spawn_blocking(move || transport.connect(&target))
        .await
        .map_err(|e| format!("the connect task failed: {e}"))?
        .map_err(|e| e.to_string())?;
    let transport =
        PumpTransport::<RoleClient>::new(pump.clone(), name.to_owned(), OnGarbage::Recover);
    let reason = transport.close_reason();
    let client = HubClient {
        server: name.to_owned(),
        changes,
    };
    let started = tokio::select! {
        started = tokio::time::timeout(init_timeout, client.serve(transport)) => started,
        () = stop.cancelled() => {
            close_pump(&pump).await;
            return Err(STOPPED.to_owned());
        }
    };
    let closed_why =
        |reason: &CloseReason| reason.get().map(|r| format!(": {r}")).unwrap_or_default();
    let service = match started {
        Ok(Ok(service)) => service,
        Ok(Err(error)) => {
            close_pump(&pump).await;
            // Give the reader a moment to collect the exit status and stderr.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Err(match reason.get() {
                Some(why) => format!("initialize failed: the server {why}"),
                None => format!("initialize failed: {error}"),
            });
        }
        Err(_) => {
            close_pump(&pump).await;
            return Err(format!(
                "did not answer `initialize` within {} ms{}",
                init_timeout.as_millis(),
                closed_why(&reason)
            ));
        }
    };
    let connection = Connection {
        service,
        listed: Default::default(),
        reason,
        pump,
    };
    let listed = tokio::select! {
        listed = tokio::time::timeout(init_timeout, connection.relist()) => listed,
        () = stop.cancelled() => {
            connection.close().await;
            return Err(STOPPED.to_owned());
        }
    };
    match listed {
        Ok(Ok(_)) => Ok(connection),
        Ok(Err(error)) => {
            connection.close().await;
            Err(format!(
                "tools/list failed: {error}{}",
                closed_why(&connection.reason)
            ))
        }
        Err(_) => {
            connection.close().await;
            Err(format!(
                "did not answer `tools/list` within {} ms",
                init_timeout.as_millis()
            ))
        }
    }
}

async fn close_pump(pump: &Pump) {
    let pump = pump.clone();
    let _ = tokio::task::spawn_blocking(move || pump.close()).await;
}

/// Reads one page of a `tools/list` answer that rmcp could not read as a whole, tool by tool;
/// the cursor of the next page.
fn read_page(
    page: &Value,
    tools: &mut Vec<Tool>,
    warnings: &mut Vec<String>,
) -> Result<Option<String>, String> {
    let Some(items) = page.get("tools").and_then(Value::as_array) else {
        return Err("the answer to `tools/list` has no `tools` array".to_owned());
    };
    for (position, item) in items.iter().enumerate() {
        match read_tool(item) {
            Ok((tool, None)) => tools.push(tool),
            Ok((tool, Some(warning))) => {
                warnings.push(format!("`{}`: {warning}", tool.name));
                tools.push(tool);
            }
            Err(warning) => {
                let name = item
                    .get("name")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("tool #{}", position + 1), |n| format!("`{n}`"));
                warnings.push(format!("{name}: {warning}; it is left out"));
            }
        }
    }
    Ok(page
        .get("nextCursor")
        .and_then(Value::as_str)
        .map(str::to_owned))
}

/// One tool of a listing: as it is, or mended (with what was wrong), or why it cannot be used.
fn read_tool(item: &Value) -> Result<(Tool, Option<String>), String> {
    if let Ok(tool) = serde_json::from_value::<Tool>(item.clone()) {
        return Ok((tool, None));
    }
    let Value::Object(fields) = item else {
        return Err("it is not an object".to_owned());
    };
    if !fields.get("name").is_some_and(Value::is_string) {
        return Err("it has no name".to_owned());
    }
    let mut fields = fields.clone();
    let mut wrong = Vec::new();
    let schema_problem = match fields.get("inputSchema") {
        None => Some("it has no inputSchema".to_owned()),
        Some(Value::Null) => Some("its inputSchema is null".to_owned()),
        Some(Value::String(marker)) if marker == TOO_DEEP => Some(format!(
            "its inputSchema nests deeper than the JSON parser allows ({TOO_DEEP})"
        )),
        Some(Value::Object(_)) => None,
        Some(other) => Some(format!(
            "its inputSchema is not an object but {}",
            kind(other)
        )),
    };
    if let Some(problem) = schema_problem {
        fields.insert("inputSchema".to_owned(), json!({"type": "object"}));
        wrong.push(format!(
            "{problem}, so it is served untyped (any arguments object, unchecked)"
        ));
    }
    if fields
        .get("outputSchema")
        .is_some_and(|schema| !schema.is_object() && !schema.is_null())
    {
        fields.remove("outputSchema");
        wrong.push("its outputSchema is unusable and is ignored".to_owned());
    }
    for optional in [
        "annotations",
        "icons",
        "_meta",
        "title",
        "description",
        "execution",
    ] {
        let mut trial = fields.clone();
        trial.remove(optional);
        if fields.contains_key(optional)
            && serde_json::from_value::<Tool>(Value::Object(fields.clone())).is_err()
            && serde_json::from_value::<Tool>(Value::Object(trial)).is_ok()
        {
            fields.remove(optional);
            wrong.push(format!("its `{optional}` is malformed and is ignored"));
        }
    }
    let tool = serde_json::from_value::<Tool>(Value::Object(fields)).map_err(|e| e.to_string())?;
    Ok((tool, (!wrong.is_empty()).then(|| wrong.join("; "))))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn each_tool_of_a_page_is_read_on_its_own() {
        let page = json!({"tools": [
            {"name": "fine", "inputSchema": {"type": "object"}},
            {"name": "null", "inputSchema": null},
            {"name": "missing"},
            {"name": "string", "inputSchema": "nope"},
            {"name": "deep", "inputSchema": TOO_DEEP},
            {"name": "bad_output", "inputSchema": {}, "outputSchema": 3},
            {"inputSchema": {}},
            7
        ], "nextCursor": "2"});
        let (mut tools, mut warnings) = (Vec::new(), Vec::new());
        let cursor = read_page(&page, &mut tools, &mut warnings).unwrap();
        assert_eq!(cursor.as_deref(), Some("2"));
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            ["fine", "null", "missing", "string", "deep", "bad_output"]
        );
        assert_eq!(tools[1].input_schema.get("type"), Some(&json!("object")));
        assert!(tools[5].output_schema.is_none());
        assert_eq!(warnings.len(), 7, "{warnings:?}");
        assert!(warnings[0].starts_with("`null`: its inputSchema is null"));
        assert!(warnings[3].contains("nests deeper"));
        assert!(warnings[5].starts_with("tool #7: it has no name; it is left out"));
        assert!(warnings[6].starts_with("tool #8: it is not an object"));
    }
}
