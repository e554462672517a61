//! The execution room: the [`Executor`] owns `execute_code` on the host side (an execution set
//! up with its limits from the policies and its bridge to the Hub, run in the sandbox once the
//! servers it imports are ready, and rendered for the client), the 2026-07-28 pause/resume
//! round trip (`round_trip`), and a client's direct calls (`direct`).
//!
//! Every tool call, a program's or a direct one, passes one gate (`gate`: the policies'
//! verdict, the Hub, telemetry, audit, tokens, inference, redaction). The bridge (`bridge`:
//! call counting, the replay journal, results as values) and the rendering (`render`: result,
//! console, summary, content blocks, truncation) are rooms of their own; the limits and
//! verdicts themselves belong to [`crate::policy`]. The gateway builds the executor from the
//! parts it needs ([`Parts`]); nothing here reaches back into the gateway.

mod bridge;
mod direct;
pub mod direct_ask;
mod gate;
mod pin_ask;
mod render;
mod round_trip;
mod tasks;
mod value;

use std::sync::{Arc, OnceLock};

use rmcp::model::{CallToolResult, ContentBlock};
use runbyte_plugin_api::wire::LimitsContext;

pub use bridge::{HubBridge, Replaying, Resumable};
pub use direct::{DirectCall, DirectError};
pub use gate::Gate;
#[cfg(test)]
pub use render::render;
use render::render_with;
pub use round_trip::{Client, Progress, Retry, StateSettings};
pub use tasks::{
    Ended as TaskEnd, ExecutionTasks, MAX_RUNNING as MAX_RUNNING_TASKS, Outcome as TaskOutcome,
    Record as TaskRecord,
};
#[cfg(test)]
use value::map_result;

use crate::{
    codegen::CodegenDriver,
    plugin::PolicyPlugin,
    relay::Paused,
    sandbox::{Limits, Sandbox, SandboxOptions},
    telemetry::{ExecutionEnd, Parent, Span},
    tokens::Ledger,
    vfs::Vfs,
};

/// What the gateway hands the executor: the parts an execution and a call use.
pub struct Parts {
    /// The one path of every tool call.
    pub gate: Gate,
    /// The policies, in order.
    pub policies: Vec<PolicyPlugin>,
    /// The virtual filesystem the programs import from.
    pub vfs: Arc<Vfs>,
    /// The codegen driver, when the gateway serves the VFS (it shows inferred types).
    pub codegen: Option<Arc<CodegenDriver>>,
    /// How the sandbox is started, on first use.
    pub sandbox: SandboxOptions,
    /// Servers exposed to clients directly only: programs may not call them.
    pub direct_only: Vec<String>,
    /// Where paused executions' state is signed and shared.
    pub state: StateSettings,
    /// What an answer says of its execution beside the result.
    pub summary: crate::config::Summary,
}

/// Runs programs and direct calls for every client of one gateway.
pub struct Executor {
    gate: Arc<Gate>,
    policies: Vec<PolicyPlugin>,
    vfs: Arc<Vfs>,
    codegen: Option<Arc<CodegenDriver>>,
    /// Each client session's token totals.
    tokens: Arc<Ledger>,
    direct_only: Arc<[String]>,
    sandbox_options: SandboxOptions,
    sandbox: OnceLock<Arc<Sandbox>>,
    state: StateSettings,
    summary: crate::config::Summary,
    paused: OnceLock<Result<Paused<CallToolResult>, String>>,
}

impl Executor {
    /// The executor of `parts`; nothing starts until it is used.
    pub fn new(parts: Parts) -> Self {
        Executor {
            gate: Arc::new(parts.gate),
            policies: parts.policies,
            vfs: parts.vfs,
            codegen: parts.codegen,
            tokens: Arc::default(),
            direct_only: parts.direct_only.into(),
            sandbox_options: parts.sandbox,
            sandbox: OnceLock::new(),
            state: parts.state,
            summary: parts.summary,
            paused: OnceLock::new(),
        }
    }

    /// The sandbox, its worker pool started on first use.
    pub fn sandbox(&self) -> Arc<Sandbox> {
        self.sandbox
            .get_or_init(|| Arc::new(Sandbox::new(self.sandbox_options.clone())))
            .clone()
    }

    /// A client session ended: its token totals and its kept values go with it.
    pub fn forget(&self, session: &str) {
        self.tokens.forget(session);
        self.gate.kept().end(session);
    }

    /// What `owner` keeps, as `/state` lists it.
    pub fn shelf(&self, owner: &crate::kept::Owner) -> crate::vfs::Shelf {
        match owner {
            crate::kept::Owner::Session(key) => crate::vfs::Shelf::Kept(self.gate.kept().list(key)),
            crate::kept::Owner::Refused(why) => crate::vfs::Shelf::Refused(why.clone()),
        }
    }
}

/// One execution, set up: its limits and its bridge.
pub struct Prepared {
    /// The execution's id, for logs and the audit log.
    pub id: String,
    /// Its limits.
    pub limits: Limits,
    /// Its bridge to the Hub (counting its calls).
    pub bridge: Arc<HubBridge>,
    /// Its span, from `prepare` (the policies' time is the execution's) until `run` ends it.
    span: std::sync::Mutex<Option<Span>>,
    /// Whose turn it waits for in the sandbox's admission; `None`: its session's.
    fairness: Option<String>,
}

impl Prepared {
    /// The execution waits for a sandbox worker in the turn of `key` (a client that may make
    /// many sessions, see `server::fairness_key`), not of its own session.
    #[must_use]
    pub fn admitted_as(mut self, key: &str) -> Self {
        self.fairness = Some(key.to_owned());
        self
    }
}

impl Executor {
    /// The policies' limits for one execution (or direct call) of `session`, and the calls each
    /// policy judges in it.
    async fn session_limits(
        &self,
        session: &str,
        listener: Option<&str>,
    ) -> Result<(Limits, Vec<crate::policy::Judge>), String> {
        let context = LimitsContext {
            session: session.to_owned(),
            listener: listener.map(str::to_owned),
        };
        crate::policy::limits(&self.policies, &context)
            .await
            .map_err(|message| format!("the sandbox policy failed: {message}"))
    }

    /// Sets up one execution of `session`: the policies' limits and a bridge.
    /// `listener` is the transport the session came through (`None` for `runbyte exec`).
    /// `asker` answers what a tool or a policy asks of the user (`None`: nobody can).
    /// `parent` is the trace context the client's request carried; the execution's span is its
    /// child. `keeps` is whose values its `./state` calls keep and recall.
    pub async fn prepare(
        &self,
        (session, keeps): (&str, crate::kept::Owner),
        listener: Option<&str>,
        asker: Option<Arc<dyn crate::relay::Asker>>,
        resumable: Resumable,
        parent: Parent,
    ) -> Result<Prepared, String> {
        let id = execution_id();
        let telemetry = self.gate.telemetry();
        let span = telemetry.execution(&parent, &id, session);
        let started = std::time::Instant::now();
        let (limits, judges) = match self.session_limits(session, listener).await {
            Ok(set) => set,
            Err(message) => {
                telemetry.execution_done(span, ExecutionEnd::NotRun, started.elapsed());
                return Err(message);
            }
        };
        let caller = gate::Caller {
            session: session.to_owned(),
            execution: id.clone(),
            judges,
            tokens: Arc::default(),
            cached: Arc::default(),
            keeps,
        };
        let bridge = Arc::new(HubBridge::new(
            self.gate.clone(),
            caller,
            asker,
            resumable,
            (span.context(), self.direct_only.clone()),
        ));
        Ok(Prepared {
            id,
            limits,
            bridge,
            span: std::sync::Mutex::new(Some(span)),
            fairness: None,
        })
    }

    /// The VFS once no server `code` imports is starting, and the limits with the time that took
    /// taken from the program's: a server still starting is waited for within the program's time
    /// limit, and a program that imports none never waits.
    async fn imports_ready(
        &self,
        prepared: &Prepared,
        code: &str,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<(Arc<crate::vfs::Snapshot>, Limits), CallToolResult> {
        let deadline = tokio::time::Instant::now() + prepared.limits.timeout;
        let ready = tokio::select! {
            ready = self.vfs.ready_for(code, deadline) => ready,
            () = cancel.cancelled() => {
                return Err(CallToolResult::error(vec![ContentBlock::text(
                    "Cancelled: while waiting for the servers it imports to start",
                )]));
            }
        };
        let snapshot = ready.map_err(|starting| {
            let starting: Vec<String> = starting
                .iter()
                .map(|folder| format!("`./servers/{folder}`"))
                .collect();
            CallToolResult::error(vec![ContentBlock::text(format!(
                "Timeout: the program imports {} still starting when its {} ms ran out; it did not run",
                starting.join(", "),
                prepared.limits.timeout.as_millis()
            ))])
        })?;
        let mut limits = prepared.limits.clone();
        limits.timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
        Ok((snapshot, limits))
    }

    /// Runs a prepared execution of `code` to its end and renders what the client gets.
    pub async fn run(
        &self,
        session: &str,
        prepared: &Prepared,
        code: String,
        cancel: tokio_util::sync::CancellationToken,
    ) -> CallToolResult {
        let span = prepared
            .span
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        let started = std::time::Instant::now();
        let (snapshot, limits) = match self.imports_ready(prepared, &code, &cancel).await {
            Ok(ready) => ready,
            Err(refusal) => {
                if let Some(span) = span {
                    self.gate.telemetry().execution_done(
                        span,
                        ExecutionEnd::NotRun,
                        started.elapsed(),
                    );
                }
                return refusal;
            }
        };
        // A replay that diverges from the run it replays stops the program (see `HubBridge`).
        let cancel = cancel.child_token();
        prepared.bridge.stop_on_divergence(cancel.clone());
        let outcome = self
            .sandbox()
            .execute(crate::sandbox::Execution {
                source: code,
                limits,
                modules: Arc::new(crate::vfs::Modules(snapshot)),
                bridge: prepared.bridge.clone(),
                cancel,
                client: prepared
                    .fairness
                    .clone()
                    .unwrap_or_else(|| session.to_owned()),
            })
            .await;
        tracing::info!(
            session = %crate::logging::session_tag(session),
            execution = %prepared.id,
            ms = outcome.duration.as_millis() as u64,
            calls = outcome.calls,
            ok = outcome.result.is_ok(),
            "execution"
        );
        if let Some(span) = span {
            let end = ExecutionEnd::Ran {
                error: outcome.result.as_ref().err().map(|error| error.kind),
                calls: outcome.calls,
                failed_calls: outcome.failed_calls,
            };
            self.gate
                .telemetry()
                .execution_done(span, end, outcome.duration);
        }
        self.show_inferred().await;
        let (duration, calls) = (outcome.duration, outcome.calls);
        let error = outcome.result.as_ref().err().map(|e| e.message.clone());
        let by_server = prepared.bridge.consumed().await;
        let consumed = by_server
            .values()
            .fold(crate::tokens::Count::default(), |sum, count| sum + *count);
        let add_to_session = |accounting| self.tokens.add(session, &accounting);
        let tokens = render::Tokens {
            consumed,
            session: &add_to_session,
        };
        // Reads the engine gave again count as the Hub's own kept answers do.
        let mut cached = prepared.bridge.cached();
        for (server, given) in &outcome.cached {
            cached = cached.saturating_add(*given);
            let telemetry = self.gate.telemetry();
            telemetry.cache_hits(server, "resource", u64::from(*given));
        }
        let (mut rendered, accounting) = render_with(
            outcome,
            prepared.limits.max_output_bytes,
            Some(tokens),
            cached,
            self.summary,
        );
        if let Some(diverged) = prepared.bridge.diverged() {
            rendered = CallToolResult::error(vec![ContentBlock::text(diverged)]);
        }
        if let Some(audit) = self.gate.audit() {
            let tokens = accounting.map(|accounting| crate::audit::ExecutionTokens {
                accounting,
                by_server,
            });
            audit.execution(
                session,
                &prepared.id,
                duration,
                calls,
                error.as_deref(),
                tokens.as_ref(),
            );
        }
        rendered
    }

    /// When the execution's calls changed an inferred result type, regenerates those servers'
    /// modules before the answer is sent (at most [`INFERRED_WAIT`]; past it the regeneration
    /// goes on and the answer does not wait), so that a `read_file` sent after the answer shows
    /// the type. An execution that changed none costs one lock.
    async fn show_inferred(&self) {
        let (Some(codegen), Some(inferred)) = (&self.codegen, self.gate.inferred()) else {
            return;
        };
        if !inferred.has_pending() {
            return;
        }
        let codegen = codegen.clone();
        // A task of its own: cut off by the bound, it still finishes (the servers it took are
        // regenerated all the same); the save is not waited for.
        let showing = tokio::spawn(async move { drop(codegen.show_inferred().await) });
        if tokio::time::timeout(INFERRED_WAIT, showing).await.is_err() {
            tracing::debug!(
                "the modules of changed inferred types took over {} ms; the answer did not wait",
                INFERRED_WAIT.as_millis()
            );
        }
    }
}

/// The longest an answer waits for the modules of servers whose inferred result types the
/// execution changed (see [`show_inferred`]).
const INFERRED_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// One execution id, unique in this process.
pub fn execution_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!(
        "x{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests;
