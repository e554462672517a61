#![allow(clippy::unwrap_used)]

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Value, json};

use super::*;
use crate::{
    policy::merge_limits,
    sandbox::{ErrorKind, ExecError, Isolation, LogLine, Outcome},
};

fn answers(list: &[(&str, Value)]) -> Vec<(String, Value)> {
    list.iter()
        .map(|(name, value)| ((*name).to_owned(), value.clone()))
        .collect()
}

#[test]
fn the_strictest_limit_of_each_kind_wins_and_defaults_fill_the_rest() {
    let limits = merge_limits(&answers(&[
        (
            "limits",
            json!({"timeout-ms": 60000, "memory-mb": 128, "max-tool-calls": 50}),
        ),
        ("acme", json!({"timeout-ms": 5000, "max-tool-calls": 500})),
    ]))
    .unwrap();
    assert_eq!(limits.timeout, Duration::from_secs(5));
    assert_eq!(
        limits.memory_bytes,
        128 << 20,
        "a policy may raise a default"
    );
    assert_eq!(limits.max_tool_calls, 50);
    assert_eq!(limits.max_output_bytes, Limits::default().max_output_bytes);
    assert_eq!(limits.isolation, Isolation::Process);
}

#[test]
fn thread_isolation_needs_one_policy_to_ask_and_none_to_refuse() {
    let thread = |list: &[(&str, Value)]| merge_limits(&answers(list)).unwrap().isolation;
    assert_eq!(
        thread(&[("a", json!({"isolation": "thread"})), ("b", json!({}))]),
        Isolation::Thread
    );
    assert_eq!(
        thread(&[
            ("a", json!({"isolation": "thread"})),
            ("b", json!({"isolation": "process"}))
        ]),
        Isolation::Process
    );
    let error = merge_limits(&answers(&[("a", json!({"isolation": "vm"}))])).unwrap_err();
    assert!(error.contains("policy `a`: `isolation`"), "{error}");
    let error = merge_limits(&answers(&[("a", json!({"timeout-ms": "soon"}))])).unwrap_err();
    assert!(
        error.contains("`timeout-ms` must be a positive integer"),
        "{error}"
    );
}

#[test]
fn tool_results_map_to_program_values() {
    let text = |t: &str| CallToolResult::success(vec![ContentBlock::text(t)]);
    assert_eq!(
        map_result("s", "t", text(r#"{"a":1}"#)).unwrap(),
        json!({"a": 1})
    );
    assert_eq!(map_result("s", "t", text("plain")).unwrap(), json!("plain"));
    assert_eq!(map_result("s", "t", text("42")).unwrap(), json!(42));
    let mut structured = text("ignored");
    structured.structured_content = Some(json!({"n": 2}));
    assert_eq!(map_result("s", "t", structured).unwrap(), json!({"n": 2}));
    let error = CallToolResult::error(vec![ContentBlock::text("no such issue")]);
    assert_eq!(
        map_result("gh", "get", error).unwrap_err(),
        "gh/get: no such issue"
    );
    let mixed = CallToolResult::success(vec![
        ContentBlock::text("a"),
        ContentBlock::image("AAAA", "image/png"),
    ]);
    let value = map_result("s", "t", mixed).unwrap();
    assert_eq!(value[0], "a");
    assert_eq!(value[1]["type"], "image");
}

fn outcome(result: Result<Value, ExecError>, logs: Vec<LogLine>, dropped: usize) -> Outcome {
    Outcome {
        result,
        logs,
        logs_dropped: dropped,
        calls: 3,
        failed_calls: 1,
        duration: Duration::from_millis(12),
        queued: Duration::ZERO,
        held_argument_bytes: 0,
        cached: Default::default(),
    }
}

#[test]
fn rendering_gives_result_console_and_summary_and_moves_images_to_blocks() {
    let image = json!({"type": "image", "data": "AAAA", "mimeType": "image/png"});
    let logs = vec![
        LogLine {
            level: "log".into(),
            text: "hello".into(),
        },
        LogLine {
            level: "warn".into(),
            text: "careful".into(),
        },
    ];
    let rendered = render(outcome(Ok(json!({"chart": image, "n": 1})), logs, 0), 65536);
    let text = rendered.content[0].as_text().unwrap().text.clone();
    assert_eq!(
        text,
        "{\"chart\":{\"type\":\"image\",\"content\":\"see content block 1\"},\"n\":1}\n--- console ---\nhello\n[warn] careful\n--- 12 ms · 3 tool calls · 1 failed ---"
    );
    assert!(rendered.content[1].as_image().is_some());
    assert_ne!(rendered.is_error, Some(true));
}

#[test]
fn a_lean_answer_says_only_what_changes_the_next_step_and_meta_has_the_rest() {
    let lean = |outcome: Outcome, cached: u32| {
        let tokens = render::Tokens {
            consumed: crate::tokens::Count {
                tokens: 900,
                estimated: false,
            },
            session: &|accounting| accounting,
        };
        render::render_with(
            outcome,
            65536,
            Some(tokens),
            cached,
            crate::config::Summary::Lean,
        )
        .0
    };
    let text = |result: &CallToolResult| result.content[0].as_text().unwrap().text.clone();
    let rendered = lean(outcome(Ok(json!(7)), Vec::new(), 0), 2);
    assert_eq!(
        text(&rendered),
        "7\n--- 3 tool calls · 1 failed · 2 from cache ---"
    );
    let account = &rendered.meta.as_ref().unwrap().0[render::EXECUTION_META];
    assert_eq!(account["durationMs"], 12);
    assert_eq!(account["toolCalls"], 3);
    assert_eq!(account["failedCalls"], 1);
    assert_eq!(account["fromCache"], 2);
    assert_eq!(
        account["tokens"]["execution"]["inToolResults"]["tokens"],
        900
    );
    assert_eq!(account["tokens"]["execution"]["returned"]["tokens"], 1);
    assert_eq!(account["tokens"]["execution"]["saved"], 899);
    // No calls, none failed: no line at all.
    let mut quiet = outcome(Ok(json!(1)), Vec::new(), 0);
    (quiet.calls, quiet.failed_calls) = (0, 0);
    assert_eq!(text(&lean(quiet, 0)), "1");
    // Full says the time and the tokens too.
    let tokens = render::Tokens {
        consumed: crate::tokens::Count::default(),
        session: &|accounting| accounting,
    };
    let full = render::render_with(
        outcome(Ok(json!(7)), Vec::new(), 0),
        65536,
        Some(tokens),
        0,
        crate::config::Summary::Full,
    )
    .0;
    assert!(
        text(&full).starts_with("7\n--- 12 ms · 3 tool calls · 1 failed · o200k_base tokens: "),
        "{}",
        text(&full)
    );
}

#[test]
fn errors_render_with_their_place_and_output_is_cut_with_a_count() {
    let error = ExecError {
        kind: ErrorKind::Runtime,
        message: "TypeError: x is not a function".into(),
        position: Some((3, 7)),
        stack: Some("    at exec (main.ts:3:7)".into()),
    };
    let rendered = render(outcome(Err(error), Vec::new(), 0), 65536);
    let text = rendered.content[0].as_text().unwrap().text.clone();
    assert!(text.starts_with("Uncaught exception at line 3, column 7: TypeError: x is not a function\n    at exec (main.ts:3:7)"), "{text}");
    assert_eq!(rendered.is_error, Some(true));

    let logs = vec![LogLine {
        level: "log".into(),
        text: "y".repeat(5000),
    }];
    let rendered = render(outcome(Ok(json!(1)), logs, 1_000_000), 2048);
    let text = rendered.content[0].as_text().unwrap().text.clone();
    assert!(text.len() <= 2048, "{}", text.len());
    let cut: usize = text
        .split("[truncated: ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(cut > 1_000_000, "{cut}");
}
