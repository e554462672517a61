//! One downstream connection: connecting, the client handler, and calls.

// MCP logging is deprecated from the 2026-07-28 revision (SEP-2577), but the revisions Runbyte
// speaks downstream (up to 2025-11-25) still send `notifications/message`.
#![allow(deprecated)]

use std::{sync::Arc, time::Duration};

use rmcp::{
    ClientHandler, RoleClient, ServiceExt,
    model::{
        ClientCapabilities, ClientConfig, Implementation, LoggingLevel,
        LoggingMessageNotificationParam, Tool,
    },
    service::{NotificationContext, RunningService},
};
use serde_json::json;
use tokio::sync::mpsc;

use crate::{
    config::ServerConfig,
    plugin::{Pump, TransportPlugin},
    pump::{CloseReason, OnGarbage, PumpTransport},
};

/// The client side of one downstream connection: it passes `list_changed` on to the hub and
/// the server's log messages into ours.
#[derive(Clone)]
pub(super) struct HubClient {
    server: String,
    changes: mpsc::UnboundedSender<String>,
}

impl ClientHandler for HubClient {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("runbyte", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changes.send(self.server.clone());
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let server = &self.server;
        let data = params.data;
        match params.level {
            LoggingLevel::Debug => tracing::debug!(server, "{data}"),
            LoggingLevel::Info | LoggingLevel::Notice => tracing::info!(server, "{data}"),
            LoggingLevel::Warning => tracing::warn!(server, "{data}"),
            _ => tracing::error!(server, "{data}"),
        }
    }
}

/// A live connection to one downstream server.
pub struct Connection {
    pub(super) service: RunningService<RoleClient, HubClient>,
    pub(super) tools: std::sync::RwLock<Arc<Vec<Tool>>>,
    pub(super) reason: CloseReason,
    pump: Pump,
}

impl Connection {
    /// Whether the server is still there.
    pub fn is_alive(&self) -> bool {
        !self.service.is_closed() && self.reason.get().is_none()
    }

    /// Why the connection ended ("exited with status 3; stderr: ..."), once it has.
    pub fn close_reason(&self) -> Option<String> {
        self.reason.get()
    }

    /// The tools as last listed.
    pub fn tools(&self) -> Arc<Vec<Tool>> {
        self.tools
            .read()
            .map(|tools| tools.clone())
            .unwrap_or_default()
    }

    /// Lists the tools again (following pagination) and keeps the answer.
    pub async fn relist(&self) -> Result<Arc<Vec<Tool>>, String> {
        let tools = self
            .service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| e.to_string())?;
        let tools = Arc::new(tools);
        if let Ok(mut slot) = self.tools.write() {
            *slot = tools.clone();
        }
        Ok(tools)
    }

    /// Ends the connection: the service stops and the transport closes the pump (a child process
    /// is stopped, an HTTP session deleted).
    pub async fn close(&self) {
        self.service.cancellation_token().cancel();
        let pump = self.pump.clone();
        let _ = tokio::task::spawn_blocking(move || pump.close()).await;
    }
}

/// What the transport plugin is told to connect to: the server's table, plus its name.
fn target(name: &str, config: &ServerConfig, fallback: bool) -> serde_json::Value {
    json!({
        "name": name,
        "command": config.command,
        "args": config.args,
        "env": config.env,
        "cwd": config.cwd,
        "url": config.url,
        "headers": config.headers,
        "fallback": if fallback { Some("sse") } else { None },
    })
}

/// Opens a connection: the transport's pump, the MCP handshake, the first `tools/list`.
pub(super) async fn connect(
    name: &str,
    config: &ServerConfig,
    transport: TransportPlugin,
    fallback: bool,
    init_timeout: Duration,
    changes: mpsc::UnboundedSender<String>,
) -> Result<Connection, String> {
    let target = target(name, config, fallback);
    let pump = tokio::task::spawn_blocking(move || transport.connect(&target))
        .await
        .map_err(|e| format!("the connect task failed: {e}"))?
        .map_err(|e| e.to_string())?;
    let transport =
        PumpTransport::<RoleClient>::new(pump.clone(), name.to_owned(), OnGarbage::Skip);
    let reason = transport.close_reason();
    let client = HubClient {
        server: name.to_owned(),
        changes,
    };
    let started = tokio::time::timeout(init_timeout, client.serve(transport)).await;
    let closed_why =
        |reason: &CloseReason| reason.get().map(|r| format!(": {r}")).unwrap_or_default();
    let service = match started {
        Ok(Ok(service)) => service,
        Ok(Err(error)) => {
            close_pump(&pump).await;
            // Give the reader a moment to collect the exit status and stderr.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Err(match reason.get() {
                Some(why) => format!("initialize failed: the server {why}"),
                None => format!("initialize failed: {error}"),
            });
        }
        Err(_) => {
            close_pump(&pump).await;
            return Err(format!(
                "did not answer `initialize` within {} ms{}",
                init_timeout.as_millis(),
                closed_why(&reason)
            ));
        }
    };
    let connection = Connection {
        service,
        tools: Default::default(),
        reason,
        pump,
    };
    match tokio::time::timeout(init_timeout, connection.relist()).await {
        Ok(Ok(_)) => Ok(connection),
        Ok(Err(error)) => {
            connection.close().await;
            Err(format!(
                "tools/list failed: {error}{}",
                closed_why(&connection.reason)
            ))
        }
        Err(_) => {
            connection.close().await;
            Err(format!(
                "did not answer `tools/list` within {} ms",
                init_timeout.as_millis()
            ))
        }
    }
}

async fn close_pump(pump: &Pump) {
    let pump = pump.clone();
    let _ = tokio::task::spawn_blocking(move || pump.close()).await;
}
