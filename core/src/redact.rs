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
//!
//! A narrower set, the [`Guard`], stands between programs and servers: what a tool result or a
//! resource read brings back has every known secret replaced before a program (or a client,
//! for a direct call) sees it, and a call whose arguments hold one is refused (see
//! [`guard_result`], [`guarded_in`]). It holds the OAuth tokens and client secrets Runbyte has,
//! every configured `client-secret`, URL password and Runbyte's own bearer token, and the
//! header, environment and query values whose names say they are credentials
//! ([`names_a_credential`]); values shorter than [`MIN_GUARDED_LEN`] are not matched.

use std::{
    borrow::Cow,
    collections::VecDeque,
    sync::{Arc, RwLock},
};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use crate::config::Config;

/// What a secret is replaced by.
pub const REDACTED: &str = "[REDACTED]";

/// The shortest value treated as a secret: shorter ones would redact ordinary words.
pub const MIN_SECRET_LEN: usize = 6;

/// The shortest value the [`Guard`] matches in what programs receive and send.
pub const MIN_GUARDED_LEN: usize = 8;

/// The most secrets learnt at run time (OAuth tokens and registered client secrets) kept for
/// redaction, and their total bytes: past either, the oldest are dropped first (the newest,
/// the ones in use, always stay).
const MAX_LEARNT: usize = 256;
const MAX_LEARNT_BYTES: usize = 4 * 1024 * 1024;

/// The secrets to remove from text. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    /// Longest first, so that a secret containing another is replaced whole.
    values: Arc<Vec<String>>,
    /// All of `values` at once (leftmost-longest), when there are any.
    matcher: Option<Arc<AhoCorasick>>,
    /// The values the [`Guard`] is made of (those that name credentials; see the module).
    guarded: Arc<Vec<String>>,
}

impl Secrets {
    /// The secrets a configuration holds.
    pub fn from_config(config: &Config) -> Secrets {
        let mut values = Vec::new();
        let mut guarded = Vec::new();
        for server in config.servers.values() {
            for (name, value) in server
                .headers
                .iter()
                .chain(server.env.iter())
                .map(|(name, value)| (name.as_str(), value))
                .chain(
                    server
                        .client_secret
                        .iter()
                        .map(|value| ("client-secret", value)),
                )
            {
                let words = value.split_whitespace().map(str::to_owned);
                if names_a_credential(name) {
                    guarded.push(value.clone());
                    guarded.extend(words.clone());
                }
                values.push(value.clone());
                // `Bearer abc123` redacts the token as well as the whole value.
                values.extend(words);
            }
            if let Some(url) = &server.url {
                values.extend(url_secrets(url));
                guarded.extend(url_credentials(url));
            }
        }
        if let Some(file) = &config.server.auth_token_file
            && let Ok(token) = std::fs::read_to_string(file)
        {
            values.push(token.trim().to_owned());
            guarded.push(token.trim().to_owned());
        }
        let mut secrets = Secrets::new(values);
        secrets.guarded = Arc::new(guarded);
        secrets
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
            matcher: matcher_of(&all).map(Arc::new),
            values: Arc::new(all),
            guarded: Arc::default(),
        }
    }

    /// Whether there is nothing to redact but URL userinfo.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `text` with every secret, and the userinfo of every URL, replaced by [`REDACTED`].
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let text = strip_userinfo(text);
        match &self.matcher {
            Some(matcher) if matcher.is_match(text.as_ref()) => {
                let with = vec![REDACTED; self.values.len()];
                Cow::Owned(matcher.replace_all(text.as_ref(), &with))
            }
            _ => text,
        }
    }
}

/// One automaton for `values` (each replaced whole, the longest where they overlap).
fn matcher_of(values: &[String]) -> Option<AhoCorasick> {
    if values.is_empty() {
        return None;
    }
    AhoCorasickBuilder::new()
        .match_kind(MatchKind::LeftmostLongest)
        .build(values)
        .inspect_err(|error| tracing::warn!("cannot build the redaction matcher: {error}"))
        .ok()
}

/// Whether a header, environment variable or query parameter named `name` holds a credential:
/// its name has `auth`, `token`, `key`, `secret`, `pass`, `pwd`, `credential`, `cookie`,
/// `session` or `signature`/`sig` in it (any case). Only these values are kept from programs:
/// `Accept: application/json` or `NODE_ENV=production` are not secrets.
pub fn names_a_credential(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "auth",
        "token",
        "key",
        "secret",
        "pass",
        "pwd",
        "credential",
        "cookie",
        "session",
        "signature",
    ]
    .iter()
    .any(|word| name.contains(word))
        || name == "sig"
        || name.ends_with("_sig")
        || name.ends_with("-sig")
}

/// The known secrets programs are kept from: matched in tool results and resource contents
/// (replaced by [`REDACTED`]) and in tool-call arguments (the call is refused). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    matcher: Option<Arc<AhoCorasick>>,
    patterns: usize,
}

impl Guard {
    /// The guard of `values`: each as it is, as it reads inside a JSON string and
    /// percent-encoded; values shorter than [`MIN_GUARDED_LEN`] are left out.
    pub fn new<'a>(values: impl IntoIterator<Item = &'a String>) -> Guard {
        let mut all = Vec::new();
        for value in values {
            if value.len() < MIN_GUARDED_LEN {
                continue;
            }
            if let Ok(quoted) = serde_json::to_string(value) {
                all.push(quoted[1..quoted.len() - 1].to_owned());
            }
            all.push(percent_encode(value));
            all.push(value.clone());
        }
        all.sort();
        all.dedup();
        Guard {
            patterns: all.len(),
            matcher: matcher_of(&all).map(Arc::new),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// Whether `bytes` hold a known secret.
    pub fn finds(&self, bytes: &[u8]) -> bool {
        self.matcher
            .as_ref()
            .is_some_and(|matcher| matcher.is_match(bytes))
    }

    /// `text` with every known secret replaced.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match &self.matcher {
            Some(matcher) if matcher.is_match(text) => {
                let with = vec![REDACTED; self.patterns];
                Cow::Owned(matcher.replace_all(text, &with))
            }
            _ => Cow::Borrowed(text),
        }
    }

    /// Replaces every known secret in every string (and member name) of `value`; whether
    /// anything was replaced.
    pub fn redact_value(&self, value: &mut serde_json::Value) -> bool {
        use serde_json::Value;
        match value {
            Value::String(text) => match self.redact(text) {
                Cow::Owned(redacted) => {
                    *text = redacted;
                    true
                }
                Cow::Borrowed(_) => false,
            },
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, item| self.redact_value(item) | changed),
            Value::Object(members) => {
                let mut changed = false;
                if members.keys().any(|name| self.finds(name.as_bytes())) {
                    let old = std::mem::take(members);
                    for (name, member) in old {
                        members.insert(self.redact(&name).into_owned(), member);
                    }
                    changed = true;
                }
                members.values_mut().fold(changed, |changed, member| {
                    self.redact_value(member) | changed
                })
            }
            _ => false,
        }
    }

    /// Replaces every known secret in what `value` serializes to (a tool result, a resource
    /// read): looked for in its JSON text first, so that the common case costs one
    /// serialization; rebuilt only when one is found. Whether anything was replaced.
    pub fn redact_serde<T>(&self, value: &mut T) -> bool
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
    {
        if self.is_empty() {
            return false;
        }
        let Ok(text) = serde_json::to_vec(value) else {
            return false;
        };
        if !self.finds(&text) {
            return false;
        }
        drop(text);
        let Ok(mut tree) = serde_json::to_value(&*value) else {
            return false;
        };
        if !self.redact_value(&mut tree) {
            return false;
        }
        match serde_json::from_value(tree) {
            Ok(redacted) => {
                *value = redacted;
                true
            }
            Err(_) => false,
        }
    }
}

/// The process's secrets, for the sinks that cannot be handed them (the log writer, which exists
/// before the configuration is read). Set once the configuration is loaded.
static GLOBAL: RwLock<Option<Secrets>> = RwLock::new(None);

/// The process's [`Guard`], rebuilt when a secret is learnt.
static GUARD: RwLock<Option<Guard>> = RwLock::new(None);

/// What the process's secrets are made of.
#[derive(Default)]
struct Known {
    /// From the configuration (and any [`install`]ed set): (every value, the guarded ones).
    configured: (Vec<String>, Vec<String>),
    /// Learnt at run time, oldest first, bounded by [`MAX_LEARNT`] and [`MAX_LEARNT_BYTES`].
    learnt: VecDeque<String>,
}

static KNOWN: std::sync::Mutex<Option<Known>> = std::sync::Mutex::new(None);

/// Makes `secrets` the process's secrets (added to those already set).
pub fn install(secrets: &Secrets) {
    rebuild(|known| {
        known.configured.0.extend(secrets.values.iter().cloned());
        known.configured.1.extend(secrets.guarded.iter().cloned());
    });
}

/// Adds a secret learnt at run time (an OAuth token, a registered client's secret): redacted
/// everywhere and kept from programs. The oldest learnt ones are forgotten past
/// [`MAX_LEARNT`] values or [`MAX_LEARNT_BYTES`].
pub fn learn(secret: &str) {
    if secret.len() < MIN_SECRET_LEN {
        return;
    }
    rebuild(|known| {
        if known.learnt.iter().any(|kept| kept == secret) {
            return;
        }
        known.learnt.push_back(secret.to_owned());
        while known.learnt.len() > MAX_LEARNT
            || (known.learnt.len() > 1
                && known.learnt.iter().map(String::len).sum::<usize>() > MAX_LEARNT_BYTES)
        {
            known.learnt.pop_front();
        }
    });
}

fn rebuild(change: impl FnOnce(&mut Known)) {
    let mut known = KNOWN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let known = known.get_or_insert_with(Known::default);
    change(known);
    known.configured.0.sort();
    known.configured.0.dedup();
    known.configured.1.sort();
    known.configured.1.dedup();
    let secrets = Secrets::new(
        known
            .configured
            .0
            .iter()
            .chain(known.learnt.iter())
            .cloned()
            .collect::<Vec<_>>(),
    );
    let guard = Guard::new(known.configured.1.iter().chain(known.learnt.iter()));
    *GLOBAL
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(secrets);
    *GUARD
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(guard);
}

/// The process's guard (empty before the configuration is loaded).
pub fn guard() -> Guard {
    GUARD
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
        .unwrap_or_default()
}

/// Replaces every known secret in a tool result or resource read (every string: text,
/// structured content, error text, resource contents, metadata) before a program or client
/// sees it; whether one was found.
pub fn guard_result<T>(result: &mut T) -> bool
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    guard().redact_serde(result)
}

/// Whether tool-call arguments hold a known secret, literally (in any string or member name).
pub fn guarded_in(arguments: &serde_json::Value) -> bool {
    let guard = guard();
    !guard.is_empty() && serde_json::to_vec(arguments).is_ok_and(|text| guard.finds(&text))
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

/// The credentials in a URL that the [`Guard`] keeps from programs: its password, and the
/// query values whose names say they are credentials (`?api_key=…`).
fn url_credentials(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some((_, rest)) = url.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            match userinfo.split_once(':') {
                Some((_, password)) => found.push(percent_decode(password)),
                None => found.push(percent_decode(userinfo)),
            }
        }
    }
    if let Some((_, query)) = url.split_once('?') {
        let query = query.split('#').next().unwrap_or_default();
        for pair in query.split('&') {
            if let Some((name, value)) = pair.split_once('=')
                && names_a_credential(&percent_decode(name))
            {
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
    #![allow(clippy::unwrap_used)]
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

    /// The guard replaces a secret in every string and member name of a result, however deep,
    /// raw or as it reads inside JSON text; values under 8 bytes are not matched; a result
    /// with none is left as it was (not rebuilt).
    #[test]
    fn the_guard_replaces_secrets_everywhere_in_a_result() {
        let token = "at-Zx9_secret-token".to_owned();
        let quoted = "pa\"ss\\word-77".to_owned();
        let guard = Guard::new([&token, &quoted, &"short7x".to_owned()]);
        let mut result: rmcp::model::CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [
                {"type": "text", "text": format!("your token is {token}")},
                {"type": "text", "text": serde_json::json!({"auth": format!("Bearer {token}"), "p": quoted}).to_string()},
                {"type": "resource", "resource": {"uri": "x://y", "text": format!("t={token}")}},
            ],
            "structuredContent": {"deep": [[{"k": token.clone()}]], token.clone(): "as a name"},
            "isError": true,
        }))
        .unwrap();
        assert!(guard.redact_serde(&mut result));
        let text = serde_json::to_string(&result).unwrap();
        assert!(!text.contains("Zx9_secret"), "{text}");
        assert!(!text.contains("ss\\\\word"), "{text}");
        assert_eq!(text.matches(REDACTED).count(), 6, "{text}");
        assert_eq!(result.is_error, Some(true));
        let mut clean: rmcp::model::CallToolResult = serde_json::from_value(
            serde_json::json!({"content": [{"type": "text", "text": "short7x and nothing"}]}),
        )
        .unwrap();
        assert!(!guard.redact_serde(&mut clean));
        assert!(guard.finds(format!("{{\"a\":\"{token}\"}}").as_bytes()));
        assert!(!guard.finds(b"short7x"));
        assert!(Guard::new([&"1234567".to_owned()]).is_empty());
    }

    /// Only values whose names say they are credentials are guarded from the configuration:
    /// `Authorization`, `X-Api-Key`, `GITHUB_TOKEN`, a client secret, a URL password and an
    /// `api_key` query value, not `Accept` or `NODE_ENV`.
    #[test]
    fn the_guard_takes_credentials_from_the_configuration_by_name() {
        let server = crate::config::ServerConfig {
            url: Some(
                "https://u:pw-1234567890@h.example/mcp?api_key=q-1234567890&region=eu-west-12345"
                    .to_owned(),
            ),
            headers: [
                ("Authorization", "Bearer hdr-tok-1234567"),
                ("X-Api-Key", "key-1234567890"),
                ("Accept", "application/json"),
            ]
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .into(),
            env: [
                ("GITHUB_TOKEN", "ghp-1234567890"),
                ("NODE_ENV", "production"),
            ]
            .map(|(n, v)| (n.to_owned(), v.to_owned()))
            .into(),
            client_id: Some("id".to_owned()),
            client_secret: Some("cs-1234567890".to_owned()),
            ..Default::default()
        };
        let mut config = crate::config::Config::default();
        config.servers.insert("s".to_owned(), server);
        let secrets = Secrets::from_config(&config);
        let guard = Guard::new(secrets.guarded.iter());
        for secret in [
            "hdr-tok-1234567",
            "key-1234567890",
            "ghp-1234567890",
            "cs-1234567890",
            "pw-1234567890",
            "q-1234567890",
        ] {
            assert!(guard.finds(secret.as_bytes()), "{secret}");
        }
        for plain in ["application/json", "production", "eu-west-12345"] {
            assert!(!guard.finds(plain.as_bytes()), "{plain}");
        }
    }

    /// Secrets learnt at run time are bounded: past 256 the oldest go, the newest stay.
    #[test]
    fn learnt_secrets_are_bounded_oldest_first() {
        for n in 0..(MAX_LEARNT + 10) {
            learn(&format!("learnt-token-{n:05}"));
        }
        let guard = guard();
        assert!(guard.finds(format!("learnt-token-{:05}", MAX_LEARNT + 9).as_bytes()));
        assert!(!guard.finds(b"learnt-token-00000"));
        assert_eq!(redact("x learnt-token-00265 y"), "x [REDACTED] y");
        let known = KNOWN.lock().unwrap();
        assert!(known.as_ref().unwrap().learnt.len() <= MAX_LEARNT);
    }
}
