//! What the `http` (streamable HTTP) and `sse` (2024-11-05 HTTP+SSE) transport plugins share.
//!
//! A plugin is a dynamic library with its own copy of tokio, so nothing here touches the host's
//! runtime: each transport instance builds a [`PrivateRuntime`] and every connection it makes or
//! accepts runs there, behind a blocking pump whose receiving side is an [`Inbox`].
//!
//! - [`runtime`]: the private runtime, a set of abortable tasks, a blocking wait on a future.
//! - [`inbox`]: the receiving half of a pump (`recv` with a timeout, `Closed` once over).
//! - [`sse`]: Server-Sent Events parsing and framing.
//! - [`jsonrpc`]: just enough JSON-RPC to route messages and report errors.
//! - [`security`]: Host/Origin/bearer-token checks for listeners, random session ids.
//! - [`limits`]: the bounds a listener enforces (sessions, connections, timeouts, bodies), their
//!   defaults, and where each is enforced.
//! - [`server`]: binding, the hyper accept loop, bodies and responses for listeners.
//! - [`sessions`]: a listener's session table (capped in total and per client IP) and what
//!   decides when an idle session expires.
//! - [`wake`]: the descriptor a listener's pump gives the host to wait on.
//! - [`client`]: the HTTP client for connectors (rustls on `ring`, same-origin redirects only).
//! - [`legacy`]: the 2024-11-05 HTTP+SSE client, used by the `sse` connector and by the `http`
//!   connector's fallback.
//! - [`legacy_server`]: the 2024-11-05 HTTP+SSE server, the `sse` listener.

pub mod client;
pub mod inbox;
pub mod jsonrpc;
pub mod legacy;
pub mod legacy_server;
pub mod limits;
pub mod runtime;
pub mod security;
pub mod server;
pub mod sessions;
pub mod sse;
#[cfg(feature = "testing")]
pub mod testing;
pub mod wake;

#[cfg(test)]
mod tests;

use std::sync::{Mutex, MutexGuard, PoisonError};

pub use inbox::{Inbox, InboxSender, inbox, inbox_with_fd};
pub use runtime::{PrivateRuntime, Tasks};

/// The largest message a connector accepts from a server unless the target says otherwise
/// (`max-message-bytes`): 16 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The largest request body a listener accepts unless its options say otherwise
/// (`max-body-bytes`): 4 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// Locks a mutex, ignoring poisoning: every critical section here leaves its data consistent,
/// and a panic elsewhere must not turn into a second panic on the host's thread.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Parses a plugin configuration or option text: empty text and `null` mean `{}`.
pub fn parse_json_object<T: serde::de::DeserializeOwned>(
    text: &str,
    what: &str,
) -> Result<T, String> {
    let text = text.trim();
    let text = if text.is_empty() || text == "null" {
        "{}"
    } else {
        text
    };
    serde_json::from_str(text).map_err(|error| format!("invalid {what}: {error}"))
}

/// The I/O a transport instance owns: its private runtime and its HTTP client, both made on
/// first use, so a transport that is loaded but never used starts no threads.
pub struct TransportIo {
    name: &'static str,
    runtime: Mutex<Option<std::sync::Arc<PrivateRuntime>>>,
    client: Mutex<Option<reqwest::Client>>,
}

impl TransportIo {
    /// `name` names the runtime's threads (`runbyte-http`).
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            runtime: Mutex::new(None),
            client: Mutex::new(None),
        }
    }

    pub fn runtime(&self) -> Result<std::sync::Arc<PrivateRuntime>, String> {
        let mut runtime = lock(&self.runtime);
        if let Some(runtime) = runtime.as_ref() {
            return Ok(runtime.clone());
        }
        let built = std::sync::Arc::new(PrivateRuntime::new(self.name).map_err(|error| {
            format!(
                "cannot start the {} transport's runtime: {error}",
                self.name
            )
        })?);
        *runtime = Some(built.clone());
        Ok(built)
    }

    pub fn client(&self) -> Result<reqwest::Client, String> {
        let mut client = lock(&self.client);
        if let Some(client) = client.as_ref() {
            return Ok(client.clone());
        }
        let built = client::build_client()?;
        *client = Some(built.clone());
        Ok(built)
    }
}
