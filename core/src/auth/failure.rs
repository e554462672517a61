//! A server's authorization refusing a connection or a call, as a value the Hub and the CLI
//! match on. It is read once, where a transport's words enter the host
//! ([`AuthFailure::of`], through plugin-api's [`Signal`]), and carried typed from there.

use runbyte_plugin_api::Signal;

/// How a server's authorization refused a connection or a call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AuthFailure {
    /// HTTP 401: the credentials were missing or refused; the server's challenge when it sent
    /// one (a Bearer challenge means OAuth).
    Unauthorized { challenge: Option<String> },
    /// HTTP 403 whose challenge says `error="insufficient_scope"`: the token lacks a scope the
    /// challenge names; a new login may ask for it.
    InsufficientScope { challenge: String },
}

impl AuthFailure {
    /// The refusal a transport's failure text carries (see [`Signal::http`]), if any: a 401, or
    /// a 403 that asks for more scope. Any other failure, a 403 without that challenge among
    /// them, is none.
    pub fn of(text: &str) -> Option<AuthFailure> {
        match Signal::read(text)? {
            Signal::Http {
                status: 401,
                challenge,
            } => Some(AuthFailure::Unauthorized { challenge }),
            Signal::Http {
                status: 403,
                challenge: Some(challenge),
            } if asks_for_scope(&challenge) => Some(AuthFailure::InsufficientScope { challenge }),
            _ => None,
        }
    }

    /// The server's `WWW-Authenticate` challenge, when it sent one.
    pub fn challenge(&self) -> Option<&str> {
        match self {
            AuthFailure::Unauthorized { challenge } => challenge.as_deref(),
            AuthFailure::InsufficientScope { challenge } => Some(challenge),
        }
    }

    /// Whether the challenge is a Bearer one (the server asks for OAuth).
    pub fn is_bearer(&self) -> bool {
        self.challenge().is_some_and(is_bearer)
    }
}

/// Whether a challenge's scheme is Bearer.
pub(super) fn is_bearer(challenge: &str) -> bool {
    challenge
        .trim_start()
        .get(..6)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer"))
}

/// Whether a challenge's `error` parameter is `insufficient_scope` (RFC 6750 §3.1).
fn asks_for_scope(challenge: &str) -> bool {
    // The base only resolves a relative `resource_metadata`, which is not read here.
    let Ok(base) = reqwest::Url::parse("http://localhost/") else {
        return false;
    };
    rmcp::transport::auth::WWWAuthenticateParams::parse(challenge, &base).is_insufficient_scope()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_quoted_challenge_is_found_whole() {
        let reason = "HTTP 401 from http://h/mcp (WWW-Authenticate: Bearer \
                      resource_metadata=\"http://h/.well-known/x\", scope=\"a (b)\"); more (c)";
        let failure = AuthFailure::of(reason).unwrap();
        assert_eq!(
            failure.challenge(),
            Some("Bearer resource_metadata=\"http://h/.well-known/x\", scope=\"a (b)\"")
        );
        assert!(failure.is_bearer());
        let plain = AuthFailure::of("HTTP 401 from http://h/mcp: body").unwrap();
        assert_eq!(plain, AuthFailure::Unauthorized { challenge: None });
        assert!(!plain.is_bearer());
    }

    #[test]
    fn only_a_403_that_asks_for_scope_is_one() {
        let scope = Signal::http(
            403,
            "http://h/mcp",
            "no",
            Some(r#"Bearer error="insufficient_scope", scope="mcp:admin""#),
        );
        assert!(matches!(
            AuthFailure::of(&scope),
            Some(AuthFailure::InsufficientScope { .. })
        ));
        let other = Signal::http(
            403,
            "http://h/mcp",
            "no",
            Some(r#"Bearer error="invalid_token""#),
        );
        assert_eq!(AuthFailure::of(&other), None);
        assert_eq!(
            AuthFailure::of("HTTP 403 from http://h/mcp: forbidden"),
            None
        );
        assert_eq!(AuthFailure::of("HTTP 500 from http://h/mcp: oops"), None);
    }
}
