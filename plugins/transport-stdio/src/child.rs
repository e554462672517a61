//! The connector: a downstream server as a child process.

use std::{
    collections::{BTreeMap, VecDeque},
    io::BufReader,
    path::PathBuf,
    process::{Child, ChildStdout, Command, Stdio},
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
    stdout::Next,
    sys::{read::Incoming, tree::Tree},
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
    /// The child and everything it starts, for the stop.
    tree: Arc<Tree>,
    stdin: Stdin,
    stdout: Mutex<Incoming<ChildStdout>>,
    stdout_fd: Option<i32>,
    stderr: Mutex<Option<thread::JoinHandle<()>>>,
    tail: Tail,
    closed: Mutex<Option<String>>,
    stopped: Mutex<bool>,
    grace: Duration,
    /// The cap on one message from the server, and the setting it came from (for errors).
    max: (usize, &'static str),
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
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
        // The PATH the child gets: its own table's, or Runbyte's (it is on the allowlist).
        let path = target
            .env
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("PATH"))
            .map(|(_, value)| std::ffi::OsString::from(value))
            .or_else(|| std::env::var_os("PATH"));
        let program = crate::sys::program::resolve(&target.command, path.as_deref());
        let mut command = Command::new(program);
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
        crate::sys::tree::prepare(&mut command);
        let mut child = spawn_from_one_thread(command).map_err(|e| {
            let place = target
                .cwd
                .as_ref()
                .map(|c| format!(" in {}", c.display()))
                .unwrap_or_default();
            format!("cannot start `{}`{place}: {e}", target.command)
        })?;
        let tree = match Tree::adopt(&child, &target.name) {
            Ok(tree) => Arc::new(tree),
            Err(error) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("cannot start `{}`: {error}", target.command));
            }
        };
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
        let stdout = Incoming::new(stdout, max.0, &target.name)
            .map_err(|e| format!("cannot start a thread: {e}"))?;
        Ok(ChildPump {
            stdin: Stdin::new(stdin, target.name.clone()),
            name: target.name,
            child,
            tree,
            stdout_fd: stdout.readable_fd(),
            stdout: Mutex::new(stdout),
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
        let reason = exit_report(&self.child, &self.tree, &self.tail, deadline);
        *lock(&self.closed) = Some(reason.clone());
        reason
    }

    /// Stops the server and waits until its whole tree is gone (grandchildren included), at
    /// most twice the grace and a little: the host calls `close` on shutdown and on a restart,
    /// and a tree still running when Runbyte exits would be orphaned. A second caller waits for
    /// the first stop to end. How the tree is stopped is the platform's ([`crate::sys::tree`]).
    fn stop(&self) {
        let mut stopped = lock(&self.stopped);
        if *stopped {
            return;
        }
        // Closing stdin is the polite request to exit.
        self.stdin.close();
        self.tree.stop(&self.child, self.grace, &self.name);
        *stopped = true;
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
        self.stdout_fd
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
        let (child, tree) = (self.child.clone(), self.tree.clone());
        let (grace, name) = (self.grace, self.name.clone());
        let stopper = move || tree.stop(&child, grace, &name);
        if thread::Builder::new()
            .name("stdio-stop".to_owned())
            .spawn(stopper)
            .is_err()
        {
            self.tree.kill(&self.child);
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
fn exit_report(child: &Mutex<Child>, tree: &Tree, tail: &Tail, deadline: Instant) -> String {
    let status = loop {
        match lock(child).try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            _ => break None,
        }
    };
    let mut report = match status {
        Some(status) => describe_status(status, tree),
        None => "closed its stdout".to_owned(),
    };
    let lines = lock(tail).len();
    if lines > 0 {
        report.push_str("; what it printed on stderr is in Runbyte's log");
    }
    report
}

fn describe_status(status: std::process::ExitStatus, tree: &Tree) -> String {
    if let Some(description) = tree.describe(status) {
        return description;
    }
    if let Some(code) = status.code() {
        return format!("exited with status {code}");
    }
    format!("exited ({status})")
}

/// Waits up to `within` for the child to exit; whether it did.
pub(crate) fn wait_exit(child: &Mutex<Child>, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        match lock(child).try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= deadline => return false,
            Ok(None) => thread::sleep(Duration::from_millis(10)),
        }
    }
}
