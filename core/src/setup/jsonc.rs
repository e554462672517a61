//! JSON as the clients write it, comments and trailing commas included (VS Code's `mcp.json` is
//! JSONC), read with the place of every value and edited in place: only the bytes of the
//! members that change are touched, so comments, formatting, key order and every other key of a
//! client's file stay as they were.

use serde_json::{Map, Value};

/// The deepest nesting read; a client's file is a few levels deep.
const MAX_DEPTH: usize = 128;

/// A value and where it lies in the text.
#[derive(Debug, Clone)]
pub struct Node {
    /// The byte offset of its first character.
    pub start: usize,
    /// The byte offset just past its last character.
    pub end: usize,
    /// What it holds.
    pub value: Value,
    /// An object's members in the order written (empty for anything else).
    pub members: Vec<Member>,
}

/// One `"key": value` of an object.
#[derive(Debug, Clone)]
pub struct Member {
    /// The key, unescaped.
    pub key: String,
    /// The offset of the key's opening quote.
    pub key_start: usize,
    /// The value.
    pub value: Node,
    /// The offset of the comma that follows the value, if one does.
    pub comma: Option<usize>,
}

impl Node {
    /// The member called `key` (the last one, as JSON parsers take a repeated key).
    pub fn member(&self, key: &str) -> Option<&Member> {
        self.members.iter().rev().find(|member| member.key == key)
    }
}

/// A parsed file.
#[derive(Debug)]
pub struct Parsed {
    /// The top-level value; `None` for a file of only whitespace and comments.
    pub root: Option<Node>,
}

/// Why a file is not JSON(C), with the place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsoncError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (in characters).
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for JsoncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

/// Reads `text` as JSON with `//` and `/* */` comments and trailing commas.
pub fn parse(text: &str) -> Result<Parsed, JsoncError> {
    let mut parser = Parser {
        text,
        bytes: text.as_bytes(),
        at: if text.starts_with('\u{feff}') { 3 } else { 0 },
    };
    parser.skip()?;
    if parser.at >= parser.bytes.len() {
        return Ok(Parsed { root: None });
    }
    let root = parser.value(0)?;
    parser.skip()?;
    if parser.at < parser.bytes.len() {
        return Err(parser.error("unexpected text after the top-level value"));
    }
    Ok(Parsed { root: Some(root) })
}

/// 1-based line and column of a byte offset.
fn position(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(at.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> JsoncError {
        let (line, column) = position(self.text, self.at);
        JsoncError {
            line,
            column,
            message: message.to_owned(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Skips whitespace and comments.
    fn skip(&mut self) -> Result<(), JsoncError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.at += 1,
                Some(b'/') if self.bytes.get(self.at + 1) == Some(&b'/') => {
                    while self.peek().is_some_and(|b| b != b'\n') {
                        self.at += 1;
                    }
                }
                Some(b'/') if self.bytes.get(self.at + 1) == Some(&b'*') => {
                    let Some(close) = self.text[self.at + 2..].find("*/") else {
                        return Err(self.error("a `/*` comment is never closed"));
                    };
                    self.at += 2 + close + 2;
                }
                _ => return Ok(()),
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, JsoncError> {
        self.skip()?;
        if depth > MAX_DEPTH {
            return Err(self.error("nested too deeply"));
        }
        let start = self.at;
        let scalar = |parser: &mut Parser, value: Value| Node {
            start,
            end: parser.at,
            value,
            members: Vec::new(),
        };
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => {
                let text = self.string()?;
                Ok(scalar(self, Value::String(text)))
            }
            Some(b'-' | b'0'..=b'9') => {
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_digit() || b"+-.eE".contains(&b))
                {
                    self.at += 1;
                }
                let number = serde_json::from_str::<Value>(&self.text[start..self.at])
                    .ok()
                    .filter(Value::is_number);
                match number {
                    Some(number) => Ok(scalar(self, number)),
                    None => {
                        self.at = start;
                        Err(self.error("not a number"))
                    }
                }
            }
            Some(_) => {
                for (word, value) in [
                    ("true", Value::Bool(true)),
                    ("false", Value::Bool(false)),
                    ("null", Value::Null),
                ] {
                    let after = self.bytes.get(start + word.len());
                    if self.text[start..].starts_with(word)
                        && !after.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
                    {
                        self.at += word.len();
                        return Ok(scalar(self, value));
                    }
                }
                Err(self.error(
                    "expected a value (a string, number, object, array, true, false or null)",
                ))
            }
            None => Err(self.error("the text ends where a value was expected")),
        }
    }

    /// A string at `self.at` (its opening quote), unescaped.
    fn string(&mut self) -> Result<String, JsoncError> {
        let start = self.at;
        let mut at = start + 1;
        loop {
            match self.bytes.get(at) {
                Some(b'"') => break,
                Some(b'\\') => at += 2,
                Some(b) if *b < 0x20 => {
                    self.at = at;
                    return Err(self.error("a control character (a line break?) inside a string"));
                }
                Some(_) => at += 1,
                None => return Err(self.error("a string is never closed")),
            }
        }
        let text = serde_json::from_str::<String>(&self.text[start..=at])
            .map_err(|e| self.error(&format!("a bad string: {e}")))?;
        self.at = at + 1;
        Ok(text)
    }

    fn object(&mut self, depth: usize) -> Result<Node, JsoncError> {
        let start = self.at;
        self.at += 1;
        let mut members: Vec<Member> = Vec::new();
        self.skip()?;
        if self.peek() == Some(b'}') {
            self.at += 1;
        } else {
            loop {
                self.skip()?;
                if self.peek() != Some(b'"') {
                    return Err(self.error("expected a key in double quotes"));
                }
                let key_start = self.at;
                let key = self.string()?;
                self.skip()?;
                if self.peek() != Some(b':') {
                    return Err(self.error("expected `:` after the key"));
                }
                self.at += 1;
                let value = self.value(depth + 1)?;
                self.skip()?;
                let mut member = Member {
                    key,
                    key_start,
                    value,
                    comma: None,
                };
                let close = match self.peek() {
                    Some(b',') => {
                        member.comma = Some(self.at);
                        self.at += 1;
                        self.skip()?;
                        self.peek() == Some(b'}')
                    }
                    Some(b'}') => true,
                    _ => return Err(self.error("expected `,` or `}` after the value")),
                };
                members.push(member);
                if close {
                    self.at += 1;
                    break;
                }
            }
        }
        let mut map = Map::new();
        for member in &members {
            map.insert(member.key.clone(), member.value.value.clone());
        }
        Ok(Node {
            start,
            end: self.at,
            value: Value::Object(map),
            members,
        })
    }

    fn array(&mut self, depth: usize) -> Result<Node, JsoncError> {
        let start = self.at;
        self.at += 1;
        let mut items = Vec::new();
        self.skip()?;
        if self.peek() == Some(b']') {
            self.at += 1;
        } else {
            loop {
                items.push(self.value(depth + 1)?.value);
                self.skip()?;
                match self.peek() {
                    Some(b',') => {
                        self.at += 1;
                        self.skip()?;
                        if self.peek() == Some(b']') {
                            self.at += 1;
                            break;
                        }
                    }
                    Some(b']') => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(self.error("expected `,` or `]` after the value")),
                }
            }
        }
        Ok(Node {
            start,
            end: self.at,
            value: Value::Array(items),
            members: Vec::new(),
        })
    }
}

/// How a file is laid out: its indentation unit and line break, for the text added to it.
#[derive(Debug, Clone)]
pub struct Style {
    /// One level of indentation (`"  "`, `"    "`, `"\t"`).
    pub unit: String,
    /// `"\n"` or `"\r\n"`.
    pub newline: &'static str,
}

impl Style {
    /// The style of `text`, whose top-level object is `root`: the indentation of its first
    /// member (two spaces when it has none on a line of its own), its line break.
    pub fn of(text: &str, root: Option<&Node>) -> Style {
        let unit = root
            .and_then(|root| root.members.first())
            .and_then(|member| indent_at(text, member.key_start))
            .filter(|indent| !indent.is_empty())
            .unwrap_or("  ")
            .to_owned();
        let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
        Style { unit, newline }
    }

    /// `value` as pretty JSON indented by `unit`, each line after the first prefixed by `base`.
    pub fn render(&self, value: &Value, base: &str) -> String {
        let mut out = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(self.unit.as_bytes());
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
        // Writing a Value into a Vec cannot fail.
        let _ = serde::Serialize::serialize(value, &mut serializer);
        let text = String::from_utf8(out).unwrap_or_default();
        let joiner = format!("{}{base}", self.newline);
        text.split('\n').collect::<Vec<_>>().join(&joiner)
    }
}

/// The offset where the line holding `at` begins.
fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// The whitespace before `at` on its line, when nothing else precedes it there.
fn indent_at(text: &str, at: usize) -> Option<&str> {
    let before = &text[line_start(text, at)..at];
    before
        .chars()
        .all(|c| c == ' ' || c == '\t')
        .then_some(before)
}

/// The leading whitespace of the line holding `at`.
fn line_indent(text: &str, at: usize) -> &str {
    let start = line_start(text, at);
    let line = &text[start..];
    let width = line.len() - line.trim_start_matches([' ', '\t']).len();
    &line[..width]
}

/// One replacement of a byte range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    start: usize,
    end: usize,
    text: String,
}

/// The edits that make `object` (a node of `text`) lose the members named in `remove`, and
/// hold `set` (its value replaced where the key exists, else a member added after the last one
/// kept). Nothing else of the text moves.
pub fn edit_object(
    text: &str,
    object: &Node,
    set: Option<(&str, &Value)>,
    remove: &[&str],
    style: &Style,
) -> Vec<Edit> {
    let members = &object.members;
    let removed = |member: &Member| remove.contains(&member.key.as_str());
    let last_kept = members.iter().rposition(|member| !removed(member));
    let outer = line_indent(text, object.start).to_owned();
    let indent = members
        .first()
        .and_then(|member| indent_at(text, member.key_start))
        .map(str::to_owned)
        .unwrap_or_else(|| format!("{outer}{}", style.unit));
    let mut edits = Vec::new();
    // A removed member before the last kept one goes with its comma, and with its whole line
    // when it stands alone on it (a comment on the line after the comma goes with it too).
    for member in &members[..last_kept.unwrap_or(0)] {
        let Some(comma) = member.comma.filter(|_| removed(member)) else {
            continue;
        };
        let alone = indent_at(text, member.key_start).is_some();
        let start = if alone {
            line_start(text, member.key_start)
        } else {
            member.key_start
        };
        let mut end = comma + 1;
        let rest = &text[end..];
        let spaces = rest.len() - rest.trim_start_matches([' ', '\t']).len();
        end += spaces;
        if alone {
            if text[end..].starts_with("//") {
                end += text[end..].find('\n').unwrap_or(text.len() - end);
            }
            if text[end..].starts_with("\r\n") {
                end += 2;
            } else if text[end..].starts_with('\n') {
                end += 1;
            }
        }
        edits.push(Edit {
            start,
            end,
            text: String::new(),
        });
    }
    // The removed members after the last kept one go from the end of the kept one's line (its
    // comma too, unless a member is added) to the end of the last one.
    let tail_end = members[last_kept.map_or(0, |i| i + 1)..]
        .last()
        .map(|last| last.comma.map_or(last.value.end, |comma| comma + 1));
    let mut added = None;
    if let Some((key, value)) = set {
        match members.iter().rev().find(|member| member.key == key) {
            Some(member) if member.value.value == *value => {}
            Some(member) => {
                let base = indent_at(text, member.key_start)
                    .map(str::to_owned)
                    .unwrap_or_else(|| indent.clone());
                edits.push(Edit {
                    start: member.value.start,
                    end: member.value.end,
                    text: style.render(value, &base),
                });
            }
            None => {
                let quoted = serde_json::to_string(key).unwrap_or_default();
                added = Some(format!(
                    "{}{indent}{quoted}: {}",
                    style.newline,
                    style.render(value, &indent)
                ));
            }
        }
    }
    let mut put = |start: usize, end: usize, text: String| {
        edits.push(Edit { start, end, text });
    };
    match (last_kept.map(|i| &members[i]), tail_end) {
        (Some(kept), Some(tail_end)) => {
            // `kept` has a comma: a member followed it.
            let comma = kept.comma.unwrap_or(kept.value.end);
            let after = end_of_line(text, comma + 1);
            match added {
                Some(member) => put(after, tail_end, member),
                None => {
                    put(comma, comma + 1, String::new());
                    put(after, tail_end, String::new());
                }
            }
        }
        (None, Some(tail_end)) => put(object.start + 1, tail_end, added.unwrap_or_default()),
        (Some(kept), None) => {
            if let Some(member) = added {
                match kept.comma {
                    Some(comma) => put(
                        end_of_line(text, comma + 1),
                        end_of_line(text, comma + 1),
                        member,
                    ),
                    None => {
                        put(kept.value.end, kept.value.end, ",".to_owned());
                        let after = end_of_line(text, kept.value.end);
                        put(after, after, member);
                    }
                }
            }
        }
        (None, None) => {
            if let Some(member) = added {
                // An empty object: its inside, when only whitespace, is replaced.
                let inside = &text[object.start + 1..object.end - 1];
                let end = if inside.trim().is_empty() {
                    object.end - 1
                } else {
                    object.start + 1
                };
                put(
                    object.start + 1,
                    end,
                    format!("{member}{}{outer}", style.newline),
                );
            }
        }
    }
    edits
}

/// Where the line holding `at` breaks, when only whitespace and a `//` comment follow `at` on
/// it; else `at` itself.
fn end_of_line(text: &str, at: usize) -> usize {
    let rest = &text[at..];
    let line = &rest[..rest.find('\n').unwrap_or(rest.len())];
    let line = line.strip_suffix('\r').unwrap_or(line);
    let trimmed = line.trim_start_matches([' ', '\t']);
    if trimmed.is_empty() || trimmed.starts_with("//") {
        at + line.len()
    } else {
        at
    }
}

/// `text` with `edits` made (they do not overlap).
pub fn apply(text: &str, mut edits: Vec<Edit>) -> String {
    edits.sort_by_key(|edit| (edit.start, edit.end));
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for edit in edits {
        if edit.start < at {
            // Overlapping edits are a bug in the caller; the caller checks the result.
            continue;
        }
        out.push_str(&text[at..edit.start]);
        out.push_str(&edit.text);
        at = edit.end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn root(text: &str) -> Node {
        parse(text).unwrap().root.unwrap()
    }

    /// Edits `text`'s top-level `servers` object and returns the new text.
    fn edited(text: &str, set: Option<(&str, &Value)>, remove: &[&str]) -> String {
        let parsed = root(text);
        let style = Style::of(text, Some(&parsed));
        let servers = &parsed.member("servers").unwrap().value;
        apply(text, edit_object(text, servers, set, remove, &style))
    }

    #[test]
    fn reads_comments_and_trailing_commas_with_places() {
        let text = "// top\n{\n  /* a */ \"a\": [1, 2,],\n  \"b\": {\"c\": \"d\\n\",},\n}\n";
        let root = parse(text).unwrap().root.unwrap();
        assert_eq!(root.value, json!({"a": [1, 2], "b": {"c": "d\n"}}));
        let b = root.member("b").unwrap();
        assert_eq!(&text[b.value.start..b.value.end], "{\"c\": \"d\\n\",}");
        assert!(parse("").unwrap().root.is_none());
        assert!(parse(" // nothing\n").unwrap().root.is_none());
    }

    #[test]
    fn errors_name_the_line_and_column() {
        for (text, line, column) in [
            ("{\n  \"a\": 1\n  \"b\": 2\n}", 3, 3),
            ("{\n  \"a\": tru\n}", 2, 8),
            ("{\"a\": \"x", 1, 7),
            ("{\"a\": 1} x", 1, 10),
            ("/* open", 1, 1),
        ] {
            let error = parse(text).unwrap_err();
            assert_eq!(
                (error.line, error.column),
                (line, column),
                "{text:?}: {error}"
            );
        }
        let deep = "[".repeat(MAX_DEPTH + 5);
        assert!(parse(&deep).unwrap_err().message.contains("deeply"));
    }

    #[test]
    fn adds_a_member_and_keeps_everything_else() {
        let text = "{\n  // mine\n  \"servers\": {\n    \"a\": {\"command\": \"x\"} // a\n  },\n  \"inputs\": []\n}\n";
        let out = edited(text, Some(("runbyte", &json!({"command": "r"}))), &[]);
        assert_eq!(
            out,
            "{\n  // mine\n  \"servers\": {\n    \"a\": {\"command\": \"x\"}, // a\n    \"runbyte\": {\n      \"command\": \"r\"\n    }\n  },\n  \"inputs\": []\n}\n"
        );
        // The same again changes nothing.
        assert_eq!(
            edited(&out, Some(("runbyte", &json!({"command": "r"}))), &[]),
            out
        );
        // A different value replaces the old one in place.
        let changed = edited(&out, Some(("runbyte", &json!({"command": "s"}))), &[]);
        assert!(changed.contains("\"command\": \"s\""), "{changed}");
        assert!(!changed.contains("\"command\": \"r\""), "{changed}");
    }

    #[test]
    fn removes_members_anywhere_and_stays_valid_json() {
        let text = "{\n  \"servers\": {\n    \"a\": 1,\n    \"b\": 2,\n    \"c\": 3\n  }\n}\n";
        for (remove, left) in [
            (vec!["a"], json!({"b": 2, "c": 3})),
            (vec!["b"], json!({"a": 1, "c": 3})),
            (vec!["c"], json!({"a": 1, "b": 2})),
            (vec!["a", "c"], json!({"b": 2})),
            (vec!["b", "c"], json!({"a": 1})),
            (vec!["a", "b", "c"], json!({})),
        ] {
            let out = edited(text, None, &remove);
            let strict: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
            assert_eq!(strict["servers"], left, "{remove:?}: {out}");
            let added = edited(text, Some(("runbyte", &json!(true))), &remove);
            let strict: Value =
                serde_json::from_str(&added).unwrap_or_else(|e| panic!("{e}: {added}"));
            let mut expected = left.as_object().unwrap().clone();
            expected.insert("runbyte".into(), json!(true));
            assert_eq!(strict["servers"], Value::Object(expected), "{added}");
        }
        let all = edited(text, Some(("runbyte", &json!(1))), &["a", "b", "c"]);
        assert_eq!(all, "{\n  \"servers\": {\n    \"runbyte\": 1\n  }\n}\n");
    }

    #[test]
    fn fills_an_empty_object_and_keeps_crlf_and_tabs() {
        let text = "{\r\n\t\"servers\": {}\r\n}\r\n";
        let out = edited(text, Some(("runbyte", &json!({"a": 1}))), &[]);
        assert_eq!(
            out,
            "{\r\n\t\"servers\": {\r\n\t\t\"runbyte\": {\r\n\t\t\t\"a\": 1\r\n\t\t}\r\n\t}\r\n}\r\n"
        );
    }
}
