//! Values kept in the sandbox between programs (`./state`): a program keeps what it fetched, a
//! later program of the same client session recalls it without the data passing through the
//! model; another client never sees it; the bounds are refused by name; `/state` lists names
//! and sizes only; a policy sees a keep as a write; a 2026-07-28 client over stdio keeps across
//! its requests and one over HTTP is refused, saying why. And what it saves, in tokens.

use std::time::Duration;

use rmcp::{ServiceExt, transport::StreamableHttpClientTransport};
use runbyte_tests::{
    JsonLines, Served, TempDir, call, client, config_of, config_with, result_json, run,
    test_server_table,
};
use serde_json::{Value, json};

/// Catches a hang only.
const BOUND: Duration = Duration::from_secs(120);

fn config() -> String {
    config_of(&[test_server_table("t", &[], "")])
}

const FETCH_AND_KEEP: &str = "import { structured } from './servers/t';\n\
import { keep } from './state';\n\
const result = await structured({ n: 1000 });\n\
export default await keep('squares', result.squares);";

const RECALL_AND_SUM: &str = "import { recall } from './state';\n\
const squares = await recall<number[]>('squares');\n\
export default squares === undefined ? 'nothing kept' : squares.reduce((a, b) => a + b, 0);";

/// The sum of the squares of 1 to 1000.
const SUM: u64 = 333_833_500;

#[tokio::test]
async fn a_later_program_recalls_what_an_earlier_one_kept_and_another_client_does_not() {
    let dir = TempDir::new("state-stdio");
    dir.write("runbyte.toml", &config());
    let run = async {
        let first = client(&dir).await;
        let (kept, error) = call(&first, "execute_code", json!({"code": FETCH_AND_KEEP})).await;
        assert!(!error, "{kept}");
        let kept = result_json(&kept);
        assert_eq!(kept["name"], "squares", "{kept}");
        let bytes = kept["bytes"].as_u64().unwrap();
        let expected: Vec<u64> = (1..=1000u64).map(|i| i * i).collect();
        assert_eq!(
            bytes as usize,
            serde_json::to_string(&expected).unwrap().len()
        );

        // Listed and read as a name and a size, never the value.
        let (listed, error) = call(&first, "list_directory", json!({"path": "/state"})).await;
        assert!(!error, "{listed}");
        assert!(
            listed.contains("index.ts") && listed.contains(&format!("squares  ({bytes} bytes)")),
            "{listed}"
        );
        assert!(!listed.contains("998001"), "{listed}");
        let (root, _) = call(&first, "list_directory", json!({"path": "/"})).await;
        assert!(root.contains("state/"), "{root}");
        let (read, error) = call(&first, "read_file", json!({"path": "/state/squares"})).await;
        assert!(!error && read.contains(&format!("{bytes} bytes")), "{read}");
        assert!(!read.contains("998001"), "{read}");
        let (module, error) = call(&first, "read_file", json!({"path": "/state/index.ts"})).await;
        assert!(
            !error
                && module.contains("export async function keep(name: string, value: unknown)")
                && module.contains("export async function recall<T = unknown>"),
            "{module}"
        );

        // The second program computes from the first's data.
        let (sum, error) = call(&first, "execute_code", json!({"code": RECALL_AND_SUM})).await;
        assert!(!error, "{sum}");
        assert_eq!(result_json(&sum), json!(SUM), "{sum}");

        // Another client (another stdio connection) sees nothing of it.
        let second = client(&dir).await;
        let (other, error) = call(&second, "execute_code", json!({"code": RECALL_AND_SUM})).await;
        assert!(!error, "{other}");
        assert_eq!(result_json(&other), json!("nothing kept"), "{other}");
        let (listed, _) = call(&second, "list_directory", json!({"path": "/state"})).await;
        assert!(listed.contains("nothing kept yet"), "{listed}");

        // Forgotten, it is gone.
        let forget = "import { forget, recall, kept } from './state';\n\
            const forgot = await forget('squares');\n\
            export default { forgot, again: await forget('squares'), after: await recall('squares') ?? null, left: await kept() };";
        let (forgot, error) = call(&first, "execute_code", json!({"code": forget})).await;
        assert!(!error, "{forgot}");
        assert_eq!(
            result_json(&forgot),
            json!({"forgot": true, "again": false, "after": null, "left": []})
        );
        first.cancel().await.unwrap();
        second.cancel().await.unwrap();
    };
    tokio::time::timeout(BOUND, run).await.unwrap();
}

#[tokio::test]
async fn a_keep_over_a_bound_throws_naming_it() {
    let dir = TempDir::new("state-bounds");
    dir.write("runbyte.toml", &config());
    let run = async {
        let client = client(&dir).await;
        let program = "import { keep, kept } from './state';\n\
            async function refused(f: () => Promise<unknown>) {\n\
              try { await f(); return 'kept'; } catch (e) { return (e as Error).message; }\n\
            }\n\
            const big = await refused(() => keep('big', 'x'.repeat(1 << 20)));\n\
            const name = await refused(() => keep('../etc', 1));\n\
            const undef = await refused(() => keep('u', undefined));\n\
            for (let i = 0; i < 64; i++) await keep(`n${i}`, i);\n\
            const many = await refused(() => keep('one-more', 1));\n\
            const replaced = await refused(() => keep('n0', 'again'));\n\
            export default { big, name, undef, many, replaced, count: (await kept()).length };";
        let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
        assert!(!error, "{text}");
        let value = result_json(&text);
        let big = value["big"].as_str().unwrap();
        assert!(
            big.contains("1048578 bytes as JSON")
                && big.contains("1 MiB")
                && big.contains("MAX_VALUE_BYTES"),
            "{big}"
        );
        assert!(
            value["name"].as_str().unwrap().contains("not a name"),
            "{value}"
        );
        assert!(
            value["undef"]
                .as_str()
                .unwrap()
                .contains("undefined cannot be kept"),
            "{value}"
        );
        assert!(
            value["many"].as_str().unwrap().contains("MAX_ENTRIES"),
            "{value}"
        );
        assert_eq!(value["replaced"], "kept");
        assert_eq!(value["count"], 64);
        client.cancel().await.unwrap();
    };
    tokio::time::timeout(BOUND, run).await.unwrap();
}

/// One 2026-07-28 `execute_code` over HTTP, a request on a connection of its own; the answer's
/// first text.
fn stateless_execute(port: u16, code: &str) -> String {
    use std::io::{Read, Write};
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "execute_code",
            "arguments": {"code": code},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
    .to_string();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Accept: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\n\
         Mcp-Name: execute_code\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let json = &response[response.find('{').unwrap()..=response.rfind('}').unwrap()];
    let answer: Value = serde_json::from_str(json).unwrap();
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no result text: {answer}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn two_http_sessions_on_one_gateway_keep_apart_and_a_stateless_client_is_refused() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let served = Served::with_config("state-http", "http", &config());
    let url = served.url("/mcp");
    let run = async {
        let first = ().serve(StreamableHttpClientTransport::from_uri(url.clone())).await.unwrap();
        let second = ().serve(StreamableHttpClientTransport::from_uri(url)).await.unwrap();
        let (kept, error) = call(&first, "execute_code", json!({"code": FETCH_AND_KEEP})).await;
        assert!(!error, "{kept}");
        // The second session, on the same gateway, recalls nothing and lists nothing.
        let (other, error) = call(&second, "execute_code", json!({"code": RECALL_AND_SUM})).await;
        assert!(!error, "{other}");
        assert_eq!(result_json(&other), json!("nothing kept"), "{other}");
        let (listed, _) = call(&second, "list_directory", json!({"path": "/state"})).await;
        assert!(!listed.contains("squares"), "{listed}");
        // A value the second keeps under the same name is its own.
        let mine = "import { keep } from './state';\nexport default await keep('squares', [1, 2]);";
        let (text, error) = call(&second, "execute_code", json!({"code": mine})).await;
        assert!(!error, "{text}");
        let (sum, _) = call(&first, "execute_code", json!({"code": RECALL_AND_SUM})).await;
        assert_eq!(result_json(&sum), json!(SUM), "{sum}");
        let (sum, _) = call(&second, "execute_code", json!({"code": RECALL_AND_SUM})).await;
        assert_eq!(result_json(&sum), json!(3), "{sum}");

        // A 2026-07-28 client over HTTP has nothing that lasts across requests and is its own.
        let port = served.port;
        let refused = tokio::task::spawn_blocking(move || {
            stateless_execute(
                port,
                "import { keep } from './state';\n\
                 let answer = 'kept';\n\
                 try { await keep('x', 1); } catch (e) { answer = (e as Error).message; }\n\
                 export default answer;",
            )
        })
        .await
        .unwrap();
        assert!(
            refused.contains("values cannot be kept for this client")
                && refused.contains("2026-07-28 client over `http`")
                && refused.contains("no session that lasts across its requests"),
            "{refused}"
        );
        first.cancel().await.unwrap();
        second.cancel().await.unwrap();
    };
    tokio::time::timeout(BOUND, run).await.unwrap();
}

#[test]
fn a_stateless_client_over_stdio_keeps_across_its_requests() {
    let mut served = JsonLines::start(&config());
    let kept = served.call(
        1,
        "execute_code",
        json!({"code": FETCH_AND_KEEP}),
        json!({}),
    );
    let text = kept["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        kept["result"]["isError"] != true && text.contains("\"squares\""),
        "{kept}"
    );
    let summed = served.call(
        2,
        "execute_code",
        json!({"code": RECALL_AND_SUM}),
        json!({}),
    );
    let text = summed["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(result_json(text), json!(SUM), "{summed}");
}

#[tokio::test]
async fn a_policy_sees_a_keep_as_a_write_and_the_audit_log_records_it() {
    let dir = TempDir::new("state-policy");
    let log = dir.path().join("audit.jsonl");
    let extra = format!(
        "[server]\naudit-log = {:?}\n[sandbox]\npolicy = [\"limits\", \"readonly\"]\n",
        log.display().to_string()
    );
    dir.write("runbyte.toml", &config_with(&extra));
    let run = async {
        let client = client(&dir).await;
        let program = "import { keep, recall } from './state';\n\
            let denied = '';\n\
            try { await keep('x', 1); } catch (e) { denied = (e as Error).message; }\n\
            export default { denied, recalled: (await recall('x')) ?? null };";
        let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
        assert!(!error, "{text}");
        let value = result_json(&text);
        let denied = value["denied"].as_str().unwrap();
        assert!(
            denied.contains("denied by policy `readonly`") && denied.contains("runbyte/state"),
            "{denied}"
        );
        // A recall reads: allowed.
        assert_eq!(value["recalled"], Value::Null);
        client.cancel().await.unwrap();
        let audit = std::fs::read_to_string(&log).unwrap();
        let denial = audit
            .lines()
            .find(|line| line.contains("\"outcome\":\"denied\""))
            .expect("a denial line");
        assert!(
            denial.contains("\"server\":\"runbyte/state\"") && denial.contains("\"tool\":\"keep\""),
            "{denial}"
        );
        assert!(
            audit
                .lines()
                .any(|line| line.contains("\"tool\":\"recall\"") && line.contains("\"ok\"")),
            "{audit}"
        );
    };
    tokio::time::timeout(BOUND, run).await.unwrap();
}

/// The two-step task of issue 34's economy target: a first step that fetches every issue with
/// its body and comments, and a second that needs all of it. Counted in the project's tokens
/// (`o200k_base`), program text and answer both: keeping the data in the sandbox against one
/// program that returns everything for the model to work from.
#[tokio::test]
async fn keeping_the_data_costs_at_most_half_of_returning_it() {
    let dir = TempDir::new("state-economy");
    dir.write("runbyte.toml", &config_with(""));
    let fetch = "import { search_issues, get_issue } from './servers/demo';\n\
        const found = await search_issues({ query: '', state: 'all', limit: 100 });\n\
        const issues = await Promise.all(found.issues.map((i) => get_issue({ id: i.id })));";
    let everything = format!("{fetch}\nexport default issues;");
    let keep_step = format!(
        "{fetch}\nimport {{ keep }} from './state';\nawait keep('issues', issues);\n\
         export default {{ kept: issues.length }};"
    );
    let second_step = "import { recall } from './state';\n\
        const issues = await recall<any[]>('issues');\n\
        const byAuthor: Record<string, number> = {};\n\
        for (const i of issues) for (const c of i.comments) byAuthor[i.author.login] = (byAuthor[i.author.login] ?? 0) + 1;\n\
        export default { open: issues.filter((i) => i.state === 'open').length, byAuthor };";
    let run = async {
        let client = client(&dir).await;
        let cost = |program: &str, answer: &str| {
            // The answer as the model reads it, without the summary's own accounting.
            let answer = answer.split("\n--- ").next().unwrap_or_default();
            runbyte_core::tokens::count(program).tokens + runbyte_core::tokens::count(answer).tokens
        };
        let (all, error) = call(&client, "execute_code", json!({"code": everything})).await;
        assert!(!error, "{all}");
        let issues = result_json(&all).as_array().unwrap().len();
        let one_program = cost(&everything, &all);

        let (first, error) = call(&client, "execute_code", json!({"code": keep_step})).await;
        assert!(!error, "{first}");
        assert_eq!(result_json(&first), json!({"kept": issues}));
        let (second, error) = call(&client, "execute_code", json!({"code": second_step})).await;
        assert!(!error, "{second}");
        assert!(result_json(&second)["open"].as_u64().is_some(), "{second}");
        let two_steps = cost(&keep_step, &first) + cost(second_step, &second);
        let percent = two_steps * 100 / one_program;
        eprintln!(
            "economy: {issues} issues; one program returning everything {one_program} tokens; \
             keep + recall {two_steps} tokens ({percent}%)"
        );
        assert!(two_steps * 2 <= one_program, "{two_steps} of {one_program}");
        client.cancel().await.unwrap();
    };
    tokio::time::timeout(BOUND, run).await.unwrap();
}

/// A replay sees what its first run recalled: the first replica keeps the squares (a 2026-07-28
/// client over stdio), a program recalls them and stops at a server's question; its retry
/// reaches a second replica, whose store holds nothing, and the replayed recall is served from
/// the journal, so the program ends with the same sum. `None` without `redis-server`.
#[test]
fn a_replayed_program_sees_the_values_its_first_run_recalled() {
    let Some(store) = runbyte_tests::Background::redis() else {
        return;
    };
    let config = format!(
        "[server]\nstate-key-file = \"state-key\"\nstate-store = \"redis://127.0.0.1:{}\"\n\n{}",
        store.port,
        config_of(&[test_server_table("t", &[], "protocol = \"2026-07-28\"")])
    );
    let (mut first, mut second) = (JsonLines::start(&config), JsonLines::start(&config));
    let kept = first.call(
        1,
        "execute_code",
        json!({"code": FETCH_AND_KEEP}),
        json!({}),
    );
    assert_eq!(kept["result"]["resultType"], "complete", "{kept}");
    let program = "import { recall } from './state';\n\
        import { ask } from './servers/t';\n\
        const squares = await recall<number[]>('squares');\n\
        const answer = await ask({ message: 'go on?' });\n\
        export default { sum: squares === undefined ? 'nothing kept' : squares.reduce((a, b) => a + b, 0), answer };";
    let asked = first.call(2, "execute_code", json!({"code": program}), json!({}));
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"].as_str().unwrap();
    let answer = json!({"runbyte_input": {"action": "accept", "content": {"answer": "yes"}}});
    let done = second.call(
        3,
        "execute_code",
        json!({"code": program}),
        json!({"inputResponses": answer, "requestState": state}),
    );
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    let value = result_json(text);
    assert_eq!(value["sum"], json!(SUM), "{text}");
    assert_eq!(value["answer"]["content"]["answer"], "yes", "{text}");
    // The second replica keeps nothing of its own: the value came from the journal.
    let own = second.call(
        4,
        "execute_code",
        json!({"code": RECALL_AND_SUM}),
        json!({}),
    );
    let text = own["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(result_json(text), json!("nothing kept"), "{own}");
}

/// The JSDoc dialect documents `./state` in JavaScript, and a program of its own keeps and
/// recalls through it (`runbyte exec`: one program, its own session).
#[test]
fn the_jsdoc_dialect_serves_the_module_in_javascript() {
    let dir = TempDir::new("state-jsdoc");
    dir.write(
        "runbyte.toml",
        &format!("{}\n[codegen]\ndialect = \"jsdoc\"\n", config()),
    );
    let module = run(dir.path(), &["cat", "/state/index.js"]);
    assert_eq!(module.code, Some(0), "{module:?}");
    assert!(
        module.stdout.contains("@returns {Promise<T | undefined>}")
            && module.stdout.contains("export async function recall(name)"),
        "{}",
        module.stdout
    );
    dir.write(
        "program.js",
        "import { keep, recall } from './state';\n\
         await keep('a', { x: [1, 2, 3] });\n\
         export default (await recall('a')).x.length;",
    );
    let ran = run(dir.path(), &["exec", "program.js"]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.starts_with("3\n"), "{}", ran.stdout);
}
