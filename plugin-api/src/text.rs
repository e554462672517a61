//! Getting untrusted text into generated JavaScript or TypeScript without letting it out again.
//!
//! A codegen dialect (and the host, for saved skills) takes text from servers and clients into
//! two places: string literals in code (tool and server names, property keys, literal types)
//! and comments (descriptions, titles, patterns, defaults). String literals are pure ASCII: JSON
//! escaping plus `\uXXXX` for everything else, so no line terminator, control character or bidi
//! control can reach the source. Comments keep readable Unicode but lose every way out of a
//! block comment (`*/`) and every character that can hide or reorder text.

use std::fmt::Write as _;

/// A double-quoted string literal that is valid JSON, JavaScript and TypeScript, and pure ASCII.
pub fn string_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    push_string_literal(&mut out, text);
    out
}

/// Appends [`string_literal`] of `text` to `out`.
pub fn push_string_literal(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            _ => push_utf16_escapes(out, c),
        }
    }
    out.push('"');
}

fn push_utf16_escapes(out: &mut String, c: char) {
    let mut units = [0u16; 2];
    for unit in c.encode_utf16(&mut units) {
        // Writing to a String cannot fail.
        let _ = write!(out, "\\u{unit:04x}");
    }
}

/// Characters that must not appear raw in a comment or on a terminal: controls (C0 but tab and
/// line feed, DEL, C1), and the invisible format characters used to hide or reorder text (bidi
/// embeddings, overrides and isolates, the marks, zero-width characters, the BOM, Unicode tags).
pub fn is_hazard(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{ad}' | '\u{600}'..='\u{605}' | '\u{61c}' | '\u{6dd}' | '\u{70f}' | '\u{180e}'
        | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}' | '\u{e0000}'..='\u{e007f}')
}

/// Splits text at every JavaScript line terminator (CRLF, CR, LF, U+2028, U+2029).
pub fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let text = rest?;
        match text
            .char_indices()
            .find(|&(_, c)| matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}'))
        {
            None => {
                rest = None;
                Some(text)
            }
            Some((at, c)) => {
                let skip = if text[at..].starts_with("\r\n") {
                    2
                } else {
                    c.len_utf8()
                };
                rest = Some(&text[at + skip..]);
                Some(&text[..at])
            }
        }
    })
}

/// One line of comment text made safe: tabs become spaces, hazards become visible `\uXXXX`,
/// line terminators (which the caller should have split at) become spaces, and `*/` becomes
/// `*\/`. Trailing whitespace is dropped.
pub fn comment_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut previous = '\0';
    for c in line.chars() {
        match c {
            '\t' | '\n' | '\r' | '\u{2028}' | '\u{2029}' => out.push(' '),
            '/' if previous == '*' => out.push_str("\\/"),
            c if is_hazard(c) => push_utf16_escapes(&mut out, c),
            c => out.push(c),
        }
        previous = c;
    }
    out.truncate(out.trim_end().len());
    out
}
