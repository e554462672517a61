//! What a transport's listener is started with (see
//! [`Transport::listen`](crate::transport::Transport::listen)).

use serde::{Deserialize, Serialize};

/// What `listen` receives: `{"bind", "auth-token", "allowed-hosts", "allowed-origins",
/// "max-body-bytes"}`.
///
/// Every key defaults when absent, and reading ignores unknown keys: a transport may take
/// more options than these (an endpoint `path`, timeouts), and a later host may send more.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ListenerOptions {
    /// `bind`: the address a network listener binds (`127.0.0.1:3000`); `None`: the
    /// transport's default, which should be a loopback address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
    /// `auth-token`: a bearer token every request must carry; `None` (`null` on the wire): no
    /// token, which the host allows only on a loopback address.
    #[serde(default)]
    pub auth_token: Option<String>,
    /// `allowed-hosts`: the `Host` header values accepted; empty: loopback names only.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// `allowed-origins`: the `Origin` header values accepted; empty: loopback origins only.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// `max-body-bytes`: the largest request body (or message) accepted from a client, in
    /// bytes; `None`: the transport's own limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
}
