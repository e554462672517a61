#![allow(clippy::unwrap_used)]

mod conformance;
mod connector;
mod everything;
mod limits;
mod listener;
mod tls;

use std::time::Duration;

use reqwest::{Client, Response};
use runbyte_http_common::{
    client::{EventReader, build_client},
    testing::Harness,
};
use runbyte_plugin_api::transport::Transport;
use serde_json::{Value, json};

use super::HttpTransport;

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#;

/// An `http` listener on a free loopback port, served by the scripted harness.
struct Server {
    harness: Harness,
    port: u16,
}

impl Server {
    fn start(mut options: Value) -> Self {
        if options.get("bind").is_none() {
            options["bind"] = json!("127.0.0.1:0");
        }
        let transport = HttpTransport::open("{}").unwrap();
        let listener = transport.listen(&options.to_string()).unwrap();
        let port = listener
            .address()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        Self {
            harness: Harness::serve(listener),
            port,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}

/// `Response::json` whether or not reqwest's `json` feature is on (feature unification in a
/// workspace build may turn it on).
trait ReadJson {
    async fn read_json(self) -> Result<Value, String>;
}

impl ReadJson for Response {
    async fn read_json(self) -> Result<Value, String> {
        let body = self.bytes().await.map_err(|error| error.to_string())?;
        serde_json::from_slice(&body)
            .map_err(|error| format!("{error}: {}", String::from_utf8_lossy(&body)))
    }
}

fn http() -> Client {
    build_client().unwrap()
}

/// A POST with the headers a streamable HTTP client sends.
async fn post(
    client: &Client,
    url: &str,
    session: Option<&str>,
    body: &str,
    accept: &str,
) -> Response {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", accept)
        .body(body.to_owned());
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.unwrap()
}

const BOTH: &str = "application/json, text/event-stream";
const JSON_ONLY: &str = "application/json";

/// Initializes a session (JSON answer); returns its id.
async fn session(client: &Client, url: &str, version: &str) -> String {
    let init = INIT.replace("2025-06-18", version);
    let response = post(client, url, None, &init, JSON_ONLY).await;
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["protocolVersion"], version);
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(post(client, url, Some(&id), note, BOTH).await.status(), 202);
    id
}

/// Every `message` event of an SSE response, until it ends (or `timeout`).
async fn sse_messages(mut response: Response, timeout: Duration) -> Vec<Value> {
    let mut reader = EventReader::new(1 << 20);
    let mut out = Vec::new();
    let _ = tokio::time::timeout(timeout, async {
        while let Ok(event) = reader.next(&mut response).await {
            if !event.data.is_empty() {
                out.push(serde_json::from_str(&event.data).unwrap());
            }
        }
    })
    .await;
    out
}
