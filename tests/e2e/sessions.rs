//! Many clients and long executions: cancellation, the busy queue, progress, the audit log.

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{CallToolRequestParams, ClientRequest, ProgressNotificationParam},
    service::NotificationContext,
    transport::TokioChildProcess,
};
use runbyte_tests::{TempDir, call, client, config_with, result_json, runbyte, test_server_table};
use serde_json::{Value, json};

fn execute(code: &str) -> ClientRequest {
    let mut params = CallToolRequestParams::new("execute_code");
    params.arguments = json!({"code": code}).as_object().cloned();
    ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params))
}

#[tokio::test]
async fn a_cancelled_execution_stops_promptly_and_frees_its_worker() {
    let dir = TempDir::new("cancel");
    dir.write("runbyte.toml", &config_with("[sandbox]\nworkers = 1\n"));
    let client = client(&dir).await;
    let handle = client
        .peer()
        .send_cancellable_request(
            execute("for (;;) {}"),
            rmcp::service::PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    handle.cancel(Some("changed my mind".into())).await.unwrap();
    // One worker: the next execution runs only once the cancelled one has stopped.
    let started = Instant::now();
    let (text, error) = call(
        &client,
        "execute_code",
        json!({"code": "export default 1 + 1;"}),
    )
    .await;
    assert!(!error && result_json(&text) == json!(2), "{text}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn beyond_the_pool_and_queue_executions_are_refused_as_busy_while_ping_answers() {
    let dir = TempDir::new("busy");
    dir.write(
        "runbyte.toml",
        &config_with("[sandbox]\nworkers = 1\nqueue = 1\n"),
    );
    let client = Arc::new(client(&dir).await);
    // Each run holds the one worker 3 s: a ping that waited for it would take 2.5 s or more, so
    // the 2 s bound below tells waiting from a loaded machine's slowness.
    let slow = "import { sleep } from './servers/demo';\nawait sleep({ ms: 3000 });\nexport default 'slept';";
    let runs: Vec<_> = (0..3)
        .map(|i| {
            let client = client.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(150 * i)).await;
                call(&client, "execute_code", json!({"code": slow})).await
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    client
        .peer()
        .send_request(ClientRequest::PingRequest(Default::default()))
        .await
        .unwrap();
    client.peer().list_all_tools().await.unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(2000),
        "ping waited {:?}",
        started.elapsed()
    );
    let mut busy = 0;
    let mut done = 0;
    for run in runs {
        let (text, error) = run.await.unwrap();
        if error {
            assert!(text.contains("busy"), "{text}");
            busy += 1;
        } else {
            assert_eq!(result_json(&text), json!("slept"));
            done += 1;
        }
    }
    assert_eq!((done, busy), (2, 1));
}

#[derive(Clone, Default)]
struct CountsProgress(
    Arc<AtomicUsize>,
    Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
);

impl ClientHandler for CountsProgress {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.fetch_add(1, Ordering::SeqCst);
        let token = serde_json::to_value(&params.progress_token).unwrap();
        self.1.lock().unwrap().push(token);
    }
}

#[tokio::test]
async fn a_long_execution_reports_progress() {
    let dir = TempDir::new("progress");
    dir.write("runbyte.toml", &config_with(""));
    let mut command = tokio::process::Command::new(runbyte());
    command
        .arg("serve")
        .current_dir(dir.path())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("RUNBYTE_LOG", "warn");
    let counter = CountsProgress::default();
    let client = counter
        .clone()
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap();
    let mut params = CallToolRequestParams::new("execute_code");
    params.arguments =
        json!({"code": "import { sleep } from './servers/demo';\nawait sleep({ ms: 2600 });"})
            .as_object()
            .cloned();
    let result = client.peer().call_tool(params).await.unwrap();
    assert_ne!(result.is_error, Some(true));
    assert!(
        counter.0.load(Ordering::SeqCst) >= 2,
        "{} progress notifications",
        counter.0.load(Ordering::SeqCst)
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_audit_log_records_executions_and_calls_with_secrets_redacted() {
    let dir = TempDir::new("audit");
    let log = dir.path().join("audit.jsonl");
    let extra = format!(
        "[server]\naudit-log = {:?}\n{}",
        log.display().to_string(),
        test_server_table("test", &[], "env = { API_KEY = \"sk-secret-4242\" }")
    );
    dir.write("runbyte.toml", &config_with(&extra));
    let client = client(&dir).await;
    let program = "import { echo, fail } from './servers/test';\nawait echo({ message: 'hi' });\ntry { await fail({ message: 'boom sk-secret-4242' }); } catch {}\nexport default 'ok';";
    let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
    assert!(!error, "{text}");
    client.cancel().await.unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("sk-secret-4242"), "{text}");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let calls: Vec<&Value> = lines.iter().filter(|l| l["event"] == "tool_call").collect();
    assert_eq!(calls.len(), 2, "{text}");
    assert_eq!(calls[0]["server"], "test");
    assert_eq!(calls[0]["tool"], "echo");
    assert_eq!(calls[0]["outcome"], "ok");
    assert_eq!(calls[1]["outcome"], "error");
    // A call whose arguments hold a configured credential is refused before it is sent.
    assert!(
        calls[1]["error"]
            .as_str()
            .unwrap()
            .contains("test/fail: the arguments hold a secret"),
        "{text}"
    );
    let execution = lines.iter().find(|l| l["event"] == "execution").unwrap();
    assert_eq!(execution["tool_calls"], 2);
    assert_eq!(execution["session"], calls[0]["session"]);
    assert!(execution["duration_ms"].is_u64());
}

/// A tool called directly passes on its server's progress to the client that asked for it,
/// under the progress token of the client's request.
#[tokio::test]
async fn a_direct_call_passes_on_its_servers_progress() {
    let dir = TempDir::new("direct-progress");
    let table = test_server_table("t", &[], "expose = \"direct\"\ndirect-prefix = \"t_\"");
    dir.write("runbyte.toml", &config_with(&table));
    let mut command = tokio::process::Command::new(runbyte());
    command
        .arg("serve")
        .current_dir(dir.path())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("RUNBYTE_LOG", "warn");
    let counter = CountsProgress::default();
    let client = counter
        .clone()
        .serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !client
        .peer()
        .list_all_tools()
        .await
        .unwrap()
        .iter()
        .any(|tool| tool.name == "t_slow")
    {
        assert!(Instant::now() < deadline, "t_slow was never listed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut params = CallToolRequestParams::new("t_slow");
    params.arguments = json!({"ms": 400, "steps": 4}).as_object().cloned();
    // rmcp gives the request its own progress token: the progress must come back under it.
    let request =
        rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
    let handle = client
        .peer()
        .send_request_with_option(request, rmcp::service::PeerRequestOptions::no_options())
        .await
        .unwrap();
    let token = serde_json::to_value(&handle.progress_token).unwrap();
    let answer = handle.await_response().await.unwrap();
    let rmcp::model::ServerResult::CallToolResult(result) = answer else {
        panic!("not a tool result: {answer:?}");
    };
    assert_ne!(result.is_error, Some(true), "{result:?}");
    // Notifications may trail the answer by a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    while counter.0.load(Ordering::SeqCst) < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(counter.0.load(Ordering::SeqCst), 4);
    // Under the client's token, not the one Runbyte's request went downstream with.
    assert!(
        counter.1.lock().unwrap().iter().all(|sent| *sent == token),
        "{:?}",
        counter.1.lock().unwrap()
    );
    client.cancel().await.unwrap();
}
