//! The Tasks extension (SEP-2663) through Runbyte: a downstream server's task answering a
//! 2026-07-28 client's direct call reaches the client under an id of Runbyte's, and the
//! client's `tasks/get`, `tasks/update` and `tasks/cancel` reach that server; another client
//! (another address) and a made-up id get -32602; a client without the extension gets the
//! server's -32021 for a tool that must run as a task.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use runbyte_tests::{Served, config_of, test_server_table};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A hang bound only.
const BOUND: Duration = Duration::from_secs(60);

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Runbyte over HTTP in front of the test server's conformance fixtures, shown as they are.
fn served(label: &str) -> Served {
    let fixture = test_server_table(
        "fixtures",
        &["--mode", "conformance"],
        "expose = \"direct\"\ndirect-prefix = \"\"",
    );
    Served::with_config(label, "http", &config_of(&[fixture]))
}

/// One 2026-07-28 request from address `from` (a loopback address of its own is another
/// client to Runbyte), with the tasks extension declared or not; its JSON-RPC answer.
async fn request(
    served: &Served,
    from: Ipv4Addr,
    method: &str,
    params: Value,
    tasks: bool,
) -> Value {
    let capabilities = if tasks {
        json!({"extensions": {TASKS: {}}})
    } else {
        json!({})
    };
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let name = params
        .get("name")
        .or_else(|| params.get("taskId"))
        .and_then(Value::as_str)
        .map(|name| format!("Mcp-Name: {name}\r\n"))
        .unwrap_or_default();
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let url = served.url("");
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n\
         {name}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let exchange = async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from((from, 0))).unwrap();
        let mut stream = socket
            .connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
            .await
            .unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        response
    };
    let response = tokio::time::timeout(BOUND, exchange).await.unwrap();
    let json = &response[response.find('{').unwrap()..=response.rfind('}').unwrap()];
    serde_json::from_str(json).unwrap()
}

const CLIENT: Ipv4Addr = Ipv4Addr::LOCALHOST;
const OTHER: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

async fn get(served: &Served, from: Ipv4Addr, id: &str) -> Value {
    request(served, from, "tasks/get", json!({"taskId": id}), true).await
}

/// Polls task `id` until `done` says its status is reached.
async fn until(served: &Served, id: &str, done: impl Fn(&str) -> bool) -> Value {
    let polling = async {
        loop {
            let got = get(served, CLIENT, id).await;
            if done(got["result"]["status"].as_str().unwrap_or_default()) {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(BOUND, polling).await.unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_servers_task_reaches_its_client_under_runbytes_id_and_no_one_else() {
    let served = served("tasks-pass-through");
    let call = |seconds: u64| {
        request(
            &served,
            CLIENT,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": seconds, "label": "e2e"}}),
            true,
        )
    };

    let created = call(60).await;
    let result = &created["result"];
    assert_eq!(result["resultType"], "task", "{created}");
    assert_eq!(result["status"], "working", "{created}");
    let id = result["taskId"].as_str().unwrap().to_owned();
    assert!(id.starts_with("rbt-"), "not Runbyte's id: {id}");
    assert!(result["ttlMs"].as_u64().is_some() && result["pollIntervalMs"].as_u64().is_some());

    let got = get(&served, CLIENT, &id).await;
    assert_eq!(got["result"]["taskId"], json!(id), "{got}");
    assert_eq!(got["result"]["status"], "working", "{got}");

    // Another client, a made-up id, and a client without the extension get nothing of it.
    for (from, asked, tasks) in [
        (OTHER, id.as_str(), true),
        (CLIENT, "rbt-00000000000000000000000000000000", true),
    ] {
        let refused = get(&served, from, asked).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        let cancelled = request(
            &served,
            from,
            "tasks/cancel",
            json!({"taskId": asked}),
            tasks,
        )
        .await;
        assert_eq!(cancelled["error"]["code"], -32602, "{cancelled}");
    }
    let undeclared = request(&served, CLIENT, "tasks/get", json!({"taskId": id}), false).await;
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
    let still = get(&served, CLIENT, &id).await;
    assert_eq!(still["result"]["status"], "working", "{still}");

    // Its own client cancels it: the server's task settles cancelled.
    let ack = request(&served, CLIENT, "tasks/cancel", json!({"taskId": id}), true).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let ended = until(&served, &id, |status| status != "working").await;
    assert_eq!(ended["result"]["status"], "cancelled", "{ended}");

    // A task that completes inlines the server's result.
    let quick = call(0).await;
    let quick = quick["result"]["taskId"].as_str().unwrap().to_owned();
    let done = until(&served, &quick, |status| status == "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"], "computed e2e in 0 s",
        "{done}"
    );

    // A question the task parks on reaches the client, and its answer the server.
    let asking = request(
        &served,
        CLIENT,
        "tools/call",
        json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}}),
        true,
    )
    .await;
    let asking = asking["result"]["taskId"].as_str().unwrap().to_owned();
    let parked = until(&served, &asking, |status| status == "input_required").await;
    assert!(parked["result"]["inputRequests"]["confirm"]["method"] == "elicitation/create");
    let answer = json!({"taskId": asking, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}});
    let ack = request(&served, CLIENT, "tasks/update", answer, true).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = until(&served, &asking, |status| status == "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"],
        "deleted a.txt"
    );

    // A tool that must run as a task, called without the extension: the server's -32021.
    let required = request(
        &served,
        CLIENT,
        "tools/call",
        json!({"name": "failing_job", "arguments": {}}),
        false,
    )
    .await;
    assert_eq!(required["error"]["code"], -32021, "{required}");
}

/// A program does not have to know: a call its server answers with a task is waited for (at
/// the server's poll interval) and the program gets the task's result; a call that times out
/// cancels its task downstream.
#[tokio::test(flavor = "multi_thread")]
async fn a_programs_call_that_becomes_a_task_is_waited_for_and_cancelled_when_it_times_out() {
    let dir = runbyte_tests::TempDir::new("tasks-bridge");
    let fixture = test_server_table("fixtures", &["--mode", "conformance"], "");
    dir.write(
        "runbyte.toml",
        &format!(
            "{}\n[sandbox.limits]\ntimeout-ms = 30000\ncall-timeout-ms = 4000\n",
            config_of(&[fixture])
        ),
    );
    let client = runbyte_tests::client(&dir).await;
    let run = async |code: &str| {
        let program = format!("import {{ callTool }} from 'runbyte:bridge';\n{code}");
        tokio::time::timeout(
            BOUND,
            runbyte_tests::call(&client, "execute_code", json!({ "code": program })),
        )
        .await
        .unwrap()
    };

    // Two seconds of work, as a task: the program gets its result.
    let (text, is_error) = run(
        "const r = await callTool('fixtures', 'slow_compute', {seconds: 2, label: 'prog'});\n\
         export default r;",
    )
    .await;
    assert!(!is_error, "{text}");
    assert!(text.contains("computed prog in 2 s"), "{text}");

    // A tool error inside the task is the program's tool error, as a call's would be.
    let (text, _) = run("let out = 'no error';\n\
         try { out = JSON.stringify(await callTool('fixtures', 'failing_job', {})); }\n\
         catch (e) { out = 'caught: ' + e; }\n\
         export default out;")
    .await;
    assert!(text.contains("failing_job fails on purpose"), "{text}");

    // Longer than the call may take: the call times out and its task is cancelled downstream.
    let (text, _) = run("let out = 'no error';\n\
         try { await callTool('fixtures', 'slow_compute', {seconds: 60, label: 'long'}); }\n\
         catch (e) { out = String(e); }\n\
         export default out;")
    .await;
    assert!(text.contains("did not answer within 4000 ms"), "{text}");
    let cancelled = async {
        loop {
            let (text, _) =
                run("export default await callTool('fixtures', 'task_cancellations', {});").await;
            let count = text.split("\n--- ").next().unwrap_or_default().to_owned();
            assert!(count == "0" || count == "1", "{text}");
            if count == "1" {
                return count;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(BOUND, cancelled).await.unwrap();
    client.cancel().await.unwrap();
}

/// `execute_code` as a task: a 2026-07-28 client that declared the extension gets a task at
/// once; the execution's question is the task's `input_required`, answered by `tasks/update`;
/// another client cannot see it; `tasks/cancel` stops the execution and cancels its
/// downstream task.
#[tokio::test(flavor = "multi_thread")]
async fn execute_code_runs_as_a_task_for_a_client_that_declared_the_extension() {
    let fixture = test_server_table("fixtures", &["--mode", "conformance"], "");
    let config = format!(
        "{}\n[server]\ntask-timeout-ms = 120000\n[sandbox.limits]\ntimeout-ms = 90000\ncall-timeout-ms = 80000\n",
        config_of(&[fixture])
    );
    let served = Served::with_config("tasks-execute", "http", &config);
    let program = |body: &str| {
        json!({"name": "execute_code", "arguments": {
            "code": format!("import {{ callTool }} from 'runbyte:bridge';\n{body}")
        }})
    };
    let start = async |body: &str| {
        let created = request(&served, CLIENT, "tools/call", program(body), true).await;
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        created["result"]["taskId"].as_str().unwrap().to_owned()
    };

    // A program of two seconds: a task at once, its result once it completed.
    let id = start(
        "const r = await callTool('fixtures', 'slow_compute', {seconds: 2, label: 'task'});\n\
         export default r;",
    )
    .await;
    let refused = get(&served, OTHER, &id).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let told = async {
        loop {
            let got = get(&served, CLIENT, &id).await;
            if let Some(message) = got["result"]["statusMessage"].as_str() {
                return message.to_owned();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    let told = tokio::time::timeout(BOUND, told).await.unwrap();
    assert!(told.contains("tool calls so far"), "{told}");
    let done = until(&served, &id, |status| status == "completed").await;
    let text = done["result"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("computed task in 2 s"), "{done}");

    // A question during the execution (its downstream task asks) is the task's.
    let id = start(
        "const r = await callTool('fixtures', 'confirm_delete', {filename: 'b.txt'});\n\
         export default r;",
    )
    .await;
    let parked = until(&served, &id, |status| status == "input_required").await;
    let questions = parked["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .clone();
    assert_eq!(questions.len(), 1, "{parked}");
    let (key, question) = questions.into_iter().next().unwrap();
    assert_eq!(question["method"], "elicitation/create", "{parked}");
    let answer = json!({"taskId": id, "inputResponses": {
        key: {"action": "accept", "content": {"confirm": true}}
    }});
    let ack = request(&served, CLIENT, "tasks/update", answer, true).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let done = until(&served, &id, |status| status == "completed").await;
    let text = done["result"]["result"]["content"][0]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("deleted b.txt"), "{done}");

    // Cancelled mid-run: the execution stops and its downstream task is cancelled.
    let id =
        start("export default await callTool('fixtures', 'slow_compute', {seconds: 60});").await;
    until(&served, &id, |status| status == "working").await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let ack = request(&served, CLIENT, "tasks/cancel", json!({"taskId": id}), true).await;
    assert_eq!(ack["result"], json!({"resultType": "complete"}), "{ack}");
    let ended = until(&served, &id, |status| status != "working").await;
    assert_eq!(ended["result"]["status"], "cancelled", "{ended}");
    let counted = async {
        loop {
            let asked =
                program("export default await callTool('fixtures', 'task_cancellations', {});");
            let answer = request(&served, CLIENT, "tools/call", asked, false).await;
            let text = answer["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if text.starts_with('1') {
                return;
            }
            assert!(text.starts_with('0'), "{answer}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(BOUND, counted).await.unwrap();
}

/// An execution's task past `task-timeout-ms` fails with an error saying so.
#[tokio::test(flavor = "multi_thread")]
async fn an_execution_task_past_its_timeout_fails() {
    let fixture = test_server_table("fixtures", &["--mode", "conformance"], "");
    let config = format!(
        "{}\n[server]\ntask-timeout-ms = 1500\n",
        config_of(&[fixture])
    );
    let served = Served::with_config("tasks-timeout", "http", &config);
    let program = "import { callTool } from 'runbyte:bridge';\n\
                   export default await callTool('fixtures', 'slow_compute', {seconds: 20});";
    let created = request(
        &served,
        CLIENT,
        "tools/call",
        json!({"name": "execute_code", "arguments": {"code": program}}),
        true,
    )
    .await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(created["result"]["ttlMs"], 1500, "{created}");
    let ended = until(&served, &id, |status| status != "working").await;
    assert_eq!(ended["result"]["status"], "failed", "{ended}");
    let message = ended["result"]["error"]["message"].as_str().unwrap();
    assert!(message.contains("expired"), "{ended}");
}
