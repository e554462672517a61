//! The listener: every accepted TCP connection is one client session.
//!
//! One acceptor thread takes connections; each connection gets one thread that checks its auth
//! line (when a token is set), hands the session to [`Listener::accept`] through a queue and then
//! reads the client's lines. A client that never authenticates never reaches the host.

use std::{
    collections::HashMap,
    io::{BufReader, Read, Write},
    net::{Shutdown, SocketAddr, TcpListener, TcpStream},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
        mpsc::{Receiver, RecvTimeoutError, Sender, channel},
    },
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use runbyte_plugin_api::{
    LogLevel, log,
    transport::{Accepted, Listener},
};
use serde::Deserialize;

use crate::{
    Config, WRITE_TIMEOUT,
    lines::{Line, error_line, read_line},
    pump::{LinePump, Side, lock},
};

/// The JSON-RPC error code of a refused connection (in the range JSON-RPC leaves to servers).
pub(crate) const REFUSED: i64 = -32001;

/// How often the acceptor looks for new connections and for `close`.
const POLL: Duration = Duration::from_millis(20);

/// The longest auth line read.
const MAX_AUTH_LINE: usize = 4096;

/// Session ids, unique within the process.
static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

/// The listener options the host passes. Keys this transport has no use for
/// (`allowed-hosts`, `allowed-origins`: HTTP notions) are ignored.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct Options {
    bind: Option<String>,
    auth_token: Option<String>,
    max_body_bytes: Option<usize>,
}

struct State {
    address: SocketAddr,
    token: Option<String>,
    max_line: usize,
    auth_timeout: Duration,
    max_connections: usize,
    closed: Arc<AtomicBool>,
    /// Every open connection, for `close`.
    open: Mutex<HashMap<u64, TcpStream>>,
}

/// A running `tcp` listener.
pub(crate) struct TcpSessions {
    state: Arc<State>,
    queue: Mutex<Receiver<Accepted>>,
    acceptor: Mutex<Option<JoinHandle<()>>>,
}

impl TcpSessions {
    pub(crate) fn start(options: &str, config: &Config) -> Result<TcpSessions, String> {
        let options: Options =
            serde_json::from_str(options).map_err(|e| format!("bad tcp listener options: {e}"))?;
        let bind = options
            .bind
            .ok_or("the tcp listener needs a `bind` address, such as 127.0.0.1:7000")?;
        if options.auth_token.as_deref() == Some("") {
            return Err("the tcp listener's auth-token is empty".to_owned());
        }
        let listener =
            TcpListener::bind(&bind).map_err(|e| format!("cannot listen on {bind}: {e}"))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("cannot read the address bound for {bind}: {e}"))?;
        if options.auth_token.is_none() && !address.ip().is_loopback() {
            return Err(format!(
                "`{bind}` is not a loopback address: serving beyond this machine needs an auth \
                 token ([server] auth-token-file)"
            ));
        }
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cannot listen on {bind}: {e}"))?;
        let state = Arc::new(State {
            address,
            token: options.auth_token,
            max_line: options
                .max_body_bytes
                .unwrap_or(config.max_line_bytes)
                .max(1),
            auth_timeout: Duration::from_millis(config.auth_timeout_ms),
            max_connections: config.max_connections,
            closed: Arc::new(AtomicBool::new(false)),
            open: Mutex::new(HashMap::new()),
        });
        let (sender, queue) = channel();
        let acceptor = {
            let state = state.clone();
            thread::Builder::new()
                .name("tcp-acceptor".to_owned())
                .spawn(move || accept_loop(&listener, &state, &sender))
                .map_err(|e| format!("cannot start the acceptor thread: {e}"))?
        };
        log(LogLevel::Debug, &format!("tcp listener on {address}"));
        Ok(TcpSessions {
            state,
            queue: Mutex::new(queue),
            acceptor: Mutex::new(Some(acceptor)),
        })
    }
}

fn accept_loop(listener: &TcpListener, state: &Arc<State>, sessions: &Sender<Accepted>) {
    while !state.closed.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, peer)) => admit(stream, peer, state, sessions),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => thread::sleep(POLL),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                // Out of file descriptors, say: the next attempt may succeed.
                log(
                    LogLevel::Warn,
                    &format!("tcp listener on {}: accept failed: {e}", state.address),
                );
                thread::sleep(POLL * 5);
            }
        }
    }
}

/// Starts the thread of one new connection, or turns it away when too many are open.
fn admit(stream: TcpStream, peer: SocketAddr, state: &Arc<State>, sessions: &Sender<Accepted>) {
    let prepared = stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_nodelay(true))
        .and_then(|()| stream.set_write_timeout(Some(WRITE_TIMEOUT)))
        .and_then(|()| stream.try_clone());
    let handle = match prepared {
        Ok(handle) => handle,
        Err(e) => {
            log(
                LogLevel::Warn,
                &format!("client {peer}: cannot set up the connection: {e}"),
            );
            return;
        }
    };
    let id = NEXT_SESSION.fetch_add(1, Ordering::Relaxed);
    {
        let mut open = lock(&state.open);
        if open.len() >= state.max_connections {
            drop(open);
            let message = format!(
                "too many connections (the limit is {})",
                state.max_connections
            );
            log(LogLevel::Warn, &format!("client {peer} refused: {message}"));
            // Refusing lingers a moment; the acceptor must not.
            let _ = thread::Builder::new()
                .name("tcp-refuse".to_owned())
                .spawn(move || refuse(stream, None, &message));
            return;
        }
        open.insert(id, handle);
    }
    let (state, sessions) = (state.clone(), sessions.clone());
    let spawned = thread::Builder::new()
        .name(format!("tcp-session-{id}"))
        .spawn(move || session(stream, peer, id, &state, &sessions));
    if let Err(e) = spawned {
        log(
            LogLevel::Warn,
            &format!("client {peer}: cannot start its thread: {e}"),
        );
    }
}

/// Authenticates one connection and hands it to the host.
fn session(
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    state: &Arc<State>,
    sessions: &Sender<Accepted>,
) {
    let forget = {
        let state = state.clone();
        move || {
            lock(&state.open).remove(&id);
        }
    };
    let mut reader = match stream.try_clone() {
        Ok(read_half) => BufReader::with_capacity(64 * 1024, read_half),
        Err(e) => {
            log(LogLevel::Warn, &format!("client {peer}: {e}"));
            forget();
            return;
        }
    };
    if let Some(token) = &state.token
        && let Err(why) = authenticate(&stream, &mut reader, token, state.auth_timeout)
    {
        log(LogLevel::Info, &format!("client {peer} refused: {why}"));
        refuse(stream, Some(reader), &format!("unauthorized: {why}"));
        forget();
        return;
    }
    let label = format!("client {peer}");
    let pump = match LinePump::start(
        stream,
        reader,
        label,
        Side::Server,
        state.max_line,
        Some(state.closed.clone()),
        forget,
    ) {
        Ok(pump) => pump,
        Err(e) => {
            log(LogLevel::Warn, &format!("client {peer}: {e}"));
            lock(&state.open).remove(&id);
            return;
        }
    };
    let accepted = Accepted {
        pump: Box::new(pump),
        peer: peer.to_string(),
        session: format!("tcp-{id}"),
    };
    // When the listener is gone the session is dropped, which closes its connection.
    let _ = sessions.send(accepted);
}

/// Reads the first line and checks it is `{"auth": "<token>"}`.
fn authenticate(
    stream: &TcpStream,
    reader: &mut BufReader<TcpStream>,
    token: &str,
    within: Duration,
) -> Result<(), String> {
    let expected = "the first line must be {\"auth\": \"<token>\"}";
    stream
        .set_read_timeout(Some(within))
        .map_err(|e| e.to_string())?;
    let line = match read_line(reader, MAX_AUTH_LINE) {
        Line::Text(line) => line,
        Line::TooLong(_) => return Err(format!("{expected}; the first line is too long")),
        Line::Eof | Line::Partial(_) => return Err("disconnected before authenticating".to_owned()),
        Line::Failed(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            return Err(format!("no auth line within {} ms", within.as_millis()));
        }
        Line::Failed(e) => return Err(e.to_string()),
    };
    stream.set_read_timeout(None).map_err(|e| e.to_string())?;
    let given = serde_json::from_str::<serde_json::Value>(&line)
        .ok()
        .and_then(|value| value.get("auth")?.as_str().map(str::to_owned))
        .ok_or(expected)?;
    if same_secret(given.as_bytes(), token.as_bytes()) {
        Ok(())
    } else {
        Err("wrong token".to_owned())
    }
}

/// Compares two secrets in time that depends on their lengths only, not on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Answers a connection with one JSON-RPC error line and closes it. What the client sent
/// meanwhile is read and dropped for a moment first: closing a socket with unread input resets
/// the connection, and the client could lose the error line.
fn refuse(mut stream: TcpStream, reader: Option<BufReader<TcpStream>>, message: &str) {
    let line = error_line(REFUSED, message);
    let _ = stream.write_all(format!("{line}\n").as_bytes());
    let _ = stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + Duration::from_millis(500);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let mut source: Box<dyn Read> = match reader {
        Some(reader) => Box::new(reader),
        None => Box::new(stream),
    };
    let mut sink = [0u8; 4096];
    let mut drained = 0usize;
    while Instant::now() < deadline && drained < 1 << 20 {
        match source.read(&mut sink) {
            Ok(0) => break,
            Ok(n) => drained += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break,
        }
    }
}

impl Listener for TcpSessions {
    fn accept(&self, timeout: Duration) -> Result<Option<Accepted>, String> {
        if self.state.closed.load(Ordering::SeqCst) {
            return Err(format!(
                "the tcp listener on {} is closed",
                self.state.address
            ));
        }
        match lock(&self.queue).recv_timeout(timeout) {
            Ok(accepted) => Ok(Some(accepted)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(format!(
                "the tcp listener on {} stopped",
                self.state.address
            )),
        }
    }

    fn address(&self) -> String {
        self.state.address.to_string()
    }

    fn close(&self) {
        self.state.closed.store(true, Ordering::SeqCst);
        // The acceptor sees the flag within one poll; after it has stopped, no connection can
        // be added behind the loop below.
        if let Some(acceptor) = lock(&self.acceptor).take() {
            let _ = acceptor.join();
        }
        for (_, stream) in lock(&self.state.open).drain() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        // Sessions accepted but never taken: dropping them closes their connections.
        if let Ok(queue) = self.queue.try_lock() {
            while queue.try_recv().is_ok() {}
        }
    }
}

impl Drop for TcpSessions {
    fn drop(&mut self) {
        self.close();
    }
}
