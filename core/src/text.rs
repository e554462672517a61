//! Small text helpers: the closest name, for "did you mean"; text from servers and clients
//! made safe for generated code (string literals, comment lines) and for a terminal.

use std::{borrow::Cow, fmt::Write as _};

/// Names longer than this are never matched: 256 characters. The search costs the product of
/// two names' lengths, so a hostile name (a program may pass any string) must not reach it.
pub const MAX_MATCHED_CHARS: usize = 256;

/// The candidate closest to `wanted` by edit distance, when it is close enough to be a likely
/// typo (at most a third of the longer name's length, and at most 4 edits). Bounded: names over
/// [`MAX_MATCHED_CHARS`] are skipped, and so is every candidate whose length alone rules it out.
pub fn closest<'a>(wanted: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wanted_chars = wanted.chars().count();
    if wanted_chars > MAX_MATCHED_CHARS {
        return None;
    }
    let wanted_lower = wanted.to_lowercase();
    candidates
        .into_iter()
        .filter_map(|candidate| {
            let chars = candidate.chars().count();
            let allowed = (wanted_chars.max(chars) / 3).clamp(1, 4);
            if chars > MAX_MATCHED_CHARS || chars.abs_diff(wanted_chars) > allowed {
                return None;
            }
            let d = distance(&wanted_lower, &candidate.to_lowercase());
            (d <= allowed).then_some((d, candidate))
        })
        .min_by_key(|(d, candidate)| (*d, *candidate))
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over chars.
pub fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

// Text into generated code: the rules the dialects use too (`runbyte_plugin_api::text`).
pub use runbyte_plugin_api::text::{comment_line, is_hazard, lines as js_lines};

/// Text a client or a server wrote, made safe to print on a terminal: every control character
/// (C0, DEL, C1: the start of an escape sequence such as an OSC 52 clipboard write or a title
/// change) and every bidi or invisible format character is shown as `\u{..}`. Line feeds are
/// kept when `lines` (text meant to span lines) and tabs always; a lone carriage return, which
/// can overwrite what came before on the line, is escaped too.
pub fn terminal(text: &str, lines: bool) -> Cow<'_, str> {
    let unsafe_char = |c: char| (c == '\n' && !lines) || c == '\r' || (c != '\n' && is_hazard(c));
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn terminal_text_loses_every_escape_sequence_and_bidi_control() {
        // An OSC 52 clipboard write, a title change, CSI, C1 CSI, DEL, bidi overrides.
        let hostile = "a\u{1b}]52;c;aGVsbG8=\u{7}b\u{1b}]0;owned\u{1b}\\c\u{1b}[2Jd\u{9b}31me\u{7f}\u{202e}f\u{2066}g\rh";
        let safe = terminal(hostile, true);
        assert!(
            !safe
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{safe:?}"
        );
        assert!(!safe.contains('\u{202e}') && !safe.contains('\u{2066}'));
        assert!(safe.contains("\\u{1b}]52;c;aGVsbG8="), "{safe}");
        assert_eq!(terminal("two\nlines\tok", true), "two\nlines\tok");
        assert_eq!(terminal("one\nline", false), "one\\u{a}line");
        assert!(matches!(terminal("plain ünïcode", false), Cow::Borrowed(_)));
    }

    #[test]
    fn comment_and_literal_text_cannot_leave_their_place() {
        assert_eq!(comment_line("a */ b"), "a *\\/ b");
        assert_eq!(comment_line("x\u{2028}y\rz"), "x y z");
        assert_eq!(comment_line("\u{202e}"), "\\u202e");
        let literal = runbyte_plugin_api::text::string_literal("*/\u{2028}\"`${x}\\");
        assert!(literal.is_ascii(), "{literal}");
        assert_eq!(
            serde_json::from_str::<String>(&literal).unwrap(),
            "*/\u{2028}\"`${x}\\"
        );
        let lines: Vec<&str> = js_lines("a\r\nb\rc\u{2028}d\u{2029}e\nf").collect();
        assert_eq!(lines, ["a", "b", "c", "d", "e", "f"]);
    }

    #[test]
    fn a_typo_finds_its_name_and_nonsense_finds_nothing() {
        let names = ["search_issues", "get_issue", "create_issue"];
        assert_eq!(closest("serch_issues", names), Some("search_issues"));
        assert_eq!(closest("get_isue", names), Some("get_issue"));
        assert_eq!(closest("weather", names), None);
    }

    #[test]
    fn hostile_names_cost_nothing() {
        let long = "x".repeat(1 << 20);
        let names = ["search_issues", long.as_str()];
        let started = std::time::Instant::now();
        assert_eq!(closest(&long, names), None);
        assert_eq!(closest(&long[..300], names), None);
        assert_eq!(closest("serch_issues", names), Some("search_issues"));
        // Before the bound, one 1 MiB name cost ~280 ms in release; now a length compare.
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}
