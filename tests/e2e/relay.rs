//! What a tool asks of the user reaches the client of the program that called it: a downstream
//! test server's `ask` tool (an `elicitation/create` request on a 2025-11-25 connection, an
//! `input_required` result on a 2026-07-28 one), answered by a real client (the Python SDK) in
//! either era, over stdio and streamable HTTP; a policy's approval question the same way; and a
//! `requestState` that was altered is refused.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use runbyte_tests::{Served, TempDir, config_with, python_client, runbyte, test_server_table};
use serde_json::{Value, json};

const ASK: &str = "import { ask } from './servers/t';\n\
                   export default await ask({ message: 'favourite colour?' });";

/// A configuration with the demo server and the test server `t` spoken to in `protocol`.
fn config_text(protocol: &str, extra: &str) -> String {
    config_with(&format!(
        "{}{extra}",
        test_server_table("t", &[], &format!("protocol = \"{protocol}\""))
    ))
}

/// The text the program returned, parsed.
fn returned(report: &Value) -> Value {
    let text = report["result"].as_str().unwrap();
    let first = text.lines().next().unwrap_or_default();
    serde_json::from_str(first).unwrap_or(Value::String(text.to_owned()))
}

#[test]
fn a_tools_question_is_answered_by_the_client_in_every_era_pairing() {
    let dir = TempDir::new("relay");
    let program = dir.write("ask.ts", ASK);
    let program = program.to_str().unwrap();
    let exe = runbyte();
    for downstream in ["2025-11-25", "2026-07-28"] {
        let config = dir.write("runbyte.toml", &config_text(downstream, ""));
        let http = Served::with_config("relay-http", "http", &config_text(downstream, ""));
        for era in ["legacy", "2026-07-28"] {
            let stdio = [
                "--era",
                era,
                "--answer",
                "blue",
                "--program",
                program,
                "stdio",
                exe.to_str().unwrap(),
                config.to_str().unwrap(),
            ];
            let url = http.url("/mcp");
            let over_http = [
                "--era",
                era,
                "--answer",
                "blue",
                "--program",
                program,
                "http",
                &url,
            ];
            for (transport, args) in [("stdio", &stdio[..]), ("http", &over_http[..])] {
                let Some(report) = python_client(args) else {
                    return;
                };
                let case = format!("server {downstream}, client {era} over {transport}");
                assert_eq!(report["result_is_error"], false, "{case}: {report}");
                let answer = returned(&report);
                assert_eq!(
                    answer,
                    json!({"action": "accept", "content": {"answer": "blue"}}),
                    "{case}: {report}"
                );
                assert_eq!(report["asked"], json!(["favourite colour?"]), "{case}");
            }
        }
    }
}

#[test]
fn a_client_that_cannot_answer_gets_an_error_naming_the_tool() {
    let dir = TempDir::new("relay-refused");
    let program = dir.write("ask.ts", ASK);
    for downstream in ["2025-11-25", "2026-07-28"] {
        let config = dir.write("runbyte.toml", &config_text(downstream, ""));
        for era in ["legacy", "2026-07-28"] {
            let Some(report) = python_client(&[
                "--era",
                era,
                "--program",
                program.to_str().unwrap(),
                "stdio",
                runbyte().to_str().unwrap(),
                config.to_str().unwrap(),
            ]) else {
                return;
            };
            let text = report["result"].as_str().unwrap();
            assert!(
                text.contains("t/ask asked the user for input")
                    && text.contains("`elicitation` capability"),
                "server {downstream}, client {era}: {text}"
            );
        }
    }
}

#[test]
fn a_policy_asks_the_user_to_approve_a_call() {
    let dir = TempDir::new("relay-approve");
    // `slow` carries no annotations: `readonly` with `ask = true` puts it to the user.
    let program = dir.write(
        "slow.ts",
        "import { slow } from './servers/t';\nawait slow({ ms: 1 });\nexport default 'approved';",
    );
    let policy =
        "\n[sandbox]\npolicy = [\"limits\", \"readonly\"]\n[sandbox.readonly]\nask = true\n";
    let config = dir.write("runbyte.toml", &config_text("2026-07-28", policy));
    for era in ["legacy", "2026-07-28"] {
        let Some(report) = python_client(&[
            "--era",
            era,
            "--answer",
            "yes",
            "--program",
            program.to_str().unwrap(),
            "stdio",
            runbyte().to_str().unwrap(),
            config.to_str().unwrap(),
        ]) else {
            return;
        };
        assert_eq!(returned(&report), json!("approved"), "{era}: {report}");
        let asked = report["asked"][0].as_str().unwrap_or_default();
        assert!(
            asked.contains("Allow a call that may change something?") && asked.contains("`t/slow`"),
            "{era}: {report}"
        );
        // Without a way to ask, the call is denied with the policy's reason.
        let report = python_client(&[
            "--era",
            era,
            "--program",
            program.to_str().unwrap(),
            "stdio",
            runbyte().to_str().unwrap(),
            config.to_str().unwrap(),
        ])
        .unwrap();
        let text = report["result"].as_str().unwrap();
        assert!(
            text.contains("t/slow was denied by policy `readonly`")
                && text.contains("not known to be read-only"),
            "{era}: {text}"
        );
    }
}

/// `runbyte serve` over stdio, spoken to line by line in 2026-07-28.
struct Stdio2026 {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: mpsc::Receiver<Value>,
    _dir: TempDir,
}

impl Stdio2026 {
    fn start(config: &str) -> Self {
        let dir = TempDir::new("relay-state");
        dir.write("runbyte.toml", config);
        let mut child = Command::new(runbyte())
            .arg("serve")
            .current_dir(dir.path())
            .env("RUNBYTE_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (stdin, stdout) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str(&line)
                    && tx.send(value).is_err()
                {
                    return;
                }
            }
        });
        Stdio2026 {
            child,
            stdin,
            lines,
            _dir: dir,
        }
    }

    fn call(&mut self, id: u64, arguments: Value, retry: Value) -> Value {
        let mut params = json!({
            "name": "execute_code",
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            },
        });
        if let (Some(params), Some(retry)) = (params.as_object_mut(), retry.as_object()) {
            params.extend(retry.clone());
        }
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        writeln!(self.stdin, "{request}").unwrap();
        self.stdin.flush().unwrap();
        loop {
            let message = self
                .lines
                .recv_timeout(Duration::from_secs(60))
                .expect("no answer");
            if message["id"] == id {
                return message;
            }
        }
    }
}

impl Drop for Stdio2026 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_altered_request_state_is_refused_and_the_genuine_one_resumes_the_execution() {
    let mut served = Stdio2026::start(&config_text("2025-11-25", ""));
    let asked = served.call(1, json!({"code": ASK}), json!({}));
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let question = &result["inputRequests"]["runbyte_input"];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert_eq!(question["params"]["message"], "favourite colour?");
    let state = result["requestState"].as_str().unwrap().to_owned();
    let answer = json!({"runbyte_input": {"action": "accept", "content": {"answer": "green"}}});

    let mut altered = state.clone().into_bytes();
    let middle = altered.len() / 2;
    altered[middle] = if altered[middle] == b'x' { b'y' } else { b'x' };
    let altered = String::from_utf8(altered).unwrap();
    let refused = served.call(
        2,
        json!({"code": ASK}),
        json!({"inputResponses": answer, "requestState": altered}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("requestState"),
        "{refused}"
    );

    // A retry without the answer is asked again; the genuine state with it resumes the program.
    let again = served.call(3, json!({"code": ASK}), json!({"requestState": state}));
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    let state = again["result"]["requestState"].as_str().unwrap().to_owned();
    let done = served.call(
        4,
        json!({"code": ASK}),
        json!({"inputResponses": answer, "requestState": state}),
    );
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(r#""answer":"green""#), "{text}");
    // Used once: the same state again names an execution that has ended.
    let replayed = served.call(
        5,
        json!({"code": ASK}),
        json!({"inputResponses": answer, "requestState": state}),
    );
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
}
