//! Ordinary servers and clients: a small hand-written legacy server, a pinned legacy revision,
//! 2026-07-28 clients of older servers' direct tools, clients that list at once, modules
//! current when the answer is sent, names that cannot be told apart, and fairness between
//! 2026-07-28 clients.

use std::time::Duration;

use runbyte_core::{gateway::Gateway, hub::Status};
use runbyte_tests::{TempDir, config_of, parse_config, repo_root, test_dep};
use serde_json::Value;

/// A `[servers.<name>]` table running `tests/python/legacy_server.py`, recording each
/// `initialize` it gets into `record`.
fn legacy_table(
    python: &std::path::Path,
    name: &str,
    record: &std::path::Path,
    extra: &str,
) -> String {
    format!(
        "[servers.{name}]\ncommand = {:?}\nargs = [{:?}, {:?}]\n{extra}\n",
        python.display().to_string(),
        repo_root()
            .join("tests/python/legacy_server.py")
            .display()
            .to_string(),
        record.display().to_string(),
    )
}

/// The `initialize` params the legacy server recorded, in order.
fn recorded(record: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

async fn hub_of(dir: &TempDir, tables: &[String]) -> std::sync::Arc<Gateway> {
    let gateway = Gateway::hub_only_in_memory(parse_config(dir.path(), &config_of(tables)));
    tokio::time::timeout(Duration::from_secs(60), gateway.hub().start())
        .await
        .expect("the servers did not start within a minute");
    gateway
}

/// A legacy server that answers `server/discover` (any unknown method) with `{}` connects in
/// the default `protocol = "auto"`: the probe's answer is no discover result, so Runbyte opens
/// it again with `initialize`, asking for 2025-11-25, and the tool is called.
#[tokio::test]
async fn auto_falls_back_to_initialize_when_discover_gets_an_empty_result() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    let dir = TempDir::new("ordinary-empty-discover");
    let record = dir.path().join("initialize.jsonl");
    let gateway = hub_of(&dir, &[legacy_table(&python, "legacy", &record, "")]).await;
    let view = gateway.hub().server("legacy").await.unwrap();
    assert_eq!(view.status, Status::Ready, "{:?}", view.status);
    assert_eq!(view.protocol.as_deref(), Some("2025-11-25"));
    let initialized = recorded(&record);
    assert_eq!(initialized.len(), 1, "{initialized:?}");
    assert_eq!(initialized[0]["protocolVersion"], "2025-11-25");
    let result = gateway
        .hub()
        .call(
            "legacy",
            "hello",
            serde_json::json!({"name": "you"}),
            Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text().unwrap().text, "hello you");
}

/// `protocol = "2025-11-25"` sends `initialize` with 2025-11-25 (never a probe), and a server
/// that echoes it is a legacy connection: its tool changes arrive unasked, no
/// `subscriptions/listen` is tried.
#[tokio::test]
async fn a_pinned_legacy_revision_is_what_initialize_asks_for() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    let dir = TempDir::new("ordinary-pinned");
    let record = dir.path().join("initialize.jsonl");
    let gateway = hub_of(
        &dir,
        &[legacy_table(
            &python,
            "pinned",
            &record,
            "protocol = \"2025-11-25\"",
        )],
    )
    .await;
    let view = gateway.hub().server("pinned").await.unwrap();
    assert_eq!(view.status, Status::Ready, "{:?}", view.status);
    assert_eq!(view.protocol.as_deref(), Some("2025-11-25"));
    let initialized = recorded(&record);
    assert_eq!(initialized.len(), 1, "{initialized:?}");
    assert_eq!(initialized[0]["protocolVersion"], "2025-11-25");
}

/// Runs `tests/python/direct_client.py` (the official Python SDK) with `args`; its JSON report.
fn direct_client(python: &std::path::Path, args: &[&str]) -> Value {
    let output = std::process::Command::new(python)
        .arg(repo_root().join("tests/python/direct_client.py"))
        .args(args)
        .env("RUNBYTE_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the Python client failed: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// A test server spoken to in 2025-11-25 (its results carry no `resultType`), exposed
/// directly, that takes 2.5 s to start.
fn slow_legacy_direct() -> String {
    runbyte_tests::test_server_table(
        "t",
        &["--mode", "slow-start", "--start-delay-ms", "2500"],
        "expose = \"direct\"\nprotocol = \"2025-11-25\"",
    )
}

/// What a client that lists once, at once, and calls a direct tool must see: the slow
/// server's tools in that first list, and its (legacy) result accepted by the SDK at 2026-07-28.
fn assert_listed_and_called(report: &Value) {
    assert_eq!(report["era"], "2026-07-28", "{report}");
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        tools.contains(&"execute_code") && tools.contains(&"t_echo"),
        "the first tools/list lacks the starting server's tools: {tools:?}"
    );
    assert_eq!(report["is_error"], false, "{report}");
    assert_eq!(report["text"], "through", "{report}");
}

/// Over stdio: a 2026-07-28 client lists right after connecting (the server still starting)
/// and calls a direct tool of a 2025-11-25 server.
#[test]
fn a_modern_client_lists_at_once_and_calls_an_older_servers_direct_tool_over_stdio() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    let dir = TempDir::new("ordinary-direct-stdio");
    let config = dir.write("runbyte.toml", &config_of(&[slow_legacy_direct()]));
    let report = direct_client(
        &python,
        &[
            "--era",
            "2026-07-28",
            "--call",
            "t_echo",
            r#"{"message": "through"}"#,
            "stdio",
            &runbyte_tests::runbyte().display().to_string(),
            &config.display().to_string(),
        ],
    );
    assert_listed_and_called(&report);
}

/// Over HTTP: the same, each request a connection of its own.
#[test]
fn a_modern_client_lists_at_once_and_calls_an_older_servers_direct_tool_over_http() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    let served = runbyte_tests::Served::with_config(
        "ordinary-direct-http",
        "http",
        &config_of(&[slow_legacy_direct()]),
    );
    let report = direct_client(
        &python,
        &[
            "--era",
            "2026-07-28",
            "--call",
            "t_echo",
            r#"{"message": "through"}"#,
            "http",
            &served.url("/mcp"),
        ],
    );
    assert_listed_and_called(&report);
}

/// A legacy server table with extra tools and prompts (JSON arrays, see legacy_server.py).
fn legacy_with(
    python: &std::path::Path,
    name: &str,
    dir: &TempDir,
    tools: &str,
    prompts: &str,
    extra: &str,
) -> String {
    format!(
        "[servers.{name}]\ncommand = {:?}\nargs = [{:?}, {:?}, '{tools}', '{prompts}']\n{extra}\n",
        python.display().to_string(),
        repo_root()
            .join("tests/python/legacy_server.py")
            .display()
            .to_string(),
        dir.path()
            .join(format!("{name}.jsonl"))
            .display()
            .to_string(),
    )
}

/// A direct tool may not take one of Runbyte's names (server `execute` + tool `code`), a tool
/// whose name is no MCP tool name (a zero-width space in it) is not exposed, a name that only
/// looks like an excluded one is excluded, and prompts that would share a name (`a_` +
/// `b_report`, `a_b_` + `report`) are given to neither: through a real client over stdio.
#[tokio::test]
async fn names_that_collide_or_pass_for_others_are_left_out() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    let dir = TempDir::new("ordinary-names");
    let tables = [
        legacy_with(
            &python,
            "execute",
            &dir,
            r#"["code", "delete\u200b_thing", "Delete_thing", "delete_thing", "fine", "odd\u200b_name"]"#,
            "[]",
            "expose = \"direct\"\nexclude-tools = [\"delete_*\"]",
        ),
        legacy_with(&python, "a", &dir, "[]", r#"["b_report", "alone"]"#, ""),
        legacy_with(&python, "a_b", &dir, "[]", r#"["report"]"#, ""),
    ];
    dir.write("runbyte.toml", &config_of(&tables));
    let client = runbyte_tests::client(&dir).await;

    let tools = client.peer().list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(names.contains(&"execute_fine"), "{names:?}");
    let own: Vec<_> = tools.iter().filter(|t| t.name == "execute_code").collect();
    assert_eq!(own.len(), 1, "{names:?}");
    assert_ne!(
        own[0].description.as_deref(),
        Some("from the server"),
        "the downstream's tool took Runbyte's name"
    );
    for hidden in [
        "execute_delete_thing",
        "execute_Delete_thing",
        "execute_delete\u{200b}_thing",
        "execute_odd\u{200b}_name",
    ] {
        assert!(!names.contains(&hidden), "{hidden:?} listed: {names:?}");
    }
    let (refused, error) =
        runbyte_tests::call(&client, "execute_odd\u{200b}_name", serde_json::json!({})).await;
    assert!(
        error && refused.contains("is not an MCP tool name"),
        "{refused}"
    );
    // A hidden tool is one its server does not have, for a client: -32602, saying why.
    let refused = client
        .peer()
        .call_tool(rmcp::model::CallToolRequestParams::new(
            "execute_delete\u{200b}_thing",
        ))
        .await
        .unwrap_err();
    let refused = refused.to_string();
    assert!(
        refused.contains("-32602") && refused.contains("exclude-tools"),
        "{refused}"
    );
    let (ran, error) = runbyte_tests::call(&client, "execute_fine", serde_json::json!({})).await;
    assert!(!error && ran == "fine ran", "{ran}");

    let prompts = client.peer().list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert!(names.contains(&"a_alone"), "{names:?}");
    assert!(!names.contains(&"a_b_report"), "{names:?}");
    let asked = client
        .peer()
        .get_prompt(rmcp::model::GetPromptRequestParams::new("a_b_report"))
        .await
        .unwrap_err()
        .to_string();
    assert!(asked.contains("would all be named `a_b_report`"), "{asked}");
    let alone = client
        .peer()
        .get_prompt(rmcp::model::GetPromptRequestParams::new("a_alone"))
        .await
        .unwrap();
    assert_eq!(alone.messages.len(), 1, "{alone:?}");
    client.cancel().await.unwrap();

    // `runbyte tools` shows the direct names left out, with why.
    let listed = runbyte_tests::run(dir.path(), &["tools"]);
    assert!(
        listed
            .stdout
            .contains("direct name execute_code (hidden: server `execute`'s tool `code`")
            && listed
                .stdout
                .contains("direct name execute_odd\\u{200b}_name (hidden:"),
        "{}",
        listed.stdout
    );
}

/// One 2026-07-28 `execute_code` over HTTP (a request of its own, on a connection of its own,
/// from 127.0.0.1); the answer's first text.
fn stateless_execute(port: u16, id: u64, code: &str) -> String {
    use std::io::{Read, Write};
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {
            "name": "execute_code",
            "arguments": {"code": code},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
    .to_string();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n\
         Mcp-Name: execute_code\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let json = &response[response.find('{').unwrap()..=response.rfind('}').unwrap()];
    let answer: Value = serde_json::from_str(json).unwrap();
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no result text: {answer}"))
        .to_owned()
}

/// Eight 2026-07-28 executions at once from one client (one address) are one queue in the
/// sandbox's admission, not eight: with one worker, another client's execution sent while
/// they wait runs after about one of them, not after all.
#[tokio::test(flavor = "multi_thread")]
async fn one_stateless_clients_flood_is_held_to_its_share() {
    use rmcp::{ServiceExt, transport::StreamableHttpClientTransport};
    let config = format!(
        "{}\n[sandbox]\nworkers = 1\n",
        config_of(&[runbyte_tests::test_server_table("t", &[], "")])
    );
    let served = runbyte_tests::Served::with_config("ordinary-fairness", "http", &config);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let other =
        ().serve(StreamableHttpClientTransport::from_uri(served.url("/mcp")))
            .await
            .unwrap();
    // The server the flood imports is up before it starts (so it waits for nothing else).
    let (warm, error) = runbyte_tests::call(
        &other,
        "execute_code",
        serde_json::json!({"code": "import { echo } from './servers/t';\nexport default await echo({ message: 'up' });"}),
    )
    .await;
    assert!(!error, "{warm}");

    let finished = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let flood: Vec<_> = (0..8)
        .map(|i| {
            let (port, finished) = (served.port, finished.clone());
            std::thread::spawn(move || {
                let code = "import { slow } from './servers/t';\nawait slow({ ms: 1500 });\nexport default 'flood';";
                let text = stateless_execute(port, 100 + i, code);
                assert!(text.contains("flood"), "{text}");
                finished.lock().unwrap().push("flood");
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (text, error) = runbyte_tests::call(
        &other,
        "execute_code",
        serde_json::json!({"code": "export default 'other';"}),
    )
    .await;
    assert!(!error && text.contains("other"), "{text}");
    finished.lock().unwrap().push("other");
    for thread in flood {
        thread.join().unwrap();
    }
    let finished = finished.lock().unwrap().clone();
    let position = finished.iter().position(|&who| who == "other").unwrap();
    assert!(
        position <= 3,
        "the other client's execution ran after {position} of the flood's: {finished:?}"
    );
    other.cancel().await.unwrap();
}

/// A module shows the type inferred from a call by the time the call's `execute_code` answer
/// is sent: a `read_file` right after it (no waiting, no retry) has the type.
#[tokio::test]
async fn a_module_shows_the_inferred_type_when_the_answer_is_sent() {
    let dir = TempDir::new("ordinary-inferred");
    dir.write("runbyte.toml", &runbyte_tests::config_with(""));
    let client = runbyte_tests::client(&dir).await;
    let path = serde_json::json!({"path": "/servers/demo/get_issue.ts"});
    // The demo server up, its untyped module generated.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (module, _) = runbyte_tests::call(&client, "read_file", path.clone()).await;
        if module.contains("declares no output schema") {
            assert!(!module.contains("inferred"), "{module}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{module}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let program = "import { get_issue } from './servers/demo';\n\
                   const issue = await get_issue({ id: 1 });\nexport default issue.title;";
    // Calls 1, 2 and 4 each change what the module shows ("inferred from N calls").
    for calls in 1..=4 {
        let (text, error) = runbyte_tests::call(
            &client,
            "execute_code",
            serde_json::json!({"code": program}),
        )
        .await;
        assert!(!error, "{text}");
        let (module, error) = runbyte_tests::call(&client, "read_file", path.clone()).await;
        let shown = if calls == 3 { 2 } else { calls };
        let wanted = format!("inferred from {shown} call");
        assert!(
            !error && module.contains(&wanted),
            "after call {calls} the module does not show {wanted:?} yet:\n{module}"
        );
    }
    client.cancel().await.unwrap();
}
