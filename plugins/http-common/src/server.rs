//! The server half both listeners share: binding, the accept loop, bodies and the error answers.

// Refusals are returned as the HTTP answer itself (`Err(Response)`): built once per refused
// request, never propagated far, so boxing them would only add noise.
#![allow(clippy::result_large_err)]

use std::{
    convert::Infallible,
    future::Future,
    io,
    net::{SocketAddr, TcpListener as StdListener, ToSocketAddrs},
    pin::Pin,
    sync::{
        Arc, Mutex,
        mpsc::{Receiver, RecvTimeoutError},
    },
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::{
    HeaderMap, Response, StatusCode,
    body::{Frame, Incoming, SizeHint},
    header::{self, HeaderValue},
    server::conn::http1,
    service::service_fn,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use runbyte_plugin_api::{LogLevel, log, transport::Accepted};
use serde_json::{Value, json};
use tokio::{net::TcpListener, sync::mpsc::UnboundedReceiver};

use crate::{
    Tasks, jsonrpc,
    limits::{Full, LimitOptions, ListenLimits, Occupancy},
    lock,
    security::{Guard, Refusal},
};

/// Where a listener binds unless its options say otherwise.
pub const DEFAULT_BIND: &str = "127.0.0.1:3000";

/// What `Transport::listen` receives. Keys not listed here are ignored (they belong to other
/// listeners, or to later hosts).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ListenOptions {
    /// `host:port`; `127.0.0.1:3000` by default; port 0 picks a free port.
    #[serde(default)]
    pub bind: Option<String>,
    /// The MCP endpoint's path (streamable HTTP only); `/mcp` by default.
    #[serde(default)]
    pub path: Option<String>,
    /// When set, every request must carry `Authorization: Bearer <token>`.
    #[serde(default)]
    pub auth_token: Option<String>,
    #[serde(default)]
    pub allowed_hosts: Option<Vec<String>>,
    #[serde(default)]
    pub allowed_origins: Option<Vec<String>>,
    /// Sessions, connections, timeouts and body size (`max-body-bytes`, ...): see
    /// [`crate::limits`]. Each key set here overrides the transport's table.
    #[serde(flatten)]
    pub limits: LimitOptions,
}

/// A bound socket and the checks its requests go through.
pub struct Prepared {
    pub options: ListenOptions,
    pub listener: StdListener,
    pub address: SocketAddr,
    pub guard: Guard,
    pub limits: ListenLimits,
}

/// Parses the options, binds and builds the request checks. `base` holds the limits from the
/// transport's table (or the defaults); the options' own limit keys override it.
pub fn prepare(options: &str, base: &ListenLimits) -> Result<Prepared, String> {
    let options: ListenOptions = crate::parse_json_object(options, "listener options")?;
    let limits = options.limits.apply(base)?;
    let bind_to = options.bind.as_deref().unwrap_or(DEFAULT_BIND);
    let has_token = options
        .auth_token
        .as_deref()
        .is_some_and(|token| !token.is_empty());
    let listener = bind(bind_to)?;
    let address = listener
        .local_addr()
        .map_err(|error| format!("cannot read the bound address: {error}"))?;
    // Beyond loopback, every request must carry a token (docs/architecture.md, Security).
    if !address.ip().is_loopback() && !has_token {
        return Err(format!(
            "listening on {address} (beyond loopback) needs an auth-token; bind to 127.0.0.1 or set one"
        ));
    }
    let guard = Guard::new(
        options.allowed_hosts.as_deref().unwrap_or_default(),
        options.allowed_origins.as_deref().unwrap_or_default(),
        options.auth_token.clone(),
        address,
    )?;
    Ok(Prepared {
        options,
        listener,
        address,
        guard,
        limits,
    })
}

/// A request as a listener's handler receives it.
pub type Request = hyper::Request<Incoming>;

/// A response body: a whole body, or an event stream.
pub enum Body {
    Full(Option<Bytes>),
    Stream(Box<EventStream>),
}

/// How often an idle event stream gets a comment line: it keeps proxies from timing the stream
/// out, and a write to a client that went away is what tells the server it is gone.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// An SSE body: the chunks sent on its channel, a keep-alive comment when idle, and an action
/// run when the body is dropped (the client went away, or the stream ended).
pub struct EventStream {
    rx: UnboundedReceiver<Bytes>,
    keepalive: Pin<Box<tokio::time::Sleep>>,
    on_drop: Option<Box<dyn FnOnce() + Send>>,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        if let Some(on_drop) = self.on_drop.take() {
            on_drop();
        }
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Full(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            Body::Stream(stream) => {
                if let Poll::Ready(chunk) = stream.rx.poll_recv(cx) {
                    let next = tokio::time::Instant::now() + KEEPALIVE;
                    stream.keepalive.as_mut().reset(next);
                    return Poll::Ready(chunk.map(|bytes| Ok(Frame::data(bytes))));
                }
                match stream.keepalive.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        let next = tokio::time::Instant::now() + KEEPALIVE;
                        stream.keepalive.as_mut().reset(next);
                        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                            b": keep-alive\n\n",
                        )))))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            Body::Full(None) => SizeHint::with_exact(0),
            Body::Stream(_) => SizeHint::default(),
        }
    }
}

/// What a listener implements to answer requests.
pub trait Handler: Send + Sync + 'static {
    fn handle(
        self: Arc<Self>,
        request: Request,
        peer: SocketAddr,
    ) -> impl Future<Output = Response<Body>> + Send;
}

/// Binds `bind` (`host:port`), reporting a port conflict plainly:
/// "port 3000 is already in use (127.0.0.1:3000)".
pub fn bind(bind: &str) -> Result<StdListener, String> {
    let addresses: Vec<SocketAddr> = bind
        .to_socket_addrs()
        .map_err(|error| format!("cannot listen on `{bind}`: not a host:port address ({error})"))?
        .collect();
    let mut last = format!("cannot listen on `{bind}`: the name resolves to no address");
    for address in addresses {
        match StdListener::bind(address) {
            Ok(listener) => {
                listener
                    .set_nonblocking(true)
                    .map_err(|error| format!("cannot listen on {address}: {error}"))?;
                return Ok(listener);
            }
            Err(error) if error.kind() == io::ErrorKind::AddrInUse => {
                last = format!("port {} is already in use ({address})", address.port());
            }
            Err(error) if error.kind() == io::ErrorKind::PermissionDenied => {
                last = format!("cannot listen on {address}: permission denied");
            }
            Err(error) => last = format!("cannot listen on {address}: {error}"),
        }
    }
    Err(last)
}

/// Serves `listener` with `handler` on the runtime behind `tasks` until the tasks are aborted.
///
/// Connections beyond `max-connections` (in total, or from one client IP) are answered 503 and
/// closed at once; a request head must arrive within `header-timeout-ms` (which also closes an
/// idle keep-alive connection).
pub fn serve<H: Handler>(
    listener: StdListener,
    tasks: Arc<Tasks>,
    handler: Arc<H>,
    limits: &ListenLimits,
) -> Result<(), String> {
    let local = listener
        .local_addr()
        .map_err(|error| format!("cannot read the bound address: {error}"))?;
    let listener = {
        let _entered = tasks.handle().enter();
        TcpListener::from_std(listener)
            .map_err(|error| format!("cannot listen on {local}: {error}"))?
    };
    let connections = tasks.clone();
    let open = Arc::new(Mutex::new(Occupancy::default()));
    let (per_peer, total) = (limits.max_connections_per_peer, limits.max_connections);
    let header_timeout = limits.header_timeout;
    tasks.spawn(async move {
        loop {
            let (stream, peer) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    log(
                        LogLevel::Warn,
                        &format!("listener {local}: accept failed: {error}"),
                    );
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let slot = match ConnectionSlot::take(&open, peer, per_peer, total) {
                Ok(slot) => slot,
                Err(full) => {
                    refuse_connection(&stream, peer, full);
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            let handler = handler.clone();
            connections.spawn(async move {
                // Held as long as the connection: dropped when it ends or is aborted.
                let _slot = slot;
                let service = service_fn(move |request| {
                    let handler = handler.clone();
                    async move { Ok::<_, Infallible>(handler.handle(request, peer).await) }
                });
                let served = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(header_timeout)
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
                if let Err(error) = served {
                    log(LogLevel::Debug, &format!("connection from {peer}: {error}"));
                }
            });
        }
    });
    Ok(())
}

/// One counted connection; uncounted when dropped.
struct ConnectionSlot {
    open: Arc<Mutex<Occupancy>>,
    peer: std::net::IpAddr,
}

impl ConnectionSlot {
    fn take(
        open: &Arc<Mutex<Occupancy>>,
        peer: SocketAddr,
        per_peer: usize,
        total: usize,
    ) -> Result<Self, Full> {
        lock(open).try_add(peer.ip(), per_peer, total)?;
        Ok(Self {
            open: open.clone(),
            peer: peer.ip(),
        })
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        lock(&self.open).remove(self.peer);
    }
}

/// Answers a connection over a cap with 503 if the socket takes it at once, and closes it: the
/// answer is a courtesy that must cost nothing (no task, no wait).
fn refuse_connection(stream: &tokio::net::TcpStream, peer: SocketAddr, full: Full) {
    let why = match full {
        Full::Total(max) => format!("too many connections (at most {max})"),
        Full::Peer(max) => format!("too many connections from {} (at most {max})", peer.ip()),
    };
    log(LogLevel::Debug, &format!("refused a connection: {why}"));
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{why}",
        why.len()
    );
    let _ = stream.try_write(answer.as_bytes());
}

/// Why a request body could not be read.
#[derive(Debug)]
pub enum BodyError {
    TooLarge(usize),
    /// The whole body did not arrive within the body timeout.
    TimedOut(Duration),
    Read(String),
}

/// Reads a request body of at most `max` bytes, all of which must arrive within `timeout`.
pub async fn read_body(
    headers: &HeaderMap,
    body: Incoming,
    max: usize,
    timeout: Duration,
) -> Result<Bytes, BodyError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    if declared.is_some_and(|length| length > max as u64) {
        return Err(BodyError::TooLarge(max));
    }
    match tokio::time::timeout(timeout, Limited::new(body, max).collect()).await {
        Err(_) => Err(BodyError::TimedOut(timeout)),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
            Err(BodyError::TooLarge(max))
        }
        Ok(Err(error)) => Err(BodyError::Read(error.to_string())),
    }
}

/// The answer to a body that could not be read. A body that timed out also closes the
/// connection: what is left of it would otherwise be read as the next request.
pub fn body_error(error: BodyError) -> Response<Body> {
    match error {
        BodyError::TooLarge(max) => error_status(
            StatusCode::PAYLOAD_TOO_LARGE,
            jsonrpc::INVALID_REQUEST,
            &format!("the request body exceeds the {max} byte limit"),
        ),
        BodyError::TimedOut(timeout) => {
            let mut response = error_status(
                StatusCode::REQUEST_TIMEOUT,
                jsonrpc::INVALID_REQUEST,
                &format!(
                    "the request body did not arrive within {} ms",
                    timeout.as_millis()
                ),
            );
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            response
        }
        BodyError::Read(error) => error_status(
            StatusCode::BAD_REQUEST,
            jsonrpc::INVALID_REQUEST,
            &format!("cannot read the request body: {error}"),
        ),
    }
}

/// An HTTP error whose body is a JSON-RPC error response without an id.
pub fn error_status(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    json_response(status, &jsonrpc::error_response(Value::Null, code, message))
}

/// The answer to a refused Host, Origin or token (or a request that repeats Host or Origin).
pub fn refusal(refusal: Refusal) -> Response<Body> {
    match refusal {
        Refusal::BadRequest(why) => {
            error_status(StatusCode::BAD_REQUEST, jsonrpc::TRANSPORT_ERROR, &why)
        }
        Refusal::Forbidden(why) => {
            error_status(StatusCode::FORBIDDEN, jsonrpc::TRANSPORT_ERROR, &why)
        }
        Refusal::Unauthorized(why) => {
            let mut response =
                error_status(StatusCode::UNAUTHORIZED, jsonrpc::TRANSPORT_ERROR, &why);
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}

/// A JSON body.
pub fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    json_text_response(status, value.to_string())
}

/// A JSON body already serialized.
pub fn json_text_response(status: StatusCode, text: String) -> Response<Body> {
    let mut response = Response::new(Body::Full(Some(Bytes::from(text))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// An empty body with `status` (202 Accepted, 200 for DELETE, ...).
pub fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Body::Full(None));
    *response.status_mut() = status;
    response
}

/// A plain-text body.
pub fn text(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Body::Full(Some(Bytes::from(text.to_owned()))));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// 405 with the methods that are allowed.
pub fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut response = error_status(
        StatusCode::METHOD_NOT_ALLOWED,
        jsonrpc::TRANSPORT_ERROR,
        &format!("method not allowed here; allowed: {allow}"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    response
}

/// A Server-Sent Events response over `rx`. Must be called on the runtime (it starts a timer).
pub fn sse_response(rx: UnboundedReceiver<Bytes>) -> Response<Body> {
    sse_response_with(rx, None)
}

/// [`sse_response`] that runs `on_drop` once the body is gone.
pub fn sse_response_with(
    rx: UnboundedReceiver<Bytes>,
    on_drop: Option<Box<dyn FnOnce() + Send>>,
) -> Response<Body> {
    let keepalive = Box::pin(tokio::time::sleep(KEEPALIVE));
    let mut response = Response::new(Body::Stream(Box::new(EventStream {
        rx,
        keepalive,
        on_drop,
    })));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    // Tells nginx-like proxies not to buffer the stream.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// Whether an `Accept` header lists `media` (or a wildcard that covers it).
pub fn accepts(headers: &HeaderMap, media: &str) -> bool {
    let (kind, _) = media.split_once('/').unwrap_or((media, ""));
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| {
            value.split(',').any(|item| {
                let item = item
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase();
                item == media || item == "*/*" || item == format!("{kind}/*")
            })
        })
}

/// CORS headers for an allowed `Origin`, so browser-based clients can read the session id.
pub fn add_cors(response: &mut Response<Body>, origin: &HeaderValue) {
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    headers.insert(header::VARY, HeaderValue::from_static("Origin"));
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("mcp-session-id, mcp-protocol-version, www-authenticate"),
    );
}

/// The answer to a CORS preflight from an allowed origin.
pub fn preflight(origin: &HeaderValue, methods: &'static str) -> Response<Body> {
    let mut response = empty(StatusCode::NO_CONTENT);
    add_cors(&mut response, origin);
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(methods),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(
            "content-type, accept, authorization, mcp-session-id, mcp-protocol-version, last-event-id",
        ),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    response
}

/// The queue between a listener's tasks and `Listener::accept`.
pub struct AcceptQueue {
    rx: Mutex<Receiver<Accepted>>,
}

impl AcceptQueue {
    pub fn new(rx: Receiver<Accepted>) -> Self {
        Self { rx: Mutex::new(rx) }
    }

    /// Waits up to `timeout` for the next session; an error once the listener is closed.
    pub fn accept(&self, timeout: Duration) -> Result<Option<Accepted>, String> {
        match lock(&self.rx).recv_timeout(timeout) {
            Ok(accepted) => Ok(Some(accepted)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err("the listener is closed".to_owned()),
        }
    }
}

/// The JSON-RPC error body for a message that is not valid JSON.
pub fn parse_error(error: &serde_json::Error) -> Response<Body> {
    json_response(
        StatusCode::BAD_REQUEST,
        &json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": { "code": jsonrpc::PARSE_ERROR, "message": format!("Parse error: {error}") }
        }),
    )
}

/// The checks every request goes through, before any routing. `Ok` carries the request's
/// (allowed) Origin, for CORS headers on the answer; `Err` is the answer itself: a refusal, or
/// the answer to a CORS preflight (which carries no token, so only Host and Origin are checked).
pub fn screen(
    guard: &Guard,
    method: &hyper::Method,
    headers: &HeaderMap,
    methods: &'static str,
) -> Result<Option<HeaderValue>, Response<Body>> {
    let origin = headers.get(header::ORIGIN).cloned();
    if method == hyper::Method::OPTIONS {
        return Err(match guard.check_host_and_origin(headers) {
            Err(why) => refusal(why),
            Ok(()) => match &origin {
                Some(origin) => preflight(origin, methods),
                None => {
                    let mut response = empty(StatusCode::NO_CONTENT);
                    response
                        .headers_mut()
                        .insert(header::ALLOW, HeaderValue::from_static(methods));
                    response
                }
            },
        });
    }
    guard.check(headers).map_err(refusal)?;
    Ok(origin)
}

/// Adds CORS headers when the request came with an (allowed) Origin.
pub fn with_cors(mut response: Response<Body>, origin: Option<&HeaderValue>) -> Response<Body> {
    if let Some(origin) = origin {
        add_cors(&mut response, origin);
    }
    response
}
