//! `GET /metrics`: the host's metrics for a scraper, behind the same Host, Origin and token checks
//! as the MCP endpoint.
//!
//! The plugin ABI carries MCP connections and nothing else, so the listener asks the host the
//! way a client would: one JSON-RPC request with the reserved method `runbyte/metrics`, handed
//! to the host as a connection of its own that ends with its answer (as a 2026-07-28 request
//! is, see [`super::modern`]). The host answers `{"contentType", "text"}`, written out as the
//! HTTP body; method-not-found (`[telemetry] metrics` is off) becomes a 404.

use std::{
    net::SocketAddr,
    sync::{Arc, Weak},
};

use hyper::{Response, StatusCode, header};
use runbyte_http_common::{
    jsonrpc,
    security::random_id,
    server::{self, Body},
};
use serde_json::{Value, json};

use super::{EndsSession, RequestStream, Session, State, modern::PROTOCOL_VERSION};

/// The path scrapers ask.
pub(super) const METRICS_PATH: &str = "/metrics";
/// The host's reserved method (`runbyte_core::telemetry::METRICS_METHOD`: the plugin cannot
/// depend on the host, and the ABI stays as it is).
const METRICS_METHOD: &str = "runbyte/metrics";
/// The revision the request is made in: one request, no session.
const REVISION: &str = "2026-07-28";
/// JSON-RPC's method-not-found: what the host answers when metrics are off.
const METHOD_NOT_FOUND: i64 = -32601;

impl State {
    /// Answers an (already screened) `GET /metrics` with the host's text.
    pub(super) async fn metrics(self: &Arc<Self>, peer: SocketAddr) -> Response<Body> {
        let unavailable = |why: &str| server::text(StatusCode::SERVICE_UNAVAILABLE, why);
        let Ok(key) = random_id() else {
            return unavailable("no randomness for a request id");
        };
        let id = json!("metrics");
        let message = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": METRICS_METHOD,
            "params": {"_meta": {
                PROTOCOL_VERSION: REVISION,
                "io.modelcontextprotocol/clientCapabilities": {},
            }},
        });
        let session = Arc::new(Session::new(format!("metrics-{key}"), Weak::new()));
        let _ender = EndsSession(session.clone());
        let stream =
            match session.open_request_stream(vec![jsonrpc::id_key(&id)], Vec::new(), false, false)
            {
                Ok(stream) => stream,
                Err(answer) => return answer,
            };
        session.to_host(message);
        if !self.hand_to_host(&session, peer) {
            return unavailable("the server is shutting down");
        }
        let RequestStream::Json(rx) = stream else {
            return unavailable("the host's answer came as a stream");
        };
        let Ok(text) = rx.await else {
            return unavailable("the server ended the request without answering");
        };
        answer(&text)
    }
}

/// The HTTP answer for the host's JSON-RPC answer `text`.
fn answer(text: &str) -> Response<Body> {
    let reply: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    if let Some(error) = reply.get("error") {
        let code = error.get("code").and_then(Value::as_i64);
        return if code == Some(METHOD_NOT_FOUND) {
            server::text(
                StatusCode::NOT_FOUND,
                "metrics are off: set `metrics = true` in [telemetry]",
            )
        } else {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("");
            server::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("the metrics could not be read: {message}"),
            )
        };
    }
    let result = reply.get("result");
    let body = result.and_then(|r| r.get("text")).and_then(Value::as_str);
    let content_type = result
        .and_then(|r| r.get("contentType"))
        .and_then(Value::as_str)
        .and_then(|value| header::HeaderValue::from_str(value).ok());
    let (Some(body), Some(content_type)) = (body, content_type) else {
        return server::text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the host's metrics answer has no `text` and `contentType`",
        );
    };
    let mut response = server::text(StatusCode::OK, body);
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, content_type);
    response
}
