#![allow(clippy::unwrap_used)]

//! What needs no child process; the tests against real children are in `tests/children.rs`.

use std::io::Cursor;

use runbyte_plugin_api::transport::Transport;
use serde_json::json;

use crate::{
    Stdio,
    lines::{Line, read_line},
};

fn stdio() -> Stdio {
    Stdio::open("{}").unwrap()
}

#[test]
fn lines_over_the_cap_are_skipped_and_the_stream_stays_in_step() {
    let mut input = Cursor::new(b"short\nthis line is too long\r\nok\r\n".to_vec());
    assert!(matches!(read_line(&mut input, 10), Line::Text(t) if t == "short"));
    assert!(matches!(read_line(&mut input, 10), Line::TooLong(23)));
    assert!(matches!(read_line(&mut input, 10), Line::Text(t) if t == "ok"));
    assert!(matches!(read_line(&mut input, 10), Line::Eof));
}

#[test]
fn a_missing_command_is_named() {
    let target = json!({"name": "x", "command": "/nonexistent/runbyte-server"});
    let error = stdio().connect(&target.to_string()).err().unwrap();
    assert!(
        error.contains("cannot start `/nonexistent/runbyte-server`"),
        "{error}"
    );
}

#[test]
fn max_message_bytes_must_be_above_zero() {
    let target = json!({"name": "zero", "command": "true", "max-message-bytes": 0});
    let error = stdio().connect(&target.to_string()).err().unwrap();
    assert!(
        error.contains("server `zero`: max-message-bytes"),
        "{error}"
    );
}
