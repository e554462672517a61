//! MCP 2026-07-28 on the same endpoint: stateless requests, each carrying its protocol version
//! and client capabilities in `_meta` and the standard headers (SEP-2575, SEP-2243).
//!
//! A POST is modern when its request is `server/discover`, its `_meta` names a protocol
//! version, or its `MCP-Protocol-Version` header names a revision this listener does not know
//! as a legacy one (2026-07-28, or anything unknown); an `initialize` whose `params` name a
//! `protocolVersion` always starts a legacy session. A modern request never touches the session
//! table: it is checked here, then handed to the host as a session of its own that ends with its
//! answer (or, for `subscriptions/listen`, when the client closes the stream), so any number of
//! replicas can answer any request. The host decides the rest (version support, `resultType`,
//! caching hints, `server/discover`); this module turns its errors into the HTTP statuses the
//! spec gives them.
//!
//! The checks, in the spec's order, each answered with the request's `id`:
//! 1. `MCP-Protocol-Version` missing while `_meta` names a version: 400, -32020.
//! 2. `_meta` without `io.modelcontextprotocol/protocolVersion` (a string) or
//!    `io.modelcontextprotocol/clientCapabilities` (an object): 400, -32602.
//! 3. The header differs from `_meta`'s version: 400, -32020.
//! 4. `Mcp-Method` missing or not the body's method; `Mcp-Name` missing or not the body's
//!    `params.name` (`tools/call`, `prompts/get`), `params.uri` (`resources/read`) or
//!    `params.taskId` (`tasks/get`, `tasks/update`, `tasks/cancel`: SEP-2663), after decoding
//!    the `=?base64?…?=` form: 400, -32020.
//! 5. A method 2026-07-28 removed (`initialize`, `ping`, `logging/setLevel`,
//!    `resources/subscribe`, `resources/unsubscribe`): 404, -32601.
//!
//! The host's own errors map to statuses as the spec asks: -32020, -32021, -32022 → 400;
//! -32601 → 404; anything else is a 200 carrying the JSON-RPC error.

// Refusals are returned as the HTTP answer itself (`Err(Response)`), as in `server`.
#![allow(clippy::result_large_err)]

use hyper::{HeaderMap, Response, StatusCode};
use runbyte_http_common::server::{self, Body};
use runbyte_plugin_api::transport::PARAM_HEADERS_META;
use serde_json::{Value, json};

use super::{KNOWN_VERSIONS, VERSION_HEADER, header_text};

/// `_meta` key of the request's protocol revision.
pub(super) const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities for this request.
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const METHOD_HEADER: &str = "mcp-method";
/// What the headers named by a tool's `x-mcp-header` arguments start with (lowercase).
const PARAM_HEADER_PREFIX: &str = "mcp-param-";
const NAME_HEADER: &str = "mcp-name";

/// JSON-RPC errors of 2026-07-28.
pub(super) const HEADER_MISMATCH: i64 = -32020;
const MISSING_CLIENT_CAPABILITY: i64 = -32021;
const UNSUPPORTED_VERSION: i64 = -32022;
const INVALID_PARAMS: i64 = -32602;
const METHOD_NOT_FOUND: i64 = -32601;

/// Methods of the legacy revisions that 2026-07-28 removed.
const REMOVED: [&str; 5] = [
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// Whether `message` (one JSON-RPC message, not a batch) is a 2026-07-28 request.
pub(super) fn is_modern(message: &Value, header_version: Option<&str>) -> bool {
    let method = message.get("method").and_then(Value::as_str);
    if method == Some("initialize")
        && message
            .pointer("/params/protocolVersion")
            .is_some_and(Value::is_string)
    {
        return false;
    }
    method == Some("server/discover")
        || message
            .pointer("/params/_meta")
            .and_then(|meta| meta.get(PROTOCOL_VERSION))
            .is_some()
        || header_version.is_some_and(|version| !KNOWN_VERSIONS.contains(&version))
}

/// A 2026-07-28 error answer: the request's `id` (absent when there is none), never `null`.
pub(super) fn error(
    status: StatusCode,
    id: Option<&Value>,
    code: i64,
    message: &str,
) -> Response<Body> {
    let mut body = json!({"jsonrpc": "2.0", "error": {"code": code, "message": message}});
    if let Some(id) = id.filter(|id| !id.is_null()) {
        body["id"] = id.clone();
    }
    server::json_text_response(status, body.to_string())
}

/// Checks one modern request's `_meta` and headers (see the module's list).
pub(super) fn check(
    headers: &HeaderMap,
    message: &Value,
    id: &Value,
    method: &str,
) -> Result<(), Response<Body>> {
    let mismatch = |text: &str| error(StatusCode::BAD_REQUEST, Some(id), HEADER_MISMATCH, text);
    let meta = message.pointer("/params/_meta");
    let meta_version = meta.and_then(|meta| meta.get(PROTOCOL_VERSION));
    let header_version = header_text(headers, VERSION_HEADER).map(str::trim);
    if header_version.is_none() && meta_version.is_some() {
        return Err(mismatch(
            "Header mismatch: the MCP-Protocol-Version header is required",
        ));
    }
    let capabilities = meta.and_then(|meta| meta.get(CLIENT_CAPABILITIES));
    let Some(meta_version) = meta_version.and_then(Value::as_str) else {
        return Err(error(
            StatusCode::BAD_REQUEST,
            Some(id),
            INVALID_PARAMS,
            &format!("Invalid params: params._meta must carry `{PROTOCOL_VERSION}` (a string)"),
        ));
    };
    if !capabilities.is_some_and(Value::is_object) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            Some(id),
            INVALID_PARAMS,
            &format!("Invalid params: params._meta must carry `{CLIENT_CAPABILITIES}` (an object)"),
        ));
    }
    if header_version != Some(meta_version) {
        return Err(mismatch(&format!(
            "Header mismatch: MCP-Protocol-Version `{}` differs from _meta's `{meta_version}`",
            header_version.unwrap_or_default()
        )));
    }
    match header_text(headers, METHOD_HEADER).map(str::trim) {
        None => {
            return Err(mismatch(
                "Header mismatch: the Mcp-Method header is required",
            ));
        }
        Some(named) if named != method => {
            return Err(mismatch(&format!(
                "Header mismatch: Mcp-Method `{named}` differs from the body's method `{method}`"
            )));
        }
        Some(_) => {}
    }
    let body_name = match method {
        "tools/call" | "prompts/get" => message.pointer("/params/name"),
        "resources/read" => message.pointer("/params/uri"),
        "tasks/get" | "tasks/update" | "tasks/cancel" => message.pointer("/params/taskId"),
        _ => None,
    };
    if let Some(body_name) = body_name.and_then(Value::as_str) {
        let Some(named) = header_text(headers, NAME_HEADER).map(str::trim) else {
            return Err(mismatch("Header mismatch: the Mcp-Name header is required"));
        };
        let named = decode_header_value(named).map_err(|why| mismatch(&why))?;
        if named != body_name {
            return Err(mismatch(&format!(
                "Header mismatch: Mcp-Name `{named}` differs from the body's `{body_name}`"
            )));
        }
    }
    if REMOVED.contains(&method) {
        return Err(error(
            StatusCode::NOT_FOUND,
            Some(id),
            METHOD_NOT_FOUND,
            &format!("Method not found: `{method}` is not part of MCP 2026-07-28"),
        ));
    }
    Ok(())
}

/// The HTTP status of the host's answer to a modern request.
pub(super) fn status_of(answer: &str) -> StatusCode {
    let code = serde_json::from_str::<Value>(answer)
        .ok()
        .and_then(|answer| answer.pointer("/error/code").and_then(Value::as_i64));
    match code {
        Some(HEADER_MISMATCH | MISSING_CLIENT_CAPABILITY | UNSUPPORTED_VERSION) => {
            StatusCode::BAD_REQUEST
        }
        Some(METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

/// A header value as sent: literal, or `=?base64?<UTF-8 in base64>?=` (SEP-2243).
fn decode_header_value(value: &str) -> Result<String, String> {
    decode_header(value, "Mcp-Name")
}

/// A header's value, its `=?base64?…?=` form decoded (anything else is literal); `Err` names
/// header `name` and what is wrong.
fn decode_header(value: &str, name: &str) -> Result<String, String> {
    let Some(encoded) = value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    else {
        return Ok(value.to_owned());
    };
    let bytes = base64_decode(encoded)
        .ok_or_else(|| format!("Header mismatch: {name} is not valid base64"))?;
    String::from_utf8(bytes).map_err(|_| format!("Header mismatch: {name} is not UTF-8"))
}

/// The most `Mcp-Param-*` headers one request may carry.
const MAX_PARAM_HEADERS: usize = 64;

/// Hands the host a `tools/call`'s `Mcp-Param-*` headers, decoded, in `_meta` under
/// [`PARAM_HEADERS_META`] (replacing whatever the body put there), for it to check against the
/// tool's `x-mcp-header` arguments. A header whose base64 form is invalid is refused here: 400,
/// -32020.
pub(super) fn pass_param_headers(
    headers: &HeaderMap,
    message: &mut Value,
    id: &Value,
) -> Result<(), Response<Body>> {
    let mismatch = |text: &str| error(StatusCode::BAD_REQUEST, Some(id), HEADER_MISMATCH, text);
    let mut found = serde_json::Map::new();
    for (name, value) in headers {
        let Some(suffix) = name.as_str().strip_prefix(PARAM_HEADER_PREFIX) else {
            continue;
        };
        if found.len() == MAX_PARAM_HEADERS {
            return Err(mismatch(&format!(
                "Header mismatch: more than {MAX_PARAM_HEADERS} Mcp-Param headers"
            )));
        }
        let shown = format!("Mcp-Param-{suffix}");
        let text = value
            .to_str()
            .map_err(|_| mismatch(&format!("Header mismatch: {shown} is not visible ASCII")))?;
        let decoded = decode_header(text.trim(), &shown).map_err(|why| mismatch(&why))?;
        found.insert(suffix.to_owned(), Value::String(decoded));
    }
    if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) {
        let meta = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(PARAM_HEADERS_META.to_owned(), Value::Object(found));
        }
    }
    Ok(())
}

/// Standard base64 with padding; `None` for anything else.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let chunks: Vec<&[u8]> = text.as_bytes().chunks(4).collect();
    for (index, chunk) in chunks.iter().enumerate() {
        let padding = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if padding > 2 || (padding > 0 && index + 1 != chunks.len()) {
            return None;
        }
        let mut word = 0u32;
        for &c in &chunk[..4 - padding] {
            word = (word << 6) | value(c)?;
        }
        word <<= 6 * padding as u32;
        let bytes = word.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - padding]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn base64_header_values_decode_and_bad_ones_are_refused() {
        assert_eq!(decode_header_value("plain").unwrap(), "plain");
        assert_eq!(decode_header_value("=?base64?aMOpbGxv?=").unwrap(), "héllo");
        assert_eq!(decode_header_value("=?base64?YQ==?=").unwrap(), "a");
        assert_eq!(decode_header_value("=?base64?YWI=?=").unwrap(), "ab");
        assert!(decode_header_value("=?base64?YQ=?=").is_err());
        assert!(decode_header_value("=?base64?Y*==?=").is_err());
        assert!(decode_header_value("=?base64?YQ==YQ==?=").is_err());
    }

    #[test]
    fn eras_are_told_apart_per_request() {
        let meta = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {PROTOCOL_VERSION: "2026-07-28"}}});
        assert!(is_modern(&meta, None));
        let legacy = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        assert!(!is_modern(&legacy, Some("2025-11-25")));
        assert!(is_modern(&legacy, Some("2026-07-28")));
        assert!(is_modern(&legacy, Some("v999.0.0")));
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2026-07-28"}});
        assert!(!is_modern(&initialize, Some("2026-07-28")));
        let probe = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"_meta": {PROTOCOL_VERSION: "2026-07-28"}}});
        assert!(is_modern(&probe, Some("2026-07-28")));
    }

    #[test]
    fn host_errors_get_the_specs_statuses() {
        let answer = |code: i64| {
            json!({"jsonrpc":"2.0","id":1,"error":{"code":code,"message":"m"}}).to_string()
        };
        assert_eq!(status_of(&answer(-32022)), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(&answer(-32601)), StatusCode::NOT_FOUND);
        assert_eq!(status_of(&answer(-32602)), StatusCode::OK);
        assert_eq!(
            status_of(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            StatusCode::OK
        );
    }

    fn call(meta: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "t", "arguments": {"region": "Hello"}, "_meta": meta}})
    }

    #[test]
    fn param_headers_reach_the_host_decoded_and_replace_what_the_body_claims() {
        let mut headers = HeaderMap::new();
        headers.insert("mcp-param-region", "=?base64?SGVsbG8=?=".parse().unwrap());
        headers.insert("mcp-param-n", "7".parse().unwrap());
        headers.insert("mcp-name", "t".parse().unwrap());
        // A body cannot pass for headers it did not send.
        let mut message = call(json!({PARAM_HEADERS_META: {"region": "Hello", "forged": "x"}}));
        assert!(pass_param_headers(&headers, &mut message, &json!(7)).is_ok());
        assert_eq!(
            message["params"]["_meta"][PARAM_HEADERS_META],
            json!({"region": "Hello", "n": "7"})
        );
        // Without any, the host is still told there were none (a request over HTTP).
        let mut message = call(json!({}));
        assert!(pass_param_headers(&HeaderMap::new(), &mut message, &json!(7)).is_ok());
        assert_eq!(message["params"]["_meta"][PARAM_HEADERS_META], json!({}));
    }

    #[test]
    fn bad_or_too_many_param_headers_are_refused_with_400() {
        for bad in ["=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?="] {
            let mut headers = HeaderMap::new();
            headers.insert("mcp-param-region", bad.parse().unwrap());
            let refused = pass_param_headers(&headers, &mut call(json!({})), &json!(7));
            assert_eq!(
                refused.err().map(|r| r.status()),
                Some(StatusCode::BAD_REQUEST),
                "{bad}"
            );
        }
        let mut headers = HeaderMap::new();
        for n in 0..=MAX_PARAM_HEADERS {
            let name: hyper::header::HeaderName = format!("mcp-param-p{n}").parse().unwrap();
            headers.insert(name, "v".parse().unwrap());
        }
        let refused = pass_param_headers(&headers, &mut call(json!({})), &json!(7));
        assert_eq!(
            refused.err().map(|r| r.status()),
            Some(StatusCode::BAD_REQUEST)
        );
    }
}
