//! No configured secret appears in any output: the VFS, a program's errors and results, the
//! logs, the audit log. One of each kind: a header value (holding `"` and `\`), an environment
//! value a server prints to its stderr, URL userinfo, and a query-string value.

use rmcp::ServiceExt;
use runbyte_tests::{TempDir, call, config_of, runbyte, test_server_table};
use serde_json::json;

const HEADER_SECRET: &str = r#"hdr-"sec\ret-771"#;
const ENV_SECRET: &str = "envsecret-4456";
const PASSWORD: &str = "pa55word-8812";
const QUERY_SECRET: &str = "qkey-abc-9931";

#[tokio::test(flavor = "multi_thread")]
async fn no_configured_secret_reaches_any_output() {
    let dir = TempDir::new("secrets");
    let audit = dir.path().join("audit.jsonl");
    let stderr = dir.path().join("stderr.log");
    let header = toml_string(&format!("Bearer {HEADER_SECRET}"));
    let config = format!(
        "[server]\naudit-log = {audit:?}\n\n{}",
        config_of(&[
            // Down: nothing listens on port 1. Its URL holds userinfo and a query secret.
            format!(
                "[servers.remote]\nurl = \"http://alice:{PASSWORD}@127.0.0.1:1/mcp?api_key={QUERY_SECRET}\"\n\
                 headers = {{ Authorization = {header} }}\ninit-timeout-ms = 2000\n"
            ),
            // Prints its token on stderr and dies.
            format!(
                "[servers.leaky]\ncommand = \"sh\"\nargs = [\"-c\", \"echo token=$TOKEN >&2; exit 3\"]\n\
                 env = {{ TOKEN = \"{ENV_SECRET}\" }}\n"
            ),
            test_server_table("t", &[], ""),
        ])
    );
    dir.write("runbyte.toml", &config);
    let mut command = tokio::process::Command::new(runbyte());
    command
        .arg("serve")
        .current_dir(dir.path())
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("RUNBYTE_LOG", "debug");
    let (transport, _) = rmcp::transport::TokioChildProcess::builder(command)
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let client = ().serve(transport).await.unwrap();
    // Let both servers fail at least once.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;

    let mut seen = String::new();
    for path in ["/servers", "/servers/remote", "/servers/leaky"] {
        seen += &call(&client, "list_directory", json!({ "path": path }))
            .await
            .0;
    }
    for path in ["/servers/remote/index.ts", "/servers/leaky/index.ts"] {
        seen += &call(&client, "read_file", json!({ "path": path })).await.0;
    }
    seen += &call(&client, "search_tools", json!({ "query": "remote" }))
        .await
        .0;
    let program = "import { callTool } from 'runbyte:bridge';\n\
         const out = [];\n\
         for (const s of ['remote', 'leaky']) {\n\
           try { await callTool(s, 'x', {}); } catch (e) { out.push(String(e.message)); }\n\
         }\n\
         export default out;";
    let (errors, _) = call(&client, "execute_code", json!({ "code": program })).await;
    assert!(errors.contains("remote"), "{errors}");
    seen += &errors;
    client.cancel().await.unwrap();

    let logs = std::fs::read_to_string(&stderr).unwrap();
    let audit = std::fs::read_to_string(&audit).unwrap_or_default();
    assert!(!audit.is_empty(), "the audit log is empty");
    assert!(logs.contains("leaky"), "{logs}");
    let escaped = serde_json::to_string(HEADER_SECRET).unwrap();
    for secret in [
        HEADER_SECRET,
        &escaped[1..escaped.len() - 1],
        "sec\\ret",
        ENV_SECRET,
        PASSWORD,
        QUERY_SECRET,
    ] {
        for (name, text) in [
            ("the client", &seen),
            ("the logs", &logs),
            ("the audit log", &audit),
        ] {
            assert!(!text.contains(secret), "{secret} in {name}:\n{text}");
        }
    }
}

fn toml_string(value: &str) -> String {
    format!("'{value}'")
}
