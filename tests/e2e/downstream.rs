//! Downstream servers over every transport: the demo server, the test server over stdio, and
//! the real `@modelcontextprotocol/server-everything` over stdio, streamable HTTP and legacy SSE.

use runbyte_tests::{
    Background, TempDir, config_of, config_with, conformance_suite, repo_root, run, runbyte,
    server_everything, test_server_table,
};

#[test]
fn tools_and_call_work_on_every_transport() {
    let (Some(everything), Some(http), Some(sse)) = (
        server_everything(),
        Background::everything("streamableHttp"),
        Background::everything("sse"),
    ) else {
        return;
    };
    let test_http = Background::test_server("http", &[]);
    let test_sse = Background::test_server("sse", &[]);
    let tables = [
        test_server_table("test", &[], ""),
        format!(
            "[servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
            everything.display().to_string()
        ),
        // A URL with no transport: streamable HTTP.
        format!(
            "[servers.everything-http]\nurl = \"http://127.0.0.1:{}/mcp\"\n",
            http.port
        ),
        // A URL with no transport on an SSE-only server: the fallback finds SSE.
        format!(
            "[servers.everything-sse]\nurl = \"http://127.0.0.1:{}/sse\"\n",
            sse.port
        ),
        format!(
            "[servers.test-http]\nurl = \"http://127.0.0.1:{}/mcp\"\ntransport = \"http\"\n",
            test_http.port
        ),
        format!(
            "[servers.test-sse]\nurl = \"http://127.0.0.1:{}/sse\"\ntransport = \"sse\"\n",
            test_sse.port
        ),
    ];
    let dir = TempDir::new("downstream");
    dir.write("runbyte.toml", &config_with(&tables.join("\n")));
    let listed = run(dir.path(), &["tools"]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    for server in [
        "demo",
        "test",
        "everything",
        "everything-http",
        "everything-sse",
        "test-http",
        "test-sse",
    ] {
        assert!(
            listed.stdout.contains(&format!("\n{server} (ready, "))
                || listed.stdout.starts_with(&format!("{server} (ready, ")),
            "{server}: {}",
            listed.stdout
        );
    }
    // Each connector speaks 2026-07-28 to a server that offers it (the test server answers
    // `server/discover` even over the 2024-11-05 SSE transport), and falls back to the handshake
    // for one that does not (server-everything speaks up to 2025-11-25).
    for (server, protocol) in [
        ("demo", "2026-07-28"),
        ("test", "2026-07-28"),
        ("test-http", "2026-07-28"),
        ("test-sse", "2026-07-28"),
        ("everything", "2025-11-25"),
        ("everything-http", "2025-11-25"),
        ("everything-sse", "2025-11-25"),
    ] {
        assert!(
            listed.stdout.contains(&format!("{server} (ready, "))
                && listed
                    .stdout
                    .lines()
                    .any(|line| line.starts_with(&format!("{server} (ready, "))
                        && line.ends_with(&format!("MCP {protocol})"))),
            "{server} should speak {protocol}: {}",
            listed.stdout
        );
    }
    let calls = [
        (
            "demo",
            "get_weather",
            r#"{"location": {"city": "Paris"}}"#,
            "cloudy",
        ),
        ("test", "echo", r#"{"message": "over stdio"}"#, "over stdio"),
        (
            "everything",
            "echo",
            r#"{"message": "npm stdio"}"#,
            "npm stdio",
        ),
        (
            "everything-http",
            "echo",
            r#"{"message": "streamable"}"#,
            "streamable",
        ),
        (
            "everything-sse",
            "echo",
            r#"{"message": "legacy sse"}"#,
            "legacy sse",
        ),
        ("test-http", "add", r#"{"a": 2, "b": 3}"#, "5"),
        ("test-sse", "echo", r#"{"message": "our sse"}"#, "our sse"),
    ];
    for (server, tool, args, expected) in calls {
        let called = run(dir.path(), &["call", server, tool, args]);
        assert_eq!(called.code, Some(0), "{server}: {called:?}");
        assert!(
            called.stdout.contains(expected),
            "{server}: {}",
            called.stdout
        );
    }
}

#[test]
fn http_failures_are_reported_by_name_while_others_answer() {
    let dir = TempDir::new("downstream-failures");
    let refused = runbyte_tests::free_port();
    let crashing = Background::test_server("http", &["--mode", "crash-on-initialize"]);
    let tables = [
        format!("[servers.refused]\nurl = \"http://127.0.0.1:{refused}/mcp\"\n"),
        format!(
            "[servers.crashing]\nurl = \"http://127.0.0.1:{}/mcp\"\ntransport = \"http\"\n",
            crashing.port
        ),
    ];
    dir.write("runbyte.toml", &config_with(&tables.join("\n")));
    let listed = run(dir.path(), &["tools"]);
    assert_eq!(listed.code, Some(1), "{listed:?}");
    assert!(
        listed.stdout.contains("refused (FAILED:"),
        "{}",
        listed.stdout
    );
    assert!(
        listed.stdout.contains("crashing (FAILED:"),
        "{}",
        listed.stdout
    );
    assert!(
        listed
            .stdout
            .contains("demo (ready, 9 tools, MCP 2026-07-28)"),
        "{}",
        listed.stdout
    );
}

/// The official conformance suite's client scenarios of one revision, with Runbyte's Hub as the
/// client under test (`runbyte probe` through `tests/conformance/client.sh`); each of
/// `required` must pass outright, and only the baseline's entries may fail.
fn client_conformance(revision: &str, required: &[&str]) {
    let dir = TempDir::new("client-conformance");
    let config = dir.write("runbyte.toml", &config_of(&[]));
    let command = format!(
        "{} {} {}",
        repo_root().join("tests/conformance/client.sh").display(),
        runbyte().display(),
        config.display()
    );
    conformance_suite(
        "client",
        ["--command", &command],
        revision,
        required,
        dir.path(),
    );
}

#[test]
fn the_hub_passes_the_conformance_suites_client_scenarios_for_2025_11_25() {
    client_conformance(
        "2025-11-25",
        &[
            "initialize",
            "tools_call",
            "elicitation-sep1034-client-defaults",
            "sse-retry",
            // OAuth (issue 16): discovery, registration, step-up, pre-registered and machine
            // clients.
            "auth/metadata-default",
            "auth/metadata-var1",
            "auth/scope-step-up",
            "auth/pre-registration",
            "auth/client-credentials-basic",
        ],
    );
}

#[test]
fn the_hub_passes_the_conformance_suites_client_scenarios_for_2026_07_28() {
    client_conformance(
        "2026-07-28",
        &[
            "tools_call",
            "request-metadata",
            "sep-2322-client-request-state",
            "http-standard-headers",
            "http-invalid-tool-headers",
            "json-schema-ref-no-deref",
            "auth/metadata-default",
            "auth/scope-step-up",
            "auth/authorization-server-migration",
            "auth/iss-wrong-issuer",
        ],
    );
}

/// `runbyte tools` prints what a server wrote (tool names, descriptions) with control and bidi
/// characters escaped: the test server's hostile descriptions hold an escape sequence (CSI),
/// NUL, BEL and a bidi override, and none reaches the terminal raw.
#[test]
fn runbyte_tools_prints_server_text_escaped() {
    let dir = TempDir::new("tools-escaped");
    dir.write(
        "runbyte.toml",
        &runbyte_tests::config_of(&[runbyte_tests::test_server_table(
            "t",
            &["--mode", "hostile-metadata"],
            "",
        )]),
    );
    let listed = run(dir.path(), &["tools"]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    assert!(
        listed.stdout.contains("evil_description"),
        "{}",
        listed.stdout
    );
    assert!(
        !listed.stdout.chars().any(|c| (c.is_control() && c != '\n')
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)),
        "{:?}",
        listed.stdout
    );
    assert!(listed.stdout.contains("\\u{1b}[31m"), "{}", listed.stdout);
}
