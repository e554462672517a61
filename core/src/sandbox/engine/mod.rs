//! One execution in QuickJS: a fresh runtime and context, the program's module graph through the
//! VFS loader, and an event loop of promise jobs, timers and tool-call replies that checks the
//! clock between every two jobs.
//!
//! The engine is the same whether it runs in a worker process or on a host thread; the
//! difference is its [`Link`] to the host (pipes or channels) and where modules come from.
//!
//! Every JavaScript value the host side keeps across calls (a pending call's resolve/reject, a
//! timer's callback, the built-ins captured before the program runs) is a `Persistent` in
//! [`Shared`], dropped before the context is: QuickJS asserts that nothing outlives its runtime.

mod compiled;
mod failure;
mod ffi;
mod globals;
mod loader;
mod memo;
mod nondet;
mod render;
mod tojson;

#[cfg(test)]
pub(crate) mod loader_for_tests {
    pub(crate) use super::loader::{candidates, closest, normalize};
}

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, HashMap, VecDeque},
    panic::{AssertUnwindSafe, catch_unwind},
    rc::Rc,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc::RecvTimeoutError,
    },
    time::{Duration, Instant},
};

pub(crate) use crate::platform::pipes::WorkerPipes;
use rquickjs::{
    CatchResultExt, Context, Ctx, Function, JsLifetime, Module, Persistent, Promise, Runtime,
    Value, context::intrinsic, promise::PromiseState,
};
use serde_json::Value as Json;

use failure::{describe_short, failure};
pub(crate) use failure::{human_bytes, human_duration};

use super::{
    Determinism, ErrorKind, ExecError, ModuleProvider, Turn,
    mailbox::{self, Receiver, Woke},
    protocol::{EngineLimits, FromEngine, Report, ToEngine},
    transpile::{AGENT_MODULE, EXEC_EXPORT, Transpiled},
};

/// Timers pending at once; more is a runaway program (each costs host memory outside the limit).
const MAX_TIMERS: usize = 10_000;
/// How often the running count of dropped console bytes is sent while output is being dropped.
const DROPPED_REPORT_EVERY: Duration = Duration::from_millis(50);

/// Ids of calls and module requests, unique over a worker's life so that a late reply to an
/// abandoned execution never matches a request of the next one.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// The engine's door to the host: messages out, messages in.
pub(crate) struct Link {
    out: Box<dyn Fn(FromEngine) + Send>,
    inbox: Inbox,
    stash: VecDeque<ToEngine>,
    /// The tool calls an engine on a host thread makes itself (see [`Link::with_desk`]).
    own: Option<RefCell<OwnCalls>>,
}

/// The host's tool-call desk (`host::Desk`), for an engine that makes its own calls.
pub(crate) trait CallDesk: Send + Sync {
    /// Whether another call may start while `pending` are in flight.
    fn has_room(&self, pending: usize) -> bool;
    /// A call from the engine: the future that makes it, or its reply at once.
    fn take(&self, call: FromEngine) -> Taken;
    /// A reply is going to the engine (counted if it is an error).
    fn replied(&self, reply: &ToEngine);
    /// When the execution's time is up.
    fn deadline(&self) -> Instant;
}

/// What [`CallDesk::take`] made of a message.
pub(crate) enum Taken {
    /// The call, made by polling this.
    Call(futures::future::BoxFuture<'static, Option<ToEngine>>),
    /// Refused at once: this is its reply.
    Refused(ToEngine),
    /// Not a call.
    NotACall,
}

/// The tool calls an engine thread makes itself: polled on the engine's own thread, in the
/// async runtime's context, and woken by a nudge of its mailbox. A call's request is then
/// written to its server in the engine's turn (a stdio server's pipe takes it at once, see
/// `pump::Sender`), and its answer wakes the engine directly: no hand-off to an async thread on
/// the way out, one on the way back.
struct OwnCalls {
    desk: Arc<dyn CallDesk>,
    runtime: tokio::runtime::Handle,
    calls: futures::stream::FuturesUnordered<futures::future::BoxFuture<'static, Option<ToEngine>>>,
    waker: std::task::Waker,
    cancel: Arc<AtomicBool>,
    /// Replies (refusals, calls ended) not yet given to the engine.
    ready: VecDeque<ToEngine>,
    /// The host's messages that arrived while a call waited for room.
    early: VecDeque<ToEngine>,
}

impl OwnCalls {
    /// Polls the calls in flight until none can go on now.
    fn poll(&mut self) {
        use futures::StreamExt as _;
        if self.calls.is_empty() {
            return;
        }
        let _entered = self.runtime.enter();
        let mut context = std::task::Context::from_waker(&self.waker);
        while let std::task::Poll::Ready(Some(reply)) = self.calls.poll_next_unpin(&mut context) {
            if let Some(reply) = reply {
                self.desk.replied(&reply);
                self.ready.push_back(reply);
            }
        }
    }

    /// Makes the call `message`, once there is room for it (as the host leaves a worker's next
    /// message unread while there is none): started and polled at once.
    fn take(&mut self, message: FromEngine, inbox: &Receiver<ToEngine>) {
        while !self.desk.has_room(self.calls.len()) {
            self.poll();
            let deadline = self.desk.deadline();
            if self.desk.has_room(self.calls.len())
                || self.cancel.load(Ordering::Relaxed)
                || Instant::now() >= deadline
            {
                break;
            }
            match inbox.wait(deadline.min(Instant::now() + LOOK_EVERY)) {
                Ok(Woke::Message(message)) => self.early.push_back(message),
                Ok(Woke::Nudged) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        match self.desk.take(message) {
            Taken::Call(call) => {
                self.calls.push(call);
                self.poll();
            }
            Taken::Refused(refused) => {
                self.desk.replied(&refused);
                self.ready.push_back(refused);
            }
            Taken::NotACall => {}
        }
    }

    /// The next message for the engine that needs no waiting.
    fn next(&mut self) -> Option<ToEngine> {
        if let Some(message) = self.early.pop_front() {
            return Some(message);
        }
        if self.ready.is_empty() {
            self.poll();
        }
        self.ready.pop_front()
    }
}

/// Calls still in flight when the engine is done are dropped in the runtime's context, so that
/// each can tell its server it was abandoned.
impl Drop for OwnCalls {
    fn drop(&mut self) {
        let _entered = self.runtime.enter();
        self.calls.clear();
    }
}

/// Where the host's messages come from.
enum Inbox {
    /// A mailbox from the host's side (an engine on a host thread).
    Channel(Receiver<ToEngine>),
    /// A worker's stdin, read by whichever thread waits for a message (the engine's own while it
    /// runs): a reply wakes the engine itself, with no reader thread handing it over.
    Pipe(PipeInbox),
}

impl Link {
    pub(crate) fn new(out: Box<dyn Fn(FromEngine) + Send>, inbox: Receiver<ToEngine>) -> Self {
        Link {
            out,
            inbox: Inbox::Channel(inbox),
            stash: VecDeque::new(),
            own: None,
        }
    }

    /// The link of an engine on a host thread that makes its tool calls itself, at `desk`, in
    /// `runtime`'s context; `cancel` is the execution's flag (a call waiting for room stops
    /// waiting when it is set).
    pub(crate) fn with_desk(
        mut self,
        desk: Arc<dyn CallDesk>,
        runtime: tokio::runtime::Handle,
        cancel: Arc<AtomicBool>,
    ) -> Self {
        if let Inbox::Channel(inbox) = &self.inbox {
            self.own = Some(RefCell::new(OwnCalls {
                desk,
                runtime,
                calls: Default::default(),
                waker: inbox.nudger(),
                cancel,
                ready: VecDeque::new(),
                early: VecDeque::new(),
            }));
        }
        self
    }

    /// A link over a worker's pipes, both ways (see [`PipeInbox`]).
    pub(crate) fn from_pipe(pipe: PipeInbox) -> Self {
        Link {
            out: Box::new(|_| {}),
            inbox: Inbox::Pipe(pipe),
            stash: VecDeque::new(),
            own: None,
        }
    }

    pub(crate) fn send(&self, message: FromEngine) {
        if let (Some(own), Inbox::Channel(inbox), FromEngine::Call { .. }) =
            (&self.own, &self.inbox, &message)
        {
            return own.borrow_mut().take(message, inbox);
        }
        match &self.inbox {
            Inbox::Pipe(pipe) => pipe.write(&message),
            Inbox::Channel(_) => (self.out)(message),
        }
    }

    /// The next message, waiting at most `timeout`. `Err(true)`: the host is gone.
    pub(crate) fn next(&mut self, timeout: Duration) -> Result<ToEngine, bool> {
        if let Some(message) = self.stash.pop_front() {
            return Ok(message);
        }
        if let (Some(own), Inbox::Channel(inbox)) = (&self.own, &self.inbox) {
            // Far enough for "no deadline": an engine's own deadline is never this far.
            let deadline = Instant::now() + timeout.min(Duration::from_secs(1 << 32));
            loop {
                if let Some(message) = own.borrow_mut().next() {
                    return Ok(message);
                }
                match inbox.wait(deadline) {
                    Ok(Woke::Message(message)) => return Ok(message),
                    Ok(Woke::Nudged) => {}
                    Err(RecvTimeoutError::Timeout) => return Err(false),
                    Err(RecvTimeoutError::Disconnected) => return Err(true),
                }
            }
        }
        match self.recv_timeout(timeout) {
            Ok(message) => Ok(message),
            Err(RecvTimeoutError::Timeout) => Err(false),
            Err(RecvTimeoutError::Disconnected) => Err(true),
        }
    }

    fn recv_timeout(&mut self, timeout: Duration) -> Result<ToEngine, RecvTimeoutError> {
        match &self.inbox {
            Inbox::Channel(inbox) => inbox.recv_timeout(timeout),
            Inbox::Pipe(inbox) => inbox.recv_timeout(timeout),
        }
    }

    /// Reads what the host has sent so far without waiting, so that a cancellation (or the
    /// host's end) is seen while the program runs; what it read waits for [`Link::next`].
    /// A channel needs nothing: its sender sets the cancel flag itself.
    fn look(&self) {
        if let Inbox::Pipe(inbox) = &self.inbox {
            inbox.look();
        }
    }

    /// Waits until `deadline` for the message `pick` accepts, keeping the others for later.
    fn wait_for<T>(
        &mut self,
        deadline: Instant,
        mut pick: impl FnMut(&ToEngine) -> Option<T>,
    ) -> Option<T> {
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let message = self.recv_timeout(left).ok()?;
            match pick(&message) {
                Some(found) => return Some(found),
                None => self.stash.push_back(message),
            }
        }
    }
}

/// How often a running program's interrupt handler looks at a worker's stdin for a
/// cancellation or the host's end.
const LOOK_EVERY: Duration = Duration::from_millis(5);

/// A worker's pipes: one JSON message a line each way. Whoever waits for a message reads
/// stdin (the worker's main thread between executions, the engine's thread during one), and a
/// running program's interrupt handler looks at it every [`LOOK_EVERY`] without waiting. A
/// message that stdout does not take at once waits while stdin is read meanwhile, so that an
/// engine sending calls faster than the host reads them never blocks a host that is sending it
/// replies (the pipes would otherwise fill both ways). A `run` clears the cancel flag and a
/// `cancel` sets it as soon as either is read; the worker exits when stdin closes (as soon as
/// that is seen, even in the middle of an execution), when stdout fails, and when a line is not
/// a message.
pub(crate) struct PipeInbox {
    pipes: WorkerPipes,
    state: RefCell<PipeState>,
    cancel: Arc<AtomicBool>,
}

#[derive(Default)]
struct PipeState {
    /// Read and not yet a complete line.
    buffer: Vec<u8>,
    /// Messages read and not yet taken.
    ready: VecDeque<ToEngine>,
}

impl PipeInbox {
    /// Reads and writes `pipes` (the worker's stdin and stdout, open for the life of the
    /// process; nothing else may write to its stdout).
    pub(crate) fn new(pipes: WorkerPipes, cancel: Arc<AtomicBool>) -> Self {
        PipeInbox {
            pipes,
            state: RefCell::default(),
            cancel,
        }
    }

    fn recv_timeout(&self, timeout: Duration) -> Result<ToEngine, RecvTimeoutError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(message) = self.state.borrow_mut().ready.pop_front() {
                return Ok(message);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if !self.pipes.readable(left) {
                return Err(RecvTimeoutError::Timeout);
            }
            self.read();
        }
    }

    fn look(&self) {
        if self.pipes.readable(Duration::ZERO) {
            self.read();
        }
    }

    /// Writes one message, reading stdin while stdout is full.
    fn write(&self, message: &FromEngine) {
        let Ok(mut line) = serde_json::to_vec(message) else {
            return;
        };
        line.push(b'\n');
        let mut written = 0;
        while written < line.len() {
            match self.pipes.write(&line[written..]) {
                Ok(wrote) if wrote > 0 => written += wrote,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {
                    if self.pipes.wait_to_write() {
                        self.read();
                    }
                }
                // The host is gone.
                _ => std::process::exit(0),
            }
        }
    }

    /// Reads what is there (after `readable`, without waiting) and takes every complete line.
    fn read(&self) {
        let mut state = self.state.borrow_mut();
        let PipeState { buffer, ready } = &mut *state;
        let filled = buffer.len();
        if !self.pipes.read(buffer) {
            // The host is gone.
            std::process::exit(0);
        }
        // What was there before holds no newline (complete lines are taken at once): the search
        // starts at the new bytes, so a long message costs one pass.
        let (mut start, mut from) = (0, filled);
        while let Some(at) = buffer[from..].iter().position(|&b| b == b'\n') {
            let line = &buffer[start..from + at];
            start = from + at + 1;
            from = start;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let message: ToEngine = match serde_json::from_slice(line) {
                Ok(message) => message,
                Err(error) => {
                    tracing::error!(%error, "sandbox worker: unreadable message from the host");
                    std::process::exit(2);
                }
            };
            match &message {
                ToEngine::Run { .. } => self.cancel.store(false, Ordering::SeqCst),
                ToEngine::Cancel => self.cancel.store(true, Ordering::SeqCst),
                _ => {}
            }
            ready.push_back(message);
        }
        buffer.drain(..start);
    }
}

/// Where the engine's modules come from.
pub(crate) enum ModuleSource {
    /// The host's provider, called directly (thread isolation).
    Local(Arc<dyn ModuleProvider>),
    /// Asked of the host over the link, cached in the worker per generation.
    Remote(Arc<Mutex<ModuleCache>>),
}

/// A worker's modules, valid for one generation of the host's provider.
#[derive(Default)]
pub(crate) struct ModuleCache {
    generation: u64,
    sources: HashMap<String, Option<Arc<str>>>,
    paths: Option<Arc<Vec<String>>>,
    /// The modules as this worker compiled them (see `compiled`).
    compiled: compiled::Compiled,
}

impl ModuleCache {
    /// Drops everything when the provider's generation changed.
    pub(crate) fn refresh(&mut self, generation: u64) {
        if self.generation != generation {
            *self = ModuleCache {
                generation,
                ..ModuleCache::default()
            };
        }
    }
}

/// The state of one execution that host functions, the loader and the event loop share.
pub(crate) struct Shared {
    link: RefCell<Link>,
    modules: ModuleSource,
    limits: EngineLimits,
    deadline: Instant,
    cancel: Arc<AtomicBool>,
    calls: Cell<u32>,
    failed_calls: Cell<u32>,
    output_used: Cell<usize>,
    logs_dropped: Cell<usize>,
    dropped_reported: Cell<Option<Instant>>,
    /// Messages of the module errors the loader threw, to tell them from the program's errors.
    module_errors: RefCell<Vec<String>>,
    /// Sources fetched while resolving, handed to the loader.
    loaded: RefCell<HashMap<String, Arc<str>>>,
    /// The host provider's generation when the execution started (thread isolation): what
    /// the modules it compiles are kept under. Any module it loads is of that generation or a
    /// later one, so nothing is ever kept under a generation newer than its source.
    start_generation: u64,
    /// The clock, `Math.random`, and the turns recorded or replayed.
    nondet: RefCell<nondet::Nondet>,
    /// Tool calls sent to the host so far (a call's number in [`Turn::Reply`]).
    calls_sent: Cell<u32>,
    /// Answers the host said may be given again, and those given.
    memo: RefCell<memo::Memo>,
    js: RefCell<JsState>,
}

/// The JavaScript values kept between calls; all dropped by [`Shared::clear_js`].
#[derive(Default)]
struct JsState {
    pending: HashMap<u64, Pending>,
    /// Replies that arrived before their turn in a replay, by call number.
    early: BTreeMap<u32, Reply>,
    timers: BTreeMap<(Instant, u64), Timer>,
    timer_due: HashMap<u64, Instant>,
    next_timer: u64,
    originals: Option<Originals>,
}

/// A tool call waiting for its reply: its promise's functions, its number, and what its
/// answer is kept under if the host says it may be given again ([`memo::key`]).
struct Pending {
    resolve: Persistent<Function<'static>>,
    reject: Persistent<Function<'static>>,
    number: u32,
    memo: Option<String>,
}

/// A tool call's reply: the result's JSON text, or the error's message; and how long the
/// result may be given again.
struct Reply {
    id: u64,
    ok: Option<String>,
    err: Option<String>,
    fresh_ms: Option<u64>,
}

/// A timer's callback and extra arguments.
type Timer = (
    Persistent<Function<'static>>,
    Vec<Persistent<Value<'static>>>,
);

/// Built-ins captured before the program runs, so that patching them changes nothing the host
/// reads.
struct Originals {
    /// The engine's own `Date`, which [`nondet`] wraps on first use.
    date: Persistent<Function<'static>>,
    date_to_iso: Persistent<Function<'static>>,
    map_for_each: Persistent<Function<'static>>,
    set_for_each: Persistent<Function<'static>>,
}

/// `Rc<Shared>` as runtime userdata, for the `runbyte:bridge` module.
struct SharedRef(Rc<Shared>);

// SAFETY: `SharedRef` holds no `'js` value; `Persistent`s inside are `'static` by construction.
unsafe impl<'js> JsLifetime<'js> for SharedRef {
    type Changed<'to> = SharedRef;
}

impl Shared {
    /// The deadline passed or the host cancelled.
    fn stopped(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }

    fn clear_js(&self) {
        *self.js.borrow_mut() = JsState::default();
    }

    /// Records console output against the output budget; `false` (and counted as dropped) when
    /// it does not fit.
    fn take_output(&self, bytes: usize) -> bool {
        let used = self.output_used.get();
        if used.saturating_add(bytes) <= self.limits.max_output_bytes {
            self.output_used.set(used + bytes);
            return true;
        }
        self.drop_output(bytes);
        false
    }

    /// Counts dropped console bytes, telling the host now and then (a killed worker cannot tell
    /// it at the end).
    fn drop_output(&self, bytes: usize) {
        let dropped = self.logs_dropped.get().saturating_add(bytes);
        self.logs_dropped.set(dropped);
        let now = Instant::now();
        let due = self
            .dropped_reported
            .get()
            .is_none_or(|last| now.duration_since(last) >= DROPPED_REPORT_EVERY);
        if due {
            self.dropped_reported.set(Some(now));
            self.link
                .borrow()
                .send(FromEngine::Dropped { bytes: dropped });
        }
    }

    fn original_date<'js>(&self, ctx: &Ctx<'js>) -> Option<Function<'js>> {
        let js = self.js.borrow();
        js.originals.as_ref()?.date.clone().restore(ctx).ok()
    }

    fn originals<'js>(
        &self,
        ctx: &Ctx<'js>,
    ) -> Option<(Function<'js>, Function<'js>, Function<'js>)> {
        let js = self.js.borrow();
        let o = js.originals.as_ref()?;
        Some((
            o.date_to_iso.clone().restore(ctx).ok()?,
            o.map_for_each.clone().restore(ctx).ok()?,
            o.set_for_each.clone().restore(ctx).ok()?,
        ))
    }
}

/// Runs one execution to its end on the current thread; gives the link back for the next one.
pub(crate) fn run(
    program: &Transpiled,
    limits: EngineLimits,
    determinism: Determinism,
    link: Link,
    modules: ModuleSource,
    cancel: Arc<AtomicBool>,
) -> (Report, Link) {
    let deadline =
        Instant::now() + Duration::from_millis(limits.timeout_ms.saturating_sub(limits.spent_ms));
    let start_generation = match &modules {
        ModuleSource::Local(provider) => provider.generation(),
        ModuleSource::Remote(_) => 0,
    };
    let shared = Rc::new(Shared {
        link: RefCell::new(link),
        modules,
        start_generation,
        limits,
        deadline,
        cancel,
        calls: Cell::new(0),
        failed_calls: Cell::new(0),
        output_used: Cell::new(0),
        logs_dropped: Cell::new(0),
        dropped_reported: Cell::new(None),
        module_errors: RefCell::new(Vec::new()),
        loaded: RefCell::new(HashMap::new()),
        nondet: RefCell::new(nondet::Nondet::new(determinism)),
        calls_sent: Cell::new(0),
        memo: RefCell::default(),
        js: RefCell::new(JsState::default()),
    });
    let result =
        catch_unwind(AssertUnwindSafe(|| execute(&shared, program))).unwrap_or_else(|_| {
            Err(plain(
                ErrorKind::Crashed,
                "the sandbox engine failed".to_owned(),
            ))
        });
    let report = Report {
        result,
        calls: shared.calls.get(),
        failed_calls: shared.failed_calls.get(),
        logs_dropped: shared.logs_dropped.get(),
        cached: shared.memo.borrow_mut().given(),
    };
    // The runtime left for `between_runs` (its functions, its loader) still holds `shared`:
    // the link is swapped out for one that goes nowhere.
    let (_, nowhere) = mailbox::mailbox();
    let link = shared.link.replace(Link::new(Box::new(|_| {}), nowhere));
    (report, link)
}

fn plain(kind: ErrorKind, message: String) -> ExecError {
    ExecError {
        kind,
        message,
        position: None,
        stack: None,
    }
}

type Intrinsics = (
    intrinsic::Date,
    intrinsic::Eval,
    intrinsic::RegExpCompiler,
    intrinsic::RegExp,
    intrinsic::Json,
    intrinsic::Proxy,
    intrinsic::MapSet,
    intrinsic::TypedArrays,
    intrinsic::Promise,
    intrinsic::WeakRef,
);

/// A fresh runtime and context, made while the thread had nothing to run; and the last
/// execution's, left for the thread to free once its report is out.
struct Engines {
    spare: Option<(Context, Runtime)>,
    used: Option<(Context, Runtime)>,
}

thread_local! {
    static ENGINES: RefCell<Engines> = const { RefCell::new(Engines { spare: None, used: None }) };
}

/// A runtime and a context with the intrinsics and nothing else: no program has run in it, no
/// limit, handler, loader or global of an execution is set.
fn fresh_engine() -> rquickjs::Result<(Context, Runtime)> {
    let runtime = Runtime::new()?;
    let context = Context::custom::<Intrinsics>(&runtime)?;
    Ok((context, runtime))
}

/// Between two executions on this thread, after the first's report went out: frees what it
/// left and makes the next one's runtime and context, so that neither is on an execution's
/// path (together they were most of a small program's time in the engine). Each execution
/// still gets a runtime of its own, untouched until then.
pub(crate) fn between_runs() {
    let used = ENGINES.with_borrow_mut(|engines| engines.used.take());
    drop(used);
    let spare = ENGINES.with_borrow(|engines| engines.spare.is_some());
    if !spare && let Ok(engine) = fresh_engine() {
        ENGINES.with_borrow_mut(|engines| engines.spare = Some(engine));
    }
}

/// [`between_runs`] after a report was sent, once the thread that takes the report had its
/// turn. The scheduler tends to wake that thread on this CPU, behind this one, even with another
/// CPU idle: freeing and making engines first would hold the answer back by their time (about
/// 0.2 ms on a small machine).
pub(crate) fn yield_then_between_runs() {
    std::thread::yield_now();
    between_runs();
}

fn execute(shared: &Rc<Shared>, program: &Transpiled) -> Result<Json, ExecError> {
    // What an earlier execution left, if `between_runs` was not called since, goes first.
    let (used, spare) =
        ENGINES.with_borrow_mut(|engines| (engines.used.take(), engines.spare.take()));
    drop(used);
    let (context, runtime) = match spare {
        Some(engine) => engine,
        None => fresh_engine()
            .map_err(|e| plain(ErrorKind::Memory, format!("cannot start QuickJS: {e}")))?,
    };
    runtime.set_max_stack_size(shared.limits.stack_bytes);
    let (deadline, cancel) = (shared.deadline, shared.cancel.clone());
    let (link, mut looked) = (Rc::downgrade(shared), Instant::now());
    // Keeps interrupting once the deadline passed: a `catch` cannot swallow it. Now and then it
    // looks at what the host sent (a worker's stdin), for a cancellation.
    runtime.set_interrupt_handler(Some(Box::new(move || {
        let now = Instant::now();
        if now.duration_since(looked) >= LOOK_EVERY {
            looked = now;
            if let Some(shared) = link.upgrade()
                && let Ok(link) = shared.link.try_borrow()
            {
                link.look();
            }
        }
        cancel.load(Ordering::Relaxed) || now >= deadline
    })));
    runtime.set_loader(
        loader::VfsResolver(shared.clone()),
        loader::VfsLoader(shared.clone()),
    );
    let result = context.with(|ctx| {
        let result = evaluate(&ctx, shared, program);
        shared.clear_js();
        let _ = ctx.remove_userdata::<SharedRef>();
        // Teardown after an out-of-memory error must not fail for want of a few bytes.
        ffi::set_memory_limit(&ctx, 0);
        result
    });
    // Freed by `between_runs`, once the report is out. Until then its functions and loader
    // keep `shared`, whose link `run` takes back first.
    ENGINES.with_borrow_mut(|engines| engines.used = Some((context, runtime)));
    result
}

/// Why the program stopped without a value.
enum Stop<'js> {
    Thrown(Value<'js>),
    /// A host-side failure (a conversion, an allocation) with its message.
    Host(String),
    /// The event loop has nothing left to wait for, yet the result never settled.
    Deadlock,
    /// The deadline passed or the execution was cancelled between two jobs.
    Stopped,
}

impl<'js> Stop<'js> {
    fn from_error(ctx: &Ctx<'js>, error: rquickjs::Error) -> Self {
        if error.is_exception() {
            Stop::Thrown(ctx.catch())
        } else {
            Stop::Host(error.to_string())
        }
    }
}

fn evaluate<'js>(
    ctx: &Ctx<'js>,
    shared: &Rc<Shared>,
    program: &Transpiled,
) -> Result<Json, ExecError> {
    let value =
        run_program(ctx, shared, program).map_err(|stop| failure(ctx, shared, program, stop))?;
    let budget = shared.limits.max_output_bytes;
    let mut renderer = render::Renderer::new(ctx, shared, budget);
    match renderer.render_top(&value) {
        Ok(json) => Ok(json),
        Err(render::RenderError::TooLarge) => Err(plain(
            ErrorKind::Limit,
            format!(
                "the result is larger than the output limit of {}; return less (a summary, a \
                 slice, the fields you need)",
                human_bytes(budget)
            ),
        )),
        Err(render::RenderError::Stopped(thrown)) => {
            Err(failure(ctx, shared, program, Stop::Thrown(thrown)))
        }
    }
}

fn run_program<'js>(
    ctx: &Ctx<'js>,
    shared: &Rc<Shared>,
    program: &Transpiled,
) -> Result<Value<'js>, Stop<'js>> {
    globals::install(ctx, shared).map_err(|e| Stop::from_error(ctx, e))?;
    nondet::install(ctx, shared).map_err(|e| Stop::from_error(ctx, e))?;
    if ctx.store_userdata(SharedRef(shared.clone())).is_err() {
        return Err(Stop::Host("cannot attach the bridge".to_owned()));
    }
    ffi::set_memory_limit(ctx, shared.limits.memory_bytes);
    let module = Module::declare(ctx.clone(), AGENT_MODULE, program.code())
        .map_err(|e| Stop::from_error(ctx, e))?;
    let (module, done) = module.eval().map_err(|e| Stop::from_error(ctx, e))?;
    settle(ctx, shared, done)?;
    let namespace = module.namespace().map_err(|e| Stop::from_error(ctx, e))?;
    let entry: Value = if program.has_exec() {
        namespace.get(EXEC_EXPORT)
    } else {
        namespace.get("default")
    }
    .map_err(|e| Stop::from_error(ctx, e))?;
    let value = match entry.as_function() {
        Some(function) => function
            .call::<_, Value>(())
            .map_err(|e| Stop::from_error(ctx, e))?,
        None => entry,
    };
    match value.as_promise() {
        Some(promise) => settle(ctx, shared, promise.clone()),
        None => Ok(value),
    }
}

/// Drives the event loop until `promise` settles: promise jobs (the clock checked between any
/// two), due timers, tool-call replies.
fn settle<'js>(
    ctx: &Ctx<'js>,
    shared: &Rc<Shared>,
    promise: Promise<'js>,
) -> Result<Value<'js>, Stop<'js>> {
    loop {
        loop {
            match promise.state() {
                PromiseState::Resolved => {
                    return match promise.result::<Value>() {
                        Some(Ok(value)) => Ok(value),
                        Some(Err(error)) => Err(Stop::from_error(ctx, error)),
                        None => Err(Stop::Host("a settled promise has no result".to_owned())),
                    };
                }
                PromiseState::Rejected => {
                    let _ = promise.result::<Value>();
                    return Err(Stop::Thrown(ctx.catch()));
                }
                PromiseState::Pending => {}
            }
            if shared.stopped() {
                return Err(Stop::Stopped);
            }
            match ffi::run_job(ctx) {
                Ok(true) => {}
                Ok(false) => break,
                Err(thrown) => return Err(Stop::Thrown(thrown)),
            }
        }
        let next_turn = shared.nondet.borrow().next_turn();
        if let Some(turn) = next_turn {
            replay_turn(ctx, shared, turn)?;
            continue;
        }
        let now = Instant::now();
        if let Some(timer) = globals::take_due_timer(ctx, shared, now) {
            fire(ctx, shared, timer)?;
            continue;
        }
        let early = shared.js.borrow_mut().early.pop_first();
        if let Some((_, reply)) = early {
            deliver(ctx, shared, reply)?;
            continue;
        }
        let (pending_calls, next_timer) = {
            let js = shared.js.borrow();
            (
                js.pending.len(),
                js.timers.keys().next().map(|(due, _)| *due),
            )
        };
        if pending_calls == 0 && next_timer.is_none() {
            return Err(Stop::Deadlock);
        }
        let wake = next_timer.map_or(shared.deadline, |due| due.min(shared.deadline));
        let message = shared
            .link
            .borrow_mut()
            .next(wake.saturating_duration_since(now));
        match message {
            Ok(ToEngine::Reply {
                id,
                ok,
                err,
                fresh_ms,
            }) => deliver(
                ctx,
                shared,
                Reply {
                    id,
                    ok,
                    err,
                    fresh_ms,
                },
            )?,
            Ok(ToEngine::Cancel) | Err(true) => shared.cancel.store(true, Ordering::Relaxed),
            Ok(_) | Err(false) => {}
        }
    }
}

/// Runs a due timer's callback.
fn fire<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    (id, callback, args): globals::DueTimer<'js>,
) -> Result<(), Stop<'js>> {
    shared.nondet.borrow_mut().took(Turn::Timer(id));
    let mut call_args = rquickjs::function::Args::new(ctx.clone(), args.len());
    for arg in args {
        call_args
            .push_arg(arg)
            .map_err(|e| Stop::from_error(ctx, e))?;
    }
    callback
        .call_arg::<Value>(call_args)
        .map_err(|e| Stop::from_error(ctx, e))?;
    Ok(())
}

/// Takes the turn an earlier run took next, when this run replays it: fires that timer at once
/// (whatever its delay), or waits for that call's reply, holding back replies that come early.
/// A turn the program cannot take (no such timer or call: it took another path) ends the
/// replay of turns; the rest is live.
fn replay_turn<'js>(ctx: &Ctx<'js>, shared: &Shared, turn: Turn) -> Result<(), Stop<'js>> {
    match turn {
        Turn::Timer(id) => match globals::take_timer(ctx, shared, id) {
            Some(timer) => {
                shared.nondet.borrow_mut().advance();
                fire(ctx, shared, timer)
            }
            None => {
                shared.nondet.borrow_mut().stop_replaying();
                Ok(())
            }
        },
        Turn::Reply(number) => {
            let held = shared.js.borrow_mut().early.remove(&number);
            if let Some(reply) = held {
                shared.nondet.borrow_mut().advance();
                return deliver(ctx, shared, reply);
            }
            let waiting = shared
                .js
                .borrow()
                .pending
                .values()
                .any(|pending| pending.number == number);
            if !waiting {
                shared.nondet.borrow_mut().stop_replaying();
                return Ok(());
            }
            let left = shared.deadline.saturating_duration_since(Instant::now());
            let message = shared.link.borrow_mut().next(left);
            match message {
                Ok(ToEngine::Reply {
                    id,
                    ok,
                    err,
                    fresh_ms,
                }) => {
                    let reply = Reply {
                        id,
                        ok,
                        err,
                        fresh_ms,
                    };
                    let of = shared.js.borrow().pending.get(&id).map(|p| p.number);
                    match of {
                        Some(of) if of == number => {
                            shared.nondet.borrow_mut().advance();
                            deliver(ctx, shared, reply)?;
                        }
                        Some(of) => {
                            shared.js.borrow_mut().early.insert(of, reply);
                        }
                        None => {}
                    }
                }
                Ok(ToEngine::Cancel) | Err(true) => shared.cancel.store(true, Ordering::Relaxed),
                Ok(_) | Err(false) => {}
            }
            Ok(())
        }
    }
}

/// Settles a tool call's promise with the host's reply.
fn deliver<'js>(ctx: &Ctx<'js>, shared: &Shared, reply: Reply) -> Result<(), Stop<'js>> {
    let Reply {
        id,
        ok,
        err,
        fresh_ms,
    } = reply;
    let Some(Pending {
        resolve,
        reject,
        number,
        memo,
    }) = shared.js.borrow_mut().pending.remove(&id)
    else {
        return Ok(());
    };
    shared.nondet.borrow_mut().took(Turn::Reply(number));
    let host = |e: rquickjs::Error| Stop::from_error(ctx, e);
    let resolve = resolve.restore(ctx).map_err(host)?;
    let reject = reject.restore(ctx).map_err(host)?;
    let failed = |reason: Value<'js>| {
        shared.failed_calls.set(shared.failed_calls.get() + 1);
        reject.call::<_, ()>((reason,))
    };
    match (ok, err) {
        (Some(text), _) => {
            // A read that may be given again is kept once it is known to parse (a hit parses
            // it the same way); only then is its text copied.
            let keep = memo.zip(fresh_ms).map(|(key, ms)| (key, ms, text.clone()));
            match ctx.json_parse(text).catch(ctx) {
                Ok(value) => {
                    if let Some((key, ms, text)) = keep {
                        let fresh = Duration::from_millis(ms);
                        let mut kept = shared.memo.borrow_mut();
                        kept.keep(key, &text, fresh, Instant::now());
                    }
                    resolve.call::<_, ()>((value,)).map_err(host)
                }
                Err(caught) => {
                    let reason = match caught {
                        rquickjs::CaughtError::Exception(e) => e.into_value(),
                        rquickjs::CaughtError::Value(v) => v,
                        rquickjs::CaughtError::Error(e) => globals::error_value(
                            ctx,
                            &format!("the tool's result is unreadable: {e}"),
                        )
                        .map_err(host)?,
                    };
                    failed(reason).map_err(host)
                }
            }
        }
        (None, err) => {
            let message = err.unwrap_or_else(|| "the tool call failed".to_owned());
            let reason = globals::error_value(ctx, &message).map_err(host)?;
            failed(reason).map_err(host)
        }
    }
}

#[cfg(test)]
mod pipe_tests {
    #![allow(clippy::unwrap_used)]

    use std::io::Write;

    use super::*;

    #[test]
    fn a_pipe_inbox_reads_lines_as_they_come_and_sees_a_cancellation_without_waiting() {
        let (reader, mut writer) = crate::platform::pipes::tests::pipe();
        // The engine's own output goes to a pipe of its own, which this test does not read.
        let (_unread, output) = crate::platform::pipes::tests::pipe();
        let cancel = Arc::new(AtomicBool::new(true));
        let inbox = PipeInbox::new(WorkerPipes::new(reader, output).unwrap(), cancel.clone());
        // `quick` where nothing may come; `ample` where a line was written (on Windows a reader
        // thread passes it on, which a loaded machine may not schedule for a while).
        let (quick, ample) = (Duration::from_millis(20), Duration::from_secs(30));
        assert!(matches!(
            inbox.recv_timeout(quick),
            Err(RecvTimeoutError::Timeout)
        ));
        // A message split across writes, then two in one, with a blank line between.
        writer.write_all(br#"{"t":"reply","id":1,"#).unwrap();
        assert!(inbox.recv_timeout(quick).is_err());
        writer
            .write_all(b"\"ok\":\"1\"}\n\n{\"t\":\"module\",\"id\":2,\"source\":null}\n{\"t\":")
            .unwrap();
        let first = inbox.recv_timeout(ample).unwrap();
        assert_eq!(
            first,
            ToEngine::Reply {
                id: 1,
                ok: Some("1".to_owned()),
                err: None,
                fresh_ms: None
            }
        );
        let second = inbox.recv_timeout(ample).unwrap();
        assert_eq!(
            second,
            ToEngine::Module {
                id: 2,
                source: None
            }
        );
        // A cancellation is seen by a look, without a wait, and kept for the next read. (On
        // Windows a look sees what the reader thread has passed on: the next looks, if not this
        // one, as a running program's interrupt handler looks every few milliseconds.)
        writer.write_all(b"\"cancel\"}\n").unwrap();
        cancel.store(false, Ordering::SeqCst);
        inbox.look();
        #[cfg(windows)]
        {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !cancel.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(LOOK_EVERY);
                inbox.look();
            }
        }
        assert!(cancel.load(Ordering::SeqCst));
        assert_eq!(inbox.recv_timeout(ample).unwrap(), ToEngine::Cancel);
        inbox.look();
        assert!(matches!(
            inbox.recv_timeout(quick),
            Err(RecvTimeoutError::Timeout)
        ));
    }
}
