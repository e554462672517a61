//! The host side of an isolated plugin: starts its child on demand and again after it dies, checks
//! its greeting, and sends it [`Op`]s (`calls.rs` turns the `*Calls` traits into those). A call
//! blocks its caller until the reply (or [`CALL_TIMEOUT`]); one reader thread per child pairs
//! replies with callers.

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    path::PathBuf,
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    time::Duration,
};

use runbyte_plugin_api::PluginKind;
use serde_json::Value;

use super::{
    lock,
    protocol::{Answer, FromChild, Op, PROTOCOL_VERSION, RemoteError, RemoteErrorKind, ToChild},
};
use crate::{
    platform::job::ChildJob,
    plugin::{CallError, PluginError, PluginInfo},
};

/// How long one call may take before the child is taken for hung and stopped (its blocking calls,
/// `pump_recv` and `listener_accept`, wait at most `protocol::MAX_WAIT` each).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a child has to greet: it greets before it loads anything.
const GREETING_TIMEOUT: Duration = Duration::from_secs(10);

type Reply = Result<Answer, CallError>;

/// An isolated plugin as the host holds it. Cheap to clone; the clones (pumps and listeners hold
/// one) share one child, stopped when the last goes.
#[derive(Clone)]
pub(in crate::plugin) struct IsolatedHost {
    shared: Arc<Shared>,
}

struct Shared {
    info: Arc<PluginInfo>,
    kind: PluginKind,
    config: Value,
    exe: PathBuf,
    /// The running child, if any. Its reader empties the slot when it dies.
    conn: Arc<Mutex<Option<Arc<Conn>>>>,
    next_id: AtomicU64,
    generations: AtomicU64,
}

/// One running child.
struct Conn {
    generation: u64,
    /// The one lock held across I/O: a line must go out whole.
    stdin: Mutex<ChildStdin>,
    calls: Mutex<InFlight>,
    /// Dropped before the child (whose handle it uses on Windows): kills its tree there.
    _job: ChildJob,
    child: Mutex<Child>,
}

/// The calls waiting on a child, and whether it is gone: they change together, so that no call
/// starts waiting on a child whose reader has already failed the others.
#[derive(Default)]
struct InFlight {
    waiting: HashMap<u64, mpsc::Sender<Reply>>,
    gone: Option<String>,
}

impl Conn {
    fn send(&self, message: &ToChild) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let mut stdin = lock(&self.stdin);
        stdin.write_all(&line)?;
        stdin.flush()
    }

    fn kill(&self) {
        let _ = lock(&self.child).kill();
    }
}

/// What a child says before it takes calls, as its reader passes it on.
enum Startup {
    Message(FromChild),
    /// A line that is no message of this protocol.
    Unreadable(String),
    /// The child exited; how.
    Gone(String),
}

enum StartError {
    Plugin(PluginError),
    Process(String),
}

impl IsolatedHost {
    /// Starts the child once, so that a plugin that refuses its configuration is reported at
    /// start-up like an in-process one. `exe` is the `runbyte` binary.
    pub(in crate::plugin) fn start(
        info: PluginInfo,
        kind: PluginKind,
        config: Value,
        exe: PathBuf,
    ) -> Result<IsolatedHost, PluginError> {
        let host = IsolatedHost {
            shared: Arc::new(Shared {
                info: Arc::new(info),
                kind,
                config,
                exe,
                conn: Arc::default(),
                next_id: AtomicU64::new(1),
                generations: AtomicU64::new(0),
            }),
        };
        host.connection().map_err(|error| match error {
            StartError::Plugin(error) => error,
            StartError::Process(message) => PluginError::Failed {
                name: host.shared.info.name.clone(),
                path: host.shared.info.path.clone(),
                message: format!("its isolated host process failed: {message}"),
            },
        })?;
        Ok(host)
    }

    /// What the plugin file says it is.
    pub(in crate::plugin) fn info(&self) -> &Arc<PluginInfo> {
        &self.shared.info
    }

    fn connection(&self) -> Result<Arc<Conn>, StartError> {
        // Held while a child starts, so that callers arriving meanwhile wait for that child
        // rather than each starting one.
        let mut slot = lock(&self.shared.conn);
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let conn = self.spawn()?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    fn spawn(&self) -> Result<Arc<Conn>, StartError> {
        let shared = &self.shared;
        let exe = shared.exe.display();
        let mut child = Command::new(&shared.exe)
            .arg("plugin-host")
            .arg(&shared.info.path)
            .arg(shared.kind.as_str())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| StartError::Process(format!("cannot start {exe}: {e}")))?;
        let job = ChildJob::of_std(&child);
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            return Err(StartError::Process(
                "the child's pipes were not created".to_owned(),
            ));
        };
        let conn = Arc::new(Conn {
            generation: shared.generations.fetch_add(1, Ordering::SeqCst) + 1,
            stdin: Mutex::new(stdin),
            calls: Mutex::default(),
            _job: job,
            child: Mutex::new(child),
        });
        let (startup_sender, startup) = mpsc::channel();
        let reader = Reader {
            conn: conn.clone(),
            slot: shared.conn.clone(),
            plugin: shared.info.name.clone(),
            startup: startup_sender,
        };
        if let Err(error) = std::thread::Builder::new()
            .name(format!("isolated-{}", shared.info.name))
            .spawn(move || reader.run(stdout))
        {
            conn.kill();
            return Err(StartError::Process(format!(
                "cannot start a thread: {error}"
            )));
        }

        let refuse = |message: String| {
            conn.kill();
            Err(StartError::Process(message))
        };
        match startup.recv_timeout(GREETING_TIMEOUT) {
            Ok(Startup::Message(FromChild::Ready { version })) if version == PROTOCOL_VERSION => {}
            Ok(Startup::Message(FromChild::Ready { version })) => {
                return refuse(format!(
                    "`{exe} plugin-host` speaks version {version} of the isolated-plugin \
                     protocol, this Runbyte version {PROTOCOL_VERSION}: is it another Runbyte's \
                     binary?"
                ));
            }
            Ok(Startup::Message(other)) => {
                return refuse(format!(
                    "it sent {other:?} before greeting with its protocol version"
                ));
            }
            Ok(Startup::Unreadable(line)) => {
                return refuse(format!(
                    "`{exe} plugin-host` did not greet with an isolated-plugin protocol version \
                     (is it a runbyte binary?); its first line: {}",
                    line.chars().take(200).collect::<String>()
                ));
            }
            Ok(Startup::Gone(status)) => {
                return Err(StartError::Process(format!("it {status} before greeting")));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return refuse("it went away before greeting".to_owned());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return refuse(format!(
                    "it did not greet within {} s",
                    GREETING_TIMEOUT.as_secs()
                ));
            }
        }
        let open = ToChild::Open {
            kind: shared.kind.into(),
            config: shared.config.clone(),
        };
        if let Err(error) = conn.send(&open) {
            return refuse(format!("cannot reach it: {error}"));
        }
        // As long as the plugin takes to open: there is no deadline on that in process either.
        loop {
            match startup.recv() {
                Ok(Startup::Message(FromChild::Opened)) => return Ok(conn.clone()),
                Ok(Startup::Message(FromChild::Failed { error })) => {
                    return Err(StartError::Plugin(self.open_error(error)));
                }
                Ok(Startup::Message(other)) => {
                    return refuse(format!("it answered `open` with {other:?}"));
                }
                // A plugin that writes to stdout: its lines are skipped.
                Ok(Startup::Unreadable(_)) => {}
                Ok(Startup::Gone(status)) => {
                    return Err(StartError::Process(format!("it {status} before answering")));
                }
                Err(mpsc::RecvError) => {
                    return refuse("it went away before answering".to_owned());
                }
            }
        }
    }

    fn open_error(&self, error: RemoteError) -> PluginError {
        let (name, path) = (self.shared.info.name.clone(), self.shared.info.path.clone());
        let message = error.message;
        match error.kind {
            RemoteErrorKind::Panicked => PluginError::Panicked {
                name,
                path,
                message,
            },
            RemoteErrorKind::Failed => PluginError::Failed {
                name,
                path,
                message,
            },
        }
    }

    fn unavailable(&self, message: impl Into<String>) -> CallError {
        CallError::Isolated {
            plugin: self.shared.info.name.clone(),
            message: message.into(),
        }
    }

    pub(super) fn unexpected(&self, op: &str, answer: &Answer) -> CallError {
        self.unavailable(format!("its process answered `{op}` with {answer:?}"))
    }

    /// One call on the running child (started first if none runs), and that child's generation.
    pub(super) fn call(&self, op: Op) -> Result<(Answer, u64), CallError> {
        let conn = self.connection().map_err(|error| {
            self.unavailable(match error {
                StartError::Plugin(error) => error.to_string(),
                StartError::Process(message) => message,
            })
        })?;
        self.call_on(&conn, op)
            .map(|answer| (answer, conn.generation))
    }

    /// A call that must reach the child of `generation` (a pump's or a listener's); a restarted
    /// child no longer has it.
    pub(super) fn call_in(&self, generation: u64, op: Op) -> Reply {
        let conn = lock(&self.shared.conn).clone();
        match conn {
            Some(conn) if conn.generation == generation => self.call_on(&conn, op),
            _ => Err(self.unavailable("its process restarted; this connection was lost with it")),
        }
    }

    /// A call answered with the plugin's JSON.
    pub(super) fn json_call(&self, op: Op) -> Result<Value, CallError> {
        let name = op.name();
        match self.call(op)?.0 {
            Answer::Json(value) => Ok(value),
            other => Err(self.unexpected(name, &other)),
        }
    }

    fn call_on(&self, conn: &Conn, op: Op) -> Reply {
        let name = op.name();
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = mpsc::channel();
        {
            let mut calls = lock(&conn.calls);
            if let Some(gone) = &calls.gone {
                return Err(self.unavailable(format!("its process {gone}")));
            }
            calls.waiting.insert(id, sender);
        }
        if let Err(error) = conn.send(&ToChild::Call { id, op }) {
            lock(&conn.calls).waiting.remove(&id);
            return Err(self.unavailable(format!("cannot reach its process: {error}")));
        }
        match receiver.recv_timeout(CALL_TIMEOUT) {
            Ok(reply) => reply,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(self.unavailable("its process went away"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                lock(&conn.calls).waiting.remove(&id);
                // Hung: stop it; its reader fails what else was waiting, and the next call starts
                // it again.
                conn.kill();
                Err(self.unavailable(format!(
                    "`{name}` got no answer within {} s; its process was stopped",
                    CALL_TIMEOUT.as_secs()
                )))
            }
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(conn) = lock(&self.conn).take() {
            conn.kill();
        }
    }
}

/// Reads one child's stdout: replies go to their callers, anything else to the start-up.
struct Reader {
    conn: Arc<Conn>,
    slot: Arc<Mutex<Option<Arc<Conn>>>>,
    plugin: String,
    startup: mpsc::Sender<Startup>,
}

impl Reader {
    fn run(self, stdout: ChildStdout) {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            match serde_json::from_str::<FromChild>(&line) {
                Ok(FromChild::Reply { id, result }) => {
                    let caller = lock(&self.conn.calls).waiting.remove(&id);
                    if let Some(caller) = caller {
                        let _ = caller.send(result.map_err(|error| self.call_error(error)));
                    }
                }
                // Once the start-up is over nobody listens; these are dropped.
                Ok(message) => {
                    let _ = self.startup.send(Startup::Message(message));
                }
                Err(_) => {
                    tracing::debug!(plugin = %self.plugin, "isolated plugin process wrote a line that is not a message: {line}");
                    let _ = self.startup.send(Startup::Unreadable(line));
                }
            }
        }
        // The child is gone: fail what was in flight and let the next call start it again.
        let status = {
            let mut child = lock(&self.conn.child);
            let _ = child.kill();
            child
                .wait()
                .map(|s| describe(&s))
                .unwrap_or_else(|e| e.to_string())
        };
        // First, before taking the slot's lock: a start-up holds that lock while it waits for
        // this.
        let _ = self.startup.send(Startup::Gone(status.clone()));
        // Then the slot, before failing the calls, so that a caller told of the loss and trying
        // again starts a new child.
        let was_running = {
            let mut slot = lock(&self.slot);
            let ours = slot
                .as_ref()
                .is_some_and(|c| c.generation == self.conn.generation);
            if ours {
                *slot = None;
            }
            ours
        };
        if was_running {
            tracing::warn!(plugin = %self.plugin, "isolated plugin process {status}; it restarts on its next call");
        }
        let waiting = {
            let mut calls = lock(&self.conn.calls);
            calls.gone = Some(status.clone());
            std::mem::take(&mut calls.waiting)
        };
        for (_, caller) in waiting {
            let _ = caller.send(Err(CallError::Isolated {
                plugin: self.plugin.clone(),
                message: format!("its process {status}"),
            }));
        }
    }

    /// The child's report of a failed call: its message already names the plugin and the entry
    /// point, and is kept as it is.
    fn call_error(&self, error: RemoteError) -> CallError {
        crate::plugin::local::refused(CallError::Remote {
            plugin: self.plugin.clone(),
            panicked: error.kind == RemoteErrorKind::Panicked,
            message: error.message,
        })
    }
}

fn describe(status: &std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exited with status {code}"),
        None => format!("exited ({status})"),
    }
}
