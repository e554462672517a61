//! The upstream MCP server: what Runbyte's own clients talk to, over any listener.

mod complete;
mod handler;
mod legacy_tasks;
pub mod options;
mod param_headers;
mod tasks;

use std::{sync::Arc, time::Duration};

use rmcp::{RoleServer, ServiceExt};

pub use handler::Session;

use crate::{
    gateway::Gateway,
    plugin::{Accepted, Listener},
    pump::{OnGarbage, PumpTransport},
};

/// How the server listens.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The transport plugin whose listener to use.
    pub listen: String,
    /// The listener's options (`bind`, `auth-token`, ...), as JSON.
    pub options: serde_json::Value,
}

/// A listener that could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Plugin(#[from] crate::plugin::PluginError),
    #[error("cannot listen with `{listen}`: {message}")]
    Listen { listen: String, message: String },
}

/// Serves upstream clients until the listener ends: for stdio, when the one client leaves.
pub async fn serve(gateway: Arc<Gateway>, options: ServeOptions) -> Result<(), ServeError> {
    let transport = gateway.transports().get(&options.listen)?;
    let listener_options = options.options.clone();
    let listener = tokio::task::spawn_blocking(move || transport.listen(&listener_options))
        .await
        .map_err(|e| ServeError::Listen {
            listen: options.listen.clone(),
            message: e.to_string(),
        })?
        .map_err(|e| ServeError::Listen {
            listen: options.listen.clone(),
            message: e.to_string(),
        })?;
    let address = {
        let listener = listener.clone();
        tokio::task::spawn_blocking(move || listener.address())
            .await
            .unwrap_or_default()
    };
    tracing::info!(listen = %options.listen, %address, "serving MCP");
    let single_client = options.listen == "stdio";
    let mut sessions = tokio::task::JoinSet::new();
    loop {
        match accept(&listener).await {
            Ok(Some(accepted)) => {
                let gateway = gateway.clone();
                let task = serve_session(gateway, accepted, options.listen.as_str().into());
                if single_client {
                    task.await;
                    break;
                }
                sessions.spawn(task);
            }
            Ok(None) => {}
            Err(message) => {
                tracing::error!(listen = %options.listen, "the listener failed: {message}");
                break;
            }
        }
        while sessions.try_join_next().is_some() {}
    }
    let closing = listener.clone();
    let _ = tokio::task::spawn_blocking(move || closing.close()).await;
    sessions.shutdown().await;
    Ok(())
}

async fn accept(listener: &Listener) -> Result<Option<Accepted>, String> {
    let listener = listener.clone();
    tokio::task::spawn_blocking(move || listener.accept(Duration::from_millis(500)))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// Tells the client when a downstream server's tools change: `tools/list_changed` (so it looks
/// again) and, if it asked for logs, which server.
#[allow(deprecated)]
async fn forward_hub_events(gateway: Arc<Gateway>, client: Session, peer: rmcp::Peer<RoleServer>) {
    use crate::hub::HubEvent;
    use tokio::sync::broadcast::error::RecvError;
    let mut events = gateway.hub().subscribe();
    loop {
        let event = match events.recv().await {
            Ok(event) => event,
            // Missed some: whatever they were, the lists may have changed.
            Err(RecvError::Lagged(_)) => HubEvent::ToolsChanged {
                server: String::new(),
            },
            Err(RecvError::Closed) => return,
        };
        let sent = match event {
            HubEvent::ToolsChanged { server } => {
                if !server.is_empty() {
                    let status = gateway.hub().server(&server).await.map(|view| view.status);
                    let (level, message) = match status {
                        Some(crate::hub::Status::Failed { error, .. }) => (
                            rmcp::model::LoggingLevel::Warning,
                            format!("server `{server}` is unavailable: {error}"),
                        ),
                        _ => (
                            rmcp::model::LoggingLevel::Info,
                            format!("server `{server}`'s tools changed; see /servers"),
                        ),
                    };
                    client.log(&peer, level, message).await;
                }
                peer.notify_tool_list_changed().await
            }
            HubEvent::ResourcesChanged { .. } => peer.notify_resource_list_changed().await,
            HubEvent::PromptsChanged { .. } => peer.notify_prompt_list_changed().await,
            HubEvent::ResourceUpdated { uri } if client.is_subscribed(&uri) => {
                let params = rmcp::model::ResourceUpdatedNotificationParam::new(uri);
                peer.notify_resource_updated(params).await
            }
            HubEvent::ResourceUpdated { .. } => Ok(()),
        };
        if sent.is_err() {
            return;
        }
    }
}

/// Runs the MCP server for one client session until it ends.
async fn serve_session(gateway: Arc<Gateway>, accepted: Accepted, listener: Arc<str>) {
    let Accepted {
        pump,
        peer,
        session,
    } = accepted;
    // The session's name may be its credential (a legacy HTTP session id): logs get its tag.
    let tag = crate::logging::session_tag(&session);
    tracing::debug!(%peer, session = %tag, "client connection opened");
    let legacy_tasks = Arc::new(legacy_tasks::LegacyTasks::default());
    let transport = PumpTransport::<RoleServer>::rewriting(
        pump,
        format!("client {peer}"),
        OnGarbage::Answer,
        legacy_tasks.clone(),
    );
    let client = Session::new(gateway.clone(), session.clone(), listener, &peer)
        .with_legacy_tasks(legacy_tasks);
    let client_subscriptions = client.clone();
    match complete::Answering(client.clone()).serve(transport).await {
        Ok(running) => {
            let legacy = running.peer().peer_info().is_some();
            if legacy {
                tracing::info!(%peer, session = %tag, "client session opened");
            }
            let remote = running.peer().clone();
            // A legacy session (it sent `initialize`) is told of changes unasked; a 2026-07-28
            // client asks with `subscriptions/listen`, which the handler serves.
            let forward =
                legacy.then(|| tokio::spawn(forward_hub_events(gateway.clone(), client, remote)));
            let _ = running.waiting().await;
            if let Some(forward) = forward {
                forward.abort();
            }
            client_subscriptions.end().await;
            if legacy {
                tracing::info!(%peer, session = %tag, "client session closed");
            }
        }
        // A client that connects and leaves before `initialize` (a port probe, a health check)
        // is not a problem worth a warning; nor is a 2026-07-28 `server/discover` probe, whose
        // connection ends with its answer.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            tracing::debug!(%peer, session = %tag, "client left before initializing");
        }
        Err(error) => {
            tracing::warn!(%peer, session = %tag, "client session failed to start: {error}")
        }
    }
    gateway.end_session(&session).await;
    tracing::debug!(%peer, session = %tag, "client connection closed");
}
