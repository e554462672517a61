//! Counting `o200k_base` tokens in a seventh of the memory tiktoken's encoder holds.
//!
//! tiktoken-rs's `CoreBPE` keeps each of the encoding's 200,000 tokens three times (an encoder
//! map, a decoder map and a sorted list, each token its own allocation) and 256 copies of its
//! split pattern: about 27 MiB for as long as the process runs. A count needs only the ranks:
//! here the tokens are read where the binary holds them ([`TOKENS`]), each rank's span of them
//! in a table, and a hash table of ranks finds a token's rank by its bytes: about 3 MiB, made
//! in a few milliseconds (building tiktoken-rs's encoding to read it took about 0.3 s of CPU at
//! each start, which a gateway's first answers waited for). The text is split as the encoding's
//! own pattern splits it (see [`Split`]), and each piece is merged as tiktoken merges it (the
//! lowest-ranked adjacent pair first, the leftmost of equal ranks), in O(n log n) for a piece of
//! n bytes. The counts equal tiktoken's; the tests compare them on generated texts, and the
//! tokens and the pattern with tiktoken-rs's own.

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    hash::{BuildHasher, BuildHasherDefault},
    sync::Mutex,
};

use regex_automata::{Input, meta};

use rustc_hash::FxHasher;

/// A rank of the encoding: a token's number, and its merge priority (lower merges first).
type Rank = u32;

/// `o200k_base`'s tokens in rank order from rank 0, each as its length (one byte) and its
/// bytes: the encoding's file (OpenAI's tiktoken, MIT: `o200k_base.tokens.LICENSE`) without its
/// base64 and its ranks. Made, and checked against tiktoken-rs, by the test
/// `the_tokens_are_tiktokens` (`RUNBYTE_WRITE_TOKENS=1` writes it again).
static TOKENS: &[u8] = include_bytes!("o200k_base.tokens");

/// `o200k_base`'s split pattern, as tiktoken-rs has it (`O200K_BASE_PAT_STR`; a test compares).
const PATTERN: &str = concat!(
    r#"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"#,
    "|",
    r#"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"#,
    "|",
    r#"\p{N}{1,3}"#,
    "|",
    r#" ?[^\s\p{L}\p{N}]+[\r\n/]*"#,
    "|",
    r#"\s*[\r\n]+"#,
    "|",
    r#"\s+(?!\S)"#,
    "|",
    r#"\s+"#
);

/// The encoding's tokens and ranks, and its split pattern.
pub struct Counter {
    /// By rank: where its token's bytes start and end in [`TOKENS`] (an empty span: no token).
    spans: Box<[(u32, u32)]>,
    /// The ranks, found by their token's bytes.
    ranks: hashbrown::HashTable<Rank>,
    split: Split,
}

/// The encoding's split pattern, run without its one lookahead. tiktoken's pattern has
/// `\s+(?!\S)` before its last alternative, `\s+`, which needs a backtracking engine
/// (fancy-regex): on a result of many short pieces (base64, say) that engine was most of a
/// count's time. Without it, a finite-automaton regex matches the same pieces but one: where a
/// run of two or more whitespace characters (none of them a line break) is followed by
/// something else, `\s+(?!\S)` takes all of the run but its last character, which starts the
/// next piece (a word's leading space, say), while `\s+` takes the whole run. [`Split::pieces`]
/// gives that last character back. A run with a line break is matched by an alternative
/// before these two, the same either way.
struct Split {
    pattern: meta::Regex,
    /// Matching caches (the lazy DFA's states, built as texts need them), each taken by one count
    /// for its whole text and given back after: warm from one count to the next, whichever
    /// thread counts, for one lock a text. A cache of this thread's own went cold with each new
    /// counting thread: about 1.5 ms more for a result counted after 10 s idle.
    caches: Mutex<Vec<meta::Cache>>,
}

/// The most caches kept between counts (as many as count at once, here).
const MAX_CACHES: usize = 8;

/// What the lookahead alternative is, in tiktoken's pattern.
const LOOKAHEAD: &str = r"\s+(?!\S)|";

impl Split {
    /// `tiktoken`'s pattern less its lookahead. `Err` if the pattern does not have it where this
    /// expects it ([`PATTERN`] edited unlike tiktoken's, which a test compares it with).
    fn new(tiktoken: &str) -> Result<Split, String> {
        if tiktoken.matches(LOOKAHEAD).count() != 1 || !tiktoken.ends_with(r"|\s+") {
            return Err(format!(
                "the split pattern does not have `{LOOKAHEAD}` once before its last `\\s+`"
            ));
        }
        let pattern =
            meta::Regex::new(&tiktoken.replace(LOOKAHEAD, "")).map_err(|e| e.to_string())?;
        Ok(Split {
            pattern,
            caches: Mutex::new(Vec::new()),
        })
    }

    /// Calls `each` with every piece of `text`, in order, as tiktoken's pattern splits it.
    fn pieces(&self, text: &str, mut each: impl FnMut(&str)) {
        let kept = self.caches.lock().ok().and_then(|mut caches| caches.pop());
        let mut cache = kept.unwrap_or_else(|| self.pattern.create_cache());
        let mut at = 0;
        while let Some(found) = self
            .pattern
            .search_with(&mut cache, &Input::new(text).range(at..))
        {
            let piece = &text[found.range()];
            at = found.end();
            // A whitespace run `\s+` took whole, followed by something: all but its last
            // character is the piece, and that character starts the next.
            if at < text.len()
                && piece.chars().all(char::is_whitespace)
                && !piece.contains(['\r', '\n'])
                && let Some((last, _)) = piece.char_indices().next_back()
                && last > 0
            {
                each(&piece[..last]);
                at = found.start() + last;
                continue;
            }
            each(piece);
        }
        if let Ok(mut caches) = self.caches.lock()
            && caches.len() < MAX_CACHES
        {
            caches.push(cache);
        }
    }
}

/// The longest piece merged in place ([`Counter::count_short`]); longer ones by a heap.
const SHORT_PIECE: usize = 64;

/// The longest piece merged whole. A longer one (an unbroken run of letters, which real text
/// hardly has and a hostile server may send) has its first `MAX_PIECE` bytes merged and the rest
/// extrapolated from them, so that no piece costs more than one of this size: a 256 KiB run of
/// one letter took 40 ms of CPU to merge whole.
const MAX_PIECE: usize = 8 << 10;

/// The most bytes of one text's long pieces (over [`SHORT_PIECE`]) that are merged. Past them,
/// a long piece's tokens are extrapolated from those of the long pieces merged: text of many
/// pieces of a few kilobytes (runs of one letter and a space, say) took 36 ms of CPU per 256 KiB
/// to merge. Real text has few pieces over 64 bytes.
const LONG_BYTES: usize = 32 << 10;

/// A text's tokens, and whether part of them were extrapolated (see [`MAX_PIECE`] and
/// [`LONG_BYTES`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    pub tokens: usize,
    pub estimated: bool,
}

/// How token bytes are hashed.
const HASHER: BuildHasherDefault<FxHasher> = BuildHasherDefault::new();

/// The tokens of `o200k_base` above which a rank is a special token's (`<|endoftext|>`, ...),
/// never produced by ordinary text.
const FIRST_SPECIAL: Rank = 199_999;
/// The ordinary tokens of `o200k_base`: ranks 0 to 199,997 (199,998 is none).
const TOKEN_COUNT: usize = 199_998;

impl Counter {
    /// Reads `o200k_base` from [`TOKENS`]. `Err` when they do not read (cut short, or of another
    /// number than the encoding's).
    pub fn o200k_base() -> Result<Counter, String> {
        let mut spans = vec![(0u32, 0u32); FIRST_SPECIAL as usize];
        let (mut at, mut rank) = (0usize, 0usize);
        while at < TOKENS.len() {
            let start = at + 1;
            let end = start + usize::from(TOKENS[at]);
            let span = spans
                .get_mut(rank)
                .ok_or_else(|| format!("the o200k_base tokens hold more than {FIRST_SPECIAL}"))?;
            if end > TOKENS.len() {
                return Err(format!(
                    "the o200k_base tokens are cut short at rank {rank}"
                ));
            }
            *span = (
                u32::try_from(start).map_err(|e| e.to_string())?,
                u32::try_from(end).map_err(|e| e.to_string())?,
            );
            (at, rank) = (end, rank + 1);
        }
        if rank != TOKEN_COUNT {
            return Err(format!(
                "the o200k_base tokens hold {rank} tokens, not {TOKEN_COUNT}"
            ));
        }
        let mut ranks = hashbrown::HashTable::with_capacity(rank);
        for (rank, &(start, end)) in spans.iter().enumerate().take(TOKEN_COUNT) {
            let hash = HASHER.hash_one(&TOKENS[start as usize..end as usize]);
            ranks.insert_unique(hash, rank as Rank, |rank: &Rank| {
                let (start, end) = spans[*rank as usize];
                HASHER.hash_one(&TOKENS[start as usize..end as usize])
            });
        }
        let split = Split::new(PATTERN)?;
        Ok(Counter {
            spans: spans.into_boxed_slice(),
            ranks,
            split,
        })
    }

    /// The rank of the token whose bytes are `token`, if one is.
    fn rank_of(&self, token: &[u8]) -> Option<Rank> {
        let hash = HASHER.hash_one(token);
        self.ranks
            .find(hash, |rank| {
                let (start, end) = self.spans[*rank as usize];
                &TOKENS[start as usize..end as usize] == token
            })
            .copied()
    }

    /// The tokens of `text`, as tiktoken's `encode_ordinary(text).len()` counts them; but a
    /// piece over [`MAX_PIECE`] bytes is merged up to there, and long pieces past
    /// [`LONG_BYTES`] are not merged: their tokens are extrapolated (then `estimated`).
    pub fn count(&self, text: &str) -> Counted {
        let mut counted = Counted::default();
        // The bytes of long pieces merged so far, and their tokens.
        let (mut merged, mut merged_tokens) = (0usize, 0usize);
        self.split.pieces(text, |piece| {
            let piece = piece.as_bytes();
            if piece.len() <= SHORT_PIECE {
                counted.tokens += self.count_piece(piece);
                return;
            }
            let head = piece
                .len()
                .min(MAX_PIECE)
                .min(LONG_BYTES.saturating_sub(merged));
            let rate = if head > 0 {
                let tokens = self.count_piece(&piece[..head]);
                merged += head;
                merged_tokens += tokens;
                if head == piece.len() {
                    counted.tokens += tokens;
                    return;
                }
                tokens as f64 / head as f64
            } else {
                merged_tokens as f64 / merged as f64
            };
            counted.tokens += (rate * piece.len() as f64).round() as usize;
            counted.estimated = true;
        });
        counted
    }

    /// The tokens one piece of the split merges into.
    fn count_piece(&self, piece: &[u8]) -> usize {
        let n = piece.len();
        if n <= 1 || self.rank_of(piece).is_some() {
            return n.min(1);
        }
        if n <= SHORT_PIECE {
            return self.count_short(piece);
        }
        let rank = |start: usize, end: usize| self.rank_of(&piece[start..end]);
        // The parts, as a list over their start bytes: `end[i]` is where the part starting at
        // `i` ends, `before[i]` the start of the part before it; `merged[i]` once the part at
        // `i` has joined the one before.
        let mut end: Vec<usize> = (1..=n).collect();
        let mut before: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut merged = vec![false; n];
        // Every adjacent pair that is a token, by (rank, start) packed in one number: popped
        // lowest first. An entry whose pair changed since is told by its rank no longer matching
        // (or by a merged start). (A piece is at most `MAX_PIECE` long: its starts fit in 32
        // bits, and the heap's entries in half the room a pair of numbers took.)
        let entry = |rank: Rank, start: usize| Reverse((u64::from(rank) << 32) | start as u64);
        let mut pairs = BinaryHeap::with_capacity(n);
        for i in 0..n - 1 {
            if let Some(r) = rank(i, i + 2) {
                pairs.push(entry(r, i));
            }
        }
        let mut parts = n;
        while let Some(Reverse(packed)) = pairs.pop() {
            let (r, start) = (
                (packed >> 32) as Rank,
                (packed & u64::from(u32::MAX)) as usize,
            );
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
                pairs.push(entry(r, first));
            }
            if joined < n
                && let Some(r) = rank(start, end[joined])
            {
                pairs.push(entry(r, start));
            }
        }
        parts
    }

    /// [`Counter::count_piece`] for a piece of at most [`SHORT_PIECE`] bytes, as tiktoken merges
    /// it: the parts in an array on the stack, each with the rank of it joined to the next, and
    /// the leftmost lowest joined until none is a token. Most pieces are a few bytes: this
    /// allocates nothing for them.
    fn count_short(&self, piece: &[u8]) -> usize {
        const NONE: Rank = Rank::MAX;
        let n = piece.len();
        // `parts[i]`: where part `i` starts, and the rank of it joined to part `i + 1`; the last
        // entry is the piece's end.
        let mut parts = [(0usize, NONE); SHORT_PIECE + 1];
        for (i, part) in parts.iter_mut().enumerate().take(n + 1) {
            let rank = if i + 2 <= n {
                self.rank_of(&piece[i..i + 2])
            } else {
                None
            };
            *part = (i, rank.unwrap_or(NONE));
        }
        let mut len = n + 1;
        // The rank of part `i` joined to part `i + 1`, in `parts[..len]`.
        let joined = |parts: &[(usize, Rank)], len: usize, i: usize| {
            if i + 2 < len {
                self.rank_of(&piece[parts[i].0..parts[i + 2].0])
                    .unwrap_or(NONE)
            } else {
                NONE
            }
        };
        loop {
            let mut lowest = (NONE, 0);
            for (i, &(_, rank)) in parts[..len - 1].iter().enumerate() {
                if rank < lowest.0 {
                    lowest = (rank, i);
                }
            }
            let (rank, i) = lowest;
            if rank == NONE {
                return len - 1;
            }
            // Part `i` takes in part `i + 1`.
            parts.copy_within(i + 2..len, i + 1);
            len -= 1;
            parts[i].1 = joined(&parts, len, i);
            if i > 0 {
                parts[i - 1].1 = joined(&parts, len, i - 1);
            }
        }
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

    /// [`TOKENS`] are tiktoken-rs's `o200k_base` tokens, rank by rank, and [`PATTERN`] its
    /// pattern. `RUNBYTE_WRITE_TOKENS=1` writes the tokens from tiktoken-rs first (after a
    /// tiktoken-rs that changed them).
    #[test]
    fn the_tokens_are_tiktokens() {
        assert_eq!(PATTERN, tiktoken_rs::O200K_BASE_PAT_STR);
        let core = tiktoken_rs::o200k_base().unwrap();
        let tokens: Vec<Vec<u8>> = (0..TOKEN_COUNT as Rank)
            .map(|rank| core.decode_bytes(&[rank]).unwrap())
            .collect();
        for rank in TOKEN_COUNT as Rank..FIRST_SPECIAL {
            assert!(
                core.decode_bytes(&[rank]).is_err(),
                "rank {rank} is a token"
            );
        }
        if std::env::var_os("RUNBYTE_WRITE_TOKENS").is_some() {
            let mut file = Vec::new();
            for token in &tokens {
                file.push(u8::try_from(token.len()).unwrap());
                file.extend_from_slice(token);
            }
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/tokens/o200k_base.tokens");
            std::fs::write(path, file).unwrap();
            return;
        }
        let counter = counter();
        for (rank, token) in tokens.iter().enumerate() {
            let (start, end) = counter.spans[rank];
            assert_eq!(
                &TOKENS[start as usize..end as usize],
                token.as_slice(),
                "rank {rank}"
            );
            assert_eq!(counter.rank_of(token), Some(rank as Rank));
        }
        assert_eq!(counter.spans[TOKEN_COUNT], (0, 0));
    }

    /// A count takes a matching cache and gives it back: the next count, on any thread, finds it
    /// warm; as many are kept as counted at once, at most [`MAX_CACHES`].
    #[test]
    fn counts_share_their_matching_caches() {
        let counter = Counter::o200k_base().unwrap();
        let kept = || counter.split.caches.lock().unwrap().len();
        counter.count("hello world");
        assert_eq!(kept(), 1);
        std::thread::scope(|scope| {
            scope.spawn(|| counter.count("counted on another thread"));
        });
        assert_eq!(kept(), 1);
        let text = "some words, counted at once ".repeat(2000);
        let counts: Vec<Counted> = std::thread::scope(|scope| {
            let counting: Vec<_> = (0..16)
                .map(|_| scope.spawn(|| counter.count(&text)))
                .collect();
            counting.into_iter().map(|c| c.join().unwrap()).collect()
        });
        assert!(counts.iter().all(|c| *c == exact(tiktoken(&text))));
        assert!((1..=MAX_CACHES).contains(&kept()), "{} caches kept", kept());
    }

    fn tiktoken(text: &str) -> usize {
        tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(text)
            .len()
    }

    fn exact(tokens: usize) -> Counted {
        Counted {
            tokens,
            estimated: false,
        }
    }

    /// The costliest text to count exactly: 256 KiB (`MAX_COUNTED_BYTES`) of pieces of the
    /// longest size merged without a budget, runs of one letter that merge and merge again.
    /// Counted as tiktoken counts it; the time bound only catches a hang (release: ~14 ms).
    #[test]
    fn the_costliest_exact_text_counts_exactly_and_ends() {
        let text = format!(" {}", "x".repeat(SHORT_PIECE - 1))
            .repeat(crate::tokens::MAX_COUNTED_BYTES / SHORT_PIECE);
        let began = std::time::Instant::now();
        let counted = counter().count(&text);
        assert!(began.elapsed() < std::time::Duration::from_secs(60));
        assert_eq!(counted, exact(tiktoken(&text)));
    }

    /// Long pieces past `LONG_BYTES` are estimated from those merged, near their real count.
    #[test]
    fn long_pieces_past_the_budget_are_estimated_from_those_merged() {
        let text = format!("{} ", "x".repeat(4000)).repeat(10);
        let counted = counter().count(&text);
        let real = tiktoken(&text);
        assert!(counted.estimated);
        let off = counted.tokens.abs_diff(real) as f64 / real as f64;
        assert!(off < 0.05, "{} estimated, {real} real", counted.tokens);
        // Within the budget, the same pieces count exactly.
        let text = format!("{} ", "x".repeat(4000)).repeat(8);
        assert_eq!(counter().count(&text), exact(tiktoken(&text)));
    }

    /// A piece past `MAX_PIECE` is estimated from its start, near its real count; one at the
    /// limit is still exact.
    #[test]
    fn a_piece_past_the_limit_is_estimated_from_its_start() {
        for unit in ["a", "ab", "xyz", "é"] {
            let at_limit = unit.repeat(MAX_PIECE / unit.len());
            assert_eq!(
                counter().count(&at_limit),
                exact(tiktoken(&at_limit)),
                "{unit}"
            );
            let long = unit.repeat(3 * MAX_PIECE / unit.len() + 7);
            let counted = counter().count(&long);
            let real = tiktoken(&long);
            assert!(counted.estimated, "{unit}");
            let off = counted.tokens.abs_diff(real) as f64 / real as f64;
            assert!(
                off < 0.05,
                "{unit}: {} estimated, {real} real",
                counted.tokens
            );
        }
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
            assert_eq!(counter().count(text), exact(tiktoken(text)), "{text:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Any text: letters of many scripts, digits, punctuation, spaces and controls.
        #[test]
        fn any_text_counts_as_tiktoken_counts_it(text in "(?s).{0,200}") {
            prop_assert_eq!(counter().count(&text), exact(tiktoken(&text)));
        }

        /// Whitespace of every kind in runs before words, digits, punctuation, line breaks and
        /// the end: where tiktoken's lookahead (`\s+(?!\S)`, see [`Split`]) decides the split.
        #[test]
        fn whitespace_runs_split_as_tiktoken_splits_them(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    " ", "  ", "\t", "\u{a0}", "\u{3000}", "\u{2028}", "\n", "\r\n", " \n ",
                    "\x0b", "word", "Word", "'s", "'LL", "42", "12345", "!", "...", "\"", "é", "世界",
                    "/", "-x", "🎉",
                ]),
                0..40,
            ),
        ) {
            let text = parts.concat();
            prop_assert_eq!(counter().count(&text), exact(tiktoken(&text)), "{:?}", text);
        }

        /// Long runs without a split, where the merge order decides the count.
        #[test]
        fn long_pieces_count_as_tiktoken_counts_them(
            unit in "[a-zA-Z0-9é世 ]{1,6}",
            times in 1usize..400,
        ) {
            let text = unit.repeat(times);
            prop_assert_eq!(counter().count(&text), exact(tiktoken(&text)));
        }
    }
}
