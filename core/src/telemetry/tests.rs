#![allow(clippy::unwrap_used)]

use std::time::Duration;

use opentelemetry::context::FutureExt as _;
use serde_json::json;

use super::{CallOutcome, ExecutionEnd, Metrics, Parent, Telemetry};
use crate::sandbox::ErrorKind;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn meta(value: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    value.as_object().cloned().unwrap()
}

#[tokio::test]
async fn with_traces_off_the_clients_context_still_goes_downstream() {
    let telemetry = Telemetry::default();
    let parent = Parent::from_meta(&meta(
        json!({"traceparent": TRACEPARENT, "tracestate": "a=1"}),
    ));
    let execution = telemetry.execution(&parent, "x1", "s");
    let call = telemetry.tool_call(&execution.context(), "t", "echo");
    let fields = async { super::current_fields() }
        .with_context(call.context())
        .await;
    assert_eq!(
        fields,
        [
            ("traceparent".to_owned(), TRACEPARENT.to_owned()),
            ("tracestate".to_owned(), "a=1".to_owned())
        ]
    );
    telemetry.call_done(call, ("t", "echo"), CallOutcome::Ok);
}

#[tokio::test]
async fn a_malformed_or_absent_traceparent_sends_nothing_downstream() {
    let telemetry = Telemetry::default();
    for sent in [
        json!({"traceparent": "00-zz-yy-01"}),
        json!({"traceparent": 7}),
        json!({}),
    ] {
        let parent = Parent::from_meta(&meta(sent));
        let call = telemetry.tool_call(&parent.context(), "t", "echo");
        let fields = async { super::current_fields() }
            .with_context(call.context())
            .await;
        assert!(fields.is_empty(), "{fields:?}");
    }
}

fn metrics() -> Metrics {
    Metrics::new(["t".to_owned()].into_iter().collect())
}

#[test]
fn metrics_count_executions_calls_and_limits() {
    let telemetry = Telemetry {
        traces: None,
        metrics: Some(std::sync::Arc::new(metrics())),
    };
    let parent = Parent::default();
    let ran = |error| ExecutionEnd::Ran {
        error,
        calls: 1,
        failed_calls: 0,
    };
    for error in [None, Some(ErrorKind::Timeout), Some(ErrorKind::Runtime)] {
        let span = telemetry.execution(&parent, "x", "s");
        telemetry.execution_done(span, ran(error), Duration::from_millis(20));
    }
    let span = telemetry.tool_call(&parent.context(), "t", "slow");
    telemetry.call_done(span, ("t", "slow"), CallOutcome::Timeout);
    let text = telemetry.metrics().unwrap().render([]);
    for line in [
        "runbyte_executions_total{outcome=\"ok\"} 1",
        "runbyte_executions_total{outcome=\"timeout\"} 1",
        "runbyte_executions_total{outcome=\"runtime\"} 1",
        "runbyte_execution_duration_seconds_count 3",
        "runbyte_limit_hits_total{limit=\"timeout\"} 1",
        "runbyte_limit_hits_total{limit=\"call-timeout\"} 1",
        "runbyte_tool_calls_total{server=\"t\",tool=\"slow\",outcome=\"timeout\"} 1",
    ] {
        assert!(text.contains(line), "{line} is not in\n{text}");
    }
    assert!(text.ends_with("# EOF\n"), "{text}");
}

#[test]
fn labels_stay_bounded_whatever_programs_and_servers_name() {
    let metrics = metrics();
    metrics.call("nope", "echo", CallOutcome::Failed);
    metrics.call("t", "a\"b\nc", CallOutcome::Failed);
    for n in 0..super::metrics::MAX_TOOLS + 5 {
        metrics.call("t", &format!("tool{n}"), CallOutcome::Ok);
    }
    let text = metrics.render([]);
    assert!(
        text.contains(
            "runbyte_tool_calls_total{server=\"_unknown\",tool=\"_other\",outcome=\"failed\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "runbyte_tool_calls_total{server=\"t\",tool=\"_other\",outcome=\"failed\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("runbyte_tool_calls_total{server=\"t\",tool=\"_other\",outcome=\"ok\"} 5"),
        "{text}"
    );
    let lines = text
        .lines()
        .filter(|line| line.starts_with("runbyte_tool_calls_total{"))
        .count();
    assert_eq!(lines, super::metrics::MAX_TOOLS + 3);
}

#[test]
fn made_up_tool_names_take_no_label_slot_from_listed_tools() {
    let metrics = metrics();
    metrics.only_listed(|server, tool| server == "t" && (tool == "echo" || tool == "add"));
    for n in 0..super::metrics::MAX_TOOLS + 5 {
        metrics.call("t", &format!("made_up_{n}"), CallOutcome::Failed);
    }
    metrics.call("t", "echo", CallOutcome::Ok);
    metrics.call("t", "add", CallOutcome::Ok);
    let text = metrics.render([]);
    for line in [
        "runbyte_tool_calls_total{server=\"t\",tool=\"echo\",outcome=\"ok\"} 1",
        "runbyte_tool_calls_total{server=\"t\",tool=\"add\",outcome=\"ok\"} 1",
        "runbyte_tool_calls_total{server=\"t\",tool=\"_unknown\",outcome=\"failed\"} 1005",
    ] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }
    assert!(!text.contains("made_up_"), "{text}");
}
