//! The 2024-11-05 HTTP+SSE server: the `sse` plugin's listener (here so that the `http`
//! plugin's tests can exercise its SSE fallback against it).
//!
//! `GET /sse` opens a session: the stream's first event is `endpoint`, with
//! `/message?sessionId=<id>` (128 random bits), and every server message follows as an
//! `event: message`. `POST /message?sessionId=<id>` hands one message (or a batch) to that
//! session and is answered 202; an unknown or ended session is 404, a missing id 400. The
//! session lasts as long as its stream: when the client goes away, the host's `recv` answers
//! `Closed`.
//!
//! Sessions are capped in total and per client IP, and a session whose client POSTs nothing
//! past `initialize` within `uninitialized-session-timeout-ms` ends (see [`crate::limits`]). A
//! session costs the host no thread: its pump gives a descriptor to wait on.

use std::{
    net::SocketAddr,
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::{Duration, Instant},
};

use crate::{
    Inbox, InboxSender, PrivateRuntime, Tasks, inbox_with_fd,
    jsonrpc::{self, Kind},
    limits::ListenLimits,
    lock,
    security::{Guard, random_id},
    server::{self, AcceptQueue, Body, Handler, Request},
    sessions::{self, SessionTable},
    sse::encode_event,
};
use bytes::Bytes;
use hyper::{HeaderMap, Method, Response, StatusCode};
use runbyte_plugin_api::{
    LogLevel, log,
    transport::{Accepted, Listener, Pump, Received},
};
use serde_json::Value;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

const SSE_PATH: &str = "/sse";
const MESSAGE_PATH: &str = "/message";

/// Starts the listener on the transport's runtime; `base` holds the limits from the
/// transport's table, which the options' own limit keys override.
pub fn listen(
    runtime: Arc<PrivateRuntime>,
    options: &str,
    base: &ListenLimits,
) -> Result<Box<dyn Listener>, String> {
    let prepared = server::prepare(options, base)?;
    let tasks = Arc::new(Tasks::new(runtime.handle().clone()));
    let (accept_tx, accept_rx) = mpsc::channel();
    let state = Arc::new(State {
        guard: prepared.guard,
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
            "SSE (2024-11-05) listening on http://{}{SSE_PATH}",
            prepared.address
        ),
    );
    Ok(Box::new(SseListener {
        state,
        queue: AcceptQueue::new(accept_rx),
        tasks,
        address: prepared.address,
        _runtime: runtime,
    }))
}

struct SseListener {
    state: Arc<State>,
    queue: AcceptQueue,
    tasks: Arc<Tasks>,
    address: SocketAddr,
    _runtime: Arc<PrivateRuntime>,
}

impl Listener for SseListener {
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

impl Drop for SseListener {
    fn drop(&mut self) {
        self.close();
    }
}

struct State {
    guard: Guard,
    limits: ListenLimits,
    sessions: Mutex<SessionTable<Session>>,
    accept_tx: Mutex<Option<mpsc::Sender<Accepted>>>,
}

impl Handler for State {
    async fn handle(self: Arc<Self>, request: Request, peer: SocketAddr) -> Response<Body> {
        let methods = if request.uri().path() == MESSAGE_PATH {
            "POST, OPTIONS"
        } else {
            "GET, OPTIONS"
        };
        let origin = match server::screen(&self.guard, request.method(), request.headers(), methods)
        {
            Ok(origin) => origin,
            Err(answer) => return answer,
        };
        let response = match (request.uri().path(), request.method()) {
            (SSE_PATH, &Method::GET) => self.open(peer),
            (MESSAGE_PATH, &Method::POST) => self.post(request).await,
            (SSE_PATH, _) => server::method_not_allowed("GET, OPTIONS"),
            (MESSAGE_PATH, _) => server::method_not_allowed("POST, OPTIONS"),
            (path, _) => server::error_status(
                StatusCode::NOT_FOUND,
                jsonrpc::TRANSPORT_ERROR,
                &format!("nothing at {path}; the SSE stream is at {SSE_PATH}"),
            ),
        };
        server::with_cors(response, origin.as_ref())
    }
}

fn query_session(request: &Request) -> Option<String> {
    request.uri().query()?.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        (name == "sessionId").then(|| value.to_owned())
    })
}

impl State {
    /// Ends the sessions whose client never got past `initialize` in time.
    fn sweep(&self) {
        let timeout = self.limits.uninitialized_session_timeout;
        let expired = lock(&self.sessions).select(|session| {
            !session.initialized.load(Ordering::SeqCst) && session.opened.elapsed() >= timeout
        });
        for session in expired {
            log(
                LogLevel::Info,
                &format!(
                    "SSE session {} expired: not initialized within {} ms",
                    session.id,
                    timeout.as_millis()
                ),
            );
            session.end("the session was not initialized in time");
        }
    }

    fn open(self: &Arc<Self>, peer: SocketAddr) -> Response<Body> {
        let unavailable = |why: &str| {
            server::error_status(
                StatusCode::SERVICE_UNAVAILABLE,
                jsonrpc::TRANSPORT_ERROR,
                why,
            )
        };
        let id = match random_id() {
            Ok(id) => id,
            Err(error) => {
                return server::error_status(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    jsonrpc::TRANSPORT_ERROR,
                    &error,
                );
            }
        };
        let (stream, rx) = unbounded_channel();
        let endpoint = format!("{MESSAGE_PATH}?sessionId={id}");
        let _ = stream.send(Bytes::from(encode_event(Some("endpoint"), &endpoint)));
        let (sender, host_inbox) = inbox_with_fd();
        let session = Arc::new(Session {
            id: id.clone(),
            inbox: sender,
            stream: Mutex::new(Some(stream.clone())),
            ended: AtomicBool::new(false),
            initialized: AtomicBool::new(false),
            opened: Instant::now(),
            state: Arc::downgrade(self),
        });
        let inserted =
            lock(&self.sessions).insert(id.clone(), peer.ip(), session.clone(), &self.limits);
        if let Err(full) = inserted {
            return sessions::refused(full, peer.ip());
        }
        let accepted = Accepted {
            pump: Box::new(SessionPump {
                session: session.clone(),
                inbox: host_inbox,
            }),
            peer: peer.to_string(),
            session: id.clone(),
        };
        let delivered = lock(&self.accept_tx)
            .as_ref()
            .is_some_and(|tx| tx.send(accepted).is_ok());
        if !delivered {
            session.end("the listener is closing");
            return unavailable("the server is shutting down");
        }
        drop(stream);
        log(
            LogLevel::Info,
            &format!("SSE session {id} opened from {peer}"),
        );
        // The session lasts as long as the client keeps its stream.
        let watched = session.clone();
        server::sse_response_with(
            rx,
            Some(Box::new(move || watched.end("the client disconnected"))),
        )
    }

    async fn post(&self, request: Request) -> Response<Body> {
        let Some(id) = query_session(&request) else {
            return server::error_status(
                StatusCode::BAD_REQUEST,
                jsonrpc::TRANSPORT_ERROR,
                "Bad Request: the sessionId query parameter is required",
            );
        };
        let Some(session) = lock(&self.sessions).get(&id).cloned() else {
            return server::error_status(
                StatusCode::NOT_FOUND,
                jsonrpc::SESSION_NOT_FOUND,
                "Session not found: it ended or never existed; open a new one with GET /sse",
            );
        };
        let (parts, body) = request.into_parts();
        let headers: &HeaderMap = &parts.headers;
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
        let messages = jsonrpc::split(value);
        if messages.is_empty() {
            return server::error_status(
                StatusCode::BAD_REQUEST,
                jsonrpc::INVALID_REQUEST,
                "Invalid Request: an empty batch",
            );
        }
        for message in &messages {
            match jsonrpc::classify(message) {
                Err(why) => {
                    return server::error_status(
                        StatusCode::BAD_REQUEST,
                        jsonrpc::INVALID_REQUEST,
                        &format!("Invalid Request: {why}"),
                    );
                }
                Ok(Kind::Request { method, .. }) if method == "initialize" => {}
                Ok(_) => session.initialized.store(true, Ordering::SeqCst),
            }
        }
        for message in messages {
            session.inbox.message(message.to_string());
        }
        server::text(StatusCode::ACCEPTED, "Accepted")
    }
}

struct Session {
    id: String,
    inbox: InboxSender,
    stream: Mutex<Option<UnboundedSender<Bytes>>>,
    ended: AtomicBool,
    /// Whether the client sent anything past `initialize`.
    initialized: AtomicBool,
    opened: Instant,
    state: Weak<State>,
}

impl Session {
    fn end(&self, reason: &str) {
        if self.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(state) = self.state.upgrade() {
            lock(&state.sessions).remove(&self.id);
        }
        lock(&self.stream).take();
        self.inbox.close(reason);
    }
}

struct SessionPump {
    session: Arc<Session>,
    inbox: Inbox,
}

impl Pump for SessionPump {
    fn send(&self, message: &str) -> Result<(), String> {
        let stream = lock(&self.session.stream).clone();
        let Some(stream) = stream else {
            return Err(format!("SSE session {} has ended", self.session.id));
        };
        let frame = Bytes::from(encode_event(Some("message"), message));
        stream
            .send(frame)
            .map_err(|_| format!("SSE session {}: the client disconnected", self.session.id))
    }

    fn recv(&self, timeout: Duration) -> Received {
        self.inbox.recv(timeout)
    }

    fn close(&self) {
        self.session.end("closed by Runbyte");
        self.inbox.close_now("closed by Runbyte");
    }

    fn readable_fd(&self) -> Option<i32> {
        self.inbox.readable_fd()
    }

    /// `send` queues on the stream's unbounded channel.
    fn sends_without_blocking(&self) -> bool {
        true
    }
}
