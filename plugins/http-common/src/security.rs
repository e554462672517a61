//! What every listener checks on every request (docs/architecture.md, Security): the Host
//! header, the Origin header when present, and the bearer token when one is configured. Also the
//! random ids that name sessions.

use std::net::SocketAddr;

use hyper::{
    HeaderMap,
    header::{AUTHORIZATION, HOST, ORIGIN},
};

/// Host names a loopback listener always accepts (with any port).
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// HTTP 400: the request repeats Host or Origin (which of them counts is ambiguous, so
    /// neither is trusted).
    BadRequest(String),
    /// HTTP 403: a Host or Origin that is not allowed (DNS rebinding protection).
    Forbidden(String),
    /// HTTP 401 with `WWW-Authenticate: Bearer`: the token is missing or wrong.
    Unauthorized(String),
}

/// The request checks of one listener.
#[derive(Debug, Clone)]
pub struct Guard {
    /// Lower-case `host` (any port) or `host:port` patterns; `*` allows any Host (but no
    /// Origin: an Origin must be named).
    hosts: Vec<String>,
    /// Lower-case full origins (`https://app.example.com`) allowed beyond the allowed hosts.
    origins: Vec<String>,
    token: Option<String>,
}

impl Guard {
    /// `allowed_hosts`: host names (`example.com`, any port) or `host:port`, accepted in Host
    /// and Origin beyond the loopback names; `*` disables the Host check, never the Origin
    /// check: an Origin (and so a CORS answer) must be named, by a loopback name, the bound
    /// address, a named allowed host or `allowed_origins`.
    /// `allowed_origins`: full origins (`https://app.example.com`) or bare host names accepted
    /// in Origin. A listener bound to one specific address also accepts that address.
    pub fn new(
        allowed_hosts: &[String],
        allowed_origins: &[String],
        token: Option<String>,
        bound: SocketAddr,
    ) -> Result<Self, String> {
        let mut hosts: Vec<String> = LOOPBACK.iter().map(|name| (*name).to_owned()).collect();
        if !bound.ip().is_unspecified() && !bound.ip().is_loopback() {
            hosts.push(match bound {
                SocketAddr::V4(v4) => v4.ip().to_string(),
                SocketAddr::V6(v6) => format!("[{}]", v6.ip()),
            });
        }
        let mut origins = Vec::new();
        for host in allowed_hosts {
            let host = host.trim().to_ascii_lowercase();
            if host.is_empty() || host.contains('/') {
                return Err(format!(
                    "allowed-hosts: `{host}` is not a host name (or host:port)"
                ));
            }
            hosts.push(host);
        }
        for origin in allowed_origins {
            let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
            if origin.contains("://") {
                if parse_origin(&origin).is_none() {
                    return Err(format!(
                        "allowed-origins: `{origin}` is not an http(s) origin"
                    ));
                }
                origins.push(origin);
            } else if origin.is_empty() || origin.contains('/') {
                return Err(format!(
                    "allowed-origins: `{origin}` is not an origin or host name"
                ));
            } else {
                origins.push(format!("http://{origin}"));
                origins.push(format!("https://{origin}"));
            }
        }
        let token = token.filter(|token| !token.is_empty());
        Ok(Self {
            hosts,
            origins,
            token,
        })
    }

    /// Checks one request's headers: Host, Origin, then the token.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        self.check_host_and_origin(headers)?;
        self.check_token(headers)
    }

    /// Checks Host and Origin only: a CORS preflight carries no credentials.
    pub fn check_host_and_origin(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        for (name, what) in [(HOST, "Host"), (ORIGIN, "Origin")] {
            if headers.get_all(name).iter().nth(1).is_some() {
                return Err(Refusal::BadRequest(format!(
                    "Bad Request: more than one {what} header"
                )));
            }
        }
        let host = headers
            .get(HOST)
            .ok_or_else(|| Refusal::Forbidden("the Host header is missing".to_owned()))?;
        let host = host
            .to_str()
            .map_err(|_| Refusal::Forbidden("the Host header is not text".to_owned()))?;
        if !self.host_allowed(host) {
            return Err(Refusal::Forbidden(format!("Host `{host}` is not allowed")));
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            if !self.origin_allowed(origin) {
                return Err(Refusal::Forbidden(format!(
                    "Origin `{origin}` is not allowed"
                )));
            }
        }
        Ok(())
    }

    /// Checks only the bearer token.
    pub fn check_token(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let Some(expected) = &self.token else {
            return Ok(());
        };
        let given = headers
            .get(AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                let (scheme, token) = value.trim().split_once(' ')?;
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then_some(token.trim())
            });
        match given {
            None => Err(Refusal::Unauthorized(
                "a bearer token is required".to_owned(),
            )),
            Some(token) if constant_time_eq(token.as_bytes(), expected.as_bytes()) => Ok(()),
            Some(_) => Err(Refusal::Unauthorized(
                "the bearer token is not valid".to_owned(),
            )),
        }
    }

    /// Whether the Host and Origin checks can let `origin` through, for CORS answers.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        let origin = origin.trim().trim_end_matches('/').to_ascii_lowercase();
        let Some(host) = parse_origin(&origin) else {
            return false;
        };
        self.origins.contains(&origin) || self.host_matches(host, false)
    }

    fn host_allowed(&self, host: &str) -> bool {
        self.host_matches(host, true)
    }

    /// Whether `host` is allowed; `*` counts only when `wildcard` (for Host, never for Origin).
    fn host_matches(&self, host: &str, wildcard: bool) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let Some((name, _port)) = split_host(&host) else {
            return false;
        };
        self.hosts.iter().any(|pattern| {
            (wildcard && pattern == "*")
                || (pattern != "*" && (*pattern == name || *pattern == host))
        })
    }
}

/// `host` or `host:port` → (host, port); IPv6 literals keep their brackets.
fn split_host(host: &str) -> Option<(&str, Option<&str>)> {
    if host.is_empty() {
        return None;
    }
    let (name, port) = if host.starts_with('[') {
        let end = host.find(']')?;
        let (name, rest) = host.split_at(end + 1);
        match rest {
            "" => (name, None),
            rest => (name, Some(rest.strip_prefix(':')?)),
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    if let Some(port) = port
        && (port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    if name.is_empty() || name.contains(['/', '@', ' ', '\\']) {
        return None;
    }
    Some((name, port))
}

/// `scheme://host[:port]` with an http(s) scheme → the `host[:port]` part.
fn parse_origin(origin: &str) -> Option<&str> {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))?;
    split_host(rest)?;
    Some(rest)
}

/// Compares two secrets in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

/// What a log line shows of a session id, which is the session's only credential when the
/// listener has no bearer token: `session#` and the first 12 hex digits of the id's SHA-256.
/// Enough to follow one session through a log (the host's logs and trace spans show the same
/// tag), nothing to find the id by. Runbyte's `logging::session_tag` is the same function.
pub fn session_tag(id: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, id.as_bytes());
    let hex: String = digest.as_ref()[..6]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("session#{hex}")
}

/// A random id from the operating system's CSPRNG: 128 bits as 32 lower-case hex digits.
pub fn random_id() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| format!("no randomness for a session id: {error}"))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}
