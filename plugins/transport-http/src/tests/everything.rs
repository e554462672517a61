//! The `http` connector against the real `@modelcontextprotocol/server-everything` (Node).
//! Skipped, with a message, when the npm package is not installed (see `testing::npm_dir`).

use std::time::{Duration, Instant};

use runbyte_http_common::testing::{Driver, Everything};
use runbyte_plugin_api::transport::Transport;
use serde_json::{Value, json};

use crate::HttpTransport;

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
fn streamable_http_against_server_everything() {
    let Some(server) = Everything::start("streamableHttp") else {
        return;
    };
    let mut client = connect(
        json!({"name": "everything", "url": format!("http://127.0.0.1:{}/mcp", server.port)}),
    );
    let init = client.initialize("2025-06-18").unwrap();
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
    let tools = client.call("tools/list", json!({})).unwrap();
    let names: Vec<_> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"echo") && names.contains(&"trigger-long-running-operation"),
        "{names:?}"
    );
    let echo = client
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "hello"}}),
        )
        .unwrap();
    assert_eq!(text_of(&echo), "Echo: hello");

    // A long-running tool reports progress on the way.
    let long = client
        .call(
            "tools/call",
            json!({"name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3},
                   "_meta": {"progressToken": "p1"}}),
        )
        .unwrap();
    assert!(
        text_of(&long).contains("Long running operation completed"),
        "{long}"
    );
    let progress: Vec<_> = client
        .others
        .iter()
        .filter(|m| m["method"] == "notifications/progress" && m["params"]["progressToken"] == "p1")
        .collect();
    assert_eq!(progress.len(), 3, "{:?}", client.others);

    // Calls are multiplexed: an echo sent after a 3 s operation is answered long before it.
    let started = Instant::now();
    let slow = client.send_request(
        "tools/call",
        json!({"name": "trigger-long-running-operation", "arguments": {"duration": 3, "steps": 3}}),
    );
    let fast: Vec<_> = (0..3)
        .map(|n| {
            client.send_request(
                "tools/call",
                json!({"name": "echo", "arguments": {"message": format!("m{n}")}}),
            )
        })
        .collect();
    for (n, id) in fast.iter().enumerate() {
        assert_eq!(
            text_of(&client.response(id, Duration::from_secs(10)).unwrap()),
            format!("Echo: m{n}")
        );
    }
    assert!(
        started.elapsed() < Duration::from_millis(2500),
        "echoes took {:?}",
        started.elapsed()
    );
    let slow = client.response(&slow, Duration::from_secs(10)).unwrap();
    assert!(text_of(&slow).contains("completed"), "{slow}");
    assert!(started.elapsed() >= Duration::from_secs(3));
    client.pump.close();
}

#[test]
fn fallback_from_streamable_http_to_sse_against_server_everything() {
    let Some(server) = Everything::start("sse") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/sse", server.port);
    let mut client = connect(json!({"name": "everything-sse", "url": url, "fallback": "sse"}));
    let init = client.initialize("2025-03-26").unwrap();
    assert!(init["result"]["serverInfo"]["name"].is_string(), "{init}");
    let echo = client
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "legacy"}}),
        )
        .unwrap();
    assert_eq!(text_of(&echo), "Echo: legacy");
    let tools = client.call("tools/list", json!({})).unwrap();
    assert!(tools["result"]["tools"].as_array().unwrap().len() > 3);
    client.pump.close();
}
