//! The legacy HTTP+SSE transport (MCP 2024-11-05), which rmcp no longer ships.
//!
//! `GET /sse` opens a session: an rmcp server on one end of an in-memory pipe. The stream's
//! first event is `endpoint`, naming `/message?sessionId=<id>`; every line the server writes
//! becomes an `event: message`. `POST /message?sessionId=<id>` writes its body to the pipe and
//! answers 202. Dropping the stream (the client went away) closes the session.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Read as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State as AxumState};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse as _, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt as _, stream};
use rmcp::ServiceExt as _;
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream, WriteHalf};

use crate::http;
use crate::server::{SERVER_NAME, State, TestServer, lock};

const PIPE_BYTES: usize = 64 * 1024;
/// Big enough for the `huge`-sized arguments a test may send.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

type ToServer = Arc<tokio::sync::Mutex<WriteHalf<DuplexStream>>>;
type Sessions = Arc<Mutex<HashMap<String, ToServer>>>;

#[derive(Clone)]
struct App {
    state: Arc<State>,
    sessions: Sessions,
    /// Set with `--sse-absolute-endpoint`: the endpoint event then carries a full URL.
    origin: Option<String>,
}

pub async fn serve(state: Arc<State>) -> anyhow::Result<()> {
    let listener = http::bind(state.settings.port).await?;
    let address: SocketAddr = listener.local_addr()?;
    let origin = state
        .settings
        .sse_absolute_endpoint
        .then(|| format!("http://{address}"));
    let token = state.settings.auth_token.clone();
    let app = App {
        state,
        sessions: Arc::default(),
        origin,
    };
    let router = Router::new()
        .route("/sse", get(open_session))
        .route("/message", post(post_message))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(app);
    http::run(
        listener,
        http::with_auth(router, token.as_deref()),
        &format!("http://{address}/sse"),
    )
    .await
}

/// Removes its session when the SSE stream that owns it is dropped.
struct SessionGuard {
    id: String,
    sessions: Sessions,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        lock(&self.sessions).remove(&self.id);
    }
}

async fn open_session(
    AxumState(app): AxumState<App>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let id = new_session_id();
    let (server_end, bridge_end) = tokio::io::duplex(PIPE_BYTES);
    let (from_server, to_server) = tokio::io::split(bridge_end);
    lock(&app.sessions).insert(id.clone(), Arc::new(tokio::sync::Mutex::new(to_server)));

    let handler = TestServer::new(app.state.clone());
    let session = id.clone();
    tokio::spawn(async move {
        match handler.serve(server_end).await {
            Ok(service) => {
                let _ = service.waiting().await;
            }
            Err(e) => eprintln!("{SERVER_NAME}: sse session {session}: handshake failed: {e}"),
        }
    });

    let endpoint = format!(
        "{}/message?sessionId={id}",
        app.origin.as_deref().unwrap_or("")
    );
    let first = stream::once(async move { Ok(Event::default().event("endpoint").data(endpoint)) });
    let guard = SessionGuard {
        id,
        sessions: app.sessions.clone(),
    };
    let messages = stream::unfold(
        (BufReader::new(from_server), guard),
        |(mut reader, guard)| async move {
            let mut line = String::new();
            match reader.read_line(&mut line).await {
                Ok(0) | Err(_) => None,
                Ok(_) => {
                    let event = Event::default().event("message").data(line.trim_end());
                    Some((Ok(event), (reader, guard)))
                }
            }
        },
    );
    Sse::new(first.chain(messages)).keep_alive(KeepAlive::default())
}

#[derive(Debug, Deserialize)]
struct SessionQuery {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

async fn post_message(
    AxumState(app): AxumState<App>,
    Query(query): Query<SessionQuery>,
    body: Bytes,
) -> Response {
    let Some(id) = query.session_id else {
        return (
            StatusCode::BAD_REQUEST,
            "missing the sessionId query parameter",
        )
            .into_response();
    };
    let Some(to_server) = lock(&app.sessions).get(&id).cloned() else {
        return (StatusCode::NOT_FOUND, format!("unknown session {id:?}")).into_response();
    };
    let message: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(message) => message,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("the body is not JSON: {e}"),
            )
                .into_response();
        }
    };
    // Re-serialised so that the message is one line, whatever the client's formatting.
    let mut line = message.to_string();
    line.push('\n');
    let mut to_server = to_server.lock().await;
    if to_server.write_all(line.as_bytes()).await.is_err() || to_server.flush().await.is_err() {
        return (StatusCode::NOT_FOUND, format!("session {id:?} has ended")).into_response();
    }
    (StatusCode::ACCEPTED, "Accepted").into_response()
}

/// 128 random bits, hex: a session id must not be guessable.
fn new_session_id() -> String {
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        // No /dev/urandom: fall back to the std hasher's per-process random keys.
        use std::hash::{BuildHasher as _, RandomState};
        let state = RandomState::new();
        bytes[..8].copy_from_slice(&state.hash_one(1u8).to_le_bytes());
        bytes[8..].copy_from_slice(&state.hash_one(2u8).to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
