//! The connector against real child processes, the same on every OS: each child is this test
//! binary run again with [`ROLE`] set, acting out what the test needs (a shell would do on Unix,
//! but Windows has none). The binary has its own `main` rather than libtest's, because libtest
//! prints to stdout, and a child's stdout is the protocol.
//!
//! Run: `cargo test -p runbyte-transport-stdio --test children [FILTER...] [--exact]`.

#![allow(clippy::unwrap_used)]

use std::{
    io::{BufRead, Read, Write},
    time::{Duration, Instant},
};

use runbyte_plugin_api::transport::{Pump, Received, Transport};
use runbyte_transport_stdio::Stdio;
use serde_json::{Value, json};

/// Set in a child: the role it plays, with its arguments on the command line.
const ROLE: &str = "RUNBYTE_STDIO_TEST_ROLE";

type Test = (&'static str, fn());

const TESTS: &[Test] = &[
    (
        "a_child_echoes_lines_and_its_exit_is_reported_without_its_stderr",
        a_child_echoes_lines_and_its_exit_is_reported_without_its_stderr,
    ),
    (
        "the_environment_is_scrubbed_to_the_allowlist_plus_the_config",
        the_environment_is_scrubbed_to_the_allowlist_plus_the_config,
    ),
    (
        "closing_ends_the_whole_process_tree",
        closing_ends_the_whole_process_tree,
    ),
    (
        "over_long_lines_from_a_child_are_skipped_and_later_lines_arrive",
        over_long_lines_from_a_child_are_skipped_and_later_lines_arrive,
    ),
    (
        "sending_never_waits_for_a_child_that_is_not_reading_yet",
        sending_never_waits_for_a_child_that_is_not_reading_yet,
    ),
    (
        "reading_a_long_line_takes_time_linear_in_its_length",
        reading_a_long_line_takes_time_linear_in_its_length,
    ),
    (
        "a_message_the_child_cannot_take_is_refused_alone_and_the_connection_goes_on",
        a_message_the_child_cannot_take_is_refused_alone_and_the_connection_goes_on,
    ),
    (
        "a_response_over_the_servers_cap_fails_its_request_at_once",
        a_response_over_the_servers_cap_fails_its_request_at_once,
    ),
    #[cfg(windows)]
    (
        "a_batch_file_on_the_path_is_found_by_its_bare_name",
        a_batch_file_on_the_path_is_found_by_its_bare_name,
    ),
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if std::env::var_os(ROLE).is_some() {
        return roles::play(&args);
    }
    let exact = args.iter().any(|a| a == "--exact");
    let filters: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let chosen: Vec<&Test> = TESTS
        .iter()
        .filter(|(name, _)| {
            filters.is_empty()
                || filters.iter().any(|f| {
                    if exact {
                        *name == f.as_str()
                    } else {
                        name.contains(f.as_str())
                    }
                })
        })
        .collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in &chosen {
            println!("{name}: test");
        }
        return;
    }
    println!("\nrunning {} tests", chosen.len());
    // In parallel, as libtest would: each test's children are its own.
    let running: Vec<_> = chosen
        .iter()
        .map(|&&(name, test)| (name, std::thread::spawn(test)))
        .collect();
    let mut failed = Vec::new();
    for (name, run) in running {
        let passed = run.join().is_ok();
        println!("test {name} ... {}", if passed { "ok" } else { "FAILED" });
        if !passed {
            failed.push(name);
        }
    }
    let passed = chosen.len() - failed.len();
    if failed.is_empty() {
        println!("\ntest result: ok. {passed} passed; 0 failed\n");
    } else {
        println!("\nfailures:\n    {}", failed.join("\n    "));
        println!(
            "\ntest result: FAILED. {passed} passed; {} failed\n",
            failed.len()
        );
        std::process::exit(101);
    }
}

/// A target running this binary in `role`.
fn child(name: &str, role: &[&str]) -> Value {
    json!({
        "name": name,
        "command": std::env::current_exe().unwrap(),
        "args": role,
        "env": {ROLE: "1"},
    })
}

fn stdio() -> Stdio {
    Stdio::open("{}").unwrap()
}

/// The next message, waiting up to a minute: only a hang takes that long (wine's pipes move
/// about 7 MB/s, so the 40 MiB round trip below takes seconds there).
fn next_message(pump: &dyn Pump) -> Received {
    for _ in 0..600 {
        match pump.recv(Duration::from_millis(100)) {
            Received::Timeout => continue,
            other => return other,
        }
    }
    Received::Timeout
}

fn a_child_echoes_lines_and_its_exit_is_reported_without_its_stderr() {
    let pump = stdio()
        .connect(&child("cat", &["echo-once"]).to_string())
        .unwrap();
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

fn the_environment_is_scrubbed_to_the_allowlist_plus_the_config() {
    // SAFETY: no other test reads or writes this variable.
    unsafe { std::env::set_var("RUNBYTE_TEST_SECRET", "leaked") };
    let mut target = child("env", &["env"]);
    target["env"]["GIVEN"] = json!("given");
    let pump = stdio().connect(&target.to_string()).unwrap();
    assert_eq!(
        next_message(pump.as_ref()),
        Received::Message("absent/given/path".into())
    );
}

fn closing_ends_the_whole_process_tree() {
    // A grandchild that ignores stdin, and (on Unix) a parent that ignores SIGTERM.
    let pump = Stdio::open(r#"{"stop-grace-ms": 100}"#)
        .unwrap()
        .connect(&child("group", &["group"]).to_string())
        .unwrap();
    let Received::Message(pid) = next_message(pump.as_ref()) else {
        panic!("no pid")
    };
    let pid: u32 = pid.trim().parse().unwrap();
    assert!(is_running(pid), "grandchild {pid} is not running");
    pump.close();
    let Received::Closed(reason) = next_message(pump.as_ref()) else {
        panic!("not closed")
    };
    #[cfg(unix)]
    assert!(reason.contains("signal 9"), "{reason}");
    #[cfg(windows)]
    assert!(reason.contains("was terminated"), "{reason}");
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
#[cfg(target_os = "linux")]
fn is_running(pid: u32) -> bool {
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

/// Whether `pid` exists (an orphaned zombie is soon reaped by launchd).
#[cfg(all(unix, not(target_os = "linux")))]
fn is_running(pid: u32) -> bool {
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

#[cfg(windows)]
fn is_running(pid: u32) -> bool {
    use windows_sys::Win32::{
        Foundation::{CloseHandle, STILL_ACTIVE},
        System::Threading::{GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION},
    };
    // SAFETY: the handle is checked, used once and closed.
    unsafe {
        let process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid);
        if process.is_null() {
            return false;
        }
        let mut code = 0u32;
        let read = GetExitCodeProcess(process, &mut code);
        CloseHandle(process);
        read != 0 && code == STILL_ACTIVE as u32
    }
}

fn over_long_lines_from_a_child_are_skipped_and_later_lines_arrive() {
    let pump = Stdio::open(r#"{"max-line-bytes": 100}"#)
        .unwrap()
        .connect(&child("long", &["long"]).to_string())
        .unwrap();
    assert_eq!(
        next_message(pump.as_ref()),
        Received::Message("short".into())
    );
    pump.close();
}

fn sending_never_waits_for_a_child_that_is_not_reading_yet() {
    // The child reads nothing for half a second; 2 MiB is far more than a pipe holds.
    let pump = stdio()
        .connect(&child("slow", &["cat", "500"]).to_string())
        .unwrap();
    assert!(pump.sends_without_blocking());
    let big = "x".repeat(2 << 20);
    let started = Instant::now();
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
    let length = bytes.to_string();
    let pump = stdio()
        .connect(&child("big", &["big", &length]).to_string())
        .unwrap();
    // Wait for the first bytes, so that the child's start-up is not timed. Without a descriptor
    // (Windows) start-up is timed too, which only makes the ratio below smaller.
    #[cfg(unix)]
    {
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
    }
    let started = Instant::now();
    let Received::Message(line) = next_message(pump.as_ref()) else {
        panic!("no line")
    };
    let elapsed = started.elapsed();
    assert_eq!(line.len(), bytes);
    pump.close();
    elapsed
}

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

fn a_message_the_child_cannot_take_is_refused_alone_and_the_connection_goes_on() {
    // The child reads nothing for two seconds, then echoes everything.
    let pump = stdio()
        .connect(&child("stalled", &["cat", "2000"]).to_string())
        .unwrap();
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

fn a_response_over_the_servers_cap_fails_its_request_at_once() {
    let mut target = child("big", &["responses"]);
    target["max-message-bytes"] = json!(1000);
    let pump = stdio().connect(&target.to_string()).unwrap();
    for id in [json!(42), json!("s-43")] {
        let Received::Message(answer) = next_message(pump.as_ref()) else {
            panic!("no answer")
        };
        let answer: Value = serde_json::from_str(&answer).unwrap();
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

/// `npx` is `npx.cmd` on Windows: a bare name finds a batch file on the child's `PATH`, as it
/// would in cmd.exe.
#[cfg(windows)]
fn a_batch_file_on_the_path_is_found_by_its_bare_name() {
    let folder = std::env::temp_dir().join(format!("runbyte-stdio-test-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("runbyte-hello.cmd"),
        "@echo {\"hello\": %1}\r\n",
    )
    .unwrap();
    let mut path = std::ffi::OsString::from(&folder);
    path.push(";");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let target = json!({
        "name": "batch",
        "command": "runbyte-hello",
        "args": ["7"],
        "env": {"PATH": path.to_str().unwrap()},
    });
    let pump = stdio().connect(&target.to_string()).unwrap();
    let message = next_message(pump.as_ref());
    pump.close();
    let _ = std::fs::remove_dir_all(&folder);
    assert_eq!(message, Received::Message(r#"{"hello": 7}"#.into()));
}

/// What a child does, by its first argument.
mod roles {
    use super::*;

    pub(super) fn play(args: &[String]) {
        let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or_default();
        let mut out = std::io::stdout().lock();
        match arg(0) {
            // Echoes one line, says goodbye on stderr, exits with 7.
            "echo-once" => {
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line).unwrap();
                out.write_all(line.as_bytes()).unwrap();
                out.flush().unwrap();
                eprintln!("bye now");
                std::process::exit(7);
            }
            "env" => {
                let secret = std::env::var("RUNBYTE_TEST_SECRET");
                let given = std::env::var("GIVEN").unwrap_or_default();
                let path = if std::env::var_os("PATH").is_some() {
                    "path"
                } else {
                    ""
                };
                writeln!(
                    out,
                    "{}/{given}/{path}",
                    secret.as_deref().unwrap_or("absent")
                )
                .unwrap();
                out.flush().unwrap();
            }
            // Ignores SIGTERM (and so does the grandchild: an ignored signal stays ignored
            // across exec), starts a grandchild that ignores stdin (and shares stdout), prints
            // its pid and waits for it.
            "group" => {
                #[cfg(unix)]
                // SAFETY: sets a signal's disposition to "ignore"; no handler runs.
                unsafe {
                    libc::signal(libc::SIGTERM, libc::SIG_IGN);
                }
                let mut grandchild = std::process::Command::new(std::env::current_exe().unwrap())
                    .arg("sleep")
                    .stdin(std::process::Stdio::null())
                    .spawn()
                    .unwrap();
                writeln!(out, "{}", grandchild.id()).unwrap();
                out.flush().unwrap();
                let _ = grandchild.wait();
            }
            "sleep" => std::thread::sleep(Duration::from_secs(300)),
            // Over the cap of 100, blank lines, then one that arrives.
            "long" => {
                writeln!(out, "{}", "0".repeat(200)).unwrap();
                writeln!(out, "{}", "0".repeat(300_000)).unwrap();
                out.write_all(b"\n  \nshort\n").unwrap();
                out.flush().unwrap();
                std::thread::sleep(Duration::from_secs(5));
            }
            // Reads nothing for the milliseconds given, then copies stdin to stdout.
            "cat" => {
                std::thread::sleep(Duration::from_millis(arg(1).parse().unwrap()));
                let mut input = std::io::stdin().lock();
                let mut buffer = vec![0; 1 << 16];
                loop {
                    let n = input.read(&mut buffer).unwrap();
                    if n == 0 {
                        break;
                    }
                    out.write_all(&buffer[..n]).unwrap();
                    out.flush().unwrap();
                }
            }
            // One line of the bytes given.
            "big" => {
                let length: usize = arg(1).parse().unwrap();
                out.write_all(&vec![b'x'; length]).unwrap();
                out.write_all(b"\n").unwrap();
                out.flush().unwrap();
                std::thread::sleep(Duration::from_secs(5));
            }
            // Over a cap of 1000: a request from the server (dropped, not answered: its id is
            // not ours), a response in rmcp's order and one in the TypeScript SDK's.
            "responses" => {
                let pad = "0".repeat(5000);
                writeln!(
                    out,
                    r#"{{"jsonrpc":"2.0","id":41,"method":"x","params":"{pad}"}}"#
                )
                .unwrap();
                writeln!(out, r#"{{"jsonrpc":"2.0","id":42,"result":"{pad}"}}"#).unwrap();
                writeln!(out, r#"{{"result":"{pad}","jsonrpc":"2.0","id":"s-43"}}"#).unwrap();
                writeln!(out, "short").unwrap();
                out.flush().unwrap();
                std::thread::sleep(Duration::from_secs(5));
            }
            other => panic!("unknown role {other:?}"),
        }
    }
}
