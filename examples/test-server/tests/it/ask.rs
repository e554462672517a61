//! `ask` in both eras: a server-to-client request during the call on a session opened with
//! `initialize`, an `InputRequiredResult` and a retry on 2026-07-28.

use std::process::Stdio;
use std::sync::{Arc, Mutex};

use rmcp::ServiceExt as _;
use rmcp::model::{
    CallToolResponse, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ErrorCode, InputResponses, ProtocolVersion,
};
use rmcp::service::{RequestContext, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _, ErrorData, RoleClient};
use serde_json::{Value, json};

use crate::common::{RawStdio, WAIT, call, command, listen, params, rpc_error, stdio_client, text};

/// A client that answers every question with `blue` and records what it was asked.
#[derive(Clone, Default)]
struct Answerer {
    asked: Arc<Mutex<Vec<String>>>,
}

impl Answerer {
    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

#[expect(
    deprecated,
    reason = "sampling is deprecated (SEP-2577); `ask` still tests it"
)]
impl ClientHandler for Answerer {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(schema["required"], json!(["answer"]), "{schema}");
        self.asked.lock().unwrap().push(message);
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"answer": "blue"})))
    }

    async fn create_message(
        &self,
        params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        assert_eq!(params.max_tokens, 100);
        let prompt = serde_json::to_value(&params.messages).unwrap();
        self.asked
            .lock()
            .unwrap()
            .push(prompt[0]["content"]["text"].as_str().unwrap().to_owned());
        Ok(rmcp::model::CreateMessageResult::new(
            rmcp::model::SamplingMessage::assistant_text("blue"),
            "test-model".to_owned(),
        )
        .with_stop_reason("endTurn"))
    }

    fn get_info(&self) -> ClientConfig {
        let capabilities = serde_json::from_value(json!({"elicitation": {}, "sampling": {}}));
        ClientConfig::new(
            capabilities.unwrap(),
            rmcp::model::Implementation::new("answerer", "0"),
        )
    }
}

type AnswerClient = RunningService<RoleClient, Answerer>;

const ACCEPTED: &str = r#"{"action":"accept","content":{"answer":"blue"}}"#;

async fn ask(client: &AnswerClient, arguments: Value) -> rmcp::model::CallToolResult {
    client.call_tool(params("ask", arguments)).await.unwrap()
}

/// The sampling answer an `Answerer` gives, as `ask` reports it.
fn assert_sampled(answer: &str) {
    let answer: Value = serde_json::from_str(answer).unwrap();
    assert_eq!(answer["role"], "assistant", "{answer}");
    assert_eq!(answer["content"], json!({"type": "text", "text": "blue"}));
    assert_eq!(answer["model"], "test-model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_an_initialize_session_ask_sends_the_client_a_request_mid_call() {
    let (transport, _) = TokioChildProcess::builder(command(&[]))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let answerer = Answerer::default();
    let client = answerer.clone().serve(transport).await.unwrap();

    let answer = ask(&client, json!({"message": "favourite colour?"})).await;
    assert_ne!(answer.is_error, Some(true));
    assert_eq!(text(&answer), ACCEPTED);

    let sampled = ask(&client, json!({"message": "say blue", "kind": "sample"})).await;
    assert_ne!(sampled.is_error, Some(true), "{sampled:?}");
    assert_sampled(text(&sampled));
    assert_eq!(answerer.asked(), ["favourite colour?", "say blue"]);

    let bad = ask(&client, json!({"message": "m", "kind": "shout"})).await;
    assert_eq!(bad.is_error, Some(true));
    assert!(text(&bad).contains("`kind`"), "{}", text(&bad));
    client.cancel().await.unwrap();
}

/// rmcp's default client declines elicitations and refuses sampling with method-not-found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_will_not_answer_gets_its_refusal_back() {
    let (client, _, _) = stdio_client(command(&[])).await;
    let declined = call(&client, "ask", json!({"message": "favourite colour?"})).await;
    assert_ne!(declined.is_error, Some(true));
    assert_eq!(text(&declined), r#"{"action":"decline"}"#);

    let refused = call(&client, "ask", json!({"message": "m", "kind": "sample"})).await;
    assert_eq!(refused.is_error, Some(true));
    assert!(
        text(&refused).contains("sampling/createMessage"),
        "{}",
        text(&refused)
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_streamable_http_ask_sends_the_request_on_the_call_stream() {
    let server = listen(&["--transport", "http", "--port", "0"]).await;
    let answerer = Answerer::default();
    let transport = StreamableHttpClientTransport::from_uri(server.url.clone());
    let client = answerer.clone().serve(transport).await.unwrap();
    let answer = ask(&client, json!({"message": "over http?"})).await;
    assert_eq!(text(&answer), ACCEPTED);
    assert_eq!(answerer.asked(), ["over http?"]);
    client.cancel().await.unwrap();
}

async fn discover_client(answerer: Answerer) -> AnswerClient {
    let (transport, _) = TokioChildProcess::builder(command(&[]))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    answerer
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .unwrap()
}

/// rmcp's `call_tool` fulfils an `InputRequiredResult` through the same handler and retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_2026_07_28_ask_answers_input_required_and_the_retry_gets_the_answer() {
    let answerer = Answerer::default();
    let client = discover_client(answerer.clone()).await;
    let answer = ask(&client, json!({"message": "favourite colour?"})).await;
    assert_eq!(text(&answer), ACCEPTED);
    let sampled = ask(&client, json!({"message": "say blue", "kind": "sample"})).await;
    assert_sampled(text(&sampled));
    assert_eq!(answerer.asked(), ["favourite colour?", "say blue"]);
    client.cancel().await.unwrap();
}

fn input_required(response: CallToolResponse) -> rmcp::model::InputRequiredResult {
    match response {
        CallToolResponse::InputRequired(result) => result,
        other => panic!("expected an InputRequiredResult, got {other:?}"),
    }
}

/// Driving the rounds by hand: the state must come back unchanged, and the answer with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_2026_07_28_a_tampered_request_state_is_invalid_params() {
    let client = discover_client(Answerer::default()).await;
    let first = params("ask", json!({"message": "favourite colour?"}));
    let asked = input_required(client.call_tool_once(first.clone()).await.unwrap());
    let requests = serde_json::to_value(asked.input_requests.as_ref().unwrap()).unwrap();
    assert_eq!(requests["answer"]["method"], "elicitation/create");
    assert_eq!(requests["answer"]["params"]["message"], "favourite colour?");
    let state = asked.request_state.clone().unwrap();

    let answers = InputResponses::from([(
        "answer".to_owned(),
        json!({"action": "accept", "content": {"answer": "red"}}),
    )]);
    let tampered = first
        .clone()
        .with_input_responses(answers.clone())
        .with_request_state(format!("{state}00"));
    let error = rpc_error(client.call_tool_once(tampered).await.unwrap_err());
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert_eq!(error.message, "tampered requestState");

    let no_answer = first
        .clone()
        .with_input_responses(InputResponses::new())
        .with_request_state(state.clone());
    let again = input_required(client.call_tool_once(no_answer).await.unwrap());
    assert_eq!(again.request_state.as_deref(), Some(state.as_str()));
    assert_eq!(again.input_requests, asked.input_requests);

    let retry = first
        .with_input_responses(answers)
        .with_request_state(state);
    match client.call_tool_once(retry).await.unwrap() {
        CallToolResponse::Complete(result) => assert_eq!(
            text(&result),
            r#"{"action":"accept","content":{"answer":"red"}}"#
        ),
        other => panic!("expected the answer, got {other:?}"),
    }
    client.cancel().await.unwrap();
}

/// The same rounds as raw JSON lines: no `initialize`, `_meta` on every request, and never a
/// request from the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_2026_07_28_raw_rounds_never_see_a_server_request() {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}
    });
    let mut raw = RawStdio::spawn(&[]);
    let call = |extra: Value| {
        let mut params = json!({"_meta": meta, "name": "ask", "arguments": {"message": "why?"}});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        params
    };
    raw.request(1, "tools/call", call(json!({}))).await;
    let first = raw.recv(WAIT).await.unwrap();
    assert_eq!(first["id"], 1, "{first}");
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(
        result["inputRequests"]["answer"]["params"]["message"],
        "why?"
    );
    let state = result["requestState"].clone();
    assert!(state.is_string());

    let answer = json!({"answer": {"action": "decline"}});
    raw.request(
        2,
        "tools/call",
        call(json!({"inputResponses": answer, "requestState": "forged"})),
    )
    .await;
    let forged = raw.recv(WAIT).await.unwrap();
    assert_eq!(forged["id"], 2);
    assert_eq!(forged["error"]["code"], -32602, "{forged}");
    assert_eq!(forged["error"]["message"], "tampered requestState");

    raw.request(
        3,
        "tools/call",
        call(json!({"inputResponses": answer, "requestState": state})),
    )
    .await;
    let done = raw.recv(WAIT).await.unwrap();
    assert_eq!(done["id"], 3);
    assert_eq!(
        done["result"]["content"][0]["text"], r#"{"action":"decline"}"#,
        "{done}"
    );
    assert_ne!(done["result"]["isError"], true);
}
