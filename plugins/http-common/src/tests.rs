#![allow(clippy::unwrap_used)]

use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use hyper::{HeaderMap, header::HeaderValue};
use runbyte_plugin_api::transport::Received;
use serde_json::json;

use crate::{
    client, inbox, jsonrpc,
    limits::{Full, LimitOptions, ListenLimits, Occupancy},
    security::{Guard, Refusal, constant_time_eq, random_id},
    server,
    sse::{SseDecoder, encode_event},
};

fn events(decoder: &mut SseDecoder, chunks: &[&[u8]]) -> Vec<(String, String, Option<String>)> {
    let mut out = Vec::new();
    for chunk in chunks {
        for event in decoder.push(chunk).unwrap() {
            out.push((event.event, event.data, event.id));
        }
    }
    out
}

#[test]
fn sse_events_split_across_chunks_and_line_endings() {
    let mut decoder = SseDecoder::new(1024);
    let got = events(
        &mut decoder,
        &[
            b"event: endpoint\r",
            b"\ndata: /message?sessionId=1\r\n\r\n",
            b"data: {\"a\":",
            b"1}\n\n",
        ],
    );
    assert_eq!(
        got,
        vec![
            ("endpoint".into(), "/message?sessionId=1".into(), None),
            ("message".into(), "{\"a\":1}".into(), None),
        ]
    );
}

#[test]
fn sse_multi_line_data_comments_ids_and_retry() {
    let mut decoder = SseDecoder::new(1024);
    let got = events(
        &mut decoder,
        &[b": keepalive\n\nid: 7\nretry: 1500\ndata: a\ndata:b\n\r\r"],
    );
    assert_eq!(
        got,
        vec![("message".into(), "a\nb".into(), Some("7".into()))]
    );
    assert_eq!(decoder.last_event_id(), Some("7"));
    assert_eq!(decoder.retry_ms(), Some(1500));
    // A priming event: an id and empty data is dispatched with empty data.
    let got = events(&mut decoder, &[b"id: 8\ndata:\n\n"]);
    assert_eq!(
        got,
        vec![("message".into(), String::new(), Some("8".into()))]
    );
    // An event without data is not dispatched.
    assert!(events(&mut decoder, &[b"event: x\n\n"]).is_empty());
}

#[test]
fn sse_refuses_an_event_over_the_limit() {
    let mut decoder = SseDecoder::new(16);
    assert!(decoder.push(b"data: 0123456789abcdef0123\n").is_err());
    let mut decoder = SseDecoder::new(16);
    // A line that never ends is refused too, before it eats memory.
    assert!(decoder.push(&[b'x'; 200]).is_err());
}

#[test]
fn encoded_events_round_trip_through_the_decoder() {
    let text = "line one\nline two\r\nline three";
    let framed = encode_event(Some("message"), text);
    assert_eq!(
        framed,
        "event: message\ndata: line one\ndata: line two\ndata: line three\n\n"
    );
    let mut decoder = SseDecoder::new(1024);
    let got = decoder.push(framed.as_bytes()).unwrap();
    assert_eq!(got[0].data, "line one\nline two\nline three");
}

#[test]
fn jsonrpc_messages_are_classified() {
    use jsonrpc::{Kind, classify};
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(
        classify(&request).unwrap(),
        Kind::Request {
            id: json!(1),
            method: "ping".into()
        }
    );
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert!(matches!(
        classify(&note).unwrap(),
        Kind::Notification { .. }
    ));
    let response = json!({"jsonrpc": "2.0", "id": "a", "result": {}});
    assert_eq!(
        classify(&response).unwrap(),
        Kind::Response { id: json!("a") }
    );
    for bad in [
        json!(1),
        json!({"id": 1, "method": "x"}),
        json!({"jsonrpc": "2.0"}),
        json!({"jsonrpc": "2.0", "method": 3}),
    ] {
        assert!(classify(&bad).is_err(), "{bad}");
    }
    assert_ne!(jsonrpc::id_key(&json!(1)), jsonrpc::id_key(&json!("1")));
    let meta = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": {"progressToken": "t"}}});
    assert_eq!(jsonrpc::progress_token(&meta), Some(&json!("t")));
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.append(
            hyper::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(value).unwrap(),
        );
    }
    map
}

fn loopback() -> SocketAddr {
    "127.0.0.1:3000".parse().unwrap()
}

#[test]
fn hosts_loopback_names_pass_and_lookalikes_fail() {
    let guard = Guard::new(&[], &[], None, loopback()).unwrap();
    for host in [
        "localhost",
        "localhost:3000",
        "127.0.0.1:3000",
        "[::1]",
        "[::1]:3000",
        "LOCALHOST:1",
    ] {
        assert_eq!(guard.check(&headers(&[("host", host)])), Ok(()), "{host}");
    }
    for host in [
        "localhost.evil.com",
        "evil.com",
        "127.0.0.1.nip.io:3000",
        "localhost:x",
        "",
        "[::1]x",
    ] {
        assert!(
            matches!(
                guard.check(&headers(&[("host", host)])),
                Err(Refusal::Forbidden(_))
            ),
            "{host}"
        );
    }
    assert!(matches!(
        guard.check(&HeaderMap::new()),
        Err(Refusal::Forbidden(_))
    ));
}

#[test]
fn allowed_hosts_and_origins_extend_the_loopback_names() {
    let guard = Guard::new(
        &["mcp.example.com".into(), "box:8080".into()],
        &["https://app.example.org".into()],
        None,
        loopback(),
    )
    .unwrap();
    assert_eq!(
        guard.check(&headers(&[("host", "mcp.example.com:443")])),
        Ok(())
    );
    assert_eq!(guard.check(&headers(&[("host", "box:8080")])), Ok(()));
    assert!(guard.check(&headers(&[("host", "box:9090")])).is_err());
    let with_origin =
        |origin: &str| guard.check(&headers(&[("host", "localhost:3000"), ("origin", origin)]));
    assert_eq!(with_origin("http://localhost:3000"), Ok(()));
    assert_eq!(with_origin("https://app.example.org"), Ok(()));
    assert_eq!(with_origin("https://mcp.example.com"), Ok(()));
    for origin in [
        "http://evil.com",
        "null",
        "file://localhost",
        "https://app.example.org.evil.com",
        "http://localhost.evil.com",
    ] {
        assert!(
            matches!(with_origin(origin), Err(Refusal::Forbidden(_))),
            "{origin}"
        );
    }
    assert!(Guard::new(&["a/b".into()], &[], None, loopback()).is_err());
    assert!(Guard::new(&[], &["ftp://x".into()], None, loopback()).is_err());
}

#[test]
fn a_configured_token_is_required_on_every_request() {
    let guard = Guard::new(&[], &[], Some("s3cret".into()), loopback()).unwrap();
    let host = ("host", "localhost");
    assert!(matches!(
        guard.check(&headers(&[host])),
        Err(Refusal::Unauthorized(_))
    ));
    assert!(matches!(
        guard.check(&headers(&[host, ("authorization", "Bearer wrong")])),
        Err(Refusal::Unauthorized(_))
    ));
    assert!(matches!(
        guard.check(&headers(&[host, ("authorization", "Basic s3cret")])),
        Err(Refusal::Unauthorized(_))
    ));
    assert_eq!(
        guard.check(&headers(&[host, ("authorization", "Bearer s3cret")])),
        Ok(())
    );
    assert_eq!(
        guard.check(&headers(&[host, ("authorization", "bearer s3cret")])),
        Ok(())
    );
    assert!(constant_time_eq(b"abc", b"abc"));
    assert!(!constant_time_eq(b"abc", b"abd"));
    assert!(!constant_time_eq(b"abc", b"abcd"));
}

#[test]
fn session_ids_are_128_random_bits() {
    let a = random_id().unwrap();
    let b = random_id().unwrap();
    assert_eq!(a.len(), 32);
    assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_ne!(a, b);
}

#[test]
fn a_busy_port_is_reported_plainly() {
    let first = server::bind("127.0.0.1:0").unwrap();
    let address = first.local_addr().unwrap();
    let error = server::bind(&address.to_string()).unwrap_err();
    assert_eq!(
        error,
        format!("port {} is already in use ({address})", address.port())
    );
    assert!(
        server::bind("not an address")
            .unwrap_err()
            .contains("not an address")
    );
}

#[test]
fn the_inbox_delivers_in_order_then_closes_and_stays_closed() {
    let (sender, inbox) = inbox::inbox();
    assert_eq!(inbox.recv(Duration::from_millis(10)), Received::Timeout);
    sender.message("a".into());
    sender.close("gone");
    sender.close("second reason");
    assert_eq!(inbox.ended().as_deref(), Some("gone"));
    assert_eq!(
        inbox.recv(Duration::from_millis(10)),
        Received::Message("a".into())
    );
    assert_eq!(
        inbox.recv(Duration::from_millis(10)),
        Received::Closed("gone".into())
    );
    assert_eq!(
        inbox.recv(Duration::from_millis(10)),
        Received::Closed("gone".into())
    );
}

#[test]
fn closing_the_inbox_wakes_a_waiting_receiver() {
    let (sender, inbox) = inbox::inbox();
    let inbox = std::sync::Arc::new(inbox);
    let waiting = {
        let inbox = inbox.clone();
        std::thread::spawn(move || inbox.recv(Duration::from_secs(10)))
    };
    std::thread::sleep(Duration::from_millis(50));
    sender.message("dropped".into());
    inbox.close_now("closed by host");
    let got = waiting.join().unwrap();
    assert!(
        matches!(got, Received::Closed(_) | Received::Message(_)),
        "{got:?}"
    );
    assert_eq!(
        inbox.recv(Duration::from_millis(10)),
        Received::Closed("closed by host".into())
    );
}

#[test]
fn the_host_closing_an_ended_connection_keeps_why_it_ended() {
    let (sender, inbox) = inbox::inbox();
    sender.message("the failed answer".into());
    sender.close("HTTP 401 from http://h/mcp");
    // The host read the failed answer and closes before reading the end.
    assert_eq!(
        inbox.recv(Duration::from_millis(10)),
        Received::Message("the failed answer".into())
    );
    inbox.close_now("closed by host");
    assert_eq!(
        inbox.recv(Duration::from_millis(10)),
        Received::Closed("HTTP 401 from http://h/mcp".into())
    );
}

#[test]
fn targets_parse_with_defaults_and_ignore_host_keys() {
    let target = client::Target::parse(
        r#"{"name":"gh","url":"https://x/mcp","transport":"http","share":"global"}"#,
    )
    .unwrap();
    assert_eq!(target.max_message_bytes(), crate::DEFAULT_MAX_MESSAGE_BYTES);
    assert!(target.headers.is_empty());
    assert!(
        client::Target::parse(r#"{"name":"gh"}"#)
            .unwrap_err()
            .contains("url")
    );
    // What the host sends for a server with no headers and no fallback.
    let host_shaped = r#"{"name":"gh","command":null,"args":null,"env":null,"cwd":null,
        "url":"http://127.0.0.1:1/mcp","headers":null,"fallback":null}"#;
    let target = client::Target::parse(host_shaped).unwrap();
    assert!(target.headers.is_empty() && target.fallback.is_none());
    assert!(
        client::parse_url("ftp://x")
            .unwrap_err()
            .contains("http or https")
    );
    let bad = [("bad name".to_owned(), "v".to_owned())]
        .into_iter()
        .collect();
    assert!(client::header_map(&bad).unwrap_err().contains("bad name"));
}

#[test]
fn accept_headers_are_matched_by_media_type() {
    let map = headers(&[("accept", "application/json;q=0.9, text/event-stream")]);
    assert!(server::accepts(&map, "application/json"));
    assert!(server::accepts(&map, "text/event-stream"));
    assert!(!server::accepts(
        &headers(&[("accept", "application/json")]),
        "text/event-stream"
    ));
    assert!(server::accepts(
        &headers(&[("accept", "*/*")]),
        "text/event-stream"
    ));
    assert!(!server::accepts(&HeaderMap::new(), "text/event-stream"));
}

#[test]
fn a_non_loopback_bind_needs_a_token() {
    let base = ListenLimits::default();
    let error = server::prepare(r#"{"bind":"0.0.0.0:0"}"#, &base)
        .err()
        .unwrap();
    assert!(error.contains("needs an auth-token"), "{error}");
    let prepared = server::prepare(r#"{"bind":"0.0.0.0:0","auth-token":"t"}"#, &base).unwrap();
    assert!(prepared.address.ip().is_unspecified());
    assert!(server::prepare(r#"{"bind":"127.0.0.1:0"}"#, &base).is_ok());
    assert!(server::prepare(r#"{"bind":"127.0.0.1:0","max-body-bytes":0}"#, &base).is_err());
}

#[test]
fn limits_have_documented_defaults_and_options_override_the_transport_table() {
    let defaults = ListenLimits::default();
    assert_eq!(defaults.max_sessions, 1024);
    assert_eq!(defaults.max_sessions_per_peer, 128);
    assert_eq!(defaults.session_idle_timeout, Duration::from_secs(1800));
    assert_eq!(
        defaults.uninitialized_session_timeout,
        Duration::from_secs(30)
    );
    assert_eq!(defaults.max_connections, 1024);
    assert_eq!(defaults.max_connections_per_peer, 256);
    assert_eq!(defaults.header_timeout, Duration::from_secs(10));
    assert_eq!(defaults.body_timeout, Duration::from_secs(30));
    assert_eq!(defaults.max_body_bytes, 4 << 20);
    let table = LimitOptions::from_transport_table(
        r#"{"max-sessions": 10, "body-timeout-ms": 500}"#,
        "table",
    )
    .unwrap();
    let base = table.apply(&defaults).unwrap();
    assert_eq!(base.max_sessions, 10);
    assert_eq!(base.body_timeout, Duration::from_millis(500));
    let prepared = server::prepare(
        r#"{"bind":"127.0.0.1:0","max-sessions":20,"header-timeout-ms":250}"#,
        &base,
    )
    .unwrap();
    assert_eq!(prepared.limits.max_sessions, 20);
    assert_eq!(prepared.limits.header_timeout, Duration::from_millis(250));
    assert_eq!(prepared.limits.body_timeout, Duration::from_millis(500));
    let unknown = LimitOptions::from_transport_table(r#"{"max-session": 1}"#, "table")
        .err()
        .unwrap();
    assert!(unknown.contains("unknown key `max-session`"), "{unknown}");
    // Every key but the session id prefix (a string) is a count or a time: zero is refused.
    for key in LimitOptions::KEYS
        .into_iter()
        .filter(|key| *key != "session-id-prefix")
    {
        let zero = LimitOptions::from_transport_table(&format!(r#"{{"{key}": 0}}"#), "table")
            .unwrap()
            .apply(&defaults)
            .err()
            .unwrap();
        assert!(zero.contains(key), "{zero}");
    }
    let prefix = |text: &str| {
        LimitOptions::from_transport_table(&format!(r#"{{"session-id-prefix": "{text}"}}"#), "t")
            .unwrap()
            .apply(&defaults)
    };
    assert_eq!(prefix("r1.").unwrap().session_id_prefix, "r1.");
    assert!(prefix("r 1").unwrap_err().contains("session-id-prefix"));
    assert!(prefix(&"x".repeat(33)).is_err());
}

#[test]
fn occupancy_caps_each_peer_and_the_total() {
    let mut open = Occupancy::default();
    let (a, b): (IpAddr, IpAddr) = (
        "127.0.0.1".parse().unwrap(),
        "::ffff:10.0.0.2".parse().unwrap(),
    );
    assert_eq!(open.try_add(a, 2, 3), Ok(()));
    assert_eq!(open.try_add(a, 2, 3), Ok(()));
    assert_eq!(open.try_add(a, 2, 3), Err(Full::Peer(2)));
    assert_eq!(open.try_add(b, 2, 3), Ok(()));
    // An IPv4-mapped address counts as the IPv4 one.
    assert_eq!(open.try_add("10.0.0.2".parse().unwrap(), 5, 5), Ok(()));
    assert_eq!(open.try_add(b, 5, 4), Err(Full::Total(4)));
    open.remove(a);
    assert_eq!(open.total(), 3);
    assert_eq!(open.try_add(a, 2, 4), Ok(()));
}

#[test]
fn a_repeated_host_or_origin_is_a_bad_request() {
    let guard = Guard::new(&[], &[], None, loopback()).unwrap();
    let twice = headers(&[("host", "localhost"), ("host", "evil.com")]);
    assert!(matches!(guard.check(&twice), Err(Refusal::BadRequest(_))));
    let same_twice = headers(&[("host", "localhost"), ("host", "localhost")]);
    assert!(matches!(
        guard.check(&same_twice),
        Err(Refusal::BadRequest(_))
    ));
    let origins = headers(&[
        ("host", "localhost"),
        ("origin", "http://localhost"),
        ("origin", "http://evil.com"),
    ]);
    assert!(matches!(guard.check(&origins), Err(Refusal::BadRequest(_))));
}

#[test]
fn a_wildcard_host_allows_any_host_but_no_unnamed_origin() {
    let guard = Guard::new(
        &["*".into(), "mcp.example.com".into()],
        &["https://app.example.org".into()],
        None,
        loopback(),
    )
    .unwrap();
    assert_eq!(guard.check(&headers(&[("host", "anything.test")])), Ok(()));
    let with_origin =
        |origin: &str| guard.check(&headers(&[("host", "anything.test"), ("origin", origin)]));
    assert_eq!(with_origin("https://app.example.org"), Ok(()));
    assert_eq!(with_origin("https://mcp.example.com"), Ok(()));
    assert_eq!(with_origin("http://localhost:3000"), Ok(()));
    for origin in ["http://evil.com", "http://*", "https://anything.test"] {
        assert!(
            matches!(with_origin(origin), Err(Refusal::Forbidden(_))),
            "{origin}"
        );
        assert!(!guard.origin_allowed(origin), "{origin}");
    }
}

#[cfg(unix)]
/// Whether `fd` is readable now.
fn readable(fd: i32) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the call's duration.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready == 1 && poll.revents & libc::POLLIN != 0
}

#[cfg(unix)]
#[test]
fn an_inbox_descriptor_is_readable_exactly_while_recv_may_have_something() {
    let (sender, inbox) = inbox::inbox_with_fd();
    let fd = inbox.readable_fd().unwrap();
    assert!(!readable(fd));
    sender.message("one".into());
    sender.message("two".into());
    assert!(readable(fd));
    assert_eq!(inbox.recv(Duration::ZERO), Received::Message("one".into()));
    assert_eq!(inbox.recv(Duration::ZERO), Received::Message("two".into()));
    assert_eq!(inbox.recv(Duration::ZERO), Received::Timeout);
    assert!(!readable(fd), "drained, nothing left");
    sender.message("three".into());
    assert!(readable(fd), "a message after the drain wakes again");
    assert_eq!(
        inbox.recv(Duration::ZERO),
        Received::Message("three".into())
    );
    sender.close("bye");
    assert!(readable(fd));
    assert_eq!(inbox.recv(Duration::ZERO), Received::Closed("bye".into()));
    assert!(inbox::inbox().1.readable_fd().is_none());
}

/// Windows has no descriptor to give (the host reads such a pump from a thread): the inbox
/// works without one, and says so quietly.
#[cfg(windows)]
#[test]
fn on_windows_an_inbox_has_no_descriptor_and_still_delivers() {
    let (sender, inbox) = inbox::inbox_with_fd();
    assert!(inbox.readable_fd().is_none());
    sender.message("one".into());
    assert_eq!(inbox.recv(Duration::ZERO), Received::Message("one".into()));
    assert_eq!(inbox.recv(Duration::ZERO), Received::Timeout);
    sender.close("bye");
    assert_eq!(
        inbox.recv(Duration::from_secs(1)),
        Received::Closed("bye".into())
    );
}
