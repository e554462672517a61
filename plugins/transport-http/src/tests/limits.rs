//! The listener's bounds (sessions, connections, timeouts, CORS, repeated headers), each driven
//! over real loopback HTTP.

use std::{
    io::{ErrorKind, Read, Write},
    net::{IpAddr, TcpStream},
    time::{Duration, Instant},
};

use runbyte_http_common::{client::build_client, testing::Seen};
use serde_json::{Value, json};

use super::{BOTH, INIT, JSON_ONLY, ReadJson, Server, http, post};

const WAIT: Duration = Duration::from_secs(5);
const NOTE_INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const PING: &str = r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#;

/// A client whose connections come from `ip` (any of 127.0.0.0/8 reaches loopback on Linux).
fn http_from(ip: &str) -> reqwest::Client {
    // Installs the TLS provider reqwest needs to build any client.
    let _ = build_client().unwrap();
    reqwest::Client::builder()
        .local_address(ip.parse::<IpAddr>().unwrap())
        .build()
        .unwrap()
}

/// An `initialize` (JSON answer): the status and the session id, if any.
async fn initialize(client: &reqwest::Client, url: &str) -> (u16, Option<String>) {
    let response = post(client, url, None, INIT, JSON_ONLY).await;
    let id = response
        .headers()
        .get("mcp-session-id")
        .map(|id| id.to_str().unwrap().to_owned());
    (response.status().as_u16(), id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_initialize_from_one_peer_leaves_another_peer_served() {
    let server = Server::start(json!({"max-sessions-per-peer": 8}));
    let flood = http();
    let mut statuses = Vec::new();
    for _ in 0..40 {
        statuses.push(initialize(&flood, &server.url()).await.0);
    }
    let served = statuses.iter().filter(|status| **status == 200).count();
    let refused = statuses.iter().filter(|status| **status == 429).count();
    assert_eq!((served, refused), (8, 32), "{statuses:?}");
    let answer: Value = post(&flood, &server.url(), None, INIT, JSON_ONLY)
        .await
        .read_json()
        .await
        .unwrap();
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too many sessions from 127.0.0.1"),
        "{answer}"
    );
    // Another peer is served, and works.
    let other = http_from("127.0.0.2");
    let (status, id) = initialize(&other, &server.url()).await;
    assert_eq!(status, 200);
    let id = id.unwrap();
    let ping = post(&other, &server.url(), Some(&id), PING, JSON_ONLY).await;
    assert_eq!(ping.status(), 200);
    // Ending one of the flood's sessions frees its slot.
    let flood_id = server
        .harness
        .seen()
        .into_iter()
        .find_map(|seen| match seen {
            Seen::Accepted { session, peer } if peer.starts_with("127.0.0.1:") => Some(session),
            _ => None,
        })
        .unwrap();
    let deleted = flood
        .delete(server.url())
        .header("mcp-session-id", flood_id.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    assert_eq!(initialize(&flood, &server.url()).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_total_session_cap_answers_503() {
    let server = Server::start(json!({"max-sessions": 3}));
    let client = http();
    for _ in 0..3 {
        assert_eq!(initialize(&client, &server.url()).await.0, 200);
    }
    let other = http_from("127.0.0.3");
    assert_eq!(initialize(&other, &server.url()).await.0, 503);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_uninitialized_session_expires_and_an_initialized_one_stays() {
    let server = Server::start(json!({
        "uninitialized-session-timeout-ms": 300,
        "session-idle-timeout-ms": 60_000,
    }));
    let client = http();
    let (status, never) = initialize(&client, &server.url()).await;
    assert_eq!(status, 200);
    let never = never.unwrap();
    let (_, confirmed) = initialize(&client, &server.url()).await;
    let confirmed = confirmed.unwrap();
    let note = post(
        &client,
        &server.url(),
        Some(&confirmed),
        NOTE_INITIALIZED,
        BOTH,
    )
    .await;
    assert_eq!(note.status(), 202);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let expired = post(&client, &server.url(), Some(&never), PING, JSON_ONLY).await;
    assert_eq!(expired.status(), 404);
    let closed = server.harness.wait_for(
        WAIT,
        |seen| matches!(seen, Seen::Closed { session, .. } if *session == never),
    );
    assert!(
        matches!(&closed, Some(Seen::Closed { reason, .. }) if reason.contains("expired")),
        "{closed:?}"
    );
    let alive = post(&client, &server.url(), Some(&confirmed), PING, JSON_ONLY).await;
    assert_eq!(alive.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initialized_session_expires_after_its_idle_time_but_not_while_streaming() {
    let server = Server::start(json!({
        "uninitialized-session-timeout-ms": 60_000,
        "session-idle-timeout-ms": 400,
    }));
    let client = http();
    let (_, idle) = initialize(&client, &server.url()).await;
    let idle = idle.unwrap();
    let (_, streaming) = initialize(&client, &server.url()).await;
    let streaming = streaming.unwrap();
    for id in [&idle, &streaming] {
        let note = post(&client, &server.url(), Some(id), NOTE_INITIALIZED, BOTH).await;
        assert_eq!(note.status(), 202);
    }
    // An open GET stream is activity: that session stays.
    let stream = client
        .get(server.url())
        .header("accept", "text/event-stream")
        .header("mcp-session-id", streaming.as_str())
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let gone = post(&client, &server.url(), Some(&idle), PING, JSON_ONLY).await;
    assert_eq!(gone.status(), 404);
    let alive = post(&client, &server.url(), Some(&streaming), PING, JSON_ONLY).await;
    assert_eq!(alive.status(), 200);
    drop(stream);
}

/// Reads until the peer closes the connection or `within` passes: what was read, and whether
/// the connection was closed (EOF or reset) in time.
fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (String, bool) {
    let deadline = Instant::now() + within;
    let mut read = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (String::from_utf8_lossy(&read).into_owned(), false);
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return (String::from_utf8_lossy(&read).into_owned(), true),
            Ok(n) => read.extend_from_slice(&buffer[..n]),
            Err(error) if matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return (String::from_utf8_lossy(&read).into_owned(), false);
            }
            Err(_) => return (String::from_utf8_lossy(&read).into_owned(), true),
        }
    }
}

#[test]
fn a_slow_body_is_answered_408_and_the_connection_closed() {
    let server = Server::start(json!({"body-timeout-ms": 500}));
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let head = "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                Accept: application/json\r\nContent-Length: 1000\r\n\r\n";
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(&INIT.as_bytes()[..20]).unwrap();
    let started = Instant::now();
    let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(4));
    assert!(closed, "still open after 4 s; read {answer:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    // The answer may be lost to a reset (the unread body makes the close abortive); when it
    // arrives, it is 408.
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
}

#[test]
fn a_partial_head_is_closed_after_the_header_timeout() {
    let server = Server::start(json!({"header-timeout-ms": 500}));
    let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: appl")
        .unwrap();
    let started = Instant::now();
    let (answer, closed) = read_until_closed(&mut stream, Duration::from_secs(4));
    assert!(closed, "still open after 4 s; read {answer:?}");
    assert!(started.elapsed() >= Duration::from_millis(400));
    // An idle keep-alive connection is closed the same way.
    let mut idle = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    let (_, closed) = read_until_closed(&mut idle, Duration::from_secs(4));
    assert!(closed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_per_peer_cap_are_refused_and_other_peers_served() {
    let server = Server::start(json!({"max-connections-per-peer": 3}));
    let held: Vec<TcpStream> = (0..3)
        .map(|_| TcpStream::connect(("127.0.0.1", server.port)).unwrap())
        .collect();
    // The accept loop counts them before the next one arrives.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let port = server.port;
    let (answer, closed) = tokio::task::spawn_blocking(move || {
        let mut extra = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let request = "GET /mcp HTTP/1.1\r\nHost: localhost\r\n\r\n";
        let _ = extra.write_all(request.as_bytes());
        read_until_closed(&mut extra, Duration::from_secs(4))
    })
    .await
    .unwrap();
    assert!(closed);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 503"),
        "{answer}"
    );
    let other = http_from("127.0.0.4");
    assert_eq!(initialize(&other, &server.url()).await.0, 200);
    // A freed slot is available again.
    drop(held);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(initialize(&http(), &server.url()).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_host_allowed_still_reflects_only_allowed_origins() {
    let server = Server::start(json!({
        "allowed-hosts": ["*"],
        "allowed-origins": ["https://app.example.org"],
    }));
    let client = http();
    let with_origin = |origin: &'static str| {
        client
            .post(server.url())
            .header("host", "anything.example.net")
            .header("origin", origin)
            .header("content-type", "application/json")
            .header("accept", JSON_ONLY)
            .body(INIT)
            .send()
    };
    let evil = with_origin("http://evil.example").await.unwrap();
    assert_eq!(evil.status(), 403);
    assert!(!evil.headers().contains_key("access-control-allow-origin"));
    let allowed = with_origin("https://app.example.org").await.unwrap();
    assert_eq!(allowed.status(), 200);
    assert_eq!(
        allowed.headers()["access-control-allow-origin"],
        "https://app.example.org"
    );
    // The preflight as well.
    let preflight = client
        .request(reqwest::Method::OPTIONS, server.url())
        .header("origin", "http://evil.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 403);
    assert!(
        !preflight
            .headers()
            .contains_key("access-control-allow-origin")
    );
    // Any Host is what `*` allows.
    let host = client
        .post(server.url())
        .header("host", "anything.example.net")
        .header("content-type", "application/json")
        .header("accept", JSON_ONLY)
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(host.status(), 200);
}

#[test]
fn a_repeated_host_is_400() {
    let server = Server::start(json!({}));
    let send = |head: &str| {
        let mut stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
        let request = format!(
            "POST /mcp HTTP/1.1\r\n{head}Content-Type: application/json\r\n\
             Accept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{INIT}",
            INIT.len()
        );
        stream.write_all(request.as_bytes()).unwrap();
        read_until_closed(&mut stream, WAIT).0
    };
    let twice = send("Host: localhost\r\nHost: evil.example\r\n");
    assert!(twice.starts_with("HTTP/1.1 400"), "{twice}");
    let twice_allowed = send("Host: localhost\r\nHost: 127.0.0.1\r\n");
    assert!(twice_allowed.starts_with("HTTP/1.1 400"), "{twice_allowed}");
    let origins =
        send("Host: localhost\r\nOrigin: http://localhost\r\nOrigin: http://evil.example\r\n");
    assert!(origins.starts_with("HTTP/1.1 400"), "{origins}");
    // The counterpart: one Host is served.
    let once = send("Host: localhost\r\n");
    assert!(once.starts_with("HTTP/1.1 200"), "{once}");
}

// The thread count below is Linux's (`/proc`), and the host's event loop waits on Unix
// descriptors only: on Windows each session costs the host a reader thread by design (see
// runbyte-http-common's `wake`).

/// Set in the child process that [`each_session_costs_the_host_no_thread`] runs itself in.
#[cfg(target_os = "linux")]
const THREAD_PROBE: &str = "RUNBYTE_HTTP_THREAD_PROBE";

/// The threads of this process, from `/proc/self/status`.
#[cfg(target_os = "linux")]
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Serves sessions the way Runbyte's host does (core/src/pump.rs): a pump that gives a
/// descriptor is waited on in the host's event loop, one that does not gets a reader thread; a
/// pump whose `send` may block gets a writer thread. Answers every request with `{}` (and
/// `initialize` with a result the client accepts).
#[cfg(target_os = "linux")]
mod host_like {
    use std::{
        os::fd::{AsRawFd, RawFd},
        sync::{Arc, mpsc},
        thread,
        time::Duration,
    };

    use runbyte_plugin_api::transport::{Accepted, Listener, Pump, Received};
    use serde_json::{Value, json};
    use tokio::{
        io::{Interest, unix::AsyncFd},
        runtime::Handle,
    };

    struct Fd(RawFd);

    impl AsRawFd for Fd {
        fn as_raw_fd(&self) -> RawFd {
            self.0
        }
    }

    fn answer(message: &str) -> Option<String> {
        let message: Value = serde_json::from_str(message).ok()?;
        let id = message.get("id")?.clone();
        let result = match message["method"].as_str()? {
            "initialize" => json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "serverInfo": {"name": "host-like", "version": "0"},
            }),
            _ => json!({}),
        };
        Some(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string())
    }

    /// Accepts on a thread of its own (the host has one too) until the listener closes.
    pub(super) fn serve(listener: Arc<dyn Listener>, runtime: Handle) {
        thread::spawn(move || {
            while let Ok(next) = listener.accept(Duration::from_millis(50)) {
                if let Some(accepted) = next {
                    drive(accepted, &runtime);
                }
            }
        });
    }

    fn drive(accepted: Accepted, runtime: &Handle) {
        let pump: Arc<dyn Pump> = Arc::from(accepted.pump);
        let send: Arc<dyn Fn(String) + Send + Sync> = if pump.sends_without_blocking() {
            let pump = pump.clone();
            Arc::new(move |text| {
                let _ = pump.send(&text);
            })
        } else {
            let (tx, rx) = mpsc::channel::<String>();
            let writer = pump.clone();
            thread::spawn(move || {
                while let Ok(text) = rx.recv() {
                    let _ = writer.send(&text);
                }
            });
            let tx = std::sync::Mutex::new(tx);
            Arc::new(move |text| {
                let _ = tx.lock().unwrap().send(text);
            })
        };
        match pump.readable_fd() {
            Some(fd) => {
                runtime.spawn(async move {
                    // SAFETY: the descriptor stays open as long as the pump, which this task
                    // holds until `ready` is dropped (the contract of `Pump::readable_fd`).
                    let ready =
                        unsafe { AsyncFd::register_with_interest(Fd(fd), Interest::READABLE) }
                            .unwrap();
                    loop {
                        let Ok(mut guard) = ready.readable().await else {
                            return;
                        };
                        loop {
                            match pump.recv(Duration::ZERO) {
                                Received::Message(text) => {
                                    if let Some(reply) = answer(&text) {
                                        send(reply);
                                    }
                                }
                                Received::Timeout => break,
                                Received::Closed(_) => return,
                            }
                        }
                        guard.clear_ready();
                    }
                });
            }
            None => {
                thread::spawn(move || {
                    loop {
                        match pump.recv(Duration::from_millis(100)) {
                            Received::Message(text) => {
                                if let Some(reply) = answer(&text) {
                                    send(reply);
                                }
                            }
                            Received::Timeout => {}
                            Received::Closed(_) => return,
                        }
                    }
                });
            }
        }
    }
}

/// Runs in a child process of its own (this test binary, this test only), so that the other
/// tests' threads do not blur the count.
#[cfg(target_os = "linux")]
#[test]
fn each_session_costs_the_host_no_thread() {
    if std::env::var_os(THREAD_PROBE).is_some() {
        return thread_probe();
    }
    let name = format!(
        "{}::each_session_costs_the_host_no_thread",
        module_path!().split_once("::").unwrap().1
    );
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(THREAD_PROBE, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the probe failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[cfg(target_os = "linux")]
fn thread_probe() {
    use runbyte_plugin_api::transport::Transport;

    let host = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let transport = crate::HttpTransport::open("{}").unwrap();
    let listener: std::sync::Arc<dyn runbyte_plugin_api::transport::Listener> = transport
        .listen(r#"{"bind":"127.0.0.1:0"}"#)
        .unwrap()
        .into();
    let url = format!("http://{}/mcp", listener.address());
    host_like::serve(listener.clone(), host.handle().clone());
    host.block_on(async {
        let client = http();
        let mut ids = Vec::new();
        let open = |count: usize| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let mut opened = Vec::new();
                for _ in 0..count {
                    let (status, id) = initialize(&client, &url).await;
                    assert_eq!(status, 200);
                    let id = id.unwrap();
                    let ping = post(&client, &url, Some(&id), PING, JSON_ONLY).await;
                    assert_eq!(ping.status(), 200);
                    opened.push(id);
                }
                opened
            }
        };
        // Warm up: the runtimes' and the client's threads start with the first sessions.
        ids.extend(open(10).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = threads();
        ids.extend(open(100).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let after = threads();
        println!("threads: {before} with 10 sessions, {after} with 110");
        assert!(
            after <= before + 4,
            "threads grew from {before} to {after} for 100 more sessions"
        );
        assert_eq!(ids.len(), 110);
    });
    listener.close();
}
