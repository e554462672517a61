//! `[telemetry]`: spans received by a real OTLP/HTTP receiver (the protobuf requests decoded) and
//! `/metrics` read by Prometheus's own OpenMetrics parser, for a `runbyte serve --listen http`
//! that a client sends an execution with a `traceparent` in `_meta`.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    process::Command,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use opentelemetry_proto::tonic::{
    collector::trace::v1::ExportTraceServiceRequest,
    common::v1::{AnyValue, KeyValue, any_value},
    trace::v1::Span,
};
use prost::Message;
use runbyte_tests::{Served, TempDir, config_of, test_dep, test_server_table};
use serde_json::{Value, json};

/// The client's trace: the execution must join it.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

/// A received span with the service that sent it.
struct Received {
    service: String,
    span: Span,
}

/// An OTLP/HTTP receiver on loopback: it decodes every `POST /v1/traces` and keeps the spans.
struct Receiver {
    port: u16,
    spans: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let kept = spans.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { break };
                let kept = kept.clone();
                std::thread::spawn(move || serve_otlp(stream, &kept));
            }
        });
        Receiver { port, spans }
    }

    /// Waits (at most 20 s) until `enough` says the spans received so far are enough.
    fn wait_for(
        &self,
        enough: impl Fn(&[Received]) -> bool,
    ) -> std::sync::MutexGuard<'_, Vec<Received>> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let spans = self.spans.lock().unwrap();
            if enough(&spans) {
                return spans;
            }
            assert!(
                Instant::now() < deadline,
                "the receiver has {} span(s): {:?}",
                spans.len(),
                spans.iter().map(|r| &r.span.name).collect::<Vec<_>>()
            );
            drop(spans);
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// One keep-alive connection of the exporter: requests until it closes.
fn serve_otlp(stream: TcpStream, spans: &Mutex<Vec<Received>>) {
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        let mut content_type = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap(),
                "content-type" => content_type = value.trim().to_owned(),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        assert!(
            request_line.starts_with("POST /v1/traces "),
            "{request_line}"
        );
        assert_eq!(content_type, "application/x-protobuf");
        let request = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let mut kept = spans.lock().unwrap();
        for resource in request.resource_spans {
            let service = resource
                .resource
                .as_ref()
                .and_then(|r| text_attribute(&r.attributes, "service.name"))
                .unwrap_or_default();
            for scope in resource.scope_spans {
                for span in scope.spans {
                    kept.push(Received {
                        service: service.clone(),
                        span,
                    });
                }
            }
        }
        drop(kept);
        writer
            .write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n",
            )
            .unwrap();
    }
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|value: &AnyValue| value.value.as_ref())
}

fn text_attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    match attribute(attributes, key) {
        Some(any_value::Value::StringValue(text)) => Some(text.clone()),
        _ => None,
    }
}

fn int_attribute(attributes: &[KeyValue], key: &str) -> Option<i64> {
    match attribute(attributes, key) {
        Some(any_value::Value::IntValue(n)) => Some(*n),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One HTTP/1.1 request; the status, the head and the body.
fn http(port: u16, head: &str, body: &str) -> (u16, String, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let message = format!(
        "{head}\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(message.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (status, head.to_owned(), body.to_owned())
}

/// The `Authorization` header line for `token` (none without one).
fn bearer(token: Option<&str>) -> String {
    token
        .map(|token| format!("\r\nAuthorization: Bearer {token}"))
        .unwrap_or_default()
}

/// A 2026-07-28 `execute_code` of `code` carrying the client's trace context; the result text.
fn execute(port: u16, token: Option<&str>, code: &str) -> String {
    call(port, token, "execute_code", json!({"code": code}))
}

/// A 2026-07-28 `tools/call` carrying the client's trace context; the result's text.
fn call(port: u16, token: Option<&str>, tool: &str, arguments: Value) -> String {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "traceparent": format!("00-{TRACE_ID}-{CLIENT_SPAN}-01"),
            },
        },
    });
    let head = format!(
        "POST /mcp HTTP/1.1{}\r\nContent-Type: application/json\r\nAccept: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}",
        bearer(token)
    );
    let (status, _, body) = http(port, &head, &body.to_string());
    assert_eq!(status, 200, "{body}");
    let answer: Value = serde_json::from_str(&body).unwrap();
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no result text: {answer}"))
        .to_owned()
}

/// The metrics as Python's `prometheus_client` OpenMetrics parser reads them: one
/// `[name, labels, value]` per sample. `None` when the Python peer is not installed.
fn parse_metrics(text: &str) -> Option<Vec<(String, Value, f64)>> {
    let python = test_dep("venv/bin/python")?;
    let script = "import json, sys\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
        samples = [[s.name, s.labels, s.value] for family in \
        text_string_to_metric_families(sys.stdin.read()) for s in family.samples]\n\
        print(json.dumps(samples))\n";
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "the OpenMetrics parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&output.stderr)
    );
    let samples: Vec<(String, Value, f64)> = serde_json::from_slice(&output.stdout).unwrap();
    Some(samples)
}

/// The value of the sample `name` whose labels include `labels` (0 when there is none).
fn sample(samples: &[(String, Value, f64)], name: &str, labels: &Value) -> f64 {
    samples
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && labels
                    .as_object()
                    .unwrap()
                    .iter()
                    .all(|(k, v)| l.get(k) == Some(v))
        })
        .map(|(_, _, value)| value)
        .sum()
}

const PROGRAM: &str = "import { echo, meta, fail } from './servers/t';\n\
    const said = await echo({ message: 'hi' });\n\
    const seen = await meta({});\n\
    let refused = false;\n\
    try { await fail({ message: 'no' }); } catch { refused = true; }\n\
    export default { said, seen, refused };";

#[test]
fn an_execution_is_a_trace_with_a_span_per_tool_call_and_metrics_count_it() {
    let receiver = Receiver::start();
    let dir = TempDir::new("telemetry");
    let token_file = dir.path().join("token");
    let config = format!(
        "{}\n[server]\nauth-token-file = {:?}\n\n[sandbox.limits]\ntimeout-ms = 3000\n\n[telemetry]\notlp-endpoint = \"http://127.0.0.1:{}\"\nservice-name = \"runbyte-e2e\"\nmetrics = true\n",
        config_of(&[test_server_table("t", &[], "expose = \"both\"")]),
        token_file.display().to_string(),
        receiver.port
    );
    // Batches every 100 ms rather than every 5 s: the test waits for them.
    let served = Served::with_env(
        "telemetry-served",
        "http",
        &config,
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();

    let text = execute(served.port, Some(&token), PROGRAM);
    let result: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(result["said"], "hi", "{text}");
    assert_eq!(result["refused"], true, "{text}");

    // One trace: the client's. The execution's span is the child of the client's span; each
    // tool call's is the execution's child.
    let spans = receiver.wait_for(|spans| spans.len() >= 4);
    assert!(spans.iter().all(|r| r.service == "runbyte-e2e"));
    assert!(
        spans.iter().all(|r| hex(&r.span.trace_id) == TRACE_ID),
        "every span is in the client's trace"
    );
    let executions: Vec<&Span> = spans
        .iter()
        .map(|r| &r.span)
        .filter(|s| s.name == "execute_code")
        .collect();
    assert_eq!(executions.len(), 1);
    let execution = executions[0];
    assert_eq!(hex(&execution.parent_span_id), CLIENT_SPAN);
    assert_eq!(
        text_attribute(&execution.attributes, "runbyte.outcome").as_deref(),
        Some("ok")
    );
    assert_eq!(
        int_attribute(&execution.attributes, "runbyte.tool_calls"),
        Some(3)
    );
    let calls: Vec<&Span> = spans
        .iter()
        .map(|r| &r.span)
        .filter(|s| s.name == "tools/call")
        .collect();
    assert_eq!(calls.len(), 3);
    let mut seen = Vec::new();
    for call in &calls {
        assert_eq!(call.parent_span_id, execution.span_id);
        assert_eq!(
            text_attribute(&call.attributes, "runbyte.server").as_deref(),
            Some("t")
        );
        seen.push((
            text_attribute(&call.attributes, "runbyte.tool").unwrap(),
            text_attribute(&call.attributes, "runbyte.outcome").unwrap(),
        ));
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            ("echo".to_owned(), "ok".to_owned()),
            ("fail".to_owned(), "tool_error".to_owned()),
            ("meta".to_owned(), "ok".to_owned()),
        ]
    );

    // The downstream server got the `meta` call's own span as its parent.
    let meta_span = calls
        .iter()
        .find(|s| text_attribute(&s.attributes, "runbyte.tool").as_deref() == Some("meta"))
        .unwrap();
    assert_eq!(
        result["seen"]["traceparent"],
        format!("00-{TRACE_ID}-{}-01", hex(&meta_span.span_id)),
        "{text}"
    );
    drop(spans);

    // `/metrics`: the token is required, as for MCP requests.
    let (status, _, _) = http(served.port, "GET /metrics HTTP/1.1", "");
    assert_eq!(status, 401);
    let (status, head, body) = http(
        served.port,
        &format!("GET /metrics HTTP/1.1\r\nAuthorization: Bearer {token}"),
        "",
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    let Some(samples) = parse_metrics(&body) else {
        return;
    };
    assert_eq!(
        sample(
            &samples,
            "runbyte_executions_total",
            &json!({"outcome": "ok"})
        ),
        1.0,
        "{body}"
    );
    assert_eq!(
        sample(
            &samples,
            "runbyte_execution_duration_seconds_count",
            &json!({})
        ),
        1.0
    );
    for (tool, outcome) in [("echo", "ok"), ("meta", "ok"), ("fail", "tool_error")] {
        assert_eq!(
            sample(
                &samples,
                "runbyte_tool_calls_total",
                &json!({"server": "t", "tool": tool, "outcome": outcome})
            ),
            1.0,
            "{tool}: {body}"
        );
    }
    assert_eq!(
        sample(
            &samples,
            "runbyte_downstream_server_up",
            &json!({"server": "t", "state": "ready"})
        ),
        1.0,
        "{body}"
    );

    // A limit: the execution's time runs out.
    let text = execute(
        served.port,
        Some(&token),
        "const end = Date.now() + 60000; while (Date.now() < end) {}",
    );
    assert!(text.starts_with("Timeout"), "{text}");
    let (_, _, body) = http(
        served.port,
        &format!("GET /metrics HTTP/1.1\r\nAuthorization: Bearer {token}"),
        "",
    );
    let samples = parse_metrics(&body).unwrap();
    assert_eq!(
        sample(
            &samples,
            "runbyte_limit_hits_total",
            &json!({"limit": "timeout"})
        ),
        1.0,
        "{body}"
    );
    assert_eq!(
        sample(
            &samples,
            "runbyte_executions_total",
            &json!({"outcome": "timeout"})
        ),
        1.0,
        "{body}"
    );

    // A direct call (`expose = "both"`): one `tools/call` span, the client's span's child, whose
    // context the server receives.
    let seen: Value =
        serde_json::from_str(&call(served.port, Some(&token), "t_meta", json!({}))).unwrap();
    let spans = receiver.wait_for(|spans| {
        spans
            .iter()
            .any(|r| r.span.name == "tools/call" && hex(&r.span.parent_span_id) == CLIENT_SPAN)
    });
    let direct = spans
        .iter()
        .map(|r| &r.span)
        .find(|s| s.name == "tools/call" && hex(&s.parent_span_id) == CLIENT_SPAN)
        .unwrap();
    assert_eq!(hex(&direct.trace_id), TRACE_ID);
    assert_eq!(
        text_attribute(&direct.attributes, "runbyte.tool").as_deref(),
        Some("meta")
    );
    assert_eq!(
        seen["traceparent"],
        format!("00-{TRACE_ID}-{}-01", hex(&direct.span_id))
    );
}

/// Made-up tool names (a program may call any) take no label slot: after 1,100 of them, a tool
/// the server lists is still counted by its name (before, they filled all 1,000 slots and every
/// real tool showed as `_other`).
#[test]
fn made_up_tool_names_leave_the_metric_labels_to_listed_tools() {
    let dir = TempDir::new("telemetry-labels");
    let token_file = dir.path().join("token");
    let config = format!(
        "{}\n[server]\nauth-token-file = {:?}\n\n[sandbox.limits]\nmax-tool-calls = 2000\n\n[telemetry]\nmetrics = true\n",
        config_of(&[test_server_table("t", &[], "")]),
        token_file.display().to_string(),
    );
    let served = Served::with_config("telemetry-labels", "http", &config);
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    let text = execute(
        served.port,
        Some(&token),
        "import { callTool } from 'runbyte:bridge';\n\
         let refused = 0;\n\
         for (let n = 0; n < 1100; n++) {\n\
           try { await callTool('t', `made_up_${n}`, {}); } catch { refused++; }\n\
         }\n\
         const echoed = await callTool('t', 'echo', { message: 'real' });\n\
         export default { refused, echoed };",
    );
    assert!(text.contains("1100") && text.contains("real"), "{text}");
    let (_, _, body) = http(
        served.port,
        &format!("GET /metrics HTTP/1.1\r\nAuthorization: Bearer {token}"),
        "",
    );
    let samples = parse_metrics(&body).unwrap();
    assert_eq!(
        sample(
            &samples,
            "runbyte_tool_calls_total",
            &json!({"server": "t", "tool": "echo", "outcome": "ok"})
        ),
        1.0,
        "{body}"
    );
    assert_eq!(
        sample(
            &samples,
            "runbyte_tool_calls_total",
            &json!({"server": "t", "tool": "_unknown", "outcome": "failed"})
        ),
        1100.0,
        "{body}"
    );
    assert!(!body.contains("made_up_"), "{body}");
}

#[test]
fn metrics_are_a_404_while_off_and_an_unreachable_collector_fails_nothing() {
    // A port nobody listens on.
    let port = runbyte_tests::free_port();
    // `runbyte exec` flushes its spans as it ends: the collector's absence is one WARN line, and
    // the program's result is as it would be without telemetry.
    let dir = TempDir::new("telemetry-exec");
    dir.write(
        "runbyte.toml",
        &format!(
            "{}\n[telemetry]\notlp-endpoint = \"http://127.0.0.1:{port}\"\n",
            config_of(&[])
        ),
    );
    dir.write("program.ts", "export default 6 * 7;");
    let ran = runbyte_tests::run(dir.path(), &["exec", "program.ts"]);
    assert_eq!(ran.code, Some(0), "{}", ran.stderr);
    assert!(ran.stdout.starts_with("42\n"), "{}", ran.stdout);
    assert_eq!(
        ran.stderr
            .matches("the trace collector did not take spans")
            .count(),
        1,
        "{}",
        ran.stderr
    );

    let config = format!(
        "{}\n[telemetry]\notlp-endpoint = \"http://127.0.0.1:{port}\"\n",
        config_of(&[test_server_table("t", &[], "")]),
    );
    let served = Served::with_env(
        "telemetry-off",
        "http",
        &config,
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    );
    let text = execute(
        served.port,
        None,
        "import { echo } from './servers/t';\nexport default await echo({ message: 'still here' });",
    );
    assert!(text.starts_with("\"still here\""), "{text}");
    let (status, _, body) = http(served.port, "GET /metrics HTTP/1.1", "");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("metrics = true"), "{body}");
}

#[test]
fn spans_still_queued_when_serve_stops_are_exported_before_it_exits() {
    let receiver = Receiver::start();
    let config = format!(
        "{}\n[telemetry]\notlp-endpoint = \"http://127.0.0.1:{}\"\n",
        config_of(&[test_server_table("t", &[], "")]),
        receiver.port
    );
    // The SDK's own batching (every 5 s): the spans are still queued when SIGTERM comes.
    let served = Served::with_config("telemetry-flush", "http", &config);
    let text = execute(
        served.port,
        None,
        "import { echo } from './servers/t';\nexport default await echo({ message: 'hi' });",
    );
    assert!(text.starts_with("\"hi\""), "{text}");
    assert!(served.stop().success());
    let spans = receiver.spans.lock().unwrap();
    let names: Vec<&str> = spans.iter().map(|r| r.span.name.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(
        names.contains(&"execute_code") && names.contains(&"tools/call"),
        "{names:?}"
    );
    assert!(spans.iter().all(|r| r.service == "runbyte"));
}

#[test]
fn a_legacy_session_id_is_neither_logged_nor_exported() {
    // Without a bearer token, a legacy HTTP session's id is its only credential: INFO logs and
    // trace spans show a short digest of it, never the id.
    let receiver = Receiver::start();
    let dir = TempDir::new("telemetry-session");
    let config = format!(
        "{}\n[telemetry]\notlp-endpoint = \"http://127.0.0.1:{}\"\n",
        config_of(&[test_server_table("t", &[], "")]),
        receiver.port
    );
    dir.write("runbyte.toml", &config);
    let port = runbyte_tests::free_port();
    let log = std::fs::File::create(dir.path().join("stderr.log")).unwrap();
    let mut child = Command::new(runbyte_tests::runbyte())
        .args([
            "serve",
            "--listen",
            "http",
            "--bind",
            &format!("127.0.0.1:{port}"),
        ])
        .current_dir(dir.path())
        .env("RUNBYTE_LOG", "info")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "runbyte did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let post = "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream";
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "e2e", "version": "1"}}});
    let (status, head, body) = http(port, post, &initialize.to_string());
    assert_eq!(status, 200, "{head}\n{body}");
    let session = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id: {head}"));
    assert!(session.len() >= 32, "{session}");
    let with_session =
        format!("{post}\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = http(port, &with_session, &initialized.to_string());
    assert!(status == 202 || status == 200, "{status}");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "execute_code",
        "arguments": {"code": "import { echo } from './servers/t';\nexport default await echo({ message: 'hi' });"}}});
    let (status, _, body) = http(port, &with_session, &call.to_string());
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("hi"), "{body}");
    let spans = receiver.wait_for(|spans| spans.iter().any(|r| r.span.name == "execute_code"));
    let execution = spans
        .iter()
        .find(|r| r.span.name == "execute_code")
        .unwrap();
    let exported = text_attribute(&execution.span.attributes, "runbyte.session").unwrap();
    drop(spans);
    let (status, _, _) = http(
        port,
        &format!(
            "DELETE /mcp HTTP/1.1\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-11-25"
        ),
        "",
    );
    assert_eq!(status, 200);
    std::thread::sleep(Duration::from_millis(300));
    let _ = child.kill();
    let _ = child.wait();
    let logged = std::fs::read_to_string(dir.path().join("stderr.log")).unwrap();
    assert!(
        !logged.contains(&session) && !exported.contains(&session),
        "the session id is in the log or the span:\n{logged}\n{exported}"
    );
    assert!(
        exported.starts_with("session#") && exported.len() == "session#".len() + 12,
        "{exported}"
    );
    // The log and the span name the session by the same tag, on every line about it.
    assert!(
        logged.matches(&exported).count() >= 3,
        "{exported} is not in the log:\n{logged}"
    );
}
