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
fn a_child_echoes_lines_and_its_exit_is_reported_without_its_stderr() {
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
    // Its stderr went to the log: it may hold a secret, and the reason reaches programs.
    assert!(!reason.contains("bye now"), "{reason}");
    assert!(reason.contains("stderr is in Runbyte's log"), "{reason}");
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

/// How long reading one line of `bytes` bytes from a real child takes.
fn time_to_read_a_line(bytes: usize) -> Duration {
    let target = json!({
        "name": "big",
        "command": "sh",
        "args": ["-c", format!("head -c {bytes} /dev/zero | tr '\\0' x; echo; sleep 5")],
    });
    let pump = stdio().connect(&target.to_string()).unwrap();
    // Wait for the first bytes, so that the child's start-up is not timed.
    let Some(fd) = pump.readable_fd() else {
        panic!("no descriptor")
    };
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the pump's descriptor, which outlives the call.
    unsafe { libc::poll(&mut poll, 1, 10_000) };
    let started = std::time::Instant::now();
    let Received::Message(line) = next_message(pump.as_ref()) else {
        panic!("no line")
    };
    let elapsed = started.elapsed();
    assert_eq!(line.len(), bytes);
    pump.close();
    elapsed
}

#[test]
fn reading_a_long_line_takes_time_linear_in_its_length() {
    let small = time_to_read_a_line(8 << 20);
    let large = time_to_read_a_line(32 << 20);
    eprintln!("8 MiB: {small:?}, 32 MiB: {large:?}");
    // Linear is about 4x; quadratic would be about 16x. The floor keeps timer noise on a tiny
    // `small` from failing the test.
    let floor = small.max(Duration::from_millis(50));
    assert!(
        large < floor * 8,
        "8 MiB took {small:?}, 32 MiB took {large:?}"
    );
}

#[test]
fn a_message_the_child_cannot_take_is_refused_alone_and_the_connection_goes_on() {
    // The child reads nothing for two seconds, then echoes everything.
    let target = json!({"name": "stalled", "command": "sh", "args": ["-c", "sleep 2; cat"]});
    let pump = stdio().connect(&target.to_string()).unwrap();
    let first = "a".repeat(40 << 20);
    pump.send(&first).unwrap();
    // 40 + 30 MiB would wait: more than the backlog holds.
    let error = pump.send(&"b".repeat(30 << 20)).unwrap_err();
    assert!(
        error.starts_with(runbyte_plugin_api::transport::SEND_REFUSED),
        "{error}"
    );
    assert!(
        error.contains("server `stalled`") && error.contains("67108864 bytes"),
        "{error}"
    );
    // One message alone over the limit is refused too, before any of it is written.
    let error = pump.send(&"c".repeat(65 << 20)).unwrap_err();
    assert!(error.contains("67108864 bytes"), "{error}");
    // Later messages are still taken, and the child gets exactly what was accepted, in order.
    pump.send("after").unwrap();
    assert_eq!(next_message(pump.as_ref()), Received::Message(first));
    assert_eq!(
        next_message(pump.as_ref()),
        Received::Message("after".into())
    );
    pump.close();
}

#[test]
fn a_response_over_the_servers_cap_fails_its_request_at_once() {
    let target = json!({
        "name": "big",
        "command": "sh",
        "args": ["-c", concat!(
            // A request from the server, over the cap: dropped, not answered (its id is not ours).
            r#"printf '{"jsonrpc":"2.0","id":41,"method":"x","params":"%05000d"}\n' 0;"#,
            // rmcp's order, then the TypeScript SDK's.
            r#"printf '{"jsonrpc":"2.0","id":42,"result":"%05000d"}\n' 0;"#,
            r#"printf '{"result":"%05000d","jsonrpc":"2.0","id":"s-43"}\n' 0;"#,
            "echo short; sleep 5",
        )],
        "max-message-bytes": 1000,
    });
    let pump = stdio().connect(&target.to_string()).unwrap();
    for id in [json!(42), json!("s-43")] {
        let Received::Message(answer) = next_message(pump.as_ref()) else {
            panic!("no answer")
        };
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["id"], id);
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with("server `big` sent a 50")
                && message.ends_with("the limit is 1000 bytes (max-message-bytes)"),
            "{message}"
        );
    }
    assert_eq!(
        next_message(pump.as_ref()),
        Received::Message("short".into())
    );
    pump.close();
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
