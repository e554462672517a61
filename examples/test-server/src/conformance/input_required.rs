//! The fixtures that need the client's input (SEP-2322): each is a step function from the
//! answers so far (`inputResponses`) and the echoed `requestState` to either the next
//! questions ([`Step::Ask`]) or the finished result ([`Step::Done`]).
//!
//! On 2026-07-28 a [`Step::Ask`] is the `InputRequiredResult` itself and the client retries.
//! On a session opened with `initialize` the server asks each question with a request of its
//! own, mid-call, and feeds the answers to the next step, so the same fixture finishes in one
//! call.
//!
//! `requestState` is `<payload>.<keyed hash>` ([`super::Fixture::sign`]); a state this process
//! did not sign is JSON-RPC error -32602 `tampered requestState`. Answers that are missing or
//! malformed (not an accepted elicitation, a sampling result or a roots list) re-ask.

use std::fmt::Write as _;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock,
    GetPromptResponse, GetPromptResult, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, JsonObject,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::{ask_session, client_capabilities, complete, from_json, is_stateless};
use crate::server::State;

/// The tools that [`call_tool`] runs.
pub const NAMES: &[&str] = &[
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
    "test_missing_capability",
    "test_streaming_elicitation",
];

/// The prompt that asks before it answers.
pub const PROMPT: &str = "test_input_required_result_prompt";

/// The message of the JSON-RPC error a retry with a foreign `requestState` gets.
pub const TAMPERED: &str = "tampered requestState";

/// How many rounds a session resolves before giving up on a client that never answers.
const MAX_SESSION_ROUNDS: usize = 8;

/// What a fixture does next.
#[derive(Debug)]
enum Step<T> {
    /// Ask these questions (key, `{"method", "params"}`), with this state to echo.
    Ask(Vec<(&'static str, Value)>, Option<String>),
    Done(T),
}

fn elicitation(message: &str, property: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {property: {"type": kind}},
            "required": [property]
        }
    }})
}

fn sampling(prompt: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": max_tokens
    }})
}

fn roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

/// The content of an accepted elicitation under `key`; `Err` names a refusal.
fn elicited<'a>(
    responses: &'a InputResponses,
    key: &str,
) -> Option<Result<&'a JsonObject, &'a str>> {
    let answer = responses.get(key)?.as_object()?;
    match answer.get("action")?.as_str()? {
        "accept" => Some(Ok(answer.get("content")?.as_object()?)),
        refused @ ("decline" | "cancel") => Some(Err(refused)),
        _ => None,
    }
}

/// The string `field` of an accepted elicitation, or how the client refused.
pub(super) fn elicited_field(responses: &InputResponses, key: &str, field: &str) -> Option<String> {
    match elicited(responses, key)? {
        Ok(content) => Some(match content.get(field)? {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        }),
        Err(refused) => Some(format!("({refused})")),
    }
}

/// The text of a sampling result (`content` one block or an array of them).
pub fn sampled_text(answer: &Value) -> Option<String> {
    let content = answer.get("content")?;
    let block = match content {
        Value::Array(blocks) => blocks.first()?,
        block => block,
    };
    block.get("text")?.as_str().map(str::to_owned)
}

/// The URIs of a roots/list result.
fn root_uris(answer: &Value) -> Option<Vec<String>> {
    answer
        .get("roots")?
        .as_array()?
        .iter()
        .map(|root| root.get("uri")?.as_str().map(str::to_owned))
        .collect()
}

fn hex(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for byte in text.bytes() {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

fn unhex(hex: &str) -> Option<String> {
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

fn tampered(state: &str) -> ErrorData {
    ErrorData::invalid_params(TAMPERED, Some(json!({ "requestState": state })))
}

/// The payload of `state` if this process signed it; `None` when there is no state; an
/// error for a state it did not sign.
fn verified<'a>(state: &State, echoed: Option<&'a str>) -> Result<Option<&'a str>, ErrorData> {
    match echoed {
        None => Ok(None),
        Some(echoed) => state
            .fixture
            .verify(echoed)
            .map(Some)
            .ok_or_else(|| tampered(echoed)),
    }
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

/// One step of tool `name`.
fn tool_step(
    state: &State,
    name: &str,
    responses: &InputResponses,
    echoed: Option<&str>,
    capabilities: &ClientCapabilities,
) -> Result<Step<CallToolResult>, ErrorData> {
    let fixture = &state.fixture;
    let payload = verified(state, echoed)?;
    Ok(match name {
        "test_input_required_result_elicitation" | "test_streaming_elicitation" => {
            match elicited_field(responses, "user_name", "name") {
                Some(name) => Step::Done(text(format!("Hello, {name}!"))),
                None => Step::Ask(
                    vec![(
                        "user_name",
                        elicitation("What is your name?", "name", "string"),
                    )],
                    None,
                ),
            }
        }
        "test_input_required_result_sampling" => {
            match responses.get("capital_question").and_then(sampled_text) {
                Some(said) => Step::Done(text(format!("The client's model said: {said}"))),
                None => Step::Ask(
                    vec![(
                        "capital_question",
                        sampling("What is the capital of France?", 100),
                    )],
                    None,
                ),
            }
        }
        "test_input_required_result_list_roots" => {
            match responses.get("client_roots").and_then(root_uris) {
                Some(uris) => Step::Done(text(format!("Client roots: {}", uris.join(", ")))),
                None => Step::Ask(vec![("client_roots", roots())], None),
            }
        }
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => {
            let issued = name.trim_start_matches("test_input_required_result_");
            match (payload, elicited_field(responses, "confirm", "ok")) {
                (Some(payload), Some(ok)) if payload == issued => {
                    Step::Done(text(format!("state-ok: requestState verified, ok={ok}")))
                }
                (Some(payload), _) if payload != issued => return Err(tampered(payload)),
                _ => Step::Ask(
                    vec![("confirm", elicitation("Please confirm", "ok", "boolean"))],
                    Some(fixture.sign(issued)),
                ),
            }
        }
        "test_input_required_result_multiple_inputs" => {
            let issued = "multiple_inputs";
            let name = elicited_field(responses, "user_name", "name");
            let greeting = responses.get("greeting").and_then(sampled_text);
            let uris = responses.get("client_roots").and_then(root_uris);
            match (payload, name, greeting, uris) {
                (Some(payload), _, _, _) if payload != issued => return Err(tampered(payload)),
                (Some(_), Some(name), Some(greeting), Some(uris)) => Step::Done(text(format!(
                    "name={name}; greeting={greeting}; roots={}",
                    uris.join(", ")
                ))),
                _ => Step::Ask(
                    vec![
                        (
                            "user_name",
                            elicitation("What is your name?", "name", "string"),
                        ),
                        ("greeting", sampling("Generate a greeting", 50)),
                        ("client_roots", roots()),
                    ],
                    Some(fixture.sign(issued)),
                ),
            }
        }
        "test_input_required_result_multi_round" => multi_round(state, responses, payload)?,
        "test_input_required_result_capabilities" => {
            let mut asks = Vec::new();
            if capabilities.elicitation.is_some() {
                asks.push((
                    "user_name",
                    elicitation("What is your name?", "name", "string"),
                ));
            }
            if capabilities.sampling.is_some() {
                asks.push(("greeting", sampling("Generate a greeting", 50)));
            }
            if capabilities.roots.is_some() {
                asks.push(("client_roots", roots()));
            }
            let keys: Vec<&str> = asks.iter().map(|(key, _)| *key).collect();
            if keys.is_empty() {
                Step::Done(text(
                    "the client declared none of elicitation, sampling and roots: nothing to ask",
                ))
            } else if keys.iter().all(|key| responses.contains_key(*key)) {
                Step::Done(text(format!("answered: {}", keys.join(", "))))
            } else {
                Step::Ask(asks, None)
            }
        }
        "test_missing_capability" => {
            if capabilities.sampling.is_none() {
                let required: ClientCapabilities =
                    from_json("the sampling capability", json!({"sampling": {}}))?;
                return Err(ErrorData::missing_required_client_capability(required));
            }
            match responses.get("answer").and_then(sampled_text) {
                Some(said) => Step::Done(text(format!("sampled: {said}"))),
                None => Step::Ask(vec![("answer", sampling("Say something", 20))], None),
            }
        }
        other => {
            return Err(ErrorData::invalid_params(
                format!("unknown tool {other:?}"),
                None,
            ));
        }
    })
}

/// `multi_round`: step1 (a name) under state `multi_round:1`, then step2 (a colour) under
/// `multi_round:2:<name in hex>`, then the result.
fn multi_round(
    state: &State,
    responses: &InputResponses,
    payload: Option<&str>,
) -> Result<Step<CallToolResult>, ErrorData> {
    let fixture = &state.fixture;
    let step1 = || {
        Step::Ask(
            vec![(
                "step1",
                elicitation("Step 1: What is your name?", "name", "string"),
            )],
            Some(fixture.sign("multi_round:1")),
        )
    };
    let step2 = |name: &str| {
        Step::Ask(
            vec![(
                "step2",
                elicitation("Step 2: What is your favorite color?", "color", "string"),
            )],
            Some(fixture.sign(&format!("multi_round:2:{}", hex(name)))),
        )
    };
    Ok(match payload {
        None => step1(),
        Some("multi_round:1") => match elicited_field(responses, "step1", "name") {
            Some(name) => step2(&name),
            None => step1(),
        },
        Some(payload) => {
            let name = payload
                .strip_prefix("multi_round:2:")
                .and_then(unhex)
                .ok_or_else(|| tampered(payload))?;
            match elicited_field(responses, "step2", "color") {
                Some(color) => Step::Done(text(format!("{name}'s favorite color is {color}"))),
                None => step2(&name),
            }
        }
    })
}

/// One step of [`PROMPT`].
fn prompt_step(responses: &InputResponses) -> Result<Step<GetPromptResult>, ErrorData> {
    Ok(match elicited_field(responses, "user_context", "context") {
        Some(context) => Step::Done(from_json(
            "the prompt",
            complete(
                json!({"description": "A prompt that asked for its context first", "messages": [{
                    "role": "user",
                    "content": {"type": "text", "text": format!("Use this context: {context}")}
                }]}),
            ),
        )?),
        None => Step::Ask(
            vec![(
                "user_context",
                elicitation("What context should the prompt use?", "context", "string"),
            )],
            None,
        ),
    })
}

fn input_required(
    asks: Vec<(&'static str, Value)>,
    state: Option<String>,
) -> Result<InputRequiredResult, ErrorData> {
    let mut requests = InputRequests::new();
    for (key, request) in asks {
        requests.insert(key.to_owned(), from_json::<InputRequest>(key, request)?);
    }
    Ok(InputRequiredResult::new(Some(requests), state))
}

/// Runs `step` until done: on 2026-07-28 the first [`Step::Ask`] is the answer; on a session
/// each question goes to the client now and its answer feeds the next step.
async fn resolve<T>(
    context: &RequestContext<RoleServer>,
    mut responses: InputResponses,
    mut echoed: Option<String>,
    step: impl Fn(&InputResponses, Option<&str>) -> Result<Step<T>, ErrorData>,
) -> Result<Result<T, InputRequiredResult>, ErrorData> {
    let stateless = is_stateless(context);
    for _ in 0..MAX_SESSION_ROUNDS {
        match step(&responses, echoed.as_deref())? {
            Step::Done(done) => return Ok(Ok(done)),
            Step::Ask(asks, state) if stateless => {
                return input_required(asks, state).map(Err);
            }
            Step::Ask(asks, state) => {
                for (key, request) in asks {
                    let request = from_json::<InputRequest>(key, request)?;
                    let answer = ask_session(&context.peer, request)
                        .await
                        .map_err(|e| ErrorData::internal_error(e, None))?;
                    responses.insert(key.to_owned(), answer);
                }
                echoed = state;
            }
        }
    }
    Err(ErrorData::internal_error(
        format!("the client's answers did not finish the fixture in {MAX_SESSION_ROUNDS} rounds"),
        None,
    ))
}

/// Runs an `InputRequiredResult` fixture tool.
pub async fn call_tool(
    state: &State,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let capabilities = client_capabilities(&context);
    let name = request.name.clone();
    let resolved = resolve(
        &context,
        request.input_responses.unwrap_or_default(),
        request.request_state,
        |responses, echoed| tool_step(state, &name, responses, echoed, &capabilities),
    )
    .await;
    Ok(match resolved? {
        Ok(done) => done.into(),
        Err(asking) => asking.into(),
    })
}

/// Runs [`PROMPT`].
pub async fn get_prompt(
    responses: Option<InputResponses>,
    echoed: Option<String>,
    context: &RequestContext<RoleServer>,
) -> Result<GetPromptResponse, ErrorData> {
    let resolved = resolve(
        context,
        responses.unwrap_or_default(),
        echoed,
        |responses, _| prompt_step(responses),
    )
    .await?;
    Ok(match resolved {
        Ok(done) => done.into(),
        Err(asking) => GetPromptResponse::InputRequired(asking),
    })
}
