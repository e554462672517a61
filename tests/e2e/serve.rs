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
        .env("XDG_STATE_HOME", dir.path().join("state"))
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

/// Unix only: the lingering server is a shell script, and SIGKILL ends Runbyte.
#[cfg(unix)]
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
        .env("XDG_STATE_HOME", dir.path().join("state"))
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
    let children = runbyte_tests::children_of(runbyte_pid);
    let shells: Vec<u32> = children
        .iter()
        .filter(|child| child.command.starts_with("sh "))
        .map(|child| child.pid)
        .collect();
    assert_eq!(shells.len(), 1, "children of runbyte: {children:?}");
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

/// The client's stdin is read without a thread in between: a request written in pieces is
/// read whole, a blank line is skipped, a line over `max-line-bytes` is dropped (the log names
/// its length and the cap) and the requests around it are answered in order; closing stdin ends
/// the server.
#[tokio::test]
async fn stdin_requests_in_pieces_and_over_the_cap() {
    use std::process::Stdio;
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

    let dir = TempDir::new("serve-stdin");
    dir.write(
        "runbyte.toml",
        &config_with("[transports.stdio]\nmax-line-bytes = 8192\n"),
    );
    let mut child = Command::new(runbyte())
        .arg("serve")
        .current_dir(dir.path())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("RUNBYTE_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    // In three writes, apart in time.
    let (a, rest) = initialize.split_at(20);
    let (b, c) = rest.split_at(40);
    for piece in [a, b, c, "\n"] {
        stdin.write_all(piece.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    }
    let answer = next_answer(&mut stdout).await;
    assert!(
        answer.contains(r#""id":1"#) && answer.contains("runbyte"),
        "{answer}"
    );
    let long = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(10_000)
    );
    let after = r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#;
    stdin
        .write_all(format!("\n{long}\n   \n{after}\n").as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
    let answer = next_answer(&mut stdout).await;
    assert!(
        answer.contains(r#""id":3"#),
        "the line after the long one: {answer}"
    );
    // Answers the client does not read for a while, over what the pipe holds: large ones wait
    // in order for a helper thread, small ones after them wait too; all arrive whole.
    let mut batch = String::new();
    for id in 10..50 {
        if id % 2 == 0 {
            batch.push_str(&format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"execute_code","arguments":{{"code":"export default 'x'.repeat(9000) + '{id}';"}}}}}}"#
            ));
        } else {
            batch.push_str(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#));
        }
        batch.push('\n');
    }
    stdin.write_all(batch.as_bytes()).await.unwrap();
    stdin.flush().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 40 {
        let line = next_answer(&mut stdout).await;
        let answer: serde_json::Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("a whole JSON line ({e}): {}", &line[..line.len().min(200)])
        });
        let id = answer["id"].as_u64().unwrap();
        if id.is_multiple_of(2) {
            let text = answer["result"]["content"][0]["text"].as_str().unwrap();
            assert!(text.contains(&format!("{}{id}", "x".repeat(9000))), "{id}");
        }
        assert!(seen.insert(id), "answered twice: {id}");
    }
    drop(stdin);
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), child.wait())
        .await
        .expect("runbyte serve exits when its stdin closes")
        .unwrap();
    assert!(status.success(), "{status}");
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .await
        .unwrap();
    assert!(
        log.contains("dropped a 10060-byte line from stdin: longer than the 8192-byte cap"),
        "{log}"
    );
}

/// The next answer `runbyte serve` writes (notifications skipped), each line within 20 s.
async fn next_answer(
    stdout: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) -> String {
    loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(20), stdout.next_line())
            .await
            .expect("an answer within 20 s")
            .unwrap()
            .expect("stdout still open");
        // A notification (the tool list changing once the demo server is up) may come between
        // answers at any time.
        let notification = serde_json::from_str::<serde_json::Value>(&line)
            .is_ok_and(|message| message.get("id").is_none() && message.get("method").is_some());
        if !notification {
            return line;
        }
    }
}
