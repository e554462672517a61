//! Answers an engine gives a program again without asking the host: the same call of the same
//! execution, while the host said its answer stays fresh ([`crate::sandbox::Answer::fresh`]: a
//! resource read its server said may be kept, where no policy judges the server and no journal
//! records the run). A program that reads one resource in a loop crosses to the host once.
//!
//! Bounded: at most [`MAX_ENTRIES`] answers and [`MAX_BYTES`] of their JSON text per execution;
//! past that an answer is not kept (the next call asks the host, which has its own cache).

use std::{
    collections::{BTreeMap, HashMap},
    time::{Duration, Instant},
};

/// The most answers one execution keeps.
pub(super) const MAX_ENTRIES: usize = 256;
/// The most bytes of answers (their JSON text) one execution keeps: 4 MiB.
pub(super) const MAX_BYTES: usize = 4 << 20;

/// One execution's answers to give again, and how many it gave.
#[derive(Default)]
pub(super) struct Memo {
    /// By [`key`]: the answer's JSON text and until when it may be given.
    answers: HashMap<String, (String, Instant)>,
    bytes: usize,
    /// Answers given again, by server.
    given: BTreeMap<String, u32>,
}

/// What a call is kept under: only reads are ever fresh, so only reads are looked up (a
/// program's other calls cost no key).
pub(super) fn key(server: &str, tool: &str, arguments: &serde_json::Value) -> Option<String> {
    (tool == crate::hub::READ_RESOURCE).then(|| format!("{server}\n{arguments}"))
}

impl Memo {
    /// The answer to give again for `key`, while fresh; counted as given for `server`.
    pub(super) fn give(&mut self, server: &str, key: &str, now: Instant) -> Option<&str> {
        match self.answers.get(key) {
            Some((_, until)) if *until > now => {}
            Some(_) => {
                if let Some((text, _)) = self.answers.remove(key) {
                    self.bytes -= text.len();
                }
                return None;
            }
            None => return None,
        }
        *self.given.entry(server.to_owned()).or_default() += 1;
        self.answers.get(key).map(|(text, _)| text.as_str())
    }

    /// Keeps `text` as the answer to `key` for `fresh`, if it fits.
    pub(super) fn keep(&mut self, key: String, text: &str, fresh: Duration, now: Instant) {
        if let Some((old, _)) = self.answers.remove(&key) {
            self.bytes -= old.len();
        }
        if self.answers.len() >= MAX_ENTRIES || self.bytes + text.len() > MAX_BYTES {
            let mut freed = 0;
            self.answers.retain(|_, (text, until)| {
                let fresh = *until > now;
                if !fresh {
                    freed += text.len();
                }
                fresh
            });
            self.bytes -= freed;
            if self.answers.len() >= MAX_ENTRIES || self.bytes + text.len() > MAX_BYTES {
                return;
            }
        }
        self.bytes += text.len();
        self.answers.insert(key, (text.to_owned(), now + fresh));
    }

    /// The answers given again, by server.
    pub(super) fn given(&mut self) -> BTreeMap<String, u32> {
        std::mem::take(&mut self.given)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_given_again_while_fresh_and_counted() {
        let mut memo = Memo::default();
        let now = Instant::now();
        let read = key(
            "s",
            crate::hub::READ_RESOURCE,
            &serde_json::json!({"uri": "u"}),
        );
        let read = read.unwrap_or_default();
        assert_eq!(key("s", "echo", &serde_json::json!({})), None);
        assert_eq!(memo.give("s", &read, now), None);
        memo.keep(read.clone(), "[1]", Duration::from_secs(1), now);
        assert_eq!(memo.give("s", &read, now), Some("[1]"));
        assert_eq!(
            memo.give("s", &read, now + Duration::from_millis(999)),
            Some("[1]")
        );
        assert_eq!(memo.give("s", &read, now + Duration::from_secs(1)), None);
        assert_eq!(memo.given(), BTreeMap::from([("s".to_owned(), 2)]));
        assert_eq!(memo.bytes, 0);
    }

    #[test]
    fn it_keeps_no_more_than_its_bounds() {
        let mut memo = Memo::default();
        let now = Instant::now();
        let long = Duration::from_secs(60);
        for n in 0..MAX_ENTRIES + 10 {
            memo.keep(format!("k{n}"), "x", long, now);
        }
        assert_eq!(memo.answers.len(), MAX_ENTRIES);
        let mut memo = Memo::default();
        let large = "y".repeat(MAX_BYTES / 2 + 1);
        memo.keep("a".to_owned(), &large, long, now);
        memo.keep("b".to_owned(), &large, long, now);
        assert_eq!(memo.answers.len(), 1);
        assert!(memo.bytes <= MAX_BYTES);
        // Expired answers make room.
        memo.keep("c".to_owned(), &large, long, now + long);
        assert_eq!(memo.answers.len(), 1);
        assert!(memo.give("s", "c", now + long).is_some());
    }
}
