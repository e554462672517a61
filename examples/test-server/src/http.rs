//! The streamable HTTP transport: rmcp's service mounted at `/mcp`, and the pieces that http
//! and sse share (binding, the bearer token check).

use std::sync::Arc;

use anyhow::Context as _;
use axum::Router;
use axum::extract::{Request, State as AxumState};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse as _, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;

use crate::server::{SERVER_NAME, State, TestServer};

pub async fn serve(state: Arc<State>) -> anyhow::Result<()> {
    let settings = &state.settings;
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(!settings.stateless)
        .with_json_response(settings.json_response);
    let handler = TestServer::new(state.clone());
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = Router::new().nest_service("/mcp", service);
    let listener = bind(state.settings.port).await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    run(
        listener,
        with_auth(router, state.settings.auth_token.as_deref()),
        &url,
    )
    .await
}

/// Binds 127.0.0.1 only: this server runs tools such as `env` that must not face a network.
pub async fn bind(port: u16) -> anyhow::Result<TcpListener> {
    TcpListener::bind(("127.0.0.1", port))
        .await
        .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))
}

/// Serves `router` until the process ends; `listening on <url>` tells the test it may connect.
pub async fn run(listener: TcpListener, router: Router, url: &str) -> anyhow::Result<()> {
    eprintln!("listening on {url}");
    axum::serve(listener, router)
        .await
        .context("the HTTP server failed")
}

/// With a token, every request must carry `Authorization: Bearer <token>`.
pub fn with_auth(router: Router, token: Option<&str>) -> Router {
    match token {
        Some(token) => {
            let expected: Arc<str> = format!("Bearer {token}").into();
            router.layer(middleware::from_fn_with_state(expected, require_token))
        }
        None => router,
    }
}

async fn require_token(
    AxumState(expected): AxumState<Arc<str>>,
    request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes);
    if presented == Some(expected.as_bytes()) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        format!("{SERVER_NAME}: missing or wrong bearer token"),
    )
        .into_response()
}
