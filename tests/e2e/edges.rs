//! Downstream servers at their edges, through a real client: broken tool lists, servers that
//! hang at start, storms of `list_changed`.

use std::time::{Duration, Instant};

use runbyte_tests::{TempDir, call, client, config_of, result_json, run, test_server_table};
use serde_json::json;

#[tokio::test]
async fn a_server_with_broken_tools_serves_its_other_tools() {
    let dir = TempDir::new("edges-broken-tools");
    let tables = [test_server_table(
        "t",
        &["--mode", "broken-schemas"],
        "init-timeout-ms = 10000",
    )];
    dir.write("runbyte.toml", &config_of(&tables));
    let started = Instant::now();
    let client = client(&dir).await;

    let (answer, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { echo, broken_null } from './servers/t';\n\
            const a = await echo({ message: 'hi' });\n\
            const b = await broken_null({ anything: 1 });\n\
            export default { a, b };"}),
    )
    .await;
    assert!(!error, "{answer}");
    assert_eq!(
        result_json(&answer),
        json!({"a": "hi", "b": {"tool": "broken_null", "arguments": {"anything": 1}}})
    );
    // The deep schema no longer costs the whole answer: it arrives at once, not after 30 s.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "took {:?}",
        started.elapsed()
    );

    let (index, error) = call(&client, "read_file", json!({"path": "/servers/t/index.ts"})).await;
    assert!(!error, "{index}");
    for tool in [
        "broken_null",
        "broken_missing",
        "broken_string",
        "broken_deep",
    ] {
        assert!(index.contains(&format!("`{tool}`")), "{tool}: {index}");
    }
    assert!(index.contains("nests deeper than"), "{index}");
    assert!(index.contains("export * from"), "{index}");
    let (listing, _) = call(&client, "list_directory", json!({"path": "/servers/t"})).await;
    assert!(
        listing.contains("echo.ts") && listing.contains("broken_null.ts"),
        "{listing}"
    );
    drop(client);

    let tools = run(dir.path(), &["tools", "t"]);
    assert_eq!(tools.code, Some(0), "{tools:?}");
    assert!(tools.stdout.contains("t (ready,"), "{}", tools.stdout);
    assert!(
        tools.stdout.contains("warning: `broken_deep`") && tools.stdout.contains("`broken_null`"),
        "{}",
        tools.stdout
    );
    let check = run(dir.path(), &["check"]);
    assert!(
        check.stdout.contains("server   t") && check.stdout.contains("warning: `broken_string`"),
        "{}",
        check.stdout
    );
}

#[tokio::test]
async fn a_server_hanging_at_start_holds_up_only_the_programs_that_import_it() {
    let dir = TempDir::new("edges-hanging-start");
    let tables = [
        test_server_table("hung", &["--mode", "hang-on-initialize"], ""),
        test_server_table("fast", &[], ""),
        test_server_table("late", &["--start-delay-ms", "2500"], ""),
    ];
    dir.write("runbyte.toml", &config_of(&tables));
    let started = Instant::now();
    let client = client(&dir).await;

    let (root, error) = call(&client, "list_directory", json!({"path": "/servers"})).await;
    let first_listing = started.elapsed();
    eprintln!("first list_directory answered {first_listing:?} after start");
    assert!(!error, "{root}");
    assert!(root.contains("hung/  (starting)"), "{root}");
    assert!(root.contains("fast/"), "{root}");
    let (index, _) = call(
        &client,
        "read_file",
        json!({"path": "/servers/hung/index.ts"}),
    )
    .await;
    assert!(index.contains("is starting"), "{index}");

    let (answer, error) = call(&client, "execute_code", json!({"code": "export default 1"})).await;
    let first_program = started.elapsed();
    assert!(!error && result_json(&answer) == json!(1), "{answer}");
    let (answer, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { echo } from './servers/fast';\nexport default await echo({ message: 'quick' });"}),
    )
    .await;
    let fast_program = started.elapsed();
    assert!(!error && result_json(&answer) == json!("quick"), "{answer}");
    eprintln!(
        "first list_directory {first_listing:?}, first program {first_program:?}, \
         program importing `fast` {fast_program:?} after start"
    );
    assert!(
        first_listing < Duration::from_secs(1),
        "list_directory took {first_listing:?}"
    );
    assert!(
        fast_program < Duration::from_secs(2),
        "the programs took {first_program:?} and {fast_program:?}"
    );

    // A program that imports a server still starting waits for it.
    let (answer, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { echo } from './servers/late';\nexport default await echo({ message: 'worth the wait' });"}),
    )
    .await;
    assert!(
        !error && result_json(&answer) == json!("worth the wait"),
        "{answer}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

/// Lists `/servers/<folder>` until it shows `file`; how long that took.
async fn until_listed(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    folder: &str,
    file: &str,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        let (listing, _) = call(
            client,
            "list_directory",
            json!({"path": format!("/servers/{folder}")}),
        )
        .await;
        if listing.contains(file) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < within,
            "{file} not in /servers/{folder} after {within:?}: {listing}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_storm_of_list_changed_from_a_stalled_server_leaves_the_others_prompt() {
    let dir = TempDir::new("edges-storm-stalled");
    let tables = [
        test_server_table("stormy", &["--mode", "storm,hang-on-relist"], ""),
        test_server_table("calm", &[], "new-tools = \"allow\""),
    ];
    dir.write("runbyte.toml", &config_of(&tables));
    let client = client(&dir).await;
    let (answer, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { storm } from './servers/stormy';\nexport default await storm({ count: 3000 });"}),
    )
    .await;
    assert!(!error, "{answer}");
    // stormy now ignores every tools/list; calm's change must still come through at once.
    let (answer, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { change_tools } from './servers/calm';\nexport default await change_tools({});"}),
    )
    .await;
    assert!(!error, "{answer}");
    let took = until_listed(&client, "calm", "added_1.ts", Duration::from_secs(5)).await;
    eprintln!("calm's change showed after {took:?}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
}

#[tokio::test]
async fn a_storm_of_list_changed_causes_a_bounded_number_of_relists() {
    let dir = TempDir::new("edges-storm-count");
    let tables = [test_server_table("stormy", &["--mode", "storm"], "")];
    dir.write("runbyte.toml", &config_of(&tables));
    let client = client(&dir).await;
    let (answer, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { storm } from './servers/stormy';\nexport default await storm({ count: 3000 });"}),
    )
    .await;
    assert!(!error, "{answer}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (answer, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { list_count } from './servers/stormy';\nexport default await list_count({});"}),
    )
    .await;
    assert!(!error, "{answer}");
    let lists: u64 = result_json(&answer).as_u64().unwrap();
    eprintln!("3000 notifications caused {} re-list(s)", lists - 1);
    assert!((2..=12).contains(&lists), "{lists} tools/list requests");
}

/// A server written by hand, on raw JSON-RPC lines: `deep` answers with a result nested past
/// what can be read, `fine` with a plain one. Tool calls skip rmcp's service loop where the
/// transport allows (see `pump::Sender`): an unreadable answer must still fail its call at once.
const DEEP_ANSWER_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, id = message["method"], message["id"]
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "deep", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": name, "inputSchema": {"type": "object"}}
                            for name in ("deep", "fine")]}
    elif method == "tools/call" and message["params"]["name"] == "deep":
        sys.stdout.write('{"jsonrpc":"2.0","id":%s,"result":{"content":%s}}\n'
                         % (json.dumps(id), "[" * 300 + "]" * 300))
        sys.stdout.flush()
        continue
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "fine"}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": id,
                          "error": {"code": -32601, "message": method}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": id, "result": result}), flush=True)
"#;

#[tokio::test]
async fn an_answer_too_deep_to_read_fails_its_call_at_once_and_the_next_call_works() {
    let Some(python) = runbyte_tests::test_dep("venv/bin/python") else {
        return;
    };
    let dir = TempDir::new("edges-deep-answer");
    dir.write("deep.py", DEEP_ANSWER_SERVER);
    let table = format!(
        "[servers.d]\ncommand = {:?}\nargs = [{:?}]\n",
        python.display().to_string(),
        dir.path().join("deep.py").display().to_string()
    );
    dir.write("runbyte.toml", &config_of(&[table]));
    let client = client(&dir).await;
    let started = Instant::now();
    let (answer, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { deep, fine } from './servers/d';\n\
            let failed = '';\n\
            try { await deep({}); } catch (e) { failed = String(e); }\n\
            export default { failed, after: await fine({}) };"}),
    )
    .await;
    assert!(!error, "{answer}");
    let answer = result_json(&answer);
    assert!(
        answer["failed"]
            .as_str()
            .is_some_and(|failed| failed.contains("nests deeper than")),
        "{answer}"
    );
    assert_eq!(answer["after"], "fine");
    // At once, not at the call's timeout (a bound for a hang, far above the figure).
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}
