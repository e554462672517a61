//! Ordinary servers and clients: a small hand-written legacy server, a pinned legacy revision,
//! 2026-07-28 clients of older servers' direct tools, clients that list at once, modules
//! current when the answer is sent, names that cannot be told apart, and fairness between
//! 2026-07-28 clients.

use std::time::Duration;

use runbyte_core::{gateway::Gateway, hub::Status};
use runbyte_tests::{TempDir, config_of, parse_config, repo_root, test_dep};
use serde_json::Value;

/// A `[servers.<name>]` table running `tests/python/legacy_server.py`, recording each
/// `initialize` it gets into `record`.
fn legacy_table(
    python: &std::path::Path,
    name: &str,
    record: &std::path::Path,
    extra: &str,
) -> String {
    format!(
        "[servers.{name}]\ncommand = {:?}\nargs = [{:?}, {:?}]\n{extra}\n",
        python.display().to_string(),
        repo_root()
            .join("tests/python/legacy_server.py")
            .display()
            .to_string(),
        record.display().to_string(),
    )
}

/// The `initialize` params the legacy server recorded, in order.
fn recorded(record: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(record)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

async fn hub_of(dir: &TempDir, tables: &[String]) -> std::sync::Arc<Gateway> {
    let gateway = Gateway::hub_only(parse_config(dir.path(), &config_of(tables)));
    tokio::time::timeout(Duration::from_secs(60), gateway.hub.start())
        .await
        .expect("the servers did not start within a minute");
    gateway
}

/// A legacy server that answers `server/discover` (any unknown method) with `{}` connects in
/// the default `protocol = "auto"`: the probe's answer is no discover result, so Runbyte opens
/// it again with `initialize`, asking for 2025-11-25, and the tool is called.
#[tokio::test]
async fn auto_falls_back_to_initialize_when_discover_gets_an_empty_result() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    let dir = TempDir::new("ordinary-empty-discover");
    let record = dir.path().join("initialize.jsonl");
    let gateway = hub_of(&dir, &[legacy_table(&python, "legacy", &record, "")]).await;
    let view = gateway.hub.server("legacy").await.unwrap();
    assert_eq!(view.status, Status::Ready, "{:?}", view.status);
    assert_eq!(view.protocol.as_deref(), Some("2025-11-25"));
    let initialized = recorded(&record);
    assert_eq!(initialized.len(), 1, "{initialized:?}");
    assert_eq!(initialized[0]["protocolVersion"], "2025-11-25");
    let result = gateway
        .hub
        .call(
            "legacy",
            "hello",
            serde_json::json!({"name": "you"}),
            Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(result.content[0].as_text().unwrap().text, "hello you");
}

/// `protocol = "2025-11-25"` sends `initialize` with 2025-11-25 (never a probe), and a server
/// that echoes it is a legacy connection: its tool changes arrive unasked, no
/// `subscriptions/listen` is tried.
#[tokio::test]
async fn a_pinned_legacy_revision_is_what_initialize_asks_for() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    let dir = TempDir::new("ordinary-pinned");
    let record = dir.path().join("initialize.jsonl");
    let gateway = hub_of(
        &dir,
        &[legacy_table(
            &python,
            "pinned",
            &record,
            "protocol = \"2025-11-25\"",
        )],
    )
    .await;
    let view = gateway.hub.server("pinned").await.unwrap();
    assert_eq!(view.status, Status::Ready, "{:?}", view.status);
    assert_eq!(view.protocol.as_deref(), Some("2025-11-25"));
    let initialized = recorded(&record);
    assert_eq!(initialized.len(), 1, "{initialized:?}");
    assert_eq!(initialized[0]["protocolVersion"], "2025-11-25");
}
