//! One streamable HTTP session: the client messages it hands the host, and the routing of the
//! host's messages to the session's streams (see the rules in [`super`]).

// Refusals are returned as the HTTP answer itself (`Err(Response)`), as in `server`.
#![allow(clippy::result_large_err)]

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::{
        Arc, Mutex, Weak,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use hyper::Response;
use runbyte_http_common::{
    Inbox, InboxSender, inbox, inbox_with_fd,
    jsonrpc::{self, Kind},
    limits::ListenLimits,
    lock,
    server::Body,
    sessions::Activity,
    sse::encode_event,
};
use runbyte_plugin_api::{
    LogLevel, log,
    transport::{Pump, Received},
};
use serde_json::Value;
use tokio::sync::{
    mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel},
    oneshot,
};

use super::{State, invalid, session_not_found};

/// Server messages kept for a standalone stream that is not open yet.
const MAX_BACKLOG: usize = 1000;

/// What a POST with requests answers with.
pub(super) enum RequestStream {
    Sse(UnboundedReceiver<Bytes>),
    Json(oneshot::Receiver<String>),
}

pub(super) struct Session {
    pub(super) id: String,
    /// Client messages for the host.
    inbox: InboxSender,
    /// The host's end of `inbox`, until the session is accepted.
    host_inbox: Mutex<Option<Inbox>>,
    routes: Mutex<Routes>,
    ended: AtomicBool,
    activity: Mutex<Activity>,
    state: Weak<State>,
}

/// A request or stream of a session in progress: the session is not idle while one exists.
pub(super) struct Busy(Arc<Session>);

impl Drop for Busy {
    fn drop(&mut self) {
        lock(&self.0.activity).end();
    }
}

#[derive(Default)]
struct Routes {
    /// Open request streams by number; a higher number is newer.
    streams: HashMap<u64, RequestSink>,
    next_stream: u64,
    /// Request id (as a key) → the stream waiting for its response.
    by_request: HashMap<String, u64>,
    /// Progress token (as a key) → the stream of the request that set it.
    by_token: HashMap<String, u64>,
    standalone: Option<UnboundedSender<Bytes>>,
    backlog: VecDeque<String>,
    /// The id of the `initialize` request, to read the negotiated revision from its response.
    init_request: Option<String>,
    negotiated: Option<String>,
}

struct RequestSink {
    kind: SinkKind,
    waiting: HashSet<String>,
    tokens: Vec<String>,
}

enum SinkKind {
    Sse(UnboundedSender<Bytes>),
    Json {
        done: Option<oneshot::Sender<String>>,
        responses: Vec<String>,
        batch: bool,
    },
}

fn sse_frame(message: &str) -> Bytes {
    Bytes::from(encode_event(Some("message"), message))
}

impl Session {
    pub(super) fn new(id: String, state: Weak<State>) -> Self {
        let (inbox, host_inbox) = inbox_with_fd();
        Self {
            id,
            inbox,
            host_inbox: Mutex::new(Some(host_inbox)),
            routes: Mutex::new(Routes::default()),
            ended: AtomicBool::new(false),
            activity: Mutex::new(Activity::default()),
            state,
        }
    }

    /// Marks a request or stream in progress until the guard is dropped.
    pub(super) fn busy(self: &Arc<Self>) -> Busy {
        lock(&self.activity).begin();
        Busy(self.clone())
    }

    /// The client sent something after `initialize`.
    pub(super) fn initialized(&self) {
        lock(&self.activity).initialized();
    }

    /// The timeout this session has been idle past, if any.
    pub(super) fn idle_expiry(&self, limits: &ListenLimits, now: Instant) -> Option<Duration> {
        lock(&self.activity).expired(limits, now)
    }

    /// Notes the id of the `initialize` request, to read the negotiated revision from its
    /// response.
    pub(super) fn expect_initialize_response(&self, request: Option<String>) {
        lock(&self.routes).init_request = request;
    }

    pub(super) fn to_host(&self, message: Value) {
        self.inbox.message(message.to_string());
    }

    fn take_inbox(&self) -> Inbox {
        // Taken once, by the POST that created the session; a fresh closed inbox otherwise.
        lock(&self.host_inbox).take().unwrap_or_else(|| {
            let (_, inbox) = inbox::inbox();
            inbox.close_now("the session was already accepted");
            inbox
        })
    }

    pub(super) fn negotiated(&self) -> Option<String> {
        lock(&self.routes).negotiated.clone()
    }

    pub(super) fn open_request_stream(
        &self,
        requests: Vec<String>,
        tokens: Vec<String>,
        sse: bool,
        batch: bool,
    ) -> Result<RequestStream, Response<Body>> {
        let mut routes = lock(&self.routes);
        // Checked under the lock `end` takes the routes with, so no stream outlives the session.
        if self.ended.load(Ordering::SeqCst) {
            return Err(session_not_found());
        }
        let unique: HashSet<&String> = requests.iter().collect();
        if unique.len() != requests.len() {
            return Err(invalid(
                "Invalid Request: a request id appears twice in this batch",
            ));
        }
        if let Some(taken) = requests
            .iter()
            .find(|id| routes.by_request.contains_key(*id))
        {
            return Err(invalid(&format!(
                "Invalid Request: request id {taken} is already in use in this session"
            )));
        }
        let number = routes.next_stream;
        routes.next_stream += 1;
        for id in &requests {
            routes.by_request.insert(id.clone(), number);
        }
        for token in &tokens {
            routes.by_token.insert(token.clone(), number);
        }
        let (kind, stream) = if sse {
            let (tx, rx) = unbounded_channel();
            (SinkKind::Sse(tx), RequestStream::Sse(rx))
        } else {
            let (tx, rx) = oneshot::channel();
            (
                SinkKind::Json {
                    done: Some(tx),
                    responses: Vec::new(),
                    batch,
                },
                RequestStream::Json(rx),
            )
        };
        let waiting = requests.into_iter().collect();
        routes.streams.insert(
            number,
            RequestSink {
                kind,
                waiting,
                tokens,
            },
        );
        Ok(stream)
    }

    pub(super) fn open_standalone(&self) -> Option<UnboundedReceiver<Bytes>> {
        let mut routes = lock(&self.routes);
        if self.ended.load(Ordering::SeqCst) {
            return None;
        }
        let (tx, rx) = unbounded_channel();
        while let Some(message) = routes.backlog.pop_front() {
            let _ = tx.send(sse_frame(&message));
        }
        // Replacing the sender ends the previous stream.
        routes.standalone = Some(tx);
        Some(rx)
    }

    /// Routes one message from the host to the stream it belongs on.
    fn route(&self, message: Value) {
        let text = message.to_string();
        let kind = match jsonrpc::classify(&message) {
            Ok(kind) => kind,
            Err(why) => {
                log(
                    LogLevel::Warn,
                    &format!(
                        "{}: dropped a message from the host: {why}",
                        runbyte_http_common::security::session_tag(&self.id)
                    ),
                );
                return;
            }
        };
        let mut failed_initialize = false;
        {
            let mut routes = lock(&self.routes);
            match kind {
                Kind::Response { id } => {
                    let key = jsonrpc::id_key(&id);
                    if routes.init_request.as_ref() == Some(&key) {
                        routes.init_request = None;
                        routes.negotiated = message
                            .pointer("/result/protocolVersion")
                            .and_then(Value::as_str)
                            .map(str::to_owned);
                        failed_initialize = message.get("error").is_some();
                    }
                    match routes.by_request.remove(&key) {
                        Some(number) => routes.respond(number, &key, text),
                        None => log(
                            LogLevel::Debug,
                            &format!(
                                "{}: no stream waits for the response to {key}; dropped",
                                runbyte_http_common::security::session_tag(&self.id)
                            ),
                        ),
                    }
                }
                Kind::Notification { method } if method == "notifications/progress" => {
                    let token = message
                        .pointer("/params/progressToken")
                        .map(jsonrpc::id_key);
                    let number = token.and_then(|token| routes.by_token.get(&token).copied());
                    let sent = number.is_some_and(|number| routes.send_on(number, &text));
                    if !sent {
                        routes.unrelated(text, false);
                    }
                }
                Kind::Notification { method } => {
                    routes.unrelated(text, method == "notifications/message")
                }
                Kind::Request { .. } => routes.unrelated(text, true),
            }
        }
        if failed_initialize {
            self.end("initialize failed");
        }
    }

    /// Ends the session: every stream closes, later requests get 404, the host's `recv` answers
    /// `Closed(reason)` after what the client already sent.
    pub(super) fn end(&self, reason: &str) {
        if self.ended.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(state) = self.state.upgrade() {
            lock(&state.sessions).remove(&self.id);
        }
        let routes = std::mem::take(&mut *lock(&self.routes));
        drop(routes);
        self.inbox.close(reason);
    }
}

impl Routes {
    /// Delivers a response on its stream; a stream whose requests are all answered ends.
    fn respond(&mut self, number: u64, key: &str, text: String) {
        let Some(sink) = self.streams.get_mut(&number) else {
            return;
        };
        sink.waiting.remove(key);
        match &mut sink.kind {
            SinkKind::Sse(tx) => {
                let _ = tx.send(sse_frame(&text));
            }
            SinkKind::Json { responses, .. } => responses.push(text),
        }
        if !sink.waiting.is_empty() {
            return;
        }
        let Some(sink) = self.streams.remove(&number) else {
            return;
        };
        for token in &sink.tokens {
            if self.by_token.get(token) == Some(&number) {
                self.by_token.remove(token);
            }
        }
        if let SinkKind::Json {
            done: Some(done),
            responses,
            batch,
        } = sink.kind
        {
            let body = if batch {
                format!("[{}]", responses.join(","))
            } else {
                responses.concat()
            };
            let _ = done.send(body);
        }
    }

    /// Sends on a request's SSE stream; `false` when it is JSON or gone.
    fn send_on(&self, number: u64, text: &str) -> bool {
        match self.streams.get(&number).map(|sink| &sink.kind) {
            Some(SinkKind::Sse(tx)) => tx.send(sse_frame(text)).is_ok(),
            _ => false,
        }
    }

    /// A server message tied to no request: see the module comment for where it goes.
    fn unrelated(&mut self, text: String, prefer_request_stream: bool) {
        let newest = self
            .streams
            .iter()
            .filter(|(_, sink)| matches!(&sink.kind, SinkKind::Sse(tx) if !tx.is_closed()))
            .map(|(number, _)| *number)
            .max();
        let try_newest = |routes: &Self| newest.is_some_and(|number| routes.send_on(number, &text));
        let try_standalone = |routes: &Self| {
            routes
                .standalone
                .as_ref()
                .is_some_and(|tx| tx.send(sse_frame(&text)).is_ok())
        };
        let order = match prefer_request_stream {
            true => [false, true],
            false => [true, false],
        };
        let sent = order.into_iter().any(|standalone| match standalone {
            true => try_standalone(self),
            false => try_newest(self),
        });
        if !sent {
            if self.backlog.len() >= MAX_BACKLOG {
                self.backlog.pop_front();
                log(
                    LogLevel::Warn,
                    "no stream open for server messages; dropped the oldest waiting one",
                );
            }
            self.backlog.push_back(text);
        }
    }
}

/// The host's side of one session.
pub(super) struct SessionPump {
    session: Arc<Session>,
    inbox: Inbox,
}

impl SessionPump {
    /// The host's pump for `session`; made once, when the session is accepted.
    pub(super) fn new(session: &Arc<Session>) -> Self {
        Self {
            session: session.clone(),
            inbox: session.take_inbox(),
        }
    }
}

impl Pump for SessionPump {
    fn send(&self, message: &str) -> Result<(), String> {
        if self.session.ended.load(Ordering::SeqCst) {
            return Err(format!(
                "{} has ended",
                runbyte_http_common::security::session_tag(&self.session.id)
            ));
        }
        let value: Value = serde_json::from_str(message)
            .map_err(|error| format!("the message to send is not JSON: {error}"))?;
        for message in jsonrpc::split(value) {
            self.session.route(message);
        }
        Ok(())
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

    /// `send` routes onto unbounded channels under short locks: it never waits for a client.
    fn sends_without_blocking(&self) -> bool {
        true
    }
}
