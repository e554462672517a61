//! Token accounting: what an execution's answer costs the model, and what the tool results it
//! read would have cost through direct calls, counted with a real tokenizer (`o200k_base`, the
//! encoding of OpenAI's current models; other vendors' tokenizers differ by some percent).
//!
//! Counting is bounded: a text is tokenized up to [`MAX_COUNTED_BYTES`] and the rest
//! extrapolated from that part's tokens per byte (the count then says it is an estimate), and
//! so is an unbroken piece of the split past 8 KiB (`bpe::MAX_PIECE`) and a text's long pieces
//! past 32 KiB of them (`bpe::LONG_BYTES`).
//! The encoding's tables load once (about 10 ms), at start or on first use. A tool result's
//! tokens are counted on a blocking thread while the program goes on ([`Pending`]), never on the
//! call's path; at most 1 KiB left when the program ends is counted then, by the thread asking.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
};

use rmcp::model::CallToolResult;
use serde::{Deserialize, Serialize};

mod bpe;

/// The encoding counted in.
pub const ENCODING: &str = "o200k_base";
/// The most bytes of one text that are tokenized; past it the count is extrapolated.
pub const MAX_COUNTED_BYTES: usize = 256 << 10;
/// The most sessions whose totals are kept; past it, the oldest totals are dropped.
const MAX_SESSIONS: usize = 4096;

/// A number of tokens, and whether part of it was extrapolated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    pub tokens: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl std::ops::Add for Count {
    type Output = Count;
    fn add(self, other: Count) -> Count {
        Count {
            tokens: self.tokens.saturating_add(other.tokens),
            estimated: self.estimated || other.estimated,
        }
    }
}

impl std::ops::AddAssign for Count {
    fn add_assign(&mut self, other: Count) {
        *self = *self + other;
    }
}

impl std::fmt::Display for Count {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let about = if self.estimated { "~" } else { "" };
        write!(f, "{about}{}", self.tokens)
    }
}

/// Whether the encoding's tables are loaded (by [`warm`] at start, or by the first count).
static LOADED: std::sync::LazyLock<tokio::sync::watch::Sender<bool>> =
    std::sync::LazyLock::new(|| tokio::sync::watch::Sender::new(false));

/// How long an answer may wait for the tables to load (once per process) before its counts
/// are estimated.
const LOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The encoding's counter ([`bpe`]), its tables loaded on first use (once; later calls return
/// at once); `None` if they did not load (then counts are estimated, and an ERROR said why).
fn counter() -> Option<&'static bpe::Counter> {
    static COUNTER: std::sync::LazyLock<Option<bpe::Counter>> = std::sync::LazyLock::new(|| {
        let began = std::time::Instant::now();
        let counter = bpe::Counter::o200k_base()
            .inspect_err(|why| tracing::error!("the {ENCODING} tables did not load: {why}"))
            .ok();
        let ms = began.elapsed().as_secs_f64() * 1e3;
        tracing::debug!(ms, "the {ENCODING} tables loaded");
        counter
    });
    let counter = COUNTER.as_ref();
    LOADED.send_replace(true);
    counter
}

/// Loads the encoding's tables.
pub fn warm() {
    let _ = counter();
}

/// The tokens of `text` in [`ENCODING`]: exact up to [`MAX_COUNTED_BYTES`], extrapolated past it.
pub fn count(text: &str) -> Count {
    count_prefix(text, text.len())
}

/// The tokens of a text of `total` bytes of which `prefix` is the start (at most
/// [`MAX_COUNTED_BYTES`] of it are tokenized).
fn count_prefix(prefix: &str, total: usize) -> Count {
    let mut cut = prefix.len().min(MAX_COUNTED_BYTES);
    while cut > 0 && !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let counted = &prefix[..cut];
    let Some(counter) = counter() else {
        return Count {
            tokens: (total as u64).div_ceil(4),
            estimated: true,
        };
    };
    let counted = counter.count(counted);
    let tokens = counted.tokens as u64;
    if cut >= total {
        return Count {
            tokens,
            estimated: counted.estimated,
        };
    }
    let per_byte = if cut == 0 {
        0.25
    } else {
        tokens as f64 / cut as f64
    };
    Count {
        tokens: (per_byte * total as f64).round() as u64,
        estimated: true,
    }
}

/// What a direct call's result shows the model: its text blocks, or its `structuredContent` as
/// JSON when it has no text. Images, audio and resources are not counted. At most
/// [`MAX_COUNTED_BYTES`] of it is kept, with the whole text's length.
pub fn shown_text(result: &CallToolResult) -> (String, usize) {
    let mut text = String::new();
    let mut total = 0;
    for block in result.content.iter().filter_map(|c| c.as_text()) {
        if total > 0 {
            total += 1;
            if text.len() < MAX_COUNTED_BYTES {
                text.push('\n');
            }
        }
        total += block.text.len();
        let room = MAX_COUNTED_BYTES.saturating_sub(text.len());
        let mut take = block.text.len().min(room);
        while take > 0 && !block.text.is_char_boundary(take) {
            take -= 1;
        }
        text.push_str(&block.text[..take]);
    }
    if total == 0
        && let Some(structured) = &result.structured_content
    {
        let json = structured.to_string();
        total = json.len();
        let mut take = json.len().min(MAX_COUNTED_BYTES);
        while take > 0 && !json.is_char_boundary(take) {
            take -= 1;
        }
        text.push_str(&json[..take]);
    }
    (text, total)
}

/// How many bytes of tool results are gathered before a blocking task counts them: a program of
/// many small calls costs a thread wake-up a batch, not one a call (each is a hop the call path
/// of issue 14 pays for on a busy machine).
const BATCH_BYTES: usize = 64 << 10;

/// At most this much text left uncounted when an execution's counts are asked for is counted
/// on the asking thread: a few microseconds, less than handing it to a blocking thread costs
/// (a wake-up there and one back), which a program of one small call would wait for.
const INLINE_BYTES: usize = 1 << 10;

/// The tool results of one execution being counted, by server.
#[derive(Default)]
pub struct Pending {
    state: Mutex<Batches>,
}

/// A task counting a batch: each text's server and count.
type Counting = tokio::task::JoinHandle<Vec<(String, Count)>>;

/// Texts not yet handed to a counting task, and the tasks counting the others.
#[derive(Default)]
struct Batches {
    /// `(server, text kept, the whole text's length)`.
    gathered: Vec<(String, String, usize)>,
    gathered_bytes: usize,
    /// Each task, with the servers and whole lengths of what it counts (for an estimate when
    /// it does not finish in time).
    counting: Vec<(Vec<(String, usize)>, Counting)>,
}

impl Batches {
    /// Hands what was gathered to a blocking task.
    fn count_gathered(&mut self) {
        if self.gathered.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.gathered);
        self.gathered_bytes = 0;
        let sizes = batch
            .iter()
            .map(|(server, _, total)| (server.clone(), *total))
            .collect();
        let task = tokio::task::spawn_blocking(move || {
            batch
                .into_iter()
                .map(|(server, text, total)| (server, count_prefix(&text, total)))
                .collect()
        });
        self.counting.push((sizes, task));
    }

    /// What was gathered, taken to be counted by the caller, if it is little (at most
    /// [`INLINE_BYTES`]) and the tables are loaded: sooner than a blocking thread could wake for
    /// it. Else nothing.
    fn take_small(&mut self) -> Vec<(String, String, usize)> {
        if self.gathered_bytes > INLINE_BYTES || !*LOADED.borrow() {
            return Vec::new();
        }
        self.gathered_bytes = 0;
        std::mem::take(&mut self.gathered)
    }
}

/// A text's tokens guessed from its size, for a count that did not finish in time.
fn estimate(bytes: usize) -> Count {
    Count {
        tokens: (bytes as u64).div_ceil(4),
        estimated: true,
    }
}

/// How long an execution's answer waits for counts still running after the program ended:
/// past it, what is left is estimated (a quarter of its bytes, marked `~`), so counting never
/// holds an answer (a program that read megabytes, a busy machine).
pub const COUNT_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

impl Pending {
    /// Keeps what `result` of a call to `server` shows for counting; once [`BATCH_BYTES`] are
    /// gathered, a blocking thread counts them while the program goes on.
    pub fn add(&self, server: &str, result: &CallToolResult) {
        let (text, total) = shown_text(result);
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.gathered_bytes += text.len();
        state.gathered.push((server.to_owned(), text, total));
        if state.gathered_bytes >= BATCH_BYTES {
            state.count_gathered();
        }
    }

    /// The counts, by server: exact where counting finished within `wait`, estimated where not.
    pub async fn by_server(&self, wait: std::time::Duration) -> BTreeMap<String, Count> {
        let (small, counting) = match self.state.lock() {
            Ok(mut state) => {
                let small = state.take_small();
                state.count_gathered();
                (small, std::mem::take(&mut state.counting))
            }
            Err(_) => (Vec::new(), Vec::new()),
        };
        // Counted here, with the lock released.
        let mut by_server: BTreeMap<String, Count> = BTreeMap::new();
        for (server, text, total) in small {
            *by_server.entry(server).or_default() += count_prefix(&text, total);
        }
        // Loading the tables is not counting: the wait starts once they are there.
        if !counting.is_empty() {
            let mut loaded = LOADED.subscribe();
            let _ = tokio::time::timeout(LOAD_WAIT, loaded.wait_for(|loaded| *loaded)).await;
        }
        let until = tokio::time::Instant::now() + wait;
        for (sizes, task) in counting {
            match tokio::time::timeout_at(until, task).await {
                Ok(Ok(counts)) => {
                    for (server, count) in counts {
                        *by_server.entry(server).or_default() += count;
                    }
                }
                // Not done in time (the task goes on, its answer unused), or it failed.
                _ => {
                    for (server, total) in sizes {
                        *by_server.entry(server).or_default() += estimate(total);
                    }
                }
            }
        }
        by_server
    }
}

/// An execution's accounting: what its answer costs, what the tool results it read cost.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Accounting {
    pub returned: Count,
    pub consumed: Count,
}

/// Each client session's totals.
#[derive(Default)]
pub struct Ledger {
    sessions: Mutex<HashMap<String, (u64, Accounting)>>,
    next: std::sync::atomic::AtomicU64,
}

impl Ledger {
    /// Adds an execution of `session`; the session's totals with it.
    pub fn add(&self, session: &str, execution: &Accounting) -> Accounting {
        let order = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Ok(mut sessions) = self.sessions.lock() else {
            return execution.clone();
        };
        if sessions.len() >= MAX_SESSIONS && !sessions.contains_key(session) {
            let oldest = sessions
                .iter()
                .min_by_key(|(_, (order, _))| *order)
                .map(|(name, _)| name.clone());
            if let Some(oldest) = oldest {
                sessions.remove(&oldest);
            }
        }
        let entry = sessions
            .entry(session.to_owned())
            .or_insert_with(|| (order, Accounting::default()));
        entry.0 = order;
        entry.1.returned += execution.returned;
        entry.1.consumed += execution.consumed;
        entry.1.clone()
    }

    /// Forgets a session that ended.
    pub fn forget(&self, session: &str) {
        if let Ok(mut sessions) = self.sessions.lock() {
            sessions.remove(session);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rmcp::model::ContentBlock;

    use super::*;

    #[test]
    fn counts_are_the_encodings_and_long_texts_are_estimated() {
        assert_eq!(count("").tokens, 0);
        assert_eq!(
            count("hello world"),
            Count {
                tokens: 2,
                estimated: false
            }
        );
        let long = "word ".repeat(MAX_COUNTED_BYTES / 5 * 3);
        let counted = count(&long);
        assert!(counted.estimated);
        let exact = tiktoken_rs::o200k_base_singleton()
            .encode_ordinary(&long)
            .len() as f64;
        assert!(
            (counted.tokens as f64 - exact).abs() / exact < 0.01,
            "{counted} vs {exact}"
        );
        assert_eq!(counted.to_string(), format!("~{}", counted.tokens));
    }

    #[test]
    fn a_result_shows_its_text_else_its_structured_content() {
        let text = CallToolResult::success(vec![ContentBlock::text("a"), ContentBlock::text("b")]);
        assert_eq!(shown_text(&text), ("a\nb".to_owned(), 3));
        let structured = CallToolResult::structured(serde_json::json!({"k": 1}));
        // rmcp puts the JSON in a text block too.
        assert_eq!(shown_text(&structured).0, "{\"k\":1}");
    }

    #[tokio::test]
    async fn results_are_counted_in_batches_and_summed_by_server() {
        let pending = Pending::default();
        let small = "tokens of a small result ".repeat(10);
        let large = "a larger result ".repeat(BATCH_BYTES / 16 + 1);
        for _ in 0..5 {
            pending.add(
                "a",
                &CallToolResult::success(vec![ContentBlock::text(&small)]),
            );
        }
        // Past BATCH_BYTES: what was gathered goes to a counting task now.
        pending.add(
            "b",
            &CallToolResult::success(vec![ContentBlock::text(&large)]),
        );
        assert!(pending.state.lock().unwrap().gathered.is_empty());
        pending.add(
            "a",
            &CallToolResult::success(vec![ContentBlock::text(&small)]),
        );
        let by_server = pending.by_server(std::time::Duration::from_secs(60)).await;
        assert_eq!(by_server["a"].tokens, 6 * count(&small).tokens);
        assert_eq!(by_server["b"].tokens, count(&large).tokens);
        // Taken once: a second look finds nothing left.
        assert!(pending.by_server(COUNT_WAIT).await.is_empty());
        // A count not done in time is estimated from its size, and says so.
        assert_eq!(
            estimate(10),
            Count {
                tokens: 3,
                estimated: true
            }
        );
    }

    /// A little text left when the counts are asked for is counted then and there; more goes
    /// to a blocking thread.
    #[tokio::test]
    async fn a_small_remainder_is_counted_without_a_thread() {
        warm();
        let small = "a small result, counted at once".repeat(INLINE_BYTES / 64);
        let pending = Pending::default();
        pending.add(
            "s",
            &CallToolResult::success(vec![ContentBlock::text(&small)]),
        );
        let taken = pending.state.lock().unwrap().take_small();
        assert_eq!(taken, vec![("s".to_owned(), small.clone(), small.len())]);
        assert!(pending.state.lock().unwrap().gathered.is_empty());
        // What `by_server` takes so, it counts itself.
        pending.add(
            "s",
            &CallToolResult::success(vec![ContentBlock::text(&small)]),
        );
        assert_eq!(
            pending.by_server(std::time::Duration::ZERO).await["s"],
            count(&small)
        );
        let large = small.repeat(3);
        pending.add(
            "s",
            &CallToolResult::success(vec![ContentBlock::text(&large)]),
        );
        assert!(pending.state.lock().unwrap().take_small().is_empty());
        let by_server = pending.by_server(std::time::Duration::from_secs(60)).await;
        assert_eq!(by_server["s"], count(&large));
    }

    #[test]
    fn the_ledger_keeps_session_totals() {
        let ledger = Ledger::default();
        let one = Accounting {
            returned: Count {
                tokens: 2,
                estimated: false,
            },
            consumed: Count {
                tokens: 10,
                estimated: false,
            },
        };
        ledger.add("s", &one);
        let total = ledger.add("s", &one);
        assert_eq!(total.consumed.tokens, 20);
        ledger.forget("s");
        assert_eq!(ledger.add("s", &one).returned.tokens, 2);
    }
}
