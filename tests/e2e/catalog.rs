//! The downstream servers' resources and prompts through Runbyte: listed, read, templated,
//! subscribed to and read from a program, with the real `server-everything` over stdio and a
//! real MCP client (rmcp) over stdio.

use std::time::Duration;

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{
        ClientConfig, ErrorCode, GetPromptRequestParams, ReadResourceRequestParams,
        ResourceContents, ResourceUpdatedNotificationParam, SubscribeRequestParams,
    },
    service::{NotificationContext, ServiceError},
};
use runbyte_tests::{TempDir, call, config_with, result_json, runbyte, server_everything};
use serde_json::json;
use tokio::sync::mpsc;

/// A client that passes on the resource updates it is told of.
#[derive(Clone)]
struct Watcher(mpsc::UnboundedSender<String>);

impl ClientHandler for Watcher {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::default()
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(params.uri);
    }
}

fn text_of(contents: &ResourceContents) -> (&str, &str) {
    match contents {
        ResourceContents::TextResourceContents { uri, text, .. } => (uri, text),
        ResourceContents::BlobResourceContents { uri, blob, .. } => (uri, blob),
        _ => ("", ""),
    }
}

fn error_code(error: ServiceError) -> (ErrorCode, String) {
    match error {
        ServiceError::McpError(error) => (error.code, error.message.to_string()),
        other => panic!("not a JSON-RPC error: {other}"),
    }
}

#[tokio::test]
async fn resources_and_prompts_of_server_everything_reach_the_client_and_programs() {
    let Some(everything) = server_everything() else {
        return;
    };
    let dir = TempDir::new("catalog");
    dir.write(
        "runbyte.toml",
        &config_with(&format!(
            "[servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
            everything.display().to_string()
        )),
    );
    let (updates, mut updated) = mpsc::unbounded_channel();
    let mut command = tokio::process::Command::new(runbyte());
    command
        .arg("serve")
        .current_dir(dir.path())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("RUNBYTE_LOG", "warn");
    let client = Watcher(updates)
        .serve(rmcp::transport::TokioChildProcess::new(command).unwrap())
        .await
        .unwrap();
    let peer = client.peer();

    // Listed with Runbyte's URIs, once the server is up.
    let mut resources = Vec::new();
    for _ in 0..100 {
        resources = peer.list_all_resources().await.unwrap();
        if !resources.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!resources.is_empty(), "no resources listed");
    assert!(
        resources
            .iter()
            .all(|r| r.uri.starts_with("runbyte://everything/demo://")),
        "{resources:?}"
    );
    let document = resources
        .iter()
        .find(|r| r.uri.contains("/static/document/"))
        .unwrap_or_else(|| panic!("no static document among {resources:?}"))
        .uri
        .clone();

    // Read through the server that listed it; the contents carry Runbyte's URI.
    let read = peer
        .read_resource(ReadResourceRequestParams::new(document.clone()))
        .await
        .unwrap();
    let (uri, text) = text_of(&read.contents[0]);
    assert_eq!(uri, document);
    assert!(!text.is_empty());

    // Templates keep their variables behind the prefix, and a filled one reads.
    let templates = peer.list_all_resource_templates().await.unwrap();
    let template = templates
        .iter()
        .find(|t| t.uri_template.contains("/dynamic/text/{"))
        .unwrap_or_else(|| panic!("{templates:?}"));
    assert!(
        template
            .uri_template
            .starts_with("runbyte://everything/demo://resource/dynamic/text/"),
        "{template:?}"
    );
    let filled = "runbyte://everything/demo://resource/dynamic/text/7";
    let read = peer
        .read_resource(ReadResourceRequestParams::new(filled))
        .await
        .unwrap();
    assert_eq!(text_of(&read.contents[0]).0, filled);

    // What does not exist is -32602 naming why; never empty contents.
    for (uri, says) in [
        (
            "runbyte://nowhere/demo://x",
            "server `nowhere`, which is not configured",
        ),
        (
            "demo://resource/static/document/x",
            "not one of Runbyte's resource URIs",
        ),
    ] {
        let (code, message) = error_code(
            peer.read_resource(ReadResourceRequestParams::new(uri))
                .await
                .unwrap_err(),
        );
        assert_eq!(code, ErrorCode::INVALID_PARAMS, "{message}");
        assert!(message.contains(says), "{message}");
    }

    // Prompts are named with the server's prefix and got from it.
    let prompts = peer.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert!(
        names.contains(&"everything_simple-prompt") && names.contains(&"everything_args-prompt"),
        "{names:?}"
    );
    let mut asked = GetPromptRequestParams::new("everything_args-prompt");
    asked.arguments = json!({"city": "Lisbon", "state": "Lisboa"})
        .as_object()
        .cloned();
    let got = peer.get_prompt(asked).await.unwrap();
    let messages = serde_json::to_string(&got.messages).unwrap();
    assert!(messages.contains("Lisbon"), "{messages}");
    let (code, message) = error_code(
        peer.get_prompt(GetPromptRequestParams::new("nobody_prompt"))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, ErrorCode::INVALID_PARAMS, "{message}");

    // A program reads a resource through ./servers/resources, by the URI the client sees.
    let code = format!(
        "import {{ readResource }} from './servers/resources';\n\
         const [first] = await readResource({document:?});\n\
         export default {{ uri: first.uri, length: first.text.length }};"
    );
    let (answer, error) = call(&client, "execute_code", json!({ "code": code })).await;
    assert!(!error, "{answer}");
    let value = result_json(&answer);
    assert_eq!(value["uri"], json!(document), "{answer}");
    assert_eq!(
        value["length"],
        json!(text.encode_utf16().count()),
        "{answer}"
    );
    // A URI of another server is refused by name.
    let (refused, _) = call(
        &client,
        "execute_code",
        json!({"code": "import { readResource } from './servers/resources';\n\
                        export default await readResource('demo://resource/static/document/x');"}),
    )
    .await;
    assert!(
        refused.contains("is not one of Runbyte's resource URIs"),
        "{refused}"
    );

    // A subscription reaches the server; its updates come back with Runbyte's URI.
    #[allow(deprecated)]
    peer.subscribe(SubscribeRequestParams::new(document.clone()))
        .await
        .unwrap();
    let (toggled, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { callTool } from 'runbyte:bridge';\n\
                        export default await callTool('everything', 'toggle-subscriber-updates', {});"}),
    )
    .await;
    assert!(!error, "{toggled}");
    let uri = tokio::time::timeout(Duration::from_secs(10), updated.recv())
        .await
        .expect("no resource update within 10 s")
        .unwrap();
    assert_eq!(uri, document);

    // A session's subscriptions are bounded: past 64 one is refused, naming the limit, and
    // the session goes on. (A URI one of the server's templates expands to may be subscribed
    // to; one it neither lists nor expands to may not.)
    #[allow(deprecated)]
    let (code, message) = error_code(
        peer.subscribe(SubscribeRequestParams::new(
            "runbyte://everything/demo://not/listed",
        ))
        .await
        .unwrap_err(),
    );
    assert_eq!(code, ErrorCode::INVALID_PARAMS, "{message}");
    assert!(
        message.contains("is neither a resource server"),
        "{message}"
    );
    for n in 0..63 {
        let uri = format!("runbyte://everything/demo://resource/dynamic/text/{n}");
        #[allow(deprecated)]
        peer.subscribe(SubscribeRequestParams::new(uri))
            .await
            .unwrap();
    }
    #[allow(deprecated)]
    let refused = peer
        .subscribe(SubscribeRequestParams::new(
            "runbyte://everything/demo://resource/dynamic/text/x",
        ))
        .await
        .unwrap_err();
    let (code, message) = error_code(refused);
    assert_eq!(code, ErrorCode::INVALID_PARAMS, "{message}");
    assert!(message.contains("64 resource subscriptions"), "{message}");
    // Subscribing again to one held is no new subscription.
    #[allow(deprecated)]
    peer.subscribe(SubscribeRequestParams::new(document.clone()))
        .await
        .unwrap();
    assert!(peer.list_all_prompts().await.is_ok());

    client.cancel().await.unwrap();
}

/// The Python SDK, a third-party client, over streamable HTTP in both eras: it lists the
/// resources and prompts (its own URL type takes Runbyte's URIs) and reads one.
#[test]
fn the_python_sdk_lists_and_reads_them_over_streamable_http_in_both_eras() {
    let Some(everything) = server_everything() else {
        return;
    };
    let config = config_with(&format!(
        "[servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        everything.display().to_string()
    ));
    let served = runbyte_tests::Served::with_config("catalog-http", "http", &config);
    let url = served.url("/mcp");
    for era in ["legacy", "2026-07-28"] {
        let mut report = serde_json::Value::Null;
        // The server may still be starting on the first try.
        for _ in 0..20 {
            let Some(answer) = runbyte_tests::python_client(&["--era", era, "http", &url]) else {
                return;
            };
            report = answer;
            if report["resources"]
                .as_array()
                .is_some_and(|r| !r.is_empty())
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        let resources = report["resources"].as_array().unwrap();
        assert!(
            !resources.is_empty()
                && resources
                    .iter()
                    .all(|uri| uri.as_str().unwrap().starts_with("runbyte://everything/")),
            "{era}: {report}"
        );
        let prompts = report["prompts"].as_array().unwrap();
        assert!(
            prompts.contains(&json!("everything_simple-prompt")),
            "{era}: {report}"
        );
        assert_eq!(report["read"], json!([resources[0]]), "{era}: {report}");
    }
}

/// A server whose resources/list runs to about 6 MB (3,000 resources of 2 KiB, hostile names):
/// Runbyte's answer is bounded (4 MiB of one server's) and paged, and a client can subscribe
/// only to what the server listed or its templates expand to, at most 64 per session.
#[tokio::test]
async fn huge_resource_lists_are_bounded_paged_and_subscribed_only_as_listed() {
    use rmcp::model::PaginatedRequestParams;
    let dir = TempDir::new("catalog-huge");
    dir.write(
        "runbyte.toml",
        &runbyte_tests::config_of(&[runbyte_tests::test_server_table(
            "t",
            &[
                "--mode",
                "huge-resources",
                "--max-protocol-version",
                "2025-11-25",
            ],
            "",
        )]),
    );
    let client = runbyte_tests::client(&dir).await;
    let peer = client.peer();
    // Once the server is up.
    for _ in 0..100 {
        if !peer
            .list_resources(None)
            .await
            .unwrap()
            .resources
            .is_empty()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut pages = Vec::new();
    let mut cursor = None;
    for _ in 0..100 {
        let page = peer
            .list_resources(Some(PaginatedRequestParams::default().with_cursor(cursor)))
            .await
            .unwrap();
        let done = page.next_cursor.is_none();
        cursor = page.next_cursor.clone();
        pages.push(page);
        if done {
            break;
        }
    }
    assert!(pages.len() > 1, "one page: {}", pages[0].resources.len());
    let mut total_bytes = 0;
    let mut listed = Vec::new();
    for page in &pages {
        let bytes = serde_json::to_vec(&page.resources).unwrap().len();
        assert!(page.resources.len() <= 500, "{}", page.resources.len());
        assert!(bytes <= 1024 * 1024 + 4096, "a page of {bytes} bytes");
        total_bytes += bytes;
        listed.extend(page.resources.iter().map(|r| r.uri.clone()));
    }
    // Bounded: about 6 MB listed downstream, at most 4 MiB of it answered.
    assert!(total_bytes <= 4 * 1024 * 1024 + 4096, "{total_bytes} bytes");
    assert!(
        listed.len() > 1000 && listed.len() < 3000,
        "{}",
        listed.len()
    );
    assert_eq!(listed[0], "runbyte://t/test://item/0");
    // A cursor Runbyte did not give is refused.
    let (code, message) = error_code(
        peer.list_resources(Some(
            PaginatedRequestParams::default().with_cursor(Some("forged".to_owned())),
        ))
        .await
        .unwrap_err(),
    );
    assert_eq!(code, ErrorCode::INVALID_PARAMS, "{message}");
    assert!(message.contains("invalid cursor"), "{message}");

    // Subscriptions: a URI the server never listed is refused, naming why; a listed one and a
    // template's expansion are taken.
    #[allow(deprecated)]
    let refused = peer
        .subscribe(SubscribeRequestParams::new("runbyte://t/test://nowhere/1"))
        .await
        .unwrap_err();
    let (code, message) = error_code(refused);
    assert_eq!(code, ErrorCode::INVALID_PARAMS, "{message}");
    assert!(
        message.contains("is neither a resource server `t` lists"),
        "{message}"
    );
    #[allow(deprecated)]
    peer.subscribe(SubscribeRequestParams::new(listed[1].clone()))
        .await
        .unwrap();
    for n in 0..63 {
        #[allow(deprecated)]
        peer.subscribe(SubscribeRequestParams::new(format!(
            "runbyte://t/test://item/{}",
            100_000 + n
        )))
        .await
        .unwrap();
    }
    #[allow(deprecated)]
    let refused = peer
        .subscribe(SubscribeRequestParams::new("runbyte://t/test://item/5"))
        .await
        .unwrap_err();
    let (code, message) = error_code(refused);
    assert_eq!(code, ErrorCode::INVALID_PARAMS, "{message}");
    assert!(message.contains("64 resource subscriptions"), "{message}");
    client.cancel().await.unwrap();
}

/// A 2026-07-28 `subscriptions/listen` follows only resources a server lists: one naming a URI
/// no server listed ends with an error naming it, and none is subscribed to downstream.
#[test]
fn a_listen_for_a_resource_no_server_listed_is_refused() {
    let mut served = runbyte_tests::JsonLines::start(&runbyte_tests::config_of(&[
        runbyte_tests::test_server_table(
            "t",
            &[
                "--mode",
                "huge-resources",
                "--max-protocol-version",
                "2025-11-25",
            ],
            "",
        ),
    ]));
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let answer = served.request(
        1,
        "subscriptions/listen",
        json!({"_meta": meta, "notifications": {
            "resourceSubscriptions": ["runbyte://t/test://item/1", "runbyte://t/test://nowhere/x"]}}),
    );
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("runbyte://t/test://nowhere/x")
            && message.contains("is neither a resource server `t` lists"),
        "{message}"
    );
    // More than a session's 64 at once: refused, naming the bound.
    let many: Vec<String> = (0..65)
        .map(|n| format!("runbyte://t/test://item/{n}"))
        .collect();
    let answer = served.request(
        2,
        "subscriptions/listen",
        json!({"_meta": meta, "notifications": {"resourceSubscriptions": many}}),
    );
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("64 resource subscriptions"),
        "{answer}"
    );
}
