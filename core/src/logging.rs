//! Logs go to stderr, always: in stdio mode stdout is the protocol channel. Every line passes the
//! redaction layer first (`crate::redact`): a log line may quote a server's error, its stderr or
//! a URL.

use std::io::Write;

use tracing_subscriber::{EnvFilter, fmt::MakeWriter};

/// What logs and trace spans show of a client session's name: over legacy HTTP the name is the
/// `Mcp-Session-Id`, the session's only credential when the listener has no bearer token, so
/// never the name itself but `session#` and the first 12 hex digits of its SHA-256 (the HTTP
/// listener's own log lines show the same tag: `runbyte_http_common::security::session_tag`).
pub fn session_tag(session: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, session.as_bytes());
    format!("session#{}", crate::relay::hex(&digest.as_ref()[..6]))
}

/// Installs the stderr subscriber. `level` is a `tracing` filter (`info`, `debug`,
/// `runbyte=debug,rmcp=warn`); `RUNBYTE_LOG` overrides it.
pub fn init(level: &str) {
    let filter = std::env::var("RUNBYTE_LOG")
        .ok()
        .and_then(|value| EnvFilter::try_new(value).ok())
        .or_else(|| EnvFilter::try_new(level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(RedactedStderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}

/// Stderr, one event at a time, redacted.
struct RedactedStderr;

impl<'a> MakeWriter<'a> for RedactedStderr {
    type Writer = EventWriter;

    fn make_writer(&'a self) -> Self::Writer {
        EventWriter(Vec::with_capacity(256))
    }
}

/// Gathers one event's text, and writes it redacted when the event is done.
struct EventWriter(Vec<u8>);

impl Write for EventWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let redacted = crate::redact::redact(&text);
        let _ = std::io::stderr().lock().write_all(redacted.as_bytes());
    }
}
