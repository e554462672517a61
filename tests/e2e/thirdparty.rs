//! Third-party plugins of every kind, built only against `runbyte-plugin-api` (examples/), each
//! loaded by real dlopen and used in real executions; several policies at once; isolated plugins.

use std::process::{Command, Stdio};

use runbyte_tests::{
    TempDir, call, client, config_with, free_port, library, result_json, run, runbyte,
};
use serde_json::json;

#[tokio::test]
async fn the_readonly_policy_denies_in_the_program_and_in_the_audit_log() {
    let dir = TempDir::new("readonly");
    let log = dir.path().join("audit.jsonl");
    let extra = format!(
        "[server]\naudit-log = {:?}\n[sandbox]\npolicy = [\"limits\", \"readonly\"]\n[sandbox.readonly]\nallow = [\"demo/create_issue\"]\n",
        log.display().to_string()
    );
    dir.write("runbyte.toml", &config_with(&extra));
    let checked = run(dir.path(), &["check"]);
    assert_eq!(checked.code, Some(0), "{checked:?}");
    assert!(
        checked
            .stdout
            .contains("policy   #1 limits\npolicy   #2 readonly"),
        "{}",
        checked.stdout
    );

    let client = client(&dir).await;
    let program = r#"
        import { get_weather, close_issue, create_issue } from './servers/demo';
        const weather = await get_weather({ location: { city: 'Paris' } });
        let denied = '';
        try { await close_issue({ id: 1 }); } catch (e) { denied = (e as Error).message; }
        const created = await create_issue({ title: 'allowed by name' });
        export default { city: weather.city, denied, created: created.title };
    "#;
    let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
    assert!(!error, "{text}");
    let value = result_json(&text);
    assert_eq!(value["city"], "Paris");
    assert_eq!(value["created"], "allowed by name");
    let denied = value["denied"].as_str().unwrap();
    assert!(
        denied.contains("denied by policy `readonly`") && denied.contains("destructive"),
        "{denied}"
    );
    client.cancel().await.unwrap();
    let audit = std::fs::read_to_string(&log).unwrap();
    let denial = audit
        .lines()
        .find(|line| line.contains("\"outcome\":\"denied\""))
        .expect("a denial line");
    assert!(
        denial.contains("\"tool\":\"close_issue\"") && denial.contains("readonly"),
        "{denial}"
    );
}

#[test]
fn the_dts_dialect_generates_modules_that_run() {
    let dir = TempDir::new("dts");
    dir.write(
        "runbyte.toml",
        &config_with("[codegen]\ndialect = \"dts\"\n"),
    );
    let module = run(dir.path(), &["cat", "/servers/demo/get_weather.ts"]);
    assert_eq!(module.code, Some(0), "{module:?}");
    assert!(
        module
            .stdout
            .contains("export async function get_weather(args: {"),
        "{}",
        module.stdout
    );
    let program = dir.write("p.ts", "import { get_weather } from './servers/demo';\nexport default (await get_weather({ location: { city: 'Sydney' } })).conditions;\n");
    let ran = run(dir.path(), &["exec", program.to_str().unwrap()]);
    assert_eq!(ran.code, Some(0), "{ran:?}");
    assert!(ran.stdout.starts_with("\"sunny\""), "{}", ran.stdout);
}

/// Runbyte A serves over the `tcp` example listener; Runbyte B reaches it through the `tcp`
/// example connector, as one of its downstream servers, and runs a program on A through it.
fn tcp_round_trip(isolate_in_b: bool) {
    let port = free_port();
    let a = TempDir::new("tcp-a");
    a.write("runbyte.toml", &config_with(""));
    let mut server = Command::new(runbyte())
        .args([
            "serve",
            "--listen",
            "tcp",
            "--bind",
            &format!("127.0.0.1:{port}"),
        ])
        .current_dir(a.path())
        .env("XDG_STATE_HOME", a.path().join("state"))
        .env("RUNBYTE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "runbyte did not listen on {port}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let b = TempDir::new("tcp-b");
    let text = config_with(&format!(
        "[servers.upstream]\nurl = \"tcp://127.0.0.1:{port}\"\ntransport = \"tcp\"\n"
    ));
    let text = if isolate_in_b {
        text.replacen("[plugins]\n", "[plugins]\nisolate = [\"tcp\"]\n", 1)
    } else {
        text
    };
    b.write("runbyte.toml", &text);
    let checked = run(b.path(), &["check"]);
    let tcp_line = checked
        .stdout
        .lines()
        .find(|l| l.contains("librunbyte_transport_tcp"))
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        tcp_line.ends_with("OK (isolated)"),
        isolate_in_b,
        "{}",
        checked.stdout
    );
    let tools = run(b.path(), &["tools", "upstream"]);
    let called = run(
        b.path(),
        &[
            "call",
            "upstream",
            "execute_code",
            r#"{"code": "import { get_weather } from './servers/demo';\nexport default (await get_weather({ location: { city: 'Tokyo' } })).city;"}"#,
        ],
    );
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(tools.code, Some(0), "{tools:?}");
    assert!(
        tools
            .stdout
            .contains("upstream (ready, 5 tools, MCP 2026-07-28)")
            && tools.stdout.contains("execute_code"),
        "{}",
        tools.stdout
    );
    assert_eq!(called.code, Some(0), "{called:?}");
    assert!(called.stdout.contains(r#"\"Tokyo\""#), "{}", called.stdout);
}

#[test]
fn the_tcp_transport_connects_two_runbytes() {
    tcp_round_trip(false);
}

#[test]
fn an_isolated_transport_pumps_through_its_own_process() {
    tcp_round_trip(true);
}

#[tokio::test]
async fn an_isolated_plugin_that_crashes_fails_only_its_calls_and_restarts() {
    let dir = TempDir::new("isolated-crash");
    let extra = format!(
        "[[plugins.load]]\npath = {:?}\nisolate = true\n[sandbox]\npolicy = [\"limits\", \"crashes\"]\n",
        library("libfixture_plugin_crashes").display().to_string()
    );
    dir.write("runbyte.toml", &config_with(&extra));
    let client = client(&dir).await;
    let echo = "import { echo } from './servers/demo';\nexport default await echo({ message: 'still here' });";
    let (text, error) = call(&client, "execute_code", json!({"code": echo})).await;
    assert!(
        !error && result_json(&text) == json!("still here"),
        "{text}"
    );
    let crash = "import { add_numbers } from './servers/demo';\nexport default await add_numbers({ a: 1, b: 2 });";
    let (text, error) = call(&client, "execute_code", json!({"code": crash})).await;
    assert!(error, "{text}");
    assert!(
        text.contains("isolated plugin `crashes`") && text.contains("signal 6"),
        "{text}"
    );
    // Started again on its next call; the gateway never went down.
    let (text, error) = call(&client, "execute_code", json!({"code": echo})).await;
    assert!(
        !error && result_json(&text) == json!("still here"),
        "{text}"
    );
    client.cancel().await.unwrap();
}

#[test]
fn an_isolated_plugin_that_panics_is_caught_and_named() {
    let dir = TempDir::new("isolated-panic");
    let extra = format!(
        "[[plugins.load]]\npath = {:?}\nisolate = true\n[sandbox]\npolicy = [\"limits\", \"panics\"]\n",
        library("libfixture_plugin_panics").display().to_string()
    );
    dir.write("runbyte.toml", &config_with(&extra));
    let program = dir.write("p.ts", "export default 1;");
    let ran = run(dir.path(), &["exec", program.to_str().unwrap()]);
    assert_eq!(ran.code, Some(1), "{ran:?}");
    assert!(
        ran.stderr.contains("plugin `panics` panicked in `limits`"),
        "{}",
        ran.stderr
    );
    let opened = run(dir.path(), &["check"]);
    assert!(
        opened.stdout.contains("libfixture_plugin_panics.so"),
        "{}",
        opened.stdout
    );
}

#[tokio::test]
async fn limits_overrides_per_server_and_per_tool_apply_in_executions() {
    let dir = TempDir::new("limits-overrides");
    let extra = format!(
        "{}[sandbox.limits]\ncall-timeout-ms = 300\n[sandbox.limits.servers.demo]\nmax-tool-calls = 2\n[sandbox.limits.servers.test.tools.slow]\ncall-timeout-ms = 3000\n",
        runbyte_tests::test_server_table("test", &[], "")
    );
    dir.write("runbyte.toml", &config_with(&extra));
    let client = client(&dir).await;
    let program = r#"
        import { echo } from './servers/demo';
        import { slow, hang } from './servers/test';
        const out: string[] = [];
        // One tool's longer timeout: 800 ms, although the default is 300 ms.
        out.push(String(await slow({ ms: 800 })));
        // The default still holds elsewhere.
        try { await hang({}); } catch (e) { out.push((e as Error).message); }
        // One server's budget: two calls per execution.
        await echo({ message: '1' });
        await echo({ message: '2' });
        try { await echo({ message: '3' }); } catch (e) { out.push((e as Error).message); }
        export default out;
    "#;
    let (text, error) = call(&client, "execute_code", json!({"code": program})).await;
    assert!(!error, "{text}");
    let out = result_json(&text);
    assert!(
        !out[0].as_str().unwrap().contains("did not answer"),
        "{out}"
    );
    assert!(
        out[1]
            .as_str()
            .unwrap()
            .contains("test/hang did not answer within 300 ms"),
        "{out}"
    );
    assert!(
        out[2]
            .as_str()
            .unwrap()
            .contains("server `demo` allows at most 2 tool calls per execution"),
        "{out}"
    );
    client.cancel().await.unwrap();
}
