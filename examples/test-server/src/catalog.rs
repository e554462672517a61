//! The tools the server lists: the normal ones, and those that modes add.
//!
//! Tools that modes add have no behaviour of their own: a call answers with the tool's name and
//! the arguments it got, so that a test can check which name reached the server.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::cli::{Mode, Settings};

mod extra;
use extra::{complex_schema_tools, hostile_tools, many_tool, odd_name_tool};

/// Names of the tools added by `--mode odd-names`. `a-b` and `a.b` collide once cleaned into
/// identifiers.
pub const ODD_NAMES: &[&str] = &[
    "get-user",
    "list.items",
    "2fa",
    "delete",
    "with space",
    "ünïcode",
    "a-b",
    "a.b",
];

/// The tools `--mode broken-schemas` slips into every `tools/list` answer (see `stdio.rs`).
pub const BROKEN: &[&str] = &[
    "broken_null",
    "broken_missing",
    "broken_string",
    "broken_deep",
];

/// How deep `broken_deep`'s schema nests: past serde_json's recursion limit (128).
const BROKEN_DEPTH: usize = 200;

/// The raw JSON of the tools `--mode broken-schemas` adds: not expressible as rmcp `Tool`s.
pub fn broken_tools_json() -> Vec<String> {
    let mut deep = String::new();
    for _ in 0..BROKEN_DEPTH / 2 {
        deep.push_str(r#"{"type":"object","properties":{"x":"#);
    }
    deep.push_str(r#"{"type":"string"}"#);
    for _ in 0..BROKEN_DEPTH / 2 {
        deep.push_str("}}");
    }
    vec![
        r#"{"name":"broken_null","description":"inputSchema is null","inputSchema":null}"#
            .to_owned(),
        r#"{"name":"broken_missing","description":"no inputSchema"}"#.to_owned(),
        r#"{"name":"broken_string","description":"inputSchema is a string","inputSchema":"nope"}"#
            .to_owned(),
        format!(
            r#"{{"name":"broken_deep","description":"inputSchema nests {BROKEN_DEPTH} levels","inputSchema":{deep}}}"#
        ),
    ]
}

/// Every tool served at start, in listing order: the normal tools, then those of the modes.
pub fn fixed_tools(settings: &Settings) -> Vec<Tool> {
    let mut tools = if settings.has(Mode::GeneratedOnly) {
        Vec::new()
    } else {
        normal_tools()
    };
    if settings.has(Mode::OddNames) {
        tools.extend(ODD_NAMES.iter().map(|name| odd_name_tool(name)));
    }
    if settings.has(Mode::HostileMetadata) {
        tools.extend(hostile_tools());
    }
    if settings.has(Mode::ComplexSchemas) {
        tools.extend(complex_schema_tools());
    }
    if settings.has(Mode::Storm) {
        tools.push(Tool::new(
            "storm",
            "Sends `count` notifications/tools/list_changed at once.",
            schema(
                json!({"type": "object", "properties": {"count": {"type": "integer"}},
                "required": ["count"]}),
            ),
        ));
        tools.push(Tool::new(
            "list_count",
            "How many tools/list requests arrived so far.",
            no_arguments(),
        ));
    }
    if settings.has(Mode::Apps) {
        tools.extend(crate::apps::tools());
    }
    if settings.has(Mode::Conformance) {
        tools.extend(crate::conformance::tools());
    }
    if settings.has(Mode::Github) {
        tools.push(github_tool());
    }
    tools.extend((0..settings.extra_tools).map(many_tool));
    tools
}

/// `get_file_contents` as the GitHub MCP server (github/github-mcp-server) lists it, trimmed
/// to `owner`, `repo` and `path`: a real server's read-only tool, for a test to poison through
/// [`crate::server::TOOL_CHANGES_VAR`] as a rug pull would.
pub fn github_tool() -> Tool {
    Tool::new(
        "get_file_contents",
        "Get the contents of a file or directory from a GitHub repository",
        schema(json!({
            "type": "object",
            "properties": {
                "owner": {
                    "type": "string",
                    "description": "Repository owner (username or organization)"
                },
                "repo": {"type": "string", "description": "Repository name"},
                "path": {
                    "type": "string",
                    "description": "Path to file/directory (directories must end with a slash '/')"
                }
            },
            "required": ["owner", "repo"]
        })),
    )
    .with_title("Get file or directory contents")
    .with_annotations(ToolAnnotations::with_title("Get file or directory contents").read_only(true))
}

/// The tool that `change_tools` adds as its `k`-th.
pub fn added_tool(k: usize) -> Tool {
    Tool::new(
        format!("added_{k}"),
        format!("Added by change_tools call number {k}; echoes its arguments."),
        schema(json!({"type": "object", "properties": {"value": {"type": "string"}}})),
    )
}

/// Turns a JSON object literal into a schema; anything else becomes an empty object schema.
fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

fn no_arguments() -> Arc<JsonObject> {
    schema(json!({"type": "object", "properties": {}}))
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(true)
        .idempotent(true)
        .open_world(false)
}

fn normal_tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "echo",
            "Returns the message as text.",
            schema(json!({
                "type": "object",
                "properties": {"message": {"type": "string", "description": "Text to echo back."}},
                "required": ["message"]
            })),
        )
        .with_annotations(read_only()),
        Tool::new(
            "add",
            "Adds two numbers; returns {\"sum\": a+b} as JSON text.",
            schema(json!({
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"]
            })),
        )
        .with_annotations(read_only()),
        Tool::new(
            "slow",
            "Sleeps `ms` milliseconds. With a progressToken it sends `steps` progress \
             notifications (default 5) on the way.",
            schema(json!({
                "type": "object",
                "properties": {
                    "ms": {"type": "integer", "minimum": 0, "maximum": 600000},
                    "steps": {"type": "integer", "minimum": 1, "maximum": 1000}
                },
                "required": ["ms"]
            })),
        ),
        Tool::new(
            "huge",
            "Returns a text block of exactly `bytes` bytes (at most 256 MiB).",
            schema(json!({
                "type": "object",
                "properties": {"bytes": {"type": "integer", "minimum": 0, "maximum": 268435456}},
                "required": ["bytes"]
            })),
        ),
        Tool::new(
            "crash",
            "Ends the server process at once with exit code `code` (default 1); no answer is sent.",
            schema(json!({
                "type": "object",
                "properties": {"code": {"type": "integer", "minimum": 0, "maximum": 255}}
            })),
        )
        .with_annotations(ToolAnnotations::new().destructive(true)),
        Tool::new(
            "fail",
            "Returns a result with isError: true and the message as text.",
            schema(json!({
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"]
            })),
        ),
        Tool::new(
            "rpc_error",
            "Answers with a JSON-RPC error instead of a result (default code -32603).",
            schema(json!({
                "type": "object",
                "properties": {"code": {"type": "integer"}, "message": {"type": "string"}}
            })),
        ),
        Tool::new(
            "structured",
            "Returns structuredContent {n, squares: [1, 4, ..., n*n]} (n at most 10000).",
            schema(json!({
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 10000}},
                "required": ["n"]
            })),
        )
        .with_raw_output_schema(schema(json!({
            "type": "object",
            "properties": {
                "n": {"type": "integer"},
                "squares": {"type": "array", "items": {"type": "integer"}}
            },
            "required": ["n", "squares"]
        })))
        .with_annotations(read_only()),
        Tool::new(
            "image",
            "Returns an image content block: a 1x1 PNG.",
            no_arguments(),
        )
        .with_annotations(read_only()),
        Tool::new(
            "mixed",
            "Returns three content blocks: a text, an image and an embedded text resource.",
            no_arguments(),
        )
        .with_annotations(read_only()),
        Tool::new(
            "change_tools",
            "Adds a tool added_<k> (or, given `tool` and `description`, gives that tool the \
             description instead) and sends notifications/tools/list_changed.",
            schema(json!({
                "type": "object",
                "properties": {"tool": {"type": "string"}, "description": {"type": "string"}},
            })),
        ),
        Tool::new(
            "stderr",
            "Writes `text` to stderr, `lines` times (default 1, at most 1000000).",
            schema(json!({
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "lines": {"type": "integer", "minimum": 0, "maximum": 1000000}
                },
                "required": ["text"]
            })),
        ),
        Tool::new(
            "env",
            "Returns the environment variable `name` as JSON (a string, or null when unset); \
             without `name`, the sorted names of all variables.",
            schema(json!({"type": "object", "properties": {"name": {"type": "string"}}})),
        )
        .with_annotations(read_only()),
        Tool::new(
            "cwd",
            "Returns the server's working directory.",
            no_arguments(),
        )
        .with_annotations(read_only()),
        Tool::new("pid", "Returns the server's process id.", no_arguments())
            .with_annotations(read_only()),
        Tool::new(
            "spawn_grandchild",
            "Spawns `sleep 300` in the server's process group and returns its pid.",
            no_arguments(),
        ),
        Tool::new(
            "hang",
            "Never answers. A notifications/cancelled for it ends it and is counted.",
            no_arguments(),
        ),
        Tool::new(
            "cancelled_count",
            "Returns how many notifications/cancelled the server has received.",
            no_arguments(),
        )
        .with_annotations(read_only()),
        Tool::new(
            "calls_count",
            "Returns how many tools/call requests the server has received, this one included.",
            no_arguments(),
        )
        .with_annotations(read_only()),
        Tool::new(
            "meta",
            "Returns the request's `_meta` as JSON text (a trace context sent with the call \
             shows there).",
            no_arguments(),
        )
        .with_annotations(read_only()),
        Tool::new(
            "ask",
            "Asks the client `message` mid-call (kind \"elicit\", the default: a form \
             elicitation with one string `answer`; kind \"sample\": a sampling request) and \
             returns the client's result as JSON text. Before 2026-07-28 it sends the client the \
             request; on 2026-07-28 it answers with an InputRequiredResult (key `answer`).",
            schema(json!({
                "type": "object",
                "properties": {
                    "message": {"type": "string", "description": "The question to ask."},
                    "kind": {
                        "type": "string",
                        "enum": ["elicit", "sample"],
                        "description": "elicit (default) or sample."
                    }
                },
                "required": ["message"]
            })),
        ),
    ]
}

#[cfg(test)]
mod tests;
