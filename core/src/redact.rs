//! One redaction layer for secrets. Every text that leaves the process or reaches a program
//! (log lines, the audit log, the VFS, errors thrown into programs, the CLI's output) passes
//! through [`Secrets::redact`] first, on the raw text.
//!
//! What counts as a secret: every header, environment value and client secret of every server
//! (and each word of one, for `Bearer <token>`), every OAuth token Runbyte holds (added as it
//! gets them), the userinfo and every query-string value of every server's URL, and the
//! contents of token files. Each is matched as it is and as it reads inside a JSON string, so
//! that a secret holding `"` or `\` is caught in JSON lines too. Independently of the
//! configuration, the userinfo of any URL in the text (`https://user:pass@host`) is removed.

use std::{
    borrow::Cow,
    sync::{Arc, RwLock},
};

use crate::config::Config;

/// What a secret is replaced by.
pub const REDACTED: &str = "[REDACTED]";

/// The shortest value treated as a secret: shorter ones would redact ordinary words.
pub const MIN_SECRET_LEN: usize = 6;

/// The secrets to remove from text. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// Longest first, so that a secret containing another is replaced whole.
    values: Arc<Vec<String>>,
}

impl Secrets {
    /// The secrets a configuration holds.
    pub fn from_config(config: &Config) -> Secrets {
        let mut values = Vec::new();
        for server in config.servers.values() {
            for value in server
                .headers
                .values()
                .chain(server.env.values())
                .chain(server.client_secret.iter())
            {
                values.push(value.clone());
                // `Bearer abc123` redacts the token as well as the whole value.
                values.extend(value.split_whitespace().map(str::to_owned));
            }
            if let Some(url) = &server.url {
                values.extend(url_secrets(url));
            }
        }
        if let Some(file) = &config.server.auth_token_file
            && let Ok(token) = std::fs::read_to_string(file)
        {
            values.push(token.trim().to_owned());
        }
        Secrets::new(values)
    }

    /// Secrets from a list of values (those shorter than [`MIN_SECRET_LEN`] are ignored).
    pub fn new(values: impl IntoIterator<Item = String>) -> Secrets {
        let mut all = Vec::new();
        for value in values {
            if value.len() < MIN_SECRET_LEN {
                continue;
            }
            // As the value reads inside a JSON string.
            if let Ok(quoted) = serde_json::to_string(&value) {
                let escaped = &quoted[1..quoted.len() - 1];
                if escaped != value {
                    all.push(escaped.to_owned());
                }
            }
            // As it reads in a URL's percent-encoding.
            let encoded = percent_encode(&value);
            if encoded != value {
                all.push(encoded);
            }
            all.push(value);
        }
        all.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        all.dedup();
        Secrets {
            values: Arc::new(all),
        }
    }

    /// Whether there is nothing to redact but URL userinfo.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `text` with every secret, and the userinfo of every URL, replaced by [`REDACTED`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut text = strip_userinfo(text);
        for secret in self.values.iter() {
            if text.contains(secret.as_str()) {
                text = Cow::Owned(text.replace(secret.as_str(), REDACTED));
            }
        }
        text
    }
}

/// The process's secrets, for the sinks that cannot be handed them (the log writer, which exists
/// before the configuration is read). Set once the configuration is loaded.
static GLOBAL: RwLock<Option<Secrets>> = RwLock::new(None);

/// Makes `secrets` the process's secrets (added to those already set).
pub fn install(secrets: &Secrets) {
    let mut global = GLOBAL
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let merged = match global.take() {
        Some(old) => Secrets::new(
            old.values
                .iter()
                .chain(secrets.values.iter())
                .cloned()
                .collect::<Vec<_>>(),
        ),
        None => secrets.clone(),
    };
    *global = Some(merged);
}

/// `text` redacted with the process's secrets.
pub fn redact(text: &str) -> Cow<'_, str> {
    let global = GLOBAL
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match global.as_ref() {
        Some(secrets) => match secrets.redact(text) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(owned) => Cow::Owned(owned),
        },
        None => strip_userinfo(text),
    }
}

/// The secrets in a URL: its userinfo (whole, and the password alone) and each query value.
fn url_secrets(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some((_, rest)) = url.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            found.push(userinfo.to_owned());
            if let Some((_, password)) = userinfo.split_once(':') {
                found.push(password.to_owned());
            }
        }
    }
    if let Some((_, query)) = url.split_once('?') {
        let query = query.split('#').next().unwrap_or_default();
        for pair in query.split('&') {
            if let Some((_, value)) = pair.split_once('=') {
                found.push(value.to_owned());
                found.push(percent_decode(value));
            }
        }
    }
    found
}

/// Removes the userinfo of every `scheme://user:pass@host` in `text`.
fn strip_userinfo(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        // The authority ends at a path, query, fragment, space, quote or bracket.
        let end = after
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '`' | '<' | '>' | '\\')
                    || c.is_whitespace()
            })
            .unwrap_or(after.len());
        let authority = &after[..end];
        match authority.rfind('@') {
            Some(sign) => {
                out.push_str(REDACTED);
                out.push_str(&authority[sign..]);
                changed = true;
            }
            None => out.push_str(authority),
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0)) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_secret_is_removed_raw_and_escaped() {
        let secrets = Secrets::new(
            [
                "Bearer tok-123456".to_owned(),
                "tok-123456".to_owned(),
                "pa\"ss\\word".to_owned(),
            ]
            .into_iter()
            .chain(url_secrets(
                "https://alice:s3cr3t-pw@example.com/mcp?api_key=k%2Fey-999&x=1",
            )),
        );
        let line =
            r#"{"error":"401 from Bearer tok-123456, key k%2Fey-999 k/ey-999, pa\"ss\\word"}"#;
        let out = secrets.redact(line);
        for secret in ["tok-123456", "k%2Fey-999", "k/ey-999", "pa\\\"ss"] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        let raw = secrets.redact("pa\"ss\\word and alice:s3cr3t-pw");
        assert_eq!(raw, "[REDACTED] and [REDACTED]");
    }

    #[test]
    fn url_userinfo_is_removed_whatever_the_configuration() {
        let secrets = Secrets::default();
        assert_eq!(
            secrets.redact("cannot reach https://bob:hunter2@host.example/mcp: refused"),
            "cannot reach https://[REDACTED]@host.example/mcp: refused"
        );
        assert_eq!(
            secrets.redact("see http://host.example/a?b=c"),
            "see http://host.example/a?b=c"
        );
        assert!(matches!(secrets.redact("plain text"), Cow::Borrowed(_)));
    }

    #[test]
    fn short_values_are_not_secrets() {
        let secrets = Secrets::new(["1".to_owned(), "true".to_owned()]);
        assert!(secrets.is_empty());
        assert_eq!(secrets.redact("true 1"), "true 1");
    }
}
