//! Just enough JSON-RPC 2.0 to route messages between HTTP streams and to report errors.

use serde_json::{Value, json};

/// Invalid JSON (JSON-RPC "Parse error").
pub const PARSE_ERROR: i64 = -32700;
/// JSON that is not a JSON-RPC message (JSON-RPC "Invalid Request").
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC "Internal error".
pub const INTERNAL_ERROR: i64 = -32603;
/// A transport-level failure: an HTTP error, a refused or broken connection.
pub const TRANSPORT_ERROR: i64 = -32000;
/// The MCP session named by the request does not exist (any more).
pub const SESSION_NOT_FOUND: i64 = -32001;

/// What one JSON-RPC message is.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Request { id: Value, method: String },
    Notification { method: String },
    Response { id: Value },
}

impl Kind {
    pub fn is_request(&self) -> bool {
        matches!(self, Kind::Request { .. })
    }
}

/// Classifies one message (not a batch); the error says what is wrong with it.
pub fn classify(message: &Value) -> Result<Kind, String> {
    let Some(object) = message.as_object() else {
        return Err("a JSON-RPC message must be an object".to_owned());
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err("the `jsonrpc` member must be \"2.0\"".to_owned());
    }
    let id = object.get("id");
    if let Some(id) = id
        && !(id.is_string() || id.is_number() || id.is_null())
    {
        return Err("the `id` member must be a string or a number".to_owned());
    }
    match object.get("method") {
        Some(Value::String(method)) => Ok(match id {
            Some(id) if !id.is_null() => Kind::Request {
                id: id.clone(),
                method: method.clone(),
            },
            _ => Kind::Notification {
                method: method.clone(),
            },
        }),
        Some(_) => Err("the `method` member must be a string".to_owned()),
        None => {
            let has_outcome = object.contains_key("result") || object.contains_key("error");
            match id {
                Some(id) if has_outcome => Ok(Kind::Response { id: id.clone() }),
                _ => Err(
                    "a message needs a `method`, or an `id` with a `result` or `error`".to_owned(),
                ),
            }
        }
    }
}

/// The messages of a body: the elements of a batch, or the message itself.
pub fn split(value: Value) -> Vec<Value> {
    match value {
        Value::Array(items) => items,
        other => vec![other],
    }
}

/// A key for a request id that keeps `1` and `"1"` apart.
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

/// A JSON-RPC error response.
pub fn error_response(id: Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// The ids of the requests in a message or batch.
pub fn request_ids(message: &Value) -> Vec<Value> {
    let items: &[Value] = match message {
        Value::Array(items) => items,
        other => std::slice::from_ref(other),
    };
    items
        .iter()
        .filter_map(|item| match classify(item) {
            Ok(Kind::Request { id, .. }) => Some(id),
            _ => None,
        })
        .collect()
}

/// The `progressToken` a request carries in `params._meta`, if any.
pub fn progress_token(request: &Value) -> Option<&Value> {
    request.get("params")?.get("_meta")?.get("progressToken")
}

/// The request a message answers, when it is a response.
pub fn response_id(message: &Value) -> Option<&Value> {
    match classify(message) {
        Ok(Kind::Response { .. }) => message.get("id"),
        _ => None,
    }
}
