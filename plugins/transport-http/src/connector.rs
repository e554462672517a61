//! The streamable HTTP client.
//!
//! Messages from the host are taken in order by one dispatcher task. `initialize` and
//! `notifications/initialized` are posted and awaited there (the session id and the protocol
//! revision must be known before anything else goes out), and then the session's GET stream is
//! opened (up to 2 s for the server's answer), so that no later message overtakes it; every
//! other message is posted on a task of its own, so a slow call never holds up the others. Answers (a JSON body or an SSE
//! stream per POST, and the session's GET stream) go to the host's inbox.
//!
//! Failures become text the host can show: a request whose POST fails is answered with a
//! JSON-RPC error ("HTTP 500 from <url>: <body>"); a failure that means the connection is dead
//! (unreachable server, 401, any failed `initialize`) also closes the pump with that reason. A
//! 404 on a request that carried a session id means the session expired: the remembered
//! `initialize` is replayed (its answer swallowed), `notifications/initialized` follows, and the
//! message is sent again.

mod param_headers;
mod streams;

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use reqwest::{
    Client, RequestBuilder, Response, StatusCode, Url,
    header::{ACCEPT, CONTENT_TYPE, HeaderMap},
};
use runbyte_http_common::{
    Inbox, InboxSender, PrivateRuntime, Tasks,
    client::{self, Target},
    inbox,
    jsonrpc::{self, Kind},
    legacy::{LegacyClient, LegacyTarget},
    lock,
    runtime::wait_for,
};
use runbyte_plugin_api::{
    LogLevel, Signal, log,
    transport::{Pump, Received},
};
use serde_json::Value;
use tokio::{
    sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel},
    task::AbortHandle,
};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const LAST_EVENT_HEADER: &str = "last-event-id";
const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";
/// The `_meta` key with which a 2026-07-28 request names its protocol revision.
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// How long `close` waits for the DELETE that ends the session.
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);
/// Reconnections of one broken response stream (with `Last-Event-ID`) in a row, without an
/// event in between, before giving up.
const MAX_RESUMES: u32 = 5;
/// The wait before reconnecting a stream when the server gave no `retry:`.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// The bounds of a server's `retry:`.
const MIN_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(30);
/// How long the messages after `notifications/initialized` wait for the GET stream to open.
const GET_OPEN_TIMEOUT: Duration = Duration::from_secs(2);
/// Consecutive failures of the GET stream before it is given up.
const MAX_GET_FAILURES: u32 = 5;

/// Validates the target and starts the pump. No request is made until the host sends
/// `initialize`.
pub(crate) fn connect(
    runtime: Arc<PrivateRuntime>,
    http: Client,
    target: &str,
) -> Result<Box<dyn Pump>, String> {
    let target = Target::parse(target)?;
    let name = target.name().to_owned();
    let url =
        client::parse_url(&target.url).map_err(|error| format!("server `{name}`: {error}"))?;
    let headers =
        client::header_map(&target.headers).map_err(|error| format!("server `{name}`: {error}"))?;
    let fallback = match target.fallback.as_deref() {
        None => false,
        Some("sse") => true,
        Some(other) => {
            return Err(format!(
                "server `{name}`: fallback must be \"sse\", not `{other}`"
            ));
        }
    };
    let tasks = Arc::new(Tasks::new(runtime.handle().clone()));
    let (sender, inbox) = inbox::inbox();
    let shared = Arc::new(Shared {
        name,
        url,
        headers,
        http,
        max_bytes: target.max_message_bytes(),
        fallback,
        inbox: sender,
        tasks: tasks.clone(),
        session: Mutex::new(SessionState::default()),
        reinit: tokio::sync::Mutex::new(()),
        legacy: Mutex::new(None),
        get_stream: Mutex::new(None),
        stateless: Mutex::new(HashMap::new()),
        designations: Mutex::new(HashMap::new()),
    });
    let (outbox, queue) = unbounded_channel();
    tasks.spawn(shared.clone().dispatch(queue));
    Ok(Box::new(HttpPump {
        shared,
        inbox,
        outbox,
        closed: AtomicBool::new(false),
        _runtime: runtime,
    }))
}

struct HttpPump {
    shared: Arc<Shared>,
    inbox: Inbox,
    outbox: UnboundedSender<String>,
    closed: AtomicBool,
    _runtime: Arc<PrivateRuntime>,
}

impl Pump for HttpPump {
    fn send(&self, message: &str) -> Result<(), String> {
        if self.closed.load(Ordering::SeqCst) {
            return Err("the connection is closed".to_owned());
        }
        if let Some(reason) = self.inbox.ended() {
            return Err(reason);
        }
        self.outbox
            .send(message.to_owned())
            .map_err(|_| "the connection is closed".to_owned())
    }

    fn recv(&self, timeout: Duration) -> Received {
        self.inbox.recv(timeout)
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        let shared = self.shared.clone();
        if lock(&shared.legacy).is_none() && lock(&shared.session).id.is_some() {
            // Best effort: the server may be gone already.
            let deleting = {
                let shared = shared.clone();
                async move { shared.delete_session().await }
            };
            let _ = wait_for(shared.tasks.handle(), deleting, DELETE_TIMEOUT);
        }
        shared.tasks.abort_all();
        self.inbox.close_now("closed by Runbyte");
    }
}

impl Drop for HttpPump {
    fn drop(&mut self) {
        self.close();
    }
}

#[derive(Default)]
struct SessionState {
    id: Option<String>,
    version: Option<String>,
    /// Bumped by every re-initialization, so that concurrent 404s re-initialize once.
    generation: u64,
    /// The host's `initialize` request, replayed when the session expires.
    initialize: Option<Value>,
}

struct Shared {
    name: String,
    url: Url,
    headers: HeaderMap,
    http: Client,
    max_bytes: usize,
    fallback: bool,
    inbox: InboxSender,
    tasks: Arc<Tasks>,
    session: Mutex<SessionState>,
    reinit: tokio::sync::Mutex<()>,
    /// Set when the server turned out to speak only the 2024-11-05 transport.
    legacy: Mutex<Option<Arc<LegacyClient>>>,
    get_stream: Mutex<Option<AbortHandle>>,
    /// 2026-07-28 requests in flight, by id key: aborting one closes its stream.
    stateless: Mutex<HashMap<String, AbortHandle>>,
    /// The `Mcp-Param-*` headers each listed tool designates (SEP-2243).
    designations: Mutex<param_headers::Designations>,
}

/// The revision a 2026-07-28 request names in its `_meta`; `None` for the legacy revisions.
fn stateless_version(message: &Value) -> Option<&str> {
    message
        .pointer("/params/_meta")?
        .get(META_VERSION)?
        .as_str()
}

/// A header value as SEP-2243 sends it: literal when it is plain visible ASCII without
/// surrounding spaces (the empty value included), else `=?base64?<its UTF-8 in base64>?=`.
fn header_value(value: &str) -> String {
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !sentinel;
    if plain {
        return value.to_owned();
    }
    format!("=?base64?{}?=", base64_encode(value.as_bytes()))
}

/// Standard base64 with padding.
fn base64_encode(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let word = chunk
            .iter()
            .enumerate()
            .fold(0u32, |word, (i, &b)| word | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(word >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A request's id as sent, by its key.
type Ids = HashMap<String, Value>;

fn ids_of(message: &Value) -> Ids {
    jsonrpc::request_ids(message)
        .into_iter()
        .map(|id| (jsonrpc::id_key(&id), id))
        .collect()
}

/// Rewrites the response to a request before the host gets it.
type Rewrite = fn(&Shared, &mut Value);
/// The responses to rewrite, by the key of their request's id.
type Rewrites = HashMap<String, Rewrite>;

/// What the answers to the requests in `message` (one, or a batch) need before the host gets
/// them: the tools of a `tools/list` are screened for their `x-mcp-header` annotations.
fn rewrites_of(message: &Value) -> Rewrites {
    let items: &[Value] = match message {
        Value::Array(items) => items,
        other => std::slice::from_ref(other),
    };
    items
        .iter()
        .filter_map(|item| match jsonrpc::classify(item) {
            Ok(Kind::Request { id, method }) if method == "tools/list" => {
                Some((jsonrpc::id_key(&id), Shared::screen_tools as Rewrite))
            }
            _ => None,
        })
        .collect()
}

impl Shared {
    async fn dispatch(self: Arc<Self>, mut queue: UnboundedReceiver<String>) {
        while let Some(text) = queue.recv().await {
            let legacy = lock(&self.legacy).clone();
            if let Some(legacy) = legacy {
                legacy.send(&text).await;
                continue;
            }
            let message: Value = match serde_json::from_str(&text) {
                Ok(message) => message,
                Err(error) => {
                    log(
                        LogLevel::Warn,
                        &format!(
                            "server `{}`: the host sent a message that is not JSON ({error}); dropped",
                            self.name
                        ),
                    );
                    continue;
                }
            };
            match jsonrpc::classify(&message) {
                Ok(Kind::Request { id, method }) if method == "initialize" => {
                    self.initialize(text, message, id).await;
                }
                Ok(Kind::Notification { method }) if method == "notifications/initialized" => {
                    self.post(text, Ids::new(), Rewrites::new()).await;
                    self.open_get_stream().await;
                }
                Ok(Kind::Request { id, method }) if stateless_version(&message).is_some() => {
                    let ids = ids_of(&message);
                    let key = jsonrpc::id_key(&id);
                    let shared = self.clone();
                    let finished = key.clone();
                    // Held while spawning, so that the task's own removal comes after this insert.
                    let mut in_flight = lock(&self.stateless);
                    let task = self.tasks.spawn(async move {
                        shared.post_stateless(text, message, method, ids).await;
                        lock(&shared.stateless).remove(&finished);
                    });
                    if let Some(task) = task {
                        in_flight.insert(key, task);
                    }
                }
                // A 2026-07-28 request is cancelled by closing its stream, not by a message.
                Ok(Kind::Notification { method })
                    if method == "notifications/cancelled"
                        && message
                            .pointer("/params/requestId")
                            .map(jsonrpc::id_key)
                            .and_then(|key| lock(&self.stateless).remove(&key))
                            .map(|task| task.abort())
                            .is_some() => {}
                _ => {
                    let ids = ids_of(&message);
                    let rewrites = rewrites_of(&message);
                    let shared = self.clone();
                    self.tasks
                        .spawn(async move { shared.post(text, ids, rewrites).await });
                }
            }
        }
    }

    /// A POST of `body` with the configured headers and, when `with_session`, the session's id
    /// and revision. Also returns the session generation it was built for.
    fn post_request(&self, body: String, with_session: bool) -> (RequestBuilder, u64, bool) {
        let mut request = self
            .http
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        let session = lock(&self.session);
        let mut had_session = false;
        if with_session {
            if let Some(id) = &session.id {
                request = request.header(SESSION_HEADER, id.as_str());
                had_session = true;
            }
            if let Some(version) = &session.version {
                request = request.header(VERSION_HEADER, version.as_str());
            }
        }
        (request, session.generation, had_session)
    }

    fn session_headers(&self, mut request: RequestBuilder) -> RequestBuilder {
        let session = lock(&self.session);
        if let Some(id) = &session.id {
            request = request.header(SESSION_HEADER, id.as_str());
        }
        if let Some(version) = &session.version {
            request = request.header(VERSION_HEADER, version.as_str());
        }
        request
    }

    /// Answers each request in `ids` with a JSON-RPC error saying `why`.
    fn fail(&self, ids: &Ids, why: &str) {
        for id in ids.values() {
            let error = jsonrpc::error_response(id.clone(), jsonrpc::TRANSPORT_ERROR, why);
            self.inbox.message(error.to_string());
        }
    }

    /// Answers each of `ids` with `why` and ends the connection with it.
    fn fail_and_die(&self, ids: &Ids, why: String) {
        self.inbox.ending(&why);
        self.fail(ids, &why);
        self.die(why);
    }

    /// Ends the connection for good, with `why` for the operator.
    fn die(&self, why: String) {
        log(LogLevel::Warn, &format!("server `{}`: {why}", self.name));
        self.inbox.close(why);
    }

    async fn initialize(self: &Arc<Self>, text: String, message: Value, id: Value) {
        lock(&self.session).initialize = Some(message);
        let ids: Ids = [(jsonrpc::id_key(&id), id)].into_iter().collect();
        let (request, _, _) = self.post_request(text.clone(), false);
        let mut response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                let why = format!("cannot reach {}: {}", self.url, client::describe(&error));
                return self.fail_and_die(&ids, why);
            }
        };
        let status = response.status();
        if self.fallback && matches!(status.as_u16(), 400 | 404 | 405) {
            return self.fall_back(text, status, &ids).await;
        }
        if !status.is_success() {
            let challenge = client::challenge_of(&response);
            let body = client::error_excerpt(&mut response).await;
            let why = Signal::http(
                status.as_u16(),
                self.url.as_str(),
                &body,
                challenge.as_deref(),
            );
            return self.fail_and_die(&ids, why);
        }
        self.remember_session(&response);
        self.read_answer(response, ids, &Rewrites::new(), None)
            .await;
    }

    /// Switches this pump to the 2024-11-05 transport on the same URL and replays `initialize`.
    async fn fall_back(&self, initialize: String, status: StatusCode, ids: &Ids) {
        log(
            LogLevel::Info,
            &format!(
                "server `{}`: {} refused streamable HTTP (HTTP {}); trying the 2024-11-05 SSE transport",
                self.name,
                self.url,
                status.as_u16()
            ),
        );
        let target = LegacyTarget {
            name: self.name.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
            max_message_bytes: self.max_bytes,
        };
        match LegacyClient::connect(self.http.clone(), target, self.inbox.clone(), &self.tasks)
            .await
        {
            Ok(legacy) => {
                *lock(&self.legacy) = Some(legacy.clone());
                legacy.send(&initialize).await;
            }
            Err(error) => {
                let why = format!(
                    "{} refused streamable HTTP (HTTP {}) and the SSE fallback failed: {error}",
                    self.url,
                    status.as_u16()
                );
                self.fail_and_die(ids, why);
            }
        }
    }

    fn remember_session(&self, response: &Response) {
        let id = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok());
        if let Some(id) = id {
            lock(&self.session).id = Some(id.to_owned());
        }
    }

    /// Sends a POST; when it fails, each of `ids` is answered with why (and an unreachable
    /// server ends the connection).
    async fn send_post(&self, request: RequestBuilder, ids: &Ids) -> Option<Response> {
        match request.send().await {
            Ok(response) => Some(response),
            Err(error) => {
                let why = format!("POST {} failed: {}", self.url, client::describe(&error));
                if client::is_unreachable(&error) {
                    self.fail_and_die(ids, why);
                } else {
                    self.fail(ids, &why);
                }
                None
            }
        }
    }

    /// Posts one message (not `initialize`) and delivers its answer, rewritten by `rewrites`.
    async fn post(self: &Arc<Self>, text: String, ids: Ids, rewrites: Rewrites) {
        for attempt in 0..2 {
            let (request, generation, had_session) = self.post_request(text.clone(), true);
            let Some(mut response) = self.send_post(request, &ids).await else {
                return;
            };
            let status = response.status();
            if status == StatusCode::NOT_FOUND && had_session && attempt == 0 {
                if let Err(why) = self.reinitialize(generation).await {
                    return self.fail_and_die(&ids, why);
                }
                continue;
            }
            if !status.is_success() {
                let challenge = client::challenge_of(&response);
                let body = client::error_excerpt(&mut response).await;
                let why = Signal::http(
                    status.as_u16(),
                    self.url.as_str(),
                    &body,
                    challenge.as_deref(),
                );
                if status == StatusCode::UNAUTHORIZED {
                    self.fail_and_die(&ids, why);
                } else {
                    self.fail(&ids, &why);
                }
                return;
            }
            self.read_answer(response, ids, &rewrites, None).await;
            return;
        }
    }

    /// Posts one 2026-07-28 request: no session, the revision, method and name in the standard
    /// headers, and for `tools/call` the `Mcp-Param-*` headers its tool designates (SEP-2243). A server refuses such a request with an HTTP error whose body is the
    /// JSON-RPC error (an unsupported revision, a header mismatch): that error is what the host
    /// gets, so that it can choose another revision or fall back to `initialize`.
    async fn post_stateless(
        self: &Arc<Self>,
        text: String,
        message: Value,
        method: String,
        ids: Ids,
    ) {
        let version = stateless_version(&message).unwrap_or_default().to_owned();
        let mut request = self
            .http
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .header(VERSION_HEADER, version)
            .header(METHOD_HEADER, method.as_str());
        let name = match method.as_str() {
            "tools/call" | "prompts/get" => message.pointer("/params/name"),
            "resources/read" => message.pointer("/params/uri"),
            // SEP-2663: a task request is routed by its task, to the replica holding it.
            "tasks/get" | "tasks/update" | "tasks/cancel" => message.pointer("/params/taskId"),
            _ => None,
        };
        if let Some(name) = name.and_then(Value::as_str) {
            request = request.header(NAME_HEADER, header_value(name));
        }
        if method == "tools/call" {
            // Replaces any configured header of the same name.
            request = request.headers(self.param_headers(&message));
        }
        let rewrites = rewrites_of(&message);
        let Some(mut response) = self.send_post(request.body(text), &ids).await else {
            return;
        };
        let status = response.status();
        if !status.is_success() {
            let challenge = client::challenge_of(&response);
            let body = client::read_capped(&mut response, 64 * 1024)
                .await
                .unwrap_or_default();
            let answer = serde_json::from_slice::<Value>(&body)
                .ok()
                .filter(|answer| {
                    answer.get("error").is_some()
                        && answer
                            .get("id")
                            .is_some_and(|id| ids.contains_key(&jsonrpc::id_key(id)))
                });
            match answer {
                Some(answer) => {
                    self.inbox.message(answer.to_string());
                }
                None => {
                    let why = Signal::http(
                        status.as_u16(),
                        self.url.as_str(),
                        &client::excerpt(&body),
                        challenge.as_deref(),
                    );
                    if status == StatusCode::UNAUTHORIZED {
                        self.fail_and_die(&ids, why);
                    } else {
                        self.fail(&ids, &why);
                    }
                }
            }
            return;
        }
        self.read_answer(response, ids, &rewrites, None).await;
    }

    /// Starts a new session after the old one expired (HTTP 404), unless another task already
    /// did since `generation`.
    async fn reinitialize(self: &Arc<Self>, generation: u64) -> Result<(), String> {
        let _one_at_a_time = self.reinit.lock().await;
        let initialize = {
            let session = lock(&self.session);
            if session.generation != generation {
                return Ok(());
            }
            session.initialize.clone()
        };
        let Some(initialize) = initialize else {
            return Err(format!(
                "the session at {} expired (HTTP 404) before initialize",
                self.url
            ));
        };
        log(
            LogLevel::Info,
            &format!(
                "server `{}`: the session expired (HTTP 404); initializing a new one",
                self.name
            ),
        );
        if let Some(stream) = lock(&self.get_stream).take() {
            stream.abort();
        }
        let id = initialize.get("id").cloned().unwrap_or(Value::Null);
        let key = jsonrpc::id_key(&id);
        let (request, _, _) = self.post_request(initialize.to_string(), false);
        let failed = |why: String| {
            format!(
                "the session at {} expired and a new one could not be started: {why}",
                self.url
            )
        };
        let mut response = request
            .send()
            .await
            .map_err(|error| failed(client::describe(&error)))?;
        if !response.status().is_success() {
            let body = client::error_excerpt(&mut response).await;
            return Err(failed(format!(
                "HTTP {}: {body}",
                response.status().as_u16()
            )));
        }
        let new_id = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let ids: Ids = [(key.clone(), id)].into_iter().collect();
        let answer = self
            .read_answer(response, ids, &Rewrites::new(), Some(&key))
            .await;
        let Some(answer) = answer else {
            return Err(failed("no initialize response".to_owned()));
        };
        if let Some(error) = answer.get("error") {
            return Err(failed(format!("initialize failed: {error}")));
        }
        {
            let mut session = lock(&self.session);
            session.id = new_id;
            session.version = answer
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        let initialized =
            serde_json::json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
        let (request, _, _) = self.post_request(initialized.to_string(), true);
        match request.send().await {
            Ok(response) if response.status().is_success() => {}
            Ok(response) => log(
                LogLevel::Warn,
                &format!(
                    "server `{}`: notifications/initialized got HTTP {}",
                    self.name,
                    response.status().as_u16()
                ),
            ),
            Err(error) => return Err(failed(client::describe(&error))),
        }
        lock(&self.session).generation += 1;
        self.open_get_stream().await;
        Ok(())
    }

    async fn delete_session(&self) {
        let request = self
            .http
            .delete(self.url.clone())
            .headers(self.headers.clone());
        if let Err(error) = self.session_headers(request).send().await {
            log(
                LogLevel::Debug,
                &format!(
                    "server `{}`: DELETE of the session failed: {}",
                    self.name,
                    client::describe(&error)
                ),
            );
        }
    }
}

#[cfg(test)]
mod header_tests {
    use super::*;

    #[test]
    fn header_values_are_literal_or_base64() {
        assert_eq!(header_value("get_weather"), "get_weather");
        assert_eq!(
            header_value("file:///path/to/file%20name.txt"),
            "file:///path/to/file%20name.txt"
        );
        assert_eq!(header_value("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(header_value(" a"), "=?base64?IGE=?=");
        assert_eq!(header_value(""), "");
        assert_eq!(header_value("a\tb"), "=?base64?YQli?=");
        assert_eq!(header_value("=?base64?x?="), "=?base64?PT9iYXNlNjQ/eD89?=");
        assert_eq!(base64_encode(b"ab"), "YWI=");
        assert_eq!(base64_encode(b"abc"), "YWJj");
    }
}
