//! Serving upstream over streamable HTTP and legacy SSE: the official conformance suite, the
//! Python SDK as a real third-party client over every listener, and the security rules.

use std::{
    io::{BufRead, BufReader},
    time::Duration,
};

use runbyte_tests::{
    Served, TempDir, config_of, config_with, conformance_suite, python_client, runbyte,
    test_server_table,
};
use serde_json::Value;

/// Runs the official conformance suite's server scenarios of one protocol revision against
/// Runbyte's http listener, with Runbyte in front of the test server's conformance fixtures
/// (`--mode conformance`) shown as they are (`expose = "direct"`, `direct-prefix = ""`): what
/// the suite checks of the fixtures' tools, resources, prompts, completions, logs, progress and
/// questions must reach it through Runbyte intact, and what it checks of the server itself
/// (handshake, sessions, headers, DNS rebinding, caching hints) is Runbyte's own. The baseline
/// lists only extensions Runbyte does not offer; each of `required` must pass outright.
fn conformance(revision: &str, required: &[&str]) {
    let fixture = test_server_table(
        "fixtures",
        &["--mode", "conformance"],
        "expose = \"direct\"\ndirect-prefix = \"\"",
    );
    let served = Served::with_config("conformance", "http", &config_of(&[fixture]));
    let results = TempDir::new("conformance-results");
    let url = served.url("/mcp");
    conformance_suite(
        "server",
        ["--url", &url],
        revision,
        required,
        results.path(),
    );
}

#[test]
fn the_conformance_suite_passes_for_2025_11_25_sessions() {
    conformance(
        "2025-11-25",
        &[
            "server-initialize",
            "ping",
            "tools-list",
            "logging-set-level",
            "resources-list",
            "prompts-list",
            "dns-rebinding-protection",
            "server-sse-multiple-streams",
            "server-session-lifecycle",
            "completion-complete",
            "tools-call-simple-text",
            "tools-call-audio",
            "tools-call-embedded-resource",
            "tools-call-with-logging",
            "tools-call-with-progress",
            "tools-call-sampling",
            "tools-call-elicitation",
            "elicitation-sep1330-enums",
            "resources-templates-read",
            "resources-subscribe",
            "prompts-get-embedded-resource",
        ],
    );
}

#[test]
fn the_conformance_suite_passes_for_2026_07_28_stateless_requests() {
    conformance(
        "2026-07-28",
        &[
            "server-stateless",
            "tools-list",
            "caching",
            "resources-list",
            "prompts-list",
            "sep-2164-resource-not-found",
            "dns-rebinding-protection",
            "server-sse-multiple-streams",
            "input-required-result-unsupported-methods",
            "http-header-validation",
            "completion-complete",
            "tools-call-with-progress",
            "resources-templates-read",
            "input-required-result-multi-round",
            "input-required-result-tampered-state",
            "input-required-result-capability-check",
            "input-required-result-non-tool-request",
            "http-custom-header-server-validation",
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
    );
}

fn check_report(report: &Value) {
    assert_eq!(report["server"], "runbyte");
    assert_eq!(
        report["tools"],
        serde_json::json!([
            "execute_code",
            "list_directory",
            "read_file",
            "save_skill",
            "search_tools"
        ])
    );
    assert!(
        report["listing"].as_str().unwrap().contains("demo/"),
        "{report}"
    );
    assert!(
        report["module"]
            .as_str()
            .unwrap()
            .contains("export async function get_weather"),
        "{report}"
    );
    assert_eq!(report["result_is_error"], false, "{report}");
    assert!(
        report["result"]
            .as_str()
            .unwrap()
            .starts_with(r#"{"conditions":"cloudy","issues":8}"#),
        "{report}"
    );
}

#[test]
fn the_python_sdk_works_over_stdio_streamable_http_and_sse() {
    let dir = TempDir::new("python-stdio");
    let config = dir.write("runbyte.toml", &config_with(""));
    let Some(report) = python_client(&[
        "stdio",
        runbyte().to_str().unwrap(),
        config.to_str().unwrap(),
    ]) else {
        return;
    };
    check_report(&report);
    let http = Served::start("python-http", "http", "");
    check_report(&python_client(&["http", &http.url("/mcp")]).unwrap());
    let sse = Served::start("python-sse", "sse", "");
    check_report(&python_client(&["sse", &sse.url("/sse")]).unwrap());
}

/// The Python SDK 2.3 pinned to 2026-07-28, and in its `auto` mode (which probes with
/// `server/discover` and must choose 2026-07-28), over stdio and streamable HTTP; the legacy
/// mode is the test above.
#[test]
fn the_python_sdk_speaks_2026_07_28_over_stdio_and_streamable_http() {
    let dir = TempDir::new("python-eras");
    let config = dir.write("runbyte.toml", &config_with(""));
    let http = Served::start("python-eras-http", "http", "");
    for era in ["2026-07-28", "auto"] {
        let Some(report) = python_client(&[
            "--era",
            era,
            "stdio",
            runbyte().to_str().unwrap(),
            config.to_str().unwrap(),
        ]) else {
            return;
        };
        check_report(&report);
        assert_eq!(report["era"], "2026-07-28", "stdio, {era}: {report}");
        let report = python_client(&["--era", era, "http", &http.url("/mcp")]).unwrap();
        check_report(&report);
        assert_eq!(report["era"], "2026-07-28", "http, {era}: {report}");
    }
}

/// One raw HTTP/1.1 request; the status line's code and the whole response.
fn request(port: u16, head: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let message = format!(
        "{head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    // A server that refuses a body may close before reading it all; its answer still counts.
    let _ = stream.write_all(message.as_bytes());
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, response)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

fn post(port: u16, host: &str, extra: &str, body: &str) -> (u16, String) {
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream{extra}"
    );
    request(port, &head, body)
}

#[test]
fn security_rules_refuse_what_they_must_and_pass_the_rest() {
    let served = Served::start("security", "http", "");
    let port = served.port;
    let local = format!("127.0.0.1:{port}");
    // Host: loopback passes; a rebinding name is refused.
    assert_eq!(post(port, &local, "", INITIALIZE).0, 200);
    assert_eq!(
        post(port, &format!("localhost:{port}"), "", INITIALIZE).0,
        200
    );
    assert_eq!(
        post(port, &format!("localhost.evil.com:{port}"), "", INITIALIZE).0,
        403
    );
    assert_eq!(post(port, "evil.com", "", INITIALIZE).0, 403);
    // Origin: a loopback origin passes; any other is refused.
    assert_eq!(
        post(
            port,
            &local,
            &format!("\r\nOrigin: http://localhost:{port}"),
            INITIALIZE
        )
        .0,
        200
    );
    assert_eq!(
        post(port, &local, "\r\nOrigin: http://evil.com", INITIALIZE).0,
        403
    );
    assert_eq!(
        post(
            port,
            &local,
            "\r\nOrigin: http://localhost.evil.com",
            INITIALIZE
        )
        .0,
        403
    );
    // Sessions: a session id from the server works; an unknown one is 404.
    let (_, answer) = post(port, &local, "", INITIALIZE);
    let session = answer
        .lines()
        .find_map(|line| {
            line.strip_prefix("mcp-session-id: ")
                .or_else(|| line.strip_prefix("Mcp-Session-Id: "))
        })
        .unwrap()
        .trim()
        .to_owned();
    assert!(session.len() >= 32, "session id {session:?} is short");
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let with_session = format!("\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18");
    assert_eq!(post(port, &local, &with_session, ping).0, 200);
    assert_eq!(
        post(
            port,
            &local,
            "\r\nMcp-Session-Id: 00000000000000000000000000000000",
            ping
        )
        .0,
        404
    );
    // Protocol robustness: each error keeps the session.
    let (code, body) = post(port, &local, &with_session, "{not json");
    assert_eq!(code, 400);
    assert!(body.contains("-32700"), "{body}");
    // `server/discover` is a 2026-07-28 request, whatever session it names: without its `_meta`
    // it is invalid (400, -32602, with its id).
    let (code, body) = post(
        port,
        &local,
        &with_session,
        r#"{"jsonrpc":"2.0","id":3,"method":"server/discover"}"#,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body.contains("-32602") && body.contains(r#""id":3"#),
        "{body}"
    );
    let (_, body) = post(
        port,
        &local,
        &with_session,
        r#"{"jsonrpc":"2.0","id":4,"method":"no/such/method"}"#,
    );
    assert!(body.contains("-32601"), "{body}");
    assert_eq!(post(port, &local, &with_session, ping).0, 200);
    // Bodies are capped.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":5,"method":"ping","params":{{"x":"{}"}}}}"#,
        "x".repeat(5 << 20)
    );
    assert_eq!(post(port, &local, &with_session, &huge).0, 413);
}

#[test]
fn a_bearer_token_is_required_off_loopback_and_checked() {
    let dir = TempDir::new("token");
    let token_file = dir.path().join("token");
    let extra = format!(
        "[server]\nauth-token-file = {:?}\n",
        token_file.display().to_string()
    );
    // Off loopback without a token file: refused at start, plainly.
    let refused = runbyte_tests::run(
        dir.path(),
        &["serve", "--listen", "http", "--bind", "0.0.0.0:0"],
    );
    assert_ne!(refused.code, Some(0));
    assert!(
        refused.stderr.contains("needs a bearer token"),
        "{}",
        refused.stderr
    );
    let served = Served::start("token-served", "http", &extra);
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let local = format!("127.0.0.1:{}", served.port);
    assert_eq!(post(served.port, &local, "", INITIALIZE).0, 401);
    assert_eq!(
        post(
            served.port,
            &local,
            "\r\nAuthorization: Bearer wrong-token",
            INITIALIZE
        )
        .0,
        401
    );
    assert_eq!(
        post(
            served.port,
            &local,
            &format!("\r\nAuthorization: Bearer {token}"),
            INITIALIZE
        )
        .0,
        200
    );
}

#[test]
fn a_port_in_use_is_reported_plainly() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = TempDir::new("port-in-use");
    dir.write("runbyte.toml", &config_with(""));
    let output = runbyte_tests::run(
        dir.path(),
        &[
            "serve",
            "--listen",
            "http",
            "--bind",
            &format!("127.0.0.1:{port}"),
        ],
    );
    assert_ne!(output.code, Some(0));
    assert!(
        output
            .stderr
            .contains(&format!("port {port} is already in use")),
        "{}",
        output.stderr
    );
}

#[test]
fn sse_sessions_take_only_their_own_posts() {
    let served = Served::start("sse-sessions", "sse", "");
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", served.port)).unwrap();
    use std::io::Write;
    write!(
        stream,
        "GET /sse HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAccept: text/event-stream\r\n\r\n",
        served.port
    )
    .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut endpoint = String::new();
    for line in (&mut reader).lines() {
        let line = line.unwrap();
        if let Some(data) = line.strip_prefix("data: ") {
            endpoint = data.to_owned();
            break;
        }
    }
    assert!(endpoint.starts_with("/message?sessionId="), "{endpoint}");
    let head = |path: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json",
            served.port
        )
    };
    assert_eq!(request(served.port, &head(&endpoint), INITIALIZE).0, 202);
    assert_eq!(
        request(
            served.port,
            &head("/message?sessionId=0123456789abcdef0123456789abcdef"),
            INITIALIZE
        )
        .0,
        404
    );
}
