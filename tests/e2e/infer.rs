//! Inferred result types: one call of a tool that publishes no `outputSchema` (the demo
//! server's `get_issue`, which answers JSON text) types its module's `Result`, in both dialects,
//! and what was learned survives a restart.

use std::time::{Duration, Instant};

use runbyte_tests::{TempDir, call, client, config_with};
use serde_json::json;

type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// Reads `path` until it contains `wanted` (the driver regenerates a moment after the call).
async fn read_until(client: &Client, path: &str, wanted: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (text, error) = call(client, "read_file", json!({ "path": path })).await;
        assert!(!error, "{text}");
        if text.contains(wanted) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{path} never contained {wanted:?}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn one_call_types_the_result(dialect: &str, module: &str, typed: &[&str]) {
    let dir = TempDir::new(&format!("infer-{dialect}"));
    dir.write(
        "runbyte.toml",
        &config_with(&format!("[codegen]\ndialect = \"{dialect}\"\n")),
    );
    let path = format!("/servers/demo/{module}");
    let first = client(&dir).await;
    let before = read_until(&first, &path, "declares no output schema").await;
    assert!(!before.contains("inferred"), "{before}");

    let program = r#"
        import { get_issue } from './servers/demo';
        const issue = await get_issue({ id: 1 });
        export default issue.title;
    "#;
    let (text, error) = call(&first, "execute_code", json!({ "code": program })).await;
    assert!(!error, "{text}");
    let after = read_until(&first, &path, "inferred from 1 call and may be incomplete").await;
    for line in typed {
        assert!(after.contains(line), "{line:?} missing from\n{after}");
    }
    // Shapes only: no value of the issue is in the module or the saved file.
    let saved = std::fs::read_dir(dir.path().join("state/runbyte/inferred"))
        .unwrap()
        .flatten()
        .map(|entry| std::fs::read_to_string(entry.path()).unwrap())
        .collect::<String>();
    assert!(
        saved.contains("\"get_issue\"") && saved.contains("\"title\""),
        "{saved}"
    );
    let title = runbyte_tests::result_json(&text);
    let title = title.as_str().unwrap();
    assert!(!after.contains(title) && !saved.contains(title), "{title}");
    first.cancel().await.unwrap();

    // Another run of Runbyte reads what was learned back: typed before any call.
    let client = client(&dir).await;
    let again = read_until(&client, &path, "inferred from 1 call").await;
    for line in typed {
        assert!(
            again.contains(line),
            "{line:?} missing after a restart:\n{again}"
        );
    }
    let (signature, _) = call(&client, "search_tools", json!({ "query": "get_issue" })).await;
    assert!(signature.contains("Promise<GetIssueResult>"), "{signature}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn one_call_of_an_untyped_tool_types_its_typescript_module() {
    one_call_types_the_result(
        "typescript",
        "get_issue.ts",
        &[
            "export async function get_issue(args: GetIssueArgs): Promise<GetIssueResult>",
            "export interface GetIssueResult {",
            "  title: string;",
            "  labels: string[];",
            "  comments: ",
        ],
    )
    .await;
}

#[tokio::test]
async fn one_call_of_an_untyped_tool_types_its_jsdoc_module() {
    one_call_types_the_result(
        "jsdoc",
        "get_issue.js",
        &[
            "@returns {Promise<GetIssueResult>}",
            "@typedef {object} GetIssueResult",
            "@property {string} title",
            "@property {Array<string>} labels",
        ],
    )
    .await;
}

#[tokio::test]
async fn a_server_can_opt_out() {
    let dir = TempDir::new("infer-off");
    dir.write(
        "runbyte.toml",
        &config_with("").replace(
            "args = [\"demo-server\"]\n",
            "args = [\"demo-server\"]\ninfer-results = false\n",
        ),
    );
    let client = client(&dir).await;
    let program = r#"
        import { get_issue } from './servers/demo';
        export default (await get_issue({ id: 1 })).id;
    "#;
    let (text, error) = call(&client, "execute_code", json!({ "code": program })).await;
    assert!(!error, "{text}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (module, _) = call(
        &client,
        "read_file",
        json!({ "path": "/servers/demo/get_issue.ts" }),
    )
    .await;
    assert!(
        module.contains("Promise<unknown>") || module.contains("GetIssueResult = unknown"),
        "{module}"
    );
    assert!(!module.contains("inferred"), "{module}");
    assert!(!dir.path().join("state/runbyte/inferred").exists());
    client.cancel().await.unwrap();
}
