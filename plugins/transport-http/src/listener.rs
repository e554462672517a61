//! The streamable HTTP server: MCP 2026-07-28 (stateless, see [`modern`]) and the session-based
//! revisions 2025-03-26, 2025-06-18 and 2025-11-25, on one endpoint, chosen per request.
//!
//! One endpoint (`path`, `/mcp` by default):
//! - `POST` carries client messages. A body of notifications and responses only is answered
//!   202. A body with requests is answered as an SSE stream when the client accepts one (the
//!   stream carries what the server sends about those requests, then their responses, and ends)
//!   or else as JSON once every response is in.
//! - `GET` opens the session's standalone SSE stream for server messages that belong to no
//!   request. A second GET replaces the first (which is ended): a client that lost its stream
//!   without the server noticing can always get a new one, and no message goes to two streams.
//! - `DELETE` ends the session.
//!
//! `GET /healthz` (liveness) and `GET /readyz` (readiness: 503 once the listener is closing)
//! answer without a token or an allowed `Host`, and say nothing but that; they never reach the
//! host or a downstream server. `GET /metrics` passes the same checks as MCP requests and
//! answers the host's metrics (see [`metrics`]; 404 while `[telemetry] metrics` is off).
//!
//! A session starts with an `initialize` POST (its answer carries `Mcp-Session-Id`, 128 random
//! bits); every later request must carry that id (missing: 400; unknown or ended: 404).
//!
//! Sessions are cheap and bounded (see [`runbyte_http_common::limits`]): a session is a table
//! entry and a descriptor the host waits on, never a thread; at most `max-sessions` are open,
//! `max-sessions-per-peer` from one client IP (beyond: 503 and 429). A session with no request
//! and no stream open ends after `session-idle-timeout-ms`, or after
//! `uninitialized-session-timeout-ms` while its client has sent nothing since `initialize`; one
//! sweeper task per listener finds them.
//!
//! Where a server message goes: a response, to the stream of the POST that carried its request
//! (dropped if that stream is gone: it is never re-sent elsewhere); a progress notification, to
//! the stream of the request whose `_meta.progressToken` it names; a server request or a log
//! message, to the newest open request stream, else the standalone stream; other notifications,
//! to the standalone stream, else the newest request stream. With no stream open, they wait (up
//! to 1000) for the next GET.

// Refusals are returned as the HTTP answer itself (`Err(Response)`), as in `server`.
#![allow(clippy::result_large_err)]

mod metrics;
mod modern;
mod session;

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex, Weak, mpsc},
    time::{Duration, Instant},
};

use hyper::{
    HeaderMap, Method, Response, StatusCode,
    header::{self, HeaderValue},
};
use runbyte_http_common::{
    PrivateRuntime, Tasks,
    jsonrpc::{self, Kind},
    limits::ListenLimits,
    lock,
    security::{self, Guard, random_id},
    server::{self, AcceptQueue, Body, Handler, Request},
    sessions::{self, SessionTable},
};
use runbyte_plugin_api::{
    LogLevel, log,
    transport::{Accepted, Listener},
};
use serde_json::Value;
use session::{RequestStream, Session, SessionPump};

/// Protocol revisions whose `MCP-Protocol-Version` header is accepted (plus whatever revision
/// the host negotiated for the session).
const KNOWN_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The first revision without JSON-RPC batches.
const NO_BATCHES_FROM: &str = "2025-06-18";
const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const METHODS: &str = "GET, POST, DELETE, OPTIONS";
/// Liveness probe path (answered before the security rules, see [`Probe`]).
const HEALTH_PATH: &str = "/healthz";
/// Readiness probe path.
const READY_PATH: &str = "/readyz";

/// Starts the listener; `base` holds the limits from the transport's table, which the
/// options' own limit keys override.
pub(crate) fn listen(
    runtime: Arc<PrivateRuntime>,
    options: &str,
    base: &ListenLimits,
) -> Result<Box<dyn Listener>, String> {
    let prepared = server::prepare(options, base)?;
    let path = prepared
        .options
        .path
        .clone()
        .unwrap_or_else(|| "/mcp".to_owned());
    if !path.starts_with('/') {
        return Err(format!("path `{path}` must start with `/`"));
    }
    let tasks = Arc::new(Tasks::new(runtime.handle().clone()));
    let (accept_tx, accept_rx) = mpsc::channel();
    let state = Arc::new(State {
        guard: prepared.guard,
        path,
        limits: prepared.limits,
        sessions: Mutex::new(SessionTable::default()),
        accept_tx: Mutex::new(Some(accept_tx)),
    });
    server::serve(
        prepared.listener,
        tasks.clone(),
        state.clone(),
        &state.limits,
    )?;
    let weak = Arc::downgrade(&state);
    sessions::sweep_every(&tasks, state.limits.sweep_interval(), move || {
        weak.upgrade().map(|state| state.sweep()).is_some()
    });
    log(
        LogLevel::Info,
        &format!(
            "streamable HTTP listening on http://{}{}",
            prepared.address, state.path
        ),
    );
    Ok(Box::new(HttpListener {
        state,
        queue: AcceptQueue::new(accept_rx),
        tasks,
        address: prepared.address,
        _runtime: runtime,
    }))
}

/// Ends a request's own session when dropped: when its answer is sent, or when the client
/// goes away first (then the host sees the session end and cancels the request).
struct EndsSession(Arc<Session>);

impl Drop for EndsSession {
    fn drop(&mut self) {
        self.0.end("the request is over");
    }
}

struct HttpListener {
    state: Arc<State>,
    queue: AcceptQueue,
    tasks: Arc<Tasks>,
    address: SocketAddr,
    _runtime: Arc<PrivateRuntime>,
}

impl Listener for HttpListener {
    fn accept(&self, timeout: Duration) -> Result<Option<Accepted>, String> {
        self.queue.accept(timeout)
    }

    fn address(&self) -> String {
        self.address.to_string()
    }

    fn close(&self) {
        self.tasks.abort_all();
        lock(&self.state.accept_tx).take();
        let sessions = lock(&self.state.sessions).drain();
        for session in sessions {
            session.end("the listener closed");
        }
    }
}

impl Drop for HttpListener {
    fn drop(&mut self) {
        self.close();
    }
}

struct State {
    guard: Guard,
    path: String,
    limits: ListenLimits,
    sessions: Mutex<SessionTable<Session>>,
    accept_tx: Mutex<Option<mpsc::Sender<Accepted>>>,
}

impl Handler for State {
    async fn handle(self: Arc<Self>, request: Request, peer: SocketAddr) -> Response<Body> {
        // Probes (a load balancer's, Kubernetes') carry no token and name the pod's address as
        // the host: these two answer before the security rules, and say nothing but whether
        // this process serves.
        if request.method() == Method::GET
            && let Some(probe) = Probe::of(request.uri().path())
        {
            return self.probe(probe);
        }
        let origin = match server::screen(&self.guard, request.method(), request.headers(), METHODS)
        {
            Ok(origin) => origin,
            Err(answer) => return answer,
        };
        let response =
            if request.uri().path() == metrics::METRICS_PATH && request.uri().path() != self.path {
                match *request.method() {
                    Method::GET => self.metrics(peer).await,
                    _ => server::method_not_allowed("GET, OPTIONS"),
                }
            } else if request.uri().path() != self.path {
                server::error_status(
                    StatusCode::NOT_FOUND,
                    jsonrpc::TRANSPORT_ERROR,
                    &format!("no MCP endpoint here; it is {}", self.path),
                )
            } else {
                match *request.method() {
                    Method::POST => self.post(request, peer).await,
                    Method::GET => self.get(request.headers()),
                    Method::DELETE => self.delete(request.headers()),
                    _ => server::method_not_allowed(METHODS),
                }
            };
        server::with_cors(response, origin.as_ref())
    }
}

fn bad_request(message: &str) -> Response<Body> {
    server::error_status(StatusCode::BAD_REQUEST, jsonrpc::TRANSPORT_ERROR, message)
}

fn invalid(message: &str) -> Response<Body> {
    server::error_status(StatusCode::BAD_REQUEST, jsonrpc::INVALID_REQUEST, message)
}

fn session_not_found() -> Response<Body> {
    server::error_status(
        StatusCode::NOT_FOUND,
        jsonrpc::SESSION_NOT_FOUND,
        "Session not found: it expired or was terminated; initialize a new one",
    )
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).map(|value| value.to_str().unwrap_or(""))
}

/// The two probe endpoints.
#[derive(Clone, Copy)]
enum Probe {
    /// `GET /healthz`: the process serves HTTP (liveness).
    Health,
    /// `GET /readyz`: it takes new requests (readiness); 503 once it is shutting down, so that
    /// a balancer stops sending it work before it stops.
    Ready,
}

impl Probe {
    fn of(path: &str) -> Option<Probe> {
        match path {
            HEALTH_PATH => Some(Probe::Health),
            READY_PATH => Some(Probe::Ready),
            _ => None,
        }
    }
}

impl State {
    fn probe(&self, probe: Probe) -> Response<Body> {
        let accepting = lock(&self.accept_tx).is_some();
        let (status, text) = match probe {
            Probe::Health => (StatusCode::OK, r#"{"status":"ok"}"#),
            Probe::Ready if accepting => (StatusCode::OK, r#"{"status":"ready"}"#),
            Probe::Ready => (
                StatusCode::SERVICE_UNAVAILABLE,
                r#"{"status":"shutting down"}"#,
            ),
        };
        server::json_text_response(status, text.to_owned())
    }

    /// Ends the sessions idle past their timeout.
    fn sweep(&self) {
        let now = Instant::now();
        let expired =
            lock(&self.sessions).select(|session| session.idle_expiry(&self.limits, now).is_some());
        for session in expired {
            // Busy again since it was picked: it stays.
            let Some(timeout) = session.idle_expiry(&self.limits, now) else {
                continue;
            };
            log(
                LogLevel::Info,
                &format!(
                    "{} expired after {} ms idle",
                    security::session_tag(&session.id),
                    timeout.as_millis()
                ),
            );
            session.end("the session expired (idle)");
        }
    }

    /// The session a request names: `Err` is the answer (400 without the header, 404 unknown).
    fn session_of(&self, headers: &HeaderMap) -> Result<Arc<Session>, Response<Body>> {
        let Some(id) = header_text(headers, SESSION_HEADER) else {
            return Err(bad_request(
                "Bad Request: the Mcp-Session-Id header is required",
            ));
        };
        lock(&self.sessions)
            .get(id)
            .cloned()
            .ok_or_else(session_not_found)
    }

    async fn post(self: &Arc<Self>, request: Request, peer: SocketAddr) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let headers = &parts.headers;
        if let Some(kind) = header_text(headers, header::CONTENT_TYPE.as_str())
            && !kind
                .trim()
                .to_ascii_lowercase()
                .starts_with("application/json")
        {
            return server::error_status(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                jsonrpc::TRANSPORT_ERROR,
                "Content-Type must be application/json",
            );
        }
        let wants_sse = server::accepts(headers, "text/event-stream");
        if !wants_sse
            && headers.contains_key(header::ACCEPT)
            && !server::accepts(headers, "application/json")
        {
            return server::error_status(
                StatusCode::NOT_ACCEPTABLE,
                jsonrpc::TRANSPORT_ERROR,
                "Not Acceptable: Accept must list application/json and text/event-stream",
            );
        }
        let body = match server::read_body(
            headers,
            body,
            self.limits.max_body_bytes,
            self.limits.body_timeout,
        )
        .await
        {
            Ok(body) => body,
            Err(error) => return server::body_error(error),
        };
        let value: Value = match serde_json::from_slice(&body) {
            Ok(value) => value,
            Err(error) => return server::parse_error(&error),
        };
        let batch = value.is_array();
        let messages = jsonrpc::split(value);
        if messages.is_empty() {
            return invalid("Invalid Request: an empty batch");
        }
        let mut kinds = Vec::with_capacity(messages.len());
        for message in &messages {
            match jsonrpc::classify(message) {
                Ok(kind) => kinds.push(kind),
                Err(why) => return invalid(&format!("Invalid Request: {why}")),
            }
        }
        let version = header_text(headers, VERSION_HEADER);
        if messages
            .iter()
            .any(|message| modern::is_modern(message, version))
        {
            if batch {
                return invalid("Invalid Request: MCP 2026-07-28 has no JSON-RPC batches");
            }
            let (Some(message), Some(kind)) = (messages.into_iter().next(), kinds.pop()) else {
                return invalid("Invalid Request: an empty batch");
            };
            return self
                .post_modern(headers, message, kind, wants_sse, peer)
                .await;
        }
        let initialize = kinds
            .iter()
            .any(|kind| matches!(kind, Kind::Request { method, .. } if method == "initialize"));
        let (session, created) = if initialize {
            if batch {
                return invalid("Invalid Request: initialize must not be part of a batch");
            }
            if let Some(id) = header_text(headers, SESSION_HEADER) {
                return match lock(&self.sessions).contains(id) {
                    true => invalid("Invalid Request: this session is already initialized"),
                    false => session_not_found(),
                };
            }
            if let Some(version) = version
                && !KNOWN_VERSIONS.contains(&version)
            {
                return bad_request(&format!(
                    "Bad Request: unsupported MCP-Protocol-Version `{version}`"
                ));
            }
            match self.new_session(peer) {
                Ok(session) => (session, true),
                Err(answer) => return answer,
            }
        } else {
            let session = match self.session_of(headers) {
                Ok(session) => session,
                Err(answer) => return answer,
            };
            let negotiated = session.negotiated();
            if let Some(version) = version
                && !KNOWN_VERSIONS.contains(&version)
                && negotiated.as_deref() != Some(version)
            {
                return bad_request(&format!(
                    "Bad Request: unsupported MCP-Protocol-Version `{version}`"
                ));
            }
            let revision = negotiated.as_deref().or(version).unwrap_or("2025-03-26");
            if batch && revision >= NO_BATCHES_FROM {
                return invalid(&format!(
                    "Invalid Request: JSON-RPC batches are not supported in protocol revision {revision}"
                ));
            }
            session.initialized();
            (session, false)
        };
        // Not idle while this request or its stream is open.
        let busy = session.busy();

        let mut requests = Vec::new();
        let mut tokens = Vec::new();
        for (message, kind) in messages.iter().zip(&kinds) {
            if let Kind::Request { id, .. } = kind {
                requests.push(jsonrpc::id_key(id));
                if let Some(token) = jsonrpc::progress_token(message) {
                    tokens.push(jsonrpc::id_key(token));
                }
            }
        }
        if requests.is_empty() {
            for message in messages {
                session.to_host(message);
            }
            return server::empty(StatusCode::ACCEPTED);
        }
        if initialize {
            session.expect_initialize_response(requests.first().cloned());
        }
        let stream = match session.open_request_stream(requests, tokens, wants_sse, batch) {
            Ok(stream) => stream,
            Err(answer) => return answer,
        };
        for message in messages {
            session.to_host(message);
        }
        if created {
            if !self.hand_to_host(&session, peer) {
                session.end("the listener is closing");
                return server::error_status(
                    StatusCode::SERVICE_UNAVAILABLE,
                    jsonrpc::TRANSPORT_ERROR,
                    "the server is shutting down",
                );
            }
            log(
                LogLevel::Info,
                &format!("{} opened from {peer}", security::session_tag(&session.id)),
            );
        }
        let mut response = match stream {
            RequestStream::Sse(rx) => {
                server::sse_response_with(rx, Some(Box::new(move || drop(busy))))
            }
            RequestStream::Json(rx) => match rx.await {
                Ok(text) => server::json_text_response(StatusCode::OK, text),
                Err(_) => session_not_found(),
            },
        };
        if created && let Ok(value) = HeaderValue::from_str(&session.id) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
        response
    }

    /// Hands a new session to the host's `accept`; `false` when the listener is closing.
    fn hand_to_host(&self, session: &Arc<Session>, peer: SocketAddr) -> bool {
        let accepted = Accepted {
            pump: Box::new(SessionPump::new(session)),
            peer: peer.to_string(),
            session: session.id.clone(),
        };
        lock(&self.accept_tx)
            .as_ref()
            .is_some_and(|tx| tx.send(accepted).is_ok())
    }

    /// Answers one MCP 2026-07-28 request (see [`modern`]): checked, then served by the host as
    /// a session of its own that ends with its answer, or with its stream for
    /// `subscriptions/listen`.
    async fn post_modern(
        self: &Arc<Self>,
        headers: &HeaderMap,
        message: Value,
        kind: Kind,
        wants_sse: bool,
        peer: SocketAddr,
    ) -> Response<Body> {
        // 2026-07-28 has no client notifications or responses over HTTP (closing a stream is
        // how a request is cancelled): accepted and dropped.
        let Kind::Request { id, method } = kind else {
            return server::empty(StatusCode::ACCEPTED);
        };
        if let Err(answer) = modern::check(headers, &message, &id, &method) {
            return answer;
        }
        let mut message = message;
        if method == "tools/call"
            && let Err(answer) = modern::pass_param_headers(headers, &mut message, &id)
        {
            return answer;
        }
        let key = match random_id() {
            Ok(key) => key,
            Err(error) => {
                return modern::error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    Some(&id),
                    jsonrpc::INTERNAL_ERROR,
                    &error,
                );
            }
        };
        // Not in the session table: nothing of it outlives the request.
        let session = Arc::new(Session::new(format!("request-{key}"), Weak::new()));
        let ender = EndsSession(session.clone());
        let token = jsonrpc::progress_token(&message).map(jsonrpc::id_key);
        // A stream when the answer may take a while and carry notifications before it.
        let sse = wants_sse
            && (method == "subscriptions/listen" || (method == "tools/call" && token.is_some()));
        let stream = match session.open_request_stream(
            vec![jsonrpc::id_key(&id)],
            token.into_iter().collect(),
            sse,
            false,
        ) {
            Ok(stream) => stream,
            Err(answer) => return answer,
        };
        session.to_host(message);
        if !self.hand_to_host(&session, peer) {
            return modern::error(
                StatusCode::SERVICE_UNAVAILABLE,
                Some(&id),
                jsonrpc::TRANSPORT_ERROR,
                "the server is shutting down",
            );
        }
        match stream {
            // The stream ends after the answer (or when the client closes it); so does the
            // request's session.
            RequestStream::Sse(rx) => {
                server::sse_response_with(rx, Some(Box::new(move || drop(ender))))
            }
            RequestStream::Json(rx) => match rx.await {
                Ok(text) => server::json_text_response(modern::status_of(&text), text),
                Err(_) => modern::error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    Some(&id),
                    jsonrpc::TRANSPORT_ERROR,
                    "the server ended the request without answering",
                ),
            },
        }
    }

    fn get(&self, headers: &HeaderMap) -> Response<Body> {
        if !server::accepts(headers, "text/event-stream") {
            return server::error_status(
                StatusCode::NOT_ACCEPTABLE,
                jsonrpc::TRANSPORT_ERROR,
                "Not Acceptable: a GET stream needs Accept: text/event-stream",
            );
        }
        let session = match self.session_of(headers) {
            Ok(session) => session,
            Err(answer) => return answer,
        };
        if let Some(version) = header_text(headers, VERSION_HEADER)
            && !KNOWN_VERSIONS.contains(&version)
            && session.negotiated().as_deref() != Some(version)
        {
            return bad_request(&format!(
                "Bad Request: unsupported MCP-Protocol-Version `{version}`"
            ));
        }
        session.initialized();
        let busy = session.busy();
        match session.open_standalone() {
            Some(rx) => server::sse_response_with(rx, Some(Box::new(move || drop(busy)))),
            None => session_not_found(),
        }
    }

    fn delete(&self, headers: &HeaderMap) -> Response<Body> {
        let session = match self.session_of(headers) {
            Ok(session) => session,
            Err(answer) => return answer,
        };
        session.end("the client ended the session (HTTP DELETE)");
        log(
            LogLevel::Info,
            &format!("{} ended by the client", security::session_tag(&session.id)),
        );
        server::empty(StatusCode::OK)
    }

    fn new_session(self: &Arc<Self>, peer: SocketAddr) -> Result<Arc<Session>, Response<Body>> {
        let id = random_id().map_err(|error| {
            server::error_status(
                StatusCode::INTERNAL_SERVER_ERROR,
                jsonrpc::TRANSPORT_ERROR,
                &error,
            )
        })?;
        let id = format!("{}{id}", self.limits.session_id_prefix);
        let session = Arc::new(Session::new(id.clone(), Arc::downgrade(self)));
        lock(&self.sessions)
            .insert(id, peer.ip(), session.clone(), &self.limits)
            .map_err(|full| sessions::refused(full, peer.ip()))?;
        Ok(session)
    }
}
