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

/// The platform's reader (a poll on Unix, a reader thread on Windows) over a real pipe: lines in
/// order, blank ones skipped, a timeout when nothing comes, over-long lines reported and the
/// stream kept in step, more lines than one hand-over holds, then the end, which stays the end.
#[test]
fn a_pipe_is_read_line_by_line_with_timeouts_caps_and_its_end() {
    use std::{io::Write, time::Duration};

    use crate::{stdout::Next, sys::read::Incoming};

    const LONG: Duration = Duration::from_secs(30);
    let (reader, mut writer) = std::io::pipe().unwrap();
    let mut incoming = Incoming::new(reader, 10, "test").unwrap();
    assert!(matches!(
        incoming.next(Duration::from_millis(50)),
        Next::Timeout
    ));
    writer.write_all(b"one\n\n  \ntwo\r\n").unwrap();
    assert!(matches!(incoming.next(LONG), Next::Line(l) if l == "one"));
    assert!(matches!(incoming.next(LONG), Next::Line(l) if l == "two"));
    writer.write_all(b"this line is too long\nok\n").unwrap();
    assert!(matches!(incoming.next(LONG), Next::TooLong(s) if s.length == 21));
    assert!(matches!(incoming.next(LONG), Next::Line(l) if l == "ok"));
    let writing = std::thread::spawn(move || {
        for i in 0..1000 {
            writeln!(writer, "{i}").unwrap();
        }
    });
    for i in 0..1000 {
        assert!(matches!(incoming.next(LONG), Next::Line(l) if l == i.to_string()));
    }
    writing.join().unwrap();
    assert!(matches!(incoming.next(LONG), Next::Eof));
    assert!(matches!(incoming.next(LONG), Next::Eof));
}
