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

use crate::{
    Config, ENV_ALLOWLIST,
    lines::{Line, read_line},
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
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A thread that panicked while holding one of these locks left plain data behind; go on.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ChildPump {
    pub(crate) fn spawn(target: Target, config: &Config) -> Result<ChildPump, String> {
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
            stdout: Mutex::new(Stdout::new(stdout, config.max_line_bytes)),
            stderr: Mutex::new(Some(stderr)),
            tail,
            closed: Mutex::new(None),
            stopped: Mutex::new(false),
            grace: Duration::from_millis(config.stop_grace_ms),
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

    fn stop(&self) {
        {
            let mut stopped = lock(&self.stopped);
            if *stopped {
                return;
            }
            *stopped = true;
        }
        // Closing stdin is the polite request to exit.
        self.stdin.close();
        let (child, grace, name) = (self.child.clone(), self.grace, self.name.clone());
        let stopper = move || {
            let pid = lock(&child).id();
            if !wait_exit(&child, grace) {
                log(
                    LogLevel::Debug,
                    &format!("[{name}] still running after stdin closed; SIGTERM"),
                );
            }
            signal_group(pid, Signal::Term);
            if !wait_exit(&child, grace * 2) {
                log(
                    LogLevel::Warn,
                    &format!("[{name}] ignored SIGTERM; SIGKILL"),
                );
            }
            // Grandchildren may outlive the leader; the group goes either way.
            signal_group(pid, Signal::Kill);
            let _ = lock(&child).wait();
        };
        if thread::Builder::new()
            .name("stdio-stop".to_owned())
            .spawn(stopper)
            .is_err()
        {
            let pid = lock(&self.child).id();
            signal_group(pid, Signal::Kill);
        }
    }
}

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
                Next::TooLong(length) => log(
                    LogLevel::Error,
                    &format!(
                        "[{}] dropped a {length}-byte line from stdout: longer than the cap",
                        self.name
                    ),
                ),
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
    fn drop(&mut self) {
        self.stop();
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
            }
            Line::TooLong(length) => log(
                LogLevel::Info,
                &format!("[{name}] ({length} bytes on one stderr line)"),
            ),
            Line::Eof | Line::Failed(_) => return,
        }
    }
}

/// Why the connection ended: the exit status when the child has exited (waiting briefly for it),
/// and the tail of its stderr.
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
    let tail = lock(tail);
    if !tail.is_empty() {
        report.push_str("; stderr: ");
        report.push_str(&tail.iter().cloned().collect::<Vec<_>>().join(" | "));
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
fn signal_group(pid: u32, signal: Signal) {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return;
    };
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
fn signal_group(_pid: u32, _signal: Signal) {}
