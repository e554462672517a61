//! `sse`: the 2024-11-05 HTTP+SSE transport, for MCP servers and clients that predate
//! streamable HTTP.
//!
//! - Connector: `connect` takes the server's table (`url` of the SSE stream, `headers`,
//!   `max-message-bytes`), opens the stream, waits for the `endpoint` event (same origin only)
//!   and POSTs every message there. The client lives in `runbyte-http-common`, where the `http`
//!   connector's fallback uses it too.
//! - Listener: `GET /sse` and `POST /message?sessionId=...`; see
//!   [`runbyte_http_common::legacy_server`].
//!
//! All I/O runs on a runtime private to the transport instance (docs/architecture.md, the
//! plugin boundary).

#[cfg(test)]
mod tests;

use runbyte_http_common::{
    TransportIo,
    client::{self, Target},
    legacy::{LegacyPump, LegacyTarget},
    legacy_server,
    limits::{LimitOptions, ListenLimits},
};
use runbyte_plugin_api::{
    export_plugin,
    transport::{Listener, Pump, Transport},
};

/// The `sse` transport.
///
/// Its table (`[transports.sse]`) holds the listener's limits and nothing else; a listener's
/// options override them. Defaults: `max-sessions` 1024, `max-sessions-per-peer` 128,
/// `uninitialized-session-timeout-ms` 30000 (a session that POSTs nothing past `initialize`
/// ends), `max-connections` 1024, `max-connections-per-peer` 256, `header-timeout-ms` 10000,
/// `body-timeout-ms` 30000, `max-body-bytes` 4 MiB. A session otherwise lasts as long as its
/// stream, so `session-idle-timeout-ms` does not apply. See [`runbyte_http_common::limits`].
pub struct SseTransport {
    io: TransportIo,
    limits: ListenLimits,
}

impl Transport for SseTransport {
    fn open(config: &str) -> Result<Self, String> {
        let what = "configuration of the sse transport";
        let limits = LimitOptions::from_transport_table(config, what)?
            .apply(&ListenLimits::default())
            .map_err(|error| format!("invalid {what}: {error}"))?;
        Ok(Self {
            io: TransportIo::new("sse"),
            limits,
        })
    }

    /// Blocks until the server has sent its `endpoint` event, so a refused or wrong URL is an
    /// error here rather than a closed pump later.
    fn connect(&self, target: &str) -> Result<Box<dyn Pump>, String> {
        let target = Target::parse(target)?;
        let name = target.name().to_owned();
        let url =
            client::parse_url(&target.url).map_err(|error| format!("server `{name}`: {error}"))?;
        let headers = client::header_map(&target.headers)
            .map_err(|error| format!("server `{name}`: {error}"))?;
        let legacy = LegacyTarget {
            name: name.clone(),
            url,
            headers,
            max_message_bytes: target.max_message_bytes(),
        };
        let pump = LegacyPump::connect(self.io.runtime()?, self.io.client()?, legacy)
            .map_err(|error| format!("server `{name}`: {error}"))?;
        Ok(Box::new(pump))
    }

    fn listen(&self, options: &str) -> Result<Box<dyn Listener>, String> {
        legacy_server::listen(self.io.runtime()?, options, &self.limits)
    }
}

export_plugin! { kind: transport, name: "sse", plugin: SseTransport }
