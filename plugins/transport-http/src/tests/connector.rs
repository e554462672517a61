//! The `http` connector against the `http` listener (and against failure cases), end to end.

use std::time::{Duration, Instant};

use runbyte_http_common::testing::{Driver, Seen, canned_server};
use runbyte_plugin_api::transport::Transport;
use serde_json::{Value, json};

use super::Server;
use crate::HttpTransport;

const WAIT: Duration = Duration::from_secs(10);

fn connect(target: Value) -> Driver {
    let transport = HttpTransport::open("{}").unwrap();
    Driver::new(transport.connect(&target.to_string()).unwrap())
}

fn text_of(result: &Value) -> &str {
    result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
}

#[test]
fn http_connector_talks_to_the_http_listener() {
    let server = Server::start(json!({}));
    let mut client = connect(json!({"name": "own", "url": server.url()}));
    let init = client.initialize("2025-06-18").unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    let tools = client.call("tools/list", json!({})).unwrap();
    assert_eq!(tools["result"]["tools"][0]["name"], "echo");
    let echo = client
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "hi"}}),
        )
        .unwrap();
    assert_eq!(text_of(&echo), "hi");
    // Progress notifications arrive before the response.
    let slow = client
        .call("tools/call", json!({"name": "slow", "arguments": {"steps": 3, "delayMs": 20}, "_meta": {"progressToken": 42}}))
        .unwrap();
    assert_eq!(text_of(&slow), "done after 3 steps");
    let progress: Vec<_> = client
        .others
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 3, "{:?}", client.others);
    assert_eq!(progress[0]["params"]["progressToken"], 42);
    // A server request during a call is answered by the client and the call completes.
    let ask = client
        .call("tools/call", json!({"name": "ask", "arguments": {}}))
        .unwrap();
    assert!(text_of(&ask).contains("roots"), "{ask}");
    // An unrelated notification comes over the GET stream.
    let notify = client
        .call("tools/call", json!({"name": "notify", "arguments": {}}))
        .unwrap();
    assert_eq!(text_of(&notify), "notified");
    let changed = client.wait_other(WAIT, |m| m["method"] == "notifications/tools/list_changed");
    assert!(changed.is_some(), "{:?}", client.others);
    // The harness saw the handshake in order.
    let methods: Vec<String> = server
        .harness
        .seen()
        .into_iter()
        .filter_map(|seen| match seen {
            Seen::Message { message, .. } => message["method"].as_str().map(str::to_owned),
            _ => None,
        })
        .collect();
    assert_eq!(
        methods[..3],
        ["initialize", "notifications/initialized", "tools/list"]
    );
}

#[test]
fn concurrent_calls_are_multiplexed() {
    let server = Server::start(json!({}));
    let mut client = connect(json!({"name": "own", "url": server.url()}));
    client.initialize("2025-06-18").unwrap();
    let started = Instant::now();
    let slow = client.send_request(
        "tools/call",
        json!({"name": "slow", "arguments": {"steps": 1, "delayMs": 2000}}),
    );
    let fast: Vec<_> = (0..5)
        .map(|n| {
            client.send_request(
                "tools/call",
                json!({"name": "echo", "arguments": {"message": format!("m{n}")}}),
            )
        })
        .collect();
    for (n, id) in fast.iter().enumerate() {
        let answer = client.response(id, WAIT).unwrap();
        assert_eq!(text_of(&answer), format!("m{n}"));
    }
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "the echoes waited for the slow call"
    );
    let answer = client.response(&slow, WAIT).unwrap();
    assert_eq!(text_of(&answer), "done after 1 steps");
}

#[test]
fn an_expired_session_is_reinitialized_transparently() {
    let server = Server::start(json!({}));
    let mut client = connect(json!({"name": "own", "url": server.url()}));
    client.initialize("2025-06-18").unwrap();
    client.call("ping", json!({})).unwrap();
    server.harness.end_sessions();
    let echo = client
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "again"}}),
        )
        .unwrap();
    assert_eq!(text_of(&echo), "again");
    // The replayed initialize's response was swallowed: the host never sees a second one.
    assert!(
        client
            .others
            .iter()
            .all(|m| m["result"]["serverInfo"].is_null()),
        "{:?}",
        client.others
    );
    let accepted = server
        .harness
        .seen()
        .iter()
        .filter(|seen| matches!(seen, Seen::Accepted { .. }))
        .count();
    assert_eq!(accepted, 2);
    let initialized = server
        .harness
        .seen()
        .iter()
        .filter(|seen| matches!(seen, Seen::Message { message, .. } if message["method"] == "notifications/initialized"))
        .count();
    assert_eq!(initialized, 2);
}

#[test]
fn close_deletes_the_session() {
    let server = Server::start(json!({}));
    let mut client = connect(json!({"name": "own", "url": server.url()}));
    client.initialize("2025-06-18").unwrap();
    client.call("ping", json!({})).unwrap();
    client.pump.close();
    let closed = server
        .harness
        .wait_for(WAIT, |seen| matches!(seen, Seen::Closed { .. }));
    assert!(
        matches!(&closed, Some(Seen::Closed { reason, .. }) if reason.contains("DELETE")),
        "{closed:?}"
    );
    assert!(client.wait_closed(WAIT).is_some());
    assert!(
        client
            .pump
            .send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .is_err()
    );
}

#[test]
fn headers_are_sent_and_a_refused_token_closes_the_pump_with_401() {
    let server = Server::start(json!({"auth-token": "secret-token"}));
    let mut good = connect(
        json!({"name": "auth", "url": server.url(), "headers": {"Authorization": "Bearer secret-token"}}),
    );
    good.initialize("2025-06-18").unwrap();
    assert!(good.call("tools/list", json!({})).unwrap()["result"]["tools"].is_array());
    let mut bad = connect(json!({"name": "auth", "url": server.url()}));
    let id = bad.send_request("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}));
    let answer = bad.response(&id, WAIT).unwrap();
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!("HTTP 401 from {}", server.url())),
        "{message}"
    );
    let reason = bad.wait_closed(WAIT).unwrap();
    assert!(reason.contains("HTTP 401"), "{reason}");
}

#[test]
fn an_unreachable_server_fails_the_request_and_closes_the_pump() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut client =
        connect(json!({"name": "gone", "url": format!("http://127.0.0.1:{port}/mcp")}));
    let id = client.send_request("initialize", json!({}));
    let answer = client.response(&id, WAIT).unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot reach"),
        "{answer}"
    );
    let reason = client.wait_closed(WAIT).unwrap();
    assert!(
        reason.contains("cannot reach") && reason.to_lowercase().contains("refused"),
        "{reason}"
    );
}

#[test]
fn an_http_error_becomes_a_json_rpc_error_naming_the_status_url_and_body() {
    let body = "database is on fire";
    let (address, _server) = canned_server(format!(
        "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ));
    let url = format!("http://{address}/mcp");
    let mut client = connect(json!({"name": "fire", "url": url}));
    let id = client.send_request("initialize", json!({}));
    let answer = client.response(&id, WAIT).unwrap();
    assert_eq!(
        answer["error"]["message"],
        format!("HTTP 500 from {url}: {body}")
    );
    assert!(client.wait_closed(WAIT).unwrap().contains("HTTP 500"));
}

#[test]
fn redirects_to_another_origin_are_refused() {
    let (elsewhere, _other) =
        canned_server("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n".to_owned());
    let (address, _server) = canned_server(format!(
        "HTTP/1.1 307 Temporary Redirect\r\nlocation: http://{elsewhere}/mcp\r\ncontent-length: 0\r\n\r\n"
    ));
    let mut client = connect(json!({"name": "redirect", "url": format!("http://{address}/mcp")}));
    let id = client.send_request("initialize", json!({}));
    let answer = client.response(&id, WAIT).unwrap();
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(message.contains("another origin"), "{message}");
}

#[test]
fn responses_over_the_size_cap_fail_the_request_only() {
    let server = Server::start(json!({}));
    let mut client =
        connect(json!({"name": "cap", "url": server.url(), "max-message-bytes": 2000}));
    client.initialize("2025-06-18").unwrap();
    let big = client
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "x".repeat(5000)}}),
        )
        .unwrap();
    assert!(
        big["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2000 byte limit"),
        "{big}"
    );
    let small = client
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "fine"}}),
        )
        .unwrap();
    assert_eq!(text_of(&small), "fine");
}

#[test]
fn targets_are_validated_by_name() {
    let transport = HttpTransport::open("{}").unwrap();
    let error = transport
        .connect(r#"{"name":"x","url":"ftp://host/"}"#)
        .err()
        .unwrap();
    assert!(
        error.contains("server `x`") && error.contains("http or https"),
        "{error}"
    );
    let error = transport
        .connect(r#"{"name":"x","url":"http://h/","fallback":"carrier-pigeon"}"#)
        .err()
        .unwrap();
    assert!(error.contains("carrier-pigeon"), "{error}");
    let error = transport
        .connect(r#"{"name":"x","url":"http://h/","headers":{"a b":"c"}}"#)
        .err()
        .unwrap();
    assert!(error.contains("`a b`"), "{error}");
}

#[test]
fn fallback_to_sse_reaches_a_legacy_server_and_without_it_the_refusal_is_reported() {
    let sse = runbyte_transport_sse_listener();
    let url = format!("http://{}/sse", sse.address());
    let mut client = connect(json!({"name": "legacy", "url": url, "fallback": "sse"}));
    let init = client.initialize("2024-11-05").unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2024-11-05");
    let echo = client
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "old"}}),
        )
        .unwrap();
    assert_eq!(text_of(&echo), "old");
    let mut strict = connect(json!({"name": "legacy", "url": url}));
    let id = strict.send_request("initialize", json!({}));
    let answer = strict.response(&id, WAIT).unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("HTTP 405"),
        "{answer}"
    );
}

/// A 2024-11-05 server, built from the same harness over the `sse` listener's protocol: the
/// `sse` plugin is a separate crate, so this speaks through the shared legacy pieces only.
fn runbyte_transport_sse_listener() -> runbyte_http_common::testing::Harness {
    runbyte_http_common::testing::legacy_server()
}
