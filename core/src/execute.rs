//! `execute_code` on the host side: an execution set up (its limits from the policies, its
//! bridge to the Hub), run in the sandbox once the servers it imports are ready, and rendered
//! for the client.
//!
//! The bridge (`bridge`: call counting, the policies' verdicts, the Hub, results as values) and
//! the rendering (`render`: result, console, summary, content blocks, truncation) are rooms of
//! their own; the limits and verdicts themselves belong to [`crate::policy`].

mod bridge;
mod render;

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock};
use runbyte_plugin_api::wire::LimitsContext;

#[cfg(test)]
use bridge::map_result;
pub use bridge::{HubBridge, Replaying, Resumable};
#[cfg(test)]
pub use render::render;
use render::render_with;

use crate::{
    sandbox::Limits,
    telemetry::{CallOutcome, ExecutionEnd, Parent, Span},
};

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

/// The policies' limits for one execution (or direct call) of `session`, and the calls each
/// policy judges in it.
async fn session_limits(
    runtime: &crate::gateway::Gateway,
    session: &str,
    listener: Option<&str>,
) -> Result<(Limits, Vec<crate::policy::Judge>), String> {
    let context = LimitsContext {
        session: session.to_owned(),
        listener: listener.map(str::to_owned),
    };
    crate::policy::limits(&runtime.policies, &context)
        .await
        .map_err(|message| format!("the sandbox policy failed: {message}"))
}

/// Sets up one execution of `session`: the policies' limits and a bridge.
/// `listener` is the transport the session came through (`None` for `runbyte exec`).
/// `asker` answers what a tool or a policy asks of the user (`None`: nobody can).
/// `parent` is the trace context the client's request carried; the execution's span is its
/// child.
pub async fn prepare(
    runtime: &crate::gateway::Gateway,
    session: &str,
    listener: Option<&str>,
    asker: Option<Arc<dyn crate::relay::Asker>>,
    resumable: Resumable,
    parent: Parent,
) -> Result<Prepared, String> {
    let id = execution_id();
    let span = runtime.telemetry.execution(&parent, &id, session);
    let started = std::time::Instant::now();
    let (limits, judges) = match session_limits(runtime, session, listener).await {
        Ok(set) => set,
        Err(message) => {
            runtime
                .telemetry
                .execution_done(span, ExecutionEnd::NotRun, started.elapsed());
            return Err(message);
        }
    };
    let bridge = Arc::new(
        HubBridge::new(
            runtime.hub.clone(),
            judges,
            session.to_owned(),
            id.clone(),
            runtime.audit.clone(),
            asker,
            resumable,
        )
        .with_direct_only(
            runtime
                .config
                .enabled_servers()
                .filter(|(name, _)| !runtime.config.exposure(name).in_code())
                .map(|(name, _)| name.clone())
                .collect(),
        )
        .with_telemetry(runtime.telemetry.clone(), span.context())
        .with_inference(runtime.inferred.clone()),
    );
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
    runtime: &crate::gateway::Gateway,
    prepared: &Prepared,
    code: &str,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<(Arc<crate::vfs::Snapshot>, Limits), CallToolResult> {
    let deadline = tokio::time::Instant::now() + prepared.limits.timeout;
    let ready = tokio::select! {
        ready = runtime.vfs.ready_for(code, deadline) => ready,
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
    runtime: &crate::gateway::Gateway,
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
    let (snapshot, limits) = match imports_ready(runtime, prepared, &code, &cancel).await {
        Ok(ready) => ready,
        Err(refusal) => {
            if let Some(span) = span {
                runtime
                    .telemetry
                    .execution_done(span, ExecutionEnd::NotRun, started.elapsed());
            }
            return refusal;
        }
    };
    // A replay that diverges from the run it replays stops the program (see `HubBridge`).
    let cancel = cancel.child_token();
    prepared.bridge.stop_on_divergence(cancel.clone());
    let outcome = runtime
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
        runtime
            .telemetry
            .execution_done(span, end, outcome.duration);
    }
    show_inferred(runtime).await;
    let (duration, calls) = (outcome.duration, outcome.calls);
    let error = outcome.result.as_ref().err().map(|e| e.message.clone());
    let by_server = prepared.bridge.consumed().await;
    let consumed = by_server
        .values()
        .fold(crate::tokens::Count::default(), |sum, count| sum + *count);
    let add_to_session = |accounting| runtime.tokens.add(session, &accounting);
    let tokens = render::Tokens {
        consumed,
        session: &add_to_session,
    };
    let (mut rendered, accounting) =
        render_with(outcome, prepared.limits.max_output_bytes, Some(tokens));
    if let Some(diverged) = prepared.bridge.diverged() {
        rendered = CallToolResult::error(vec![ContentBlock::text(diverged)]);
    }
    if let Some(audit) = &runtime.audit {
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

/// The longest an answer waits for the modules of servers whose inferred result types the
/// execution changed (see [`show_inferred`]).
const INFERRED_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

/// When the execution's calls changed an inferred result type, regenerates those servers'
/// modules before the answer is sent (at most [`INFERRED_WAIT`]; past it the regeneration
/// goes on and the answer does not wait), so that a `read_file` sent after the answer shows
/// the type. An execution that changed none costs one lock.
async fn show_inferred(runtime: &crate::gateway::Gateway) {
    let (Some(codegen), Some(inferred)) = (&runtime.codegen, &runtime.inferred) else {
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

/// How a call that reached the Hub ended.
fn call_outcome(answer: &Result<CallToolResult, crate::hub::CallError>) -> CallOutcome {
    match answer {
        Ok(result) if result.is_error == Some(true) => CallOutcome::ToolError,
        Ok(_) => CallOutcome::Ok,
        Err(crate::hub::CallError::Timeout { .. }) => CallOutcome::Timeout,
        Err(_) => CallOutcome::Failed,
    }
}

/// One execution id, unique in this process.
/// Calls `server`'s tool `tool` for a client that sees it directly (`expose = "direct"` or
/// `"both"`): the policies judge it as they judge a program's call (with the session's limits
/// for its timeout), the Hub checks the arguments and sends it, the audit log records it; the
/// server's result comes back as it is.
pub async fn direct(
    runtime: &crate::gateway::Gateway,
    session: &str,
    listener: Option<&str>,
    asker: Option<Arc<dyn crate::relay::Asker>>,
    (server, tool): (&str, &str),
    arguments: serde_json::Value,
    parent: Parent,
) -> Result<CallToolResult, String> {
    use std::borrow::Cow;

    use opentelemetry::context::FutureExt as _;
    use runbyte_plugin_api::wire;

    let (limits, judges) = session_limits(runtime, session, listener).await?;
    let execution = execution_id();
    let span = runtime.telemetry.tool_call(&parent.context(), server, tool);
    let started = std::time::Instant::now();
    let mut outcome = CallOutcome::Failed;
    let result = async {
        let granted = if judges.iter().any(|judge| judge.judged.covers(server)) {
            let spec = runtime
                .hub
                .tool(server, tool)
                .await
                .map_err(|e| e.to_string())?;
            let annotations = spec
                .annotations
                .as_ref()
                .map(|a| Cow::Owned(serde_json::to_value(a).unwrap_or_default()));
            let call = wire::Call {
                server: Cow::Borrowed(server),
                tool: Cow::Borrowed(tool),
                arguments: Cow::Borrowed(&arguments),
                annotations,
                context: wire::CallContext {
                    session: Cow::Borrowed(session),
                    execution: Cow::Borrowed(&execution),
                    calls: 0,
                    calls_to_server: 0,
                    calls_to_tool: 0,
                },
            };
            crate::policy::check_call(&judges, &call, limits.timeout, asker.as_deref())
                .await
                .inspect_err(|_| outcome = CallOutcome::Denied)?
        } else {
            None
        };
        let options = crate::hub::CallOptions {
            session: Some(session.to_owned()),
            timeout: Some(granted.unwrap_or(limits.call_timeout)),
            asker,
        };
        let answer = runtime
            .hub
            .call(server, tool, arguments, options)
            .with_context(span.context())
            .await;
        outcome = call_outcome(&answer);
        answer.map_err(|e| e.to_string())
    }
    .await
    .map_err(|error| crate::redact::redact(&error).into_owned());
    runtime.telemetry.call_done(span, (server, tool), outcome);
    if let Some(audit) = &runtime.audit {
        let failed = match &result {
            Ok(answer) if answer.is_error == Some(true) => {
                Some("the tool reported an error".to_owned())
            }
            Ok(_) => None,
            Err(error) => Some(error.clone()),
        };
        audit.tool_call(
            session,
            &execution,
            server,
            tool,
            started.elapsed(),
            failed.as_ref(),
        );
    }
    result
}

pub fn execution_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    format!(
        "x{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests;
