//! The connector: a downstream server as a child process.

use std::{
    collections::{BTreeMap, VecDeque},
    io::BufReader,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex, mpsc},
    thread,
    time::{Duration, Instant},
};

use runbyte_plugin_api::{
    LogLevel, log,
    transport::{Pump, Received},
};
use serde::Deserialize;
use serde_json::json;

use crate::{
    Config, ENV_ALLOWLIST,
    lines::{Line, read_line},
    overlong::Overlong,
    stdin::Stdin,
    stdout::{Next, Stdout},
};

/// The host's description of the server to start.
#[derive(Debug, Deserialize)]
pub(crate) struct Target {
    name: String,
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    /// The longest message accepted from the server, in bytes; `max-line-bytes` of the
    /// transport's table when absent.
    #[serde(default, rename = "max-message-bytes")]
    max_message_bytes: Option<usize>,
}

/// How many stderr lines are kept for the exit report, and how long each may be.
const STDERR_TAIL_LINES: usize = 20;
const STDERR_LINE_CHARS: usize = 400;

type Tail = Arc<Mutex<VecDeque<String>>>;

pub(crate) struct ChildPump {
    name: String,
    child: Arc<Mutex<Child>>,
    stdin: Stdin,
    stdout: Mutex<Stdout>,
    stdout_fd: i32,
    stderr: Mutex<Option<thread::JoinHandle<()>>>,
    tail: Tail,
    closed: Mutex<Option<String>>,
    stopped: Mutex<bool>,
    grace: Duration,
    /// The cap on one message from the server, and the setting it came from (for errors).
    max: (usize, &'static str),
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A thread that panicked while holding one of these locks left plain data behind; go on.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ChildPump {
    pub(crate) fn spawn(target: Target, config: &Config) -> Result<ChildPump, String> {
        let max = match target.max_message_bytes {
            Some(0) => {
                return Err(format!(
                    "server `{}`: max-message-bytes must be above 0",
                    target.name
                ));
            }
            Some(max) => (max, "max-message-bytes"),
            None => (config.max_line_bytes, "max-line-bytes"),
        };
        let mut command = Command::new(&target.command);
        command.args(&target.args).env_clear();
        for name in ENV_ALLOWLIST
            .iter()
            .copied()
            .chain(config.inherit_env.iter().map(String::as_str))
        {
            if let Some(value) = std::env::var_os(name) {
                command.env(name, value);
            }
        }
        command.envs(&target.env);
        if let Some(cwd) = &target.cwd {
            command.current_dir(cwd);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // Its own process group, so that stopping it stops its children too.
            command.process_group(0);
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: the closure runs in the forked child before exec and calls only prctl(2),
            // which is async-signal-safe; it touches no memory of the parent.
            unsafe {
                command.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = spawn_from_one_thread(command).map_err(|e| {
            let place = target
                .cwd
                .as_ref()
                .map(|c| format!(" in {}", c.display()))
                .unwrap_or_default();
            format!("cannot start `{}`{place}: {e}", target.command)
        })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("the child's pipes were not created".to_owned());
        };
        log(
            LogLevel::Debug,
            &format!(
                "[{}] started `{}` (pid {})",
                target.name,
                target.command,
                child.id()
            ),
        );

        let child = Arc::new(Mutex::new(child));
        let tail: Tail = Arc::new(Mutex::new(VecDeque::new()));
        let stderr = {
            let (name, tail) = (target.name.clone(), tail.clone());
            thread::Builder::new()
                .name(format!("stdio-stderr-{}", target.name))
                .spawn(move || drain_stderr(stderr, &name, &tail))
                .map_err(|e| format!("cannot start a thread: {e}"))?
        };
        Ok(ChildPump {
            stdin: Stdin::new(stdin, target.name.clone()),
            name: target.name,
            child,
            stdout_fd: std::os::fd::AsRawFd::as_raw_fd(&stdout),
            stdout: Mutex::new(Stdout::new(stdout, max.0)),
            stderr: Mutex::new(Some(stderr)),
            tail,
            closed: Mutex::new(None),
            stopped: Mutex::new(false),
            grace: Duration::from_millis(config.stop_grace_ms),
            max,
        })
    }

    /// Records why the connection ended: the exit status, once stderr has had its last words.
    /// Bounded: `recv` may be called with a zero timeout from the host's event loop, so this
    /// waits at most [`FINISH_WAIT`] for the child to exit and stderr to end.
    fn finish(&self) -> String {
        let deadline = Instant::now() + FINISH_WAIT;
        if let Some(stderr) = lock(&self.stderr).take() {
            while !stderr.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(2));
            }
        }
        let reason = exit_report(&self.child, &self.tail, deadline);
        *lock(&self.closed) = Some(reason.clone());
        reason
    }

    /// Stops the server and waits until its whole process group is gone (grandchildren
    /// included), at most twice the grace plus [`KILLED_WAIT`]: the host calls `close` on
    /// shutdown and on a restart, and a group still running when Runbyte exits would be
    /// orphaned. A second caller waits for the first stop to end.
    fn stop(&self) {
        let mut stopped = lock(&self.stopped);
        if *stopped {
            return;
        }
        // Closing stdin is the polite request to exit.
        self.stdin.close();
        stop_group(&self.child, self.grace, &self.name);
        *stopped = true;
    }
}

/// How long a group may take to vanish after SIGKILL (it cannot refuse; the kernel may still be
/// tearing down a large process) before the stop gives up with a warning.
const KILLED_WAIT: Duration = Duration::from_millis(500);

/// Ends the process group that `child` leads: waits `grace` for the leader to exit (its stdin is
/// closed), SIGTERM to the group, waits `grace` for the group to go, then SIGKILL and waits for
/// that. The group is signalled even when the leader exited by itself: a grandchild keeps it.
fn stop_group(child: &Mutex<Child>, grace: Duration, name: &str) {
    let Ok(pgid) = i32::try_from(lock(child).id()) else {
        return;
    };
    if !wait_exit(child, grace) {
        log(
            LogLevel::Debug,
            &format!("[{name}] still running after stdin closed; SIGTERM"),
        );
    }
    if wait_group_gone(child, pgid, Duration::ZERO) {
        return;
    }
    signal_group(pgid, Signal::Term);
    if wait_group_gone(child, pgid, grace) {
        return;
    }
    log(
        LogLevel::Warn,
        &format!("[{name}] process group {pgid} ignored SIGTERM; SIGKILL"),
    );
    signal_group(pgid, Signal::Kill);
    if !wait_group_gone(child, pgid, KILLED_WAIT) {
        log(
            LogLevel::Warn,
            &format!(
                "[{name}] process group {pgid} still has processes {} ms after SIGKILL",
                KILLED_WAIT.as_millis()
            ),
        );
    }
}

/// Waits up to `within` until no live process is left in group `pgid`. The leader is reaped on
/// the way: until it is, its zombie keeps the group (and its id) in existence.
fn wait_group_gone(child: &Mutex<Child>, pgid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let _ = lock(child).try_wait();
        if !group_alive(pgid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

impl ChildPump {
    /// Reports a message over the cap. When it answers one of our requests, the answer is an
    /// error for that request, so the call fails now rather than at its timeout; otherwise the
    /// message is only logged.
    fn too_long(&self, skipped: &Overlong) -> Option<String> {
        let (limit, setting) = self.max;
        let error = format!(
            "server `{}` sent a {}-byte message; the limit is {limit} bytes ({setting})",
            self.name, skipped.length
        );
        let id = skipped.response_id();
        log(
            LogLevel::Error,
            &match &id {
                Some(id) => format!("{error}; failing request {id}"),
                None => format!("{error}; dropped it"),
            },
        );
        let answer = json!({
            "jsonrpc": "2.0",
            "id": id?,
            "error": {"code": MESSAGE_TOO_LARGE, "message": error},
        });
        Some(answer.to_string())
    }
}

/// The JSON-RPC error code of the answer that stands in for a response over the cap: in the
/// range the spec leaves to implementations.
const MESSAGE_TOO_LARGE: i64 = -32001;

impl Pump for ChildPump {
    fn send(&self, message: &str) -> Result<(), String> {
        self.stdin.send(message)
    }

    fn recv(&self, timeout: Duration) -> Received {
        if let Some(reason) = lock(&self.closed).clone() {
            return Received::Closed(reason);
        }
        let mut stdout = lock(&self.stdout);
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match stdout.next(left) {
                Next::Line(line) => return Received::Message(line),
                Next::Timeout => return Received::Timeout,
                Next::TooLong(skipped) => {
                    if let Some(answer) = self.too_long(&skipped) {
                        return Received::Message(answer);
                    }
                }
                Next::Eof => return Received::Closed(self.finish()),
                Next::Failed(error) => {
                    log(
                        LogLevel::Warn,
                        &format!("[{}] reading stdout failed: {error}", self.name),
                    );
                    return Received::Closed(self.finish());
                }
            }
        }
    }

    fn close(&self) {
        self.stop();
    }

    fn readable_fd(&self) -> Option<i32> {
        Some(self.stdout_fd)
    }

    fn sends_without_blocking(&self) -> bool {
        true
    }
}

/// How long the report of a child that closed its stdout may wait for its exit status.
const FINISH_WAIT: Duration = Duration::from_millis(250);

impl Drop for ChildPump {
    /// A pump dropped without `close` (the host always closes first) is stopped in the
    /// background: a drop may happen on a thread that must not block.
    fn drop(&mut self) {
        if *lock(&self.stopped) {
            return;
        }
        self.stdin.close();
        let (child, grace, name) = (self.child.clone(), self.grace, self.name.clone());
        let stopper = move || stop_group(&child, grace, &name);
        if thread::Builder::new()
            .name("stdio-stop".to_owned())
            .spawn(stopper)
            .is_err()
            && let Ok(pgid) = i32::try_from(lock(&self.child).id())
        {
            signal_group(pgid, Signal::Kill);
        }
    }
}

/// Starts every child from one thread that lives as long as the process. On Linux each child asks
/// for SIGTERM when the thread that started it ends (`PR_SET_PDEATHSIG`): from a short-lived
/// thread that would stop it early, from this one it means "when Runbyte is gone", so a Runbyte
/// killed outright does not leave its servers running.
fn spawn_from_one_thread(command: Command) -> std::io::Result<Child> {
    type Request = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: std::sync::OnceLock<Mutex<mpsc::Sender<Request>>> = std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (sender, requests) = mpsc::channel::<Request>();
        let started = thread::Builder::new()
            .name("stdio-spawner".to_owned())
            .spawn(move || {
                for (mut command, reply) in requests {
                    let _ = reply.send(command.spawn());
                }
            });
        if let Err(error) = started {
            log(
                LogLevel::Error,
                &format!("cannot start the spawner thread: {error}"),
            );
        }
        Mutex::new(sender)
    });
    let (reply, answer) = mpsc::channel();
    let gone = || std::io::Error::other("the spawner thread is gone");
    lock(spawner).send((command, reply)).map_err(|_| gone())?;
    answer.recv().map_err(|_| gone())?
}

fn drain_stderr(stderr: std::process::ChildStderr, name: &str, tail: &Tail) {
    let mut reader = BufReader::new(stderr);
    loop {
        match read_line(&mut reader, 64 * 1024) {
            Line::Text(line) => {
                log(LogLevel::Info, &format!("[{name}] {line}"));
                let mut tail = lock(tail);
                if tail.len() == STDERR_TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line.chars().take(STDERR_LINE_CHARS).collect());
                drop(tail);
            }
            Line::TooLong(length) => log(
                LogLevel::Info,
                &format!("[{name}] ({length} bytes on one stderr line)"),
            ),
            Line::Eof => return,
            Line::Failed(error) => {
                log(
                    LogLevel::Debug,
                    &format!("[{name}] reading stderr failed: {error}"),
                );
                return;
            }
        }
    }
}

/// Why the connection ended: the exit status when the child has exited (waiting briefly for it).
/// Not its stderr: a server may print its own token there, and this text reaches programs and
/// the VFS. Its stderr is in the log (which the host redacts), and the report says so.
fn exit_report(child: &Mutex<Child>, tail: &Tail, deadline: Instant) -> String {
    let status = loop {
        match lock(child).try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            _ => break None,
        }
    };
    let mut report = match status {
        Some(status) => describe_status(status),
        None => "closed its stdout".to_owned(),
    };
    let lines = lock(tail).len();
    if lines > 0 {
        report.push_str("; what it printed on stderr is in Runbyte's log");
    }
    report
}

fn describe_status(status: std::process::ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    format!("exited ({status})")
}

fn wait_exit(child: &Mutex<Child>, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        match lock(child).try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= deadline => return false,
            Ok(None) => thread::sleep(Duration::from_millis(10)),
        }
    }
}

enum Signal {
    Term,
    Kill,
}

#[cfg(unix)]
fn signal_group(pgid: i32, signal: Signal) {
    let signal = match signal {
        Signal::Term => libc::SIGTERM,
        Signal::Kill => libc::SIGKILL,
    };
    // SAFETY: kill(2) with a negative pid signals the process group the child leads (it was
    // started with process_group(0)); an absent group gives ESRCH, which we ignore.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

#[cfg(not(unix))]
fn signal_group(_pgid: i32, _signal: Signal) {}

/// Whether group `pgid` still has a live process. A zombie does not count: it is dead, and it
/// is its reaper's (PID 1 or a subreaper for an orphaned grandchild), not ours, to collect.
#[cfg(unix)]
fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks that the group exists and may be signalled; nothing is sent.
    let exists = unsafe { libc::kill(-pgid, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
    exists && live_member(pgid)
}

#[cfg(not(unix))]
fn group_alive(_pgid: i32) -> bool {
    false
}

/// Whether a process that is not a zombie has process group `pgid`, from `/proc`.
#[cfg(target_os = "linux")]
fn live_member(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    let pgid = pgid.to_string();
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // After the command name in parentheses: state, ppid, pgrp, ...
        let mut fields = stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .split_whitespace();
        let state = fields.next();
        let group = fields.nth(1);
        group == Some(pgid.as_str()) && state != Some("Z")
    })
}

#[cfg(all(unix, not(target_os = "linux")))]
fn live_member(_pgid: i32) -> bool {
    true
}
