//! `runbyte serve` over stdio, driven by a real MCP client process (this test, through rmcp's
//! child-process transport).

use rmcp::{ServiceExt, transport::TokioChildProcess};
use runbyte_tests::{TempDir, config_with, runbyte};
use tokio::process::Command;

#[tokio::test]
async fn serve_over_stdio_answers_initialize_and_ping() {
    let dir = TempDir::new("serve-stdio");
    dir.write("runbyte.toml", &config_with(""));
    let mut command = Command::new(runbyte());
    command
        .arg("serve")
        .current_dir(dir.path())
        .env("RUNBYTE_LOG", "warn");
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let info = client.peer().peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "runbyte");
    assert!(
        info.instructions
            .as_deref()
            .unwrap_or_default()
            .contains("execute_code")
    );
    client
        .peer()
        .send_request(rmcp::model::ClientRequest::PingRequest(Default::default()))
        .await
        .unwrap();
    client.cancel().await.unwrap();
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().nth(1));
        if ppid == Some(pid.to_string().as_str()) {
            children.push(child);
        }
    }
    children
}

#[tokio::test]
async fn downstream_servers_do_not_outlive_a_killed_runbyte() {
    let dir = TempDir::new("serve-killed");
    // A server that would outlive its stdin: after the real server exits, its shell waits on.
    let test_server = runbyte_tests::test_server().display().to_string();
    let table = format!(
        "[servers.lingers]\ncommand = \"sh\"\nargs = [\"-c\", \"{test_server}; sleep 300\"]\n"
    );
    dir.write("runbyte.toml", &config_with(&table));
    let mut command = Command::new(runbyte());
    command
        .arg("serve")
        .current_dir(dir.path())
        .env("RUNBYTE_LOG", "warn");
    let transport = TokioChildProcess::new(command).unwrap();
    let runbyte_pid = transport.id().unwrap();
    let client = ().serve(transport).await.unwrap();
    let (text, error) = runbyte_tests::call(
        &client,
        "execute_code",
        serde_json::json!({"code": "import { echo } from './servers/lingers';\nexport default await echo({ message: 'up' });"}),
    )
    .await;
    assert!(!error, "{text}");
    let shells: Vec<u32> = children_of(runbyte_pid)
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sh")
        })
        .collect();
    assert_eq!(
        shells.len(),
        1,
        "children of runbyte: {:?}",
        children_of(runbyte_pid)
    );
    // SIGKILL: Runbyte gets no chance to stop anything itself.
    std::process::Command::new("kill")
        .args(["-9", &runbyte_pid.to_string()])
        .status()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while runbyte_tests::is_running(shells[0]) && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        !runbyte_tests::is_running(shells[0]),
        "the downstream server {} outlived runbyte",
        shells[0]
    );
    drop(client);
}
