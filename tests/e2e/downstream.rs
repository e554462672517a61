//! Downstream servers over every transport: the demo server, the test server over stdio, and
//! the real `@modelcontextprotocol/server-everything` over stdio, streamable HTTP and legacy SSE.

use runbyte_tests::{Background, TempDir, config_with, run, server_everything, test_server_table};

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
        listed.stdout.contains("demo (ready, 9 tools)"),
        "{}",
        listed.stdout
    );
}
