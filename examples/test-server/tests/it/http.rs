//! The server over streamable HTTP, through rmcp's client and raw requests.

use std::sync::atomic::Ordering;

use rmcp::ServiceExt as _;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::json;

use crate::common::{Recorder, call, eventually, exit_code, listen, text};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

async fn post_initialize(url: &str, token: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(INITIALIZE);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_serves_tools_progress_and_list_changes() {
    let mut server = listen(&["--transport", "http", "--port", "0"]).await;
    assert!(server.url.starts_with("http://127.0.0.1:") && server.url.ends_with("/mcp"));

    let recorder = Recorder::default();
    let transport = StreamableHttpClientTransport::from_uri(server.url.clone());
    let client = recorder.clone().serve(transport).await.unwrap();
    let info = client.peer_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().unwrap().name,
        "runbyte-test-server"
    );
    assert_eq!(
        text(&call(&client, "echo", json!({"message": "over http"})).await),
        "over http"
    );

    call(&client, "change_tools", json!({})).await;
    eventually("list_changed over http", async || {
        recorder.list_changed.load(Ordering::SeqCst) == 1
    })
    .await;
    let tools = client.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name == "added_1"));

    // crash ends the whole process, whatever the transport, and never answers.
    let crash = tokio::spawn(async move {
        let answer = client
            .call_tool(crate::common::params("crash", json!({"code": 9})))
            .await;
        assert!(answer.is_err(), "crash answered: {answer:?}");
    });
    assert_eq!(exit_code(&mut server.child).await, 9);
    // rmcp's HTTP client may wait on a dead server; give it a moment to notice, no more.
    if let Ok(joined) = tokio::time::timeout(std::time::Duration::from_millis(500), crash).await {
        joined.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bearer_token_is_required_when_configured() {
    let server = listen(&["--transport", "http", "--auth-token", "s3cret"]).await;
    assert_eq!(post_initialize(&server.url, None).await.status(), 401);
    assert_eq!(
        post_initialize(&server.url, Some("wrong")).await.status(),
        401
    );
    assert_eq!(
        post_initialize(&server.url, Some("s3cret")).await.status(),
        200
    );

    let config =
        StreamableHttpClientTransportConfig::with_uri(server.url.clone()).auth_header("s3cret");
    let transport = StreamableHttpClientTransport::from_config(config);
    let client = Recorder::default().serve(transport).await.unwrap();
    assert_eq!(
        text(&call(&client, "pid", json!({})).await),
        server.child.id().unwrap().to_string()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_response_answers_without_a_session_or_a_stream() {
    let server = listen(&["--transport", "http", "--json-response"]).await;
    let response = post_initialize(&server.url, None).await;
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("mcp-session-id").is_none());
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    let body: serde_json::Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(body["result"]["serverInfo"]["name"], "runbyte-test-server");
}
