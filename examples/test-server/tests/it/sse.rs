//! The legacy HTTP+SSE transport, checked with raw requests.

use futures::StreamExt as _;
use futures::stream::BoxStream;
use serde_json::{Value, json};

use crate::common::{WAIT, listen};

/// Reads `event:` / `data:` blocks from an SSE response.
struct Events {
    body: BoxStream<'static, Vec<u8>>,
    buffer: String,
}

impl Events {
    async fn open(url: &str, token: Option<&str>) -> Self {
        let mut request = reqwest::Client::new()
            .get(url)
            .header("accept", "text/event-stream");
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        let content_type = response.headers()["content-type"].to_str().unwrap();
        assert!(
            content_type.starts_with("text/event-stream"),
            "{content_type}"
        );
        let body = response
            .bytes_stream()
            .map(|chunk| chunk.unwrap().to_vec())
            .boxed();
        Self {
            body,
            buffer: String::new(),
        }
    }

    /// The next event's name and data, skipping keep-alive comments.
    async fn next(&mut self) -> (String, String) {
        tokio::time::timeout(WAIT, async {
            loop {
                if let Some(end) = self.buffer.find("\n\n") {
                    let block: String = self.buffer.drain(..end + 2).collect();
                    let mut event = String::from("message");
                    let mut data = Vec::new();
                    for line in block.lines() {
                        if let Some(name) = line.strip_prefix("event:") {
                            event = name.trim().to_owned();
                        } else if let Some(part) = line.strip_prefix("data:") {
                            data.push(part.strip_prefix(' ').unwrap_or(part));
                        }
                    }
                    if !data.is_empty() {
                        return (event, data.join("\n"));
                    }
                    continue;
                }
                let chunk = self.body.next().await.expect("the stream stays open");
                self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
            }
        })
        .await
        .expect("an SSE event")
    }

    async fn next_message(&mut self) -> Value {
        let (event, data) = self.next().await;
        assert_eq!(event, "message");
        serde_json::from_str(&data).unwrap()
    }
}

async fn post(url: &str, body: &str) -> u16 {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    response.status().as_u16()
}

fn base(url: &str) -> &str {
    url.strip_suffix("/sse").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_sessions_answer_posts_on_the_stream() {
    let server = listen(&["--transport", "sse"]).await;
    assert!(server.url.starts_with("http://127.0.0.1:") && server.url.ends_with("/sse"));
    let base = base(&server.url);

    let mut events = Events::open(&server.url, None).await;
    let (event, endpoint) = events.next().await;
    assert_eq!(event, "endpoint");
    let session = endpoint
        .strip_prefix("/message?sessionId=")
        .expect("a relative endpoint");
    assert_eq!(session.len(), 32, "128 bits in hex");
    let message_url = format!("{base}{endpoint}");

    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {},
        "clientInfo": {"name": "raw-sse", "version": "0"}}});
    assert_eq!(post(&message_url, &initialize.to_string()).await, 202);
    let answer = events.next_message().await;
    assert_eq!(answer["id"], 1);
    assert_eq!(
        answer["result"]["serverInfo"]["name"],
        "runbyte-test-server"
    );
    assert_eq!(answer["result"]["protocolVersion"], "2024-11-05");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(&message_url, &initialized.to_string()).await, 202);

    // Pretty-printed bodies are fine: the server re-serialises them onto one line.
    let echo = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "over sse"}}});
    assert_eq!(
        post(&message_url, &serde_json::to_string_pretty(&echo).unwrap()).await,
        202
    );
    let answer = events.next_message().await;
    assert_eq!(answer["id"], 2);
    assert_eq!(answer["result"]["content"][0]["text"], "over sse");

    let change = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "change_tools", "arguments": {}}});
    assert_eq!(post(&message_url, &change.to_string()).await, 202);
    let mut seen = [events.next_message().await, events.next_message().await];
    seen.sort_by_key(|message| message.get("id").is_some());
    assert_eq!(seen[0]["method"], "notifications/tools/list_changed");
    assert_eq!(seen[1]["id"], 3);

    assert_eq!(
        post(&format!("{base}/message?sessionId=ffff"), "{}").await,
        404
    );
    assert_eq!(post(&format!("{base}/message"), "{}").await, 400);
    assert_eq!(post(&message_url, "not json").await, 400);
    assert_eq!(
        post(&server.url, &initialize.to_string()).await,
        405,
        "POST /sse"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_token_and_absolute_endpoint() {
    let args = [
        "--transport",
        "sse",
        "--auth-token",
        "tok",
        "--sse-absolute-endpoint",
    ];
    let server = listen(&args).await;
    let refused = reqwest::Client::new()
        .get(&server.url)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);

    let mut events = Events::open(&server.url, Some("tok")).await;
    let (event, endpoint) = events.next().await;
    assert_eq!(event, "endpoint");
    let expected = format!("{}/message?sessionId=", base(&server.url));
    assert!(endpoint.starts_with(&expected), "{endpoint}");
    assert_eq!(post(&endpoint, "{}").await, 401, "posts need the token too");
}
