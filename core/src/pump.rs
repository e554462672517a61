//! A plugin's blocking message pump, adapted into an rmcp transport.
//!
//! One thread per pump reads (`recv` with a short timeout, so the thread notices when the
//! transport is dropped) and one writes, so a slow writer never holds up the reader. Both run
//! outside the tokio runtime: a plugin's pump may block for as long as its I/O does.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc as std_mpsc,
    },
    time::Duration,
};

use rmcp::{
    RoleClient,
    model::{
        CallToolResult, ClientRequest, JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0,
        RequestId, ServerResult,
    },
    service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage},
};
use tokio::sync::{mpsc, oneshot};

use crate::plugin::{CallError, Pump, Received};

/// How often the reader thread looks up from a blocking `recv`.
const POLL: Duration = Duration::from_millis(200);

/// What went wrong sending through a pump.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PumpError(String);

/// Why a pump's connection ended, once it has.
#[derive(Clone, Default)]
pub struct CloseReason(Arc<Mutex<Option<String>>>);

impl CloseReason {
    /// The reason, if the connection has ended.
    pub fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|reason| reason.clone())
    }

    fn set(&self, reason: String) {
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(reason);
        }
    }
}

/// An rmcp transport over a [`Pump`], for either role.
pub struct PumpTransport<R: ServiceRole> {
    pump: Pump,
    incoming: mpsc::Receiver<RxJsonRpcMessage<R>>,
    /// The writer thread's queue (each message with the id of the request it carries, if
    /// any); `None` when the pump's `send` never blocks and is called here.
    outgoing: Option<std_mpsc::Sender<(String, Option<RequestId>)>>,
    /// Where a refused request's error answer goes: the reader's queue, held weakly so that
    /// the reader ending still ends the stream.
    answers: mpsc::WeakSender<RxJsonRpcMessage<R>>,
    stop: Arc<AtomicBool>,
    cancel: tokio_util::sync::CancellationToken,
    reason: CloseReason,
    direct: Option<Arc<Direct<R>>>,
    rewrite: Option<Arc<dyn Rewrite>>,
}

/// Rewrites a connection's messages as text: what the peer sent before rmcp reads it, and
/// rmcp's answers to chosen requests before the peer gets them. It speaks for rmcp where rmcp
/// does not know a revision's form (the 2025-11-25 tasks, `crate::server`).
pub trait Rewrite: Send + Sync {
    /// What to make of a message the peer sent, before rmcp reads it.
    fn incoming(&self, text: &str) -> Rewritten;
    /// The message [`Rewrite::incoming`] last saw did not reach rmcp (it could not be read):
    /// whatever it recorded of it is void.
    fn refused(&self);
    /// Whether the answer to request `id` is to be rewritten (asked of every answer: cheap).
    fn rewrites(&self, id: &RequestId) -> bool;
    /// The answer to request `id`, rewritten.
    fn outgoing(&self, id: &RequestId, text: String) -> String;
}

/// What [`Rewrite::incoming`] makes of a message.
pub enum Rewritten {
    /// The message as it came.
    Same,
    /// This message instead.
    Message(String),
    /// Not for rmcp: this answer goes back to the peer.
    Answer(String),
}

/// Answers read directly, without rmcp's general parse: the answers to requests of one kind
/// whose result has one known shape (a downstream `tools/call`'s `CallToolResult`), told apart
/// by the ids of the requests sent. rmcp reads a result as an untagged union of every result
/// type, trying each in turn (`CallToolResult` is the sixteenth), which made reading a call's
/// answer most of the CPU time of a tool call's return trip in the host. An answer that does not
/// read as that shape (an error, `input_required`, a message with other fields) is read the
/// general way, as before.
pub struct Direct<R: ServiceRole> {
    /// The id of a request whose answer is read directly.
    pick: fn(&TxJsonRpcMessage<R>) -> Option<RequestId>,
    /// Such an answer, read directly, with its id; `None`: read it the general way.
    read: fn(&str) -> Option<Answer<R>>,
    /// The picked requests not yet answered.
    waiting: Mutex<HashSet<RequestId>>,
    /// Told of every message read, in the order the peer sent them, before rmcp sees it.
    watch: Option<Watch<R>>,
    /// The requests sent past rmcp ([`Sender`]), whose answers go straight to their callers.
    routes: Mutex<Routes<R>>,
}

/// The requests a [`Sender`] sent, by id, each with where its answer goes.
struct Routes<R: ServiceRole> {
    /// False once the reader has ended: nothing more can be answered.
    open: bool,
    next: i64,
    waiting: HashMap<RequestId, oneshot::Sender<RxJsonRpcMessage<R>>>,
}

impl<R: ServiceRole> Default for Routes<R> {
    fn default() -> Self {
        Routes {
            open: true,
            next: ROUTED_IDS,
            waiting: HashMap::new(),
        }
    }
}

/// The first id of the requests sent past rmcp: far above any id rmcp's own counter (a `u32`)
/// gives, and below 2^53, so that a JavaScript server reads it exactly.
const ROUTED_IDS: i64 = 1 << 40;
/// The most requests sent past rmcp that wait for an answer on one connection, abandoned ones
/// included (those are let go first); past it, requests go through rmcp.
const MAX_ROUTED: usize = 4096;

/// What [`Direct::watching`] is told of each message read.
type Watch<R> = Box<dyn Fn(&RxJsonRpcMessage<R>) + Send + Sync>;

/// An answer read directly, with the id of the request it answers.
type Answer<R> = (RequestId, RxJsonRpcMessage<R>);

/// The most requests [`Direct`] keeps waiting for: past it (calls abandoned without an
/// answer), it forgets them all, and their answers, if they come, are read the general way.
const MAX_DIRECT_WAITING: usize = 1024;

impl<R: ServiceRole> Direct<R> {
    fn sent(&self, message: &TxJsonRpcMessage<R>) {
        let Some(id) = (self.pick)(message) else {
            return;
        };
        if let Ok(mut waiting) = self.waiting.lock() {
            if waiting.len() >= MAX_DIRECT_WAITING {
                waiting.clear();
            }
            waiting.insert(id);
        }
    }

    /// Tells `watch` of every message read, in the order the peer sent them, before rmcp
    /// sees it (rmcp hands notifications to tasks of their own, so their order against the
    /// answers is lost past this point).
    pub fn watching(
        mut self,
        watch: impl Fn(&RxJsonRpcMessage<R>) + Send + Sync + 'static,
    ) -> Self {
        self.watch = Some(Box::new(watch));
        self
    }

    /// An answer to a request sent past rmcp, handed to its caller: `Some(None)`. A message
    /// read for rmcp on the way: `Some(Some(message))`. `None`: not an answer to such a request.
    fn routed(&self, text: &str) -> Option<Option<RxJsonRpcMessage<R>>> {
        if self.routes.lock().ok()?.waiting.is_empty() {
            return None;
        }
        // A call's plain result is read directly; anything else (an error, a task, input
        // asked for, a notification) the general way.
        let message = match (self.read)(text) {
            Some((_, message)) => message,
            None => match serde_json::from_str::<RxJsonRpcMessage<R>>(text) {
                Ok(message) => message,
                Err(_) => return None,
            },
        };
        match self.deliver(message) {
            None => Some(None),
            // Another request's answer is read again the usual way: read as a call's result,
            // the answer to a request of another kind could be misread.
            Some(JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_)) => None,
            // Read the way the general path reads it: rmcp takes it from here.
            Some(message) => Some(Some(message)),
        }
    }

    /// Hands `message` to its caller if it answers a request sent past rmcp (`None`); else
    /// gives it back.
    fn deliver(&self, message: RxJsonRpcMessage<R>) -> Option<RxJsonRpcMessage<R>> {
        let id = match &message {
            JsonRpcMessage::Response(response) => &response.id,
            JsonRpcMessage::Error(error) => match &error.id {
                Some(id) => id,
                None => return Some(message),
            },
            _ => return Some(message),
        };
        let caller = self
            .routes
            .lock()
            .ok()
            .and_then(|mut routes| routes.waiting.remove(id));
        match caller {
            Some(caller) => {
                let _ = caller.send(message);
                None
            }
            None => Some(message),
        }
    }

    /// A new route: `Some(None)` once the reader has ended; `None` when [`MAX_ROUTED`] wait.
    fn open_route(&self) -> Option<Option<Routed<R>>> {
        let mut routes = self.routes.lock().ok()?;
        if !routes.open {
            return Some(None);
        }
        if routes.waiting.len() >= MAX_ROUTED {
            // Those whose callers gave up first (their answers may never come).
            routes.waiting.retain(|_, caller| !caller.is_closed());
            if routes.waiting.len() >= MAX_ROUTED {
                return None;
            }
        }
        let id = RequestId::Number(routes.next);
        routes.next += 1;
        let (caller, answer) = oneshot::channel();
        routes.waiting.insert(id.clone(), caller);
        Some(Some((id, answer)))
    }

    /// The reader has ended: every request sent past rmcp fails (its answer's sender dropped),
    /// and no more are sent.
    fn close_routes(&self) {
        if let Ok(mut routes) = self.routes.lock() {
            routes.open = false;
            routes.waiting.clear();
        }
    }

    fn answer(&self, text: &str) -> Option<RxJsonRpcMessage<R>> {
        if self.waiting.lock().ok()?.is_empty() {
            return None;
        }
        let (id, message) = (self.read)(text)?;
        self.waiting.lock().ok()?.remove(&id).then_some(message)
    }
}

/// A downstream connection's answers to `tools/call`, read directly as `CallToolResult`.
pub fn tool_call_answers() -> Direct<RoleClient> {
    Direct {
        pick: |message| match message {
            JsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::CallToolRequest(_)) =>
            {
                Some(request.id.clone())
            }
            _ => None,
        },
        read: read_tool_call_answer,
        waiting: Mutex::default(),
        watch: None,
        routes: Mutex::default(),
    }
}

/// An answer of exactly `jsonrpc`, `id` and a `result` that reads as a `CallToolResult` (which
/// rmcp's general parse would classify as a response, and read as the same result unless an
/// earlier variant of its union took it first, which would fail the call as an unexpected
/// response).
fn read_tool_call_answer(text: &str) -> Option<Answer<RoleClient>> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct CallAnswer {
        jsonrpc: JsonRpcVersion2_0,
        id: RequestId,
        result: CallToolResult,
    }
    let CallAnswer {
        jsonrpc,
        id,
        result,
    } = serde_json::from_str(text).ok()?;
    let message = JsonRpcMessage::Response(JsonRpcResponse {
        jsonrpc,
        id: id.clone(),
        result: ServerResult::CallToolResult(result),
    });
    Some((id, message))
}

/// What the reader makes of one line.
enum Parsed<R: ServiceRole> {
    /// A message for rmcp.
    Message(RxJsonRpcMessage<R>),
    /// Not a message; this JSON-RPC error answers it.
    Answer(String),
    /// Not a message, and nothing to answer.
    Skip,
    /// An answer to a request sent past rmcp, handed to its caller.
    Routed,
}

/// Reads a pump's messages into rmcp, on a thread of its own or, when the plugin gives a
/// descriptor to wait on, as a task of the runtime.
struct Reader<R: ServiceRole> {
    pump: Pump,
    peer: String,
    on_garbage: OnGarbage,
    reason: CloseReason,
    direct: Option<Arc<Direct<R>>>,
    rewrite: Option<Arc<dyn Rewrite>>,
}

impl<R: ServiceRole> Reader<R> {
    fn parse(&self, text: &str) -> Parsed<R> {
        let rewritten;
        let text = match self.rewrite.as_ref().map(|rewrite| rewrite.incoming(text)) {
            None | Some(Rewritten::Same) => text,
            Some(Rewritten::Message(message)) => {
                rewritten = message;
                &rewritten
            }
            Some(Rewritten::Answer(answer)) => return Parsed::Answer(answer),
        };
        let parsed = self.parse_unwatched(text);
        if let (Some(rewrite), Parsed::Answer(_) | Parsed::Skip) = (&self.rewrite, &parsed) {
            rewrite.refused();
        }
        if let (Parsed::Message(message), Some(watch)) = (
            &parsed,
            self.direct
                .as_ref()
                .and_then(|direct| direct.watch.as_ref()),
        ) {
            watch(message);
        }
        parsed
    }

    fn parse_unwatched(&self, text: &str) -> Parsed<R> {
        match self.direct.as_ref().and_then(|direct| direct.routed(text)) {
            Some(None) => return Parsed::Routed,
            Some(Some(message)) => return Parsed::Message(message),
            None => {}
        }
        if let Some(message) = self.direct.as_ref().and_then(|direct| direct.answer(text)) {
            return Parsed::Message(message);
        }
        match serde_json::from_str::<RxJsonRpcMessage<R>>(text) {
            Ok(message) => Parsed::Message(message),
            Err(error) => match self.on_garbage {
                OnGarbage::Recover => match recover::<R>(text, &error) {
                    // An answer that cannot be read fails its request, sent past rmcp or not.
                    Some(message) => match &self.direct {
                        Some(direct) => match direct.deliver(message) {
                            None => Parsed::Routed,
                            Some(message) => Parsed::Message(message),
                        },
                        None => Parsed::Message(message),
                    },
                    None => {
                        tracing::warn!(
                            peer = %self.peer,
                            "ignoring a message that is not valid JSON-RPC ({error}): {}",
                            excerpt(text)
                        );
                        Parsed::Skip
                    }
                },
                OnGarbage::Answer => {
                    tracing::debug!(peer = %self.peer, "refused a message: {error}");
                    garbage_answer(text, &error).map_or(Parsed::Skip, Parsed::Answer)
                }
            },
        }
    }

    fn answer(pump: &Pump, peer: &str, answer: &str) {
        if let Err(e) = pump.send(answer) {
            tracing::warn!(peer = %peer, "cannot answer a bad message: {e}");
        }
    }

    fn run_blocking(self, incoming: &mpsc::Sender<RxJsonRpcMessage<R>>, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            match self.pump.recv(POLL) {
                Ok(Received::Message(text)) => match self.parse(&text) {
                    Parsed::Message(message) => {
                        if incoming.blocking_send(message).is_err() {
                            return;
                        }
                    }
                    Parsed::Answer(answer) => Self::answer(&self.pump, &self.peer, &answer),
                    Parsed::Skip | Parsed::Routed => {}
                },
                Ok(Received::Timeout) => {}
                Ok(Received::Closed(why)) => return self.reason.set(why),
                Err(error) => return self.reason.set(error.to_string()),
            }
        }
    }

    /// Unix only: a plugin's descriptor is a POSIX one. On other systems the reader is always
    /// [`Reader::run_blocking`] on a thread.
    #[cfg(unix)]
    async fn run_async(
        self,
        fd: i32,
        incoming: mpsc::Sender<RxJsonRpcMessage<R>>,
        cancel: tokio_util::sync::CancellationToken,
    ) {
        // SAFETY: the descriptor stays open as long as the pump that gave it (the plugin's
        // contract for `readable_fd`), and this reader holds the pump until `ready` is dropped.
        let registered = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(
                PluginFd(fd),
                tokio::io::Interest::READABLE,
            )
        };
        let ready = match registered {
            Ok(ready) => ready,
            Err(error) => {
                // Not pollable after all: read on a thread instead.
                tracing::debug!(peer = %self.peer, "cannot wait on the pump's descriptor ({error})");
                let stop = AtomicBool::new(false);
                let _ =
                    tokio::task::spawn_blocking(move || self.run_blocking(&incoming, &stop)).await;
                return;
            }
        };
        loop {
            let mut guard = tokio::select! {
                guard = ready.readable() => match guard {
                    Ok(guard) => guard,
                    Err(error) => return self.reason.set(error.to_string()),
                },
                () = cancel.cancelled() => return,
            };
            // Everything that is there now; `recv` with a zero timeout does not wait.
            loop {
                match self.pump.recv(Duration::ZERO) {
                    Ok(Received::Message(text)) => match self.parse(&text) {
                        Parsed::Message(message) => {
                            if incoming.send(message).await.is_err() {
                                return;
                            }
                        }
                        Parsed::Answer(answer) => {
                            let (pump, peer) = (self.pump.clone(), self.peer.clone());
                            let _ = tokio::task::spawn_blocking(move || {
                                Self::answer(&pump, &peer, &answer)
                            })
                            .await;
                        }
                        Parsed::Skip | Parsed::Routed => {}
                    },
                    Ok(Received::Timeout) => break,
                    Ok(Received::Closed(why)) => return self.reason.set(why),
                    Err(error) => return self.reason.set(error.to_string()),
                }
            }
            guard.clear_ready();
        }
    }
}

/// However the reader ends, the requests sent past rmcp that wait for answers fail at once.
impl<R: ServiceRole> Drop for Reader<R> {
    fn drop(&mut self) {
        if let Some(direct) = &self.direct {
            direct.close_routes();
        }
    }
}

/// A plugin's descriptor, borrowed: the plugin owns and closes it, and keeps it open as long as
/// its pump, which the reader holds.
#[cfg(unix)]
struct PluginFd(i32);

#[cfg(unix)]
impl std::os::fd::AsRawFd for PluginFd {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0
    }
}

/// What to do with a line that does not parse as a message for this role.
#[derive(Clone, Copy)]
pub enum OnGarbage {
    /// A downstream server's output: a `tools/list` answer whose tools nest too deep has those
    /// fields cut (see [`TOO_DEEP`]) so that its other tools stand; an answer that still cannot
    /// be read but whose `id` can be recovered fails that request at once, with the reason; the
    /// rest (stray output) is logged with the peer's name and skipped.
    Recover,
    /// Answer with the JSON-RPC error the spec asks for (-32700, -32600, -32602): an upstream
    /// client deserves to know.
    Answer,
}

impl<R: ServiceRole> PumpTransport<R> {
    /// Starts the reader and writer threads for `pump`, with the messages `rewrite` rewrites.
    /// `peer` names the other side in logs.
    pub fn rewriting(
        pump: Pump,
        peer: String,
        on_garbage: OnGarbage,
        rewrite: Arc<dyn Rewrite>,
    ) -> Self {
        Self::start(pump, peer, on_garbage, None, Some(rewrite))
    }

    /// Starts the reader and writer threads for `pump`, reading the answers `direct` picks
    /// directly.
    pub fn reading_directly(
        pump: Pump,
        peer: String,
        on_garbage: OnGarbage,
        direct: Option<Direct<R>>,
    ) -> Self {
        Self::start(pump, peer, on_garbage, direct, None)
    }

    fn start(
        pump: Pump,
        peer: String,
        on_garbage: OnGarbage,
        direct: Option<Direct<R>>,
        rewrite: Option<Arc<dyn Rewrite>>,
    ) -> Self {
        let direct = direct.map(Arc::new);
        let (in_tx, incoming) = mpsc::channel(256);
        let stop = Arc::new(AtomicBool::new(false));
        let reason = CloseReason::default();
        let outgoing = if pump.sends_without_blocking() {
            None
        } else {
            let (outgoing, out_rx) = std_mpsc::channel::<(String, Option<RequestId>)>();
            let (writer_pump, writer_reason, writer_peer, answers) = (
                pump.clone(),
                reason.clone(),
                peer.clone(),
                in_tx.downgrade(),
            );
            let spawned_writer = std::thread::Builder::new()
                .name(format!("pump-write-{peer}"))
                .spawn(move || {
                    while let Ok((message, id)) = out_rx.recv() {
                        let Err(error) = writer_pump.send(&message) else {
                            continue;
                        };
                        match refusal::<R>(&writer_peer, &error, id) {
                            Refusal::NotRefused => {
                                fail(
                                    &writer_pump,
                                    &writer_reason,
                                    &writer_peer,
                                    &error.to_string(),
                                );
                                return;
                            }
                            Refusal::Dropped => {}
                            Refusal::Answer(answer) => {
                                if let Some(answers) = answers.upgrade() {
                                    let _ = answers.blocking_send(answer);
                                }
                            }
                        }
                    }
                });
            if let Err(e) = spawned_writer {
                reason.set(format!("cannot start a writer thread: {e}"));
            }
            Some(outgoing)
        };

        let answers = in_tx.downgrade();
        let reader = Reader::<R> {
            pump: pump.clone(),
            peer,
            on_garbage,
            reason: reason.clone(),
            direct: direct.clone(),
            rewrite: rewrite.clone(),
        };
        let cancel = tokio_util::sync::CancellationToken::new();
        match (pump.readable_fd(), tokio::runtime::Handle::try_current()) {
            // The plugin gives a descriptor: wait on it in the runtime, no thread in between.
            #[cfg(unix)]
            (Some(fd), Ok(runtime)) => {
                runtime.spawn(reader.run_async(fd, in_tx, cancel.clone()));
            }
            _ => {
                let reader_stop = stop.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("pump-read-{}", reader.peer))
                    .spawn(move || reader.run_blocking(&in_tx, &reader_stop));
                if let Err(e) = spawned {
                    reason.set(format!("cannot start a reader thread: {e}"));
                }
            }
        }
        PumpTransport {
            pump,
            incoming,
            outgoing,
            answers,
            stop,
            cancel,
            reason,
            direct,
            rewrite,
        }
    }

    /// Why the connection ended, shared: it stays readable after the transport is gone.
    pub fn close_reason(&self) -> CloseReason {
        self.reason.clone()
    }

    /// A way to send requests past rmcp, their answers read straight to their callers: when the
    /// transport reads answers directly and its pump sends without blocking (written in the
    /// caller's turn, as rmcp's own messages are, so the two keep their order).
    pub fn sender(&self) -> Option<Sender<R>> {
        if self.outgoing.is_some() {
            return None;
        }
        Some(Sender {
            pump: self.pump.clone(),
            direct: self.direct.clone()?,
            reason: self.reason.clone(),
        })
    }
}

/// Sends requests on a connection past rmcp's service loop, and hands each its answer as the
/// reader reads it. rmcp sends a request by a queue to its service task, which spawns a task
/// to write it, and passes the answer the reader read back through that task to the caller:
/// on a tool call's path, two task hops each way that a caller writing the request itself and
/// the reader answering it directly do without. What rmcp does for a request besides is the
/// caller's to do (its progress token, telling the server when it gives up).
pub struct Sender<R: ServiceRole> {
    pump: Pump,
    direct: Arc<Direct<R>>,
    reason: CloseReason,
}

/// A request sent past rmcp, and where its answer comes: the answer's sender is dropped if the
/// connection ends first.
pub type Routed<R> = (RequestId, oneshot::Receiver<RxJsonRpcMessage<R>>);

impl<R: ServiceRole> Sender<R> {
    /// An id for a request, and where its answer will come. `None`: too many such requests
    /// wait on this connection (send it through rmcp).
    pub fn route(&self) -> Option<Result<Routed<R>, PumpError>> {
        Some(self.direct.open_route()?.ok_or_else(|| self.closed()))
    }

    /// Writes `message`, the request routed as `id`. A request the transport refuses alone is
    /// answered at once with the error rmcp's path would give it; a write that fails ends the
    /// connection, as rmcp's would.
    pub fn write(&self, id: &RequestId, message: &TxJsonRpcMessage<R>) -> Result<(), PumpError> {
        let unroute = || {
            self.direct
                .routes
                .lock()
                .ok()
                .and_then(|mut routes| routes.waiting.remove(id))
        };
        let text = match serde_json::to_string(message) {
            Ok(text) => text,
            Err(error) => {
                unroute();
                return Err(PumpError(format!("cannot encode a message: {error}")));
            }
        };
        let Err(error) = self.pump.send(&text) else {
            return Ok(());
        };
        match refusal::<R>("a peer", &error, Some(id.clone())) {
            Refusal::Answer(refused) => {
                if let Some(caller) = unroute() {
                    let _ = caller.send(refused);
                }
                Ok(())
            }
            Refusal::Dropped => {
                unroute();
                Err(PumpError(error.to_string()))
            }
            Refusal::NotRefused => {
                unroute();
                fail(&self.pump, &self.reason, "a peer", &error.to_string());
                Err(self.closed())
            }
        }
    }

    fn closed(&self) -> PumpError {
        PumpError(
            self.reason
                .get()
                .unwrap_or_else(|| "the connection is closed".to_owned()),
        )
    }
}

impl<R: ServiceRole> Drop for PumpTransport<R> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.cancel.cancel();
    }
}

/// What to make of a failed send.
enum Refusal<R: ServiceRole> {
    /// The connection is unusable.
    NotRefused,
    /// Only this message was refused, and it carried no request: nothing to answer.
    Dropped,
    /// Only this message was refused: this error answers the request it carried.
    Answer(RxJsonRpcMessage<R>),
}

/// Whether `error` refuses one message only ([`CallError::Refused`]), and if so, the error
/// answer to the request `id` it carried: the caller learns why at once, and the connection and
/// every other caller carry on.
fn refusal<R: ServiceRole>(peer: &str, error: &CallError, id: Option<RequestId>) -> Refusal<R> {
    let CallError::Refused { reason: why, .. } = error else {
        return Refusal::NotRefused;
    };
    tracing::warn!(peer = %peer, "a message was refused: {why}");
    let Some(id) = id else {
        return Refusal::Dropped;
    };
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": MESSAGE_REFUSED, "message": why},
    });
    match serde_json::from_value(answer) {
        Ok(answer) => Refusal::Answer(answer),
        Err(_) => Refusal::Dropped,
    }
}

/// The JSON-RPC error code of the answer that stands in for a request the transport refused:
/// in the range the spec leaves to implementations.
const MESSAGE_REFUSED: i64 = -32001;

/// Ends a connection whose sending failed: the reader then reports it closed and every request
/// in flight fails at once.
fn fail(pump: &Pump, reason: &CloseReason, peer: &str, error: &str) {
    tracing::warn!(peer = %peer, "sending failed: {error}");
    reason.set(error.to_owned());
    pump.close();
}

fn excerpt(text: &str) -> String {
    let mut short: String = text.chars().take(200).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

/// What stands in, in a `tools/list` answer, for a tool's field that nests deeper than the JSON
/// parser allows: the hub reads it as "this schema is too deep".
pub const TOO_DEEP: &str = "runbyte: nested deeper than 127 levels";

/// How deep serde_json lets a message nest (its recursion limit is 128).
const MAX_DEPTH: usize = 127;

/// The JSON-RPC error code of the answer that stands in for one the peer sent but that could
/// not be read: the spec's "parse error".
const UNREADABLE: i64 = -32700;

/// Makes what it can of a message from a downstream server that did not parse (only ever called
/// then, so the well-formed path pays nothing): a `tools/list` answer with too-deep tool fields
/// cut, else an error answer to the request whose `id` it carries.
fn recover<R: ServiceRole>(text: &str, error: &serde_json::Error) -> Option<RxJsonRpcMessage<R>> {
    let scan = Scan::of(text);
    if scan.too_deep
        && scan.only_in_tools
        && let Some(cut) = scan.cut(text)
        && let Ok(message) = serde_json::from_str::<RxJsonRpcMessage<R>>(&cut)
    {
        return Some(message);
    }
    let id = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => {
            if value.get("method").is_some() {
                return None;
            }
            value.get("id").cloned()?
        }
        Err(_) => serde_json::from_str(scan.id.and_then(|(a, b)| text.get(a..b))?).ok()?,
    };
    if !(id.is_string() || id.is_number()) {
        return None;
    }
    let why = if scan.too_deep {
        format!("the answer nests deeper than {MAX_DEPTH} levels")
    } else {
        format!("the answer is not a valid JSON-RPC response ({error})")
    };
    tracing::warn!("{why}: failing request {id}");
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": UNREADABLE, "message": why},
    });
    serde_json::from_value(answer).ok()
}

/// One pass over a message's text, building nothing: how deep it nests, where, and where its
/// `id` is.
#[derive(Debug, Default)]
struct Scan {
    /// Whether it nests deeper than [`MAX_DEPTH`].
    too_deep: bool,
    /// Whether every too-deep place lies in a field of a tool in `result.tools`.
    only_in_tools: bool,
    /// The byte ranges of the tool fields to cut.
    cuts: Vec<(usize, usize)>,
    /// The byte range of the top-level `id` value.
    id: Option<(usize, usize)>,
}

/// A container open during a [`Scan`].
struct Open {
    object: bool,
    /// In an object: whether the next string is a key.
    expect_key: bool,
    /// In an object: the last key's raw bytes.
    key: (usize, usize),
}

impl Scan {
    fn of(text: &str) -> Scan {
        let bytes = text.as_bytes();
        let mut scan = Scan {
            only_in_tools: true,
            ..Scan::default()
        };
        let mut stack: Vec<Open> = Vec::new();
        // The tool field being read (its start, and whether it went too deep).
        let mut field: Option<(usize, bool)> = None;
        let mut value_start: Option<usize> = None;
        let key_is = |stack: &[Open], at: usize, name: &str| {
            stack.get(at).is_some_and(|open| {
                open.object && bytes.get(open.key.0..open.key.1) == Some(name.as_bytes())
            })
        };
        let mut i = 0;
        while i < bytes.len() {
            let byte = bytes[i];
            match byte {
                b'"' => {
                    let start = i;
                    i += 1;
                    while i < bytes.len() && bytes[i] != b'"' {
                        i += if bytes[i] == b'\\' { 2 } else { 1 };
                    }
                    if let Some(open) = stack.last_mut()
                        && open.object
                        && open.expect_key
                    {
                        open.key = (start + 1, i.min(bytes.len()));
                        open.expect_key = false;
                    } else if stack.len() == 1 && key_is(&stack, 0, "id") {
                        scan.id = Some((start, (i + 1).min(bytes.len())));
                    }
                }
                b'{' | b'[' => {
                    // A tool's field: root { result { tools [ tool { field
                    if stack.len() == 4
                        && key_is(&stack, 0, "result")
                        && key_is(&stack, 1, "tools")
                        && !stack[2].object
                        && stack[3].object
                    {
                        field = Some((i, false));
                    }
                    stack.push(Open {
                        object: byte == b'{',
                        expect_key: byte == b'{',
                        key: (0, 0),
                    });
                    if stack.len() > MAX_DEPTH {
                        scan.too_deep = true;
                        match &mut field {
                            Some((_, deep)) => *deep = true,
                            None => scan.only_in_tools = false,
                        }
                    }
                }
                b'}' | b']' => {
                    if stack.len() == 1
                        && key_is(&stack, 0, "id")
                        && let Some(start) = value_start.take()
                    {
                        scan.id = Some((start, i));
                    }
                    stack.pop();
                    if stack.len() == 4
                        && let Some((start, deep)) = field.take()
                        && deep
                    {
                        scan.cuts.push((start, i + 1));
                    }
                }
                b',' => {
                    if let Some(open) = stack.last_mut() {
                        open.expect_key = open.object;
                    }
                    if stack.len() == 1
                        && let Some(start) = value_start.take()
                        && key_is(&stack, 0, "id")
                    {
                        scan.id = Some((start, i));
                    }
                }
                b':' if stack.len() == 1 => value_start = Some(i + 1),
                _ => {}
            }
            i += 1;
        }
        scan
    }

    /// The text with each too-deep tool field replaced by [`TOO_DEEP`].
    fn cut(&self, text: &str) -> Option<String> {
        if self.cuts.is_empty() {
            return None;
        }
        let marker = serde_json::to_string(TOO_DEEP).ok()?;
        let mut out = String::with_capacity(text.len());
        let mut from = 0;
        for &(start, end) in &self.cuts {
            out.push_str(text.get(from..start)?);
            out.push_str(&marker);
            from = end;
        }
        out.push_str(text.get(from..)?);
        Some(out)
    }
}

/// The JSON-RPC error answer for a message that did not parse, or `None` when the message was a
/// response or notification (which get no answer).
fn garbage_answer(text: &str, error: &serde_json::Error) -> Option<String> {
    let error_answer = |id: serde_json::Value, code: i64, message: String| {
        Some(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                .to_string(),
        )
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return error_answer(
            serde_json::Value::Null,
            -32700,
            format!("Parse error: {error}"),
        );
    };
    let id = value.get("id").cloned();
    let method = value.get("method").and_then(|m| m.as_str());
    let valid_id = id
        .as_ref()
        .is_some_and(|id| id.is_string() || id.is_number());
    match (
        value.get("jsonrpc").and_then(|v| v.as_str()),
        method,
        valid_id,
    ) {
        (Some("2.0"), Some(method), true) => error_answer(
            id.unwrap_or_default(),
            -32602,
            format!("Invalid params for `{method}`: {error}"),
        ),
        (Some("2.0"), Some(_), false) if id.is_none() => None,
        _ => error_answer(
            if valid_id {
                id.unwrap_or_default()
            } else {
                serde_json::Value::Null
            },
            -32600,
            "Invalid Request: not a JSON-RPC 2.0 request, response or notification".to_owned(),
        ),
    }
}

impl<R: ServiceRole> rmcp::transport::Transport<R> for PumpTransport<R> {
    type Error = PumpError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<R>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Written here when the pump never blocks, else queued for the writer thread (in
        // order); not waited for either way. A write that fails ends the connection, which the
        // reader reports (with the peer's exit status) and rmcp then fails every request in
        // flight: waiting for each write would add a thread hop to every message.
        let closed = |reason: &CloseReason| {
            PumpError(
                reason
                    .get()
                    .unwrap_or_else(|| "the connection is closed".to_owned()),
            )
        };
        // A message the transport refuses alone (too large, say) fails only its own request:
        // the reader's queue gets an error answer for it, and the connection goes on.
        let id = match &item {
            JsonRpcMessage::Request(request) => Some(request.id.clone()),
            _ => None,
        };
        if let Some(direct) = &self.direct {
            direct.sent(&item);
        }
        let answered = match &item {
            JsonRpcMessage::Response(response) => Some(&response.id),
            JsonRpcMessage::Error(error) => error.id.as_ref(),
            _ => None,
        };
        let rewrite = self
            .rewrite
            .as_ref()
            .zip(answered)
            .filter(|(rewrite, id)| rewrite.rewrites(id))
            .map(|(rewrite, id)| (rewrite.clone(), id.clone()));
        let mut answer = None;
        let sent = serde_json::to_string(&item)
            .map(|text| match rewrite {
                Some((rewrite, id)) => rewrite.outgoing(&id, text),
                None => text,
            })
            .map_err(|e| PumpError(format!("cannot encode a message: {e}")))
            .and_then(|text| match &self.outgoing {
                Some(outgoing) => outgoing.send((text, id)).map_err(|_| closed(&self.reason)),
                None => match self.pump.send(&text) {
                    Ok(()) => Ok(()),
                    Err(error) => match refusal::<R>("a peer", &error, id) {
                        Refusal::NotRefused => {
                            fail(&self.pump, &self.reason, "a peer", &error.to_string());
                            Err(closed(&self.reason))
                        }
                        Refusal::Dropped => Ok(()),
                        Refusal::Answer(message) => {
                            answer = Some(message);
                            Ok(())
                        }
                    },
                },
            });
        let answers = answer.and_then(|answer| Some((self.answers.upgrade()?, answer)));
        async move {
            if let Some((answers, answer)) = answers {
                let _ = answers.send(answer).await;
            }
            sent
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<R>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.stop.store(true, Ordering::Relaxed);
        self.cancel.cancel();
        let pump = self.pump.clone();
        let _ = tokio::task::spawn_blocking(move || pump.close()).await;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn answer(text: &str) -> serde_json::Value {
        let error = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        serde_json::from_str(&garbage_answer(text, &error).unwrap()).unwrap()
    }

    fn deep(levels: usize) -> String {
        format!("{}{}", "[".repeat(levels), "]".repeat(levels))
    }

    type FromServer = RxJsonRpcMessage<rmcp::RoleClient>;

    fn recovered(text: &str) -> Option<serde_json::Value> {
        let error = serde_json::from_str::<FromServer>(text).unwrap_err();
        recover::<rmcp::RoleClient>(text, &error).map(|m| serde_json::to_value(m).unwrap())
    }

    #[test]
    fn tool_call_answers_read_directly_as_the_general_parse_reads_them() {
        let direct = tool_call_answers();
        let call = |id: i64| -> TxJsonRpcMessage<rmcp::RoleClient> {
            let params = rmcp::model::CallToolRequestParams::new("echo");
            JsonRpcMessage::request(
                ClientRequest::CallToolRequest(rmcp::model::Request::new(params)),
                RequestId::Number(id),
            )
        };
        let answers = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Echo: m1"}]}}"#,
            r#"{"result":{"structuredContent":{"a":[1,2.5,"x"]},"isError":false,"content":[]},"id":2,"jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"no"}],"isError":true,"_meta":{"k":1}}}"#,
        ];
        for (at, text) in answers.iter().enumerate() {
            let id = at as i64 + 1;
            // Not asked for: read the general way.
            assert!(direct.answer(text).is_none());
            direct.sent(&call(id));
            let read = direct.answer(text).unwrap();
            let general = serde_json::from_str::<FromServer>(text).unwrap();
            assert_eq!(
                serde_json::to_value(&read).unwrap(),
                serde_json::to_value(&general).unwrap(),
                "{text}"
            );
            let JsonRpcMessage::Response(JsonRpcResponse {
                result: ServerResult::CallToolResult(_),
                ..
            }) = general
            else {
                panic!("the general parse reads {text} as another result");
            };
            // Answered once: a second answer with its id is read the general way.
            assert!(direct.answer(text).is_none());
        }
        direct.sent(&call(9));
        // Other shapes: the general parse reads them.
        for text in [
            r#"{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"bad"}}"#,
            r#"{"jsonrpc":"2.0","id":9,"result":{"resultType":"input_required","inputRequests":{}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":9,"result":{"content":[]},"extra":1}"#,
            r#"{"jsonrpc":"2.0","id":9,"result":{}}"#,
        ] {
            assert!(direct.answer(text).is_none(), "{text}");
        }
        // Other requests are not picked.
        let ping: TxJsonRpcMessage<rmcp::RoleClient> = JsonRpcMessage::request(
            ClientRequest::PingRequest(Default::default()),
            RequestId::Number(10),
        );
        direct.sent(&ping);
        let text = r#"{"jsonrpc":"2.0","id":10,"result":{"content":[]}}"#;
        assert!(direct.answer(text).is_none());
    }

    /// An answer to `id`, of one of the shapes a server may give.
    fn answer_of(id: &RequestId, shape: u8) -> String {
        let id = serde_json::to_string(id).unwrap();
        match shape % 4 {
            0 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"ok"}}]}}}}"#
            ),
            1 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32602,"message":"no such tool"}}}}"#
            ),
            2 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[],"isError":true,"extra":1}}}}"#
            ),
            _ => format!(
                r#"{{"id":{id},"result":{{"structuredContent":{{"a":1}},"content":[]}},"jsonrpc":"2.0"}}"#
            ),
        }
    }

    #[test]
    fn a_routed_answer_reaches_its_caller_and_nothing_else_is_taken() {
        let direct = tool_call_answers();
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
        // Nothing routed: every message is left to the other paths.
        assert!(direct.routed(progress).is_none());
        let (first, mut first_answer) = direct.open_route().unwrap().unwrap();
        let (second, mut second_answer) = direct.open_route().unwrap().unwrap();
        assert_eq!(first, RequestId::Number(ROUTED_IDS));
        assert_ne!(first, second);
        // A notification is read once, for rmcp; an answer to rmcp's own request is left alone.
        assert!(matches!(
            direct.routed(progress),
            Some(Some(JsonRpcMessage::Notification(_)))
        ));
        assert!(
            direct
                .routed(&answer_of(&RequestId::Number(3), 0))
                .is_none()
        );
        assert!(direct.routed(r#"{"jsonrpc":"#).is_none());
        // Answers in another order than the requests, one an error.
        assert!(matches!(direct.routed(&answer_of(&second, 1)), Some(None)));
        assert!(matches!(
            second_answer.try_recv(),
            Ok(JsonRpcMessage::Error(error)) if error.error.message == "no such tool"
        ));
        assert!(first_answer.try_recv().is_err());
        assert!(matches!(direct.routed(&answer_of(&first, 0)), Some(None)));
        assert!(matches!(
            first_answer.try_recv(),
            Ok(JsonRpcMessage::Response(JsonRpcResponse {
                result: ServerResult::CallToolResult(_),
                ..
            }))
        ));
        // Answered once: a second answer to the same id is no caller's.
        assert!(direct.routed(&answer_of(&first, 0)).is_none());
        // The reader's end fails what waits, and no route opens after it.
        let (_, mut waiting) = direct.open_route().unwrap().unwrap();
        direct.close_routes();
        assert!(matches!(
            waiting.try_recv(),
            Err(oneshot::error::TryRecvError::Closed)
        ));
        assert!(matches!(direct.open_route(), Some(None)));
    }

    #[test]
    fn routes_whose_callers_gave_up_make_room_and_live_ones_are_bounded() {
        let direct = tool_call_answers();
        let abandoned: Vec<_> = (0..MAX_ROUTED)
            .map(|_| direct.open_route().unwrap().unwrap())
            .collect();
        drop(abandoned);
        let live: Vec<_> = (0..MAX_ROUTED)
            .map(|_| direct.open_route().unwrap().unwrap())
            .collect();
        assert_eq!(direct.routes.lock().unwrap().waiting.len(), MAX_ROUTED);
        // Every one waits: the next request goes through rmcp instead.
        assert!(direct.open_route().is_none());
        drop(live);
        assert!(direct.open_route().unwrap().is_some());
    }

    proptest::proptest! {
        /// Over generated interleavings of answers (each of several shapes) to routed requests,
        /// answers to rmcp's own, notifications and noise: each routed request gets exactly its
        /// own answer, once, and nothing else is taken from rmcp.
        #[test]
        fn each_routed_request_gets_its_own_answer(
            script in proptest::collection::vec((0u8..5, 0u8..8, 0u8..4), 1..60)
        ) {
            let direct = tool_call_answers();
            let mut open: Vec<(RequestId, oneshot::Receiver<FromServer>, u8)> = Vec::new();
            for (step, pick, shape) in script {
                match step {
                    0 | 1 => {
                        let (id, answer) = direct.open_route().unwrap().unwrap();
                        open.push((id, answer, shape));
                    }
                    2 if !open.is_empty() => {
                        let (id, mut answer, shape) = open.remove(pick as usize % open.len());
                        proptest::prop_assert!(matches!(
                            direct.routed(&answer_of(&id, shape)),
                            Some(None)
                        ));
                        let message = answer.try_recv().unwrap();
                        let got = match &message {
                            JsonRpcMessage::Response(response) => &response.id,
                            JsonRpcMessage::Error(error) => error.id.as_ref().unwrap(),
                            _ => panic!("not an answer: {message:?}"),
                        };
                        proptest::prop_assert_eq!(got, &id);
                        proptest::prop_assert_eq!(
                            matches!(message, JsonRpcMessage::Error(_)),
                            shape % 4 == 1
                        );
                    }
                    3 => {
                        let theirs = RequestId::Number(i64::from(pick));
                        proptest::prop_assert!(!matches!(
                            direct.routed(&answer_of(&theirs, shape)),
                            Some(None)
                        ));
                    }
                    _ => {
                        let noise = ["", "{", "[]", "null", r#"{"jsonrpc":"2.0"}"#][pick as usize % 5];
                        proptest::prop_assert!(!matches!(direct.routed(noise), Some(None)));
                    }
                }
                for (_, answer, _) in &mut open {
                    proptest::prop_assert!(answer.try_recv().is_err());
                }
            }
            proptest::prop_assert_eq!(
                direct.routes.lock().unwrap().waiting.len(),
                open.len()
            );
        }
    }

    #[test]
    fn too_deep_tool_fields_are_cut_and_the_other_tools_stand() {
        let text = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"tools":[{{"name":"ok","inputSchema":{{"type":"object"}}}},{{"name":"deep","inputSchema":{{"a":{}}}}}]}}}}"#,
            deep(200)
        );
        let message = recovered(&text).unwrap();
        assert_eq!(message["id"], 7);
        let tools = &message["result"]["tools"];
        assert_eq!(tools[0]["inputSchema"]["type"], "object");
        assert_eq!(tools[1]["name"], "deep");
        assert_eq!(tools[1]["inputSchema"], TOO_DEEP);
    }

    #[test]
    fn an_unreadable_answer_fails_its_request_at_once() {
        // Too deep outside a tool: the id is found without parsing the whole.
        let text = format!(
            r#"{{"jsonrpc":"2.0","result":{{"content":{}}},"id":"call-3"}}"#,
            deep(300)
        );
        let message = recovered(&text).unwrap();
        assert_eq!(message["id"], "call-3");
        assert_eq!(message["error"]["code"], UNREADABLE);
        assert!(
            message["error"]["message"]
                .as_str()
                .unwrap()
                .contains("nests deeper than 127 levels")
        );
        // Neither a result nor an error.
        let message = recovered(r#"{"jsonrpc":"2.0","id":5}"#).unwrap();
        assert_eq!(message["id"], 5);
        assert_eq!(message["error"]["code"], UNREADABLE);
        // No id to answer: skipped, as stray output is.
        assert!(recovered("not json at all").is_none());
        assert!(recovered(&deep(300)).is_none());
    }

    #[test]
    fn the_depth_scan_finds_the_id_wherever_it_is() {
        let text = format!(r#"{{"id" : 12 ,"x":{}}}"#, deep(200));
        let scan = Scan::of(&text);
        assert!(scan.too_deep && !scan.only_in_tools);
        let (a, b) = scan.id.unwrap();
        assert_eq!(text[a..b].trim(), "12");
        let text = format!(r#"{{"x":{},"id":"a\"b"}}"#, deep(200));
        let (a, b) = Scan::of(&text).id.unwrap();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text[a..b]).unwrap(),
            "a\"b"
        );
    }

    #[test]
    fn bad_messages_get_the_error_the_spec_asks_for() {
        assert_eq!(answer("{not json")["error"]["code"], -32700);
        assert_eq!(answer(r#"{"hello": 1}"#)["error"]["code"], -32600);
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":3}"#)["error"]["code"],
            -32602
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":3}"#)["id"],
            7
        );
        let error = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        assert!(
            garbage_answer(
                r#"{"jsonrpc":"2.0","method":"notifications/x","params":3}"#,
                &error
            )
            .is_none()
        );
    }
}
