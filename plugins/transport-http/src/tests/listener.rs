//! The `http` listener, driven by a real HTTP client over loopback.

use std::time::Duration;

use runbyte_http_common::{client::EventReader, testing::Seen};
use runbyte_plugin_api::transport::Transport;
use serde_json::{Value, json};

use super::{BOTH, INIT, JSON_ONLY, ReadJson, Server, http, post, session, sse_messages};
use crate::HttpTransport;

const WAIT: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_over_sse_opens_a_session_with_a_random_id() {
    let server = Server::start(json!({}));
    let client = http();
    let response = post(&client, &server.url(), None, INIT, BOTH).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(id.len(), 32);
    assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    let messages = sse_messages(response, WAIT).await;
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert_eq!(messages[0]["id"], 1);
    assert_eq!(
        messages[0]["result"]["serverInfo"]["name"],
        "runbyte-test-harness"
    );
    let accepted = server
        .harness
        .wait_for(WAIT, |seen| matches!(seen, Seen::Accepted { .. }))
        .unwrap();
    let Seen::Accepted { session, peer } = accepted else {
        unreachable!()
    };
    assert_eq!(session, id);
    assert!(peer.starts_with("127.0.0.1:"), "{peer}");
    // A second session gets another id.
    let other = session_id(&client, &server.url()).await;
    assert_ne!(other, id);
}

async fn session_id(client: &reqwest::Client, url: &str) -> String {
    session(client, url, "2025-06-18").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_answer_in_json_when_the_client_accepts_only_json() {
    let server = Server::start(json!({}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    let ping = r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#;
    let response = post(&client, &server.url(), Some(&id), ping, JSON_ONLY).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/json");
    let body: Value = response.read_json().await.unwrap();
    assert_eq!(body, json!({"jsonrpc": "2.0", "id": "p", "result": {}}));
    let list = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
    let body: Value = post(&client, &server.url(), Some(&id), list, JSON_ONLY)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["result"]["tools"][0]["name"], "echo");
    let level = r#"{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"info"}}"#;
    let body: Value = post(&client, &server.url(), Some(&id), level, JSON_ONLY)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["result"], json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_ids_are_required_and_unknown_ones_are_404() {
    let server = Server::start(json!({}));
    let client = http();
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let response = post(&client, &server.url(), None, ping, BOTH).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.read_json().await.unwrap();
    assert_eq!(body["id"], Value::Null);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Mcp-Session-Id")
    );
    let response = post(
        &client,
        &server.url(),
        Some("0123456789abcdef0123456789abcdef"),
        ping,
        BOTH,
    )
    .await;
    assert_eq!(response.status(), 404);
    // The counterpart: the right id passes.
    let id = session_id(&client, &server.url()).await;
    assert_eq!(
        post(&client, &server.url(), Some(&id), ping, JSON_ONLY)
            .await
            .status(),
        200
    );
    // Re-initializing an existing session is refused; with an unknown id it is 404.
    assert_eq!(
        post(&client, &server.url(), Some(&id), INIT, BOTH)
            .await
            .status(),
        400
    );
    assert_eq!(
        post(&client, &server.url(), Some("nope"), INIT, BOTH)
            .await
            .status(),
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_and_responses_are_accepted_with_202_and_reach_the_host() {
    let server = Server::start(json!({}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    let note = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}"#;
    let response = post(&client, &server.url(), Some(&id), note, BOTH).await;
    assert_eq!(response.status(), 202);
    assert_eq!(response.bytes().await.unwrap().len(), 0);
    let seen = server.harness.wait_for(WAIT, |seen| {
        matches!(seen, Seen::Message { message, .. } if message["method"] == "notifications/cancelled")
    });
    assert!(seen.is_some());
    let initialized = server.harness.wait_for(WAIT, |seen| {
        matches!(seen, Seen::Message { message, .. } if message["method"] == "notifications/initialized")
    });
    assert!(initialized.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_invalid_bodies_are_400_and_the_session_survives() {
    let server = Server::start(json!({}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    let response = post(&client, &server.url(), Some(&id), "{not json", BOTH).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.read_json().await.unwrap();
    assert_eq!(body["error"]["code"], -32700);
    assert_eq!(body["id"], Value::Null);
    for invalid in [
        r#"{"jsonrpc":"2.0"}"#,
        r#"{"id":1,"method":"ping"}"#,
        "42",
        "[]",
    ] {
        let response = post(&client, &server.url(), Some(&id), invalid, BOTH).await;
        assert_eq!(response.status(), 400, "{invalid}");
        let body: Value = response.read_json().await.unwrap();
        assert_eq!(body["error"]["code"], -32600, "{invalid}");
    }
    let ping = r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#;
    let response = post(&client, &server.url(), Some(&id), ping, JSON_ONLY).await;
    assert_eq!(response.status(), 200);
    // A malformed initialize is 400 too, and opens no session.
    let response = post(&client, &server.url(), None, "{", BOTH).await;
    assert_eq!(response.status(), 400);
    assert!(response.headers().get("mcp-session-id").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_version_headers_are_checked() {
    let server = Server::start(json!({}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    // Each request its own id: an id still in flight in the session is refused.
    let with_version = |version: &'static str| {
        client
            .post(server.url())
            .header("content-type", "application/json")
            .header("accept", BOTH)
            .header("mcp-session-id", id.as_str())
            .header("mcp-protocol-version", version)
            .body(format!(
                r#"{{"jsonrpc":"2.0","id":"{version}","method":"ping"}}"#
            ))
            .send()
    };
    assert_eq!(with_version("1999-01-01").await.unwrap().status(), 400);
    assert_eq!(with_version("2025-06-18").await.unwrap().status(), 200);
    // Older known revisions pass (the conformance suite sends 2025-03-26 on a newer session).
    assert_eq!(with_version("2025-03-26").await.unwrap().status(), 200);
    let get = client
        .get(server.url())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", id.as_str())
        .header("mcp-protocol-version", "bogus")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_follow_the_negotiated_revision() {
    let server = Server::start(json!({}));
    let client = http();
    let batch = r#"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#;
    let old = session(&client, &server.url(), "2025-03-26").await;
    let response = post(&client, &server.url(), Some(&old), batch, JSON_ONLY).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.read_json().await.unwrap();
    let mut ids: Vec<_> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    assert_eq!(ids, ["a", "b"]);
    // Over SSE, both responses arrive and the stream ends.
    let response = post(
        &client,
        &server.url(),
        Some(&old),
        &batch.replace("\"a\"", "\"c\"").replace("\"b\"", "\"d\""),
        BOTH,
    )
    .await;
    let messages = sse_messages(response, WAIT).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    let new = session(&client, &server.url(), "2025-06-18").await;
    let response = post(&client, &server.url(), Some(&new), batch, JSON_ONLY).await;
    assert_eq!(response.status(), 400);
    let body: Value = response.read_json().await.unwrap();
    assert_eq!(body["error"]["code"], -32600);
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2025-06-18")
    );
    // initialize may never be batched.
    let response = post(&client, &server.url(), None, &format!("[{INIT}]"), BOTH).await;
    assert_eq!(response.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_goes_on_the_request_stream_before_the_response() {
    let server = Server::start(json!({}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    // A standalone stream and a newer request stream are open too: neither gets the progress.
    let mut get = client
        .get(server.url())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", id.as_str())
        .send()
        .await
        .unwrap();
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"steps": 3, "delayMs": 100}, "_meta": {"progressToken": "tok"}}});
    let response = post(&client, &server.url(), Some(&id), &call.to_string(), BOTH).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let other = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"steps": 1, "delayMs": 500}}});
    let newer = post(&client, &server.url(), Some(&id), &other.to_string(), BOTH).await;
    let messages = sse_messages(response, WAIT).await;
    let methods: Vec<_> = messages
        .iter()
        .map(|m| m["method"].as_str().unwrap_or("response"))
        .collect();
    assert_eq!(
        methods,
        [
            "notifications/progress",
            "notifications/progress",
            "notifications/progress",
            "response"
        ]
    );
    assert_eq!(messages[2]["params"]["progress"], 3);
    assert_eq!(
        messages[3]["result"]["content"][0]["text"],
        "done after 3 steps"
    );
    let newer = sse_messages(newer, WAIT).await;
    assert_eq!(newer.len(), 1, "{newer:?}");
    assert_eq!(newer[0]["id"], 8);
    let mut reader = EventReader::new(1024);
    let nothing = tokio::time::timeout(Duration::from_millis(200), reader.next(&mut get)).await;
    assert!(nothing.is_err(), "the GET stream got {nothing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_requests_ride_the_running_request_stream_and_the_answer_comes_back_by_post() {
    let server = Server::start(json!({}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    let call =
        r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ask","arguments":{}}}"#;
    let mut response = post(&client, &server.url(), Some(&id), call, BOTH).await;
    let mut reader = EventReader::new(1 << 20);
    let event = tokio::time::timeout(WAIT, reader.next(&mut response))
        .await
        .unwrap()
        .unwrap();
    let request: Value = serde_json::from_str(&event.data).unwrap();
    assert_eq!(request["method"], "roots/list");
    let answer =
        json!({"jsonrpc": "2.0", "id": request["id"], "result": {"roots": [{"uri": "file:///x"}]}});
    assert_eq!(
        post(&client, &server.url(), Some(&id), &answer.to_string(), BOTH)
            .await
            .status(),
        202
    );
    let event = tokio::time::timeout(WAIT, reader.next(&mut response))
        .await
        .unwrap()
        .unwrap();
    let result: Value = serde_json::from_str(&event.data).unwrap();
    assert_eq!(result["id"], 8);
    assert!(
        result["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("file:///x")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_get_stream_carries_unrelated_messages_and_a_second_get_replaces_it() {
    let server = Server::start(json!({}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    let get = || {
        client
            .get(server.url())
            .header("accept", "text/event-stream")
            .header("mcp-session-id", id.as_str())
            .send()
    };
    let mut first = get().await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(first.headers()["content-type"], "text/event-stream");
    // A JSON-mode call whose tool sends an unrelated notification: it arrives on the GET stream.
    let call = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"notify","arguments":{}}}"#;
    let body: Value = post(&client, &server.url(), Some(&id), call, JSON_ONLY)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["result"]["content"][0]["text"], "notified");
    let mut reader = EventReader::new(1 << 20);
    let event = tokio::time::timeout(WAIT, reader.next(&mut first))
        .await
        .unwrap()
        .unwrap();
    let note: Value = serde_json::from_str(&event.data).unwrap();
    assert_eq!(note["method"], "notifications/tools/list_changed");
    // The second GET ends the first.
    let mut second = get().await.unwrap();
    assert_eq!(second.status(), 200);
    let ended = tokio::time::timeout(WAIT, reader.next(&mut first))
        .await
        .unwrap();
    assert!(ended.is_err(), "{ended:?}");
    let body: Value = post(
        &client,
        &server.url(),
        Some(&id),
        &call.replace(":9", ":10"),
        JSON_ONLY,
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(body["id"], 10);
    let mut reader = EventReader::new(1 << 20);
    let event = tokio::time::timeout(WAIT, reader.next(&mut second))
        .await
        .unwrap()
        .unwrap();
    assert!(event.data.contains("list_changed"));
    // A GET without a session, or not accepting SSE, is refused.
    let bare = client
        .get(server.url())
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 400);
    let json = client
        .get(server.url())
        .header("accept", "application/json")
        .header("mcp-session-id", id.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(json.status(), 406);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_before_any_stream_opens_wait_for_the_get_stream() {
    let server = Server::start(json!({}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    let call = r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"notify","arguments":{}}}"#;
    post(&client, &server.url(), Some(&id), call, JSON_ONLY)
        .await
        .bytes()
        .await
        .unwrap();
    let mut stream = client
        .get(server.url())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", id.as_str())
        .send()
        .await
        .unwrap();
    let mut reader = EventReader::new(1 << 20);
    let event = tokio::time::timeout(WAIT, reader.next(&mut stream))
        .await
        .unwrap()
        .unwrap();
    assert!(event.data.contains("list_changed"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_ends_the_session_for_the_host_and_the_client() {
    let server = Server::start(json!({}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    let delete = client
        .delete(server.url())
        .header("mcp-session-id", id.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 200);
    let closed = server
        .harness
        .wait_for(WAIT, |seen| matches!(seen, Seen::Closed { .. }))
        .unwrap();
    let Seen::Closed { session, reason } = closed else {
        unreachable!()
    };
    assert_eq!(session, id);
    assert!(reason.contains("DELETE"), "{reason}");
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    assert_eq!(
        post(&client, &server.url(), Some(&id), ping, BOTH)
            .await
            .status(),
        404
    );
    let again = client
        .delete(server.url())
        .header("mcp-session-id", id.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);
    let bare = client.delete(server.url()).send().await.unwrap();
    assert_eq!(bare.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_request_streams_are_independent() {
    let server = Server::start(json!({}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    let slow = r#"{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"slow","arguments":{"steps":2,"delayMs":1000}}}"#;
    let fast: Vec<_> = (0..3)
        .map(|n| format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"echo","arguments":{{"message":"m{n}"}}}}}}"#))
        .collect();
    let url = server.url();
    let started = std::time::Instant::now();
    let slow_call = post(&client, &url, Some(&id), slow, BOTH);
    let fast_calls = futures_all(
        fast.iter()
            .map(|body| post(&client, &url, Some(&id), body, BOTH)),
    );
    let (slow_response, fast_responses) = tokio::join!(slow_call, fast_calls);
    for (n, response) in fast_responses.into_iter().enumerate() {
        let messages = sse_messages(response, WAIT).await;
        assert_eq!(messages[0]["result"]["content"][0]["text"], format!("m{n}"));
    }
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "fast calls waited for the slow one"
    );
    let messages = sse_messages(slow_response, WAIT).await;
    assert_eq!(messages[0]["id"], "slow");
}

async fn futures_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut out = Vec::new();
    let handles: Vec<_> = futures.collect();
    for future in handles {
        out.push(future.await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_and_origin_are_checked_on_every_request() {
    let server = Server::start(json!({"allowed-hosts": ["mcp.example.test"]}));
    let client = http();
    let init_with = |headers: Vec<(&'static str, String)>| {
        let mut request = client
            .post(server.url())
            .header("content-type", "application/json")
            .header("accept", BOTH)
            .body(INIT);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send()
    };
    let port = server.port;
    for host in [
        "evil.example.com".to_owned(),
        format!("localhost.evil.com:{port}"),
        format!("127.0.0.2:{port}"),
    ] {
        let response = init_with(vec![("host", host.clone())]).await.unwrap();
        assert_eq!(response.status(), 403, "{host}");
        let body: Value = response.read_json().await.unwrap();
        assert!(
            body["error"]["message"].as_str().unwrap().contains("Host"),
            "{body}"
        );
    }
    for host in [
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "mcp.example.test".to_owned(),
    ] {
        assert_eq!(
            init_with(vec![("host", host.clone())])
                .await
                .unwrap()
                .status(),
            200,
            "{host}"
        );
    }
    for origin in [
        "http://evil.example.com",
        "null",
        "http://localhost.evil.com",
    ] {
        let response = init_with(vec![("origin", origin.to_owned())])
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "{origin}");
    }
    let response = init_with(vec![("origin", format!("http://localhost:{port}"))])
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["access-control-allow-origin"],
        format!("http://localhost:{port}").as_str()
    );
    // The check applies to GET and DELETE too, before anything else.
    let get = client
        .get(server.url())
        .header("host", "evil.example.com")
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 403);
    // A CORS preflight from an allowed origin is answered; from another, refused.
    let preflight = client
        .request(reqwest::Method::OPTIONS, server.url())
        .header("origin", "http://localhost")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    assert!(
        preflight.headers()["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("mcp-session-id")
    );
    let preflight = client
        .request(reqwest::Method::OPTIONS, server.url())
        .header("origin", "https://evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_token_is_required_with_401_and_www_authenticate() {
    let server = Server::start(json!({"auth-token": "t0ken-with-enough-entropy"}));
    let client = http();
    let response = post(&client, &server.url(), None, INIT, BOTH).await;
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let with = |token: &'static str| {
        client
            .post(server.url())
            .header("content-type", "application/json")
            .header("accept", JSON_ONLY)
            .header("authorization", token)
            .body(INIT)
            .send()
    };
    assert_eq!(with("Bearer wrong").await.unwrap().status(), 401);
    assert_eq!(
        with("t0ken-with-enough-entropy").await.unwrap().status(),
        401
    );
    let response = with("Bearer t0ken-with-enough-entropy").await.unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    // Every later request needs it too.
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    assert_eq!(
        post(&client, &server.url(), Some(&id), ping, JSON_ONLY)
            .await
            .status(),
        401
    );
    let get = client
        .get(server.url())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", id.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limit_are_413() {
    let server = Server::start(json!({"max-body-bytes": 1024}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "x".repeat(2000)}}});
    let response = post(&client, &server.url(), Some(&id), &big.to_string(), BOTH).await;
    assert_eq!(response.status(), 413);
    // Chunked, with no Content-Length to refuse up front: the limit holds while reading.
    let status = raw_chunked_post(server.port, &id, &big.to_string());
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    let small = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "x".repeat(500)}}});
    assert_eq!(
        post(
            &client,
            &server.url(),
            Some(&id),
            &small.to_string(),
            JSON_ONLY
        )
        .await
        .status(),
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_paths_and_methods_are_refused() {
    let server = Server::start(json!({"path": "/custom"}));
    let client = http();
    let url = format!("http://127.0.0.1:{}/custom", server.port);
    assert_eq!(
        post(
            &client,
            &format!("http://127.0.0.1:{}/mcp", server.port),
            None,
            INIT,
            BOTH
        )
        .await
        .status(),
        404
    );
    assert_eq!(
        post(&client, &url, None, INIT, JSON_ONLY).await.status(),
        200
    );
    let put = client.put(&url).body("{}").send().await.unwrap();
    assert_eq!(put.status(), 405);
    assert!(put.headers()["allow"].to_str().unwrap().contains("POST"));
    let wrong_type = client
        .post(&url)
        .header("content-type", "text/plain")
        .header("accept", BOTH)
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_type.status(), 415);
    let wrong_accept = client
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "text/html")
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_accept.status(), 406);
}

#[test]
fn a_busy_port_fails_listen_plainly_and_port_zero_reports_the_real_port() {
    let transport = HttpTransport::open("{}").unwrap();
    let first = transport.listen(r#"{"bind":"127.0.0.1:0"}"#).unwrap();
    let address = first.address();
    assert!(!address.ends_with(":0"), "{address}");
    let port = address.rsplit(':').next().unwrap();
    let error = transport
        .listen(&json!({"bind": address}).to_string())
        .err()
        .unwrap();
    assert_eq!(error, format!("port {port} is already in use ({address})"));
    assert!(
        transport
            .listen(r#"{"bind":"127.0.0.1:0","path":"mcp"}"#)
            .err()
            .unwrap()
            .contains("must start with")
    );
    assert!(
        transport
            .listen(r#"{"bind":"127.0.0.1:0","allowed-hosts":["a/b"]}"#)
            .err()
            .unwrap()
            .contains("allowed-hosts")
    );
    assert!(
        HttpTransport::open(r#"{"surprise":1}"#)
            .err()
            .unwrap()
            .contains("surprise")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_listener_ends_every_session() {
    let server = Server::start(json!({}));
    let client = http();
    let id = session_id(&client, &server.url()).await;
    let mut stream = client
        .get(server.url())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", id.as_str())
        .send()
        .await
        .unwrap();
    server.harness.close();
    let closed = server
        .harness
        .wait_for(WAIT, |seen| matches!(seen, Seen::Closed { .. }));
    assert!(
        matches!(closed, Some(Seen::Closed { reason, .. }) if reason.contains("listener closed"))
    );
    let mut reader = EventReader::new(1024);
    let ended = tokio::time::timeout(WAIT, reader.next(&mut stream))
        .await
        .unwrap();
    assert!(ended.is_err());
    let refused = client.post(server.url()).body(INIT).send().await;
    assert!(refused.is_err(), "{refused:?}");
}

/// Posts `body` in 100-byte chunks over a raw socket; returns the status line.
fn raw_chunked_post(port: u16, session: &str, body: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nMcp-Session-Id: {session}\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).unwrap();
    for chunk in body.as_bytes().chunks(100) {
        let mut framed = format!("{:x}\r\n", chunk.len()).into_bytes();
        framed.extend_from_slice(chunk);
        framed.extend_from_slice(b"\r\n");
        if stream.write_all(&framed).is_err() {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n");
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probes_answer_without_a_token_or_an_allowed_host_and_readiness_ends_at_close() {
    let server = Server::start(json!({"auth-token": "a-token-of-sixteen-chars"}));
    let client = http();
    let base = format!("http://127.0.0.1:{}", server.port);
    for path in ["/healthz", "/readyz"] {
        let response = client
            .get(format!("{base}{path}"))
            .header("Host", "10.1.2.3:8080")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
    // The MCP endpoint still wants both.
    let refused = client
        .post(server.url())
        .header("Host", "10.1.2.3:8080")
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert!(refused.status().is_client_error());
    server.harness.close();
    let draining = client.get(format!("{base}/readyz")).send().await;
    if let Ok(response) = draining {
        assert_eq!(response.status(), 503);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_id_prefix_names_the_replica_and_a_bad_one_is_refused() {
    let server = Server::start(json!({"session-id-prefix": "r7."}));
    let id = session_id(&http(), &server.url()).await;
    assert!(id.starts_with("r7.") && id.len() == 35, "{id}");
    let transport = HttpTransport::open("{}").unwrap();
    let error = transport
        .listen(&json!({"bind": "127.0.0.1:0", "session-id-prefix": "r 7"}).to_string())
        .err()
        .unwrap();
    assert!(error.contains("session-id-prefix"), "{error}");
}
