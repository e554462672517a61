//! The sandbox: the agent's TypeScript, transpiled with SWC, run in a fresh QuickJS runtime under
//! hard limits, its tool calls routed through the host's bridge.
//!
//! The contract the rest of Runbyte relies on is in this file; the engine, the transpiler, the
//! worker processes and the renderer live in the submodules:
//!
//! - `transpile`: TypeScript to JavaScript with SWC, with a map back to the source;
//! - `engine`: one execution in QuickJS (module loader, console, timers, `callTool`, renderer);
//! - `host`: the host's side of an execution (tool calls, budgets, the deadline's hard stop);
//! - `pool`: admission (workers, queue, busy) and the warm worker processes;
//! - `worker`: `runbyte worker`, the process an engine runs in; `protocol`: what they say.
//!
//! Where each limit is enforced:
//!
//! | limit | enforced by |
//! |---|---|
//! | `timeout` | the interrupt handler (keeps interrupting past the deadline, so `catch` cannot swallow it); the event loop's clock check between any two promise jobs and while waiting; the host's hard stop at deadline + grace (worker killed, thread abandoned) |
//! | `memory_bytes` | QuickJS's allocator limit (`JS_SetMemoryLimit`); out of memory is reported as `Memory` |
//! | `stack_bytes` | QuickJS's stack limit; the engine thread's stack is this plus 16 MiB |
//! | `max_tool_calls` | `callTool` in the engine, and again in the host |
//! | `max_in_flight` | a semaphore at the host's call desk (`host::Desk`); excess calls wait their turn |
//! | `call_timeout` | the host, bounded by the time left (`ToolCall::timeout`) |
//! | `max_output_bytes` | the engine's console budget (and the host's), the result's rendering budget, and the host's final trim of console lines so that result plus console fit |
//!
//! And the stages around QuickJS, where the program text and the values it makes also arrive:
//!
//! | bound | enforced by |
//! |---|---|
//! | source size, 1 MiB; nesting, 256 brackets; 1,024 operators or unbraced statement heads along one path | the scan in `transpile` before SWC runs |
//! | transpiling's time and memory | a source of at most 16 KiB: in the host before admission, where the scan bounds the work, within the deadline, at most twice `workers` at once. A larger one: after admission, within the deadline, in a worker process whose address space is capped at start plus heap, stacks and 1 GiB (`RLIMIT_AS`); a worker lost while transpiling ends that execution as `Limit` |
//! | host memory per execution | backpressure: while `max_in_flight` calls are running or their arguments hold 64 MiB, nothing more is read from a worker and an engine thread's next call waits for one to end; one call's arguments are at most 16 MiB, one worker message 64 MiB |
//! | names in a call | 1 KiB each, refused before any lookup; "did you mean" compares names of at most 256 characters whose lengths are close |
//! | the worker channel | one JSON line per message, read cancel-safely (a partial line waits for its end) |

mod engine;
mod host;
mod mailbox;
mod pool;
mod protocol;
mod threads;
mod transpile;
mod worker;

#[cfg(test)]
mod tests;

use std::{path::PathBuf, sync::Arc, time::Duration};

use futures::future::BoxFuture;
use runbyte_plugin_api::wire;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use transpile::{
    MAX_CHAIN, MAX_NESTING, MAX_SOURCE_BYTES, TRANSPILE_STACK_BYTES, Transpiled, transpile,
};
pub use worker::worker_main;

use host::{Conn, Ending, EngineThread, Gathered, Job};
use pool::Pool;
use protocol::{Program, Report, ToEngine};

/// How an execution is isolated from the host: the `isolation` limit, declared once in the
/// plugin API's `wire` vocabulary.
pub use runbyte_plugin_api::wire::Isolation;

/// The limits of one execution, in the sandbox's units: the same keys as [`wire::Limits`], each
/// set (a policy's answer, or the default of [`wire::RANGES`]). Every value lies in its key's
/// range; [`Sandbox::execute`] refuses one that does not ([`Limits::check`]) rather than
/// adjusting it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// `timeout-ms`: wall-clock time of the whole execution. Default 30 s. The host may shorten
    /// it to the time left (a resumed execution, a wait for servers): below the range's 1 ms,
    /// down to zero, the execution ends at once as [`ErrorKind::Timeout`].
    pub timeout: Duration,
    /// `memory-mb`: the QuickJS heap. Default 64 MiB.
    pub memory_bytes: usize,
    /// `stack-kb`: the QuickJS stack. Default 1 MiB.
    pub stack_bytes: usize,
    /// `max-tool-calls`: tool calls per execution. Default 1,000.
    pub max_tool_calls: u32,
    /// `max-in-flight`: tool calls in flight at once; more wait their turn. Default 16.
    pub max_in_flight: u32,
    /// `call-timeout-ms`: one tool call, further bounded by the time left. Default 30 s.
    pub call_timeout: Duration,
    /// `max-output-bytes`: result plus console output handed back. Default 64 KiB.
    pub max_output_bytes: usize,
    /// `isolation`: worker process or host thread. Default process.
    pub isolation: Isolation,
}

impl Default for Limits {
    /// The host's defaults, declared once in [`wire::RANGES`].
    fn default() -> Self {
        Limits::from(&wire::Limits::DEFAULTS)
    }
}

impl From<&wire::Limits> for Limits {
    /// The wire's limits in the sandbox's units, [`wire::Limits::DEFAULTS`] for a key left
    /// unset. Only units change: a value out of range stays so, for [`Limits::check`] (the host
    /// checks each policy's answer before, naming the policy).
    fn from(limits: &wire::Limits) -> Self {
        let limits = limits.or(&wire::Limits::DEFAULTS);
        let number = |value: Option<u64>| value.unwrap_or_default();
        let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        Limits {
            timeout: Duration::from_millis(number(limits.timeout_ms)),
            memory_bytes: size(number(limits.memory_mb)).saturating_mul(1 << 20),
            stack_bytes: size(number(limits.stack_kb)).saturating_mul(1 << 10),
            max_tool_calls: count(number(limits.max_tool_calls)),
            max_in_flight: count(number(limits.max_in_flight)),
            call_timeout: Duration::from_millis(number(limits.call_timeout_ms)),
            max_output_bytes: size(number(limits.max_output_bytes)),
            isolation: limits.isolation.unwrap_or_default(),
        }
    }
}

impl Limits {
    /// Whether every value lies in its key's range in [`wire::RANGES`] (in the wire's units,
    /// rounded down): the first that does not is the error. `timeout` may also be shorter than
    /// its range, down to zero: it is the time the execution has left.
    pub fn check(&self) -> Result<(), wire::OutOfRange> {
        let ms = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        let [
            timeout,
            memory,
            stack,
            calls,
            in_flight,
            call_timeout,
            output,
        ] = &wire::RANGES;
        let time_left = wire::Range { min: 0, ..*timeout };
        time_left.check(ms(self.timeout))?;
        memory.check(wide(self.memory_bytes >> 20))?;
        stack.check(wide(self.stack_bytes >> 10))?;
        calls.check(self.max_tool_calls.into())?;
        in_flight.check(self.max_in_flight.into())?;
        call_timeout.check(ms(self.call_timeout))?;
        output.check(wide(self.max_output_bytes))?;
        Ok(())
    }
}

/// The modules a program may import: the virtual filesystem, already transpiled to JavaScript.
pub trait ModuleProvider: Send + Sync {
    /// The JavaScript of the module at an absolute VFS path (`/servers/demo/echo.ts`), or `None`
    /// when there is no such module.
    fn load(&self, path: &str) -> Option<Arc<str>>;
    /// What [`ModuleProvider::load`] would give, if that takes no work (the module is compiled
    /// already, or there is no such module); `None` if it might. The host answers a module
    /// request this way on its own thread, and sends any other to a blocking thread.
    fn load_ready(&self, _path: &str) -> Option<Option<Arc<str>>> {
        None
    }
    /// Every module path, for "no such module" errors that list what exists.
    fn paths(&self) -> Vec<String>;
    /// An identifier of this set of modules; it changes whenever any module does, so a worker
    /// may cache modules per generation.
    fn generation(&self) -> u64;
    /// What these modules are, within the process, beside their generation (the VFS snapshot
    /// they come from): an engine thread keeps modules it compiled for the next execution whose
    /// provider has the same identity. `None`: nothing is kept.
    fn identity(&self) -> Option<std::sync::Weak<dyn std::any::Any + Send + Sync>> {
        None
    }
}

/// One tool call from a program, as the bridge receives it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The server's name as configured.
    pub server: String,
    /// The tool's original name.
    pub tool: String,
    /// Exactly the arguments the program passed, as JSON.
    pub arguments: Value,
    /// How long the call may take by default: the call timeout, bounded by the time the
    /// execution has left.
    pub timeout: Duration,
    /// The time the execution has left: the most any call may take, whatever a policy says.
    pub time_left: Duration,
}

/// What a program observed that a re-run of it must observe again to take the same path: the
/// clock's readings and the order in which its timers fired and its calls' replies arrived.
/// (`Math.random` needs no record: it is drawn from [`Determinism::seed`].)
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    /// `Date.now()` and `new Date()` readings, in milliseconds since the epoch, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clock: Vec<f64>,
    /// The event loop's turns, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<Turn>,
    /// The program observed more than a record keeps ([`MAX_OBSERVED`]): it cannot be replayed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overflow: bool,
}

impl Observed {
    /// Nothing observed.
    pub fn is_empty(&self) -> bool {
        self.clock.is_empty() && self.turns.is_empty() && !self.overflow
    }

    /// Appends what was observed after `self`.
    pub fn extend(&mut self, later: Observed) {
        self.clock.extend(later.clock);
        self.turns.extend(later.turns);
        self.overflow |= later.overflow;
    }

    /// How many readings and turns it holds.
    pub fn len(&self) -> usize {
        self.clock.len() + self.turns.len()
    }
}

/// One turn of an execution's event loop that depends on timing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Turn {
    /// The timer with this id (the program's n-th `setTimeout`) fired.
    Timer(u64),
    /// The reply to the program's n-th tool call (counted from 1) was delivered.
    Reply(u32),
}

/// The most readings and turns one execution records: past it, it is not replayable.
pub const MAX_OBSERVED: usize = 16_384;

/// How an execution draws what is not determined by its text: `Math.random`'s seed, and what
/// an earlier run of it observed when this run replays it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Determinism {
    /// Seeds `Math.random` (the same seed, the same numbers).
    pub seed: u64,
    /// Send what the program observes to [`ToolBridge::observe`] (with each tool call).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub record: bool,
    /// An earlier run's observations, served first (clock readings, then live time; the
    /// turns' order, then live order).
    #[serde(default, skip_serializing_if = "Observed::is_empty")]
    pub replay: Observed,
}

impl Determinism {
    /// A fresh seed, nothing recorded or replayed.
    pub fn fresh() -> Self {
        Determinism {
            seed: getrandom::u64().unwrap_or(0x9e37_79b9_7f4a_7c15),
            ..Determinism::default()
        }
    }
}

/// A call's answer, and how long the program may be given it again.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// What the program's `await` yields.
    pub value: Value,
    /// How long the engine may answer the same call (the same server, tool and arguments) of
    /// the same execution with `value` again, without asking the bridge: a read whose server
    /// said it may be kept, when nothing would judge the same call differently the second time.
    /// At most [`MAX_FRESH`]; each such answer counts in [`Outcome::cached`].
    pub fresh: Option<Duration>,
}

impl From<Value> for Answer {
    fn from(value: Value) -> Self {
        Answer { value, fresh: None }
    }
}

/// The longest an engine gives an answer again: an execution runs no longer.
pub const MAX_FRESH: Duration = Duration::from_secs(24 * 3600);

/// Where tool calls go: the host's policy check and the Hub.
pub trait ToolBridge: Send + Sync {
    /// Makes one call. `Ok(value)` is what the program's `await` yields; `Err(message)` is thrown
    /// in the program as an `Error` with that message.
    fn call(&self, call: ToolCall) -> BoxFuture<'static, Result<Value, String>>;

    /// [`ToolBridge::call`], saying how long its answer may be given again
    /// ([`Answer::fresh`]). Default: never.
    fn answer(&self, call: ToolCall) -> BoxFuture<'static, Result<Answer, String>> {
        let called = self.call(call);
        Box::pin(async move { called.await.map(Answer::from) })
    }

    /// Whether the bridge bounds each call itself (by `timeout`, or by a longer time a policy
    /// grants a tool, never past `time_left`). If not (the default), the sandbox stops a call at
    /// `timeout`; either way it stops every call at the execution's deadline.
    fn enforces_timeouts(&self) -> bool {
        false
    }

    /// How the execution draws its nondeterministic values. Default: a fresh seed, no record.
    fn determinism(&self) -> Determinism {
        Determinism::fresh()
    }

    /// What the program observed since its previous call, given just before each call when
    /// [`Determinism::record`] is set (in the program's order).
    fn observe(&self, observed: Observed) {
        let _ = observed;
    }
}

/// One console line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// `log`, `info`, `warn`, `error` or `debug`.
    pub level: String,
    /// The formatted arguments.
    pub text: String,
}

/// Why an execution produced no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// The source does not parse (or is too large or too deeply nested to try).
    Syntax,
    /// An uncaught exception.
    Runtime,
    /// The wall-clock limit.
    Timeout,
    /// The memory limit.
    Memory,
    /// The stack limit.
    Stack,
    /// Another limit (tool calls, output).
    Limit,
    /// An import that does not resolve.
    Module,
    /// The client cancelled the execution.
    Cancelled,
    /// Every worker is busy and the queue is full.
    Busy,
    /// The worker process died (a QuickJS abort, a signal).
    Crashed,
}

/// An execution's failure, pointing into the agent's own source where it can.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecError {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// The message, e.g. "TypeError: x is not a function".
    pub message: String,
    /// 1-based line and column in the agent's source, when known.
    pub position: Option<(u32, u32)>,
    /// The stack, mapped back to the agent's source, when there is one.
    pub stack: Option<String>,
}

/// What an execution produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The result, rendered to JSON deterministically, or why there is none.
    pub result: Result<Value, ExecError>,
    /// The console output, in order (bounded; see `logs_dropped`).
    pub logs: Vec<LogLine>,
    /// Console bytes that did not fit and were dropped.
    pub logs_dropped: usize,
    /// Tool calls made.
    pub calls: u32,
    /// Tool calls that failed (rejected in the program).
    pub failed_calls: u32,
    /// Of the calls, those the engine answered itself ([`Answer::fresh`]), by server.
    pub cached: std::collections::BTreeMap<String, u32>,
    /// Wall-clock time, waiting included.
    pub duration: Duration,
    /// Of it, the time spent waiting for a place among the running executions.
    pub queued: Duration,
    /// The most bytes of tool-call arguments the host held at once for this execution (calls
    /// read but not finished): bounded by backpressure, see the table above.
    pub held_argument_bytes: usize,
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.position {
            Some((line, column)) => write!(f, "{} (line {line}, column {column})", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ExecError {}

impl ExecError {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ExecError {
            kind,
            message: message.into(),
            position: None,
            stack: None,
        }
    }
}

/// How the sandbox runs executions.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// The program started as a worker. Default: this process's own executable.
    pub worker_exe: PathBuf,
    /// Its arguments. Default: `["worker"]`.
    pub worker_args: Vec<String>,
    /// Executions running at once (in either isolation), and worker processes kept warm.
    /// Default 2.
    pub workers: usize,
    /// Executions that may wait for a place before more are refused as busy. Default 128: a
    /// burst from fifty clients at once waits its turn rather than being refused.
    pub queue: usize,
    /// Executions one client may have waiting. Default 32. Places go to the clients in turn,
    /// whatever their queues hold.
    pub queue_per_client: usize,
    /// How long past its deadline (or its cancellation) an execution may take to stop on its
    /// own before its worker is killed or its thread abandoned. Default 500 ms.
    pub grace: Duration,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        SandboxOptions {
            worker_exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("runbyte")),
            worker_args: vec!["worker".to_owned()],
            workers: 2,
            queue: 128,
            queue_per_client: 32,
            grace: Duration::from_millis(500),
        }
    }
}

/// One program to run.
pub struct Execution {
    /// The agent's TypeScript (a module: imports, top-level `await`). Its result is what a
    /// top-level `exec` function returns (the original contract; it wins), else the value of
    /// `export default` (called if it is a function, awaited if it is a promise), else `null`.
    pub source: String,
    /// Its limits.
    pub limits: Limits,
    /// The modules it may import.
    pub modules: Arc<dyn ModuleProvider>,
    /// Where its tool calls go.
    pub bridge: Arc<dyn ToolBridge>,
    /// Cancelled when the client gives up (`notifications/cancelled`).
    pub cancel: CancellationToken,
    /// Who asked (a client session): executions are admitted fairly across clients.
    pub client: String,
}

/// Runs agents' programs. Cheap to create; share one behind an `Arc`.
pub struct Sandbox {
    pool: Arc<Pool>,
    /// Small sources transpiled in the host at once, before admission: twice the workers. A
    /// flood of executions waits here holding only its sources, not a blocking thread each.
    transpiling: Arc<tokio::sync::Semaphore>,
}

impl Sandbox {
    /// A sandbox. Inside a tokio runtime its workers start in the background at once; otherwise
    /// on first use.
    pub fn new(options: SandboxOptions) -> Sandbox {
        let transpiling = Arc::new(tokio::sync::Semaphore::new(options.workers.max(1) * 2));
        Sandbox {
            pool: Pool::new(options),
            transpiling,
        }
    }

    /// Runs one program to its end. Never blocks the runtime's threads: transpiling happens on
    /// a blocking thread, the engine in a worker process or on a thread of its own.
    ///
    /// The time limit counts from when the engine starts (after transpiling and any wait in the
    /// queue); `duration` counts everything.
    pub async fn execute(&self, execution: Execution) -> Outcome {
        let started = std::time::Instant::now();
        let span = tracing::info_span!(
            "sandbox.execute",
            isolation = ?execution.limits.isolation,
            source_bytes = execution.source.len()
        );
        let mut outcome = self.run(execution).instrument(span).await;
        outcome.duration = started.elapsed();
        outcome
    }

    async fn run(&self, execution: Execution) -> Outcome {
        let Execution {
            source,
            limits,
            modules,
            bridge,
            cancel,
            client,
        } = execution;
        if let Err(error) = limits.check() {
            return failed(ExecError::new(
                ErrorKind::Limit,
                format!("the execution's limits are not valid: {error}"),
            ));
        }
        if cancel.is_cancelled() {
            return failed(ExecError::new(
                ErrorKind::Cancelled,
                "the execution was cancelled",
            ));
        }
        // A small source is transpiled here, before admission, while other executions run: the
        // scan bounds the work it can cause and the deadline bounds the wait (inside the
        // workers' slots it cost a saturated gateway a third of its throughput). A large one
        // is transpiled only after admission, in a worker process, where a runaway costs that
        // worker.
        let program = if source.len() <= IN_PROCESS_TRANSPILE_BYTES {
            match transpile_here(source, &limits, &cancel, &self.transpiling).await {
                Ok(program) => Program::Transpiled(program),
                Err(ending) => return finish(ending, Gathered::default(), &limits),
            }
        } else {
            Program::Source(source)
        };
        let waited = std::time::Instant::now();
        let _permit = match self.pool.admit(&client, &cancel).await {
            Ok(permit) => permit,
            Err(error) => return failed(error),
        };
        let queued = waited.elapsed();
        // A large source for an engine thread: transpiled in a worker now, counted against the
        // execution's time (a worker running it transpiles it itself, likewise counted).
        let mut spent = Duration::ZERO;
        let program = match (limits.isolation, program) {
            (Isolation::Thread, Program::Source(source)) => {
                let started = std::time::Instant::now();
                match self.transpile_in_worker(source, &limits, &cancel).await {
                    Ok(program) => {
                        spent = started.elapsed();
                        Program::Transpiled(program)
                    }
                    Err(ending) => {
                        let mut outcome = finish(ending, Gathered::default(), &limits);
                        outcome.queued = queued;
                        return outcome;
                    }
                }
            }
            (_, program) => program,
        };
        let job = Job {
            limits: &limits,
            modules: &modules,
            bridge: &bridge,
            cancel: &cancel,
            grace: self.pool.options.grace,
            spent,
            determinism: bridge.determinism(),
        };
        let mut gathered = Gathered::default();
        let ending = match (limits.isolation, program) {
            (Isolation::Process, program) => self.run_in_worker(program, &job, &mut gathered).await,
            (Isolation::Thread, Program::Transpiled(program)) => {
                gathered.started = true;
                run_in_thread(program, &job, &mut gathered).await
            }
            (Isolation::Thread, Program::Source(_)) => {
                Ending::Lost("the program was not transpiled".to_owned())
            }
        };
        let mut outcome = finish(ending, gathered, &limits);
        outcome.queued = queued;
        outcome
    }

    /// A large source for an engine thread, transpiled in a worker process, as in process
    /// isolation: whatever the source makes SWC do costs that worker, never the host. Within the
    /// deadline plus grace.
    async fn transpile_in_worker(
        &self,
        source: String,
        limits: &Limits,
        cancel: &CancellationToken,
    ) -> Result<Transpiled, Ending> {
        let deadline = tokio::time::Instant::now() + limits.timeout;
        let mut worker = self
            .pool
            .checkout()
            .await
            .map_err(|error| Ending::Lost(format!("cannot start a sandbox worker: {error}")))?;
        let answer = tokio::select! {
            answer = worker.transpile(source) => answer,
            _ = tokio::time::sleep_until(deadline + self.pool.options.grace) => {
                Err(Ending::Stopped(ErrorKind::Timeout))
            }
            _ = cancel.cancelled() => Err(Ending::Stopped(ErrorKind::Cancelled)),
        };
        match answer {
            Ok(result) => {
                self.pool.checkin(worker);
                result.map_err(refused)
            }
            Err(ending) => {
                worker.kill().await;
                self.pool.replace_in_background();
                Err(match ending {
                    Ending::Lost(message) => transpile_lost(message),
                    other => other,
                })
            }
        }
    }

    async fn run_in_worker(
        &self,
        program: Program,
        job: &Job<'_>,
        gathered: &mut Gathered,
    ) -> Ending {
        // A worker can die while idle (killed, out of host memory) and look alive until its
        // pipe says otherwise. A run lost before it did anything observable (no tool call, no
        // console output) is tried once more on a fresh worker: it had no effects to repeat.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let attempt = std::time::Instant::now();
            // Only a large source can make the transpiler run away; for a small one the worker
            // sends no `started` and the host counts it as started from the beginning.
            gathered.started = match &program {
                Program::Source(source) => source.len() <= IN_PROCESS_TRANSPILE_BYTES,
                Program::Transpiled(_) => true,
            };
            let start = ToEngine::Run {
                program: program.clone(),
                limits: job.engine_limits(),
                determinism: job.determinism.clone(),
                generation: job.modules.generation(),
            };
            let worker = match self.pool.checkout().await {
                Ok(worker) => worker,
                Err(error) => {
                    self.pool.replace_in_background();
                    return Ending::Lost(format!("cannot start a sandbox worker: {error}"));
                }
            };
            let mut conn = Conn::Process(Box::new(worker));
            let desk = host::Desk::new(job);
            let ending = host::drive(&mut conn, Some(start), job, &desk, gathered).await;
            let Conn::Process(worker) = conn else {
                return ending;
            };
            match &ending {
                Ending::Done(_) => self.pool.checkin(*worker),
                Ending::Stopped(_) | Ending::Lost(_) => {
                    worker.kill().await;
                    self.pool.replace_in_background();
                }
            }
            // A worker that dies while transpiling most likely died of the source (its memory
            // or its stack); unless that was at once (a worker that died while idle), it is not
            // tried again.
            let untouched = gathered.calls == 0 && gathered.logs.is_empty();
            let at_once = attempt.elapsed() < std::time::Duration::from_millis(100);
            if matches!(ending, Ending::Lost(_))
                && untouched
                && (gathered.started || at_once)
                && attempts == 1
                && !job.cancel.is_cancelled()
            {
                tracing::warn!(
                    "a sandbox worker was lost before the program did anything; retrying once"
                );
                continue;
            }
            return match ending {
                Ending::Lost(message) if !gathered.started => transpile_lost(message),
                ending => ending,
            };
        }
    }
}

/// Thread isolation: the engine on a host thread, abandoned (not stopped) if it overruns the
/// deadline plus grace; it then runs on until QuickJS returns control (its interrupt handler
/// fires at the next chance; a long built-in such as `Array.prototype.join` on a huge length
/// finishes or hits the memory limit first). It keeps its memory until then.
async fn run_in_thread(program: Transpiled, job: &Job<'_>, gathered: &mut Gathered) -> Ending {
    let desk = Arc::new(host::Desk::new(job));
    let engine = match EngineThread::spawn(
        program,
        job.engine_limits(),
        job.determinism.clone(),
        job.modules.clone(),
        desk.clone(),
    ) {
        Ok(engine) => engine,
        Err(error) => return Ending::Lost(format!("cannot start a sandbox thread: {error}")),
    };
    let mut conn = Conn::Thread(engine);
    // Dropping the connection abandons the thread if it is still running.
    host::drive(&mut conn, None, job, &desk, gathered).await
}

/// The largest source transpiled in the host process, before admission: 16 KiB. The scan
/// bounds what such a source can make SWC do. Larger ones are transpiled after admission in a
/// worker process, where a runaway costs the worker.
pub const IN_PROCESS_TRANSPILE_BYTES: usize = 16 << 10;

/// A source that could not be run, as the execution's ending.
fn refused(error: ExecError) -> Ending {
    Ending::Done(Report {
        result: Err(error),
        calls: 0,
        failed_calls: 0,
        logs_dropped: 0,
        cached: Default::default(),
    })
}

/// A small source, transpiled in the host within the deadline (see
/// [`transpile::transpile_in_host`]).
async fn transpile_here(
    source: String,
    limits: &Limits,
    cancel: &CancellationToken,
    transpiling: &Arc<tokio::sync::Semaphore>,
) -> Result<Transpiled, Ending> {
    let deadline = tokio::time::Instant::now() + limits.timeout;
    let permit = tokio::select! {
        permit = transpiling.clone().acquire_owned() => permit.map_err(|_| {
            refused(ExecError::new(ErrorKind::Busy, "the sandbox is shutting down"))
        })?,
        _ = tokio::time::sleep_until(deadline) => return Err(Ending::Stopped(ErrorKind::Timeout)),
        _ = cancel.cancelled() => return Err(Ending::Stopped(ErrorKind::Cancelled)),
    };
    let work = transpile::transpile_in_host(source, permit);
    tokio::select! {
        done = work => done.map_err(refused),
        _ = tokio::time::sleep_until(deadline) => Err(Ending::Stopped(ErrorKind::Timeout)),
        _ = cancel.cancelled() => Err(Ending::Stopped(ErrorKind::Cancelled)),
    }
}

/// A worker lost before it started the program: transpiling it is what killed the worker.
fn transpile_lost(message: String) -> Ending {
    Ending::Done(Report {
        result: Err(ExecError::new(
            ErrorKind::Limit,
            format!(
                "transpiling the program exceeded the sandbox's limits ({message}); the source \
                 is too large or too deeply nested: split it or flatten it"
            ),
        )),
        calls: 0,
        failed_calls: 0,
        logs_dropped: 0,
        cached: Default::default(),
    })
}

fn failed(error: ExecError) -> Outcome {
    Outcome {
        result: Err(error),
        logs: Vec::new(),
        logs_dropped: 0,
        calls: 0,
        failed_calls: 0,
        cached: Default::default(),
        duration: Duration::ZERO,
        queued: Duration::ZERO,
        held_argument_bytes: 0,
    }
}

/// The outcome from how the execution ended and what was gathered; console lines are trimmed
/// from the end so that result plus console fit `max_output_bytes`.
fn finish(ending: Ending, gathered: Gathered, limits: &Limits) -> Outcome {
    let Gathered {
        mut logs,
        mut log_bytes,
        host_dropped,
        engine_dropped,
        calls,
        failed_calls,
        started: _,
        held_peak,
    } = gathered;
    // An execution stopped from outside gave no report: the calls the host saw are all it knows.
    let mut cached = std::collections::BTreeMap::new();
    let (result, calls, failed_calls, engine_dropped) = match ending {
        Ending::Done(report) => {
            cached = report.cached;
            (
                report.result,
                report.calls,
                report.failed_calls,
                report.logs_dropped.max(engine_dropped),
            )
        }
        Ending::Stopped(ErrorKind::Cancelled) => (
            Err(ExecError::new(
                ErrorKind::Cancelled,
                "the execution was cancelled",
            )),
            calls,
            failed_calls,
            engine_dropped,
        ),
        Ending::Stopped(kind) => (
            Err(ExecError::new(
                kind,
                format!(
                    "the execution exceeded its time limit of {} and was stopped",
                    engine::human_duration(limits.timeout)
                ),
            )),
            calls,
            failed_calls,
            engine_dropped,
        ),
        Ending::Lost(message) => (
            Err(ExecError::new(ErrorKind::Crashed, message)),
            calls,
            failed_calls,
            engine_dropped,
        ),
    };
    let mut logs_dropped = host_dropped + engine_dropped;
    if let Ok(value) = &result {
        let result_bytes = value.to_string().len();
        while log_bytes + result_bytes > limits.max_output_bytes {
            let Some(line) = logs.pop() else {
                break;
            };
            log_bytes -= line.text.len() + 1;
            logs_dropped += line.text.len() + 1;
        }
    }
    Outcome {
        result,
        logs,
        logs_dropped,
        calls,
        failed_calls,
        cached,
        duration: Duration::ZERO,
        queued: Duration::ZERO,
        held_argument_bytes: held_peak,
    }
}
