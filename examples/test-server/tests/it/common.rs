//! Shared helpers: starting the server, an rmcp client that records notifications, and a raw
//! JSON-lines client for the cases an SDK client hides (crashes, garbage, hangs).

use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult, ProgressNotificationParam};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceError, ServiceExt as _};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

pub const BIN: &str = env!("CARGO_BIN_EXE_runbyte-test-server");

/// Long enough for a loaded 2-core machine, short enough to keep the suite fast.
pub const WAIT: Duration = Duration::from_secs(10);

/// A client handler that records the notifications the server sends.
#[derive(Clone, Default)]
pub struct Recorder {
    pub list_changed: Arc<AtomicUsize>,
    pub progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
}

impl ClientHandler for Recorder {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params);
    }
}

pub type Client = RunningService<RoleClient, Recorder>;

/// The server binary, in a process group of its own on Unix (as a gateway would start it;
/// Windows has no process groups to start it in).
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.args(args).kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    command
}

/// Starts the server on stdio and connects an rmcp client; returns the client and server pid.
pub async fn stdio_client(command: Command) -> (Client, Recorder, u32) {
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = transport.id().unwrap();
    let recorder = Recorder::default();
    let client = recorder.clone().serve(transport).await.unwrap();
    (client, recorder, pid)
}

pub fn params(name: &str, arguments: Value) -> CallToolRequestParams {
    let params = CallToolRequestParams::new(name.to_owned());
    match arguments {
        Value::Object(map) => params.with_arguments(map),
        _ => params,
    }
}

pub async fn try_call(
    client: &Client,
    name: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    client.call_tool(params(name, arguments)).await
}

pub async fn call(client: &Client, name: &str, arguments: Value) -> CallToolResult {
    try_call(client, name, arguments).await.unwrap()
}

/// The JSON-RPC error a call failed with.
pub fn rpc_error(error: ServiceError) -> ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        other => panic!("expected a JSON-RPC error, got {other:?}"),
    }
}

pub fn text(result: &CallToolResult) -> &str {
    &result.content[0].as_text().expect("a text block").text
}

/// Polls `check` until it holds or `WAIT` passes.
pub async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits for `child` to exit and returns its exit code.
pub async fn exit_code(child: &mut Child) -> i32 {
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("the server exits")
        .unwrap();
    status.code().expect("an exit code, not a signal")
}

/// A server on stdio driven line by line.
pub struct RawStdio {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// stdout lines that were not JSON.
    pub garbage: Vec<String>,
    /// Every stdout line, in order.
    pub lines: Vec<String>,
}

impl RawStdio {
    pub fn spawn(args: &[&str]) -> Self {
        let mut child = command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            stdout,
            garbage: Vec::new(),
            lines: Vec::new(),
        }
    }

    pub async fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next JSON message within `within`, skipping (and keeping) lines that are not JSON.
    pub async fn recv(&mut self, within: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let line = tokio::time::timeout_at(deadline, self.stdout.next_line())
                .await
                .ok()?;
            let line = line.unwrap()?;
            self.lines.push(line.clone());
            match serde_json::from_str::<Value>(&line) {
                Ok(message) if message.is_object() => return Some(message),
                _ => self.garbage.push(line),
            }
        }
    }

    pub async fn request(&mut self, id: u64, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
    }

    /// Sends `initialize` (for `version`) without waiting for the answer.
    pub async fn send_initialize(&mut self, version: &str) {
        let params = json!({
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"}
        });
        self.request(0, "initialize", params).await;
    }

    /// The whole handshake; returns the `initialize` result.
    pub async fn initialize(&mut self) -> Value {
        self.send_initialize("2025-06-18").await;
        let answer = self.recv(WAIT).await.expect("an initialize answer");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        answer["result"].clone()
    }

    pub async fn stderr(&mut self) -> String {
        let mut stderr = self.child.stderr.take().unwrap();
        let mut text = String::new();
        let _ = tokio::time::timeout(
            WAIT,
            tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text),
        )
        .await;
        text
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

/// A server on http or sse; `url` is what it printed after `listening on`.
pub struct Listening {
    pub child: Child,
    pub url: String,
}

pub async fn listen(args: &[&str]) -> Listening {
    install_crypto();
    let mut child = command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = tokio::time::timeout(WAIT, async {
        loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("a `listening on` line");
            if let Some(url) = line.strip_prefix("listening on ") {
                return url.to_owned();
            }
        }
    })
    .await
    .expect("the server starts listening");
    // Keep draining stderr so that the server never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Listening { child, url }
}

/// reqwest's rustls takes its crypto provider from the process default when the workspace build
/// unifies it with `rustls-no-provider` (the HTTP transport plugins pick `ring` themselves):
/// install `ring` before any client is built. Every HTTP test starts a server through `listen`.
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
