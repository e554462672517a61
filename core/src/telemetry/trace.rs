//! Traces: the SDK's tracer provider with one batch processor whose exporter posts OTLP/HTTP
//! protobuf, and the W3C trace context read from and written to MCP `_meta`.

use std::{
    collections::HashMap,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use opentelemetry::{
    Context, KeyValue,
    propagation::TextMapPropagator,
    trace::{SpanKind, TraceContextExt, Tracer, TracerProvider as _},
};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::{
    Resource,
    error::OTelSdkResult,
    propagation::TraceContextPropagator,
    trace::{SdkTracer, SdkTracerProvider, SpanData, SpanExporter},
};

/// The `_meta` keys of the trace context (SEP-414).
const TRACEPARENT: &str = "traceparent";
const TRACESTATE: &str = "tracestate";

/// How long one export may take; the batch thread waits for nothing longer.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a shutdown waits for the last export.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(3);

/// The running tracer and its exporter.
pub(super) struct Traces {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

impl Traces {
    /// A provider exporting to `endpoint`'s `/v1/traces` in the background.
    pub(super) fn new(endpoint: &str, service: &str) -> Result<Traces, String> {
        let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
        // reqwest's client panics without a process-wide provider (see Cargo.toml); an error
        // here means one is installed already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(url.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|error| format!("[telemetry] the OTLP exporter for {url}: {error}"))?;
        let provider = SdkTracerProvider::builder()
            .with_resource(
                Resource::builder()
                    .with_service_name(service.to_owned())
                    .build(),
            )
            .with_batch_exporter(Warned {
                inner: exporter,
                url: url.clone(),
                failing: AtomicBool::new(false),
            })
            .build();
        let tracer = provider.tracer("runbyte");
        tracing::info!(url, "exporting traces (OTLP over HTTP)");
        Ok(Traces { provider, tracer })
    }

    /// A started span, within a context of its own, the child of `parent`'s span (a root when
    /// `parent` has none).
    pub(super) fn span(
        &self,
        name: &'static str,
        kind: SpanKind,
        parent: &Context,
        attributes: Vec<KeyValue>,
    ) -> Context {
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, parent);
        parent.with_span(span)
    }

    /// Exports what is queued, then stops.
    pub(super) fn shutdown(&self) {
        if let Err(error) = self.provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
            tracing::warn!("the last spans were not exported: {error}");
        }
    }
}

/// The OTLP exporter, saying when the collector stops and starts answering (once each way, not
/// once per batch). Spans of a failed batch are dropped: telemetry never holds up executions.
#[derive(Debug)]
struct Warned {
    inner: opentelemetry_otlp::SpanExporter,
    url: String,
    failing: AtomicBool,
}

impl SpanExporter for Warned {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.inner.export(batch).await;
        match &result {
            Err(error) if !self.failing.swap(true, Ordering::Relaxed) => tracing::warn!(
                url = %self.url,
                spans,
                "the trace collector did not take spans (dropped; said once until it does): \
                 {error}"
            ),
            Ok(()) if self.failing.swap(false, Ordering::Relaxed) => {
                tracing::info!(url = %self.url, "the trace collector takes spans again");
            }
            _ => {}
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// The trace context in a request's `_meta` (`traceparent`, `tracestate`), as a remote parent.
pub(super) fn extract(meta: &serde_json::Map<String, serde_json::Value>) -> Context {
    let mut carrier = HashMap::new();
    for key in [TRACEPARENT, TRACESTATE] {
        if let Some(value) = meta.get(key).and_then(serde_json::Value::as_str) {
            carrier.insert(key.to_owned(), value.to_owned());
        }
    }
    if carrier.is_empty() {
        return Context::new();
    }
    TraceContextPropagator::new().extract(&carrier)
}

/// The `traceparent` (and `tracestate`) of the current context's span, for a downstream
/// request's `_meta`; empty when there is no valid span (nothing to join).
pub fn current_fields() -> Vec<(String, String)> {
    let context = Context::current();
    if !context.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    let mut fields: Vec<(String, String)> = carrier.into_iter().collect();
    fields.sort();
    fields
}
