//! `runbyte demo-server`: a small, deterministic MCP server over stdio, with no network.
//!
//! Its tools (in `tools.json`) have the schemas real servers have: nested objects, arrays,
//! enums, optional fields, an `outputSchema`, an image result, and a name that is not a
//! JavaScript identifier. The default `runbyte.toml` starts it through `${RUNBYTE_EXE}`, so a
//! fresh clone has something to talk to.

mod data;

use std::sync::{Arc, Mutex};

use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    },
    service::RequestContext,
};
use serde_json::{Value, json};

use data::{Issue, Tracker};

/// The tools the demo server lists, as JSON.
pub const TOOLS_JSON: &str = include_str!("tools.json");

/// Serves the demo server over this process's stdin and stdout until the client leaves.
pub async fn serve_stdio() -> anyhow::Result<()> {
    let server = DemoServer::new()?;
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}

/// The demo server's state: its tool list and an issue tracker that lives as long as the process.
#[derive(Clone)]
pub struct DemoServer {
    tools: Arc<Vec<Tool>>,
    tracker: Arc<Mutex<Tracker>>,
}

impl DemoServer {
    /// A server with the fixed tool list and seed data.
    pub fn new() -> anyhow::Result<Self> {
        let tools: Vec<Tool> = serde_json::from_str(TOOLS_JSON)?;
        Ok(DemoServer {
            tools: Arc::new(tools),
            tracker: Arc::new(Mutex::new(Tracker::seeded())),
        })
    }

    fn call(&self, name: &str, args: &Value) -> Result<CallToolResult, String> {
        let text =
            |value: Value| CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
        let mut tracker = self
            .tracker
            .lock()
            .map_err(|_| "tracker lock poisoned".to_owned())?;
        match name {
            "search_issues" => {
                let found = tracker.search(
                    str_arg(args, "query").unwrap_or_default(),
                    str_arg(args, "state").unwrap_or("open"),
                    &strings(args, "labels"),
                    args.get("limit").and_then(Value::as_u64).unwrap_or(10) as usize,
                );
                Ok(CallToolResult::structured(found))
            }
            "get_issue" => {
                let id = int_arg(args, "id")?;
                tracker
                    .get(id)
                    .map(|issue| text(issue.detail()))
                    .ok_or_else(|| format!("issue {id} not found"))
            }
            "create_issue" => {
                let title = str_arg(args, "title").ok_or("`title` is required")?;
                let issue: &Issue = tracker.create(
                    title,
                    str_arg(args, "body").unwrap_or_default(),
                    strings(args, "labels"),
                    args.pointer("/assignee/login").and_then(Value::as_str),
                );
                Ok(text(issue.detail()))
            }
            "close_issue" => {
                let id = int_arg(args, "id")?;
                let issue = tracker
                    .close(id, str_arg(args, "comment"))
                    .ok_or_else(|| format!("issue {id} not found"))?;
                Ok(text(issue.detail()))
            }
            "get_weather" => {
                let city = args
                    .pointer("/location/city")
                    .and_then(Value::as_str)
                    .ok_or("`location.city` is required")?;
                let units = str_arg(args, "units").unwrap_or("metric");
                data::weather(city, units)
                    .map(text)
                    .ok_or_else(|| format!("no weather for `{city}` in the demo's table"))
            }
            "add-numbers" => {
                let a = args
                    .get("a")
                    .and_then(Value::as_f64)
                    .ok_or("`a` must be a number")?;
                let b = args
                    .get("b")
                    .and_then(Value::as_f64)
                    .ok_or("`b` must be a number")?;
                Ok(text(json!(a + b)))
            }
            "echo" => {
                let message = str_arg(args, "message").ok_or("`message` is required")?;
                Ok(CallToolResult::success(vec![ContentBlock::text(message)]))
            }
            "make_badge" => {
                let status = str_arg(args, "status").ok_or("`status` is required")?;
                Ok(CallToolResult::success(vec![ContentBlock::image(
                    data::badge_png(status == "passing"),
                    "image/png",
                )]))
            }
            other => Err(format!("unknown tool `{other}`")),
        }
    }
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

fn int_arg(args: &Value, key: &str) -> Result<u64, String> {
    args.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("`{key}` must be a positive integer"))
}

fn strings(args: &Value, key: &str) -> Vec<String> {
    args.get(key)
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl ServerHandler for DemoServer {
    fn get_info(&self) -> ServerConfig {
        let greeting = std::env::var("GREETING").unwrap_or_else(|_| "Hi".to_owned());
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("runbyte-demo", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(format!(
            "{greeting}! A demo issue tracker and weather table, for trying Runbyte without other servers."
        ));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        if request.name == "sleep" {
            let ms = args
                .get("ms")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(600_000);
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            return Ok(CallToolResult::success(vec![ContentBlock::text(
                json!({"slept_ms": ms}).to_string(),
            )])
            .into());
        }
        let result = match self.call(&request.name, &args) {
            Ok(result) => result,
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        };
        Ok(result.into())
    }
}
