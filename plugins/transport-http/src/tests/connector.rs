//! The `http` connector against the `http` listener (and against failure cases), end to end.

use std::{
    io::Write,
    net::TcpStream,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

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

/// One request a [`ScriptedServer`] received: its HTTP verb, JSON-RPC method (empty when there
/// is none), headers (names lowercased), body (`null` when empty) and time of arrival.
#[derive(Debug, Clone)]
struct Request {
    verb: String,
    method: String,
    headers: Vec<(String, String)>,
    body: Value,
    at: Instant,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(have, _)| have == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Named moments a [`ScriptedServer`]'s handler records (when it answered, when it closed).
type Marks = Arc<Mutex<Vec<(String, Instant)>>>;

/// A tiny HTTP/1.1 server for the tests that need a server's exact behaviour: every request
/// is recorded and handed, with its connection, to a handler (each connection on a thread of
/// its own, so that a slow answer holds up nothing else).
struct ScriptedServer {
    address: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<Request>>>,
    marks: Marks,
}

impl ScriptedServer {
    /// Every POST is answered by `answer` (status, content type, body, extra header lines);
    /// anything else gets 405.
    fn start(answer: fn(&Value) -> (u16, &'static str, String, String)) -> Self {
        Self::serve(move |request, stream, _| {
            if request.verb == "POST" {
                let (status, kind, text, extra) = answer(&request.body);
                respond(stream, status, kind, &text, &extra);
            } else {
                respond(stream, 405, "text/plain", "", "");
            }
        })
    }

    fn serve(handler: impl Fn(&Request, &mut TcpStream, &Marks) + Send + Sync + 'static) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let marks = Marks::default();
        let handler = Arc::new(handler);
        let (record, marked) = (seen.clone(), marks.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let (record, marked, handler) = (record.clone(), marked.clone(), handler.clone());
                std::thread::spawn(move || {
                    let Some(request) = read_request(&mut stream) else {
                        return;
                    };
                    record.lock().unwrap().push(request.clone());
                    handler(&request, &mut stream, &marked);
                });
            }
        });
        Self {
            address,
            seen,
            marks,
        }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.address)
    }

    /// The POSTs of JSON-RPC `method` received.
    fn requests(&self, method: &str) -> Vec<Request> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|request| request.method == method)
            .cloned()
            .collect()
    }

    /// The requests with HTTP `verb` received.
    fn verbs(&self, verb: &str) -> Vec<Request> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|request| request.verb == verb)
            .cloned()
            .collect()
    }

    /// When the handler recorded `name`.
    fn mark(&self, name: &str) -> Option<Instant> {
        self.marks
            .lock()
            .unwrap()
            .iter()
            .find(|(have, _)| have == name)
            .map(|(_, at)| *at)
    }
}

fn mark(marks: &Marks, name: &str) {
    marks
        .lock()
        .unwrap()
        .push((name.to_owned(), Instant::now()));
}

/// Reads one request (line, headers, body by `content-length`) from `stream`.
fn read_request(stream: &mut TcpStream) -> Option<Request> {
    use std::io::{BufRead, BufReader, Read};
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let at = Instant::now();
    let verb = line.split(' ').next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        let (name, value) = line.trim_end().split_once(':')?;
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .map_or(0, |(_, value)| value.parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let body: Value = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&body).unwrap()
    };
    Some(Request {
        verb,
        method: body["method"].as_str().unwrap_or_default().to_owned(),
        headers,
        body,
        at,
    })
}

/// Writes a complete response and lets the connection close.
fn respond(stream: &mut TcpStream, status: u16, kind: &str, text: &str, extra: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n{text}",
        text.len()
    );
}

/// Starts an event stream (its body ends when the connection closes) with `events` in it.
fn open_stream(stream: &mut TcpStream, events: &str) {
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n{events}"
    );
    let _ = stream.flush();
}

/// Holds a stream open until the client goes away (or [`WAIT`] passes).
fn hold(stream: &mut TcpStream) {
    use std::io::Read;
    let _ = stream.read(&mut [0; 1]);
}

/// The session's first answers, shared by the scripted sessions: `initialize` opens session
/// `s1`, a notification is accepted. `None` for anything else.
fn answer_handshake(request: &Request, stream: &mut TcpStream) -> Option<()> {
    match (request.verb.as_str(), request.method.as_str()) {
        ("POST", "initialize") => {
            let result = json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "0"}});
            let body = json!({"jsonrpc": "2.0", "id": request.body["id"], "result": result});
            respond(
                stream,
                200,
                "application/json",
                &body.to_string(),
                "mcp-session-id: s1\r\n",
            );
        }
        ("POST", _) if request.body.get("id").is_none() => {
            respond(stream, 202, "application/json", "", "");
        }
        ("DELETE", _) => respond(stream, 200, "text/plain", "", ""),
        _ => return None,
    }
    Some(())
}

#[test]
fn the_get_stream_is_open_before_the_next_message_is_sent() {
    let server = ScriptedServer::serve(|request, stream, marks| {
        if answer_handshake(request, stream).is_some() {
            return;
        }
        match request.verb.as_str() {
            "GET" => {
                std::thread::sleep(Duration::from_millis(300));
                mark(marks, "GET answered");
                open_stream(stream, "");
                hold(stream);
            }
            _ => {
                let body =
                    json!({"jsonrpc": "2.0", "id": request.body["id"], "result": {"tools": []}});
                respond(stream, 200, "application/json", &body.to_string(), "");
            }
        }
    });
    let mut client = connect(json!({"name": "slow-get", "url": server.url()}));
    client.initialize("2025-06-18").unwrap();
    let tools = client.call("tools/list", json!({})).unwrap();
    assert!(tools["result"]["tools"].is_array(), "{tools}");
    let get = &server.verbs("GET")[0];
    assert_eq!(get.header("mcp-session-id"), Some("s1"));
    let answered = server
        .mark("GET answered")
        .expect("tools/list was answered before the GET");
    let list = &server.requests("tools/list")[0];
    assert!(
        list.at >= answered,
        "tools/list arrived {:?} before the GET was answered",
        answered - list.at
    );
    let initialized = &server.requests("notifications/initialized")[0];
    assert!(initialized.at <= get.at);
}

#[test]
fn a_broken_answer_stream_is_resumed_after_retry_with_last_event_id() {
    let pending = Arc::new(Mutex::new(None::<Value>));
    let server = ScriptedServer::serve(move |request, stream, marks| {
        if answer_handshake(request, stream).is_some() {
            return;
        }
        match (request.verb.as_str(), request.header("last-event-id")) {
            // The session's own GET stream: open, primed with an id of its own, and quiet.
            ("GET", None) => {
                open_stream(stream, "id: get-1\nretry: 5000\ndata: \n\n");
                hold(stream);
            }
            // The resumption: a priming event, then the response the POST stream did not carry.
            ("GET", Some(_)) => {
                let id = pending.lock().unwrap().take().unwrap_or_default();
                let response = json!({"jsonrpc": "2.0", "id": id,
                    "result": {"content": [{"type": "text", "text": "resumed"}]}});
                open_stream(
                    stream,
                    &format!(
                        "id: event-2\nretry: 500\ndata: \n\nevent: message\nid: event-3\ndata: {response}\n\n"
                    ),
                );
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
            // The call: a priming event only, and the stream closed 50 ms later.
            _ => {
                *pending.lock().unwrap() = Some(request.body["id"].clone());
                open_stream(stream, "id: event-1\nretry: 500\ndata: \n\n");
                std::thread::sleep(Duration::from_millis(50));
                mark(marks, "POST stream closed");
                let _ = stream.shutdown(std::net::Shutdown::Both);
            }
        }
    });
    let mut client = connect(json!({"name": "resumable", "url": server.url()}));
    client.initialize("2025-06-18").unwrap();
    let call = client
        .call(
            "tools/call",
            json!({"name": "test_reconnection", "arguments": {}}),
        )
        .unwrap();
    assert_eq!(text_of(&call), "resumed", "{call}");
    let resumed: Vec<_> = server
        .verbs("GET")
        .into_iter()
        .filter(|get| get.header("last-event-id").is_some())
        .collect();
    assert_eq!(resumed.len(), 1, "{resumed:?}");
    let get = &resumed[0];
    assert_eq!(get.header("last-event-id"), Some("event-1"));
    assert_eq!(get.header("mcp-session-id"), Some("s1"));
    assert_eq!(get.header("mcp-protocol-version"), Some("2025-06-18"));
    assert_eq!(get.header("accept"), Some("text/event-stream"));
    let closed = server.mark("POST stream closed").unwrap();
    let waited = get.at.duration_since(closed);
    assert!(
        waited >= Duration::from_millis(450),
        "resumed {waited:?} after the stream closed"
    );
    assert!(waited < Duration::from_millis(2500), "{waited:?}");
}

/// `valid_tool` and five tools whose `x-mcp-header` annotations are invalid.
fn annotated_tools() -> Value {
    let one = |name: &str, property: Value| json!({"name": name, "inputSchema": {"type": "object", "properties": property}});
    json!([
        {"name": "valid_tool", "description": "routes by region", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
            "note": {"type": "string"}
        }}},
        one("empty_name", json!({"a": {"type": "string", "x-mcp-header": ""}})),
        one("object_type", json!({"a": {"type": "object", "x-mcp-header": "Thing"}})),
        one("duplicate_names", json!({
            "a": {"type": "string", "x-mcp-header": "Region"},
            "b": {"type": "string", "x-mcp-header": "REGION"}
        })),
        one("space_in_name", json!({"a": {"type": "string", "x-mcp-header": "My Region"}})),
        one("number_type", json!({"a": {"type": "number", "x-mcp-header": "Ratio"}})),
    ])
}

/// The server side of the header tests: `initialize` opens a session, `tools/list` lists
/// [`annotated_tools`] (as an SSE stream in a session, as JSON without one), `tools/call` says
/// "called", a notification is accepted.
fn answer_annotated(request: &Value) -> (u16, &'static str, String, String) {
    let id = request["id"].clone();
    let result = match request["method"].as_str() {
        Some("initialize") => {
            let result = json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "scripted", "version": "0"}});
            let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
            return (
                200,
                "application/json",
                body,
                "mcp-session-id: s1\r\n".to_owned(),
            );
        }
        Some("tools/list") => json!({"tools": annotated_tools()}),
        Some("tools/call") => json!({"content": [{"type": "text", "text": "called"}]}),
        Some(_) => json!({}),
        None => return (202, "application/json", String::new(), String::new()),
    };
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    if request["method"] == "tools/list" && request.pointer("/params/_meta").is_none() {
        let events = format!("event: message\ndata: {body}\n\n");
        return (200, "text/event-stream", events, String::new());
    }
    (200, "application/json", body, String::new())
}

/// `params` with the `_meta` of a 2026-07-28 request.
fn modern(mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    params
}

fn tool_names(answer: &Value) -> Vec<&str> {
    answer["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect()
}

#[test]
fn tools_with_invalid_header_annotations_are_left_out_and_calls_carry_param_headers() {
    let server = ScriptedServer::start(answer_annotated);
    let mut client = connect(json!({"name": "routed", "url": server.url()}));
    let tools = client.call("tools/list", modern(json!({}))).unwrap();
    assert_eq!(tool_names(&tools), ["valid_tool"], "{tools}");
    // The tool the host gets is the server's, untouched.
    assert_eq!(tools["result"]["tools"][0], annotated_tools()[0]);
    let call = client
        .call(
            "tools/call",
            modern(json!({"name": "valid_tool", "arguments": {
                "region": "us west 1 ", "priority": 42, "verbose": null, "note": "x"
            }})),
        )
        .unwrap();
    assert_eq!(text_of(&call), "called");
    let sent = &server.requests("tools/call")[0];
    // A trailing space cannot ride in a header: base64 of "us west 1 ".
    assert_eq!(
        sent.header("mcp-param-region"),
        Some("=?base64?dXMgd2VzdCAxIA==?=")
    );
    assert_eq!(sent.header("mcp-param-priority"), Some("42"));
    assert_eq!(sent.header("mcp-param-verbose"), None);
    let params: Vec<_> = sent
        .headers
        .iter()
        .filter(|(name, _)| name.starts_with("mcp-param-"))
        .collect();
    assert_eq!(params.len(), 2, "{:?}", sent.headers);
    assert_eq!(sent.header("mcp-name"), Some("valid_tool"));
    // The body is sent as the host wrote it.
    assert_eq!(sent.body["params"]["arguments"]["region"], "us west 1 ");
    // A boolean, and an empty string (a header with an empty value).
    client
        .call(
            "tools/call",
            modern(json!({"name": "valid_tool", "arguments": {"region": "", "verbose": false}})),
        )
        .unwrap();
    let sent = &server.requests("tools/call")[1];
    assert_eq!(sent.header("mcp-param-region"), Some(""));
    assert_eq!(sent.header("mcp-param-verbose"), Some("false"));
    assert_eq!(sent.header("mcp-param-priority"), None);
    // A tool that was left out designates nothing.
    client
        .call(
            "tools/call",
            modern(json!({"name": "duplicate_names", "arguments": {"a": "x", "b": "y"}})),
        )
        .unwrap();
    let sent = &server.requests("tools/call")[2];
    assert!(
        sent.headers
            .iter()
            .all(|(name, _)| !name.starts_with("mcp-param-")),
        "{:?}",
        sent.headers
    );
}

#[test]
fn a_legacy_tools_list_is_screened_too() {
    let server = ScriptedServer::start(answer_annotated);
    let mut client = connect(json!({"name": "routed", "url": server.url()}));
    client.initialize("2025-06-18").unwrap();
    // Answered over SSE in a session.
    let tools = client.call("tools/list", json!({})).unwrap();
    assert_eq!(tool_names(&tools), ["valid_tool"], "{tools}");
    // Param headers go only with 2026-07-28 requests.
    client
        .call(
            "tools/call",
            json!({"name": "valid_tool", "arguments": {"region": "eu"}}),
        )
        .unwrap();
    let sent = &server.requests("tools/call")[0];
    assert_eq!(sent.header("mcp-session-id"), Some("s1"));
    assert_eq!(sent.header("mcp-param-region"), None);
}
