#![allow(clippy::unwrap_used)]

use std::{
    io::{BufRead, BufReader, Cursor, Read, Write},
    net::{TcpListener, TcpStream},
    time::{Duration, Instant},
};

use runbyte_plugin_api::transport::{Accepted, Listener, Pump, Received, Transport};
use serde_json::{Value, json};

use crate::{
    Tcp,
    connect::parse_url,
    lines::{Line, read_line},
};

const TOKEN: &str = "0123456789abcdef-token";

fn tcp(config: Value) -> Tcp {
    Tcp::open(&config.to_string()).unwrap()
}

fn listen(transport: &Tcp, options: Value) -> Box<dyn Listener> {
    transport.listen(&options.to_string()).unwrap()
}

fn loopback() -> Value {
    json!({"bind": "127.0.0.1:0", "auth-token": null})
}

/// The next event that is not a timeout, within five seconds.
fn next(pump: &dyn Pump) -> Received {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        match pump.recv(Duration::from_millis(100)) {
            Received::Timeout => continue,
            other => return other,
        }
    }
    Received::Timeout
}

fn accept(listener: &dyn Listener) -> Accepted {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Some(accepted) = listener.accept(Duration::from_millis(100)).unwrap() {
            return accepted;
        }
    }
    panic!("no session within 5 s");
}

fn closed_reason(pump: &dyn Pump) -> String {
    match next(pump) {
        Received::Closed(reason) => reason,
        other => panic!("expected Closed, got {other:?}"),
    }
}

fn connect(transport: &Tcp, name: &str, address: &str) -> Result<Box<dyn Pump>, String> {
    // The host passes the whole server table; the keys tcp does not use must not bother it.
    let target = json!({
        "name": name, "url": format!("tcp://{address}"), "command": null, "args": [],
        "env": {}, "cwd": null, "headers": {}, "fallback": null,
    });
    transport.connect(&target.to_string())
}

/// A plain TCP client, as a third-party MCP client would be.
struct Raw {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Raw {
    fn connect(address: &str) -> Raw {
        let stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        Raw {
            reader: BufReader::new(stream.try_clone().unwrap()),
            writer: stream,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.writer.write_all(bytes).unwrap();
    }

    /// The next line, or `None` at the end of the connection.
    fn line(&mut self) -> Option<String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => None,
            Ok(_) => Some(line.trim_end().to_owned()),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("read failed: {e}"),
        }
    }

    fn error_message(&mut self) -> String {
        let line = self.line().expect("an error line");
        let value: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(value["id"], Value::Null, "{line}");
        value["error"]["message"].as_str().unwrap().to_owned()
    }
}

#[test]
fn lines_are_capped_split_and_cut_short_lines_are_told_apart() {
    let mut input = Cursor::new(b"short\r\nthis one is too long\n\nok\npart".to_vec());
    assert!(matches!(read_line(&mut input, 10), Line::Text(t) if t == "short"));
    assert!(matches!(read_line(&mut input, 10), Line::TooLong(20)));
    assert!(matches!(read_line(&mut input, 10), Line::Text(t) if t.is_empty()));
    assert!(matches!(read_line(&mut input, 10), Line::Text(t) if t == "ok"));
    assert!(matches!(read_line(&mut input, 10), Line::Partial(4)));
    assert!(matches!(read_line(&mut input, 10), Line::Eof));
}

#[test]
fn urls_must_be_tcp_host_and_port() {
    assert_eq!(parse_url("tcp://127.0.0.1:7000").unwrap()[0].port(), 7000);
    assert_eq!(parse_url("tcp://127.0.0.1:7000/").unwrap()[0].port(), 7000);
    assert!(parse_url("tcp://[::1]:7000").unwrap()[0].is_ipv6());
    assert!(parse_url("tcp://localhost:7000").is_ok());
    for bad in [
        "http://127.0.0.1:7000",
        "tcp://127.0.0.1",
        "tcp://:7000",
        "tcp://127.0.0.1:99999",
        "tcp://127.0.0.1:7000/path",
        "tcp://user@127.0.0.1:7000",
        "tcp://",
    ] {
        let error = parse_url(bad).unwrap_err();
        assert!(error.contains(bad), "{error}");
    }
}

#[test]
fn the_configuration_is_checked_strictly() {
    let error = Tcp::open(r#"{"max-line": 5}"#).unwrap_err();
    assert!(
        error.contains("[transports.tcp]") && error.contains("unknown field `max-line`"),
        "{error}"
    );
    let error = Tcp::open(r#"{"max-connections": 0}"#).unwrap_err();
    assert!(error.contains("`max-connections = 0`"), "{error}");
    let error = Tcp::open(r#"{"auth-tokens": {"gh": ""}}"#).unwrap_err();
    assert!(error.contains("`auth-tokens.gh` is empty"), "{error}");
    // `runbyte check` opens every plugin with an empty table.
    assert!(Tcp::open("{}").is_ok());
}

#[test]
fn connector_and_listener_round_trip_on_loopback() {
    let transport = tcp(json!({}));
    let listener = listen(&transport, loopback());
    let address = listener.address();
    assert!(
        address.starts_with("127.0.0.1:") && !address.ends_with(":0"),
        "{address}"
    );

    let client = connect(&transport, "loop", &address).unwrap();
    let session = accept(listener.as_ref());
    assert!(session.peer.starts_with("127.0.0.1:"), "{}", session.peer);
    assert!(session.session.starts_with("tcp-"), "{}", session.session);

    let request = r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"text":"a\nb é"}}"#;
    client.send(request).unwrap();
    assert_eq!(
        next(session.pump.as_ref()),
        Received::Message(request.into())
    );
    session
        .pump
        .send(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
        .unwrap();
    assert_eq!(
        next(client.as_ref()),
        Received::Message(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into())
    );
    // A message with raw line breaks (pretty-printed JSON) still arrives as one line.
    session
        .pump
        .send("{\n  \"jsonrpc\": \"2.0\",\r\n  \"method\": \"x\"\n}")
        .unwrap();
    let Received::Message(message) = next(client.as_ref()) else {
        panic!()
    };
    assert_eq!(
        serde_json::from_str::<Value>(&message).unwrap()["method"],
        "x"
    );

    // The host closes the session: the connector learns why, and stays closed.
    session.pump.close();
    let reason = closed_reason(client.as_ref());
    assert!(
        reason.contains("server `loop`") && reason.contains("closed the connection"),
        "{reason}"
    );
    assert!(matches!(
        client.recv(Duration::from_millis(1)),
        Received::Closed(_)
    ));
    assert!(client.send("{}").unwrap_err().contains("is closed"));
    assert_eq!(closed_reason(session.pump.as_ref()), "closed");
    listener.close();
}

#[test]
fn the_connector_names_what_failed() {
    let transport = tcp(json!({"connect-timeout-ms": 2000}));
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let error = connect(&transport, "gone", &port.to_string())
        .err()
        .unwrap();
    assert!(
        error.contains("server `gone`: cannot connect to tcp://"),
        "{error}"
    );
    let error = transport
        .connect(r#"{"name": "x", "command": "srv"}"#)
        .err()
        .unwrap();
    assert!(
        error.contains("needs `url = \"tcp://host:port\"`"),
        "{error}"
    );
    let error = transport
        .connect(r#"{"name": "x", "url": "https://a.example"}"#)
        .err()
        .unwrap();
    assert!(
        error.contains("server `x`: `https://a.example` is not a tcp://host:port URL"),
        "{error}"
    );
}

#[test]
fn the_connector_drops_oversized_lines_and_reports_a_peer_that_hangs_up() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = server.local_addr().unwrap().to_string();
    let transport = tcp(json!({"max-line-bytes": 100}));
    let client = connect(&transport, "small", &address).unwrap();
    let (mut peer, _) = server.accept().unwrap();
    peer.write_all(&[b'x'; 1000]).unwrap();
    peer.write_all(b"\n{\"ok\":1}\n").unwrap();
    peer.write_all(
        b"{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-1,\"message\":\"bye\"}}\n",
    )
    .unwrap();
    drop(peer);
    assert_eq!(
        next(client.as_ref()),
        Received::Message(r#"{"ok":1}"#.into())
    );
    assert!(matches!(next(client.as_ref()), Received::Message(_)));
    let reason = closed_reason(client.as_ref());
    assert!(
        reason.ends_with("closed the connection after: bye"),
        "{reason}"
    );
}

#[test]
fn a_token_lets_the_right_client_in_and_keeps_the_auth_line_from_the_host() {
    let transport = tcp(json!({"auth-tokens": {"secure": TOKEN}}));
    let listener = listen(
        &transport,
        json!({"bind": "127.0.0.1:0", "auth-token": TOKEN}),
    );
    let client = connect(&transport, "secure", &listener.address()).unwrap();
    let session = accept(listener.as_ref());
    client
        .send(r#"{"jsonrpc":"2.0","method":"first"}"#)
        .unwrap();
    assert_eq!(
        next(session.pump.as_ref()),
        Received::Message(r#"{"jsonrpc":"2.0","method":"first"}"#.into())
    );

    // A raw client that sends its auth line and a request in one packet.
    let mut raw = Raw::connect(&listener.address());
    raw.send(format!("{{\"auth\": \"{TOKEN}\"}}\n{{\"id\":7}}\n").as_bytes());
    let session = accept(listener.as_ref());
    assert_eq!(
        next(session.pump.as_ref()),
        Received::Message(r#"{"id":7}"#.into())
    );
    listener.close();
}

#[test]
fn a_wrong_or_missing_token_is_refused_with_an_error_line() {
    let transport = tcp(
        json!({"auth-tokens": {"wrong": "not-the-token", "other": TOKEN}, "auth-timeout-ms": 300}),
    );
    let listener = listen(
        &transport,
        json!({"bind": "127.0.0.1:0", "auth-token": TOKEN}),
    );
    let address = listener.address();

    // Through the connector: the refusal becomes the close reason.
    let client = connect(&transport, "wrong", &address).unwrap();
    let Received::Message(line) = next(client.as_ref()) else {
        panic!()
    };
    assert!(line.contains("-32001"), "{line}");
    let reason = closed_reason(client.as_ref());
    assert!(
        reason.ends_with("after: unauthorized: wrong token"),
        "{reason}"
    );

    // A client that starts talking MCP without authenticating.
    let mut raw = Raw::connect(&address);
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n");
    let message = raw.error_message();
    assert!(
        message.contains(r#"the first line must be {"auth": "<token>"}"#),
        "{message}"
    );
    assert_eq!(raw.line(), None);

    // A client that says nothing.
    let mut raw = Raw::connect(&address);
    assert_eq!(
        raw.error_message(),
        "unauthorized: no auth line within 300 ms"
    );
    assert_eq!(raw.line(), None);

    // No refused client ever reached the host.
    assert!(
        listener
            .accept(Duration::from_millis(200))
            .unwrap()
            .is_none()
    );
    listener.close();
}

#[test]
fn a_public_bind_needs_a_token() {
    let transport = tcp(json!({}));
    let error = transport
        .listen(&json!({"bind": "0.0.0.0:0", "auth-token": null}).to_string())
        .err()
        .unwrap();
    assert!(error.contains("not a loopback address"), "{error}");
    let listener = listen(
        &transport,
        json!({"bind": "0.0.0.0:0", "auth-token": TOKEN}),
    );
    listener.close();
    let error = transport.listen(r#"{"auth-token": null}"#).err().unwrap();
    assert!(error.contains("needs a `bind` address"), "{error}");
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = busy.local_addr().unwrap().to_string();
    let error = transport
        .listen(&json!({"bind": address}).to_string())
        .err()
        .unwrap();
    assert!(
        error.contains(&format!("cannot listen on {address}")),
        "{error}"
    );
}

#[test]
fn long_lines_garbage_and_cut_lines_from_clients() {
    let transport = tcp(json!({}));
    let listener = listen(
        &transport,
        json!({"bind": "127.0.0.1:0", "max-body-bytes": 1024}),
    );
    let mut raw = Raw::connect(&listener.address());
    let session = accept(listener.as_ref());

    // A line over the cap is answered and skipped; the session goes on.
    let mut long = vec![b'a'; 5000];
    long.push(b'\n');
    raw.send(&long);
    let message = raw.error_message();
    assert!(
        message.contains("5000 bytes is over the 1024-byte cap"),
        "{message}"
    );
    // Garbage and invalid UTF-8 pass through for the host to answer.
    raw.send(b"not json\n\n\xff\xfe\n");
    assert_eq!(
        next(session.pump.as_ref()),
        Received::Message("not json".into())
    );
    assert_eq!(
        next(session.pump.as_ref()),
        Received::Message("\u{fffd}\u{fffd}".into())
    );
    // A disconnect in the middle of a line: the fragment is dropped, the close reported.
    raw.send(b"{\"jsonrpc\":\"2.0\",\"id\":");
    drop(raw);
    let reason = closed_reason(session.pump.as_ref());
    assert!(
        reason.starts_with("client 127.0.0.1:") && reason.ends_with("disconnected"),
        "{reason}"
    );
    listener.close();
}

#[test]
fn many_clients_get_their_own_sessions() {
    let transport = tcp(json!({}));
    let listener = listen(&transport, loopback());
    let clients: Vec<Raw> = (0..40)
        .map(|n| {
            let mut raw = Raw::connect(&listener.address());
            raw.send(format!("{{\"client\":{n}}}\n").as_bytes());
            raw
        })
        .collect();
    let mut sessions: Vec<Accepted> = (0..40).map(|_| accept(listener.as_ref())).collect();
    let mut ids: Vec<String> = sessions.iter().map(|s| s.session.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 40);
    // Answer each session with what it sent; each client gets its own line back.
    for session in &mut sessions {
        let Received::Message(line) = next(session.pump.as_ref()) else {
            panic!()
        };
        session.pump.send(&line).unwrap();
    }
    for (n, mut raw) in clients.into_iter().enumerate() {
        assert_eq!(raw.line().unwrap(), format!("{{\"client\":{n}}}"));
    }
    listener.close();
}

#[test]
fn over_the_connection_limit_clients_are_refused() {
    let transport = tcp(json!({"max-connections": 2}));
    let listener = listen(&transport, loopback());
    let address = listener.address();
    let _first = Raw::connect(&address);
    let _second = Raw::connect(&address);
    let a = accept(listener.as_ref());
    let _b = accept(listener.as_ref());
    let mut third = Raw::connect(&address);
    assert_eq!(
        third.error_message(),
        "too many connections (the limit is 2)"
    );
    // A session that ends frees its place.
    a.pump.close();
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut fourth = Raw::connect(&address);
        fourth.send(b"{}\n");
        if listener
            .accept(Duration::from_millis(200))
            .unwrap()
            .is_some()
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the closed session's place was never freed"
        );
    }
    listener.close();
}

#[test]
fn closing_the_listener_ends_every_connection() {
    let transport = tcp(json!({"auth-timeout-ms": 60000}));
    let listener = listen(
        &transport,
        json!({"bind": "127.0.0.1:0", "auth-token": TOKEN}),
    );
    let address = listener.address();
    let mut authed = Raw::connect(&address);
    authed.send(format!("{{\"auth\":\"{TOKEN}\"}}\n").as_bytes());
    let session = accept(listener.as_ref());
    // One still authenticating, one never taken by the host.
    let mut pending = Raw::connect(&address);
    let mut untaken = Raw::connect(&address);
    untaken.send(format!("{{\"auth\":\"{TOKEN}\"}}\n").as_bytes());
    std::thread::sleep(Duration::from_millis(200));

    let started = Instant::now();
    listener.close();
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "close took {:?}",
        started.elapsed()
    );
    assert_eq!(authed.line(), None);
    assert_eq!(untaken.line(), None);
    let mut rest = String::new();
    let _ = pending.reader.read_to_string(&mut rest);
    assert_eq!(
        closed_reason(session.pump.as_ref()),
        "closed: the tcp listener stopped"
    );
    let Err(error) = listener.accept(Duration::from_millis(10)) else {
        panic!("accepted after close")
    };
    assert!(error.contains("is closed"), "{error}");
    // The port is free again.
    let reopened = listen(&transport, json!({"bind": address, "auth-token": TOKEN}));
    reopened.close();
}
