//! Reading newline-delimited messages with a cap on line length.

use std::io::{BufRead, ErrorKind};

/// One read from a line source.
pub(crate) enum Line {
    /// A complete line, without its newline.
    Text(String),
    /// A line longer than the cap; it was skipped. Carries its length so far.
    TooLong(usize),
    /// End of input.
    Eof,
    /// The read failed.
    Failed(std::io::Error),
}

/// Reads the next line from `reader`, skipping any line longer than `max` bytes (the rest of it
/// is read and dropped, so the stream stays in step).
pub(crate) fn read_line(reader: &mut impl BufRead, max: usize) -> Line {
    let mut line = Vec::new();
    let mut too_long = false;
    let mut seen = 0usize;
    loop {
        let buffer = match reader.fill_buf() {
            Ok(buffer) => buffer,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Line::Failed(e),
        };
        if buffer.is_empty() {
            if seen == 0 {
                return Line::Eof;
            }
            break;
        }
        let (chunk, done) = match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => (&buffer[..at], Some(at + 1)),
            None => (buffer, None),
        };
        seen += chunk.len();
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let consumed = done.unwrap_or(buffer.len());
        reader.consume(consumed);
        if done.is_some() {
            seen += 1;
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
