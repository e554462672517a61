//! The host's side of one execution, the same for both isolations: it starts the engine, serves
//! module requests, makes the tool calls (budget, calls in flight, per-call timeout bounded by
//! the time left), gathers console output within its budget, and ends the execution at the
//! deadline plus grace whatever the engine is doing.

use std::{
    io,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use futures::{FutureExt, StreamExt, stream::FuturesUnordered};
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::{Child, ChildStdin, ChildStdout},
    sync::{Semaphore, mpsc},
    task::JoinSet,
};
use tokio_util::sync::CancellationToken;

use crate::platform::{job::ChildJob, memory};

use super::{
    ErrorKind, LogLine, ModuleProvider, ToolBridge, ToolCall,
    engine::{self, Link, ModuleSource, human_duration},
    protocol::{
        EngineLimits, FromEngine, PROTOCOL_VERSION, Report, TRANSPILE_MEMORY_BYTES, ToEngine,
    },
    transpile::Transpiled,
};

/// The longest line a worker may send: tool arguments (16 MiB at most) with room to spare.
const MAX_LINE_BYTES: usize = 64 << 20;
/// Messages an engine thread may have sent that the host has not read yet.
const ENGINE_CHANNEL_MESSAGES: usize = 16;
/// The arguments of its tool calls that the host holds for one execution, at most: 64 MiB
/// (one call's arguments are at most 16 MiB). While the calls in flight hold this much, or
/// `max_in_flight` calls are in flight, the host reads nothing more from the engine, whose next
/// message then waits (a worker's pipe fills; a thread's channel is bounded).
pub(crate) const MAX_HELD_ARGUMENT_BYTES: usize = 64 << 20;
/// The longest server or tool name a call may name: 1 KiB. MCP asks tool names of at most 128
/// characters; a longer one is refused before anything looks it up.
pub(crate) const MAX_NAME_BYTES: usize = 1024;

/// A running `runbyte worker`.
pub(crate) struct WorkerProcess {
    /// Dropped before the child (whose handle it uses on Windows).
    job: ChildJob,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: Vec<u8>,
}

impl WorkerProcess {
    /// Starts a worker and waits for its greeting.
    pub(crate) async fn spawn(exe: &std::path::Path, args: &[String]) -> io::Result<Self> {
        let mut command = tokio::process::Command::new(exe);
        command
            .args(args)
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true);
        // Windows's system libraries expect `SystemRoot` in every process's environment.
        #[cfg(windows)]
        if let Some(root) = std::env::var_os("SystemRoot") {
            command.env("SystemRoot", root);
        }
        let mut child = command.spawn()?;
        let job = ChildJob::of_tokio(&child);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other("the worker's pipes are missing"));
        };
        let mut worker = WorkerProcess {
            job,
            child,
            stdin,
            stdout: BufReader::new(stdout),
            line: Vec::new(),
        };
        let greeting = tokio::time::timeout(Duration::from_secs(10), worker.recv()).await;
        match greeting {
            Ok(Some(Ok(FromEngine::Ready { version }))) if version == PROTOCOL_VERSION => {
                Ok(worker)
            }
            Ok(Some(Ok(FromEngine::Ready { version }))) => Err(io::Error::other(format!(
                "the worker speaks protocol {version}, the host {PROTOCOL_VERSION}"
            ))),
            Ok(Some(Err(error))) => Err(io::Error::other(error)),
            Ok(_) => Err(io::Error::other(format!(
                "`{} {}` exited without greeting (is it a runbyte binary with the `worker` \
                 command?)",
                exe.display(),
                args.join(" ")
            ))),
            Err(_) => Err(io::Error::other("the worker did not greet within 10 s")),
        }
    }

    /// Whether the process has exited (while idle, say).
    pub(crate) fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    async fn send(&mut self, message: &ToEngine) -> io::Result<()> {
        // The worker caps itself where it can (see `platform::memory`); on Windows its job does.
        match message {
            ToEngine::Run { limits, .. } => self.job.cap_memory(limits.execution_memory()),
            ToEngine::Transpile { .. } => self.job.cap_memory(TRANSPILE_MEMORY_BYTES),
            _ => {}
        }
        let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
        line.push(b'\n');
        self.stdin.write_all(&line).await?;
        self.stdin.flush().await
    }

    /// The next message; `None` when the worker closed its stdout (it died).
    ///
    /// Cancel-safe, as a `select!` branch must be: a partly read line stays in `self.line` until
    /// the next call completes it (the only await is `fill_buf`, which loses nothing).
    async fn recv(&mut self) -> Option<Result<FromEngine, String>> {
        loop {
            let buffer = match self.stdout.fill_buf().await {
                Ok(buffer) => buffer,
                Err(_) => return None,
            };
            if buffer.is_empty() {
                return None;
            }
            let (used, complete) = match buffer.iter().position(|&b| b == b'\n') {
                Some(at) => {
                    self.line.extend_from_slice(&buffer[..at]);
                    (at + 1, true)
                }
                None => {
                    self.line.extend_from_slice(buffer);
                    (buffer.len(), false)
                }
            };
            self.stdout.consume(used);
            if self.line.len() > MAX_LINE_BYTES {
                self.line = Vec::new();
                return Some(Err("the worker sent a message over 64 MiB".to_owned()));
            }
            if complete {
                let message = serde_json::from_slice(&self.line)
                    .map_err(|e| format!("the worker sent an unreadable message: {e}"));
                self.line.clear();
                return Some(message);
            }
        }
    }

    /// Has the worker transpile a source: the worker's answer, or how the worker was lost.
    pub(crate) async fn transpile(
        &mut self,
        source: String,
    ) -> Result<Result<Transpiled, super::ExecError>, Ending> {
        let request = ToEngine::Transpile { id: 0, source };
        if let Err(error) = self.send(&request).await {
            return Err(Ending::Lost(format!(
                "cannot reach the sandbox worker: {error}"
            )));
        }
        loop {
            match self.recv().await {
                Some(Ok(FromEngine::Transpiled { result, .. })) => return Ok(result),
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(Ending::Lost(error)),
                None => {
                    let status = self.exit_status().await;
                    return Err(Ending::Lost(format!("the sandbox worker died ({status})")));
                }
            }
        }
    }

    /// Kills the process and reaps it.
    pub(crate) async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
    }

    /// How the process ended, once it closed its pipes.
    async fn exit_status(&mut self) -> String {
        match tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await {
            Ok(Ok(status)) if status.code() == Some(memory::CAP_EXIT_CODE) => format!(
                "{status}: its memory passed the worker's cap (the execution's memory limit plus \
                 {} MiB for transpiling)",
                TRANSPILE_MEMORY_BYTES >> 20
            ),
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(error)) => format!("status unknown: {error}"),
            Err(_) => {
                let _ = self.child.start_kill();
                let _ = self.child.wait().await;
                "it closed its output and was killed".to_owned()
            }
        }
    }
}

/// An engine on a host thread, reached through channels.
pub(crate) struct EngineThread {
    to_engine: super::mailbox::Sender<ToEngine>,
    /// Bounded, so that a host that stops reading (too many calls in flight) holds the engine
    /// back as a full pipe holds back a worker.
    from_engine: mpsc::Receiver<FromEngine>,
    cancel: Arc<AtomicBool>,
}

impl EngineThread {
    /// Starts the engine on a thread of its own, with a stack for the QuickJS limit plus margin.
    pub(crate) fn spawn(
        program: Transpiled,
        limits: EngineLimits,
        determinism: super::Determinism,
        modules: Arc<dyn ModuleProvider>,
        desk: Arc<Desk>,
    ) -> io::Result<Self> {
        let runtime = tokio::runtime::Handle::current();
        let (to_engine, inbox) = super::mailbox::mailbox();
        let (out, from_engine) = mpsc::channel(ENGINE_CHANNEL_MESSAGES);
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        let stack = limits.thread_stack();
        super::threads::run(
            stack,
            Box::new(move || {
                let done = out.clone();
                let link = Link::new(
                    Box::new(move |message| {
                        let _ = out.blocking_send(message);
                    }),
                    inbox,
                )
                .with_desk(desk, runtime, flag.clone());
                let (report, _) = engine::run(
                    &program,
                    limits,
                    determinism,
                    link,
                    ModuleSource::Local(modules),
                    flag,
                );
                let _ = done.blocking_send(FromEngine::Done { report });
                // The next execution's engine is made now, off its path.
                engine::yield_then_between_runs();
            }),
        )?;
        Ok(EngineThread {
            to_engine,
            from_engine,
            cancel,
        })
    }
}

/// Dropping the handle abandons the thread: it is told to stop at its next chance (its interrupt
/// handler and event loop read the flag) and finishes on its own.
impl Drop for EngineThread {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
    }
}

/// The connection to one engine.
pub(crate) enum Conn {
    Process(Box<WorkerProcess>),
    Thread(EngineThread),
}

impl Conn {
    async fn send(&mut self, message: ToEngine) -> io::Result<()> {
        match self {
            Conn::Process(worker) => worker.send(&message).await,
            Conn::Thread(thread) => {
                if let ToEngine::Cancel = message {
                    thread.cancel.store(true, Ordering::Relaxed);
                }
                thread
                    .to_engine
                    .send(message)
                    .map_err(|_| io::Error::other("the engine thread ended"))
            }
        }
    }

    async fn recv(&mut self) -> Option<Result<FromEngine, String>> {
        match self {
            Conn::Process(worker) => worker.recv().await,
            Conn::Thread(thread) => thread.from_engine.recv().await.map(Ok),
        }
    }

    /// Why the engine went away without a report.
    async fn lost(&mut self) -> String {
        match self {
            Conn::Process(worker) => {
                format!("the sandbox worker died ({})", worker.exit_status().await)
            }
            Conn::Thread(_) => "the sandbox engine thread ended without a result".to_owned(),
        }
    }
}

/// How an execution ended, seen from the host.
pub(crate) enum Ending {
    /// The engine reported.
    Done(Report),
    /// The host stopped it at the deadline plus grace (or grace after a cancellation).
    Stopped(ErrorKind),
    /// The engine died or broke the protocol; the message says how.
    Lost(String),
}

/// What the host gathered along the way.
#[derive(Default)]
pub(crate) struct Gathered {
    pub logs: Vec<LogLine>,
    pub log_bytes: usize,
    /// Console bytes over the host's budget (the engine drops first; this is a backstop).
    pub host_dropped: usize,
    /// The engine's latest running count of dropped bytes.
    pub engine_dropped: usize,
    pub calls: u32,
    pub failed_calls: u32,
    /// Whether the program was transpiled and started (a worker transpiles first).
    pub started: bool,
    /// The most argument bytes held at once for calls not yet finished.
    pub held_peak: usize,
}

/// What one execution needs from the host.
pub(crate) struct Job<'a> {
    pub limits: &'a super::Limits,
    pub modules: &'a Arc<dyn ModuleProvider>,
    pub bridge: &'a Arc<dyn ToolBridge>,
    pub cancel: &'a CancellationToken,
    pub grace: Duration,
    /// Time the execution already spent (transpiling in the host): the engine has less.
    pub spent: Duration,
    /// The bridge's [`super::Determinism`], asked once.
    pub determinism: super::Determinism,
}

impl Job<'_> {
    /// The execution's time, less what transpiling took.
    pub(crate) fn time_left(&self) -> Duration {
        self.limits.timeout.saturating_sub(self.spent)
    }

    pub(crate) fn engine_limits(&self) -> EngineLimits {
        EngineLimits {
            timeout_ms: self.limits.timeout.as_millis().min(u64::MAX as u128) as u64,
            spent_ms: self.spent.as_millis().min(u64::MAX as u128) as u64,
            memory_bytes: self.limits.memory_bytes,
            stack_bytes: self.limits.stack_bytes,
            max_output_bytes: self.limits.max_output_bytes,
            max_tool_calls: self.limits.max_tool_calls,
        }
    }
}

/// The host's side of an execution's tool calls: the checks (names, the call budget, the time
/// left), the bounds (calls in flight, argument bytes held) and the calls themselves, each
/// bounded by min(call timeout, time left). The same for both isolations: a worker's calls are
/// made by the host's loop ([`drive`]); an engine thread makes its own (see
/// `engine::Link::with_desk`), so that a call's request is written in the engine's own turn,
/// with no hand-off to an async thread first.
pub(crate) struct Desk {
    bridge: Arc<dyn ToolBridge>,
    record: bool,
    max_tool_calls: u32,
    max_in_flight: usize,
    call_timeout: Duration,
    deadline: Instant,
    in_flight: Arc<Semaphore>,
    /// The argument bytes of the calls not yet finished.
    held: Arc<AtomicUsize>,
    calls: AtomicU32,
    failed: AtomicU32,
    held_peak: AtomicUsize,
}

impl Desk {
    /// The desk of an execution starting now.
    pub(crate) fn new(job: &Job<'_>) -> Self {
        let max_in_flight = job.limits.max_in_flight as usize;
        Desk {
            bridge: job.bridge.clone(),
            record: job.determinism.record,
            max_tool_calls: job.limits.max_tool_calls,
            max_in_flight,
            call_timeout: job.limits.call_timeout,
            deadline: Instant::now() + job.time_left(),
            in_flight: Arc::new(Semaphore::new(max_in_flight)),
            held: Arc::new(AtomicUsize::new(0)),
            calls: AtomicU32::new(0),
            failed: AtomicU32::new(0),
            held_peak: AtomicUsize::new(0),
        }
    }

    /// What the desk counted, into `gathered`.
    fn gather(&self, gathered: &mut Gathered) {
        gathered.calls = self.calls.load(Ordering::Relaxed);
        gathered.failed_calls = self.failed.load(Ordering::Relaxed);
        gathered.held_peak = self.held_peak.load(Ordering::Relaxed);
    }
}

impl engine::CallDesk for Desk {
    /// While enough calls are in flight, or their arguments hold enough bytes, the engine's
    /// next call waits (a worker's is left unread; a thread waits for one to end).
    fn has_room(&self, pending: usize) -> bool {
        pending < self.max_in_flight && self.held.load(Ordering::Relaxed) < MAX_HELD_ARGUMENT_BYTES
    }

    fn take(&self, message: FromEngine) -> engine::Taken {
        let FromEngine::Call {
            id,
            server,
            tool,
            arguments,
            bytes,
            observed,
        } = message
        else {
            return engine::Taken::NotACall;
        };
        let calls = self.calls.fetch_add(1, Ordering::Relaxed).saturating_add(1);
        if self.record && !observed.is_empty() {
            self.bridge.observe(observed);
        }
        let refusal = if let Some(long) = [&server, &tool]
            .into_iter()
            .find(|name| name.len() > MAX_NAME_BYTES)
        {
            Some(format!(
                "a tool call names a server or tool of {} bytes (`{}…`); names are at most \
                 {MAX_NAME_BYTES} bytes",
                long.len(),
                long.chars().take(40).collect::<String>()
            ))
        } else if calls > self.max_tool_calls {
            Some(format!(
                "tool call budget exhausted: an execution may make at most {} tool calls",
                self.max_tool_calls
            ))
        } else if Instant::now() >= self.deadline {
            Some(format!(
                "{server}.{tool}: the execution's time is up; no more tool calls"
            ))
        } else {
            None
        };
        if let Some(refusal) = refusal {
            return engine::Taken::Refused(ToEngine::Reply {
                id,
                ok: None,
                err: Some(refusal),
                fresh_ms: None,
            });
        }
        let share = Held::new(&self.held, bytes);
        self.held_peak
            .fetch_max(self.held.load(Ordering::Relaxed), Ordering::Relaxed);
        engine::Taken::Call(
            call(
                self.bridge.clone(),
                self.in_flight.clone(),
                share,
                id,
                server,
                tool,
                arguments,
                self.call_timeout,
                self.deadline,
            )
            .boxed(),
        )
    }

    fn replied(&self, reply: &ToEngine) {
        if let ToEngine::Reply { err: Some(_), .. } = reply {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// Runs the execution over `conn` (already started for a thread; `start` is sent to a worker)
/// until the engine reports, dies, or the host stops it. A worker's tool calls are made here,
/// at `desk`; an engine thread makes its own there.
pub(crate) async fn drive(
    conn: &mut Conn,
    start: Option<ToEngine>,
    job: &Job<'_>,
    desk: &Desk,
    gathered: &mut Gathered,
) -> Ending {
    let ending = drive_calls(conn, start, job, desk, gathered).await;
    desk.gather(gathered);
    ending
}

async fn drive_calls(
    conn: &mut Conn,
    start: Option<ToEngine>,
    job: &Job<'_>,
    desk: &Desk,
    gathered: &mut Gathered,
) -> Ending {
    use engine::CallDesk as _;
    let deadline = desk.deadline;
    let mut hard_stop = deadline + job.grace;
    let mut stop_kind = ErrorKind::Timeout;
    if let Some(start) = start
        && let Err(error) = conn.send(start).await
    {
        return Ending::Lost(format!("cannot start the execution: {error}"));
    }
    // Answers made off the loop (refused calls, module loads) come back through here.
    let (reply_tx, mut replies) = mpsc::unbounded_channel::<ToEngine>();
    let mut loads = JoinSet::new();
    // The calls in flight, polled by this task itself: a call's reply goes to the engine from
    // here, with no task spawned per call and no hop through another worker thread.
    let mut calls = FuturesUnordered::new();
    let mut cancel_sent = false;
    loop {
        // Backpressure: while enough calls are in flight, leave the engine's messages unread.
        let reading = desk.has_room(calls.len());
        tokio::select! {
            biased;
            _ = job.cancel.cancelled(), if !cancel_sent => {
                cancel_sent = true;
                stop_kind = ErrorKind::Cancelled;
                hard_stop = hard_stop.min(Instant::now() + job.grace);
                let _ = conn.send(ToEngine::Cancel).await;
            }
            _ = tokio::time::sleep_until(hard_stop.into()) => {
                return Ending::Stopped(stop_kind);
            }
            Some(reply) = replies.recv() => {
                desk.replied(&reply);
                if let Err(error) = conn.send(reply).await {
                    return Ending::Lost(format!("{} ({error})", conn.lost().await));
                }
            }
            Some(reply) = calls.next(), if !calls.is_empty() => {
                if let Some(reply) = reply {
                    desk.replied(&reply);
                    if let Err(error) = conn.send(reply).await {
                        return Ending::Lost(format!("{} ({error})", conn.lost().await));
                    }
                }
            }
            message = conn.recv(), if reading => {
                let message = match message {
                    Some(Ok(message)) => message,
                    Some(Err(error)) => return Ending::Lost(error),
                    None => return Ending::Lost(conn.lost().await),
                };
                match message {
                    FromEngine::Done { report } => return Ending::Done(report),
                    FromEngine::Log { level, text } => {
                        let bytes = text.len() + 1;
                        if gathered.log_bytes + bytes <= job.limits.max_output_bytes {
                            gathered.log_bytes += bytes;
                            gathered.logs.push(LogLine { level, text });
                        } else {
                            gathered.host_dropped += bytes;
                        }
                    }
                    FromEngine::Dropped { bytes } => gathered.engine_dropped = bytes,
                    // The provider may compile a module on first use: off the async threads,
                    // unless it is ready.
                    FromEngine::Load { id, path } => {
                        if let Some(source) = job.modules.load_ready(&path) {
                            let source = source.map(|s| s.to_string());
                            let _ = reply_tx.send(ToEngine::Module { id, source });
                        } else {
                            let (modules, replies) = (job.modules.clone(), reply_tx.clone());
                            loads.spawn_blocking(move || {
                                let source = modules.load(&path).map(|s| s.to_string());
                                let _ = replies.send(ToEngine::Module { id, source });
                            });
                        }
                    }
                    FromEngine::Paths { id } => {
                        let (modules, replies) = (job.modules.clone(), reply_tx.clone());
                        loads.spawn_blocking(move || {
                            let _ = replies.send(ToEngine::PathList { id, paths: modules.paths() });
                        });
                    }
                    FromEngine::Started => gathered.started = true,
                    FromEngine::Transpiled { .. } => {}
                    call @ FromEngine::Call { .. } => match desk.take(call) {
                        engine::Taken::Call(call) => calls.push(call),
                        engine::Taken::Refused(refused) => {
                            let _ = reply_tx.send(refused);
                        }
                        engine::Taken::NotACall => {}
                    },
                    FromEngine::Ready { .. } => {}
                }
            }
        }
    }
}

/// One tool call: waits its turn among the calls in flight, then goes to the bridge bounded by
/// min(call timeout, time left). The reply for the engine, if any.
#[allow(clippy::too_many_arguments)]
async fn call(
    bridge: Arc<dyn ToolBridge>,
    in_flight: Arc<Semaphore>,
    _held: Held,
    id: u64,
    server: String,
    tool: String,
    arguments: Value,
    call_timeout: Duration,
    deadline: Instant,
) -> Option<ToEngine> {
    // A call cut short by the execution's own deadline gets no reply: the engine's deadline
    // (a little later than the host's) ends the execution as a timeout, which is what it is.
    let Ok(Ok(_permit)) = tokio::time::timeout_at(deadline.into(), in_flight.acquire_owned()).await
    else {
        return None;
    };
    let left = deadline.saturating_duration_since(Instant::now());
    let timeout = call_timeout.min(left);
    if timeout.is_zero() {
        return None;
    }
    // A bridge that bounds its calls itself may grant one tool longer than the default.
    let bound = if bridge.enforces_timeouts() {
        left
    } else {
        timeout
    };
    let request = ToolCall {
        server: server.clone(),
        tool: tool.clone(),
        arguments,
        timeout,
        time_left: left,
    };
    let (ok, err, fresh) = match tokio::time::timeout(bound, bridge.answer(request)).await {
        Ok(Ok(answer)) => (Some(answer.value.to_string()), None, answer.fresh),
        Ok(Err(message)) => (None, Some(message), None),
        Err(_) if bound < call_timeout => return None,
        Err(_) => (
            None,
            Some(format!(
                "{server}.{tool} timed out after {}",
                human_duration(timeout)
            )),
            None,
        ),
    };
    let fresh_ms = fresh
        .map(|fresh| fresh.min(super::MAX_FRESH).as_millis() as u64)
        .filter(|ms| *ms > 0);
    Some(ToEngine::Reply {
        id,
        ok,
        err,
        fresh_ms,
    })
}

/// A call's share of the argument bytes the host holds, given back when the call ends.
struct Held(Arc<AtomicUsize>, usize);

impl Held {
    fn new(held: &Arc<AtomicUsize>, bytes: usize) -> Held {
        held.fetch_add(bytes, Ordering::Relaxed);
        Held(held.clone(), bytes)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::Relaxed);
    }
}
