//! Shutdown leaves nothing behind: after `runbyte serve` ends (stdin closed, SIGTERM, SIGINT),
//! after `runbyte exec`, and after a server restarts, no process of a downstream server's process
//! group is alive, grandchildren included. Each check runs the moment Runbyte has exited (or the
//! restarting call has returned): the stop must have finished, not merely begun.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use runbyte_core::{gateway::Gateway, hub::CallOptions};
use runbyte_tests::{
    TempDir, config_of, is_running, live_group_members, parse_config, result_json, run, runbyte,
    test_server_table,
};
use serde_json::{Value, json};

/// A program that starts a grandchild in the server's process group and returns both pids.
const SPAWN: &str = "import { pid, spawn_grandchild } from './servers/t';\nexport default { server: await pid({}), grandchild: await spawn_grandchild({}) };\n";

/// The pids a run of [`SPAWN`] reported: the server (its group's id) and its grandchild.
fn pids(result: &Value) -> (u32, u32) {
    let pid = |key: &str| {
        u32::try_from(
            result[key]
                .as_u64()
                .unwrap_or_else(|| panic!("no {key}: {result}")),
        )
        .unwrap()
    };
    (pid("server"), pid("grandchild"))
}

/// Fails unless the group `server` led, and `grandchild`, are gone.
fn assert_gone(server: u32, grandchild: u32, when: &str) {
    assert!(
        !is_running(grandchild),
        "{when}: grandchild {grandchild} is still running"
    );
    let members = live_group_members(server);
    assert!(
        members.is_empty(),
        "{when}: process group {server} still has {members:?}"
    );
}

/// `runbyte serve` over stdio, spoken to line by line.
struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Serve {
    fn start(dir: &TempDir) -> Serve {
        let mut child = Command::new(runbyte())
            .arg("serve")
            .current_dir(dir.path())
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env_remove("RUNBYTE_CONFIG")
            .env("RUNBYTE_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut serve = Serve {
            child,
            stdin,
            lines,
        };
        serve.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "shutdown-test", "version": "0"}}),
        );
        serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        serve
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and waits for its response's `result`.
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("no answer from runbyte serve");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == json!(id) {
                return message["result"].clone();
            }
        }
    }

    /// Runs [`SPAWN`] through `execute_code`; the server's and the grandchild's pids. Tried
    /// again while the server is still starting (its tools not listed yet, so the import fails
    /// before anything runs).
    fn spawn_grandchild(&mut self) -> (u32, u32) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for id in 2.. {
            let result = self.request(
                id,
                "tools/call",
                json!({"name": "execute_code", "arguments": {"code": SPAWN}}),
            );
            let text = result["content"][0]["text"].as_str().unwrap_or_default();
            if result["isError"] == json!(true)
                && text.starts_with("Import error")
                && Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            assert_ne!(result["isError"], json!(true), "{text}");
            return pids(&result_json(text));
        }
        unreachable!()
    }

    /// Waits (at most `within`) for the process to exit; how long it took.
    fn wait_exit(&mut self, within: Duration) -> Duration {
        let started = Instant::now();
        loop {
            if self.child.try_wait().unwrap().is_some() {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < within,
                "runbyte serve did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for Serve {
    /// After a failed assertion: SIGTERM first, so that Runbyte still stops its servers (a
    /// SIGKILL would orphan the stubborn ones), then SIGKILL if it is still there.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = Command::new("kill")
                .args(["-TERM", &self.child.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(5);
            while self.child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_dir(label: &str, server_args: &[&str]) -> TempDir {
    let dir = TempDir::new(label);
    let tables = [
        test_server_table("t", server_args, ""),
        "[transports.stdio]\nstop-grace-ms = 300\n".to_owned(),
    ];
    dir.write("runbyte.toml", &config_of(&tables));
    dir
}

#[test]
fn serve_ended_by_stdin_eof_leaves_no_downstream_process() {
    // Stubborn, so that the stop outlasts the async runtime's own shutdown wait.
    let dir = serve_dir("shutdown-eof", &["--mode", "stubborn"]);
    let mut serve = Serve::start(&dir);
    let (server, grandchild) = serve.spawn_grandchild();
    assert!(is_running(server) && is_running(grandchild));
    drop(serve.stdin.take());
    serve.wait_exit(Duration::from_secs(10));
    assert_gone(server, grandchild, "after stdin closed");
}

#[test]
fn serve_ended_by_sigterm_leaves_no_downstream_process() {
    // A server that ignores both stdin closing and SIGTERM: the group needs SIGKILL, and the
    // wait for it is bounded (2 × 300 ms grace + 500 ms, well under the limit below).
    let dir = serve_dir("shutdown-term", &["--mode", "stubborn"]);
    let mut serve = Serve::start(&dir);
    let (server, grandchild) = serve.spawn_grandchild();
    assert!(is_running(server) && is_running(grandchild));
    serve.signal("TERM");
    let took = serve.wait_exit(Duration::from_secs(10));
    assert_gone(server, grandchild, "after SIGTERM");
    assert!(took < Duration::from_secs(4), "shutdown took {took:?}");
}

#[test]
fn serve_ended_by_sigint_leaves_no_downstream_process() {
    let dir = serve_dir("shutdown-int", &[]);
    let mut serve = Serve::start(&dir);
    let (server, grandchild) = serve.spawn_grandchild();
    assert!(is_running(server) && is_running(grandchild));
    serve.signal("INT");
    serve.wait_exit(Duration::from_secs(10));
    assert_gone(server, grandchild, "after SIGINT");
}

#[test]
fn exec_leaves_no_downstream_process() {
    let dir = serve_dir("shutdown-exec", &[]);
    let program = dir.write("spawn.ts", SPAWN);
    let ran = run(dir.path(), &["exec", program.to_str().unwrap()]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    let (server, grandchild) = pids(&result_json(&ran.stdout));
    assert_gone(server, grandchild, "after exec");
}

#[tokio::test]
async fn a_restarted_server_leaves_no_process_of_its_old_group() {
    let dir = TempDir::new("shutdown-restart");
    let runtime = Gateway::hub_only_in_memory(parse_config(
        dir.path(),
        &config_of(&[test_server_table("t", &[], "")]),
    ));
    runtime.hub().start().await;
    let call = |tool: &'static str, args: Value| {
        let hub = runtime.hub().clone();
        async move { hub.call("t", tool, args, CallOptions::default()).await }
    };
    let number = |result: rmcp::model::CallToolResult| -> u32 {
        let text = result.content[0].as_text().unwrap().text.clone();
        text.trim().parse().unwrap()
    };
    let server = number(call("pid", json!({})).await.unwrap());
    let grandchild = number(call("spawn_grandchild", json!({})).await.unwrap());
    // The server dies, leaving its grandchild in its group; the connection's end stops the
    // group, and the next call restarts the server once the old group is gone.
    let _ = call("crash", json!({"code": 7})).await;
    let restarted = number(call("pid", json!({})).await.unwrap());
    assert_ne!(restarted, server);
    assert_gone(server, grandchild, "after the restart");
    runtime.hub().shutdown().await;
    assert_gone(restarted, grandchild, "after shutdown");
}
