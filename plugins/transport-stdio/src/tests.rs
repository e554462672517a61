#![allow(clippy::unwrap_used)]

use std::{io::Cursor, time::Duration};

use runbyte_plugin_api::transport::{Pump, Received, Transport};
use serde_json::json;

use crate::{
    Stdio,
    lines::{Line, read_line},
};

fn stdio() -> Stdio {
    Stdio::open("{}").unwrap()
}

fn next_message(pump: &dyn Pump) -> Received {
    for _ in 0..100 {
        match pump.recv(Duration::from_millis(100)) {
            Received::Timeout => continue,
            other => return other,
        }
    }
    Received::Timeout
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
fn a_child_echoes_lines_and_its_exit_is_reported_with_stderr() {
    let target = json!({
        "name": "cat",
        "command": "sh",
        "args": ["-c", "read line; echo \"$line\"; echo 'bye now' >&2; exit 7"],
    });
    let pump = stdio().connect(&target.to_string()).unwrap();
    pump.send(r#"{"jsonrpc":"2.0","method":"ping","id":1}"#)
        .unwrap();
    assert_eq!(
        next_message(pump.as_ref()),
        Received::Message(r#"{"jsonrpc":"2.0","method":"ping","id":1}"#.into())
    );
    let Received::Closed(reason) = next_message(pump.as_ref()) else {
        panic!("not closed")
    };
    assert!(reason.contains("exited with status 7"), "{reason}");
    assert!(reason.contains("bye now"), "{reason}");
    // Closed stays closed.
    assert!(matches!(
        pump.recv(Duration::from_millis(1)),
        Received::Closed(_)
    ));
}

#[test]
fn the_environment_is_scrubbed_to_the_allowlist_plus_the_config() {
    // SAFETY: tests in this module do not read this variable concurrently.
    unsafe { std::env::set_var("RUNBYTE_TEST_SECRET", "leaked") };
    let target = json!({
        "name": "env",
        "command": "sh",
        "args": ["-c", "echo \"${RUNBYTE_TEST_SECRET:-absent}/${GIVEN}/${PATH:+path}\""],
        "env": {"GIVEN": "given"},
    });
    let pump = stdio().connect(&target.to_string()).unwrap();
    assert_eq!(
        next_message(pump.as_ref()),
        Received::Message("absent/given/path".into())
    );
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
fn closing_ends_the_whole_process_group() {
    let target = json!({
        "name": "group",
        "command": "sh",
        // A grandchild that ignores stdin, and a parent that ignores SIGTERM.
        "args": ["-c", "trap '' TERM; sleep 300 & echo $!; wait"],
    });
    let pump = Stdio::open(r#"{"stop-grace-ms": 100}"#)
        .unwrap()
        .connect(&target.to_string())
        .unwrap();
    let Received::Message(pid) = next_message(pump.as_ref()) else {
        panic!("no pid")
    };
    let pid: i32 = pid.trim().parse().unwrap();
    pump.close();
    let Received::Closed(reason) = next_message(pump.as_ref()) else {
        panic!("not closed")
    };
    assert!(reason.contains("signal 9"), "{reason}");
    let mut alive = true;
    for _ in 0..50 {
        alive = is_running(pid);
        if !alive {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive, "grandchild {pid} survived");
}

/// Whether `pid` is a live process: a zombie (killed, not yet reaped by whoever inherited it)
/// counts as dead.
fn is_running(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                != Some("Z")
        }
        Err(_) => false,
    }
}

#[test]
fn over_long_lines_from_a_child_are_skipped_and_later_lines_arrive() {
    let target = json!({
        "name": "long",
        "command": "sh",
        "args": ["-c", "printf '%0200d\\n' 0; printf '%0300000d\\n' 0; echo ''; echo '  '; echo short; sleep 5"],
    });
    let pump = Stdio::open(r#"{"max-line-bytes": 100}"#)
        .unwrap()
        .connect(&target.to_string())
        .unwrap();
    assert_eq!(
        next_message(pump.as_ref()),
        Received::Message("short".into())
    );
    pump.close();
}

#[test]
fn sending_never_waits_for_a_child_that_is_not_reading_yet() {
    // The child reads nothing for half a second; 2 MiB is far more than a pipe holds.
    let target = json!({"name": "slow", "command": "sh", "args": ["-c", "sleep 0.5; cat"]});
    let pump = stdio().connect(&target.to_string()).unwrap();
    assert!(pump.sends_without_blocking());
    let big = "x".repeat(2 << 20);
    let started = std::time::Instant::now();
    pump.send(&big).unwrap();
    pump.send("after").unwrap();
    assert!(
        started.elapsed() < Duration::from_millis(200),
        "send waited {:?}",
        started.elapsed()
    );
    assert_eq!(next_message(pump.as_ref()), Received::Message(big));
    assert_eq!(
        next_message(pump.as_ref()),
        Received::Message("after".into())
    );
    pump.close();
}
