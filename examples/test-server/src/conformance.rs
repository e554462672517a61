//! `--mode conformance`: the fixture surface that the official conformance suite
//! (`@modelcontextprotocol/conformance`, `server` scenarios) expects of its reference server,
//! for both revisions it tests: 2025-11-25 (sessions opened with `initialize`) and 2026-07-28
//! (stateless requests, `server/discover`, `InputRequiredResult`, `subscriptions/listen`).
//!
//! The mode adds to the normal tools; it replaces nothing. Its names are the suite's:
//!
//! - tools ([`tools`]): content of each kind (`test_simple_text`, `test_image_content`,
//!   `test_audio_content`, `test_embedded_resource`, `test_multiple_content_types`),
//!   `test_error_handling`, `test_tool_with_progress`, `test_tool_with_logging`, requests to the
//!   client on a session (`test_sampling`, `test_elicitation`, `test_elicitation_sep1034_defaults`,
//!   `test_elicitation_sep1330_enums`), the `InputRequiredResult` fixtures
//!   ([`input_required`]), the diagnostics of server-stateless (`test_missing_capability`,
//!   `test_streaming_elicitation`, `test_logging_tool`, `test_trigger_tool_change`,
//!   `test_trigger_prompt_change`, and `test_trigger_resource_change`, `test_trigger_resource_update`),
//!   `test_custom_header`
//!   (an `x-mcp-header` parameter) and `json_schema_2020_12_tool`;
//! - the Tasks extension (SEP-2663, [`tasks`]): `greet`, `slow_compute`, `failing_job`,
//!   `protocol_error_job`, `confirm_delete`, `multi_input`, `test_tool_with_task`, a task store
//!   in memory, and `tasks/get`, `tasks/update`, `tasks/cancel`;
//! - resources ([`resources`]): `test://static-text`, `test://static-binary`,
//!   `test://watched-resource`, the template `test://template/{id}/data`; subscribe and
//!   unsubscribe on sessions;
//! - prompts ([`prompts`]): `test_simple_prompt`, `test_prompt_with_arguments`,
//!   `test_prompt_with_embedded_resource`, `test_prompt_with_image`,
//!   `test_input_required_result_prompt`; `completion/complete` on `test_prompt_with_arguments`
//!   and on the template;
//! - `logging/setLevel` on sessions, and `notifications/{tools,prompts,resources}/list_changed`
//!   to every session and to every `subscriptions/listen` stream that asked for them.
//!
//! A fixture that needs the client's input asks the way the request's era allows: on
//! 2026-07-28 with an `InputRequiredResult` (the retry carries `inputResponses`), on a session
//! with a request of the server's own, mid-call, whose result feeds the same next step.

use std::collections::BTreeSet;
use std::hash::{BuildHasher as _, RandomState};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, InputRequest, InputRequests,
    InputRequiredResult, JsonObject, ProtocolVersion, ResourceUpdatedNotificationParam,
    ServerCapabilities, ServerRequest,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, Peer, RoleServer};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::cli::Mode;
use crate::server::{State, lock};

pub mod input_required;
pub mod prompts;
pub mod resources;
pub mod tasks;
pub mod tools;

/// Every fixture tool, in listing order: those that finish in one call, then the task ones.
pub fn tools() -> Vec<rmcp::model::Tool> {
    let mut listed = tools::tools();
    listed.extend(tasks::tools());
    listed
}

/// What the fixtures remember across requests, shared by every connection of the process.
#[derive(Debug, Default)]
pub struct Fixture {
    /// The level a session last set with `logging/setLevel` (process-wide: last one wins).
    session_level: Mutex<Option<u8>>,
    /// URIs taken by `resources/subscribe` and not yet given back.
    subscribed: Mutex<BTreeSet<String>>,
    /// How many prompts `test_trigger_prompt_change` added.
    added_prompts: AtomicUsize,
    /// How many resources `test_trigger_resource_change` added.
    added_resources: AtomicUsize,
    /// How many times `test://cached` and `test://cached-private` were read.
    cached_reads: AtomicUsize,
    private_reads: AtomicUsize,
    /// The key that signs `requestState`: a fresh random SipHash key per process.
    key: RandomState,
    /// The tasks the task fixtures started (SEP-2663), in memory.
    pub tasks: tasks::Tasks,
}

impl Fixture {
    /// `payload` with its keyed hash: a state a client cannot forge or alter unnoticed.
    fn sign(&self, payload: &str) -> String {
        format!("{payload}.{:016x}", self.key.hash_one(payload))
    }

    /// The payload of a state this process signed, or `None` for any other string.
    fn verify<'a>(&self, state: &'a str) -> Option<&'a str> {
        let (payload, mac) = state.rsplit_once('.')?;
        (mac == format!("{:016x}", self.key.hash_one(payload))).then_some(payload)
    }
}

/// Whether `--mode conformance` is on.
pub fn serving(state: &State) -> bool {
    state.settings.has(Mode::Conformance)
}

/// What the server declares in conformance mode: every list changes, resources take
/// subscriptions, logging and completions are served.
pub fn capabilities() -> ServerCapabilities {
    from_json(
        "the conformance capabilities",
        json!({
            "tools": {"listChanged": true},
            "prompts": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "logging": {},
            "completions": {},
            "extensions": {rmcp::model::TASKS_EXTENSION_ID: {}}
        }),
    )
    .unwrap_or_default()
}

/// `logging/setLevel` on a session in conformance mode; `None` where the method does not
/// exist (other modes, and 2026-07-28, which removed it).
#[expect(
    deprecated,
    reason = "logging is deprecated by SEP-2577; the conformance suite still tests it"
)]
pub fn set_level(
    state: &State,
    request: &rmcp::model::SetLevelRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<()> {
    if !serving(state) || is_stateless(context) {
        return None;
    }
    let level = serde_json::to_value(request).ok()?.get("level").cloned()?;
    tools::set_session_level(state, &level);
    Some(())
}

/// Whether `name` is a fixture tool of this mode (called through [`call_tool`]).
pub fn is_fixture_tool(state: &State, name: &str) -> bool {
    serving(state) && (tools::NAMES.contains(&name) || tasks::NAMES.contains(&name))
}

/// Runs fixture tool `request.name`.
pub async fn call_tool(
    state: &State,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    if input_required::NAMES.contains(&request.name.as_ref()) {
        return input_required::call_tool(state, request, context).await;
    }
    if tasks::NAMES.contains(&request.name.as_ref()) {
        return tasks::call_tool(state, request, context).await;
    }
    let arguments = request.arguments.unwrap_or_default();
    if tools::ASKS.contains(&request.name.as_ref()) && is_stateless(&context) {
        if let Some(answer) = request.input_responses.and_then(|mut r| r.remove("answer")) {
            return Ok(tools::answered(&request.name, answer).into());
        }
        return Ok(
            match tools::question(&request.name, &arguments, &context)? {
                Err(refused) => refused.into(),
                Ok(question) => {
                    let mut asked = InputRequests::new();
                    asked.insert("answer".to_owned(), question);
                    CallToolResponse::InputRequired(InputRequiredResult::from_input_requests(asked))
                }
            },
        );
    }
    tools::call(state, &request.name, &arguments, context)
        .await
        .map(Into::into)
}

/// Whether the request came over 2026-07-28, where the server may not send the client requests.
fn is_stateless(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
}

/// The client's declared capabilities (per request on 2026-07-28, from `initialize` before).
fn client_capabilities(context: &RequestContext<RoleServer>) -> ClientCapabilities {
    context.client_capabilities().unwrap_or_default()
}

/// Builds an rmcp value from the JSON the suite spells out; a shape rmcp refuses is this
/// server's bug, reported as an internal error.
fn from_json<T: DeserializeOwned>(what: &str, value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value)
        .map_err(|e| ErrorData::internal_error(format!("cannot build {what}: {e}"), None))
}

/// `result` marked `resultType: "complete"`, which rmcp's constructors set and serde leaves
/// out; rmcp removes it again for peers older than 2026-07-28.
fn complete(mut result: Value) -> Value {
    if let Value::Object(map) = &mut result {
        map.insert("resultType".to_owned(), json!("complete"));
    }
    result
}

/// The object `value` holds, or an empty one.
fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// Sends the client `request` now, on a session opened with `initialize`, and returns the
/// JSON of its result.
async fn ask_session(peer: &Peer<RoleServer>, request: InputRequest) -> Result<Value, String> {
    let (method, request) = match request {
        InputRequest::CreateMessage(request) => (
            "sampling/createMessage",
            ServerRequest::CreateMessageRequest(request),
        ),
        InputRequest::Elicitation(request) => {
            ("elicitation/create", ServerRequest::ElicitRequest(request))
        }
        InputRequest::ListRoots(request) => {
            ("roots/list", ServerRequest::ListRootsRequest(request))
        }
        other => return Err(format!("cannot send {other:?} on a session")),
    };
    let result = peer
        .send_request(request)
        .await
        .map_err(|e| format!("the client did not answer {method}: {e}"))?;
    serde_json::to_value(result).map_err(|e| format!("cannot read the answer to {method}: {e}"))
}

/// Tells every session and every listening stream that the prompt list changed.
async fn notify_prompts_changed(state: &State) -> usize {
    if state.settings.list_ttl_ms.is_some() {
        return 0;
    }
    let (peers, sinks) = state.listeners();
    let mut told = 0;
    for peer in peers {
        told += usize::from(peer.notify_prompt_list_changed().await.is_ok());
    }
    for sink in sinks {
        told += usize::from(sink.notify_prompt_list_changed().await.is_ok());
    }
    told
}

/// Tells every session and every listening stream that the resource list changed.
async fn notify_resources_changed(state: &State) -> usize {
    let (peers, sinks) = state.listeners();
    let mut told = 0;
    for peer in peers {
        told += usize::from(peer.notify_resource_list_changed().await.is_ok());
    }
    for sink in sinks {
        told += usize::from(sink.notify_resource_list_changed().await.is_ok());
    }
    told
}

/// Sends `notifications/resources/updated` for `uri` to every session when one subscribed to
/// it (subscriptions are process-wide here), and to every listening stream that asked for it
/// (rmcp drops it on the others).
async fn notify_resource_updated(state: &State, uri: &str) -> usize {
    let (peers, sinks) = state.listeners();
    let mut told = 0;
    if subscribed(&state.fixture).contains(uri) {
        for peer in peers {
            let updated = ResourceUpdatedNotificationParam::new(uri);
            told += usize::from(peer.notify_resource_updated(updated).await.is_ok());
        }
    }
    for sink in sinks {
        told += usize::from(sink.notify_resource_updated(uri).await.is_ok());
    }
    told
}

fn count(counter: &AtomicUsize) -> usize {
    counter.load(Ordering::SeqCst)
}

fn bump(counter: &AtomicUsize) -> usize {
    counter.fetch_add(1, Ordering::SeqCst) + 1
}

fn subscribed(fixture: &Fixture) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
    lock(&fixture.subscribed)
}

#[cfg(test)]
mod tests;
