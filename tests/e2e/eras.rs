//! MCP 2026-07-28 beside 2025-11-25 over stdio: the built `runbyte serve`, driven line by line,
//! so that every byte on the wire is what the spec says (the HTTP listener is judged by the
//! conformance suite in `listeners.rs`).

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use runbyte_tests::{TempDir, config_of, runbyte, test_server_table};
use serde_json::{Value, json};

const VERSION: &str = "2026-07-28";

/// `runbyte serve` over stdio with one test server `t`; every line it prints is kept.
struct Served {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    seen: Vec<Value>,
    _dir: TempDir,
}

impl Served {
    fn start() -> Served {
        Served::start_with("")
    }

    /// With `extra` in the test server's table.
    fn start_with(extra: &str) -> Served {
        Served::start_server(&[], extra)
    }

    /// With the test server started with `args`, and `extra` in its table.
    fn start_server(args: &[&str], extra: &str) -> Served {
        let dir = TempDir::new("eras-stdio");
        dir.write(
            "runbyte.toml",
            &config_of(&[test_server_table("t", args, extra)]),
        );
        let mut child = Command::new(runbyte())
            .args(["serve", "--config"])
            .arg(dir.path().join("runbyte.toml"))
            .env("RUNBYTE_LOG", "warn")
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line}"));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        Served {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            _dir: dir,
        }
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The first message (from now on) that `wanted` picks, within 60 s.
    fn wait_for(&mut self, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {what}; saw {:#?}", self.seen));
            self.seen.push(message.clone());
            if wanted(&message) {
                return message;
            }
        }
    }

    /// Sends a request and waits for its answer.
    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.wait_for(&format!("answer to request {id}"), |m| {
            m["id"] == id && (m.get("result").is_some() || m.get("error").is_some())
        })
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `_meta` of a 2026-07-28 request.
fn meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "eras-test", "version": "1"},
    })
}

fn with_meta(mut params: Value) -> Value {
    params["_meta"] = meta(VERSION);
    params
}

#[test]
fn stdio_serves_2026_07_28_requests_without_a_handshake() {
    let mut served = Served::start();

    let discovered = served.request(1, "server/discover", with_meta(json!({})));
    let result = &discovered["result"];
    assert_eq!(result["resultType"], "complete", "{discovered}");
    let versions = result["supportedVersions"].as_array().unwrap();
    assert!(versions.contains(&json!(VERSION)) && versions.contains(&json!("2025-11-25")));
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "runbyte"
    );
    assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
    assert!(result["ttlMs"].is_u64() && result["cacheScope"].is_string());

    // Errors keep the request's id and carry the spec's codes.
    let no_meta = served.request(2, "tools/list", json!({}));
    assert_eq!(no_meta["error"]["code"], -32602, "{no_meta}");
    let old = served.request(3, "tools/list", json!({"_meta": meta("1900-01-01")}));
    assert_eq!(old["error"]["code"], -32022, "{old}");
    assert_eq!(old["error"]["data"]["requested"], "1900-01-01");
    assert!(
        old["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .iter()
            .all(|v| versions.contains(v))
    );

    let listed = served.request(4, "tools/list", with_meta(json!({})));
    assert_eq!(listed["result"]["resultType"], "complete");
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "list_directory",
            "read_file",
            "execute_code",
            "search_tools",
            "save_skill"
        ]
    );

    // A subscription: acknowledged first, with what Runbyte delivers of what was asked (list
    // changes; not resources of an unknown server).
    served.send(json!({"jsonrpc": "2.0", "id": 5, "method": "subscriptions/listen",
        "params": with_meta(json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true,
            "resourceSubscriptions": ["runbyte://nowhere/x"]}}))}));
    let ack = served.wait_for("the subscription's acknowledgment", |m| {
        m["method"] == "notifications/subscriptions/acknowledged"
    });
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        5
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "promptsListChanged": true})
    );

    // A program changes a downstream server's tools: the change arrives on the subscription.
    let program = "import { change_tools } from './servers/t';\nawait change_tools({});\nexport default 'changed';";
    let ran = served.request(
        6,
        "tools/call",
        with_meta(json!({"name": "execute_code", "arguments": {"code": program}})),
    );
    assert_eq!(ran["result"]["resultType"], "complete", "{ran}");
    assert_ne!(ran["result"]["isError"], true, "{ran}");
    assert!(ran.to_string().contains("changed"), "{ran}");
    // It may arrive before the call's answer (the answer waits for its token counts).
    let is_change = |m: &Value| m["method"] == "notifications/tools/list_changed";
    let changed = match served.seen.iter().find(|m| is_change(m)).cloned() {
        Some(changed) => changed,
        None => served.wait_for("a tool-list change on the subscription", is_change),
    };
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 5,
        "{changed}"
    );

    // What 2026-07-28 removed is not found.
    for (id, method) in [(7, "ping"), (8, "logging/setLevel")] {
        let removed = served.request(id, method, with_meta(json!({"level": "info"})));
        assert_eq!(removed["error"]["code"], -32601, "{method}: {removed}");
    }
    // Nothing untagged was sent unasked: every notification belongs to the subscription.
    for message in &served.seen {
        if message.get("id").is_none() {
            assert_eq!(
                message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 5,
                "an unsolicited notification: {message}"
            );
        }
    }
}

#[test]
fn stdio_still_serves_a_2025_11_25_session() {
    let mut served = Served::start();
    let init = served.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "eras-test", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert!(init["result"].get("resultType").is_none(), "{init}");
    served.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let pong = served.request(2, "ping", json!({}));
    assert_eq!(pong["result"], json!({}), "{pong}");
    let listed = served.request(3, "tools/list", json!({}));
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 5);
    assert!(listed["result"].get("resultType").is_none(), "{listed}");
}

/// A tool seen directly by a 2026-07-28 client, of a 2026-07-28 server: the server's question
/// reaches the client as the server asked it (`input_required`), the client's retry brings the
/// answer and the server's `requestState` back, and the server's refusal of a tampered state
/// comes back as its JSON-RPC error.
#[test]
fn a_direct_call_passes_its_servers_question_to_a_2026_07_28_client() {
    let mut served = Served::start_with("expose = \"direct\"\ndirect-prefix = \"t_\"");
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in 100.. {
        let listed = served.request(id, "tools/list", with_meta(json!({})));
        if listed.to_string().contains("\"t_ask\"") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "t_ask was never listed: {listed}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let call = |extra: Value| {
        let mut params = json!({"name": "t_ask", "arguments": {"message": "colour?"}});
        for (key, value) in extra.as_object().unwrap() {
            params[key] = value.clone();
        }
        with_meta(params)
    };

    let asked = served.request(1, "tools/call", call(json!({})));
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let question = &result["inputRequests"]["answer"];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert_eq!(question["params"]["message"], "colour?", "{asked}");
    let state = result["requestState"].as_str().unwrap().to_owned();
    assert!(state.starts_with("ask:"), "the server's own state: {asked}");

    let answer = json!({"answer": {"action": "accept", "content": {"answer": "blue"}}});
    let answered = served.request(
        2,
        "tools/call",
        call(json!({"inputResponses": answer, "requestState": state})),
    );
    assert_eq!(answered["result"]["resultType"], "complete", "{answered}");
    assert_ne!(answered["result"]["isError"], true, "{answered}");
    assert!(answered.to_string().contains("blue"), "{answered}");

    let tampered = served.request(
        3,
        "tools/call",
        call(json!({"inputResponses": answer, "requestState": format!("{state}-x")})),
    );
    assert_eq!(tampered["error"]["code"], -32602, "{tampered}");
}

/// A prompt whose 2026-07-28 server asks before it answers (`input_required`), got by a
/// 2025-11-25 session: Runbyte asks the client by request, as for a call, and retries.
#[test]
fn a_2025_11_25_session_answers_a_2026_07_28_prompts_question() {
    let mut served = Served::start_server(
        &["--mode", "conformance"],
        "expose = \"direct\"\ndirect-prefix = \"\"",
    );
    let init = served.request(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
               "clientInfo": {"name": "eras-test", "version": "1"}}),
    );
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    served.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let deadline = Instant::now() + Duration::from_secs(60);
    for id in 100.. {
        let listed = served.request(id, "prompts/list", json!({}));
        if listed
            .to_string()
            .contains("test_input_required_result_prompt")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the prompt was never listed: {listed}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    served.send(json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/get",
        "params": {"name": "test_input_required_result_prompt"}}));
    let question = served.wait_for("the server's question", |m| {
        m["method"] == "elicitation/create"
    });
    served.send(json!({"jsonrpc": "2.0", "id": question["id"],
        "result": {"action": "accept", "content": {"context": "the harbour"}}}));
    let got = served.wait_for("the prompt", |m| m["id"] == 2);
    assert!(
        got.to_string().contains("Use this context: the harbour"),
        "{got}"
    );
}
