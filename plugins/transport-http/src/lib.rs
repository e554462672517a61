//! `http`: the streamable HTTP transport (MCP revisions 2025-03-26, 2025-06-18, 2025-11-25).
//!
//! - Connector: `connect` takes the server's table (`url`, `headers`, `fallback = "sse"`,
//!   `max-message-bytes`) and returns a pump that POSTs each message and reads the answers (JSON
//!   or SSE) and the session's GET stream. See [`connector`].
//! - Listener: `listen` serves one MCP endpoint (`bind`, `path`, `auth-token`, `allowed-hosts`,
//!   `allowed-origins`, `max-body-bytes`); each client session is one accepted pump. See
//!   [`listener`].
//!
//! All I/O runs on a runtime private to the transport instance (DESIGN.md §3).

mod connector;
mod listener;

#[cfg(test)]
mod tests;

use runbyte_http_common::TransportIo;
use runbyte_plugin_api::{
    export_plugin,
    transport::{Listener, Pump, Transport},
};
use serde::Deserialize;

/// The plugin's own configuration: nothing to set yet, so any key is refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {}

/// The `http` transport.
pub struct HttpTransport {
    io: TransportIo,
}

impl Transport for HttpTransport {
    fn open(config: &str) -> Result<Self, String> {
        let _: Config =
            runbyte_http_common::parse_json_object(config, "configuration of the http transport")?;
        Ok(Self {
            io: TransportIo::new("http"),
        })
    }

    fn connect(&self, target: &str) -> Result<Box<dyn Pump>, String> {
        connector::connect(self.io.runtime()?, self.io.client()?, target)
    }

    fn listen(&self, options: &str) -> Result<Box<dyn Listener>, String> {
        listener::listen(self.io.runtime()?, options)
    }
}

export_plugin! { kind: transport, name: "http", plugin: HttpTransport }
