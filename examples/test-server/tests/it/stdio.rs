//! The server over stdio, through rmcp's child-process client and through raw lines.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use std::process::Stdio;

use rmcp::model::{
    ErrorCode, PaginatedRequestParams, ProtocolVersion, ServerNotification, SubscriptionFilter,
};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientLifecycleMode, ClientServiceExt as _};
use serde_json::{Value, json};

use crate::common::{
    RawStdio, Recorder, WAIT, call, command, eventually, exit_code, rpc_error, stdio_client, text,
    try_call,
};

const NORMAL_TOOLS: [&str; 21] = [
    "echo",
    "add",
    "slow",
    "huge",
    "crash",
    "fail",
    "rpc_error",
    "structured",
    "image",
    "mixed",
    "change_tools",
    "stderr",
    "env",
    "cwd",
    "pid",
    "spawn_grandchild",
    "hang",
    "cancelled_count",
    "calls_count",
    "meta",
    "ask",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn normal_tools_answer_as_documented() {
    let workdir = std::env::temp_dir().canonicalize().unwrap();
    let mut command = command(&[]);
    command
        .env("TEST_SERVER_PROBE", "probe value")
        .current_dir(&workdir);
    let (client, _, pid) = stdio_client(command).await;

    let info = client.peer_info().unwrap();
    assert_eq!(
        info.server_info.as_ref().unwrap().name,
        "runbyte-test-server"
    );
    assert_eq!(
        info.capabilities.tools.as_ref().unwrap().list_changed,
        Some(true)
    );

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names, NORMAL_TOOLS);
    let structured_tool = tools.iter().find(|tool| tool.name == "structured").unwrap();
    assert!(structured_tool.output_schema.is_some());
    // Every call is counted, the one that asks included.
    assert_eq!(text(&call(&client, "calls_count", json!({})).await), "1");
    assert_eq!(text(&call(&client, "calls_count", json!({})).await), "2");

    assert_eq!(
        text(&call(&client, "echo", json!({"message": "hi there"})).await),
        "hi there"
    );
    assert_eq!(
        text(&call(&client, "add", json!({"a": 2, "b": 3})).await),
        r#"{"sum":5}"#
    );
    assert_eq!(
        text(&call(&client, "add", json!({"a": 0.5, "b": 1})).await),
        r#"{"sum":1.5}"#
    );

    let failed = call(&client, "fail", json!({"message": "it broke"})).await;
    assert_eq!(failed.is_error, Some(true));
    assert_eq!(text(&failed), "it broke");

    let bad = call(&client, "echo", json!({"message": 5})).await;
    assert_eq!(bad.is_error, Some(true));
    assert!(text(&bad).contains("`message`"), "{}", text(&bad));
    let missing = call(&client, "huge", json!({})).await;
    assert!(
        text(&missing).contains("missing argument `bytes`"),
        "{}",
        text(&missing)
    );

    let error = rpc_error(try_call(&client, "nope", json!({})).await.unwrap_err());
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(error.message.contains("nope"));
    let error = rpc_error(
        try_call(
            &client,
            "rpc_error",
            json!({"code": -32001, "message": "custom"}),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!((error.code.0, error.message.as_ref()), (-32001, "custom"));

    let structured = call(&client, "structured", json!({"n": 4})).await;
    assert_eq!(
        structured.structured_content,
        Some(json!({"n": 4, "squares": [1, 4, 9, 16]}))
    );

    let image = call(&client, "image", json!({})).await;
    let block = image.content[0].as_image().unwrap();
    assert_eq!(block.mime_type, "image/png");
    assert!(block.data.starts_with("iVBORw0KGgo"));
    let mixed = call(&client, "mixed", json!({})).await;
    assert_eq!(mixed.content.len(), 3);
    assert!(mixed.content[2].as_resource().is_some());

    let huge = call(&client, "huge", json!({"bytes": 100_000})).await;
    assert_eq!(text(&huge).len(), 100_000);
    assert!(text(&huge).starts_with("abcdefghijklmnopqrstuvwxyzabc"));

    let probe = call(&client, "env", json!({"name": "TEST_SERVER_PROBE"})).await;
    assert_eq!(text(&probe), r#""probe value""#);
    let unset = call(
        &client,
        "env",
        json!({"name": "TEST_SERVER_UNSET_VARIABLE"}),
    )
    .await;
    assert_eq!(text(&unset), "null");
    let names: Vec<String> =
        serde_json::from_str(text(&call(&client, "env", json!({})).await)).unwrap();
    assert!(names.contains(&"TEST_SERVER_PROBE".to_owned()));

    // Compared canonical: Windows's canonical form is `\\?\C:\...`, which no process reports.
    let cwd = std::path::PathBuf::from(text(&call(&client, "cwd", json!({})).await));
    assert_eq!(cwd.canonicalize().unwrap(), workdir);
    assert_eq!(
        text(&call(&client, "pid", json!({})).await),
        pid.to_string()
    );
    assert_eq!(
        text(&call(&client, "cancelled_count", json!({})).await),
        "0"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_reports_progress_only_when_asked() {
    let mut raw = RawStdio::spawn(&[]);
    raw.initialize().await;
    raw.request(
        1,
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 40, "steps": 2}}),
    )
    .await;
    let answer = raw.recv(WAIT).await.unwrap();
    assert_eq!(
        answer["id"], 1,
        "no progress without a progressToken: {answer}"
    );
    assert_eq!(answer["result"]["content"][0]["text"], "slept 40 ms");

    let started = Instant::now();
    let call = json!({"name": "slow", "arguments": {"ms": 80, "steps": 4}, "_meta": {"progressToken": "p-1"}});
    raw.request(2, "tools/call", call).await;
    for step in 1..=4 {
        let progress = raw.recv(WAIT).await.unwrap();
        assert_eq!(progress["method"], "notifications/progress");
        assert_eq!(
            progress["params"],
            json!({
                "progressToken": "p-1", "progress": f64::from(step), "total": 4.0, "message": format!("step {step} of 4")
            })
        );
    }
    assert_eq!(raw.recv(WAIT).await.unwrap()["id"], 2);
    assert!(started.elapsed() >= Duration::from_millis(80));

    // rmcp's client puts a progressToken on every request and hands progress to its handler.
    let (client, recorder, _) = stdio_client(command(&[])).await;
    call_slow_and_count_progress(&client, &recorder).await;
    client.cancel().await.unwrap();
}

async fn call_slow_and_count_progress(
    client: &crate::common::Client,
    recorder: &crate::common::Recorder,
) {
    let answer = call(client, "slow", json!({"ms": 40, "steps": 3})).await;
    assert_eq!(text(&answer), "slept 40 ms");
    eventually("three progress notifications", async || {
        recorder.progress.lock().unwrap().len() == 3
    })
    .await;
    let steps: Vec<f64> = recorder
        .progress
        .lock()
        .unwrap()
        .iter()
        .map(|p| p.progress)
        .collect();
    assert_eq!(steps, [1.0, 2.0, 3.0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_hang_is_cancelled_and_counted() {
    let (client, _, _) = stdio_client(command(&[])).await;
    // Dropping the call at the timeout makes rmcp send notifications/cancelled.
    let abandoned =
        tokio::time::timeout(Duration::from_millis(200), call(&client, "hang", json!({})));
    assert!(abandoned.await.is_err(), "hang answered");
    eventually("the cancellation to be counted", async || {
        text(&call(&client, "cancelled_count", json!({})).await) == "1"
    })
    .await;
    // The server is still serving.
    assert_eq!(
        text(&call(&client, "echo", json!({"message": "after"})).await),
        "after"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_tools_adds_a_tool_and_notifies() {
    let (client, recorder, _) = stdio_client(command(&[])).await;
    let answer = call(&client, "change_tools", json!({})).await;
    assert_eq!(text(&answer), "added added_1; notified 1 client(s)");
    eventually("list_changed", async || {
        recorder.list_changed.load(Ordering::SeqCst) == 1
    })
    .await;
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.last().unwrap().name, "added_1");
    let echoed = call(&client, "added_1", json!({"value": "v"})).await;
    assert_eq!(
        serde_json::from_str::<Value>(text(&echoed)).unwrap(),
        json!({"arguments": {"value": "v"}, "tool": "added_1"})
    );
    call(&client, "change_tools", json!({})).await;
    eventually("a second list_changed", async || {
        recorder.list_changed.load(Ordering::SeqCst) == 2
    })
    .await;
    assert_eq!(
        client.list_all_tools().await.unwrap().len(),
        NORMAL_TOOLS.len() + 2
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_must_be_followed_and_bad_cursors_are_refused() {
    let (client, _, _) = stdio_client(command(&["--tools", "25", "--page-size", "10"])).await;
    let first = client.list_tools(None).await.unwrap();
    assert_eq!(first.tools.len(), 10);
    assert_eq!(first.next_cursor.as_deref(), Some("10"));
    let all = client.list_all_tools().await.unwrap();
    assert_eq!(all.len(), NORMAL_TOOLS.len() + 25);
    assert_eq!(all.last().unwrap().name, "tool_0024");
    let described = &all[NORMAL_TOOLS.len()];
    assert_eq!(described.name, "tool_0000");
    assert_eq!(described.input_schema["required"], json!(["query"]));

    let bad = PaginatedRequestParams::default().with_cursor(Some("zzz".into()));
    let error = rpc_error(client.list_tools(Some(bad)).await.unwrap_err());
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    let echoed = call(&client, "tool_0003", json!({"id": 1, "patch": {}})).await;
    assert_eq!(
        serde_json::from_str::<Value>(text(&echoed)).unwrap(),
        json!({"arguments": {"id": 1, "patch": {}}, "tool": "tool_0003"})
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn odd_hostile_and_complex_tools_are_listed_and_called_by_their_own_names() {
    let args = ["--mode", "odd-names,hostile-metadata,complex-schemas"];
    let (client, _, _) = stdio_client(command(&args)).await;
    let tools = client.list_all_tools().await.unwrap();
    let names: BTreeSet<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    for name in [
        "get-user",
        "list.items",
        "2fa",
        "delete",
        "with space",
        "ünïcode",
        "a-b",
        "a.b",
    ] {
        assert!(names.contains(name), "{name} is missing");
    }
    for name in [
        "evil_description",
        "constructor",
        "__proto__",
        "",
        "schema_refs",
        "schema_unconvertible",
    ] {
        assert!(names.contains(name), "{name:?} is missing");
    }
    let evil = tools
        .iter()
        .find(|tool| tool.name == "evil_description")
        .unwrap();
    let description = evil.description.as_deref().unwrap();
    assert!(
        description.contains("*/")
            && description.contains('\u{202e}')
            && description.contains('\0')
    );

    for name in ["with space", "ünïcode", "a.b", "__proto__", ""] {
        let answer = call(&client, name, json!({"value": 1})).await;
        let answer: Value = serde_json::from_str(text(&answer)).unwrap();
        assert_eq!(answer, json!({"tool": name, "arguments": {"value": 1}}));
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_stdout_interleaves_lines_that_are_not_json() {
    let mut raw = RawStdio::spawn(&["--mode", "garbage-stdout"]);
    let result = raw.initialize().await;
    assert_eq!(result["serverInfo"]["name"], "runbyte-test-server");
    raw.request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "m"}}),
    )
    .await;
    let answer = raw.recv(WAIT).await.unwrap();
    assert_eq!(answer["result"]["content"][0]["text"], "m");
    assert_eq!(
        raw.lines[0], "this is not json",
        "garbage comes before the first message"
    );
    assert!(raw.garbage.len() >= 2, "{:?}", raw.lines);
    assert!(
        raw.garbage
            .iter()
            .all(|line| serde_json::from_str::<Value>(line).is_err())
    );

    // An SDK client that skips unparsable lines works over it.
    let (client, _, _) = stdio_client(command(&["--mode", "garbage-stdout"])).await;
    assert_eq!(
        text(&call(&client, "echo", json!({"message": "ok"})).await),
        "ok"
    );
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_ends_the_process_with_its_code_and_no_answer() {
    let mut raw = RawStdio::spawn(&[]);
    raw.initialize().await;
    raw.request(
        1,
        "tools/call",
        json!({"name": "crash", "arguments": {"code": 7}}),
    )
    .await;
    assert_eq!(exit_code(&mut raw.child).await, 7);
    assert_eq!(raw.recv(WAIT).await, None);
    assert!(raw.stderr().await.contains("crashing with exit code 7"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_on_initialize_exits_3_and_says_why() {
    let mut raw = RawStdio::spawn(&["--mode", "crash-on-initialize"]);
    raw.send_initialize("2025-06-18").await;
    assert_eq!(exit_code(&mut raw.child).await, 3);
    assert!(raw.stderr().await.contains("crashing on initialize"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_on_initialize_never_answers() {
    let mut raw = RawStdio::spawn(&["--mode", "hang-on-initialize"]);
    raw.send_initialize("2025-06-18").await;
    assert_eq!(raw.recv(Duration::from_millis(400)).await, None);
    assert!(raw.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_can_crash_hang_or_fail() {
    let mut crashing = RawStdio::spawn(&["--mode", "crash-on-list"]);
    crashing.initialize().await;
    crashing.request(1, "tools/list", json!({})).await;
    assert_eq!(exit_code(&mut crashing.child).await, 4);

    let mut hanging = RawStdio::spawn(&["--mode", "hang-on-list"]);
    hanging.initialize().await;
    hanging.request(1, "tools/list", json!({})).await;
    assert_eq!(hanging.recv(Duration::from_millis(300)).await, None);
    hanging
        .request(2, "tools/call", json!({"name": "pid", "arguments": {}}))
        .await;
    assert_eq!(
        hanging.recv(WAIT).await.unwrap()["id"],
        2,
        "other requests still work"
    );

    let mut failing = RawStdio::spawn(&["--mode", "list-error", "--list-delay-ms", "150"]);
    failing.initialize().await;
    let asked = Instant::now();
    failing.request(1, "tools/list", json!({})).await;
    let answer = failing.recv(WAIT).await.unwrap();
    assert!(asked.elapsed() >= Duration::from_millis(150));
    assert_eq!(answer["error"]["code"], -32603);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_stdin_ends_the_server_unless_it_is_stubborn() {
    let mut polite = RawStdio::spawn(&[]);
    polite.initialize().await;
    polite.close_stdin();
    assert_eq!(exit_code(&mut polite.child).await, 0);

    let mut stubborn = RawStdio::spawn(&["--mode", "stubborn"]);
    stubborn.initialize().await;
    stubborn.close_stdin();
    // Windows has no SIGTERM for it to ignore.
    #[cfg(unix)]
    {
        let pid = stubborn.child.id().unwrap().to_string();
        let term = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(term.success());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        stubborn.is_running(),
        "a stubborn server survives stdin EOF and SIGTERM"
    );
    stubborn.child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_start_delays_the_handshake() {
    let started = Instant::now();
    let mut raw = RawStdio::spawn(&["--start-delay-ms", "400"]);
    raw.initialize().await;
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_protocol_version_caps_the_negotiated_version() {
    let mut raw = RawStdio::spawn(&["--max-protocol-version", "2024-11-05"]);
    raw.send_initialize("2025-06-18").await;
    let answer = raw.recv(WAIT).await.unwrap();
    assert_eq!(answer["result"]["protocolVersion"], "2024-11-05");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_tool_writes_its_lines() {
    let mut raw = RawStdio::spawn(&[]);
    raw.initialize().await;
    let arguments = json!({"text": "marker-line", "lines": 3});
    raw.request(
        1,
        "tools/call",
        json!({"name": "stderr", "arguments": arguments}),
    )
    .await;
    let answer = raw.recv(WAIT).await.unwrap();
    assert_eq!(
        answer["result"]["content"][0]["text"],
        "wrote 3 line(s) to stderr"
    );
    raw.close_stdin();
    assert_eq!(raw.stderr().await.matches("marker-line\n").count(), 3);
}

/// The grandchild shares the server's process group, so ending the group ends it too.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_grandchild_joins_the_server_process_group() {
    let (client, _, pid) = stdio_client(command(&[])).await;
    let grandchild: u32 = text(&call(&client, "spawn_grandchild", json!({})).await)
        .parse()
        .unwrap();
    assert_eq!(
        process_group(grandchild),
        Some(pid),
        "the server leads its own group"
    );

    let group = format!("-{pid}");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", "--", &group])
        .status()
        .unwrap();
    assert!(killed.success());
    eventually("the grandchild to end", async || {
        process_state(grandchild).is_none_or(|state| state == 'Z')
    })
    .await;
}

/// The process group of `pid`, from /proc/<pid>/stat (None once it is gone).
#[cfg(target_os = "linux")]
fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; fields after its closing parenthesis do not.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    fields.get(2)?.parse().ok()
}

#[cfg(target_os = "linux")]
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// A 2026-07-28 client has no `initialize`; it hears of tool changes on `subscriptions/listen`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discover_client_hears_list_changes_on_its_subscription() {
    let (transport, _) = TokioChildProcess::builder(command(&[]))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = Recorder::default()
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .unwrap();
    let filter = SubscriptionFilter::builder().tools_list_changed().build();
    let mut subscription = client.listen(filter).await.unwrap();
    assert_eq!(subscription.acknowledged().tools_list_changed, Some(true));

    let answer = call(&client, "change_tools", json!({})).await;
    assert_eq!(text(&answer), "added added_1; notified 1 client(s)");
    let heard = tokio::time::timeout(WAIT, subscription.next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(
            heard,
            Some(ServerNotification::ToolListChangedNotification(_))
        ),
        "{heard:?}"
    );
    assert!(
        client
            .list_all_tools()
            .await
            .unwrap()
            .iter()
            .any(|tool| tool.name == "added_1")
    );
    subscription.cancel().await.unwrap();
    client.cancel().await.unwrap();
}
