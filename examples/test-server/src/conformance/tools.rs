//! The fixture tools that finish in one call: content of each kind, errors, progress, logging,
//! requests to the client on a session, the list-change triggers, and the schema fixtures.

use std::time::Duration;

use rmcp::model::{
    CallToolResult, ContentBlock, InputRequest, JsonObject, ProgressNotificationParam,
    ResourceContents, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::{
    ask_session, bump, client_capabilities, from_json, is_stateless, notify_prompts_changed,
    notify_resource_updated, notify_resources_changed, object,
};
use crate::calls::PNG_BASE64;
use crate::server::{State, lock};

/// A mono 8 kHz 8-bit WAV of eight silent samples, base64.
pub const WAV_BASE64: &str =
    "UklGRiwAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQgAAACAgICAgICAgA==";

/// The tools that [`call`] runs.
pub const NAMES: &[&str] = &[
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_error_handling",
    "test_tool_with_progress",
    "test_tool_with_logging",
    "test_logging_tool",
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "test_trigger_tool_change",
    "test_trigger_prompt_change",
    "test_trigger_resource_change",
    "test_trigger_resource_update",
    "test_custom_header",
    "json_schema_2020_12_tool",
    "test_missing_capability",
    "test_streaming_elicitation",
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
];

/// Pause between the progress and log notifications of one call, as the suite describes.
const STEP: Duration = Duration::from_millis(50);

/// Every fixture tool, in listing order, as the suite describes them.
pub fn tools() -> Vec<Tool> {
    let none = json!({"type": "object", "properties": {}});
    let string = |description: &str| json!({"type": "string", "description": description});
    let listed = json!([
        {"name": "test_simple_text", "description": "Returns one text block.", "inputSchema": none},
        {"name": "test_image_content", "description": "Returns one image block (a 1x1 PNG).", "inputSchema": none},
        {"name": "test_audio_content", "description": "Returns one audio block (audio/wav).", "inputSchema": none},
        {"name": "test_embedded_resource", "description": "Returns one embedded text resource.", "inputSchema": none},
        {"name": "test_multiple_content_types", "description": "Returns a text, an image and an embedded JSON resource.", "inputSchema": none},
        {"name": "test_error_handling", "description": "Always fails: a result with isError true.", "inputSchema": none},
        {"name": "test_tool_with_progress", "description": "Sends progress 0, 50 and 100 of 100, 50 ms apart, when the call has a progressToken.", "inputSchema": none},
        {"name": "test_tool_with_logging", "description": "Sends three info log messages, 50 ms apart.", "inputSchema": none},
        {"name": "test_logging_tool", "description": "Sends three info log messages, only where the level allows (2026-07-28: only when _meta carries a logLevel).", "inputSchema": none},
        {"name": "test_sampling", "description": "Asks the client for sampling/createMessage with the prompt (sessions).",
         "inputSchema": {"type": "object", "properties": {"prompt": string("The prompt to send to the LLM")}, "required": ["prompt"]}},
        {"name": "test_elicitation", "description": "Asks the client for elicitation/create (username, email) with the message (sessions).",
         "inputSchema": {"type": "object", "properties": {"message": string("The message to show the user")}, "required": ["message"]}},
        {"name": "test_elicitation_sep1034_defaults", "description": "Elicitation whose schema has a default for each primitive type (SEP-1034).", "inputSchema": none},
        {"name": "test_elicitation_sep1330_enums", "description": "Elicitation whose schema has the five enum forms (SEP-1330).", "inputSchema": none},
        {"name": "test_trigger_tool_change", "description": "Adds a tool and sends notifications/tools/list_changed.", "inputSchema": none},
        {"name": "test_trigger_prompt_change", "description": "Adds a prompt and sends notifications/prompts/list_changed.", "inputSchema": none},
        {"name": "test_trigger_resource_change", "description": "Adds a resource and sends notifications/resources/list_changed.", "inputSchema": none},
        {"name": "test_trigger_resource_update", "description": "Sends notifications/resources/updated for `uri` (default test://watched-resource) to the sessions, if one subscribed to it, and to the listen streams that asked for it.",
         "inputSchema": {"type": "object", "properties": {"uri": string("The resource that changed")}}},
        {"name": "test_custom_header", "description": "Echoes `region`, which travels in the Mcp-Param-Region header too (SEP-2243).",
         "inputSchema": {"type": "object", "properties": {
             "region": {"type": "string", "description": "A region, mirrored in a header", "x-mcp-header": "Region"},
             "query": string("Travels in the body only")
         }, "required": ["region"]}},
        {"name": "json_schema_2020_12_tool", "description": "Tool with JSON Schema 2020-12 features", "inputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                                  "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
            "properties": {
                "name": {"type": "string"},
                "address": {"$ref": "#/$defs/address"},
                "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                "phone": {"type": "string"},
                "email": {"type": "string"}
            },
            "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
            "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
            "then": {"required": ["phone"]},
            "else": {"required": ["email"]},
            "additionalProperties": false
        }},
        {"name": "test_missing_capability", "description": "Needs the client's sampling capability: without it, error -32021.", "inputSchema": none},
        {"name": "test_streaming_elicitation", "description": "Asks for elicitation: an InputRequiredResult on 2026-07-28, never a request on the response stream.", "inputSchema": none},
        {"name": "test_input_required_result_elicitation", "description": "InputRequiredResult: elicitation `user_name`; the retry gets `Hello, <name>!`.", "inputSchema": none},
        {"name": "test_input_required_result_sampling", "description": "InputRequiredResult: sampling `capital_question`.", "inputSchema": none},
        {"name": "test_input_required_result_list_roots", "description": "InputRequiredResult: roots/list `client_roots`.", "inputSchema": none},
        {"name": "test_input_required_result_request_state", "description": "InputRequiredResult with a signed requestState; the retry gets `state-ok`.", "inputSchema": none},
        {"name": "test_input_required_result_multiple_inputs", "description": "InputRequiredResult: elicitation, sampling and roots/list at once.", "inputSchema": none},
        {"name": "test_input_required_result_multi_round", "description": "Two rounds of InputRequiredResult (step1, step2), each with its own signed requestState.", "inputSchema": none},
        {"name": "test_input_required_result_tampered_state", "description": "InputRequiredResult with a signed requestState; an altered one is error -32602.", "inputSchema": none},
        {"name": "test_input_required_result_capabilities", "description": "InputRequiredResult asking only what the client's declared capabilities allow.", "inputSchema": none}
    ]);
    from_json::<Vec<Tool>>("the conformance tools", listed).unwrap_or_default()
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Runs fixture tool `name`; the `InputRequiredResult` ones go through
/// [`super::input_required`] instead.
pub async fn call(
    state: &State,
    name: &str,
    arguments: &JsonObject,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResult, ErrorData> {
    Ok(match name {
        "test_simple_text" => text("This is a simple text response for testing."),
        "test_image_content" => {
            CallToolResult::success(vec![ContentBlock::image(PNG_BASE64, "image/png")])
        }
        "test_audio_content" => {
            CallToolResult::success(vec![ContentBlock::audio(WAV_BASE64, "audio/wav")])
        }
        "test_embedded_resource" => CallToolResult::success(vec![ContentBlock::resource(
            ResourceContents::text(
                "This is an embedded resource content.",
                "test://embedded-resource",
            )
            .with_mime_type("text/plain"),
        )]),
        "test_multiple_content_types" => CallToolResult::success(vec![
            ContentBlock::text("Multiple content types test:"),
            ContentBlock::image(PNG_BASE64, "image/png"),
            ContentBlock::resource(
                ResourceContents::text(
                    json!({"test": "data", "value": 123}).to_string(),
                    "test://mixed-content-resource",
                )
                .with_mime_type("application/json"),
            ),
        ]),
        "test_error_handling" => tool_error("This tool intentionally returns an error for testing"),
        "test_tool_with_progress" => progress(&context).await,
        "test_tool_with_logging" | "test_logging_tool" => log(state, &context).await,
        name if ASKS.contains(&name) => match question(name, arguments, &context)? {
            Err(refused) => refused,
            Ok(request) => match ask_session(&context.peer, request).await {
                Ok(answer) => answered(name, answer),
                Err(e) => tool_error(format!("{name}: {e}")),
            },
        },
        "test_trigger_tool_change" => {
            let added = state.add_tool();
            let told = state.notify_tools_changed().await;
            text(format!("added tool {added}; notified {told} listener(s)"))
        }
        "test_trigger_prompt_change" => {
            let k = bump(&state.fixture.added_prompts);
            let told = notify_prompts_changed(state).await;
            text(format!(
                "added prompt {}; notified {told} listener(s)",
                super::prompts::added_name(k)
            ))
        }
        "test_trigger_resource_change" => {
            let k = bump(&state.fixture.added_resources);
            let told = notify_resources_changed(state).await;
            text(format!(
                "added resource {}; notified {told} listener(s)",
                super::resources::added_uri(k)
            ))
        }
        "test_trigger_resource_update" => {
            let uri = arguments
                .get("uri")
                .and_then(Value::as_str)
                .unwrap_or(super::resources::WATCHED);
            let told = notify_resource_updated(state, uri).await;
            text(format!("{uri} updated; notified {told} listener(s)"))
        }
        _ => text(json!({"tool": name, "arguments": Value::Object(arguments.clone())}).to_string()),
    })
}

async fn progress(context: &RequestContext<RoleServer>) -> CallToolResult {
    let token = context.meta.get_progress_token();
    for (i, done) in [0.0, 50.0, 100.0].into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(STEP).await;
        }
        if let Some(token) = &token {
            let progress = ProgressNotificationParam::new(token.clone(), done).with_total(100.0);
            // A client that went away is noticed when the answer cannot be sent either.
            let _ = context.peer.notify_progress(progress).await;
        }
    }
    text("Progress test completed: 0, 50 and 100 of 100")
}

/// Severity rank of a level's wire name, `debug` lowest; unknown names rank as `debug`.
fn severity(name: &str) -> u8 {
    const ORDER: &[&str] = &[
        "debug",
        "info",
        "notice",
        "warning",
        "error",
        "critical",
        "alert",
        "emergency",
    ];
    ORDER
        .iter()
        .position(|level| *level == name)
        .and_then(|rank| u8::try_from(rank).ok())
        .unwrap_or(0)
}

/// The rank of `logging/setLevel`'s level, kept for the sessions.
pub fn set_session_level(state: &State, level: &Value) {
    let rank = level.as_str().map(severity);
    *lock(&state.fixture.session_level) = rank;
}

/// Whether an info message may go out for this request: on 2026-07-28 only when its `_meta`
/// names a level at or below info; on sessions unless `logging/setLevel` set one above info.
fn may_log_info(state: &State, context: &RequestContext<RoleServer>) -> bool {
    let info = severity("info");
    if is_stateless(context) {
        let level = context
            .meta
            .0
            .get("io.modelcontextprotocol/logLevel")
            .and_then(Value::as_str);
        return level.is_some_and(|level| severity(level) <= info);
    }
    lock(&state.fixture.session_level).is_none_or(|rank| rank <= info)
}

#[expect(
    deprecated,
    reason = "logging is deprecated by SEP-2577, and exactly what this tool tests"
)]
async fn log(state: &State, context: &RequestContext<RoleServer>) -> CallToolResult {
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
    let allowed = may_log_info(state, context);
    let mut sent = 0;
    for (i, message) in [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            tokio::time::sleep(STEP).await;
        }
        if allowed {
            let param = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(message))
                .with_logger("conformance");
            sent += usize::from(context.peer.notify_logging_message(param).await.is_ok());
        }
    }
    text(format!("Logging test completed: {sent} message(s) sent"))
}

/// The tools that ask the client one question mid-call: on a session by a request of their
/// own, on 2026-07-28 by an `InputRequiredResult` (key `answer`) whose retry carries the answer
/// (see [`super::call_tool`]), so that each works in both eras.
pub const ASKS: &[&str] = &[
    "test_sampling",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
];

/// What tool `name` (one of [`ASKS`]) asks the client; `Ok(Err(_))`: it cannot ask (the client
/// did not declare the capability, or an argument is missing), the tool's error.
pub fn question(
    name: &str,
    arguments: &JsonObject,
    context: &RequestContext<RoleServer>,
) -> Result<Result<InputRequest, CallToolResult>, ErrorData> {
    let capabilities = client_capabilities(context);
    let (method, params) = match name {
        "test_sampling" => {
            let Some(prompt) = arguments.get("prompt").and_then(Value::as_str) else {
                return Ok(Err(tool_error(
                    "test_sampling: missing argument `prompt` (a string)",
                )));
            };
            if capabilities.sampling.is_none() {
                return Ok(Err(tool_error(
                    "test_sampling: the client did not declare the sampling capability",
                )));
            }
            let params = json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                "maxTokens": 100
            });
            ("sampling/createMessage", params)
        }
        _ => {
            if capabilities.elicitation.is_none() {
                return Ok(Err(tool_error(format!(
                    "{name}: the client did not declare the elicitation capability"
                ))));
            }
            let (message, schema) = match name {
                "test_elicitation" => (
                    arguments
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("Please provide your information"),
                    elicitation_schema(),
                ),
                "test_elicitation_sep1034_defaults" => {
                    ("Please review the defaults (SEP-1034)", defaults_schema())
                }
                _ => ("Please choose from each enum (SEP-1330)", enums_schema()),
            };
            let params = json!({"mode": "form", "message": message, "requestedSchema": schema});
            ("elicitation/create", params)
        }
    };
    from_json(method, json!({"method": method, "params": params})).map(Ok)
}

/// Tool `name`'s result (one of [`ASKS`]) from the client's answer to its [`question`].
pub fn answered(name: &str, answer: Value) -> CallToolResult {
    if name == "test_sampling" {
        let said = super::input_required::sampled_text(&answer).unwrap_or_default();
        return text(format!("LLM response: {said}"));
    }
    let answer = object(answer);
    let action = answer.get("action").and_then(Value::as_str).unwrap_or("");
    let content = answer.get("content").cloned().unwrap_or(Value::Null);
    let lead = if name == "test_elicitation" {
        "User response"
    } else {
        "Elicitation completed"
    };
    text(format!("{lead}: action={action}, content={content}"))
}

fn elicitation_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    })
}

/// SEP-1034: a default for each primitive type.
fn defaults_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Name", "default": "John Doe"},
            "age": {"type": "integer", "description": "Age", "default": 30},
            "score": {"type": "number", "description": "Score", "default": 95.5},
            "status": {"type": "string", "description": "Status",
                       "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Verified", "default": true}
        }
    })
}

/// SEP-1330: the five forms of an enum.
fn enums_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}
            ]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array",
                              "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]}}
        }
    })
}
