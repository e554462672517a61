//! Resource reads kept by the server's caching hints (SEP-2549: `ttlMs`, `cacheScope`): the
//! test server's `test://cached` (public, 1.5 s) and `test://cached-private` (private, a
//! minute) say how many times they were read, so an answer from Runbyte's cache shows as a
//! repeated count.

use std::time::Duration;

use rmcp::{ServiceExt, model::SubscribeRequestParams, transport::StreamableHttpClientTransport};
use runbyte_tests::{Served, TempDir, call, config_of, result_json, test_server_table};
use serde_json::json;

/// A hang bound only.
const BOUND: Duration = Duration::from_secs(60);

fn config() -> String {
    config_of(&[test_server_table(
        "fixtures",
        &["--mode", "conformance"],
        "",
    )])
}

/// A program reading `uri` of the fixtures `times` times: the distinct texts it got.
fn reads(uri: &str, times: usize) -> serde_json::Value {
    json!({"code": format!(
        "import {{ readResource }} from './servers/resources';\n\
         const seen = new Set();\n\
         for (let i = 0; i < {times}; i++) {{\n\
           const [first] = await readResource('runbyte://fixtures/{uri}');\n\
           seen.add(first.text);\n\
         }}\n\
         export default [...seen];"
    )})
}

#[tokio::test]
async fn a_cacheable_resource_is_read_once_within_its_ttl() {
    let dir = TempDir::new("cache-ttl");
    dir.write("runbyte.toml", &config());
    let client = runbyte_tests::client(&dir).await;
    let run = async {
        let (text, error) = call(&client, "execute_code", reads("test://cached", 100)).await;
        assert!(!error, "{text}");
        assert_eq!(result_json(&text), json!(["read 1"]), "{text}");
        assert!(
            text.contains("100 tool calls") && text.contains("99 from cache"),
            "{text}"
        );
        // Past its ttl it is read again, once.
        tokio::time::sleep(Duration::from_millis(1600)).await;
        let (text, error) = call(&client, "execute_code", reads("test://cached", 100)).await;
        assert!(!error, "{text}");
        assert_eq!(result_json(&text), json!(["read 2"]), "{text}");
    };
    tokio::time::timeout(BOUND, run).await.unwrap();
}

/// The same read again within one program is answered in the sandbox while fresh: the host (and
/// so the audit log) sees it once. Where a policy judges the server, each read is asked for and
/// judged as it comes.
#[tokio::test]
async fn the_same_read_again_is_answered_in_the_sandbox_unless_a_policy_judges_it() {
    let judged = "[sandbox.limits.servers.fixtures]\nmax-tool-calls = 500\n";
    for (policy, reaching) in [("", 1), (judged, 20)] {
        let dir = TempDir::new("cache-sandbox");
        let audit = dir.path().join("audit.jsonl");
        let server = format!("[server]\naudit-log = {:?}\n", audit.display().to_string());
        dir.write("runbyte.toml", &format!("{server}\n{}\n{policy}", config()));
        let client = runbyte_tests::client(&dir).await;
        let run = async {
            let (text, error) =
                call(&client, "execute_code", reads("test://cached-private", 20)).await;
            assert!(!error, "{text}");
            assert_eq!(
                result_json(&text).as_array().map(Vec::len),
                Some(1),
                "{text}"
            );
            assert!(
                text.contains("20 tool calls") && text.contains("19 from cache"),
                "{text}"
            );
        };
        tokio::time::timeout(BOUND, run).await.unwrap();
        let log = std::fs::read_to_string(&audit).unwrap();
        let reads = log
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|line| line["event"] == "tool_call" && line["tool"] == "resources/read")
            .count();
        assert_eq!(reads, reaching, "policy {policy:?}:\n{log}");
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_resource_update_empties_what_was_kept() {
    let dir = TempDir::new("cache-update");
    dir.write("runbyte.toml", &config());
    let client = runbyte_tests::client(&dir).await;
    let run = async {
        #[allow(deprecated)]
        client
            .peer()
            .subscribe(SubscribeRequestParams::new(
                "runbyte://fixtures/test://cached-private",
            ))
            .await
            .unwrap();
        let (text, _) = call(&client, "execute_code", reads("test://cached-private", 3)).await;
        assert_eq!(result_json(&text), json!(["read 1"]), "{text}");
        let (text, _) = call(&client, "execute_code", reads("test://cached-private", 3)).await;
        assert_eq!(result_json(&text), json!(["read 1"]), "{text}");
        let (text, error) = call(
            &client,
            "execute_code",
            json!({"code": "import { callTool } from 'runbyte:bridge';\n\
                            export default await callTool('fixtures', 'test_trigger_resource_update', {uri: 'test://cached-private'});"}),
        )
        .await;
        assert!(!error, "{text}");
        // The update reaches the Hub asynchronously: within the bound, the next read is new.
        loop {
            let (text, _) = call(&client, "execute_code", reads("test://cached-private", 3)).await;
            if result_json(&text) == json!(["read 2"]) {
                break;
            }
            assert_eq!(result_json(&text), json!(["read 1"]), "{text}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(BOUND, run).await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_read_is_not_shared_between_clients() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let served = Served::with_config("cache-private", "http", &config());
    let url = format!("http://127.0.0.1:{}/mcp", served.port);
    let run = async {
        let first = ().serve(StreamableHttpClientTransport::from_uri(url.clone())).await.unwrap();
        let second = ().serve(StreamableHttpClientTransport::from_uri(url)).await.unwrap();
        // The first client reads the server once, then its own kept read.
        let (text, error) = call(&first, "execute_code", reads("test://cached-private", 5)).await;
        assert!(!error, "{text}");
        assert_eq!(result_json(&text), json!(["read 1"]), "{text}");
        assert!(text.contains("4 from cache"), "{text}");
        let (text, _) = call(&first, "execute_code", reads("test://cached-private", 5)).await;
        assert!(text.contains("5 from cache"), "{text}");
        // The second is not answered with the first's: it reaches the server itself.
        let (text, error) = call(&second, "execute_code", reads("test://cached-private", 5)).await;
        assert!(!error, "{text}");
        assert!(text.contains("4 from cache"), "{text}");
        // A public read is shared: the second client is answered with the first's.
        let (text, _) = call(&first, "execute_code", reads("test://cached", 5)).await;
        assert!(text.contains("4 from cache"), "{text}");
        let (again, _) = call(&second, "execute_code", reads("test://cached", 5)).await;
        assert!(again.contains("5 from cache"), "{again}");
        assert_eq!(result_json(&text), result_json(&again), "{text} / {again}");
    };
    tokio::time::timeout(BOUND, run).await.unwrap();
}

/// A program that calls `echo` 100 times with the same message and `add` (excluded) 3 times:
/// how many calls of its reached the test server, by the server's own count.
const CALLS: &str = "import { echo, add, calls_count } from './servers/t';\n\
     const count = async () => Number(String(await calls_count({})));\n\
     const before = await count();\n\
     for (let i = 0; i < 100; i++) await echo({ message: 'same' });\n\
     for (let i = 0; i < 3; i++) await add({ a: 1, b: 2 });\n\
     export default (await count()) - before - 1;";

/// `[servers.<name>.cache]`: the operator keeps a read-only tool's results for its ttl; an
/// excluded one, and one past its ttl or after the server's tools changed, reaches the server.
#[tokio::test]
async fn a_kept_tools_results_answer_the_same_call_within_its_ttl() {
    let dir = TempDir::new("cache-tools");
    dir.write(
        "runbyte.toml",
        &config_of(&[test_server_table(
            "t",
            &[],
            "new-tools = \"allow\"\n[servers.t.cache]\ntools = [\"echo\", \"add\", \"slow\"]\n\
             exclude-tools = [\"add\"]\nttl-ms = 3000\n",
        )]),
    );
    // `runbyte tools` and `check` say which results are kept, and which named tool never is.
    let tools = runbyte_tests::run(dir.path(), &["tools", "t"]);
    assert!(
        tools
            .stdout
            .contains("cache: results kept 3000 ms (per session) of: echo\n")
            && tools
                .stdout
                .contains("cache: not kept, not marked read-only by the server: slow\n"),
        "{}",
        tools.stdout
    );
    let check = runbyte_tests::run(dir.path(), &["check"]);
    assert!(
        check
            .stdout
            .contains("warning: [servers.t.cache] names tools not marked read-only, whose results are never kept: slow"),
        "{}",
        check.stdout
    );
    let client = runbyte_tests::client(&dir).await;
    let run = async {
        let program = json!({"code": CALLS});
        let (text, error) = call(&client, "execute_code", program.clone()).await;
        assert!(!error, "{text}");
        // One echo and three adds reached the server; 99 echoes were answered from the cache.
        assert_eq!(result_json(&text), json!(4), "{text}");
        assert!(text.contains("99 from cache"), "{text}");
        let (text, _) = call(&client, "execute_code", program.clone()).await;
        assert_eq!(result_json(&text), json!(3), "{text}");
        // Past its ttl, the echo reaches the server again, once.
        tokio::time::sleep(Duration::from_millis(3100)).await;
        let (text, _) = call(&client, "execute_code", program.clone()).await;
        assert_eq!(result_json(&text), json!(4), "{text}");
        // The server's tools changed: what was kept of them is dropped.
        let (text, error) = call(
            &client,
            "execute_code",
            json!({"code": "import { callTool } from 'runbyte:bridge';\n\
                            export default await callTool('t', 'change_tools', {});"}),
        )
        .await;
        assert!(!error, "{text}");
        loop {
            let (text, _) = call(&client, "execute_code", program.clone()).await;
            if result_json(&text) == json!(4) {
                break;
            }
            assert_eq!(result_json(&text), json!(3), "{text}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(BOUND, run).await.unwrap();
}

/// A server that announces no tool changes but says how long its `tools/list` stays fresh
/// (`ttlMs`, 1.5 s here) has its tools listed again once that has passed, not before: a tool
/// it adds silently reaches programs and clients, and the server sees no more listings than
/// its ttl allows.
#[tokio::test]
async fn tools_of_a_server_without_list_changed_are_listed_again_after_their_ttl() {
    let dir = TempDir::new("cache-list-ttl");
    dir.write(
        "runbyte.toml",
        &config_of(&[test_server_table(
            "t",
            &["--mode", "storm", "--list-ttl-ms", "1500"],
            "pin = \"off\"",
        )]),
    );
    let client = runbyte_tests::client(&dir).await;
    let program = |code: &str| json!({"code": code});
    let run = async {
        let started = std::time::Instant::now();
        let (added, error) = call(
            &client,
            "execute_code",
            program(
                "import { change_tools } from './servers/t';\n\
                 export default await change_tools({});",
            ),
        )
        .await;
        assert!(
            !error && added.contains("added added_1; notified 0"),
            "{added}"
        );
        // Nothing told Runbyte: the new tool shows once the listing's ttl has passed.
        let mut listing = String::new();
        for _ in 0..200 {
            let (text, error) =
                call(&client, "list_directory", json!({"path": "/servers/t"})).await;
            assert!(!error, "{text}");
            listing = text;
            if listing.contains("added_1") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(listing.contains("added_1"), "{listing}");
        let (count, error) = call(
            &client,
            "execute_code",
            program(
                "import { list_count } from './servers/t';\n\
                 export default await list_count({});",
            ),
        )
        .await;
        assert!(!error, "{count}");
        let count = match result_json(&count) {
            serde_json::Value::String(text) => text.parse::<u64>().unwrap(),
            number => number.as_u64().unwrap(),
        };
        // The first listing, then at most one per 1.5 s since.
        let most = 1 + started.elapsed().as_millis() as u64 / 1500 + 1;
        assert!(
            (2..=most).contains(&count),
            "{count} listings, at most {most}"
        );
    };
    tokio::time::timeout(BOUND, run).await.unwrap();
}

/// The same for prompts: a server that announces no prompt changes but gives `prompts/list` a
/// `ttlMs` (5 s here) is asked again once that has passed, not within it.
#[tokio::test]
async fn prompts_of_a_server_without_list_changed_are_listed_again_after_their_ttl() {
    let dir = TempDir::new("cache-prompts-ttl");
    dir.write(
        "runbyte.toml",
        &config_of(&[test_server_table(
            "fixtures",
            &["--mode", "conformance", "--list-ttl-ms", "5000"],
            // A prompt new since the first listing is otherwise held for a person to approve.
            "pin = \"off\"",
        )]),
    );
    let client = runbyte_tests::client(&dir).await;
    let added = |prompts: &[rmcp::model::Prompt]| {
        prompts
            .iter()
            .any(|prompt| prompt.name.ends_with("test_added_prompt_1"))
    };
    let run = async {
        let mut prompts = Vec::new();
        for _ in 0..200 {
            prompts = client.peer().list_all_prompts().await.unwrap();
            if !prompts.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let listed = std::time::Instant::now();
        assert!(!prompts.is_empty() && !added(&prompts), "{prompts:?}");
        let (text, error) = call(
            &client,
            "execute_code",
            json!({"code": "import { test_trigger_prompt_change } from './servers/fixtures';\n\
                            export default await test_trigger_prompt_change({});"}),
        )
        .await;
        assert!(!error, "{text}");
        // Within the ttl the kept list is served (checked only while well within it).
        let again = client.peer().list_all_prompts().await.unwrap();
        if listed.elapsed() < Duration::from_secs(4) {
            assert!(!added(&again), "{again:?}");
        }
        let mut seen = false;
        for _ in 0..300 {
            if added(&client.peer().list_all_prompts().await.unwrap()) {
                seen = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(seen, "the added prompt was never listed");
        assert!(listed.elapsed() >= Duration::from_millis(4500));
    };
    tokio::time::timeout(BOUND, run).await.unwrap();
}
