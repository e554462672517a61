//! `http`: the streamable HTTP transport (MCP revisions 2025-03-26, 2025-06-18, 2025-11-25).
//!
//! - Connector: `connect` takes the server's table (`url`, `headers`, `fallback = "sse"`,
//!   `max-message-bytes`) and returns a pump that POSTs each message and reads the answers (JSON
//!   or SSE) and the session's GET stream. See [`connector`].
//! - Listener: `listen` serves one MCP endpoint (`bind`, `path`, `auth-token`, `allowed-hosts`,
//!   `allowed-origins`, and the limits below); each client session is one accepted pump. See
//!   [`listener`].
//!
//! All I/O runs on a runtime private to the transport instance (docs/architecture.md, the
//! plugin boundary).

mod connector;
mod listener;

#[cfg(test)]
mod tests;

use runbyte_http_common::{
    TransportIo,
    limits::{LimitOptions, ListenLimits},
};
use runbyte_plugin_api::{
    export_plugin,
    transport::{Listener, Pump, Transport},
};

/// The `http` transport.
///
/// Its table (`[transports.http]`) holds the listener's limits and nothing else; the same keys
/// in a listener's options override it. Every key and its default:
///
/// | key | default | beyond it |
/// |---|---|---|
/// | `max-sessions` | 1024 | a new session is refused 503 |
/// | `max-sessions-per-peer` | 128 | a new session from that client IP is refused 429 |
/// | `session-idle-timeout-ms` | 1800000 (30 min) | a session with no request and no open stream ends; its id then gets 404 |
/// | `uninitialized-session-timeout-ms` | 30000 (30 s) | the same, for a session whose client sent nothing after `initialize` |
/// | `max-connections` | 1024 | a new connection is answered 503 and closed |
/// | `max-connections-per-peer` | 256 | the same, per client IP |
/// | `header-timeout-ms` | 10000 | a request head (or, on an idle keep-alive connection, the next one) that takes longer closes the connection |
/// | `body-timeout-ms` | 30000 | a request body that takes longer is answered 408 and the connection closed |
/// | `max-body-bytes` | 4194304 (4 MiB) | a larger body is answered 413 |
///
/// See [`runbyte_http_common::limits`] for where each is enforced.
pub struct HttpTransport {
    io: TransportIo,
    limits: ListenLimits,
}

impl Transport for HttpTransport {
    fn open(config: &str) -> Result<Self, String> {
        let what = "configuration of the http transport";
        let limits = LimitOptions::from_transport_table(config, what)?
            .apply(&ListenLimits::default())
            .map_err(|error| format!("invalid {what}: {error}"))?;
        Ok(Self {
            io: TransportIo::new("http"),
            limits,
        })
    }

    fn connect(&self, target: &str) -> Result<Box<dyn Pump>, String> {
        connector::connect(self.io.runtime()?, self.io.client()?, target)
    }

    fn listen(&self, options: &str) -> Result<Box<dyn Listener>, String> {
        listener::listen(self.io.runtime()?, options, &self.limits)
    }
}

export_plugin! { kind: transport, name: "http", plugin: HttpTransport }
