//! What is kept of a line longer than the cap: its length, its first and last bytes, and from
//! those the id of the request it answers, so that the request can fail at once with a clear
//! error instead of waiting for its timeout.

use serde_json::Value;

/// How many bytes of an over-long line's start and end are kept.
const HEAD_BYTES: usize = 4096;
const TAIL_BYTES: usize = 256;

/// An over-long line, as far as it has been read.
#[derive(Debug, Default)]
pub(crate) struct Overlong {
    /// Its length so far, without the newline.
    pub(crate) length: usize,
    head: Vec<u8>,
    tail: Vec<u8>,
}

impl Overlong {
    /// Takes the next piece of the line.
    pub(crate) fn extend(&mut self, bytes: &[u8]) {
        self.length += bytes.len();
        let room = HEAD_BYTES - self.head.len();
        self.head.extend_from_slice(&bytes[..room.min(bytes.len())]);
        if bytes.len() >= TAIL_BYTES {
            self.tail.clear();
            self.tail
                .extend_from_slice(&bytes[bytes.len() - TAIL_BYTES..]);
        } else {
            self.tail.extend_from_slice(bytes);
            let excess = self.tail.len().saturating_sub(TAIL_BYTES);
            self.tail.drain(..excess);
        }
    }

    /// The id of the response this line was, when that can be told from its ends: its
    /// top-level keys include `result` or `error` and not `method` (a request from the server
    /// has its own ids, which must not be taken for ours), and `id` is a number or a string,
    /// either among the first keys (`{"jsonrpc":"2.0","id":7,"result":...`, as rmcp and the
    /// Python SDK write it) or the last (`{"result":...,"jsonrpc":"2.0","id":7}`, as the
    /// TypeScript SDK does).
    pub(crate) fn response_id(&self) -> Option<Value> {
        let fields = top_level_fields(&self.head);
        let has = |key: &str| fields.iter().any(|(k, _)| k == key);
        if has("method") || !(has("result") || has("error")) {
            return None;
        }
        let id = fields
            .iter()
            .find(|(key, _)| key == "id")
            .and_then(|(_, value)| value.clone())
            .or_else(|| last_id(&self.tail))?;
        (id.is_number() || id.is_string()).then_some(id)
    }
}

/// The top-level keys at the start of a JSON object, with each value that is complete within
/// `bytes` (parsed), or `None` for the one cut off.
fn top_level_fields(bytes: &[u8]) -> Vec<(String, Option<Value>)> {
    let mut fields = Vec::new();
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return fields;
    }
    at += 1;
    loop {
        at = skip_space(bytes, at);
        let Some(key_end) = string_end(bytes, at) else {
            break;
        };
        let Ok(key) = serde_json::from_slice::<String>(&bytes[at..key_end]) else {
            break;
        };
        at = skip_space(bytes, key_end);
        if bytes.get(at) != Some(&b':') {
            break;
        }
        at = skip_space(bytes, at + 1);
        let Some(value_end) = value_end(bytes, at) else {
            fields.push((key, None));
            break;
        };
        let value = serde_json::from_slice::<Value>(&bytes[at..value_end]).ok();
        fields.push((key, value));
        at = skip_space(bytes, value_end);
        if bytes.get(at) != Some(&b',') {
            break;
        }
        at += 1;
    }
    fields
}

/// The value of an `"id"` key that is the last member of the top-level object, when `tail` is
/// the end of that object.
fn last_id(tail: &[u8]) -> Option<Value> {
    let end = tail.iter().rposition(|b| !b.is_ascii_whitespace())?;
    if tail[end] != b'}' {
        return None;
    }
    let key = b"\"id\"";
    let mut search = end;
    while let Some(found) = tail[..search].windows(key.len()).rposition(|w| w == key) {
        search = found;
        let before = tail[..found].iter().rposition(|b| !b.is_ascii_whitespace());
        if !before.is_some_and(|at| tail[at] == b',' || tail[at] == b'{') {
            continue;
        }
        let at = skip_space(tail, found + key.len());
        if tail.get(at) != Some(&b':') {
            continue;
        }
        let at = skip_space(tail, at + 1);
        let Some(value_end) = value_end(tail, at) else {
            continue;
        };
        if skip_space(tail, value_end) == end {
            return serde_json::from_slice(&tail[at..value_end]).ok();
        }
    }
    None
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while bytes.get(at).is_some_and(u8::is_ascii_whitespace) {
        at += 1;
    }
    at
}

/// Where the string starting at `at` ends (after its closing quote), if it ends in `bytes`.
fn string_end(bytes: &[u8], at: usize) -> Option<usize> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let mut i = at + 1;
    loop {
        match bytes.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// Where the value starting at `at` ends, if it ends in `bytes`.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = at;
            loop {
                match bytes.get(i)? {
                    b'"' => {
                        i = string_end(bytes, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let len = bytes[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']') || b.is_ascii_whitespace())?;
            Some(at + len)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn id_of(line: &str) -> Option<Value> {
        let mut overlong = Overlong::default();
        // In pieces, as reading delivers it.
        for piece in line.as_bytes().chunks(1000) {
            overlong.extend(piece);
        }
        assert_eq!(overlong.length, line.len());
        overlong.response_id()
    }

    #[test]
    fn the_id_of_an_over_long_response_is_found_at_either_end() {
        let big = "x".repeat(100_000);
        let rmcp = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"text":"{big}"}}}}"#);
        assert_eq!(id_of(&rmcp), Some(json!(7)));
        let typescript =
            format!(r#"{{"result":{{"text":"{big}","id":1}}, "jsonrpc":"2.0", "id":"a-9"}}"#);
        assert_eq!(id_of(&typescript), Some(json!("a-9")));
        let error = format!(r#"{{"jsonrpc":"2.0","id":3,"error":{{"message":"{big}"}}}}"#);
        assert_eq!(id_of(&error), Some(json!(3)));
    }

    #[test]
    fn requests_and_lines_without_a_usable_id_give_none() {
        let big = "x".repeat(100_000);
        // A request from the server: its id is not one of ours.
        let request =
            format!(r#"{{"jsonrpc":"2.0","id":7,"method":"sampling/x","params":"{big}"}}"#);
        assert_eq!(id_of(&request), None);
        let ts_request = format!(r#"{{"method":"x","params":"{big}","jsonrpc":"2.0","id":7}}"#);
        assert_eq!(id_of(&ts_request), None);
        // An id nested in the result, with no top-level one.
        let nested = format!(r#"{{"result":{{"text":"{big}","id":1}}}}"#);
        assert_eq!(id_of(&nested), None);
        assert_eq!(
            id_of(&format!(
                r#"{{"jsonrpc":"2.0","id":null,"result":"{big}"}}"#
            )),
            None
        );
        assert_eq!(id_of(&big), None);
    }
}
