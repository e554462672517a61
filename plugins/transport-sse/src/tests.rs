#![allow(clippy::unwrap_used)]

use std::time::Duration;

use reqwest::{Client, Response};
use runbyte_http_common::{
    client::{EventReader, build_client},
    testing::{Driver, Everything, Harness, Seen, canned_server},
};
use runbyte_plugin_api::transport::Transport;
use serde_json::{Value, json};

use super::SseTransport;

const WAIT: Duration = Duration::from_secs(10);

fn start(mut options: Value) -> (Harness, u16) {
    if options.get("bind").is_none() {
        options["bind"] = json!("127.0.0.1:0");
    }
    let listener = SseTransport::open("{}")
        .unwrap()
        .listen(&options.to_string())
        .unwrap();
    let port = listener
        .address()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    (Harness::serve(listener), port)
}

fn connect(target: Value) -> Result<Driver, String> {
    let transport = SseTransport::open("{}").unwrap();
    transport.connect(&target.to_string()).map(Driver::new)
}

fn text_of(result: &Value) -> &str {
    result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
}

/// An open `GET /sse` stream and the endpoint it announced.
struct Stream {
    response: Response,
    reader: EventReader,
    endpoint: String,
}

impl Stream {
    async fn open(client: &Client, port: u16) -> Self {
        let mut response = client
            .get(format!("http://127.0.0.1:{port}/sse"))
            .header("accept", "text/event-stream")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let mut reader = EventReader::new(1 << 20);
        let event = tokio::time::timeout(WAIT, reader.next(&mut response))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(event.event, "endpoint");
        Self {
            response,
            reader,
            endpoint: format!("http://127.0.0.1:{port}{}", event.data),
        }
    }

    async fn next_message(&mut self) -> Value {
        let event = tokio::time::timeout(WAIT, self.reader.next(&mut self.response))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(event.event, "message");
        serde_json::from_str(&event.data).unwrap()
    }

    async fn post(&self, client: &Client, body: &str) -> Response {
        client
            .post(&self.endpoint)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
            .await
            .unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_opens_a_session_and_posts_reach_it() {
    let (harness, port) = start(json!({}));
    let client = build_client().unwrap();
    let mut stream = Stream::open(&client, port).await;
    let id = stream
        .endpoint
        .rsplit("sessionId=")
        .next()
        .unwrap()
        .to_owned();
    assert!(
        stream.endpoint.contains("/message?sessionId="),
        "{}",
        stream.endpoint
    );
    assert_eq!(id.len(), 32);
    let accepted = harness
        .wait_for(WAIT, |seen| matches!(seen, Seen::Accepted { .. }))
        .unwrap();
    assert!(matches!(accepted, Seen::Accepted { session, .. } if session == id));
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;
    let response = stream.post(&client, init).await;
    assert_eq!(response.status(), 202);
    let answer = stream.next_message().await;
    assert_eq!(answer["result"]["protocolVersion"], "2024-11-05");
    // Malformed and invalid bodies are refused; the session survives.
    let response = stream.post(&client, "{oops").await;
    assert_eq!(response.status(), 400);
    let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(body["error"]["code"], -32700);
    let response = stream.post(&client, r#"{"hello":"world"}"#).await;
    assert_eq!(response.status(), 400);
    let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
    assert_eq!(body["error"]["code"], -32600);
    assert_eq!(
        stream
            .post(&client, r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
            .await
            .status(),
        202
    );
    assert_eq!(stream.next_message().await["id"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_need_a_known_session() {
    let (_harness, port) = start(json!({}));
    let client = build_client().unwrap();
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let post = |url: String| {
        client
            .post(url)
            .header("content-type", "application/json")
            .body(ping)
            .send()
    };
    assert_eq!(
        post(format!("http://127.0.0.1:{port}/message"))
            .await
            .unwrap()
            .status(),
        400
    );
    let unknown =
        format!("http://127.0.0.1:{port}/message?sessionId=0123456789abcdef0123456789abcdef");
    assert_eq!(post(unknown).await.unwrap().status(), 404);
    let stream = Stream::open(&client, port).await;
    assert_eq!(post(stream.endpoint.clone()).await.unwrap().status(), 202);
    assert_eq!(
        client
            .get(format!("http://127.0.0.1:{port}/elsewhere"))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        client
            .post(format!("http://127.0.0.1:{port}/sse"))
            .send()
            .await
            .unwrap()
            .status(),
        405
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_ends_its_session() {
    let (harness, port) = start(json!({}));
    let client = build_client().unwrap();
    let stream = Stream::open(&client, port).await;
    let endpoint = stream.endpoint.clone();
    drop(stream);
    let closed = harness.wait_for(WAIT, |seen| matches!(seen, Seen::Closed { .. }));
    assert!(
        matches!(&closed, Some(Seen::Closed { reason, .. }) if reason.contains("disconnected")),
        "{closed:?}"
    );
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let response = client
        .post(endpoint)
        .header("content-type", "application/json")
        .body(ping)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_origin_token_and_size_are_checked() {
    let (_harness, port) = start(json!({"auth-token": "tok", "max-body-bytes": 512}));
    let client = build_client().unwrap();
    let sse = format!("http://127.0.0.1:{port}/sse");
    let get = |headers: Vec<(&'static str, &'static str)>| {
        let mut request = client.get(&sse).header("accept", "text/event-stream");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let refused = get(vec![]).await.unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(refused.headers()["www-authenticate"], "Bearer");
    assert_eq!(
        get(vec![("authorization", "Bearer nope")])
            .await
            .unwrap()
            .status(),
        401
    );
    let auth = ("authorization", "Bearer tok");
    assert_eq!(
        get(vec![auth, ("host", "localhost.evil.com")])
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(
        get(vec![auth, ("origin", "https://evil.example")])
            .await
            .unwrap()
            .status(),
        403
    );
    let ok = get(vec![
        auth,
        ("origin", "http://127.0.0.1"),
        ("host", "localhost"),
    ])
    .await
    .unwrap();
    assert_eq!(ok.status(), 200);
    let mut response = ok;
    let mut reader = EventReader::new(1024);
    let endpoint = tokio::time::timeout(WAIT, reader.next(&mut response))
        .await
        .unwrap()
        .unwrap()
        .data;
    let message = format!("http://127.0.0.1:{port}{endpoint}");
    let post = |body: String, token: &'static str| {
        client
            .post(&message)
            .header("content-type", "application/json")
            .header("authorization", token)
            .body(body)
            .send()
    };
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_owned();
    assert_eq!(
        post(ping.clone(), "Bearer nope").await.unwrap().status(),
        401
    );
    assert_eq!(post(ping, "Bearer tok").await.unwrap().status(), 202);
    let big =
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"pad": "x".repeat(1000)}});
    assert_eq!(
        post(big.to_string(), "Bearer tok").await.unwrap().status(),
        413
    );
}

#[test]
fn a_busy_port_fails_listen_plainly() {
    let transport = SseTransport::open("{}").unwrap();
    let first = transport.listen(r#"{"bind":"127.0.0.1:0"}"#).unwrap();
    let address = first.address();
    let port = address.rsplit(':').next().unwrap();
    let error = transport
        .listen(&json!({"bind": address}).to_string())
        .err()
        .unwrap();
    assert_eq!(error, format!("port {port} is already in use ({address})"));
}

#[test]
fn sse_connector_talks_to_the_sse_listener() {
    let (harness, port) = start(json!({}));
    let mut client =
        connect(json!({"name": "own-sse", "url": format!("http://127.0.0.1:{port}/sse")})).unwrap();
    let init = client.initialize("2024-11-05").unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    assert_eq!(
        client.call("tools/list", json!({})).unwrap()["result"]["tools"][0]["name"],
        "echo"
    );
    let echo = client
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "hi"}}),
        )
        .unwrap();
    assert_eq!(text_of(&echo), "hi");
    let slow = client
        .call("tools/call", json!({"name": "slow", "arguments": {"steps": 2, "delayMs": 10}, "_meta": {"progressToken": "p"}}))
        .unwrap();
    assert_eq!(text_of(&slow), "done after 2 steps");
    assert_eq!(
        client
            .others
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .count(),
        2
    );
    let ask = client
        .call("tools/call", json!({"name": "ask", "arguments": {}}))
        .unwrap();
    assert!(text_of(&ask).contains("roots"), "{ask}");
    // The server ends the session: the stream ends and the pump says so.
    harness.end_sessions();
    let reason = client.wait_closed(WAIT).unwrap();
    assert!(reason.starts_with("SSE stream ended"), "{reason}");
}

#[test]
fn closing_the_sse_pump_ends_the_session_on_the_server() {
    let (harness, port) = start(json!({}));
    let mut client =
        connect(json!({"name": "own-sse", "url": format!("http://127.0.0.1:{port}/sse")})).unwrap();
    client.initialize("2024-11-05").unwrap();
    client.pump.close();
    let closed = harness.wait_for(WAIT, |seen| matches!(seen, Seen::Closed { .. }));
    assert!(closed.is_some());
    assert!(
        client
            .pump
            .send(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#)
            .is_err()
    );
}

#[test]
fn connect_fails_plainly_when_there_is_no_sse_server() {
    let port = runbyte_http_common::testing::free_port();
    let error = connect(json!({"name": "none", "url": format!("http://127.0.0.1:{port}/sse")}))
        .err()
        .unwrap();
    assert!(
        error.starts_with("server `none`: GET http://127.0.0.1:"),
        "{error}"
    );
    let (address, _server) =
        canned_server("HTTP/1.1 404 Not Found\r\ncontent-length: 4\r\n\r\nnope".to_owned());
    let error = connect(json!({"name": "nf", "url": format!("http://{address}/sse")}))
        .err()
        .unwrap();
    assert!(
        error.contains("HTTP 404") && error.contains("nope"),
        "{error}"
    );
}

#[test]
fn an_endpoint_on_another_origin_is_refused() {
    let (address, _server) = canned_server(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\nevent: endpoint\ndata: http://127.0.0.2:9/message?sessionId=x\n\n"
            .to_owned(),
    );
    let error = connect(json!({"name": "evil", "url": format!("http://{address}/sse")}))
        .err()
        .unwrap();
    assert!(error.contains("another origin"), "{error}");
}

#[test]
fn sse_connector_against_server_everything() {
    let Some(server) = Everything::start("sse") else {
        return;
    };
    let mut client = connect(
        json!({"name": "everything-sse", "url": format!("http://127.0.0.1:{}/sse", server.port)}),
    )
    .unwrap();
    let init = client.initialize("2024-11-05").unwrap();
    assert!(init["result"]["serverInfo"]["name"].is_string(), "{init}");
    let tools = client.call("tools/list", json!({})).unwrap();
    assert!(
        tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo")
    );
    let echo = client
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "old school"}}),
        )
        .unwrap();
    assert_eq!(text_of(&echo), "Echo: old school");
    let long = client
        .call(
            "tools/call",
            json!({"name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 2},
                   "_meta": {"progressToken": 5}}),
        )
        .unwrap();
    assert!(text_of(&long).contains("completed"), "{long}");
    assert_eq!(
        client
            .others
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .count(),
        2
    );
    client.pump.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_sessions_are_capped_per_peer_and_end_when_never_initialized() {
    let (harness, port) = start(json!({
        "max-sessions-per-peer": 2,
        "uninitialized-session-timeout-ms": 300,
    }));
    let client = build_client().unwrap();
    let mut first = Stream::open(&client, port).await;
    let _second = Stream::open(&client, port).await;
    let refused = client
        .get(format!("http://127.0.0.1:{port}/sse"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 429);
    // Another client IP is served.
    let other = reqwest::Client::builder()
        .local_address("127.0.0.5".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap();
    let mut third = Stream::open(&other, port).await;
    // `first` gets past initialize; the others never do and end.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let posted = client
        .post(&first.endpoint)
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 202);
    assert_eq!(first.next_message().await["id"], 1);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let posted = client
        .post(&first.endpoint)
        .json(&note)
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 202);
    let ended = tokio::time::timeout(WAIT, third.reader.next(&mut third.response)).await;
    assert!(matches!(ended, Ok(Err(_))), "the stream should end");
    let closed = harness.wait_for(
        WAIT,
        |seen| matches!(seen, Seen::Closed { reason, .. } if reason.contains("not initialized")),
    );
    assert!(closed.is_some());
    tokio::time::sleep(Duration::from_millis(600)).await;
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let posted = client
        .post(&first.endpoint)
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 202, "an initialized session stays");
    assert_eq!(first.next_message().await["id"], 2);
}
