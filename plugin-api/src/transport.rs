//! Transports: connectors to downstream MCP servers and listeners for upstream MCP clients.
//!
//! Both sides meet the host at a [`Pump`]: a blocking, thread-safe queue of JSON-RPC messages
//! as text, one message per call. The host reads from one thread and writes from another, so
//! `send` and `recv` must not hold one lock across a blocking wait.

use std::time::Duration;

use abi_stable::{
    StableAbi, sabi_trait,
    sabi_trait::TD_Opaque,
    std_types::{RBox, ROption, RResult, RStr, RString},
};

use crate::{PluginError, guard::guard};

/// The start of a [`Pump::send`] error that refuses one message and leaves the connection open:
/// the message is too large, or the peer is so far behind that it would wait past a limit.
/// Write such an error with [`Signal::refused`](crate::Signal::refused); the host reads it as a
/// [`Signal::Refused`](crate::Signal::Refused) and fails only the request that the message
/// carried. Appended after the first API version: an older host takes such an error for an
/// ordinary one and closes the connection.
pub const SEND_REFUSED: &str = crate::error::REFUSED_MARK;

/// The `_meta` key under which an HTTP listener hands the host a 2026-07-28 `tools/call`'s
/// `Mcp-Param-*` headers (SEP-2243), decoded: `{"<name after Mcp-Param-, lowercase>": value}`.
/// The listener always sets it (over anything the body said) on such a request, empty when
/// there are none; the host checks them against the arguments the tool's `x-mcp-header`
/// designates. A request without it came by a transport without headers.
pub const PARAM_HEADERS_META: &str = "dev.runbyte/paramHeaders";

/// What a transport plugin implements.
///
/// `connect` and `listen` both default to an error saying the transport has no such side, so a
/// transport may provide either or both.
pub trait Transport: Send + Sync + Sized + 'static {
    /// Builds the transport from its configuration table (a JSON object, `{}` when absent).
    fn open(config: &str) -> Result<Self, String>;

    /// Opens a client connection to one downstream server.
    ///
    /// `target` is a JSON object: `name` (the server's name in `runbyte.toml`) and the server's
    /// table as written there (`command`, `args`, `env`, `cwd` or `url`, `headers`, ...), with
    /// `${VAR}` already expanded and relative paths resolved. An error says why the connection
    /// could not be made (the command was not found, the URL refused, ...).
    ///
    /// For a server that needs OAuth, the host puts `Authorization: Bearer <token>` in
    /// `headers` (and opens a new connection when the token changes). A connector that wants
    /// the host to log in, refresh or ask for more scope writes the failure (a failed request's
    /// error, the reason the pump closed) with [`Signal::http`](crate::Signal::http), as the
    /// bundled HTTP and SSE connectors do.
    fn connect(&self, target: &str) -> Result<Box<dyn Pump>, String> {
        let _ = target;
        Err("this transport has no connector".to_owned())
    }

    /// Starts accepting upstream MCP clients.
    ///
    /// `options` is a JSON object: `bind` (an address, for network transports), `auth-token`
    /// (a bearer token every request must carry, when set), `allowed-hosts` and
    /// `allowed-origins` (lists; empty means loopback names only), `max-body-bytes`.
    fn listen(&self, options: &str) -> Result<Box<dyn Listener>, String> {
        let _ = options;
        Err("this transport has no listener".to_owned())
    }
}

/// The outcome of [`Pump::recv`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// One complete JSON-RPC message (a request, a response, a notification or a batch).
    Message(String),
    /// Nothing arrived within the timeout; the connection is still open.
    Timeout,
    /// The connection is over and nothing more will arrive. The text says why, for the
    /// operator: an exit status and the tail of stderr, an HTTP status, "closed by peer".
    Closed(String),
}

/// A blocking, thread-safe message pump: one MCP connection.
pub trait Pump: Send + Sync {
    /// Sends one JSON-RPC message. May block until the message is handed to the OS.
    /// An error means the connection is unusable; the host closes it (except for an error
    /// written with [`Signal::refused`](crate::Signal::refused)).
    fn send(&self, message: &str) -> Result<(), String>;

    /// Waits up to `timeout` for the next message.
    fn recv(&self, timeout: Duration) -> Received;

    /// Ends the connection: a child process is stopped, an HTTP session deleted. After `close`,
    /// `recv` answers [`Received::Closed`]. Called once; must not block for long.
    fn close(&self);

    /// A file descriptor (Unix) that becomes readable whenever `recv` may have something to
    /// return, valid as long as the pump. When a pump gives one, the host waits on it in its own
    /// event loop and calls `recv` with a zero timeout until it answers [`Received::Timeout`],
    /// instead of keeping a thread blocked in `recv`: one thread hand-over less per message.
    /// `recv` with a zero timeout must then return promptly. Default: none.
    ///
    /// Unix only: on Windows (where pipes and handles cannot be polled this way) a pump gives
    /// none, and the host calls `recv` from a reader thread of its own, with a timeout. A pump
    /// that has no descriptor on some system returns `None` there; nothing else changes.
    fn readable_fd(&self) -> Option<i32> {
        None
    }

    /// Whether `send` always returns promptly (it queues what the peer is not ready to take),
    /// so that the host may call it from its own async tasks rather than from a writer thread:
    /// one thread hand-over less per message. Default: false.
    fn sends_without_blocking(&self) -> bool {
        false
    }
}

/// One accepted upstream client session.
pub struct Accepted {
    /// The session's messages.
    pub pump: Box<dyn Pump>,
    /// Who connected, for logs ("stdio", "127.0.0.1:51234").
    pub peer: String,
    /// The transport's own id for the session (an `Mcp-Session-Id`, say), for logs and audit.
    pub session: String,
}

/// Accepts upstream client sessions.
pub trait Listener: Send + Sync {
    /// Waits up to `timeout` for the next client session; `Ok(None)` when none arrived.
    /// An error means the listener has failed for good.
    fn accept(&self, timeout: Duration) -> Result<Option<Accepted>, String>;

    /// Where the listener can be reached, for the operator (`127.0.0.1:3000`, `stdio`).
    fn address(&self) -> String;

    /// Stops accepting and ends every open session.
    fn close(&self);
}

/// The ABI form of a [`Received`].
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub enum RawReceived {
    /// See [`Received::Message`].
    Message(RString),
    /// See [`Received::Timeout`].
    Timeout,
    /// See [`Received::Closed`].
    Closed(RString),
}

/// The ABI form of [`Transport`]. Plugins implement [`Transport`]; the host calls this.
#[sabi_trait]
pub trait RawTransport: Send + Sync {
    /// See [`Transport::connect`].
    fn connect(&self, target: RStr<'_>) -> RResult<RawPumpBox, PluginError>;
    /// See [`Transport::listen`].
    #[sabi(last_prefix_field)]
    fn listen(&self, options: RStr<'_>) -> RResult<RawListenerBox, PluginError>;
}

/// The ABI form of [`Pump`].
#[sabi_trait]
pub trait RawPump: Send + Sync {
    /// See [`Pump::send`].
    fn send(&self, message: RStr<'_>) -> RResult<(), PluginError>;
    /// See [`Pump::recv`]; the timeout in milliseconds.
    fn recv(&self, timeout_ms: u64) -> RResult<RawReceived, PluginError>;
    /// See [`Pump::close`].
    #[sabi(last_prefix_field)]
    fn close(&self) -> RResult<(), PluginError>;
    /// See [`Pump::readable_fd`] (a Unix descriptor; none on Windows). Appended after the first
    /// API version: a host calling it on an older plugin gets this default, none.
    fn readable_fd(&self) -> ROption<i32> {
        ROption::RNone
    }
    /// See [`Pump::sends_without_blocking`]. Appended after the first API version: a host
    /// calling it on an older plugin gets this default, false.
    fn sends_without_blocking(&self) -> bool {
        false
    }
}

/// The ABI form of [`Accepted`].
#[repr(C)]
#[derive(StableAbi)]
pub struct RawAccepted {
    /// The session's pump.
    pub pump: RawPumpBox,
    /// See [`Accepted::peer`].
    pub peer: RString,
    /// See [`Accepted::session`].
    pub session: RString,
}

/// The ABI form of [`Listener`].
#[sabi_trait]
pub trait RawListener: Send + Sync {
    /// See [`Listener::accept`]; the timeout in milliseconds.
    fn accept(&self, timeout_ms: u64) -> RResult<ROption<RawAccepted>, PluginError>;
    /// See [`Listener::address`].
    fn address(&self) -> RResult<RString, PluginError>;
    /// See [`Listener::close`].
    #[sabi(last_prefix_field)]
    fn close(&self) -> RResult<(), PluginError>;
}

/// A boxed [`RawTransport`] trait object.
pub type RawTransportBox = RawTransport_TO<'static, RBox<()>>;
/// A boxed [`RawPump`] trait object.
pub type RawPumpBox = RawPump_TO<'static, RBox<()>>;
/// A boxed [`RawListener`] trait object.
pub type RawListenerBox = RawListener_TO<'static, RBox<()>>;

pub(crate) struct TransportAdapter<T> {
    pub(crate) inner: T,
    pub(crate) plugin: &'static str,
}

impl<T: Transport> RawTransport for TransportAdapter<T> {
    fn connect(&self, target: RStr<'_>) -> RResult<RawPumpBox, PluginError> {
        guard(self.plugin, "connect", || {
            self.inner.connect(target.as_str())
        })
        .map(|pump| pump_box(pump, self.plugin))
        .into()
    }

    fn listen(&self, options: RStr<'_>) -> RResult<RawListenerBox, PluginError> {
        let plugin = self.plugin;
        guard(plugin, "listen", || self.inner.listen(options.as_str()))
            .map(|listener| {
                RawListener_TO::from_value(
                    ListenerAdapter {
                        inner: listener,
                        plugin,
                    },
                    TD_Opaque,
                )
            })
            .into()
    }
}

fn pump_box(pump: Box<dyn Pump>, plugin: &'static str) -> RawPumpBox {
    RawPump_TO::from_value(
        PumpAdapter {
            inner: pump,
            plugin,
        },
        TD_Opaque,
    )
}

struct PumpAdapter {
    inner: Box<dyn Pump>,
    plugin: &'static str,
}

impl RawPump for PumpAdapter {
    fn send(&self, message: RStr<'_>) -> RResult<(), PluginError> {
        guard(self.plugin, "send", || self.inner.send(message.as_str())).into()
    }

    fn recv(&self, timeout_ms: u64) -> RResult<RawReceived, PluginError> {
        guard(self.plugin, "recv", || {
            Ok(match self.inner.recv(Duration::from_millis(timeout_ms)) {
                Received::Message(message) => RawReceived::Message(message.into()),
                Received::Timeout => RawReceived::Timeout,
                Received::Closed(reason) => RawReceived::Closed(reason.into()),
            })
        })
        .into()
    }

    fn close(&self) -> RResult<(), PluginError> {
        guard(self.plugin, "close", || {
            self.inner.close();
            Ok(())
        })
        .into()
    }

    fn readable_fd(&self) -> ROption<i32> {
        // A panic here means "no descriptor": the host falls back to a blocking `recv`.
        guard(self.plugin, "readable_fd", || Ok(self.inner.readable_fd()))
            .ok()
            .flatten()
            .into()
    }

    fn sends_without_blocking(&self) -> bool {
        guard(self.plugin, "sends_without_blocking", || {
            Ok(self.inner.sends_without_blocking())
        })
        .unwrap_or(false)
    }
}

struct ListenerAdapter {
    inner: Box<dyn Listener>,
    plugin: &'static str,
}

impl RawListener for ListenerAdapter {
    fn accept(&self, timeout_ms: u64) -> RResult<ROption<RawAccepted>, PluginError> {
        let plugin = self.plugin;
        guard(plugin, "accept", || {
            self.inner.accept(Duration::from_millis(timeout_ms))
        })
        .map(|accepted| {
            ROption::from(accepted.map(|accepted| RawAccepted {
                pump: pump_box(accepted.pump, plugin),
                peer: accepted.peer.into(),
                session: accepted.session.into(),
            }))
        })
        .into()
    }

    fn address(&self) -> RResult<RString, PluginError> {
        guard(self.plugin, "address", || {
            Ok(RString::from(self.inner.address()))
        })
        .into()
    }

    fn close(&self) -> RResult<(), PluginError> {
        guard(self.plugin, "close", || {
            self.inner.close();
            Ok(())
        })
        .into()
    }
}
