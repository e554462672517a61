//! What an operator sees of the gateway from outside: OpenTelemetry traces (a span per execution,
//! a child span per tool call) exported as OTLP/HTTP, and Prometheus metrics served as
//! `/metrics` by the network listeners. Both are off unless `[telemetry]` turns them on.
//!
//! The trace context travels in MCP's `_meta` (`traceparent`, `tracestate`; SEP-414): taken from
//! the client's request, so an execution joins the client's trace, and put into each downstream
//! `tools/call`, so the downstream server's work joins it too. That passing on happens even with
//! traces off (the client's own context is handed on unchanged): it costs a parse and a map.
//!
//! Nothing here may slow or fail an execution: spans are queued to the SDK's batch processor,
//! which exports from a thread of its own (a full queue drops spans); an unreachable collector
//! is one WARN line, and one INFO line when it answers again. Metrics are atomic counters read
//! when `/metrics` is asked.

mod metrics;
mod trace;

use std::{sync::Arc, time::Duration};

use opentelemetry::{
    Context, KeyValue,
    trace::{Status, TraceContextExt},
};

pub use metrics::{CONTENT_TYPE, Metrics};
pub(crate) use trace::current_fields;

use crate::{config::TelemetrySection, sandbox::ErrorKind};

/// The reserved JSON-RPC method that asks the host for its metrics: the HTTP listener sends it
/// for an authenticated `GET /metrics` (no plugin ABI carries anything else). A client that
/// sends it itself passed the same checks and sees only what `/metrics` shows.
pub const METRICS_METHOD: &str = "runbyte/metrics";

/// The telemetry of one gateway: cheap to clone; [`Telemetry::default`] is all off.
#[derive(Clone, Default)]
pub struct Telemetry {
    traces: Option<Arc<trace::Traces>>,
    metrics: Option<Arc<Metrics>>,
}

/// The trace context a request came with (`_meta.traceparent`), or none.
#[derive(Clone, Default)]
pub struct Parent(Context);

impl Parent {
    /// The context in a request's `_meta`; an absent or malformed `traceparent` is no parent
    /// (the W3C rule: start a new trace).
    pub fn from_meta(meta: &serde_json::Map<String, serde_json::Value>) -> Parent {
        Parent(trace::extract(meta))
    }

    /// The context itself (empty when the request carried none).
    pub fn context(&self) -> Context {
        self.0.clone()
    }
}

/// One span: an execution's or a tool call's. With traces off it only carries its parent's
/// context on, so that downstream servers still join the client's trace.
pub struct Span {
    context: Context,
    /// Whether the span is ours to annotate and end (not the client's remote one).
    own: bool,
}

impl Span {
    /// The context its children and downstream calls are made in.
    pub fn context(&self) -> Context {
        self.context.clone()
    }

    fn set(&self, attributes: Vec<KeyValue>) {
        if self.own {
            self.context.span().set_attributes(attributes);
        }
    }

    fn end(self, error: Option<&str>) {
        if self.own {
            let span = self.context.span();
            if let Some(message) = error {
                span.set_status(Status::error(message.to_owned()));
            }
            span.end();
        }
    }
}

/// How one tool call ended, as a span attribute and a metric label (`execute::call_outcome`
/// reads it from the Hub's answer: this module sits below the Hub, which writes `traceparent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallOutcome {
    /// The tool answered.
    Ok,
    /// The tool answered with `isError`.
    ToolError,
    /// A policy refused it (or could not judge it).
    Denied,
    /// It ran out of time (`call-timeout`, or the execution's time left).
    Timeout,
    /// Anything else before a result: an unknown tool, bad arguments, a server down.
    Failed,
}

impl CallOutcome {
    /// The label: `ok`, `tool_error`, `denied`, `timeout`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::ToolError => "tool_error",
            CallOutcome::Denied => "denied",
            CallOutcome::Timeout => "timeout",
            CallOutcome::Failed => "failed",
        }
    }
}

/// How one execution ended.
pub enum ExecutionEnd {
    /// It ran: its result or its error.
    Ran {
        error: Option<ErrorKind>,
        calls: u32,
        failed_calls: u32,
    },
    /// It never started: the servers it imports were still starting when its time ran out, or
    /// it was cancelled while waiting for them.
    NotRun,
}

/// The execution outcome label of an error kind (`ok` for none).
fn execution_outcome(error: Option<ErrorKind>) -> &'static str {
    match error {
        None => "ok",
        Some(ErrorKind::Syntax) => "syntax",
        Some(ErrorKind::Runtime) => "runtime",
        Some(ErrorKind::Timeout) => "timeout",
        Some(ErrorKind::Memory) => "memory",
        Some(ErrorKind::Stack) => "stack",
        Some(ErrorKind::Limit) => "limit",
        Some(ErrorKind::Module) => "module",
        Some(ErrorKind::Cancelled) => "cancelled",
        Some(ErrorKind::Busy) => "busy",
        Some(ErrorKind::Crashed) => "crashed",
    }
}

/// The limit an error kind means was hit, if it is one: `timeout` (the execution's time),
/// `memory`, `stack`, `size` (the output or the source was too large) or `queue` (every worker
/// busy and the queue full). A call's own timeout is `call-timeout`.
fn limit_of(kind: ErrorKind) -> Option<&'static str> {
    match kind {
        ErrorKind::Timeout => Some("timeout"),
        ErrorKind::Memory => Some("memory"),
        ErrorKind::Stack => Some("stack"),
        ErrorKind::Limit => Some("size"),
        ErrorKind::Busy => Some("queue"),
        _ => None,
    }
}

impl Telemetry {
    /// The telemetry `[telemetry]` asks for. An exporter that cannot be built (the only error)
    /// stops start-up: a configured collector that is never sent to would go unnoticed.
    pub fn from_config(section: &TelemetrySection, servers: Vec<String>) -> Result<Self, String> {
        let traces = match &section.otlp_endpoint {
            Some(endpoint) => {
                let service = section.service_name.as_deref().unwrap_or("runbyte");
                Some(Arc::new(trace::Traces::new(endpoint, service)?))
            }
            None => None,
        };
        let metrics = section
            .metrics
            .then(|| Arc::new(Metrics::new(servers.into_iter().collect())));
        Ok(Telemetry { traces, metrics })
    }

    /// The metrics, when `/metrics` is on.
    pub fn metrics(&self) -> Option<&Metrics> {
        self.metrics.as_deref()
    }

    /// Starts an execution's span, a child of the request's context.
    pub fn execution(&self, parent: &Parent, id: &str, session: &str) -> Span {
        match &self.traces {
            Some(traces) => Span {
                context: traces.span(
                    "execute_code",
                    opentelemetry::trace::SpanKind::Server,
                    &parent.0,
                    vec![
                        KeyValue::new("runbyte.execution.id", id.to_owned()),
                        // The session's tag, never its name (which may be its credential).
                        KeyValue::new("runbyte.session", crate::logging::session_tag(session)),
                    ],
                ),
                own: true,
            },
            None => Span {
                context: parent.0.clone(),
                own: false,
            },
        }
    }

    /// Starts a tool call's span, a child of `parent` (the execution's context, or the
    /// request's for a direct call).
    pub fn tool_call(&self, parent: &Context, server: &str, tool: &str) -> Span {
        match &self.traces {
            Some(traces) => Span {
                context: traces.span(
                    "tools/call",
                    opentelemetry::trace::SpanKind::Client,
                    parent,
                    vec![
                        KeyValue::new("runbyte.server", server.to_owned()),
                        KeyValue::new("runbyte.tool", tool.to_owned()),
                        KeyValue::new("mcp.method.name", "tools/call"),
                    ],
                ),
                own: true,
            },
            None => Span {
                context: parent.clone(),
                own: false,
            },
        }
    }

    /// Ends a tool call: its span's outcome, and the metrics.
    pub fn call_done(&self, span: Span, (server, tool): (&str, &str), outcome: CallOutcome) {
        let mut attributes = vec![KeyValue::new("runbyte.outcome", outcome.as_str())];
        if outcome == CallOutcome::Timeout {
            attributes.push(KeyValue::new("runbyte.limit", "call-timeout"));
        }
        span.set(attributes);
        span.end((outcome != CallOutcome::Ok).then_some(outcome.as_str()));
        if let Some(metrics) = &self.metrics {
            metrics.call(server, tool, outcome);
        }
    }

    /// Counts an answer given from what Runbyte kept of a server's answers (`kind`:
    /// `resource`, `tool`), instead of asking the server.
    pub fn cache_hit(&self, server: &str, kind: &'static str) {
        self.cache_hits(server, kind, 1);
    }

    /// Counts `hits` such answers.
    pub fn cache_hits(&self, server: &str, kind: &'static str, hits: u64) {
        if let Some(metrics) = &self.metrics
            && hits > 0
        {
            metrics.cache_hits(server, kind, hits);
        }
    }

    /// Ends an execution: its span's outcome and limit, and the metrics.
    pub fn execution_done(&self, span: Span, end: ExecutionEnd, duration: Duration) {
        let (outcome, limit) = match &end {
            ExecutionEnd::Ran { error, .. } => {
                (execution_outcome(*error), error.and_then(limit_of))
            }
            ExecutionEnd::NotRun => ("not_run", None),
        };
        let mut attributes = vec![KeyValue::new("runbyte.outcome", outcome)];
        if let ExecutionEnd::Ran {
            calls,
            failed_calls,
            ..
        } = end
        {
            attributes.push(KeyValue::new("runbyte.tool_calls", i64::from(calls)));
            attributes.push(KeyValue::new(
                "runbyte.failed_tool_calls",
                i64::from(failed_calls),
            ));
        }
        if let Some(limit) = limit {
            attributes.push(KeyValue::new("runbyte.limit", limit));
        }
        span.set(attributes);
        // The outcome, not the error's message: a message may quote what a tool returned, and
        // the collector is another audience than the client.
        span.end((outcome != "ok").then_some(outcome));
        if let Some(metrics) = &self.metrics {
            metrics.execution(outcome, limit, duration);
        }
    }

    /// Exports what is queued and stops the exporter; waits at most a few seconds (an
    /// unreachable collector must not hold up a shutdown).
    pub async fn shutdown(&self) {
        if let Some(traces) = self.traces.clone() {
            let _ = tokio::task::spawn_blocking(move || traces.shutdown()).await;
        }
    }
}

#[cfg(test)]
mod tests;
