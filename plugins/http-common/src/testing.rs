//! A small MCP server written by hand over any [`Listener`], for the listeners' tests and the
//! conformance example. It plays the host's part: accept sessions, answer JSON-RPC.
//!
//! Methods: `initialize`, `ping`, `tools/list` (one tool, `echo`), `logging/setLevel`,
//! `tools/call` with `echo` (`{message}`), `slow` (`{steps, delayMs}`: a progress notification
//! per step when the request carries a progress token, then the result), `ask` (sends the
//! client a `roots/list` request and answers with what came back), `notify` (sends a
//! `notifications/tools/list_changed`, then answers), and the conformance suite's
//! `test_tool_with_progress`, `test_tool_with_logging`, `test_sampling` and `test_elicitation`.
//! Anything else: -32601.

#![allow(clippy::unwrap_used)]

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc,
    },
    thread,
    time::Duration,
};

use runbyte_plugin_api::transport::{Listener, Pump, Received};
use serde_json::{Value, json};

use crate::lock;

/// What the harness saw, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    Accepted { session: String, peer: String },
    Message { session: String, message: Value },
    Closed { session: String, reason: String },
}

/// A running harness; stops when dropped.
pub struct Harness {
    listener: Arc<dyn Listener>,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    accepting: Option<thread::JoinHandle<()>>,
    pumps: Arc<Mutex<Vec<Arc<dyn Pump>>>>,
}

impl Harness {
    /// Serves every session `listener` accepts.
    pub fn serve(listener: Box<dyn Listener>) -> Self {
        let listener: Arc<dyn Listener> = Arc::from(listener);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let pumps: Arc<Mutex<Vec<Arc<dyn Pump>>>> = Arc::new(Mutex::new(Vec::new()));
        let accepting = {
            let (listener, seen, stop, pumps) =
                (listener.clone(), seen.clone(), stop.clone(), pumps.clone());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match listener.accept(Duration::from_millis(50)) {
                        Ok(Some(accepted)) => {
                            lock(&seen).push(Seen::Accepted {
                                session: accepted.session.clone(),
                                peer: accepted.peer.clone(),
                            });
                            let pump: Arc<dyn Pump> = Arc::from(accepted.pump);
                            lock(&pumps).push(pump.clone());
                            let session = Session {
                                id: accepted.session,
                                pump,
                                seen: seen.clone(),
                                waiting: Arc::new(Mutex::new(HashMap::new())),
                                next_id: Arc::new(AtomicU64::new(1)),
                            };
                            let stop = stop.clone();
                            thread::spawn(move || session.run(&stop));
                        }
                        Ok(None) => {}
                        Err(_) => return,
                    }
                }
            })
        };
        Self {
            listener,
            seen,
            stop,
            accepting: Some(accepting),
            pumps,
        }
    }

    pub fn address(&self) -> String {
        self.listener.address()
    }

    /// Everything seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.seen).clone()
    }

    /// Waits up to `timeout` for something matching `matches`.
    pub fn wait_for(&self, timeout: Duration, matches: impl Fn(&Seen) -> bool) -> Option<Seen> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(found) = lock(&self.seen).iter().find(|seen| matches(seen)) {
                return Some(found.clone());
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Closes the listener (and every session).
    pub fn close(&self) {
        self.listener.close();
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.listener.close();
        if let Some(accepting) = self.accepting.take() {
            let _ = accepting.join();
        }
    }
}

#[derive(Clone)]
struct Session {
    id: String,
    pump: Arc<dyn Pump>,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Requests this server sent the client, waiting for the answer.
    waiting: Arc<Mutex<HashMap<String, mpsc::Sender<Value>>>>,
    next_id: Arc<AtomicU64>,
}

impl Session {
    fn run(self, stop: &AtomicBool) {
        while !stop.load(Ordering::SeqCst) {
            match self.pump.recv(Duration::from_millis(50)) {
                Received::Message(text) => {
                    let message: Value = serde_json::from_str(&text).unwrap();
                    lock(&self.seen).push(Seen::Message {
                        session: self.id.clone(),
                        message: message.clone(),
                    });
                    for message in crate::jsonrpc::split(message) {
                        self.handle(message);
                    }
                }
                Received::Timeout => {}
                Received::Closed(reason) => {
                    lock(&self.seen).push(Seen::Closed {
                        session: self.id.clone(),
                        reason,
                    });
                    return;
                }
            }
        }
    }

    fn handle(&self, message: Value) {
        if message.get("method").is_none() {
            // A response to one of our requests.
            let key = message["id"].to_string();
            if let Some(tx) = lock(&self.waiting).remove(&key) {
                let _ = tx.send(message);
            }
            return;
        }
        let Some(id) = message.get("id").cloned() else {
            return;
        };
        let session = self.clone();
        // Each request on its own thread, so slow ones do not hold up the others.
        thread::spawn(move || {
            let answer = session.answer(&message);
            let response = match answer {
                Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
                Err((code, text)) => {
                    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": text } })
                }
            };
            let _ = session.pump.send(&response.to_string());
        });
    }

    fn answer(&self, request: &Value) -> Result<Value, (i64, String)> {
        let params = request.get("params").cloned().unwrap_or(json!({}));
        match request["method"].as_str().unwrap_or("") {
            "initialize" => {
                let asked = params["protocolVersion"].as_str().unwrap_or("");
                let known = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
                let version = if known.contains(&asked) {
                    asked
                } else {
                    "2025-06-18"
                };
                Ok(json!({
                    "protocolVersion": version,
                    "capabilities": { "tools": { "listChanged": true }, "logging": {} },
                    "serverInfo": { "name": "runbyte-test-harness", "version": "1.0.0" }
                }))
            }
            "ping" | "logging/setLevel" => Ok(json!({})),
            "tools/list" => Ok(json!({ "tools": [{
                "name": "echo",
                "description": "Echoes its message back.",
                "inputSchema": {
                    "type": "object",
                    "properties": { "message": { "type": "string" } },
                    "required": ["message"]
                }
            }]})),
            "tools/call" => self.call(&params),
            other => Err((-32601, format!("Method not found: {other}"))),
        }
    }

    fn call(&self, params: &Value) -> Result<Value, (i64, String)> {
        let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
        let text = match params["name"].as_str().unwrap_or("") {
            "echo" => arguments["message"].as_str().unwrap_or("").to_owned(),
            "slow" => {
                let steps = arguments["steps"].as_u64().unwrap_or(3);
                let delay = arguments["delayMs"].as_u64().unwrap_or(50);
                let token = params
                    .get("_meta")
                    .and_then(|meta| meta.get("progressToken"))
                    .cloned();
                for step in 1..=steps {
                    thread::sleep(Duration::from_millis(delay));
                    if let Some(token) = &token {
                        let progress = json!({
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": { "progressToken": token, "progress": step, "total": steps }
                        });
                        let _ = self.pump.send(&progress.to_string());
                    }
                }
                format!("done after {steps} steps")
            }
            "ask" => format!(
                "client answered: {}",
                self.ask_client("roots/list", json!({}))?
            ),
            // The conformance suite's tools that exercise server-to-client traffic.
            "test_tool_with_progress" => {
                let token = params
                    .get("_meta")
                    .and_then(|meta| meta.get("progressToken"))
                    .cloned();
                for (step, progress) in [0, 50, 100].into_iter().enumerate() {
                    if step > 0 {
                        thread::sleep(Duration::from_millis(50));
                    }
                    if let Some(token) = &token {
                        let note = json!({ "jsonrpc": "2.0", "method": "notifications/progress",
                            "params": { "progressToken": token, "progress": progress, "total": 100 } });
                        let _ = self.pump.send(&note.to_string());
                    }
                }
                "progress reported".to_owned()
            }
            "test_tool_with_logging" => {
                for (step, text) in [
                    "Tool execution started",
                    "Tool processing data",
                    "Tool execution completed",
                ]
                .into_iter()
                .enumerate()
                {
                    if step > 0 {
                        thread::sleep(Duration::from_millis(50));
                    }
                    let note = json!({ "jsonrpc": "2.0", "method": "notifications/message",
                        "params": { "level": "info", "data": text } });
                    let _ = self.pump.send(&note.to_string());
                }
                "logged".to_owned()
            }
            "test_sampling" => {
                let prompt = arguments["prompt"].as_str().unwrap_or("");
                let answer = self.ask_client("sampling/createMessage", json!({
                    "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
                    "maxTokens": 100
                }))?;
                format!(
                    "LLM response: {}",
                    answer["content"]["text"].as_str().unwrap_or("")
                )
            }
            "test_elicitation" => {
                let message = arguments["message"].as_str().unwrap_or("");
                let answer = self.ask_client(
                    "elicitation/create",
                    json!({
                        "message": message,
                        "requestedSchema": { "type": "object", "properties": {
                            "username": { "type": "string", "description": "User's response" },
                            "email": { "type": "string", "description": "User's email address" }
                        }, "required": ["username", "email"] }
                    }),
                )?;
                format!("User response: {answer}")
            }
            "notify" => {
                let note =
                    json!({ "jsonrpc": "2.0", "method": "notifications/tools/list_changed" });
                let _ = self.pump.send(&note.to_string());
                "notified".to_owned()
            }
            other => return Err((-32602, format!("Unknown tool: {other}"))),
        };
        Ok(json!({ "content": [{ "type": "text", "text": text }] }))
    }

    /// Sends the client a request and waits for its result.
    fn ask_client(&self, method: &str, params: Value) -> Result<Value, (i64, String)> {
        let id = format!("srv-{}", self.next_id.fetch_add(1, Ordering::SeqCst));
        let (tx, rx) = mpsc::channel();
        lock(&self.waiting).insert(Value::String(id.clone()).to_string(), tx);
        let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let _ = self.pump.send(&request.to_string());
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(answer) => match answer.get("result") {
                Some(result) => Ok(result.clone()),
                None => Err((
                    -32000,
                    format!("the client refused {method}: {}", answer["error"]),
                )),
            },
            Err(_) => Err((-32000, format!("the client did not answer {method}"))),
        }
    }
}

/// Drives a connector's pump like an MCP client would: numbered requests, responses matched by
/// id, everything else kept for inspection. Server requests for `roots/list` are answered.
pub struct Driver {
    pub pump: Box<dyn Pump>,
    next_id: u64,
    /// Messages that were not the response being waited for, in arrival order.
    pub others: Vec<Value>,
    pub closed: Option<String>,
}

impl Driver {
    pub fn new(pump: Box<dyn Pump>) -> Self {
        Self {
            pump,
            next_id: 1,
            others: Vec::new(),
            closed: None,
        }
    }

    /// Sends a request; returns its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        self.pump.send(&request.to_string()).unwrap();
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        let note = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        self.pump.send(&note.to_string()).unwrap();
    }

    /// Waits for the response to `id`.
    pub fn response(&mut self, id: &Value, timeout: Duration) -> Result<Value, String> {
        if let Some(at) = self
            .others
            .iter()
            .position(|m| m.get("id") == Some(id) && m.get("method").is_none())
        {
            return Ok(self.others.remove(at));
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(format!(
                    "no response to {id} within {timeout:?}; seen: {:?}",
                    self.others
                ));
            }
            match self.pump.recv(left.min(Duration::from_millis(200))) {
                Received::Message(text) => {
                    let message: Value = serde_json::from_str(&text).unwrap();
                    if message.get("id") == Some(id) && message.get("method").is_none() {
                        return Ok(message);
                    }
                    if message.get("method") == Some(&json!("roots/list"))
                        && message.get("id").is_some()
                    {
                        let answer = json!({ "jsonrpc": "2.0", "id": message["id"], "result": { "roots": [] } });
                        self.pump.send(&answer.to_string()).unwrap();
                    }
                    self.others.push(message);
                }
                Received::Timeout => {}
                Received::Closed(reason) => {
                    self.closed = Some(reason.clone());
                    return Err(format!("closed: {reason}"));
                }
            }
        }
    }

    /// Sends a request and waits for its response.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.send_request(method, params);
        self.response(&id, Duration::from_secs(20))
    }

    /// `initialize` with `version`, then `notifications/initialized`; returns the result.
    pub fn initialize(&mut self, version: &str) -> Result<Value, String> {
        let result = self.call(
            "initialize",
            json!({
                "protocolVersion": version,
                "capabilities": { "roots": {} },
                "clientInfo": { "name": "runbyte-test", "version": "0" }
            }),
        )?;
        self.notify("notifications/initialized", json!({}));
        Ok(result)
    }

    /// Waits until `recv` answers `Closed`; returns the reason.
    pub fn wait_closed(&mut self, timeout: Duration) -> Option<String> {
        if self.closed.is_some() {
            return self.closed.clone();
        }
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            match self.pump.recv(Duration::from_millis(100)) {
                Received::Closed(reason) => {
                    self.closed = Some(reason);
                    return self.closed.clone();
                }
                Received::Message(text) => self.others.push(serde_json::from_str(&text).unwrap()),
                Received::Timeout => {}
            }
        }
        None
    }

    /// Waits until a message matching `matches` has arrived (outside a response wait).
    pub fn wait_other(
        &mut self,
        timeout: Duration,
        matches: impl Fn(&Value) -> bool,
    ) -> Option<Value> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(found) = self.others.iter().find(|m| matches(m)) {
                return Some(found.clone());
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            match self.pump.recv(Duration::from_millis(100)) {
                Received::Message(text) => self.others.push(serde_json::from_str(&text).unwrap()),
                Received::Closed(reason) => {
                    self.closed = Some(reason);
                    return None;
                }
                Received::Timeout => {}
            }
        }
    }
}

/// Ends every session the harness has accepted, as a server that forgets its sessions would.
impl Harness {
    pub fn end_sessions(&self) {
        for pump in lock(&self.pumps).drain(..) {
            pump.close();
        }
    }
}

/// A tiny HTTP/1.1 server that answers every request with the same raw response, for failure
/// cases no real server produces on demand (500, a redirect elsewhere).
pub fn canned_server(response: String) -> (std::net::SocketAddr, thread::JoinHandle<()>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let handle = thread::spawn(move || {
        listener.set_nonblocking(false).unwrap();
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { return };
            stream
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            // Read the head, then the body its Content-Length announces.
            while let Ok(read) = stream.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                request.extend_from_slice(&buffer[..read]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some(head_end) = text.find("\r\n\r\n") {
                    let length = text[..head_end]
                        .lines()
                        .find_map(|line| {
                            let (name, value) = line.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if request.len() >= head_end + 4 + length {
                        break;
                    }
                }
            }
            let _ = stream.write_all(response.as_bytes());
        }
    });
    (address, handle)
}

/// A 2024-11-05 (`GET /sse`) server on a free loopback port, answered by the harness.
pub fn legacy_server() -> Harness {
    let runtime = Arc::new(crate::PrivateRuntime::new("test-sse").unwrap());
    let listener = crate::legacy_server::listen(
        runtime,
        r#"{"bind":"127.0.0.1:0"}"#,
        &crate::limits::ListenLimits::default(),
    )
    .unwrap();
    Harness::serve(listener)
}

/// Where the npm packages the tests use are installed: `$RUNBYTE_TEST_NPM`, else the
/// repository's `.test-deps` (what `scripts/test-deps` installs).
pub fn npm_dir() -> std::path::PathBuf {
    std::env::var_os("RUNBYTE_TEST_NPM")
        .map(Into::into)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.test-deps")
        })
}

/// Reports a test that cannot run for want of a third-party package: a skip with the message,
/// or a failure when `RUNBYTE_REQUIRE_TEST_DEPS=1` (as `scripts/test` sets), so that CI never
/// passes a test it did not run.
pub fn skip(message: &str) {
    assert!(
        std::env::var("RUNBYTE_REQUIRE_TEST_DEPS").as_deref() != Ok("1"),
        "a required test dependency is missing: {message}"
    );
    eprintln!("SKIPPED: {message}");
}

/// A free loopback port (bound, then released: a small race the tests accept).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `@modelcontextprotocol/server-everything` running in `mode` (`streamableHttp` or `sse`) on
/// a free port; killed when dropped.
pub struct Everything {
    child: std::process::Child,
    pub port: u16,
}

impl Everything {
    /// `None` (with a message on stderr saying how to install it) when the package is absent.
    pub fn start(mode: &str) -> Option<Self> {
        let script =
            npm_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        if !script.exists() {
            skip(&format!(
                "{} is missing; run scripts/test-deps (or set RUNBYTE_TEST_NPM)",
                script.display()
            ));
            return None;
        }
        let node = std::env::var("RUNBYTE_TEST_NODE").unwrap_or_else(|_| "node".to_owned());
        let port = free_port();
        let spawned = std::process::Command::new(&node)
            .arg(&script)
            .arg(mode)
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            // No Node this system can run (under wine, say, the test folder's Node is Linux's).
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                skip(&format!(
                    "cannot run `{node}` ({error}); install Node or set RUNBYTE_TEST_NODE"
                ));
                return None;
            }
            Err(error) => panic!("cannot start `{node}`: {error}"),
        };
        let everything = Self { child, port };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "server-everything ({mode}) did not start on port {port}"
            );
            thread::sleep(Duration::from_millis(100));
        }
        Some(everything)
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
