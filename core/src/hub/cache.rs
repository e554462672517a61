//! What the Hub keeps of the servers' answers, by their own caching hints or the operator's
//! word, in the process (each replica its own).
//!
//! **Resource reads** (SEP-2549, MCP 2026-07-28): a `resources/read` result with `ttlMs` > 0
//! is answered from here until the ttl passes, or the server says the resource changed
//! (`notifications/resources/updated` for it, or `notifications/resources/list_changed`: then
//! every read of that server is dropped). `cacheScope: "private"` keeps a result for the client
//! session that read it; `"public"` shares it among every session. A result with `ttlMs` but no
//! `cacheScope` (a server that half-follows the SEP) is taken as private: sharing is the
//! server's to allow.
//!
//! **Tool results** (`[servers.<name>.cache]`, see [`crate::config::ResultCache`]): MCP gives
//! them no hints, so only the operator's opt-in keeps them, for its ttl and scope, by tool and
//! canonical arguments; a server's tools list changing drops its results.
//!
//! Each is bounded: at most [`MAX_ENTRIES`] results and [`MAX_BYTES`] bytes (their JSON), a
//! result larger than [`MAX_ENTRY_BYTES`] is not kept, and no ttl is taken as longer than
//! [`MAX_TTL`]. When full, expired results go first, then the oldest.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use rmcp::model::{CacheScope, CallToolResult, ReadResourceResult};
use serde::Serialize;

/// The most results kept at once.
pub const MAX_ENTRIES: usize = 1024;
/// The most bytes (the results' JSON) kept at once: 16 MiB.
pub const MAX_BYTES: usize = 16 << 20;
/// The largest result kept: 1 MiB. A larger one is read every time.
pub const MAX_ENTRY_BYTES: usize = 1 << 20;
/// The longest a result is kept, whatever its `ttlMs`: a day.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

/// One kept answer: by server, what it answers (a URI, a tool and its arguments), and the
/// session for a private one.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Key {
    server: String,
    item: String,
    /// `None`: public, any session may be answered with it.
    session: Option<String>,
}

struct Entry<V> {
    value: V,
    until: Instant,
    bytes: usize,
    /// When it was kept, in insertion order (the oldest goes first when full).
    order: u64,
}

struct State<V> {
    entries: HashMap<Key, Entry<V>>,
    bytes: usize,
    next: u64,
}

/// Kept answers of every server, bounded.
pub struct Kept<V> {
    state: Mutex<State<V>>,
}

impl<V> Default for Kept<V> {
    fn default() -> Self {
        Kept {
            state: Mutex::new(State {
                entries: HashMap::new(),
                bytes: 0,
                next: 0,
            }),
        }
    }
}

/// The kept resource reads.
pub type Reads = Kept<ReadResourceResult>;

/// The kept tool results, keyed by tool and canonical arguments ([`Calls::item`]).
pub type Calls = Kept<CallToolResult>;

impl<V: Clone + Serialize> Kept<V> {
    /// The answer kept for `item` of `server` that `session` may be answered with, while
    /// fresh.
    pub fn get(&self, server: &str, item: &str, session: Option<&str>) -> Option<V> {
        self.fresh(server, item, session).map(|(value, _)| value)
    }

    /// [`Kept::get`], with how long the answer stays fresh.
    pub fn fresh(&self, server: &str, item: &str, session: Option<&str>) -> Option<(V, Duration)> {
        let mut state = self.lock();
        let now = Instant::now();
        let mut keys = vec![Key {
            server: server.to_owned(),
            item: item.to_owned(),
            session: None,
        }];
        if let Some(session) = session {
            keys.insert(
                0,
                Key {
                    server: server.to_owned(),
                    item: item.to_owned(),
                    session: Some(session.to_owned()),
                },
            );
        }
        for key in keys {
            match state.entries.get(&key) {
                Some(entry) if entry.until > now => {
                    return Some((entry.value.clone(), entry.until - now));
                }
                Some(_) => state.remove(&key),
                None => {}
            }
        }
        None
    }

    /// Keeps `value` as the answer to `item` of `server` for `ttl`: for `session` only, or
    /// for every session (`None`). Whether it was kept (not when larger than
    /// [`MAX_ENTRY_BYTES`], or with no ttl).
    pub fn keep(
        &self,
        (server, item): (&str, &str),
        session: Option<&str>,
        value: &V,
        ttl: Duration,
    ) -> bool {
        if ttl.is_zero() {
            return false;
        }
        // What it answers and for whom are held too: counted with the value.
        let bytes = serde_json::to_vec(value)
            .map_or(usize::MAX, |json| json.len())
            .saturating_add(item.len() + session.map_or(0, str::len));
        if bytes > MAX_ENTRY_BYTES {
            return false;
        }
        let now = Instant::now();
        let key = Key {
            server: server.to_owned(),
            item: item.to_owned(),
            session: session.map(str::to_owned),
        };
        let mut state = self.lock();
        state.remove(&key);
        state.make_room(bytes, now);
        let order = state.next;
        state.next += 1;
        state.bytes += bytes;
        state.entries.insert(
            key,
            Entry {
                value: value.clone(),
                until: now + ttl.min(MAX_TTL),
                bytes,
                order,
            },
        );
        true
    }

    /// Drops every kept answer to `item` of `server` (every session's): the server said it
    /// changed.
    pub fn forget_item(&self, server: &str, item: &str) {
        self.lock()
            .retain(|key| !(key.server == server && key.item == item));
    }

    /// Drops every kept answer of `server`: what it offers changed, or it went away.
    pub fn forget_server(&self, server: &str) {
        self.lock().retain(|key| key.server != server);
    }

    /// How many answers are kept now, and their bytes.
    #[cfg(test)]
    pub fn size(&self) -> (usize, usize) {
        let state = self.lock();
        (state.entries.len(), state.bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<V>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Reads {
    /// Keeps `result` (a read of `uri` of `server` by `session`) when its hints allow: a
    /// `ttlMs` above zero, and a session to keep a private one for. Whether it was kept.
    pub fn put(
        &self,
        server: &str,
        uri: &str,
        session: Option<&str>,
        result: &ReadResourceResult,
    ) -> bool {
        let Some(ttl) = result.ttl_ms.filter(|ttl| *ttl > 0) else {
            return false;
        };
        let session = match result.cache_scope {
            Some(CacheScope::Public) => None,
            // Private, absent, or a scope this rmcp does not know: kept for the session only.
            _ => match session {
                Some(session) => Some(session),
                None => return false,
            },
        };
        self.keep((server, uri), session, result, Duration::from_millis(ttl))
    }

    /// The read of `uri` kept for `session`, while fresh, saying how long it stays so: its
    /// `ttlMs` is what is left of the server's (a client that keeps it in turn keeps it no
    /// longer than the server allowed from when it was read).
    pub fn read(
        &self,
        server: &str,
        uri: &str,
        session: Option<&str>,
    ) -> Option<ReadResourceResult> {
        let (mut result, left) = self.fresh(server, uri, session)?;
        // At least 1: a result kept is fresh, and 0 would say it is not.
        let left = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).max(1);
        result.ttl_ms = Some(result.ttl_ms.map_or(left, |ttl| ttl.min(left)));
        Some(result)
    }

    /// [`Kept::forget_item`] of a resource's reads.
    pub fn forget_uri(&self, server: &str, uri: &str) {
        self.forget_item(server, uri);
    }
}

impl Calls {
    /// What a call of `tool` with `arguments` is kept under: the same call, whatever order
    /// its arguments' keys came in (the SHA-256 of their canonical JSON: a program's large
    /// arguments are not held).
    pub fn item(tool: &str, arguments: &serde_json::Value) -> String {
        let canonical = crate::relay::canonical(arguments);
        let digest = ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes());
        format!("{tool}\n{}", crate::relay::hex(digest.as_ref()))
    }
}

impl<V> State<V> {
    fn remove(&mut self, key: &Key) {
        if let Some(entry) = self.entries.remove(key) {
            self.bytes -= entry.bytes;
        }
    }

    fn retain(&mut self, keep: impl Fn(&Key) -> bool) {
        let mut freed = 0;
        self.entries.retain(|key, entry| {
            let kept = keep(key);
            if !kept {
                freed += entry.bytes;
            }
            kept
        });
        self.bytes -= freed;
    }

    /// Room for one more result of `bytes`: the expired ones go, then the oldest.
    fn make_room(&mut self, bytes: usize, now: Instant) {
        let full = |state: &State<V>| {
            state.entries.len() >= MAX_ENTRIES || state.bytes + bytes > MAX_BYTES
        };
        if !full(self) {
            return;
        }
        self.retain_fresh(now);
        while full(self) {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, entry)| entry.order)
                .map(|(key, _)| key.clone())
            else {
                return;
            };
            self.remove(&oldest);
        }
    }

    fn retain_fresh(&mut self, now: Instant) {
        let mut freed = 0;
        self.entries.retain(|_, entry| {
            let fresh = entry.until > now;
            if !fresh {
                freed += entry.bytes;
            }
            fresh
        });
        self.bytes -= freed;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rmcp::model::ResourceContents;

    use super::*;

    fn read(text: &str, ttl: Option<u64>, scope: Option<CacheScope>) -> ReadResourceResult {
        let mut result = ReadResourceResult::new(vec![ResourceContents::text(text, "test://r")]);
        result.ttl_ms = ttl;
        result.cache_scope = scope;
        result
    }

    #[test]
    fn public_is_shared_private_is_not() {
        let reads = Reads::default();
        assert!(reads.put(
            "s",
            "test://p",
            Some("a"),
            &read("p", Some(60_000), Some(CacheScope::Public))
        ));
        assert!(reads.put(
            "s",
            "test://q",
            Some("a"),
            &read("q", Some(60_000), Some(CacheScope::Private))
        ));
        assert!(reads.get("s", "test://p", Some("b")).is_some());
        assert!(reads.get("s", "test://q", Some("a")).is_some());
        assert!(reads.get("s", "test://q", Some("b")).is_none());
        assert!(reads.get("s", "test://q", None).is_none());
    }

    #[test]
    fn a_kept_read_says_what_is_left_of_its_ttl() {
        let reads = Reads::default();
        let kept = read("p", Some(60_000), Some(CacheScope::Public));
        assert!(reads.put("s", "test://p", None, &kept));
        std::thread::sleep(Duration::from_millis(30));
        let again = reads.read("s", "test://p", Some("b")).unwrap();
        let left = again.ttl_ms.unwrap();
        assert!((1..=59_970).contains(&left), "{left}");
        assert_eq!(again.cache_scope, Some(CacheScope::Public));
        assert_eq!(again.contents, kept.contents);
    }

    #[test]
    fn without_a_ttl_nothing_is_kept() {
        let reads = Reads::default();
        assert!(!reads.put(
            "s",
            "u",
            Some("a"),
            &read("x", None, Some(CacheScope::Public))
        ));
        assert!(!reads.put(
            "s",
            "u",
            Some("a"),
            &read("x", Some(0), Some(CacheScope::Public))
        ));
        // Private (or unscoped) with no session to keep it for.
        assert!(!reads.put("s", "u", None, &read("x", Some(9), None)));
        assert_eq!(reads.size(), (0, 0));
    }

    #[test]
    fn a_kept_read_expires_and_is_forgotten() {
        let reads = Reads::default();
        reads.put(
            "s",
            "u",
            Some("a"),
            &read("x", Some(1), Some(CacheScope::Public)),
        );
        std::thread::sleep(Duration::from_millis(5));
        assert!(reads.get("s", "u", Some("a")).is_none());
        assert_eq!(reads.size(), (0, 0));
        reads.put("s", "u", Some("a"), &read("x", Some(60_000), None));
        reads.put("s", "v", Some("a"), &read("x", Some(60_000), None));
        reads.put("t", "u", Some("a"), &read("x", Some(60_000), None));
        reads.forget_uri("s", "u");
        assert!(reads.get("s", "u", Some("a")).is_none());
        assert!(reads.get("s", "v", Some("a")).is_some());
        reads.forget_server("s");
        assert!(reads.get("s", "v", Some("a")).is_none());
        assert!(reads.get("t", "u", Some("a")).is_some());
    }

    #[test]
    fn a_tool_call_is_kept_by_its_canonical_arguments_for_its_scope() {
        let calls = Calls::default();
        let result = CallToolResult::success(vec![rmcp::model::ContentBlock::text("12")]);
        let one = Calls::item("add", &serde_json::json!({"a": 1, "b": 2}));
        let same = Calls::item("add", &serde_json::json!({"b": 2, "a": 1}));
        let other = Calls::item("add", &serde_json::json!({"a": 2, "b": 2}));
        assert_eq!(one, same);
        assert!(calls.keep(("s", &one), Some("a"), &result, Duration::from_secs(60)));
        assert!(calls.get("s", &same, Some("a")).is_some());
        assert!(calls.get("s", &same, Some("b")).is_none());
        assert!(calls.get("s", &other, Some("a")).is_none());
        assert!(calls.keep(("s", &other), None, &result, Duration::from_secs(60)));
        assert!(calls.get("s", &other, Some("b")).is_some());
        assert!(!calls.keep(("s", &one), None, &result, Duration::ZERO));
        calls.forget_server("s");
        assert_eq!(calls.size(), (0, 0));
        // Huge arguments are kept under their digest, not held whole.
        let huge = Calls::item(
            "add",
            &serde_json::json!({"a": "x".repeat(MAX_ENTRY_BYTES)}),
        );
        assert!(huge.len() < 100, "{}", huge.len());
    }

    #[test]
    fn what_an_answer_is_kept_under_counts_against_the_bounds() {
        let calls = Calls::default();
        let result = CallToolResult::success(vec![rmcp::model::ContentBlock::text("1")]);
        let long = "k".repeat(MAX_ENTRY_BYTES);
        assert!(!calls.keep(("s", &long), None, &result, Duration::from_secs(60)));
        let half = "k".repeat(MAX_ENTRY_BYTES / 2);
        for n in 0..40 {
            calls.keep(
                ("s", &format!("{n}{half}")),
                Some("session"),
                &result,
                Duration::from_secs(60),
            );
        }
        assert!(calls.size().1 <= MAX_BYTES, "{:?}", calls.size());
    }

    #[test]
    fn bounded_in_entries_and_bytes() {
        let reads = Reads::default();
        for n in 0..MAX_ENTRIES + 10 {
            reads.put(
                "s",
                &n.to_string(),
                None,
                &read("x", Some(60_000), Some(CacheScope::Public)),
            );
        }
        assert_eq!(reads.size().0, MAX_ENTRIES);
        // The oldest went first.
        assert!(reads.get("s", "0", None).is_none());
        assert!(
            reads
                .get("s", &(MAX_ENTRIES + 9).to_string(), None)
                .is_some()
        );
        let big = "x".repeat(MAX_ENTRY_BYTES);
        assert!(!reads.put(
            "s",
            "big",
            None,
            &read(&big, Some(60_000), Some(CacheScope::Public))
        ));
        let large = "x".repeat(MAX_ENTRY_BYTES / 2);
        for n in 0..40 {
            reads.put(
                "s",
                &format!("l{n}"),
                None,
                &read(&large, Some(60_000), Some(CacheScope::Public)),
            );
        }
        assert!(reads.size().1 <= MAX_BYTES);
    }
}
