//! The bounds every HTTP listener enforces: one typed value with named defaults, validated where
//! it is made.
//!
//! Each can be set in the transport's table (`[transports.http]`, `[transports.sse]`) and in the
//! listener's options (which win), under the key shown:
//!
//! | key | default | what stops it | enforced in |
//! |---|---|---|---|
//! | `max-sessions` | 1024 | a new session beyond it is refused 503 | the listener's session table |
//! | `max-sessions-per-peer` | 128 | a new session from a client IP that has that many is refused 429 | the listener's session table |
//! | `session-idle-timeout-ms` | 1,800,000 (30 min) | a session with no request and no open stream for that long ends (later requests get 404) | the listener's sweeper |
//! | `uninitialized-session-timeout-ms` | 30,000 (30 s) | the same for a session that never got past `initialize` (no `notifications/initialized`, no later request) | the listener's sweeper |
//! | `max-connections` | 1024 | a connection beyond it is answered 503 and closed | [`crate::server::serve`] |
//! | `max-connections-per-peer` | 256 | the same, per client IP | [`crate::server::serve`] |
//! | `header-timeout-ms` | 10,000 (10 s) | a request head (or the next one, on an idle keep-alive connection) that takes longer closes the connection | hyper's `header_read_timeout` |
//! | `body-timeout-ms` | 30,000 (30 s) | a request body that takes longer is answered 408 and the connection closed | [`crate::server::read_body`] |
//! | `max-body-bytes` | 4 MiB | a larger body is answered 413 | [`crate::server::read_body`] |
//!
//! Loopback clients all share one peer address (127.0.0.1 or ::1), so the per-peer caps bound
//! every local client together.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

pub const DEFAULT_MAX_SESSIONS: usize = 1024;
pub const DEFAULT_MAX_SESSIONS_PER_PEER: usize = 128;
pub const DEFAULT_SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
pub const DEFAULT_UNINITIALIZED_SESSION_TIMEOUT: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
pub const DEFAULT_MAX_CONNECTIONS_PER_PEER: usize = 256;
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The bounds of one listener; see the module documentation for each one's meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenLimits {
    pub max_sessions: usize,
    pub max_sessions_per_peer: usize,
    pub session_idle_timeout: Duration,
    pub uninitialized_session_timeout: Duration,
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub max_body_bytes: usize,
    /// Put before every session id this listener mints (`session-id-prefix`, e.g. `r1.`), so
    /// that a balancer can send a session's requests to the replica that holds it.
    pub session_id_prefix: String,
}

impl Default for ListenLimits {
    fn default() -> Self {
        Self {
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_peer: DEFAULT_MAX_SESSIONS_PER_PEER,
            session_idle_timeout: DEFAULT_SESSION_IDLE_TIMEOUT,
            uninitialized_session_timeout: DEFAULT_UNINITIALIZED_SESSION_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_connections_per_peer: DEFAULT_MAX_CONNECTIONS_PER_PEER,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_body_bytes: crate::DEFAULT_MAX_BODY_BYTES,
            session_id_prefix: String::new(),
        }
    }
}

impl ListenLimits {
    /// How often idle sessions are looked for: often enough that a session ends within about a
    /// quarter of its timeout past it, and at least once a second.
    pub fn sweep_interval(&self) -> Duration {
        let shortest = self
            .session_idle_timeout
            .min(self.uninitialized_session_timeout);
        (shortest / 4).clamp(Duration::from_millis(10), Duration::from_secs(1))
    }
}

/// The limit keys as written in a transport's table or a listener's options; each absent key
/// leaves the limit as it was.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct LimitOptions {
    #[serde(default)]
    pub max_sessions: Option<usize>,
    #[serde(default)]
    pub max_sessions_per_peer: Option<usize>,
    #[serde(default)]
    pub session_idle_timeout_ms: Option<u64>,
    #[serde(default)]
    pub uninitialized_session_timeout_ms: Option<u64>,
    #[serde(default)]
    pub max_connections: Option<usize>,
    #[serde(default)]
    pub max_connections_per_peer: Option<usize>,
    #[serde(default)]
    pub header_timeout_ms: Option<u64>,
    #[serde(default)]
    pub body_timeout_ms: Option<u64>,
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
    #[serde(default)]
    pub session_id_prefix: Option<String>,
}

impl LimitOptions {
    /// Every key [`LimitOptions`] reads.
    pub const KEYS: [&str; 10] = [
        "max-sessions",
        "max-sessions-per-peer",
        "session-idle-timeout-ms",
        "uninitialized-session-timeout-ms",
        "max-connections",
        "max-connections-per-peer",
        "header-timeout-ms",
        "body-timeout-ms",
        "max-body-bytes",
        "session-id-prefix",
    ];

    /// Parses a transport's table, which holds these keys and nothing else.
    pub fn from_transport_table(text: &str, what: &str) -> Result<Self, String> {
        let table: Map<String, Value> = crate::parse_json_object(text, what)?;
        if let Some(unknown) = table.keys().find(|key| !Self::KEYS.contains(&key.as_str())) {
            return Err(format!(
                "invalid {what}: unknown key `{unknown}`, expected one of {}",
                Self::KEYS.join(", ")
            ));
        }
        serde_json::from_value(Value::Object(table))
            .map_err(|error| format!("invalid {what}: {error}"))
    }

    /// `base` with every key that is set here; a zero anywhere is refused.
    pub fn apply(&self, base: &ListenLimits) -> Result<ListenLimits, String> {
        fn count(value: Option<usize>, key: &str, base: usize) -> Result<usize, String> {
            match value {
                Some(0) => Err(format!("{key} must be above 0")),
                Some(value) => Ok(value),
                None => Ok(base),
            }
        }
        fn millis(value: Option<u64>, key: &str, base: Duration) -> Result<Duration, String> {
            match value {
                Some(0) => Err(format!("{key} must be above 0")),
                Some(value) => Ok(Duration::from_millis(value)),
                None => Ok(base),
            }
        }
        Ok(ListenLimits {
            max_sessions: count(self.max_sessions, "max-sessions", base.max_sessions)?,
            max_sessions_per_peer: count(
                self.max_sessions_per_peer,
                "max-sessions-per-peer",
                base.max_sessions_per_peer,
            )?,
            session_idle_timeout: millis(
                self.session_idle_timeout_ms,
                "session-idle-timeout-ms",
                base.session_idle_timeout,
            )?,
            uninitialized_session_timeout: millis(
                self.uninitialized_session_timeout_ms,
                "uninitialized-session-timeout-ms",
                base.uninitialized_session_timeout,
            )?,
            max_connections: count(
                self.max_connections,
                "max-connections",
                base.max_connections,
            )?,
            max_connections_per_peer: count(
                self.max_connections_per_peer,
                "max-connections-per-peer",
                base.max_connections_per_peer,
            )?,
            header_timeout: millis(
                self.header_timeout_ms,
                "header-timeout-ms",
                base.header_timeout,
            )?,
            body_timeout: millis(self.body_timeout_ms, "body-timeout-ms", base.body_timeout)?,
            max_body_bytes: count(self.max_body_bytes, "max-body-bytes", base.max_body_bytes)?,
            session_id_prefix: match &self.session_id_prefix {
                Some(prefix) => session_id_prefix(prefix)?,
                None => base.session_id_prefix.clone(),
            },
        })
    }
}

/// A session id prefix as configured: at most 32 of `A-Z a-z 0-9 . _ -` (visible ASCII, so the
/// ids stay valid header values).
fn session_id_prefix(prefix: &str) -> Result<String, String> {
    let valid = prefix.len() <= 32
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(prefix.to_owned())
    } else {
        Err(format!(
            "session-id-prefix `{prefix}` must be at most 32 letters, digits, `.`, `_` or `-`"
        ))
    }
}

/// Which cap a new session or connection would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The listener-wide cap.
    Total(usize),
    /// The cap of one client IP.
    Peer(usize),
}

/// How many sessions (or connections) are open, in total and per client IP. Kept inside the lock
/// of whatever it counts, so the count and the thing counted change together.
#[derive(Debug, Default)]
pub struct Occupancy {
    total: usize,
    per_peer: std::collections::HashMap<std::net::IpAddr, usize>,
}

impl Occupancy {
    /// Counts one more for `peer`, unless that would pass `per_peer` or `total`.
    pub fn try_add(
        &mut self,
        peer: std::net::IpAddr,
        per_peer: usize,
        total: usize,
    ) -> Result<(), Full> {
        let peer = peer.to_canonical();
        if self.total >= total {
            return Err(Full::Total(total));
        }
        let count = self.per_peer.entry(peer).or_default();
        if *count >= per_peer {
            return Err(Full::Peer(per_peer));
        }
        *count += 1;
        self.total += 1;
        Ok(())
    }

    /// Counts one less for `peer`.
    pub fn remove(&mut self, peer: std::net::IpAddr) {
        let peer = peer.to_canonical();
        if let Some(count) = self.per_peer.get_mut(&peer) {
            *count -= 1;
            if *count == 0 {
                self.per_peer.remove(&peer);
            }
            self.total = self.total.saturating_sub(1);
        }
    }

    pub fn total(&self) -> usize {
        self.total
    }
}
