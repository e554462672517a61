//! Build with `cargo build --release -p runbyte-transport-tcp`, load with `transport = "tcp"` in a `[servers.<name>]` table or `runbyte serve --listen tcp` (the build folder in `[plugins] dirs`, or `[[plugins.load]] path = ".../librunbyte_transport_tcp.so"`).
//!
//! `tcp`: an example third-party transport, built against `runbyte-plugin-api` alone: JSON-RPC
//! messages as newline-delimited lines over plain TCP. It is the template for an enterprise
//! transport: blocking I/O on its own threads (no async runtime), every line capped in length,
//! and a reason for every closed connection.
//!
//! **Wire format.** One JSON-RPC message per line, UTF-8, ending in `\n` (a `\r` before it is
//! dropped). Empty lines are ignored. A line that is not JSON is passed on as it is: the host
//! answers it with a JSON-RPC error. A line cut short by a disconnect is dropped.
//!
//! **Connector** (`[servers.x] url = "tcp://host:port"` and `transport = "tcp"`): connects to the
//! server and pumps lines both ways. When `[transports.tcp] auth-tokens` has a token for the
//! server, it is sent first, as the line `{"auth": "<token>"}`. There is no reconnect: when the
//! connection ends, `recv` says why and the host reconnects on its next call.
//!
//! **Listener** (`runbyte serve --listen tcp --bind 127.0.0.1:7000`): every accepted TCP
//! connection is one client session (peer: the remote address; session: `tcp-<n>`). When the
//! host passes an `auth-token` (`[server] auth-token-file`), the first line a client sends must
//! be `{"auth": "<token>"}`; any other first line, or none within `auth-timeout-ms`, is answered
//! with a JSON-RPC error line (`id: null`, code -32001) and the connection is closed. A bind
//! beyond loopback without a token is refused. A client line longer than the cap is skipped and
//! answered with a JSON-RPC error line (code -32600); the session goes on.
//!
//! **Plain TCP**: nothing is encrypted, the token included. Keep it on loopback, inside a VPN or
//! behind a TLS tunnel (stunnel, a service mesh); a TLS transport would wrap the same streams.
//!
//! Configuration (`[transports.tcp]`, every key optional):
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `max-line-bytes` | 16 MiB | the longest line read from a server; from a client too, unless the listener options carry `max-body-bytes` |
//! | `connect-timeout-ms` | 10000 | how long the connector waits for the TCP connection |
//! | `auth-timeout-ms` | 10000 | how long a client has to send its auth line |
//! | `max-connections` | 256 | client sessions open at once; more are refused with an error line |
//! | `auth-tokens` | none | `{ <server name> = "<token>" }`: what the connector sends to that server |

mod connect;
mod lines;
mod listen;
mod pump;
mod wakeable;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use runbyte_plugin_api::{
    export_plugin,
    transport::{Listener, Pump, Transport},
};
use serde::Deserialize;

/// How long a write may block before the connection counts as dead: a peer that stops reading
/// must not hang the host's writer forever.
const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// `[transports.tcp]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Config {
    #[serde(default = "default_max_line")]
    max_line_bytes: usize,
    #[serde(default = "default_timeout")]
    connect_timeout_ms: u64,
    #[serde(default = "default_timeout")]
    auth_timeout_ms: u64,
    #[serde(default = "default_max_connections")]
    max_connections: usize,
    #[serde(default)]
    auth_tokens: BTreeMap<String, String>,
}

fn default_max_line() -> usize {
    16 << 20
}

fn default_timeout() -> u64 {
    10_000
}

fn default_max_connections() -> usize {
    256
}

impl Config {
    fn parse(text: &str) -> Result<Config, String> {
        let config: Config =
            serde_json::from_str(text).map_err(|e| format!("[transports.tcp]: {e}"))?;
        let positive = [
            ("max-line-bytes", config.max_line_bytes as u64),
            ("connect-timeout-ms", config.connect_timeout_ms),
            ("auth-timeout-ms", config.auth_timeout_ms),
            ("max-connections", config.max_connections as u64),
        ];
        for (key, value) in positive {
            if value == 0 {
                return Err(format!(
                    "[transports.tcp] `{key} = 0`: it must be at least 1"
                ));
            }
        }
        if let Some((server, _)) = config.auth_tokens.iter().find(|(_, t)| t.is_empty()) {
            return Err(format!("[transports.tcp] `auth-tokens.{server}` is empty"));
        }
        Ok(config)
    }
}

/// The `tcp` transport.
#[derive(Debug)]
pub struct Tcp {
    config: Arc<Config>,
}

impl Transport for Tcp {
    fn open(config: &str) -> Result<Self, String> {
        Ok(Tcp {
            config: Arc::new(Config::parse(config)?),
        })
    }

    fn connect(&self, target: &str) -> Result<Box<dyn Pump>, String> {
        Ok(Box::new(connect::connect(target, &self.config)?))
    }

    fn listen(&self, options: &str) -> Result<Box<dyn Listener>, String> {
        Ok(Box::new(listen::TcpSessions::start(options, &self.config)?))
    }
}

export_plugin! { kind: transport, name: "tcp", plugin: Tcp }

#[cfg(test)]
mod tests;
