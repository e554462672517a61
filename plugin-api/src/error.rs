use abi_stable::{StableAbi, std_types::RString};

/// How a plugin call failed.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The plugin returned an error of its own (bad configuration, a refused connection, ...).
    Failed,
    /// The plugin panicked; the panic was caught at the boundary and the call failed.
    Panicked,
}

/// An error that crosses the ABI: a kind and a message that already names the plugin.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct PluginError {
    /// Whether the plugin reported the error or panicked.
    pub kind: ErrorKind,
    /// What went wrong, in words for an operator.
    pub message: RString,
}

impl PluginError {
    /// An error the plugin reports itself.
    pub fn failed(message: impl Into<String>) -> Self {
        PluginError {
            kind: ErrorKind::Failed,
            message: RString::from(message.into()),
        }
    }

    /// A caught panic.
    pub fn panicked(message: impl Into<String>) -> Self {
        PluginError {
            kind: ErrorKind::Panicked,
            message: RString::from(message.into()),
        }
    }
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PluginError {}

/// The start of a failure's text that refuses one message and leaves the connection open:
/// see [`Signal::Refused`].
pub(crate) const REFUSED_MARK: &str = "message refused: ";

/// Where a server's `WWW-Authenticate` challenge starts in a failure's text; it ends at the
/// first `)` outside the challenge's own quoted strings.
const CHALLENGE_MARK: &str = "(WWW-Authenticate: ";

/// A failure the host acts on rather than only shows.
///
/// [`ErrorKind`] cannot gain variants: abi_stable refuses to load a library whose exhaustive
/// enum has another number of variants than the host's, so a new variant would lock out every
/// plugin built before it. A signal therefore travels in the text that already crosses (the
/// message of a [`PluginError`], the reason a pump closed, a failed request's JSON-RPC error),
/// in the one form this type writes ([`Signal::refused`], [`Signal::http`]) and reads
/// ([`Signal::read`]). Plugins built from the first API version write the same form, and a
/// host of that version reads it, so neither side needs the other to be new.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Signal {
    /// [`Pump::send`](crate::transport::Pump::send) refused this one message (too large, or
    /// the peer too far behind): the host fails only the request it carried, with `reason`
    /// (which names the server and the limit), and the connection stays open.
    Refused {
        /// Why, in words for the caller.
        reason: String,
    },
    /// A server answered HTTP 401 (its credentials refused) or 403 (refused, perhaps for want
    /// of scope), with its `WWW-Authenticate` challenge when it sent one: the host may log in,
    /// refresh a token or ask for more scope.
    Http {
        /// 401 or 403.
        status: u16,
        /// The challenge, as the server sent it (`Bearer error="insufficient_scope", ...`).
        challenge: Option<String>,
    },
}

impl Signal {
    /// The text of a [`Signal::Refused`] failure: what [`Pump::send`](crate::transport::Pump::send)
    /// returns to refuse one message.
    pub fn refused(reason: &str) -> String {
        format!("{REFUSED_MARK}{reason}")
    }

    /// The text of a failed HTTP request: `HTTP <status> from <from>: <body>`, and for a 401 or
    /// 403 with a challenge (of at most 2 KiB) ` (WWW-Authenticate: <challenge>)`, which the
    /// host reads as a [`Signal::Http`].
    pub fn http(status: u16, from: &str, body: &str, challenge: Option<&str>) -> String {
        match challenge {
            Some(challenge) if matches!(status, 401 | 403) && challenge.len() <= 2048 => {
                format!("HTTP {status} from {from}: {body} {CHALLENGE_MARK}{challenge})")
            }
            _ => format!("HTTP {status} from {from}: {body}"),
        }
    }

    /// The signal a failure's text carries, if any. It may sit after words the host or the
    /// plugin put before it (the plugin's name, the entry point, "cannot connect: ").
    pub fn read(text: &str) -> Option<Signal> {
        if let Some(at) = text.find(REFUSED_MARK) {
            return Some(Signal::Refused {
                reason: text[at + REFUSED_MARK.len()..].to_owned(),
            });
        }
        let status = text.match_indices("HTTP ").find_map(|(at, _)| {
            let digits = text.get(at + 5..at + 8)?;
            let after = text[at + 8..].chars().next();
            match (digits, after) {
                ("401", None | Some(' ')) => Some(401),
                ("403", None | Some(' ')) => Some(403),
                _ => None,
            }
        })?;
        Some(Signal::Http {
            status,
            challenge: challenge_in(text),
        })
    }
}

/// The challenge quoted in a failure's text (`… (WWW-Authenticate: Bearer …)`), if any.
fn challenge_in(text: &str) -> Option<String> {
    let start = text.find(CHALLENGE_MARK)? + CHALLENGE_MARK.len();
    let rest = &text[start..];
    let (mut quoted, mut escaped) = (false, false);
    for (at, c) in rest.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ')' if !quoted => return Some(rest[..at].to_owned()),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use abi_stable::type_layout::TLData;

    use super::*;

    /// The enums that cross the ABI keep the exhaustive layout and the variant count the first
    /// API version shipped: abi_stable refuses a library whose exhaustive enum has another
    /// count, so a new variant would lock out every plugin built before it (see [`Signal`]).
    #[test]
    fn the_abi_enums_keep_their_first_layout() {
        let layouts = [
            ("ErrorKind", <ErrorKind as StableAbi>::LAYOUT, 2),
            ("PluginKind", <crate::PluginKind as StableAbi>::LAYOUT, 3),
            ("LogLevel", <crate::LogLevel as StableAbi>::LAYOUT, 5),
            (
                "RawReceived",
                <crate::transport::RawReceived as StableAbi>::LAYOUT,
                3,
            ),
            (
                "PluginInstance",
                <crate::PluginInstance as StableAbi>::LAYOUT,
                3,
            ),
        ];
        for (name, layout, variants) in layouts {
            let TLData::Enum(shape) = layout.data() else {
                panic!("{name} is not an enum");
            };
            assert_eq!(shape.variant_count(), variants, "{name}");
            assert!(shape.exhaustiveness.is_exhaustive(), "{name}");
        }
    }

    #[test]
    fn a_refusal_reads_back_with_its_reason_after_any_context() {
        let text = Signal::refused("a 9-byte message to server `s` is too large");
        assert_eq!(
            text,
            "message refused: a 9-byte message to server `s` is too large"
        );
        let wrapped = format!("transport plugin `stdio` failed in `send`: {text}");
        assert_eq!(
            Signal::read(&wrapped),
            Some(Signal::Refused {
                reason: "a 9-byte message to server `s` is too large".to_owned()
            })
        );
    }

    #[test]
    fn an_http_refusal_reads_back_with_its_status_and_challenge() {
        let challenge = r#"Bearer error="insufficient_scope", scope="a (b)""#;
        let text = Signal::http(403, "http://h/mcp", "no", Some(challenge));
        assert_eq!(
            text,
            r#"HTTP 403 from http://h/mcp: no (WWW-Authenticate: Bearer error="insufficient_scope", scope="a (b)")"#
        );
        assert_eq!(
            Signal::read(&format!("cannot connect: {text}")),
            Some(Signal::Http {
                status: 403,
                challenge: Some(challenge.to_owned())
            })
        );
        let plain = Signal::http(401, "GET http://h/sse", "(empty body)", None);
        assert_eq!(plain, "HTTP 401 from GET http://h/sse: (empty body)");
        assert_eq!(
            Signal::read(&plain),
            Some(Signal::Http {
                status: 401,
                challenge: None
            })
        );
    }

    #[test]
    fn other_failures_carry_no_signal() {
        for text in [
            "HTTP 500 from http://h/mcp: oops",
            "HTTP 4011 from nowhere",
            "cannot reach http://h/mcp: connection refused",
            "a long challenge (WWW-Authenticate: Bearer) without a status",
        ] {
            assert_eq!(Signal::read(text), None, "{text}");
        }
        let long = "x".repeat(2049);
        assert_eq!(
            Signal::http(401, "u", "b", Some(&long)),
            "HTTP 401 from u: b"
        );
    }
}
