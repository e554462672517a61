//! Counting `o200k_base` tokens in a seventh of the memory tiktoken's encoder holds.
//!
//! tiktoken-rs's `CoreBPE` keeps each of the encoding's 200,000 tokens three times (an encoder
//! map, a decoder map and a sorted list, each token its own allocation) and 256 copies of its
//! split pattern: about 27 MiB for as long as the process runs. A count needs only the ranks:
//! here every token's bytes sit in one buffer, each rank's span of it in a table, and a hash
//! table of ranks finds a token's rank by its bytes: about 4 MiB. The table is read once from tiktoken-rs's own encoding (built, read, then dropped),
//! the text is split by the encoding's own pattern, and each piece is merged as tiktoken merges
//! it (the lowest-ranked adjacent pair first, the leftmost of equal ranks), in O(n log n) for a
//! piece of n bytes. The counts equal tiktoken's; the tests compare them on generated texts.

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    hash::{BuildHasher, BuildHasherDefault},
};

use rustc_hash::FxHasher;

/// A rank of the encoding: a token's number, and its merge priority (lower merges first).
type Rank = u32;

/// The encoding's tokens and ranks, and its split pattern.
pub struct Counter {
    /// Every token's bytes, one after another.
    bytes: Box<[u8]>,
    /// By rank: where its token's bytes start and end in `bytes` (an empty span: no token).
    spans: Box<[(u32, u32)]>,
    /// The ranks, found by their token's bytes.
    ranks: hashbrown::HashTable<Rank>,
    pattern: fancy_regex::Regex,
}

/// How token bytes are hashed.
const HASHER: BuildHasherDefault<FxHasher> = BuildHasherDefault::new();

/// The tokens of `o200k_base` above which a rank is a special token's (`<|endoftext|>`, ...),
/// never produced by ordinary text.
const FIRST_SPECIAL: Rank = 199_999;

impl Counter {
    /// Reads `o200k_base` from tiktoken-rs. `Err` when its tables or pattern do not read (a
    /// tiktoken-rs that changed them).
    pub fn o200k_base() -> Result<Counter, String> {
        let core = tiktoken_rs::o200k_base().map_err(|e| e.to_string())?;
        let mut tokens = Vec::with_capacity(FIRST_SPECIAL as usize);
        let mut bytes = 0usize;
        for rank in 0..FIRST_SPECIAL {
            if let Ok(token) = core.decode_bytes(&[rank]) {
                bytes += token.len();
                tokens.push((rank, token));
            }
        }
        drop(core);
        let mut buffer = Vec::with_capacity(bytes);
        let mut spans = vec![(0u32, 0u32); FIRST_SPECIAL as usize];
        for (rank, token) in &tokens {
            let start = u32::try_from(buffer.len()).map_err(|e| e.to_string())?;
            buffer.extend_from_slice(token);
            let end = u32::try_from(buffer.len()).map_err(|e| e.to_string())?;
            spans[*rank as usize] = (start, end);
        }
        let mut ranks = hashbrown::HashTable::with_capacity(tokens.len());
        for (rank, token) in &tokens {
            let hash = HASHER.hash_one(token.as_slice());
            ranks.insert_unique(hash, *rank, |rank: &Rank| {
                let (start, end) = spans[*rank as usize];
                HASHER.hash_one(&buffer[start as usize..end as usize])
            });
        }
        drop(tokens);
        let pattern =
            fancy_regex::Regex::new(tiktoken_rs::O200K_BASE_PAT_STR).map_err(|e| e.to_string())?;
        Ok(Counter {
            bytes: buffer.into_boxed_slice(),
            spans: spans.into_boxed_slice(),
            ranks,
            pattern,
        })
    }

    /// The rank of the token whose bytes are `token`, if one is.
    fn rank_of(&self, token: &[u8]) -> Option<Rank> {
        let hash = HASHER.hash_one(token);
        self.ranks
            .find(hash, |rank| {
                let (start, end) = self.spans[*rank as usize];
                &self.bytes[start as usize..end as usize] == token
            })
            .copied()
    }

    /// The tokens of `text`, as tiktoken's `encode_ordinary(text).len()` counts them.
    pub fn count(&self, text: &str) -> usize {
        self.pattern
            .find_iter(text)
            .filter_map(Result::ok)
            .map(|piece| self.count_piece(piece.as_str().as_bytes()))
            .sum()
    }

    /// The tokens one piece of the split merges into.
    fn count_piece(&self, piece: &[u8]) -> usize {
        let n = piece.len();
        if n <= 1 || self.rank_of(piece).is_some() {
            return n.min(1);
        }
        let rank = |start: usize, end: usize| self.rank_of(&piece[start..end]);
        // The parts, as a list over their start bytes: `end[i]` is where the part starting at
        // `i` ends, `before[i]` the start of the part before it; `merged[i]` once the part at
        // `i` has joined the one before.
        let mut end: Vec<usize> = (1..=n).collect();
        let mut before: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut merged = vec![false; n];
        // Every adjacent pair that is a token, by (rank, start): popped lowest first. An entry
        // whose pair changed since is told by its rank no longer matching (or by a merged start).
        let mut pairs = BinaryHeap::with_capacity(n);
        for i in 0..n - 1 {
            if let Some(r) = rank(i, i + 2) {
                pairs.push(Reverse((r, i)));
            }
        }
        let mut parts = n;
        while let Some(Reverse((r, start))) = pairs.pop() {
            let next = end[start];
            if merged[start] || next >= n || rank(start, end[next]) != Some(r) {
                continue;
            }
            let joined = end[next];
            merged[next] = true;
            end[start] = joined;
            if joined < n {
                before[joined] = start;
            }
            parts -= 1;
            let first = before[start];
            if first != usize::MAX
                && let Some(r) = rank(first, joined)
            {
                pairs.push(Reverse((r, first)));
            }
            if joined < n
                && let Some(r) = rank(start, end[joined])
            {
                pairs.push(Reverse((r, start)));
            }
        }
        parts
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    fn counter() -> &'static Counter {
        static COUNTER: std::sync::LazyLock<Counter> =
            std::sync::LazyLock::new(|| Counter::o200k_base().unwrap());
        &COUNTER
    }

    fn tiktoken(text: &str) -> usize {
        tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(text)
            .len()
    }

    #[test]
    fn counts_as_tiktoken_does() {
        let long_word = "a".repeat(5000);
        let long_mixed = "ab1-".repeat(3000);
        let texts = [
            "",
            "hello world",
            "  leading and trailing  \n\n",
            "{\"content\":[{\"type\":\"text\",\"text\":\"read 1\"}],\"isError\":false}",
            "export default await tool_0002({ id: 'rec-7' });",
            "Grüße, 世界! Ünïcödé — emoji 🎉🎉 and 日本語のテキスト",
            "camelCaseIdentifiers and snake_case_ones, CAPS and I'm you're we'll",
            "1234567890 3.14159 1e10 0xdeadbeef",
            "\t\r\n\u{0}\u{200b}zero\u{200d}width",
            long_word.as_str(),
            long_mixed.as_str(),
        ];
        for text in texts {
            assert_eq!(counter().count(text), tiktoken(text), "{text:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Any text: letters of many scripts, digits, punctuation, spaces and controls.
        #[test]
        fn any_text_counts_as_tiktoken_counts_it(text in "(?s).{0,200}") {
            prop_assert_eq!(counter().count(&text), tiktoken(&text));
        }

        /// Long runs without a split, where the merge order decides the count.
        #[test]
        fn long_pieces_count_as_tiktoken_counts_them(
            unit in "[a-zA-Z0-9é世 ]{1,6}",
            times in 1usize..400,
        ) {
            let text = unit.repeat(times);
            prop_assert_eq!(counter().count(&text), tiktoken(&text));
        }
    }
}
