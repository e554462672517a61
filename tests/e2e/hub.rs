//! The Hub against real child processes: the demo server and the misbehaving test server.

use std::time::{Duration, Instant};

use runbyte_core::{
    gateway::Gateway,
    hub::{CallError, CallOptions, Failure, HubEvent, Status},
};
use runbyte_tests::{TempDir, config_of, is_running, parse_config, run, test_server_table};
use serde_json::{Value, json};

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .collect::<Vec<_>>()
        .join("")
}

async fn start(dir: &TempDir, tables: &[String]) -> std::sync::Arc<Gateway> {
    let runtime = Gateway::hub_only_in_memory(parse_config(dir.path(), &config_of(tables)));
    runtime.hub().start().await;
    runtime
}

#[tokio::test]
async fn broken_servers_fail_by_name_while_the_others_answer() {
    let dir = TempDir::new("hub-broken");
    let tables = [
        test_server_table("good", &[], ""),
        test_server_table("crashes", &["--mode", "crash-on-initialize"], ""),
        test_server_table(
            "hangs",
            &["--mode", "hang-on-initialize"],
            "init-timeout-ms = 800",
        ),
        test_server_table("garbage", &["--mode", "garbage-stdout"], ""),
        "[servers.missing]\ncommand = \"/nonexistent/mcp-server\"\n".to_owned(),
    ];
    let started = Instant::now();
    let runtime = start(&dir, &tables).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "start took {:?}",
        started.elapsed()
    );
    let status = |name: &str| {
        let hub = runtime.hub().clone();
        let name = name.to_owned();
        async move { hub.server(&name).await.unwrap().status }
    };
    assert_eq!(status("good").await, Status::Ready);
    assert_eq!(status("garbage").await, Status::Ready);
    let Status::Failed { error, .. } = status("crashes").await else {
        panic!("crashes is up")
    };
    // What it printed on stderr goes to the log only (it may hold a token), never here.
    assert!(
        error.contains("exited with status 3")
            && error.contains("stderr is in Runbyte's log")
            && !error.contains("crashing on initialize"),
        "{error}"
    );
    // A server that could not be reached is a kind a caller branches on, not only words.
    let Status::Failed {
        error,
        failure: Failure::Unreachable,
        ..
    } = status("hangs").await
    else {
        panic!("hangs is up, or failed otherwise")
    };
    assert!(
        error.contains("did not answer `server/discover` or `initialize` within 800 ms"),
        "{error}"
    );
    let Status::Failed {
        error,
        failure: Failure::Unreachable,
        ..
    } = status("missing").await
    else {
        panic!("missing is up, or failed otherwise")
    };
    assert!(
        error.contains("cannot start `/nonexistent/mcp-server`"),
        "{error}"
    );

    for server in ["good", "garbage"] {
        let result = runtime
            .hub()
            .call(
                server,
                "echo",
                json!({"message": "hi"}),
                CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(text_of(&result), "hi");
    }
    let error = runtime
        .hub()
        .call("crashes", "echo", json!({}), CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::Unavailable { .. }), "{error}");
    assert!(
        error
            .to_string()
            .starts_with("server `crashes` is unavailable"),
        "{error}"
    );
    runtime.hub().shutdown().await;
}

#[tokio::test]
async fn arguments_are_checked_against_the_schema_before_sending() {
    let dir = TempDir::new("hub-validate");
    let runtime = start(&dir, &[test_server_table("t", &[], "")]).await;
    let error = runtime
        .hub()
        .call(
            "t",
            "add",
            json!({"a": 1, "b": "two"}),
            CallOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(error, CallError::InvalidArguments { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("argument `b` must be"),
        "{error}"
    );
    let error = runtime
        .hub()
        .call("t", "ad", json!({}), CallOptions::default())
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("has no tool `ad`; did you mean `add`?"),
        "{error}"
    );
    let error = runtime
        .hub()
        .call("nope", "add", json!({}), CallOptions::default())
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("unknown server `nope`; the servers are: t"),
        "{error}"
    );
    let result = runtime
        .hub()
        .call("t", "add", json!({"a": 1, "b": 2}), CallOptions::default())
        .await
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&text_of(&result)).unwrap(),
        json!({"sum": 3})
    );
    runtime.hub().shutdown().await;
}

#[tokio::test]
async fn a_server_that_dies_mid_call_fails_that_call_at_once_and_restarts_on_the_next() {
    let dir = TempDir::new("hub-crash");
    let runtime = start(&dir, &[test_server_table("t", &[], "")]).await;
    let first_pid = text_of(
        &runtime
            .hub()
            .call("t", "pid", json!({}), CallOptions::default())
            .await
            .unwrap(),
    );
    let slow = {
        let hub = runtime.hub().clone();
        tokio::spawn(async move {
            hub.call("t", "slow", json!({"ms": 20000}), CallOptions::default())
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let error = runtime
        .hub()
        .call("t", "crash", json!({"code": 9}), CallOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::Exited { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("server `t` exited with status 9"),
        "{error}"
    );
    let pending = slow.await.unwrap().unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the pending call waited {:?}",
        started.elapsed()
    );
    assert!(
        pending.to_string().contains("exited with status 9"),
        "{pending}"
    );
    let second_pid = text_of(
        &runtime
            .hub()
            .call("t", "pid", json!({}), CallOptions::default())
            .await
            .unwrap(),
    );
    assert_ne!(first_pid, second_pid, "not restarted");
    runtime.hub().shutdown().await;
}

#[tokio::test]
async fn a_call_past_its_timeout_is_cancelled_downstream() {
    let dir = TempDir::new("hub-timeout");
    let runtime = start(&dir, &[test_server_table("t", &[], "")]).await;
    let options = CallOptions {
        timeout: Some(Duration::from_millis(300)),
        ..CallOptions::default()
    };
    let error = runtime
        .hub()
        .call("t", "hang", json!({}), options)
        .await
        .unwrap_err();
    assert!(matches!(error, CallError::Timeout { .. }), "{error:?}");
    assert!(
        error.to_string().contains("did not answer within 300 ms"),
        "{error}"
    );
    let mut count = String::new();
    for _ in 0..50 {
        count = text_of(
            &runtime
                .hub()
                .call("t", "cancelled_count", json!({}), CallOptions::default())
                .await
                .unwrap(),
        );
        if count.contains('1') {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(count.contains('1'), "cancellations seen: {count}");
    runtime.hub().shutdown().await;
}

#[tokio::test]
async fn list_changed_relists_and_tells_subscribers() {
    // Unasked over a 2025-11-25 session; through `subscriptions/listen` over 2026-07-28.
    for protocol in ["2025-11-25", "2026-07-28"] {
        let dir = TempDir::new("hub-changed");
        let runtime = start(
            &dir,
            &[test_server_table(
                "t",
                &[],
                &format!("protocol = \"{protocol}\"\nnew-tools = \"allow\""),
            )],
        )
        .await;
        let view = runtime.hub().server("t").await.unwrap();
        assert_eq!(view.protocol.as_deref(), Some(protocol));
        let before = view.tools.len();
        let mut events = runtime.hub().subscribe();
        runtime
            .hub()
            .call("t", "change_tools", json!({}), CallOptions::default())
            .await
            .unwrap();
        let event = tokio::time::timeout(Duration::from_secs(5), events.recv())
            .await
            .unwrap_or_else(|_| panic!("{protocol}: no change event"))
            .unwrap();
        assert_eq!(event, HubEvent::ToolsChanged { server: "t".into() });
        let after = runtime.hub().server("t").await.unwrap().tools;
        assert_eq!(after.len(), before + 1, "{protocol}");
        assert!(after.iter().any(|t| t.name.starts_with("added_")));
        runtime.hub().shutdown().await;
    }
}

#[tokio::test]
async fn each_server_is_spoken_to_in_the_revision_it_offers() {
    let dir = TempDir::new("hub-protocol");
    let legacy_only = ["--max-protocol-version", "2025-11-25"];
    let runtime = start(
        &dir,
        &[
            // `auto` (the default): 2026-07-28 when offered, else the handshake.
            test_server_table("modern", &[], ""),
            test_server_table("legacy", &legacy_only, ""),
            // Pinned.
            test_server_table("pinned-legacy", &[], "protocol = \"2025-11-25\""),
            test_server_table("pinned-modern", &legacy_only, "protocol = \"2026-07-28\""),
        ],
    )
    .await;
    let view = |name: &str| {
        let hub = runtime.hub().clone();
        let name = name.to_owned();
        async move { hub.server(&name).await.unwrap() }
    };
    for (name, protocol) in [
        ("modern", "2026-07-28"),
        ("legacy", "2025-11-25"),
        ("pinned-legacy", "2025-11-25"),
    ] {
        let server = view(name).await;
        assert_eq!(server.status, Status::Ready, "{name}");
        assert_eq!(server.protocol.as_deref(), Some(protocol), "{name}");
        let echoed = runtime
            .hub()
            .call(
                name,
                "echo",
                json!({"message": name}),
                CallOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(text_of(&echoed), name);
    }
    let Status::Failed { error, .. } = view("pinned-modern").await.status else {
        panic!("a server without 2026-07-28 connected with protocol = \"2026-07-28\"")
    };
    assert!(
        error.contains("supports MCP") && error.contains("not 2026-07-28"),
        "{error}"
    );
    runtime.hub().shutdown().await;
}

#[tokio::test]
async fn pagination_huge_results_and_concurrent_calls() {
    let dir = TempDir::new("hub-paging");
    let runtime = start(
        &dir,
        &[test_server_table(
            "t",
            &[
                "--mode",
                "many-tools",
                "--tools",
                "120",
                "--page-size",
                "25",
            ],
            "",
        )],
    )
    .await;
    let tools = runtime.hub().server("t").await.unwrap().tools;
    assert!(tools.len() > 120, "{} tools", tools.len());
    let result = runtime
        .hub()
        .call(
            "t",
            "huge",
            json!({"bytes": 3_000_000}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(text_of(&result).len(), 3_000_000);
    let started = Instant::now();
    let calls = (0..50).map(|_| {
        runtime
            .hub()
            .call("t", "slow", json!({"ms": 200}), CallOptions::default())
    });
    for result in futures::future::join_all(calls).await {
        result.unwrap();
    }
    // Multiplexed on one connection: about one call's time, not fifty.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    runtime.hub().shutdown().await;
}

#[tokio::test]
async fn children_get_a_scrubbed_environment_and_die_with_their_group() {
    // SAFETY: set before any server starts; no other test reads it.
    unsafe { std::env::set_var("RUNBYTE_E2E_SECRET", "do-not-leak") };
    let dir = TempDir::new("hub-env");
    let runtime = start(
        &dir,
        &[test_server_table("t", &[], "env = { GIVEN = \"yes\" }")],
    )
    .await;
    let env = |name: &str| {
        let hub = runtime.hub().clone();
        let name = name.to_owned();
        async move {
            text_of(
                &hub.call("t", "env", json!({"name": name}), CallOptions::default())
                    .await
                    .unwrap(),
            )
        }
    };
    assert_eq!(env("RUNBYTE_E2E_SECRET").await, "null");
    assert_eq!(env("GIVEN").await, "\"yes\"");
    assert_ne!(env("PATH").await, "null");
    let grandchild: u32 = text_of(
        &runtime
            .hub()
            .call("t", "spawn_grandchild", json!({}), CallOptions::default())
            .await
            .unwrap(),
    )
    .trim()
    .parse()
    .unwrap();
    assert!(is_running(grandchild));
    runtime.hub().shutdown().await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while is_running(grandchild) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !is_running(grandchild),
        "grandchild {grandchild} outlived its server"
    );
}

#[tokio::test]
async fn share_session_gives_each_client_session_its_own_process() {
    let dir = TempDir::new("hub-share");
    let runtime = start(&dir, &[test_server_table("s", &[], "share = \"session\"")]).await;
    let pid = |session: &str| {
        let hub = runtime.hub().clone();
        let options = CallOptions {
            session: Some(session.to_owned()),
            ..CallOptions::default()
        };
        async move { text_of(&hub.call("s", "pid", json!({}), options).await.unwrap()) }
    };
    let (a1, a2, b) = (pid("a").await, pid("a").await, pid("b").await);
    assert_eq!(a1, a2);
    assert_ne!(a1, b);
    runtime.hub().end_session("a").await;
    assert_ne!(pid("a").await, a1);
    runtime.hub().shutdown().await;
}

#[test]
fn tools_and_call_commands_report_each_server() {
    let dir = TempDir::new("hub-cli");
    let tables = [
        test_server_table("good", &["--mode", "odd-names"], ""),
        test_server_table("crashes", &["--mode", "crash-on-initialize"], ""),
    ];
    dir.write("runbyte.toml", &config_of(&tables));
    let listed = run(dir.path(), &["tools"]);
    assert_eq!(listed.code, Some(1), "{listed:?}");
    assert!(listed.stdout.contains("good (ready,"), "{}", listed.stdout);
    assert!(listed.stdout.contains("  with space"), "{}", listed.stdout);
    assert!(
        listed
            .stdout
            .contains("crashes (FAILED: `server/discover` or `initialize` failed: the server exited with status 3"),
        "{}",
        listed.stdout
    );
    let called = run(
        dir.path(),
        &["call", "good", "echo", r#"{"message": "from the shell"}"#],
    );
    assert_eq!(called.code, Some(0), "{called:?}");
    assert!(
        called.stdout.contains("from the shell"),
        "{}",
        called.stdout
    );
    let refused = run(dir.path(), &["call", "good", "echo", "{}"]);
    assert_eq!(refused.code, Some(1));
    assert!(
        refused
            .stderr
            .contains("missing required argument `message`"),
        "{}",
        refused.stderr
    );
}

#[tokio::test]
async fn a_request_too_large_to_send_fails_alone_and_the_connection_goes_on() {
    let dir = TempDir::new("hub-refused");
    let runtime = start(&dir, &[test_server_table("t", &[], "")]).await;
    let pid = |runtime: std::sync::Arc<Gateway>| async move {
        let result = runtime
            .hub()
            .call("t", "pid", json!({}), CallOptions::default())
            .await
            .unwrap();
        text_of(&result)
    };
    let before = pid(runtime.clone()).await;
    // More than may wait for a child's stdin (64 MiB), next to a call in flight.
    let big = "x".repeat(65 << 20);
    let started = Instant::now();
    let (refused, beside) = tokio::join!(
        runtime
            .hub()
            .call("t", "echo", json!({"message": big}), CallOptions::default()),
        runtime
            .hub()
            .call("t", "slow", json!({"ms": 300}), CallOptions::default()),
    );
    let error = refused.unwrap_err().to_string();
    assert!(
        error.contains("server `t`") && error.contains("67108864 bytes"),
        "{error}"
    );
    // A bound against a hang (a call stuck behind a full stdin), far above the figure: 64 MiB
    // of arguments are validated and serialized in a debug build, on a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    beside.unwrap();
    // The same process answers: the connection was never closed.
    assert_eq!(pid(runtime.clone()).await, before);
    assert_eq!(
        runtime.hub().server("t").await.unwrap().status,
        Status::Ready
    );
    runtime.hub().shutdown().await;
}

#[tokio::test]
async fn a_huge_downstream_result_does_not_hold_an_execution_past_its_deadline() {
    let dir = TempDir::new("hub-huge-deadline");
    let tables = [
        test_server_table("test", &[], ""),
        "[sandbox.limits]\ntimeout-ms = 2000\n".to_owned(),
    ];
    dir.write(
        "runbyte.toml",
        &runbyte_tests::config_with(&tables.join("\n")),
    );
    let client = runbyte_tests::client(&dir).await;
    let program = r#"
        import * as test from './servers/test';
        const texts = await Promise.all([1, 2, 3].map(() => test.huge({ bytes: 40000000 })));
        export default texts.length;
    "#;
    let started = Instant::now();
    let (text, _) = runbyte_tests::call(&client, "execute_code", json!({"code": program})).await;
    let elapsed = started.elapsed();
    eprintln!(
        "took {elapsed:?}: {}",
        text.chars().take(300).collect::<String>()
    );
    // The deadline is 2 s; whatever the outcome, the answer comes soon after it.
    assert!(
        elapsed < Duration::from_secs(4),
        "took {elapsed:?}: {text:.300}"
    );
    client.cancel().await.unwrap();
}

/// `max-message-bytes` on a server: an answer over it fails its call at once, naming the limit,
/// and the server's other calls go on.
#[tokio::test(flavor = "multi_thread")]
async fn a_servers_message_cap_fails_the_call_it_answers_naming_the_limit() {
    let dir = TempDir::new("hub-message-cap");
    dir.write(
        "runbyte.toml",
        &runbyte_tests::config_with(&test_server_table(
            "test",
            &[],
            "max-message-bytes = 200000",
        )),
    );
    let client = runbyte_tests::client(&dir).await;
    let program = r#"
        import * as test from './servers/test';
        let error = '';
        try { await test.huge({ bytes: 1000000 }); } catch (e) { error = String(e.message); }
        const small = await test.huge({ bytes: 1000 });
        export default { error, small: String(small).length };
    "#;
    let started = Instant::now();
    let (text, failed) =
        runbyte_tests::call(&client, "execute_code", json!({"code": program})).await;
    assert!(!failed, "{text}");
    let result = runbyte_tests::result_json(&text);
    let error = result["error"].as_str().unwrap();
    assert!(error.contains("200000"), "{error}");
    assert!(error.contains("max-message-bytes"), "{error}");
    assert!(result["small"].as_u64().unwrap() >= 1000, "{result}");
    assert!(started.elapsed() < Duration::from_secs(10));
    client.cancel().await.unwrap();
}

/// Our children whose command line holds `marker` (Unix: Windows lists no command lines).
fn children_with(marker: &str) -> Vec<u32> {
    runbyte_tests::children_of(std::process::id())
        .into_iter()
        .filter(|child| child.command.contains(marker))
        .map(|child| child.pid)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_still_connecting_holds_up_neither_readers_nor_calls_nor_shutdown() {
    let dir = TempDir::new("hub-connecting");
    let runtime = Gateway::hub_only_in_memory(parse_config(
        dir.path(),
        &config_of(&[
            test_server_table("good", &[], ""),
            test_server_table(
                "hangs",
                &["--mode", "hang-on-initialize"],
                "init-timeout-ms = 60000",
            ),
        ]),
    ));
    let hub = runtime.hub().clone();
    let starting = tokio::spawn({
        let hub = hub.clone();
        async move { hub.start().await }
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    let hanging = loop {
        if let Some(&pid) = children_with("hang-on-initialize").first() {
            break pid;
        }
        assert!(
            Instant::now() < deadline,
            "the hanging server never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let started = Instant::now();
    assert_eq!(hub.server("hangs").await.unwrap().status, Status::Starting);
    let echoed = hub
        .call(
            "good",
            "echo",
            json!({"message": "hi"}),
            CallOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(text_of(&echoed), "hi");
    // A call to the hanging server waits for its connection, and gives up when the Hub stops.
    let waiting = tokio::spawn({
        let hub = hub.clone();
        async move {
            hub.call(
                "hangs",
                "echo",
                json!({"message": "x"}),
                CallOptions::default(),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    hub.shutdown().await;
    let error = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the waiting call outlived shutdown")
        .unwrap()
        .unwrap_err();
    assert!(error.to_string().contains("shutting down"), "{error}");
    tokio::time::timeout(Duration::from_secs(5), starting)
        .await
        .expect("start outlived shutdown")
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while is_running(hanging) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !is_running(hanging),
        "the server still connecting outlived shutdown"
    );
}
