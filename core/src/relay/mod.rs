//! Relaying what a tool (or a policy) asks of the user to the client of the execution that made
//! the call, in either protocol era.
//!
//! A downstream server asks with `elicitation/create`, `sampling/createMessage` or `roots/list`:
//! as a request on its connection during the call (2025-11-25 and earlier; the Hub's client
//! handler receives it), or as an `input_required` result of `tools/call` (2026-07-28; the Hub
//! answers and retries). A policy asks for approval (`{"allow": false, "ask": "..."}`). Either
//! way the question reaches the execution's [`Asker`]:
//! - a legacy client session: [`SessionAsker`] sends it as a server-to-client request;
//! - a 2026-07-28 client: [`RoundTrip`] ends the `execute_code` request with an `input_required`
//!   result whose `requestState` is signed; the client's retry carries the answer and the
//!   execution, which kept running in the meantime, goes on ([`Paused`] holds it);
//! - `runbyte exec`, or a client that did not declare the capability: the question is refused,
//!   and the program gets an error that names the tool and what was asked.
//!
//! The wait for an answer is bounded by the execution's own time limit (`timeout-ms`) and the
//! call's timeout: a person who takes longer gets the execution's timeout, as any slow call does.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::{
    RoleServer,
    model::{
        ClientCapabilities, ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest,
        ServerRequest,
    },
    service::Peer,
};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

mod paused;

pub use paused::{Paused, ResumeError, Resumed, Waiting};

/// What can be asked: an `elicitation/create`, `sampling/createMessage` or `roots/list` request.
pub type Question = InputRequest;

/// Where what a server says during one call goes, besides its result: its progress and its
/// log messages, for a client that made the call directly and asked for them.
// Logging is deprecated from 2026-07-28 (SEP-2577); the revisions Runbyte serves have it.
#[allow(deprecated)]
pub trait Notices: Send + Sync {
    /// The server's progress on the call (`notifications/progress`), token aside.
    fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> BoxFuture<'static, ()>;
    /// A log message the server sent during the call (`notifications/message`).
    fn log(&self, message: rmcp::model::LoggingMessageNotificationParam) -> BoxFuture<'static, ()>;
    /// The least severe level the client asked for (`None`: it wants no log messages), which a
    /// 2026-07-28 server is told in the call's `_meta`.
    fn log_level(&self) -> Option<rmcp::model::LoggingLevel>;
}

/// Whoever answers an execution's questions: the client that started it.
pub trait Asker: Send + Sync {
    /// Asks; the answer is the result of the question's method (`ElicitResult`,
    /// `CreateMessageResult`, `ListRootsResult`) as JSON. `Err` says why nobody can answer.
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>>;

    /// Asks a question that a re-run of the program would ask again at the same call (a
    /// policy's approval, a 2026-07-28 server's `input_required`): whoever asks for a call
    /// ([`CallAsker`]) may then make the execution resumable anywhere, by replay.
    fn ask_again_able(
        &self,
        question: Question,
        origin: Origin,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let _ = origin;
        self.ask(question)
    }

    /// Asks with what a replay needs to resume the execution at this question.
    fn ask_at(
        &self,
        question: Question,
        point: Point,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let _ = point;
        self.ask(question)
    }
}

/// Where a question that a re-run would ask again comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// A policy's `ask` verdict, before the call is sent.
    Approval,
    /// `pin = "ask"`: a tool's changed definition, put to the user before its first call.
    PinApproval,
    /// A 2026-07-28 server's `input_required` result (the call did not run yet).
    InputRequired,
}

/// A tool call an execution made, and what came of it, as a replay returns it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Recorded {
    pub server: String,
    pub tool: String,
    pub arguments: Value,
    pub result: Result<Value, String>,
}

/// Which call asked a question a replay answers, and what it asked: the user's answer goes
/// only to a call of a replay for which all four are the same. The arguments and the question
/// are SHA-256 digests of their canonical JSON ([`digest`]), so the identity compares exactly
/// without keeping either twice.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Asking {
    pub server: String,
    pub tool: String,
    /// [`digest`] of the call's arguments.
    pub arguments: String,
    /// [`digest`] of the question asked (for an approval: the policy's question, the call's
    /// server, tool and arguments as shown to the user).
    pub question: String,
}

impl Asking {
    /// The identity of a call of `server`/`tool` with `arguments` (a digest, see [`digest`])
    /// that asked `question`.
    pub fn of(server: &str, tool: &str, arguments: String, question: &Question) -> Self {
        Asking {
            server: server.to_owned(),
            tool: tool.to_owned(),
            arguments,
            question: serde_json::to_value(question).map_or_else(|_| String::new(), |q| digest(&q)),
        }
    }
}

/// SHA-256 of `value`'s canonical JSON, in hex: object keys sorted (by their UTF-8 bytes), no
/// whitespace, strings escaped as `serde_json` escapes them, numbers as `serde_json` writes
/// them (so `1` and `1.0` differ, as they do to a tool). Two values have the same digest when
/// and only when they are the same JSON value, whatever order their keys came in.
pub fn digest(value: &Value) -> String {
    let mut hashing = Hashing(ring::digest::Context::new(&ring::digest::SHA256));
    write_canonical(value, &mut hashing);
    hex(hashing.0.finish().as_ref())
}

/// `value`'s canonical JSON (see [`digest`]) as text: what an approval shows of a call's
/// arguments, so that the same arguments always read (and digest) the same.
pub fn canonical(value: &Value) -> String {
    let mut text = Vec::new();
    write_canonical(value, &mut text);
    String::from_utf8(text).unwrap_or_default()
}

struct Hashing(ring::digest::Context);

impl std::io::Write for Hashing {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes `value`'s canonical JSON to `out` (writers that cannot fail: a hasher, a vector).
fn write_canonical(value: &Value, out: &mut impl std::io::Write) {
    fn walk(value: &Value, out: &mut impl std::io::Write) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort_unstable();
                let _ = out.write_all(b"{");
                for (n, key) in keys.into_iter().enumerate() {
                    if n > 0 {
                        let _ = out.write_all(b",");
                    }
                    let _ = serde_json::to_writer(&mut *out, key);
                    let _ = out.write_all(b":");
                    walk(&map[key], out);
                }
                let _ = out.write_all(b"}");
            }
            Value::Array(items) => {
                let _ = out.write_all(b"[");
                for (n, item) in items.iter().enumerate() {
                    if n > 0 {
                        let _ = out.write_all(b",");
                    }
                    walk(item, out);
                }
                let _ = out.write_all(b"]");
            }
            scalar => {
                let _ = serde_json::to_writer(&mut *out, scalar);
            }
        }
    }
    walk(value, out);
}

/// `bytes` in lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(text, "{byte:02x}");
    }
    text
}

/// What resuming an execution by replay needs: the calls it made before the question (by
/// their place in the order the program made them), and the call that asked.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Point {
    /// The calls made so far, by index.
    pub recorded: std::collections::BTreeMap<u64, Recorded>,
    /// The index of the call that asked, and how it asked.
    pub index: u64,
    pub origin: Origin,
    /// Which call asked, and what: the answer goes to no other.
    pub asking: Asking,
    /// `Math.random`'s seed in the run that asked.
    #[serde(default)]
    pub seed: u64,
    /// The clock readings and event-loop turns the program observed before it asked.
    #[serde(default, skip_serializing_if = "crate::sandbox::Observed::is_empty")]
    pub observed: crate::sandbox::Observed,
}

/// The method a question calls.
pub fn method_of(question: &Question) -> &'static str {
    match question {
        InputRequest::CreateMessage(_) => "sampling/createMessage",
        InputRequest::Elicitation(_) => "elicitation/create",
        InputRequest::ListRoots(_) => "roots/list",
        _ => "an unknown request",
    }
}

/// Whether `capabilities` let a client answer `question`, and if not, why.
pub fn answerable(capabilities: &ClientCapabilities, question: &Question) -> Result<(), String> {
    let (declared, capability) = match question {
        InputRequest::CreateMessage(_) => (capabilities.sampling.is_some(), "sampling"),
        InputRequest::Elicitation(_) => (capabilities.elicitation.is_some(), "elicitation"),
        InputRequest::ListRoots(_) => (capabilities.roots.is_some(), "roots"),
        _ => (false, "an unknown capability"),
    };
    if declared {
        Ok(())
    } else {
        Err(format!(
            "the client did not declare the `{capability}` capability, so it cannot answer `{}`",
            method_of(question)
        ))
    }
}

/// An approval question for a policy's `ask` verdict: a form with one boolean, `approve`. The
/// arguments are shown in canonical JSON (keys sorted): the same call always asks the same
/// question, whatever order a program built its arguments in.
pub fn approval(question: &str, server: &str, tool: &str, arguments: &Value) -> Question {
    let mut shown = canonical(arguments);
    if shown.len() > 2000 {
        let mut cut = 2000;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push('…');
    }
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": {"approve": {"type": "boolean", "title": "Approve this call", "default": true}},
        "required": ["approve"],
    }))
    .unwrap_or_else(|_| ElicitationSchema::builder().build_unchecked());
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("{question}\n\nRunbyte is about to call `{server}/{tool}` with {shown}"),
        requested_schema: schema,
    };
    InputRequest::Elicitation(ElicitRequest::new(params))
}

/// Whether an answer to [`approval`] approves: only an accepted form whose `approve` is the
/// JSON `true`. Anything else (declined, cancelled, `approve` missing, `"true"`, `1`, `null`)
/// is a refusal, and `Err` says how the answer read.
pub fn approved(answer: &Value) -> Result<(), String> {
    let action = &answer["action"];
    if action != "accept" {
        return Err(match action.as_str() {
            Some(action) => format!("the user answered `{action}`"),
            None => "the answer has no `action`".to_owned(),
        });
    }
    match answer["content"].get("approve") {
        Some(Value::Bool(true)) => Ok(()),
        Some(Value::Bool(false)) => Err("the user answered `approve: false`".to_owned()),
        Some(other) => {
            let shown: String = other.to_string().chars().take(40).collect();
            Err(format!(
                "the answer's `approve` is `{shown}`, not the boolean true, so it does not approve"
            ))
        }
        None => Err("the answer has no `approve`, so it does not approve".to_owned()),
    }
}

/// Asks a legacy client session with a server-to-client request.
pub struct SessionAsker {
    peer: Peer<RoleServer>,
    /// The 2025-11-25 task the questions are for: each names it in its `_meta`.
    task: Option<String>,
}

impl SessionAsker {
    /// The asker of the session whose peer this is; `None` for a 2026-07-28 connection, which
    /// forbids server-to-client requests.
    pub fn of(peer: &Peer<RoleServer>) -> Option<Self> {
        peer.peer_info()?;
        Some(SessionAsker {
            peer: peer.clone(),
            task: None,
        })
    }

    /// Asks for task `task` (2025-11-25): each question carries
    /// `_meta["io.modelcontextprotocol/related-task"]`.
    pub fn for_task(self, task: String) -> Self {
        SessionAsker {
            task: Some(task),
            ..self
        }
    }
}

/// The `_meta` key that ties a message to a 2025-11-25 task.
pub const RELATED_TASK_META: &str = "io.modelcontextprotocol/related-task";

impl Asker for SessionAsker {
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>> {
        let peer = self.peer.clone();
        let related = self.task.as_ref().map(|task| {
            let mut meta = serde_json::Map::new();
            meta.insert(RELATED_TASK_META.to_owned(), json!({"taskId": task}));
            rmcp::model::MetaObject(meta)
        });
        Box::pin(async move {
            let capabilities = peer
                .peer_info()
                .map(|info| info.capabilities.clone())
                .unwrap_or_default();
            answerable(&capabilities, &question)?;
            let method = method_of(&question);
            let mut request = match question {
                InputRequest::CreateMessage(request) => {
                    ServerRequest::CreateMessageRequest(request)
                }
                InputRequest::Elicitation(request) => ServerRequest::ElicitRequest(request),
                InputRequest::ListRoots(request) => ServerRequest::ListRootsRequest(request),
                _ => return Err("Runbyte cannot relay this kind of request".to_owned()),
            };
            if let Some(related) = related {
                let extensions = match &mut request {
                    ServerRequest::CreateMessageRequest(request) => Some(&mut request.extensions),
                    ServerRequest::ElicitRequest(request) => Some(&mut request.extensions),
                    ServerRequest::ListRootsRequest(request) => Some(&mut request.extensions),
                    _ => None,
                };
                if let Some(extensions) = extensions {
                    extensions.insert(related);
                }
            }
            let answer = peer
                .send_request(request)
                .await
                .map_err(|error| format!("the client did not answer `{method}`: {error}"))?;
            serde_json::to_value(answer).map_err(|error| error.to_string())
        })
    }
}

/// What an execution run for a 2026-07-28 client tells the request waiting on it.
pub enum Event<T> {
    /// A question, where its answer goes, and (when it can resume anywhere) its replay point.
    Asked {
        question: Box<Question>,
        answer: oneshot::Sender<Result<Value, String>>,
        point: Option<Box<Point>>,
    },
    /// The execution ended with this.
    Done(T),
}

/// Asks a 2026-07-28 client: the question goes to whichever request is waiting on the
/// execution, which ends with `input_required`.
pub struct RoundTrip<T> {
    capabilities: ClientCapabilities,
    events: mpsc::Sender<Event<T>>,
}

impl<T: Send + 'static> RoundTrip<T> {
    /// An asker for an execution whose client declared `capabilities`, and the receiving end
    /// of its events.
    pub fn new(capabilities: ClientCapabilities) -> (Self, mpsc::Receiver<Event<T>>) {
        let (events, receiver) = mpsc::channel(4);
        (
            RoundTrip {
                capabilities,
                events,
            },
            receiver,
        )
    }

    /// The sender the execution reports its end on.
    pub fn done_sender(&self) -> mpsc::Sender<Event<T>> {
        self.events.clone()
    }
}

impl<T: Send + 'static> RoundTrip<T> {
    fn send(
        &self,
        question: Question,
        point: Option<Point>,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let (capabilities, events) = (self.capabilities.clone(), self.events.clone());
        Box::pin(async move {
            answerable(&capabilities, &question)?;
            let (answer, answered) = oneshot::channel();
            events
                .send(Event::Asked {
                    question: Box::new(question),
                    answer,
                    point: point.map(Box::new),
                })
                .await
                .map_err(|_| "the client's request has ended".to_owned())?;
            answered
                .await
                .map_err(|_| "the client did not come back with an answer".to_owned())?
        })
    }
}

impl<T: Send + 'static> Asker for RoundTrip<T> {
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>> {
        self.send(question, None)
    }

    fn ask_at(
        &self,
        question: Question,
        point: Point,
    ) -> BoxFuture<'static, Result<Value, String>> {
        self.send(question, Some(point))
    }
}

/// The executions a downstream connection's calls are making, for the questions its server
/// sends during them (2025-11-25 and earlier).
#[derive(Default, Clone)]
pub struct Callers {
    calls: Arc<Mutex<Vec<Arc<Caller>>>>,
    /// The last calls that ended, for progress their server sent just before its answer that
    /// rmcp's tasks hand on just after it (at most [`ENDED`], for [`LATE`]).
    ended: Arc<Mutex<std::collections::VecDeque<Ended>>>,
    /// Progress read from the connection and not yet passed on.
    unsent: Arc<Unsent>,
}

/// Progress the connection has read and [`Callers::progress`] has not yet passed on, by token:
/// what an answer read after it waits for, so that it does not overtake the server's last
/// reports (rmcp hands each notification to a task of its own, answers straight to the
/// caller).
#[derive(Default)]
struct Unsent {
    counts: Mutex<std::collections::HashMap<rmcp::model::ProgressToken, usize>>,
    /// Log messages read and not yet passed on (they carry no token: an answer waits for all).
    logs: std::sync::atomic::AtomicUsize,
    sent: tokio::sync::Notify,
    /// Progress on a token no call held yet: rmcp gives a request its token only as it sends
    /// it, so a server that reports at once can be read before the call records the token
    /// ([`Caller::sent_with`] passes these on). At most [`EARLY`], each for [`LATE`].
    early: Mutex<std::collections::VecDeque<Early>>,
}

/// Progress kept for a call about to record its token: when it came, the token, and the
/// report (progress, total, message).
type Early = (
    std::time::Instant,
    rmcp::model::ProgressToken,
    f64,
    Option<f64>,
    Option<String>,
);

/// How many reports on tokens no call holds yet are kept, and the most bytes of their messages.
const EARLY: usize = 64;
const EARLY_BYTES: usize = 64 * 1024;

fn early_bytes(early: &std::collections::VecDeque<Early>) -> usize {
    early
        .iter()
        .map(|entry| entry.4.as_ref().map_or(0, String::len))
        .sum()
}

/// The most tokens [`Unsent`] counts: past it (a server sending progress on tokens no call
/// holds faster than it is passed on), it forgets them, and answers stop waiting for them.
const MAX_UNSENT: usize = 1024;

/// The longest an answer waits for the progress and log messages read before it to be passed
/// on. It waits only while some are pending, and each is passed on as soon as the client's
/// connection takes it, so the bound matters only on a machine loaded far past what the
/// tests see; when it runs out, a warning says so.
const SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

impl Unsent {
    fn pending(&self, token: &rmcp::model::ProgressToken) -> bool {
        self.counts
            .lock()
            .is_ok_and(|counts| counts.get(token).is_some_and(|n| *n > 0))
    }

    fn logs_pending(&self) -> bool {
        self.logs.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    fn log_sent(&self) {
        let _ = self.logs.fetch_update(
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
            |n| n.checked_sub(1),
        );
        self.sent.notify_waiters();
    }

    fn sent(&self, token: &rmcp::model::ProgressToken) {
        if let Ok(mut counts) = self.counts.lock()
            && let Some(n) = counts.get_mut(token)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(token);
            }
        }
        self.sent.notify_waiters();
    }
}

/// A call that ended, and when.
type Ended = (std::time::Instant, Arc<Caller>);

/// How many ended calls' progress is still passed on.
const ENDED: usize = 16;
/// For how long after its call ended progress is still passed on.
const LATE: std::time::Duration = std::time::Duration::from_secs(1);

/// One call in flight: its execution's asker, where its progress and logs go, the progress
/// token it was sent with, and whether a question was refused.
pub struct Caller {
    asker: Option<Arc<dyn Asker>>,
    notices: Option<Arc<dyn Notices>>,
    token: Mutex<Option<rmcp::model::ProgressToken>>,
    refused: Mutex<Option<String>>,
    unsent: Arc<Unsent>,
}

impl Caller {
    /// Records the progress token the call's request went downstream with (each round of a
    /// 2026-07-28 call is a request of its own): its server's progress reaches this call's
    /// [`Notices`] and no other's.
    ///
    /// Progress its server sent before that (read while rmcp was sending the request) is
    /// passed on now, in the order it came.
    pub async fn sent_with(&self, token: rmcp::model::ProgressToken) {
        let early: Vec<Early> = match self.unsent.early.lock() {
            Ok(mut early) => {
                // Recorded under the early lock (see `Callers::progress`).
                if let Ok(mut held) = self.token.lock() {
                    *held = Some(token.clone());
                }
                let mut mine = Vec::new();
                early.retain(|entry| {
                    let is_mine = entry.1 == token;
                    if is_mine {
                        mine.push(entry.clone());
                    }
                    !is_mine
                });
                mine
            }
            Err(_) => {
                if let Ok(mut held) = self.token.lock() {
                    *held = Some(token.clone());
                }
                Vec::new()
            }
        };
        if let Some(notices) = &self.notices {
            for (at, _, progress, total, message) in early {
                if at.elapsed() < LATE {
                    notices.progress(progress, total, message).await;
                }
            }
        }
    }

    /// Whether what the server says during the call goes somewhere besides Runbyte's log.
    pub fn has_notices(&self) -> bool {
        self.notices.is_some()
    }

    /// Waits (at most [`SETTLE`]) until the progress and the log messages its server sent
    /// before the answer just read have been passed on.
    pub async fn settle(&self) {
        let token = self.token.lock().ok().and_then(|held| held.clone());
        let until = tokio::time::Instant::now() + SETTLE;
        loop {
            let sent = self.unsent.sent.notified();
            let progress = token
                .as_ref()
                .is_some_and(|token| self.unsent.pending(token));
            if !progress && !self.unsent.logs_pending() {
                return;
            }
            if tokio::time::timeout_at(until, sent).await.is_err() {
                tracing::warn!(
                    "an answer went on after waiting {} ms for the progress or log messages \
                     its server sent before it: the client may see them after it, or not",
                    SETTLE.as_millis()
                );
                return;
            }
        }
    }

    fn holds(&self, token: &rmcp::model::ProgressToken) -> bool {
        self.token
            .lock()
            .is_ok_and(|held| held.as_ref() == Some(token))
    }

    /// Why a question during this call could not be asked, if one could not.
    pub fn refused(&self) -> Option<String> {
        self.refused.lock().ok().and_then(|refused| refused.clone())
    }
}

/// A call's place in [`Callers`], left when dropped.
pub struct InFlight {
    callers: Callers,
    caller: Arc<Caller>,
}

impl InFlight {
    /// The call.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.callers.calls.lock() {
            calls.retain(|caller| !Arc::ptr_eq(caller, &self.caller));
        }
        if self.caller.notices.is_some()
            && let Ok(mut ended) = self.callers.ended.lock()
        {
            if ended.len() == ENDED {
                ended.pop_front();
            }
            ended.push_back((std::time::Instant::now(), self.caller.clone()));
        }
    }
}

impl Callers {
    /// Registers a call for as long as the guard lives.
    pub fn enter(
        &self,
        asker: Option<Arc<dyn Asker>>,
        notices: Option<Arc<dyn Notices>>,
    ) -> InFlight {
        let caller = Arc::new(Caller {
            asker,
            notices,
            token: Mutex::new(None),
            refused: Mutex::new(None),
            unsent: self.unsent.clone(),
        });
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(caller.clone());
        }
        InFlight {
            callers: self.clone(),
            caller,
        }
    }

    /// The connection read progress on `token`, which [`Callers::progress`] will pass on: an
    /// answer read after it waits for that (see [`Caller::settle`]). Called by the reader, in
    /// the order the server sent its messages.
    pub fn arrived(&self, token: &rmcp::model::ProgressToken) {
        if let Ok(mut counts) = self.unsent.counts.lock() {
            if counts.len() >= MAX_UNSENT && !counts.contains_key(token) {
                counts.clear();
            }
            *counts.entry(token.clone()).or_default() += 1;
        }
    }

    /// The connection read a log message, which [`Callers::log`] will pass on: an answer read
    /// after it waits for that. Called by the reader, in the order the server sent its messages.
    pub fn log_arrived(&self) {
        self.unsent
            .logs
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// The server's progress on the call sent with progress token `token`, to that call's
    /// [`Notices`] (also a moment after the call ended); a token no call holds (a made-up one,
    /// or a call long over) is dropped.
    pub async fn progress(
        &self,
        token: &rmcp::model::ProgressToken,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) {
        // Under the early lock, which `Caller::sent_with` records a token under: a report is
        // either kept before the call takes what was kept, or finds the call holding its token.
        let mut message = message;
        let holder = match self.unsent.early.lock() {
            Ok(mut early) => {
                let holder = self.holder(token);
                if holder.is_none() {
                    // Perhaps a call about to record its token (see `Unsent::early`).
                    early.retain(|(at, ..)| at.elapsed() < LATE);
                    let now = std::time::Instant::now();
                    early.push_back((now, token.clone(), progress, total, message.take()));
                    while early.len() > EARLY || early_bytes(&early) > EARLY_BYTES {
                        early.pop_front();
                    }
                }
                holder
            }
            Err(_) => self.holder(token),
        };
        if let Some(Some(notices)) = holder {
            notices.progress(progress, total, message).await;
        }
        self.unsent.sent(token);
    }

    /// The notices of the call (in flight, or ended a moment ago) that holds `token`: `None`
    /// when no call does, `Some(None)` when the one that does has nowhere to pass it on.
    fn holder(&self, token: &rmcp::model::ProgressToken) -> Option<Option<Arc<dyn Notices>>> {
        let in_flight = self.calls.lock().ok().and_then(|calls| {
            let call = calls.iter().find(|call| call.holds(token))?;
            Some(call.notices.clone())
        });
        in_flight.or_else(|| {
            let ended = self.ended.lock().ok()?;
            ended
                .iter()
                .find(|(at, call)| at.elapsed() < LATE && call.holds(token))
                .map(|(_, call)| call.notices.clone())
        })
    }

    /// A log message the server sent: to the [`Notices`] of the call in flight, when every call
    /// in flight on the connection has the same (with several clients' calls in flight, whose
    /// the message is cannot be told, and it goes to Runbyte's own log only). Returns whether
    /// it was passed on.
    #[allow(deprecated)]
    pub async fn log(&self, message: &rmcp::model::LoggingMessageNotificationParam) -> bool {
        let passed = self.pass_log(message).await;
        self.unsent.log_sent();
        passed
    }

    #[allow(deprecated)]
    async fn pass_log(&self, message: &rmcp::model::LoggingMessageNotificationParam) -> bool {
        let calls: Vec<Arc<Caller>> = self
            .calls
            .lock()
            .map(|calls| calls.clone())
            .unwrap_or_default();
        let Some(Some(first)) = calls.first().map(|call| call.notices.clone()) else {
            return false;
        };
        let one = calls.iter().all(|call| {
            call.notices
                .as_ref()
                .is_some_and(|notices| Arc::ptr_eq(notices, &first))
        });
        if one {
            first.log(message.clone()).await;
        }
        one
    }

    /// Asks the execution whose call is in flight. With calls of several executions in flight
    /// on one connection, which one the server means cannot be told: the question is refused.
    pub async fn ask(&self, question: Question) -> Result<Value, String> {
        let method = method_of(&question);
        let calls: Vec<Arc<Caller>> = self
            .calls
            .lock()
            .map(|calls| calls.clone())
            .unwrap_or_default();
        let Some(first) = calls.first() else {
            return Err(format!(
                "`{method}` arrived while no call from a program was in flight; Runbyte relays \
                 questions only during a call"
            ));
        };
        let same = |a: &Option<Arc<dyn Asker>>, b: &Option<Arc<dyn Asker>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if calls.iter().any(|call| !same(&call.asker, &first.asker)) {
            let why = format!(
                "`{method}` arrived while calls of several executions were in flight on this \
                 connection, so Runbyte cannot tell whose user to ask (set share = \"session\" \
                 for this server)"
            );
            for call in &calls {
                call.refuse(&why);
            }
            return Err(why);
        }
        let Some(asker) = first.asker.clone() else {
            let why = format!("`{method}` cannot be relayed: this execution has no client to ask");
            first.refuse(&why);
            return Err(why);
        };
        asker.ask(question).await.inspect_err(|why| {
            for call in &calls {
                call.refuse(why);
            }
        })
    }
}

impl Caller {
    fn refuse(&self, why: &str) {
        if let Ok(mut refused) = self.refused.lock() {
            refused.get_or_insert_with(|| why.to_owned());
        }
    }
}

/// Answers every question without a person: a form with the defaults of its schema (or a
/// plain value of each property's type), a sampling request with a fixed text, `roots/list`
/// with no roots. For `runbyte probe`, which exercises a server's tools unattended.
pub struct Unattended;

impl Unattended {
    /// A value for a property of an elicitation schema: its default, its first choice, or a
    /// plain value of its type.
    fn value_for(property: &Value) -> Value {
        if let Some(default) = property.get("default") {
            return default.clone();
        }
        if let Some(first) = property
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|choices| choices.first())
        {
            return first.clone();
        }
        match property.get("type").and_then(Value::as_str) {
            Some("boolean") => json!(true),
            Some("integer" | "number") => json!(1),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("x"),
        }
    }
}

impl Asker for Unattended {
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>> {
        let answer = match &question {
            InputRequest::Elicitation(request) => {
                let params = serde_json::to_value(&request.params).unwrap_or_default();
                let content: serde_json::Map<String, Value> = params
                    .pointer("/requestedSchema/properties")
                    .and_then(Value::as_object)
                    .map(|properties| {
                        properties
                            .iter()
                            .map(|(name, property)| (name.clone(), Self::value_for(property)))
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(json!({"action": "accept", "content": content}))
            }
            InputRequest::CreateMessage(_) => Ok(json!({
                "role": "assistant",
                "content": {"type": "text", "text": "ok"},
                "model": "runbyte-probe",
                "stopReason": "endTurn",
            })),
            InputRequest::ListRoots(_) => Ok(json!({"roots": []})),
            _ => Err("Runbyte cannot answer this kind of request".to_owned()),
        };
        Box::pin(std::future::ready(answer))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    use super::*;

    /// Notices that count the progress they are given.
    #[derive(Default)]
    struct Counted(std::sync::atomic::AtomicUsize);

    #[allow(deprecated)]
    impl Notices for Counted {
        fn progress(&self, _: f64, _: Option<f64>, _: Option<String>) -> BoxFuture<'static, ()> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async {})
        }
        fn log(&self, _: rmcp::model::LoggingMessageNotificationParam) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
        fn log_level(&self) -> Option<rmcp::model::LoggingLevel> {
            None
        }
    }

    fn count(notices: &Counted) -> usize {
        notices.0.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[tokio::test]
    async fn progress_reaches_the_call_whose_token_it_carries_and_no_other() {
        let callers = Callers::default();
        let (one, two) = (Arc::new(Counted::default()), Arc::new(Counted::default()));
        let token = |n: i64| rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(n));
        let first = callers.enter(None, Some(one.clone()));
        first.caller().sent_with(token(1)).await;
        let second = callers.enter(None, Some(two.clone()));
        second.caller().sent_with(token(2)).await;
        callers.progress(&token(2), 1.0, None, None).await;
        callers.progress(&token(2), 2.0, None, None).await;
        callers.progress(&token(1), 1.0, None, None).await;
        // A token no call was sent with reaches nobody.
        callers.progress(&token(3), 1.0, None, None).await;
        assert_eq!((count(&one), count(&two)), (1, 2));
        // Progress a moment after its call ended (rmcp hands it on in a task of its own) still
        // reaches it; a later round of a call is sent with a new token.
        drop(first);
        callers.progress(&token(1), 2.0, None, None).await;
        second.caller().sent_with(token(4)).await;
        callers.progress(&token(2), 3.0, None, None).await;
        callers.progress(&token(4), 1.0, None, None).await;
        assert_eq!((count(&one), count(&two)), (2, 3));
    }

    #[tokio::test]
    async fn progress_read_before_its_call_recorded_the_token_reaches_it_then() {
        let callers = Callers::default();
        let (one, two) = (Arc::new(Counted::default()), Arc::new(Counted::default()));
        let token = |n: i64| rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(n));
        let first = callers.enter(None, Some(one.clone()));
        let second = callers.enter(None, Some(two.clone()));
        // The server reported at once, before rmcp handed back the request's token.
        callers.progress(&token(5), 0.0, None, None).await;
        callers.progress(&token(6), 0.0, None, None).await;
        callers.progress(&token(5), 1.0, None, None).await;
        assert_eq!((count(&one), count(&two)), (0, 0));
        first.caller().sent_with(token(5)).await;
        assert_eq!((count(&one), count(&two)), (2, 0));
        // Passed on once: recording the token again finds nothing.
        first.caller().sent_with(token(5)).await;
        second.caller().sent_with(token(6)).await;
        assert_eq!((count(&one), count(&two)), (2, 1));
        // Bounded: a flood on tokens no call holds keeps the last EARLY reports.
        for _ in 0..EARLY * 4 {
            callers.progress(&token(7), 1.0, None, None).await;
        }
        let third = Arc::new(Counted::default());
        let late = callers.enter(None, Some(third.clone()));
        late.caller().sent_with(token(7)).await;
        assert_eq!(count(&third), EARLY);
        // And in bytes: reports with 1 MiB messages keep at most EARLY_BYTES of them.
        let big = "x".repeat(1 << 20);
        for _ in 0..8 {
            callers
                .progress(&token(8), 1.0, None, Some(big.clone()))
                .await;
        }
        let small = "y".repeat(EARLY_BYTES / 2);
        callers
            .progress(&token(8), 2.0, None, Some(small.clone()))
            .await;
        callers.progress(&token(8), 3.0, None, Some(small)).await;
        let kept = callers.unsent.early.lock().unwrap().len();
        assert_eq!(
            (kept, early_bytes(&callers.unsent.early.lock().unwrap())),
            (2, EARLY_BYTES)
        );
        // A call that holds its token but passes nothing on keeps nothing early either.
        let quiet = callers.enter(None, None);
        quiet.caller().sent_with(token(9)).await;
        callers.progress(&token(9), 1.0, None, None).await;
        assert_eq!(callers.unsent.early.lock().unwrap().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_waits_for_the_progress_read_before_it() {
        let callers = Callers::default();
        let notices = Arc::new(Counted::default());
        let token = rmcp::model::ProgressToken(rmcp::model::NumberOrString::Number(7));
        let call = callers.enter(None, Some(notices.clone()));
        call.caller().sent_with(token.clone()).await;
        // Read from the wire before the answer, passed on by tasks that run later.
        callers.arrived(&token);
        callers.arrived(&token);
        let passing = callers.clone();
        let late = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            passing.progress(&late, 1.0, None, None).await;
            passing.progress(&late, 2.0, None, None).await;
        });
        call.caller().settle().await;
        assert_eq!(count(&notices), 2);
        // Nothing pending: no wait. Progress that never comes: waited for, then not.
        call.caller().settle().await;
        callers.arrived(&token);
        let started = tokio::time::Instant::now();
        call.caller().settle().await;
        assert!(started.elapsed() >= SETTLE);
    }

    /// Notices that count the log messages they are given.
    #[derive(Default)]
    struct Logged(std::sync::atomic::AtomicUsize);

    #[allow(deprecated)]
    impl Notices for Logged {
        fn progress(&self, _: f64, _: Option<f64>, _: Option<String>) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
        fn log(&self, _: rmcp::model::LoggingMessageNotificationParam) -> BoxFuture<'static, ()> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async {})
        }
        fn log_level(&self) -> Option<rmcp::model::LoggingLevel> {
            None
        }
    }

    #[tokio::test]
    #[allow(deprecated)]
    async fn an_answer_waits_for_the_log_messages_read_before_it() {
        let callers = Callers::default();
        let notices = Arc::new(Logged::default());
        let call = callers.enter(None, Some(notices.clone()));
        call.caller()
            .sent_with(rmcp::model::ProgressToken(
                rmcp::model::NumberOrString::Number(9),
            ))
            .await;
        // Read from the wire before the answer, passed on by tasks that run later.
        callers.log_arrived();
        callers.log_arrived();
        let passing = callers.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let message = rmcp::model::LoggingMessageNotificationParam::new(
                rmcp::model::LoggingLevel::Info,
                json!("late"),
            );
            passing.log(&message).await;
            passing.log(&message).await;
        });
        call.caller().settle().await;
        assert_eq!(notices.0.load(std::sync::atomic::Ordering::SeqCst), 2);
        // Nothing pending: no wait; a message passed on with nothing counted leaves none.
        let started = std::time::Instant::now();
        call.caller().settle().await;
        assert!(started.elapsed() < SETTLE);
    }

    fn elicit(message: &str) -> Question {
        approval(message, "s", "t", &json!({"a": 1}))
    }

    fn waiting(point: Option<Point>) -> Waiting<u32> {
        let (answer, _answered) = oneshot::channel();
        let (_events_tx, events) = mpsc::channel(1);
        let deadline = std::time::SystemTime::now() + Duration::from_secs(60);
        Waiting::new(
            elicit("q"),
            answer,
            events,
            CancellationToken::new(),
            point,
            deadline,
        )
    }

    fn here(resumed: Result<Resumed<u32>, ResumeError>) -> String {
        match resumed {
            Ok(Resumed::Here { key, .. }) => key,
            Ok(Resumed::Replay { .. }) => panic!("replayed"),
            Err(error) => panic!("{error}"),
        }
    }

    #[tokio::test]
    async fn a_paused_execution_is_found_by_its_state_and_only_once() {
        let paused: Paused<u32> = Paused::new(Duration::from_secs(60), None, None).unwrap();
        let state = paused
            .pause("k1".to_owned(), waiting(None), "code")
            .await
            .unwrap();
        // Altered by one character: refused by name.
        let mut altered = state.clone().into_bytes();
        let last = altered.len() - 1;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        let error = paused
            .resume(std::str::from_utf8(&altered).unwrap(), "code", true)
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(error.contains("not issued by this Runbyte"), "{error}");
        // Bound to its program: another program's retry cannot use it.
        assert!(paused.resume(&state, "other code", true).await.is_err());
        // Another process's key: refused too.
        let other: Paused<u32> = Paused::new(Duration::from_secs(60), None, None).unwrap();
        assert!(other.resume(&state, "code", true).await.is_err());
        assert_eq!(here(paused.resume(&state, "code", true).await), "k1");
        let error = paused.resume(&state, "code", true).await.err().unwrap();
        assert!(error.to_string().contains("has ended"), "{error}");
    }

    #[tokio::test]
    async fn another_replica_replays_a_journal_once_and_refuses_a_state_without_one() {
        let secret = b"a shared key of thirty-two bytes!".to_vec();
        let store = crate::state_store::StateStore::memory();
        let (one, two): (Paused<u32>, Paused<u32>) = (
            Paused::new(
                Duration::from_secs(60),
                Some(secret.clone()),
                Some(store.clone()),
            )
            .unwrap(),
            Paused::new(Duration::from_secs(60), Some(secret), Some(store)).unwrap(),
        );
        let without = one
            .pause("k2".to_owned(), waiting(None), "code")
            .await
            .unwrap();
        let error = two.resume(&without, "code", true).await.err().unwrap();
        assert!(
            error.to_string().contains("another Runbyte process"),
            "{error}"
        );
        let point = Point {
            recorded: [(
                0,
                Recorded {
                    server: "s".into(),
                    tool: "t".into(),
                    arguments: json!({}),
                    result: Ok(json!(1)),
                },
            )]
            .into_iter()
            .collect(),
            index: 1,
            origin: Origin::Approval,
            asking: Asking::of("s", "t", digest(&json!({"a": 1})), &elicit("q")),
            seed: 7,
            observed: Default::default(),
        };
        let with = one
            .pause("k3".to_owned(), waiting(Some(point.clone())), "code")
            .await
            .unwrap();
        match two.resume(&with, "code", true).await {
            Ok(Resumed::Replay {
                point: replayed, ..
            }) => assert_eq!(*replayed, point),
            _ => panic!("not replayed"),
        }
        let error = two.resume(&with, "code", true).await.err().unwrap();
        assert!(error.to_string().contains("already used"), "{error}");
        // Where it paused, the replay elsewhere is known: refused there too.
        let error = one.resume(&with, "code", true).await.err().unwrap();
        assert!(error.to_string().contains("already used"), "{error}");
    }

    #[tokio::test]
    async fn a_question_during_calls_of_two_executions_is_refused() {
        let callers = Callers::default();
        let one: Arc<dyn Asker> = Arc::new(Unattended);
        let two: Arc<dyn Asker> = Arc::new(Unattended);
        let first = callers.enter(Some(one.clone()), None);
        let answer = callers.ask(elicit("alone")).await.unwrap();
        assert_eq!(answer["action"], "accept");
        assert_eq!(answer["content"]["approve"], true);
        let second = callers.enter(Some(two), None);
        let error = callers.ask(elicit("which?")).await.unwrap_err();
        assert!(error.contains("several executions"), "{error}");
        assert!(first.caller().refused().is_some());
        assert!(second.caller().refused().is_some());
        drop((first, second));
        let error = callers.ask(elicit("nobody")).await.unwrap_err();
        assert!(error.contains("no call"), "{error}");
    }

    #[test]
    fn approval_shows_the_call_and_reads_the_answer() {
        let question = approval("Allow?", "github", "delete_repo", &json!({"name": "x"}));
        let text = serde_json::to_value(&question).unwrap().to_string();
        assert!(
            text.contains("github/delete_repo") && text.contains(r#"{\"name\":\"x\"}"#),
            "{text}"
        );
        assert!(approved(&json!({"action": "accept", "content": {"approve": true}})).is_ok());
        // Only the JSON `true` of an accepted form approves: every other answer refuses, and
        // says how it read.
        for (answer, says) in [
            (
                json!({"action": "accept", "content": {"approve": false}}),
                "approve: false",
            ),
            (json!({"action": "accept", "content": {}}), "no `approve`"),
            (json!({"action": "accept"}), "no `approve`"),
            (
                json!({"action": "accept", "content": {"approve": "false"}}),
                "`\"false\"`",
            ),
            (
                json!({"action": "accept", "content": {"approve": "true"}}),
                "`\"true\"`",
            ),
            (
                json!({"action": "accept", "content": {"approve": 0}}),
                "`0`",
            ),
            (
                json!({"action": "accept", "content": {"approve": 1}}),
                "`1`",
            ),
            (
                json!({"action": "accept", "content": {"approve": null}}),
                "`null`",
            ),
            (
                json!({"action": "accept", "content": {"approve": [true]}}),
                "`[true]`",
            ),
            (
                json!({"action": "decline", "content": {"approve": true}}),
                "`decline`",
            ),
            (json!({"action": "cancel"}), "`cancel`"),
            (json!({"content": {"approve": true}}), "no `action`"),
            (
                json!({"action": "ACCEPT", "content": {"approve": true}}),
                "`ACCEPT`",
            ),
        ] {
            let why = approved(&answer).expect_err(&answer.to_string());
            assert!(why.contains(says), "{answer}: {why}");
        }
    }

    #[test]
    fn the_corpus_of_approvals_refuses_every_answer_but_true() {
        let answers: Vec<Value> =
            serde_json::from_str(include_str!("../../../tests/corpus/replay/approvals.json"))
                .unwrap();
        assert!(answers.len() >= 10);
        for answer in answers {
            assert!(approved(&answer).is_err(), "{answer} approved");
        }
    }

    #[test]
    fn a_digest_is_of_the_json_value_whatever_its_key_order() {
        let one: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "s"}}"#).unwrap();
        let two: Value = serde_json::from_str(r#"{"a": {"x": "s", "y": [1, 2]}, "b": 1}"#).unwrap();
        // `preserve_order` keeps the order the keys came in: the text differs, the digest not.
        assert_ne!(one.to_string(), two.to_string());
        assert_eq!(one, two);
        assert_eq!(digest(&one), digest(&two));
        assert_eq!(digest(&one).len(), 64);
        // Shown to the user in an approval, the arguments are canonical too: the same call asks
        // the same question (this once broke: tests/corpus/replay/answers.json).
        assert_eq!(canonical(&one), r#"{"a":{"x":"s","y":[1,2]},"b":1}"#);
        assert_eq!(
            serde_json::to_value(approval("q", "s", "t", &one)).unwrap(),
            serde_json::to_value(approval("q", "s", "t", &two)).unwrap()
        );
        // Any other value is another digest.
        for other in [
            json!({"b": 1.0, "a": {"y": [1, 2], "x": "s"}}),
            json!({"b": 1, "a": {"y": [2, 1], "x": "s"}}),
            json!({"b": 1, "a": {"y": [1, 2], "x": "s "}}),
            json!({"b": 1, "a": {"y": [1, 2], "x": "s"}, "c": null}),
            json!({"b": "1", "a": {"y": [1, 2], "x": "s"}}),
            json!([{"b": 1, "a": {"y": [1, 2], "x": "s"}}]),
            json!({"b": 1, "a": {"y": [1, 2], "x": "S"}}),
        ] {
            assert_ne!(digest(&one), digest(&other), "{other}");
        }
        // A key that holds what would be punctuation in a naive join is still its own key.
        assert_ne!(digest(&json!({"a\":\"b": 1})), digest(&json!({"a": "b"})));
        assert_ne!(digest(&json!({"a,b": 1})), digest(&json!({"a": 1, "b": 1})));
    }
}
