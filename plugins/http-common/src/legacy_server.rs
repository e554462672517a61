//! The 2024-11-05 HTTP+SSE server: the `sse` plugin's listener (here so that the `http`
//! plugin's tests can exercise its SSE fallback against it).
//!
//! `GET /sse` opens a session: the stream's first event is `endpoint`, with
//! `/message?sessionId=<id>` (128 random bits), and every server message follows as an
//! `event: message`. `POST /message?sessionId=<id>` hands one message (or a batch) to that
//! session and is answered 202; an unknown or ended session is 404, a missing id 400. The
//! session lasts as long as its stream: when the client goes away, the host's `recv` answers
//! `Closed`.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    time::Duration,
};

use crate::{
    Inbox, InboxSender, PrivateRuntime, Tasks, inbox, jsonrpc, lock,
    security::{Guard, random_id},
    server::{self, AcceptQueue, Body, Handler, Request},
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
/// Sessions open at once; a GET beyond that is answered 503.
const MAX_SESSIONS: usize = 1024;

/// Starts the listener on the transport's runtime.
pub fn listen(runtime: Arc<PrivateRuntime>, options: &str) -> Result<Box<dyn Listener>, String> {
    let prepared = server::prepare(options)?;
    let tasks = Arc::new(Tasks::new(runtime.handle().clone()));
    let (accept_tx, accept_rx) = mpsc::channel();
    let state = Arc::new(State {
        guard: prepared.guard,
        max_body: prepared.max_body,
        sessions: Mutex::new(HashMap::new()),
        accept_tx: Mutex::new(Some(accept_tx)),
    });
    server::serve(prepared.listener, tasks.clone(), state.clone())?;
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
        let sessions: Vec<_> = lock(&self.state.sessions)
            .drain()
            .map(|(_, session)| session)
            .collect();
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
    max_body: usize,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
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
        let (sender, host_inbox) = inbox::inbox();
        let session = Arc::new(Session {
            id: id.clone(),
            inbox: sender,
            stream: Mutex::new(Some(stream.clone())),
            ended: AtomicBool::new(false),
            state: Arc::downgrade(self),
        });
        {
            let mut sessions = lock(&self.sessions);
            if sessions.len() >= MAX_SESSIONS {
                return unavailable(&format!("too many sessions (at most {MAX_SESSIONS})"));
            }
            sessions.insert(id.clone(), session.clone());
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
        let body = match server::read_body(headers, body, self.max_body).await {
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
            if let Err(why) = jsonrpc::classify(message) {
                return server::error_status(
                    StatusCode::BAD_REQUEST,
                    jsonrpc::INVALID_REQUEST,
                    &format!("Invalid Request: {why}"),
                );
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
}
