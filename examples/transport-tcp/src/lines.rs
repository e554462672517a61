//! Reading newline-delimited lines with a cap on their length.

use std::io::{self, BufRead};

/// One read from a line source.
#[derive(Debug)]
pub(crate) enum Line {
    /// A complete line, without its `\n` (or `\r\n`). Invalid UTF-8 is replaced, not refused:
    /// the host answers what does not parse.
    Text(String),
    /// A line longer than the cap, read to its end and dropped so the stream stays in step.
    /// Carries its length.
    TooLong(usize),
    /// The source ended in the middle of a line of this many bytes; the fragment is dropped.
    Partial(usize),
    /// The source ended between lines.
    Eof,
    /// The read failed (a reset, or a read timeout).
    Failed(io::Error),
}

/// Reads the next line from `reader`, holding at most `max` bytes of it in memory.
pub(crate) fn read_line(reader: &mut impl BufRead, max: usize) -> Line {
    let mut line = Vec::new();
    let mut seen = 0usize;
    let mut too_long = false;
    loop {
        let buffer = match reader.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Line::Failed(e),
        };
        if buffer.is_empty() {
            return if seen == 0 {
                Line::Eof
            } else {
                Line::Partial(seen)
            };
        }
        let newline = buffer.iter().position(|&b| b == b'\n');
        let chunk = &buffer[..newline.unwrap_or(buffer.len())];
        seen += chunk.len();
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let consumed = newline.map_or(buffer.len(), |at| at + 1);
        reader.consume(consumed);
        if newline.is_some() {
            break;
        }
    }
    if too_long {
        return Line::TooLong(seen);
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Line::Text(String::from_utf8_lossy(&line).into_owned())
}

/// A JSON-RPC error line with `id: null`: what the listener answers when it cannot hand a line
/// (or a connection) to the host.
pub(crate) fn error_line(code: i64, message: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": code, "message": message },
    })
    .to_string()
}

/// The message of a JSON-RPC error line with `id: null`, if `line` is one: a server's last word
/// before it closes, worth putting in the close reason.
pub(crate) fn null_id_error(line: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    if !value.get("id").is_some_and(serde_json::Value::is_null) {
        return None;
    }
    value
        .get("error")?
        .get("message")?
        .as_str()
        .map(str::to_owned)
}
