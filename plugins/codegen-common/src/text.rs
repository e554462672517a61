//! Getting untrusted text into generated code without letting it out again.
//!
//! Two places take text from a server: string literals in code (tool and server names, property
//! keys, literal types) and comments (descriptions, titles, patterns, defaults). String literals
//! are pure ASCII: JSON escaping plus `\uXXXX` for everything else, so no line terminator, control
//! character or bidi control can reach the source. Comments keep readable Unicode but lose every
//! way out of a block comment (`*/`) and every character that can hide or reorder text.

use std::fmt::Write as _;

use serde_json::Value;

pub use runbyte_plugin_api::text::{
    comment_line, is_hazard, lines, push_string_literal, string_literal,
};

/// A block comment being assembled, line by line.
#[derive(Debug, Default)]
pub struct Comment {
    lines: Vec<String>,
}

impl Comment {
    /// An empty comment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.lines.iter().all(|line| line.is_empty())
    }

    /// Adds text that may span several lines (a description), made safe. Blank lines at either
    /// end are dropped and runs of blank lines inside become one; a line that starts with `@`
    /// gets a `\` first, so free text cannot add a JSDoc tag.
    pub fn text(&mut self, text: &str) {
        self.tagged("", text);
    }

    /// Adds `text` as [`Comment::text`] does, its first line after `tag` (generated text such
    /// as `@property {string} name - `), which is made safe but keeps its own `@`.
    pub fn tagged(&mut self, tag: &str, text: &str) {
        let mut safe: Vec<String> = lines(text).map(comment_line).collect();
        let start = safe
            .iter()
            .position(|line| !line.is_empty())
            .unwrap_or(safe.len());
        safe.drain(..start);
        for (i, line) in safe.iter_mut().enumerate() {
            if (i > 0 || tag.is_empty()) && line.trim_start().starts_with('@') {
                *line = line.replacen('@', "\\@", 1);
            }
        }
        if !tag.is_empty() {
            let head = comment_line(&format!("{tag}{}", safe.first().map_or("", String::as_str)));
            match safe.first_mut() {
                Some(first) => *first = head,
                None => safe.push(head),
            }
        }
        let Some(first) = safe.iter().position(|line| !line.is_empty()) else {
            return;
        };
        let last = safe
            .iter()
            .rposition(|line| !line.is_empty())
            .unwrap_or(first);
        let mut blank = false;
        for line in &safe[first..=last] {
            if line.is_empty() {
                if blank {
                    continue;
                }
                blank = true;
            } else {
                blank = false;
            }
            self.lines.push(line.clone());
        }
    }

    /// Adds one line (generated text that may embed untrusted parts), made safe.
    pub fn line(&mut self, line: &str) {
        self.lines.push(comment_line(line));
    }

    /// Adds another comment's lines.
    pub fn append(&mut self, other: Comment) {
        self.lines.extend(other.lines);
    }

    /// Adds an empty line, unless the comment is empty or already ends with one.
    pub fn gap(&mut self) {
        if self.lines.last().is_some_and(|line| !line.is_empty()) {
            self.lines.push(String::new());
        }
    }

    /// Appends the `/** ... */` comment to `out` at `indent` spaces, followed by a newline. A
    /// single short line stays on one line. Nothing is written for an empty comment.
    pub fn write(&self, out: &mut String, indent: usize) {
        let mut lines = self.lines.as_slice();
        while let [rest @ .., last] = lines
            && last.is_empty()
        {
            lines = rest;
        }
        if lines.is_empty() {
            return;
        }
        let pad = " ".repeat(indent);
        if let [only] = lines
            && only.len() + indent <= 90
        {
            let _ = writeln!(out, "{pad}/** {only} */");
            return;
        }
        let _ = writeln!(out, "{pad}/**");
        for line in lines {
            if line.is_empty() {
                let _ = writeln!(out, "{pad} *");
            } else {
                let _ = writeln!(out, "{pad} * {line}");
            }
        }
        let _ = writeln!(out, "{pad} */");
    }
}

/// Compact JSON for a doc comment (a `default`, an example): object keys sorted, strings ASCII,
/// nesting past a few levels elided, and the whole cut to about `limit` characters with `…`.
pub fn json_text(value: &Value, limit: usize) -> String {
    let mut out = String::new();
    push_json(&mut out, value, 0, 8, limit);
    if out.len() > limit {
        // The text is ASCII, so any byte index is a character boundary.
        out.truncate(limit.saturating_sub(1));
        out.push('…');
    }
    out
}

/// A JSON value's canonical text (keys sorted, strings ASCII), to compare values by.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    push_json(&mut out, value, 0, usize::MAX, usize::MAX);
    out
}

fn push_json(out: &mut String, value: &Value, depth: usize, max_depth: usize, limit: usize) {
    if out.len() > limit {
        return;
    }
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => push_string_literal(out, s),
        Value::Array(_) | Value::Object(_) if depth >= max_depth => out.push('…'),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_json(out, item, depth + 1, max_depth, limit);
                if out.len() > limit {
                    return;
                }
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                push_string_literal(out, key);
                out.push_str(": ");
                push_json(out, item, depth + 1, max_depth, limit);
                if out.len() > limit {
                    return;
                }
            }
            out.push('}');
        }
    }
}

/// Cuts `text` to at most `limit` characters, ending in `…` when it was longer.
pub fn cap(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit.saturating_sub(1)) {
        Some((at, _)) if text[at..].chars().nth(1).is_some() => format!("{}…", &text[..at]),
        _ => text.to_owned(),
    }
}
