//! `execute_code` end to end: a real MCP client over stdio, real worker processes, real
//! downstream servers.

use std::time::{Duration, Instant};

use runbyte_tests::{
    TempDir, call, call_full, client, config_with, result_json, run, test_server_table,
};
use serde_json::json;

const LIMITS: &str =
    "[sandbox.limits]\ntimeout-ms = 2000\nmax-tool-calls = 100\ncall-timeout-ms = 1500\n";

fn setup(label: &str, extra: &str) -> TempDir {
    let dir = TempDir::new(label);
    let tables = [
        test_server_table("test", &[], ""),
        LIMITS.to_owned(),
        extra.to_owned(),
    ];
    dir.write("runbyte.toml", &config_with(&tables.join("\n")));
    dir
}

#[tokio::test]
async fn a_program_calls_two_servers_concurrently_and_returns_a_small_result() {
    let dir = setup("exec-two-servers", "");
    let client = client(&dir).await;
    let program = r#"
        import { get_weather, search_issues } from './servers/demo';
        import * as test from './servers/test';

        const cities = ['Paris', 'Tokyo', 'Berlin', 'London'];
        const [weather, issues, sum] = await Promise.all([
          Promise.all(cities.map((city) => get_weather({ location: { city } }))),
          search_issues({ query: '', state: 'all', limit: 100 }),
          test.add({ a: 20, b: 22 }),
        ]);
        const bugs = issues.issues.filter((i) => i.labels.includes('bug')).map((i) => i.id);
        console.log('looked at', issues.total, 'issues');
        export default { warm: weather.filter((w: any) => w.temperature > 8).map((w: any) => w.city), bugs, sum };
    "#;
    let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
    assert!(!error, "{text}");
    assert_eq!(
        result_json(&text),
        json!({"warm": ["Paris", "Tokyo", "London"], "bugs": [1, 3, 5, 8], "sum": {"sum": 42}})
    );
    assert!(
        text.contains("--- console ---\nlooked at 8 issues"),
        "{text}"
    );
    // The lean summary (the default) says what may change the next step: the calls made.
    assert!(text.ends_with("\n--- 6 tool calls ---"), "{text}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn imports_resolve_in_every_form() {
    let dir = setup("exec-imports", "");
    let client = client(&dir).await;
    let program = r#"
        import { echo as a } from './servers/demo';
        import { echo as b } from '/servers/demo';
        import { echo as c } from 'servers/demo';
        import { echo as d } from './servers/demo/index';
        import { echo as e } from './servers/demo/echo.ts';
        import { echo as f } from '/servers/demo/echo';
        import * as servers from './servers';
        async function exec() {
          const all = await Promise.all([a, b, c, d, e, f, servers.demo.echo].map((fn, i) => fn({ message: `m${i}` })));
          return all.join(',');
        }
    "#;
    let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
    assert!(!error, "{text}");
    assert_eq!(result_json(&text), json!("m0,m1,m2,m3,m4,m5,m6"), "{text}");

    // An import is checked when its binding is used (imports used only as types
    // are elided, as TypeScript does, so a program may import the generated `Args` types).
    let (text, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { x } from './servers/dmo';\nexport default x;"}),
    )
    .await;
    assert!(
        error && text.contains("did you mean") && text.contains("demo"),
        "{text}"
    );
    let (text, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { ecko } from './servers/demo';\nexport default ecko;"}),
    )
    .await;
    assert!(error && text.contains("echo"), "{text}");
    client.cancel().await.unwrap();
}

/// A server's index runs as forwarders that load a tool's module on its first call: a named
/// import, the server's namespace and `/servers` all give the same callable functions.
#[tokio::test]
async fn a_large_server_is_imported_by_name_or_whole_and_its_tools_load_when_called() {
    for isolation in ["thread", "process"] {
        // The line lands in `LIMITS`' table, which `setup` writes last before `extra`.
        let big = test_server_table("big", &["--mode", "generated-only", "--tools", "250"], "");
        let dir = setup(
            "exec-large-server",
            &format!("isolation = {isolation:?}\n{big}"),
        );
        a_large_server_in(&dir).await;
    }
}

async fn a_large_server_in(dir: &TempDir) {
    let client = client(dir).await;
    let program = r#"
        import { tool_0042, tool_0042 as again } from './servers/big';
        import * as big from './servers/big';
        import * as servers from './servers';
        const named = await tool_0042({ id: 'x' });
        const [whole, nested] = await Promise.all([big.tool_0249({}), servers.big.tool_0001({ title: 't' })]);
        const names = Object.keys(big);
        export default {
          named: JSON.stringify(named).includes('tool_0042'),
          whole: JSON.stringify(whole).includes('tool_0249'),
          nested: JSON.stringify(nested).includes('tool_0001'),
          count: names.length,
          first: names[0],
          same: again === tool_0042 && servers.big.tool_0042 === tool_0042,
          kinds: typeof servers.big.tool_0100,
        };
    "#;
    let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
    assert!(!error, "{text}");
    assert_eq!(
        result_json(&text),
        json!({"named": true, "whole": true, "nested": true, "count": 250, "first": "tool_0000",
               "same": true, "kinds": "function"}),
        "{text}"
    );
    let (text, error) = call(
        &client,
        "execute_code",
        json!({"code": "import { tool_9999 } from './servers/big';\nexport default tool_9999;"}),
    )
    .await;
    assert!(
        error && text.contains("has no export `tool_9999`"),
        "{text}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn results_map_by_kind_and_images_reach_the_client_as_blocks() {
    let dir = setup("exec-results", "");
    let client = client(&dir).await;
    let program = r#"
        import { search_issues, get_weather, echo, close_issue, make_badge } from './servers/demo';
        const structured = await search_issues({ query: 'crash', state: 'all' });
        const json = await get_weather({ location: { city: 'Tokyo' } });
        const text = await echo({ message: 'plain text' });
        let failed = '';
        try { await close_issue({ id: 999 }); } catch (e) { failed = (e as Error).message; }
        const badge = await make_badge({ status: 'passing' });
        export default { total: structured.total, city: json.city, text, failed, badge };
    "#;
    let result = call_full(&client, "execute_code", json!({"code": program})).await;
    let text = result.content[0].as_text().unwrap().text.clone();
    assert_ne!(result.is_error, Some(true), "{text}");
    let value = result_json(&text);
    assert_eq!(value["total"], 1);
    assert_eq!(value["city"], "Tokyo");
    assert_eq!(value["text"], "plain text");
    assert_eq!(value["failed"], "demo/close_issue: issue 999 not found");
    assert_eq!(value["badge"]["type"], "image");
    assert!(text.contains("1 failed"), "{text}");
    let image = result
        .content
        .iter()
        .find_map(|c| c.as_image())
        .expect("an image block");
    assert_eq!(image.mime_type, "image/png");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn errors_point_into_the_agents_own_source() {
    let dir = setup("exec-errors", "");
    let client = client(&dir).await;
    let syntax = "const a: number = 1;\nconst b = ;\n";
    let (text, error) = call(&client, "execute_code", json!({"code": syntax})).await;
    assert!(error && text.starts_with("SyntaxError at line 2"), "{text}");
    let runtime = "interface P { x: number }\nconst p: P = { x: 1 };\n\nfunction f(q: P): number {\n  return (q as any).missing.deep;\n}\nexport default f(p);\n";
    let (text, error) = call(&client, "execute_code", json!({"code": runtime})).await;
    assert!(error && text.contains("line 5"), "{text}");
    assert!(text.contains("TypeError"), "{text}");
    let failing = "import { add } from './servers/test';\nawait add({ a: 1 });\n";
    let (text, error) = call(&client, "execute_code", json!({"code": failing})).await;
    assert!(
        error && text.contains("test/add") && text.contains("missing required argument `b`"),
        "{text}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn adversarial_programs_end_with_clear_errors_and_the_next_runs() {
    let dir = setup("exec-adversarial", "");
    let client = client(&dir).await;
    let cases: Vec<(&str, String, &str)> = vec![
        ("infinite loop", "for (;;) {}".into(), "Timeout"),
        ("loop in finally", "try { for(;;){} } catch (e) {} finally { for(;;){} }".into(), "Timeout"),
        ("join bomb", "export default new Array(2 ** 28).join('x').length;".into(), ""),
        ("array to string", "export default (new Array(1e9) + '').length;".into(), ""),
        ("memory bomb", "const a: string[] = []; for (;;) a.push('x'.repeat(1 << 20));".into(), "memory"),
        ("deep recursion", "function f(n: number): number { return f(n + 1) + 1; } f(0);".into(), "tack"),
        ("promise flood", "for (;;) await null;".into(), "Timeout"),
        (
            "call budget",
            "import { echo } from './servers/demo';\nawait Promise.all(Array.from({length: 5000}, () => echo({message: 'x'})));".into(),
            "100",
        ),
        ("hung tool call", "import { hang } from './servers/test';\nawait hang({});".into(), "hang"),
        ("deep nesting", format!("export default {}1{};", "(".repeat(100_000), ")".repeat(100_000)), "Syntax"),
    ];
    for (label, program, expected) in cases {
        let started = Instant::now();
        let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
        let took = started.elapsed();
        assert!(error, "{label}: {text}");
        assert!(
            text.contains(expected),
            "{label}: expected {expected:?} in {text}"
        );
        assert!(took < Duration::from_secs(6), "{label} took {took:?}");
        let (after, error) = call(
            &client,
            "execute_code",
            json!({"code": "export default 6 * 7;"}),
        )
        .await;
        assert!(
            !error && result_json(&after) == json!(42),
            "after {label}: {after}"
        );
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn prototype_pollution_and_hostile_arguments_cannot_change_what_is_sent() {
    let dir = setup("exec-hostile", "");
    let client = client(&dir).await;
    let program = r#"
        import { echo } from './servers/test';
        (Object.prototype as any).toJSON = () => 'polluted';
        JSON.stringify = () => '"hijacked"';
        (Array.prototype as any).injected = 'extra';
        (Object.prototype as any).message = 'from prototype';
        export default await echo({ message: 'exact' });
    "#;
    let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
    assert!(!error, "{text}");
    assert_eq!(result_json(&text), json!("exact"));
    let hostile = [
        (
            "const a: any = {}; a.self = a; await echo({ message: a });",
            "cycle",
        ),
        (
            "await echo({ get message() { throw new Error('getter'); } });",
            "getter",
        ),
        ("await echo({ message: 10n as any });", "BigInt"),
    ];
    for (body, expected) in hostile {
        let program = format!("import {{ echo }} from './servers/test';\n{body}");
        let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
        assert!(error && text.contains(expected), "{body}: {text}");
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn output_is_bounded_with_a_marker_saying_how_much_was_cut() {
    let dir = setup("exec-output", "");
    let client = client(&dir).await;
    let (text, error) = call(&client, "execute_code", json!({"code": "for (let i = 0; i < 100000; i++) console.log('line', i); export default 1;"})).await;
    assert!(!error, "{}", &text[..200.min(text.len())]);
    assert!(text.len() <= 70_000, "{} bytes", text.len());
    let cut: usize = text
        .split("[truncated: ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert!(cut > 1_000_000, "the marker says {cut} bytes were cut");
    // A result over the cap is refused whole (cut JSON would mislead), saying what to do.
    let (text, error) = call(
        &client,
        "execute_code",
        json!({"code": "export default 'x'.repeat(1_000_000);"}),
    )
    .await;
    assert!(
        error && text.contains("larger than the output limit"),
        "{text}"
    );
    client.cancel().await.unwrap();
}

#[test]
fn runbyte_exec_runs_a_file_and_stdin() {
    let dir = setup("exec-cli", "");
    let file = dir.write("program.ts", "import { add } from './servers/test';\nconsole.log('adding');\nexport default await add({ a: 1, b: 2 });\n");
    let ran = run(dir.path(), &["exec", file.to_str().unwrap()]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(
        ran.stdout
            .starts_with("{\"sum\":3}\n--- console ---\nadding\n--- "),
        "{}",
        ran.stdout
    );
    let failed = run(dir.path(), &["exec", "/nonexistent/program.ts"]);
    assert_eq!(failed.code, Some(1));
    assert!(
        failed
            .stderr
            .contains("cannot read /nonexistent/program.ts"),
        "{}",
        failed.stderr
    );
}

/// An engine on a host thread makes its tool calls itself (`engine::Link::with_desk`), where a
/// worker's are made by the host; a call skips rmcp's service loop (`pump::Sender`), stamped as
/// rmcp stamps a 2026-07-28 request where the server speaks that. In each pairing, concurrent calls, a
/// call past its timeout, and a call still running when the program ends go the same way, and
/// the server is told of the two it no longer has to answer.
#[tokio::test]
async fn calls_go_the_same_way_in_either_isolation_and_either_revision() {
    for (isolation, protocol) in [
        ("thread", "2025-11-25"),
        ("thread", "2026-07-28"),
        ("process", "2025-11-25"),
        ("process", "2026-07-28"),
    ] {
        let pairing = format!("{isolation}, {protocol}");
        let dir = TempDir::new("exec-own-calls");
        let tables = [
            test_server_table("test", &[], &format!("protocol = {protocol:?}")),
            format!(
                "[sandbox.limits]\nisolation = {isolation:?}\ntimeout-ms = 30000\n\
                 call-timeout-ms = 1500\n"
            ),
        ];
        dir.write("runbyte.toml", &config_with(&tables.join("\n")));
        let client = client(&dir).await;
        let program = r#"
            import { echo, slow, hang } from './servers/test';
            const [a, b] = await Promise.all([echo({ message: 'a' }), slow({ ms: 300 })]);
            let timedOut = '';
            try { await hang({}); } catch (e) { timedOut = String(e.message ?? e); }
            // The hang is in flight when the slow call ends, and is left running.
            const first = await Promise.race([hang({}), slow({ ms: 300 })]);
            export default { a, b, timedOut, first };
        "#;
        let began = Instant::now();
        let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
        assert!(!error, "{pairing}: {text}");
        let answer = result_json(&text);
        assert_eq!(answer["a"], "a", "{pairing}: {text}");
        assert_eq!(answer["b"], "slept 300 ms", "{pairing}: {text}");
        assert_eq!(answer["first"], "slept 300 ms", "{pairing}: {text}");
        assert!(
            answer["timedOut"]
                .as_str()
                .is_some_and(|why| why.contains("did not answer within 1500 ms")),
            "{pairing}: {text}"
        );
        // The call timeout fired, not the execution's (a bound for a hang, far above 1.5 s).
        assert!(began.elapsed() < Duration::from_secs(25), "{pairing}");
        // Both hangs were cancelled downstream: the timed-out one and the one left running.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (count, _) = call(
                &client,
                "execute_code",
                json!({"code": "import { cancelled_count } from './servers/test';\n\
                    export default await cancelled_count({});"}),
            )
            .await;
            // The server's text `2`, which reaches the program as the number it reads as.
            if result_json(&count) == json!(2) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{pairing}: the server saw {count} cancellations"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        client.cancel().await.unwrap();
    }
}
