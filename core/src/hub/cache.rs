//! Resource reads kept by the servers' own caching hints (SEP-2549, MCP 2026-07-28): a
//! `resources/read` result with `ttlMs` > 0 is answered from here until the ttl passes, or the
//! server says the resource changed (`notifications/resources/updated` for it, or
//! `notifications/resources/list_changed`: then every read of that server is dropped).
//!
//! `cacheScope: "private"` keeps a result for the client session that read it; `"public"`
//! shares it among every session. A result with `ttlMs` but no `cacheScope` (a server that
//! half-follows the SEP) is taken as private: sharing is the server's to allow.
//!
//! Bounded: at most [`MAX_ENTRIES`] results and [`MAX_BYTES`] bytes (their JSON), a result
//! larger than [`MAX_ENTRY_BYTES`] is not kept, and no ttl is taken as longer than
//! [`MAX_TTL`]. When full, expired results go first, then the oldest.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use rmcp::model::{CacheScope, ReadResourceResult};

/// The most results kept at once.
pub const MAX_ENTRIES: usize = 1024;
/// The most bytes (the results' JSON) kept at once: 16 MiB.
pub const MAX_BYTES: usize = 16 << 20;
/// The largest result kept: 1 MiB. A larger one is read every time.
pub const MAX_ENTRY_BYTES: usize = 1 << 20;
/// The longest a result is kept, whatever its `ttlMs`: a day.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 3600);

/// One kept read: by server, the server's own URI, and the session for a private one.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Key {
    server: String,
    uri: String,
    /// `None`: public, any session may be answered with it.
    session: Option<String>,
}

struct Entry {
    result: ReadResourceResult,
    until: Instant,
    bytes: usize,
    /// When it was kept, in insertion order (the oldest goes first when full).
    order: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    bytes: usize,
    next: u64,
}

/// The kept resource reads of every server. In the process only: each replica keeps its own.
#[derive(Default)]
pub struct Reads {
    state: Mutex<State>,
}

impl Reads {
    /// The result kept for `uri` of `server` that `session` may be answered with, while fresh.
    pub fn get(
        &self,
        server: &str,
        uri: &str,
        session: Option<&str>,
    ) -> Option<ReadResourceResult> {
        let mut state = self.lock();
        let now = Instant::now();
        let mut keys = vec![Key {
            server: server.to_owned(),
            uri: uri.to_owned(),
            session: None,
        }];
        if let Some(session) = session {
            keys.insert(
                0,
                Key {
                    server: server.to_owned(),
                    uri: uri.to_owned(),
                    session: Some(session.to_owned()),
                },
            );
        }
        for key in keys {
            match state.entries.get(&key) {
                Some(entry) if entry.until > now => return Some(entry.result.clone()),
                Some(_) => state.remove(&key),
                None => {}
            }
        }
        None
    }

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
                Some(session) => Some(session.to_owned()),
                None => return false,
            },
        };
        let bytes = serde_json::to_vec(result).map_or(usize::MAX, |json| json.len());
        if bytes > MAX_ENTRY_BYTES {
            return false;
        }
        let now = Instant::now();
        let key = Key {
            server: server.to_owned(),
            uri: uri.to_owned(),
            session,
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
                result: result.clone(),
                until: now + Duration::from_millis(ttl).min(MAX_TTL),
                bytes,
                order,
            },
        );
        true
    }

    /// Drops every kept read of `uri` of `server` (every session's): the server said it
    /// changed.
    pub fn forget_uri(&self, server: &str, uri: &str) {
        self.lock()
            .retain(|key| !(key.server == server && key.uri == uri));
    }

    /// Drops every kept read of `server`: its resource list changed, or it went away.
    pub fn forget_server(&self, server: &str) {
        self.lock().retain(|key| key.server != server);
    }

    /// How many results are kept now, and their bytes.
    #[cfg(test)]
    pub fn size(&self) -> (usize, usize) {
        let state = self.lock();
        (state.entries.len(), state.bytes)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
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
        let full =
            |state: &State| state.entries.len() >= MAX_ENTRIES || state.bytes + bytes > MAX_BYTES;
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
