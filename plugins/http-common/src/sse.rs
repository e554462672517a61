//! Server-Sent Events: an incremental parser (the WHATWG "event stream interpretation") and the
//! framing a listener writes.

use std::fmt;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; `message` when absent.
    pub event: String,
    pub data: String,
    /// The last event id seen on the stream when this event was dispatched.
    pub id: Option<String>,
}

/// An event (or a line) grew past the size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLarge {
    pub limit: usize,
}

impl fmt::Display for TooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "an SSE event exceeds the {} byte limit", self.limit)
    }
}

/// Parses an event stream fed in arbitrary chunks.
#[derive(Debug)]
pub struct SseDecoder {
    line: Vec<u8>,
    /// The previous chunk ended in `\r`: a `\n` starting the next one belongs to it.
    after_cr: bool,
    event: String,
    data: String,
    has_data: bool,
    last_id: Option<String>,
    retry_ms: Option<u64>,
    limit: usize,
}

impl SseDecoder {
    /// A decoder that refuses any event whose data (or any single line) exceeds `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Self {
            line: Vec::new(),
            after_cr: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
            last_id: None,
            retry_ms: None,
            limit,
        }
    }

    /// Feeds one chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, TooLarge> {
        let mut events = Vec::new();
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..end]);
            let terminator = rest[end];
            rest = &rest[end + 1..];
            if terminator == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    None => self.after_cr = true,
                    Some(_) => {}
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.line_done(&line)? {
                events.push(event);
            }
        }
        self.line.extend_from_slice(rest);
        if self.line.len() > self.limit.saturating_add(64) {
            return Err(TooLarge { limit: self.limit });
        }
        Ok(events)
    }

    /// The id of the last event seen (what a reconnection sends as `Last-Event-ID`).
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The reconnection delay the server asked for with a `retry:` field.
    pub fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    fn line_done(&mut self, line: &[u8]) -> Result<Option<SseEvent>, TooLarge> {
        if line.is_empty() {
            return Ok(self.dispatch());
        }
        if line[0] == b':' {
            return Ok(None);
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"event" => self.event = value.into_owned(),
            b"data" => {
                if self.data.len() + value.len() + 1 > self.limit {
                    return Err(TooLarge { limit: self.limit });
                }
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"id" if !value.contains('\0') => self.last_id = Some(value.into_owned()),
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry_ms = value.parse().ok();
            }
            _ => {}
        }
        Ok(None)
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        let event = if event.is_empty() {
            "message".to_owned()
        } else {
            event
        };
        Some(SseEvent {
            event,
            data,
            id: self.last_id.clone(),
        })
    }
}

/// Frames one event. Line breaks inside `data` become separate `data:` lines, so any text
/// round-trips.
pub fn encode_event(event: Option<&str>, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + 32);
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    for line in data.split("\r\n").flat_map(|part| part.split(['\n', '\r'])) {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}
