//! `ask`: a tool that asks the client a question in the middle of the call, the way the
//! connection's era allows, and answers with what the client said.
//!
//! - A connection opened with `initialize` (protocol 2025-11-25 or older): while the call runs,
//!   the server sends the client `elicitation/create` (form mode, one required string property
//!   `answer`) or, for `kind: "sample"`, `sampling/createMessage` (one user message, maxTokens
//!   100), whether or not the client declared the capability. The result is a text block
//!   holding the JSON of the client's result; a refusal or an error is a result with
//!   `isError: true` and the error text.
//! - 2026-07-28 (no `initialize`; every request carries `_meta`): server-to-client requests are
//!   forbidden, so the first call answers with an `InputRequiredResult` whose `inputRequests`
//!   holds that same request under the key `answer`, and whose `requestState` encodes the
//!   question (`ask:<kind>:<message as hex>`, unsigned). The retry must echo that state (any
//!   other is JSON-RPC error -32602 `tampered requestState`) and carry `inputResponses.answer`,
//!   whose JSON is the result's text; a retry without it gets the same `InputRequiredResult`
//!   again.

use std::fmt::Write as _;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, ProtocolVersion,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use serde_json::{Value, json};

use super::{ArgResult, Args, text, tool_error};

/// The key of the one request in `inputRequests` (and of its answer in `inputResponses`).
pub const ANSWER_KEY: &str = "answer";

/// The message of the JSON-RPC error a retry with a foreign `requestState` gets.
pub const TAMPERED: &str = "tampered requestState";

const MAX_TOKENS: u32 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Elicit,
    Sample,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Elicit => "elicit",
            Self::Sample => "sample",
        }
    }
}

/// What `ask` was asked to ask.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Question {
    kind: Kind,
    message: String,
}

impl Question {
    fn from_arguments(args: &Args<'_>) -> ArgResult<Self> {
        let message = args.str("message")?.to_owned();
        let kind = match args.opt_str("kind")? {
            None | Some("elicit") => Kind::Elicit,
            Some("sample") => Kind::Sample,
            Some(_) => return Err(args.wrong("kind", "\"elicit\" or \"sample\"")),
        };
        Ok(Self { kind, message })
    }

    /// The `requestState` issued for this question; a retry must echo it unchanged.
    fn request_state(&self) -> String {
        let mut state = format!("ask:{}:", self.kind.name());
        for byte in self.message.bytes() {
            let _ = write!(state, "{byte:02x}");
        }
        state
    }

    /// The method and the params of the request that asks it.
    fn request(&self) -> (&'static str, Value) {
        match self.kind {
            Kind::Elicit => (
                "elicitation/create",
                json!({
                    "mode": "form",
                    "message": self.message,
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"answer": {"type": "string"}},
                        "required": ["answer"]
                    }
                }),
            ),
            Kind::Sample => (
                "sampling/createMessage",
                json!({
                    "messages": [{
                        "role": "user",
                        "content": {"type": "text", "text": self.message}
                    }],
                    "maxTokens": MAX_TOKENS
                }),
            ),
        }
    }

    fn input_request(&self) -> Result<InputRequest, ErrorData> {
        let (method, params) = self.request();
        serde_json::from_value(json!({"method": method, "params": params})).map_err(|e| {
            ErrorData::internal_error(format!("ask: cannot build {method}: {e}"), None)
        })
    }

    fn input_required(&self) -> Result<CallToolResponse, ErrorData> {
        let mut requests = InputRequests::new();
        requests.insert(ANSWER_KEY.to_owned(), self.input_request()?);
        Ok(InputRequiredResult::new(Some(requests), Some(self.request_state())).into())
    }
}

/// Runs `ask`.
pub async fn call(
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let arguments = request.arguments.unwrap_or_default();
    let args = Args {
        tool: "ask",
        map: &arguments,
    };
    let question = match Question::from_arguments(&args) {
        Ok(question) => question,
        Err(message) => return Ok(tool_error(message).into()),
    };
    if is_stateless_era(&context) {
        retry_or_ask(&question, request.input_responses, request.request_state)
    } else {
        Ok(ask_now(&question, &context.peer).await.into())
    }
}

/// Whether the request came over 2026-07-28, where the server may not send the client requests.
fn is_stateless_era(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
}

/// 2026-07-28: ask through an `InputRequiredResult`, or answer the retry that carries the answer.
fn retry_or_ask(
    question: &Question,
    responses: Option<InputResponses>,
    state: Option<String>,
) -> Result<CallToolResponse, ErrorData> {
    let issued = question.request_state();
    match state {
        Some(state) if state != issued => Err(tampered(Some(state))),
        // Answers without the state this server issued: not a retry of this question.
        None if responses.is_some() => Err(tampered(None)),
        None => question.input_required(),
        Some(_) => match responses.as_ref().and_then(|r| r.get(ANSWER_KEY)) {
            Some(answer) => Ok(text(answer.to_string()).into()),
            None => question.input_required(),
        },
    }
}

fn tampered(state: Option<String>) -> ErrorData {
    ErrorData::invalid_params(TAMPERED, Some(json!({ "requestState": state })))
}

/// A session opened with `initialize`: ask the client now, with a request of the server's own.
async fn ask_now(question: &Question, peer: &Peer<RoleServer>) -> CallToolResult {
    let (method, params) = question.request();
    let answered = match question.kind {
        Kind::Elicit => match serde_json::from_value(params) {
            Ok(params) => peer
                .create_elicitation(params)
                .await
                .map(|result| json!(result)),
            Err(e) => return tool_error(format!("ask: cannot build {method}: {e}")),
        },
        Kind::Sample => match sample(peer, params).await {
            Ok(answered) => answered,
            Err(e) => return tool_error(format!("ask: cannot build {method}: {e}")),
        },
    };
    match answered {
        Ok(result) => text(result.to_string()),
        Err(e) => tool_error(format!("ask: the client did not answer {method}: {e}")),
    }
}

/// Sends `sampling/createMessage`: deprecated by SEP-2577, and exactly what this tool tests.
#[expect(
    deprecated,
    reason = "sampling is deprecated (SEP-2577) but still in use"
)]
async fn sample(
    peer: &Peer<RoleServer>,
    params: Value,
) -> Result<Result<Value, rmcp::ServiceError>, serde_json::Error> {
    let params: rmcp::model::CreateMessageRequestParams = serde_json::from_value(params)?;
    Ok(peer
        .create_message(params)
        .await
        .map(|result| json!(result)))
}

#[cfg(test)]
mod tests;
