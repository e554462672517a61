//! Isolated plugins: a plugin marked `isolate = true` runs in a child `runbyte plugin-host`
//! process that makes the same calls over a pipe. A plugin that crashes takes down only that
//! process: its calls in flight fail with an error naming it, and the next call starts it again.
//!
//! The protocol is JSON lines. The host writes the plugin's configuration as the first line; the
//! child answers `{"ready": true}` or `{"error": {...}}`, then serves requests
//! `{"id", "op", "arg"}` with `{"id", "ok"}` or `{"id", "error": {"kind", "message"}}`, each on a
//! thread of its own (a transport's `recv` and `accept` block).

use std::{
    collections::HashMap,
    io::{BufRead, BufReader, Write},
    path::PathBuf,
    process::{Child, ChildStdin, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc,
    },
    time::Duration,
};

use runbyte_plugin_api::PluginKind;
use serde_json::{Value, json};

use super::{CallError, PluginError, PluginInfo};

type Reply = Result<Value, CallError>;

/// One running child process.
struct Conn {
    generation: u64,
    stdin: Mutex<ChildStdin>,
    pending: Mutex<HashMap<u64, mpsc::Sender<Reply>>>,
    child: Mutex<Child>,
}

/// The host side of an isolated plugin: starts the child on demand and again after it dies.
pub struct IsolatedHost {
    info: Arc<PluginInfo>,
    kind: PluginKind,
    config: Value,
    exe: PathBuf,
    conn: Mutex<Option<Arc<Conn>>>,
    next_id: AtomicU64,
    generations: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl IsolatedHost {
    /// Starts the child once, so that a plugin that refuses its configuration is reported at
    /// start-up like an in-process one.
    pub fn start(
        info: PluginInfo,
        kind: PluginKind,
        config: Value,
    ) -> Result<Arc<IsolatedHost>, PluginError> {
        let host = Arc::new(IsolatedHost {
            info: Arc::new(info),
            kind,
            config,
            exe: crate::runtime::runbyte_exe(),
            conn: Mutex::new(None),
            next_id: AtomicU64::new(1),
            generations: AtomicU64::new(0),
        });
        host.connection().map_err(|error| match error {
            StartError::Plugin(error) => error,
            StartError::Process(message) => PluginError::Failed {
                name: host.info.name.clone(),
                path: host.info.path.clone(),
                message: format!("its isolated host process failed: {message}"),
            },
        })?;
        Ok(host)
    }

    /// What the plugin file says it is.
    pub fn info(&self) -> &Arc<PluginInfo> {
        &self.info
    }

    fn connection(self: &Arc<Self>) -> Result<Arc<Conn>, StartError> {
        let mut slot = lock(&self.conn);
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let conn = self.spawn()?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    fn spawn(self: &Arc<Self>) -> Result<Arc<Conn>, StartError> {
        let mut child = Command::new(&self.exe)
            .arg("plugin-host")
            .arg(&self.info.path)
            .arg(self.kind.as_str())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                StartError::Process(format!("cannot start {}: {e}", self.exe.display()))
            })?;
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(StartError::Process(
                "the child's pipes were not created".to_owned(),
            ));
        };
        writeln!(stdin, "{}", self.config).map_err(|e| StartError::Process(e.to_string()))?;
        let mut stdout = BufReader::new(stdout);
        let mut first = String::new();
        let read = stdout
            .read_line(&mut first)
            .map_err(|e| StartError::Process(e.to_string()))?;
        if read == 0 {
            let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
            return Err(StartError::Process(format!(
                "it exited before answering ({status})"
            )));
        }
        let hello: Value = serde_json::from_str(&first)
            .map_err(|e| StartError::Process(format!("bad hello: {e}")))?;
        if let Some(error) = hello.get("error") {
            let _ = child.wait();
            return Err(StartError::Plugin(self.open_error(error)));
        }
        let generation = self.generations.fetch_add(1, Ordering::SeqCst) + 1;
        let conn = Arc::new(Conn {
            generation,
            stdin: Mutex::new(stdin),
            pending: Mutex::new(HashMap::new()),
            child: Mutex::new(child),
        });
        let (host, reader_conn) = (Arc::downgrade(self), conn.clone());
        let plugin = self.info.name.clone();
        std::thread::Builder::new()
            .name(format!("isolated-{plugin}"))
            .spawn(move || {
                for line in stdout.lines() {
                    let Ok(line) = line else { break };
                    let Ok(reply) = serde_json::from_str::<Value>(&line) else { continue };
                    let Some(id) = reply.get("id").and_then(Value::as_u64) else { continue };
                    let sender = lock(&reader_conn.pending).remove(&id);
                    if let Some(sender) = sender {
                        let result = match reply.get("error") {
                            Some(error) => Err(call_error(&plugin, error)),
                            None => Ok(reply.get("ok").cloned().unwrap_or(Value::Null)),
                        };
                        let _ = sender.send(result);
                    }
                }
                // The child is gone: fail what was in flight and let the next call start it again.
                let status = {
                    let mut child = lock(&reader_conn.child);
                    let _ = child.kill();
                    child.wait().map(|s| describe(&s)).unwrap_or_else(|e| e.to_string())
                };
                tracing::warn!(plugin = %plugin, "isolated plugin process {status}; it restarts on its next call");
                let message = format!("its process {status}");
                for (_, sender) in lock(&reader_conn.pending).drain() {
                    let _ = sender.send(Err(CallError::Isolated { plugin: plugin.clone(), message: message.clone() }));
                }
                if let Some(host) = host.upgrade() {
                    let mut slot = lock(&host.conn);
                    if slot.as_ref().is_some_and(|c| c.generation == reader_conn.generation) {
                        *slot = None;
                    }
                }
            })
            .map_err(|e| StartError::Process(format!("cannot start a thread: {e}")))?;
        Ok(conn)
    }

    fn open_error(&self, error: &Value) -> PluginError {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("unknown error")
            .to_owned();
        let (name, path) = (self.info.name.clone(), self.info.path.clone());
        match error.get("kind").and_then(Value::as_str) {
            Some("panicked") => PluginError::Panicked {
                name,
                path,
                message,
            },
            _ => PluginError::Failed {
                name,
                path,
                message,
            },
        }
    }

    /// One call into the plugin. Blocking; fails at once if the child dies meanwhile.
    pub fn request(self: &Arc<Self>, op: &str, arg: Value) -> Reply {
        let conn = self.connection().map_err(|error| CallError::Isolated {
            plugin: self.info.name.clone(),
            message: match error {
                StartError::Plugin(error) => error.to_string(),
                StartError::Process(message) => message,
            },
        })?;
        self.request_on(&conn, op, arg)
    }

    /// A call that opens a pump or listener in the child: its id (under `key` in the answer) and
    /// the child's generation.
    pub fn request_handle(
        self: &Arc<Self>,
        op: &str,
        arg: Value,
        key: &str,
    ) -> Result<(u64, u64), CallError> {
        let conn = self.connection().map_err(|error| CallError::Isolated {
            plugin: self.info.name.clone(),
            message: match error {
                StartError::Plugin(error) => error.to_string(),
                StartError::Process(message) => message,
            },
        })?;
        let answer = self.request_on(&conn, op, arg)?;
        let id = answer
            .get(key)
            .and_then(Value::as_u64)
            .ok_or_else(|| CallError::Isolated {
                plugin: self.info.name.clone(),
                message: format!("its process answered `{op}` without a {key} id"),
            })?;
        Ok((id, conn.generation))
    }

    /// A call that must reach the child of `generation` (a pump's or a listener's); a restarted
    /// child no longer has it.
    pub fn request_in(self: &Arc<Self>, generation: u64, op: &str, arg: Value) -> Reply {
        let conn = lock(&self.conn).clone();
        match conn {
            Some(conn) if conn.generation == generation => self.request_on(&conn, op, arg),
            _ => Err(CallError::Isolated {
                plugin: self.info.name.clone(),
                message: "its process restarted; this connection was lost with it".to_owned(),
            }),
        }
    }

    fn request_on(&self, conn: &Arc<Conn>, op: &str, arg: Value) -> Reply {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = mpsc::channel();
        lock(&conn.pending).insert(id, sender);
        let line = json!({"id": id, "op": op, "arg": arg}).to_string();
        let written = {
            let mut stdin = lock(&conn.stdin);
            writeln!(stdin, "{line}").and_then(|()| stdin.flush())
        };
        if let Err(error) = written {
            lock(&conn.pending).remove(&id);
            return Err(CallError::Isolated {
                plugin: self.info.name.clone(),
                message: format!("cannot reach its process: {error}"),
            });
        }
        match receiver.recv_timeout(CALL_TIMEOUT) {
            Ok(reply) => reply,
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(CallError::Isolated {
                plugin: self.info.name.clone(),
                message: "its process went away".to_owned(),
            }),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                lock(&conn.pending).remove(&id);
                // Hung: stop it; its reader fails what else was waiting, and the next call starts
                // it again.
                let _ = lock(&conn.child).kill();
                Err(CallError::Isolated {
                    plugin: self.info.name.clone(),
                    message: format!(
                        "`{op}` got no answer within {} s; its process was stopped",
                        CALL_TIMEOUT.as_secs()
                    ),
                })
            }
        }
    }
}

impl Drop for IsolatedHost {
    fn drop(&mut self) {
        if let Some(conn) = lock(&self.conn).take() {
            let _ = lock(&conn.child).kill();
        }
    }
}

enum StartError {
    Plugin(PluginError),
    Process(String),
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

/// The child's report of a failed call: its message, which already names the plugin and the
/// entry point, kept as it is.
fn call_error(plugin: &str, error: &Value) -> CallError {
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("unknown error")
        .to_owned();
    let panicked = error.get("kind").and_then(Value::as_str) == Some("panicked");
    CallError::Remote {
        plugin: plugin.to_owned(),
        panicked,
        message,
    }
}

/// How long one call into an isolated plugin may take before its process is taken for hung and
/// stopped (blocking calls such as `recv` and `accept` wait at most [`MAX_WAIT`] each).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a child's blocking `recv` or `accept` may wait at most per request; the host asks
/// again.
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// The child side: `runbyte plugin-host <path> <kind>`. Reads the configuration line, opens the
/// plugin in this process, then serves requests until stdin closes.
pub fn serve_child(path: &std::path::Path, kind: &str) -> std::process::ExitCode {
    use std::process::ExitCode;

    let out = Arc::new(Mutex::new(std::io::stdout()));
    let say = |out: &Mutex<std::io::Stdout>, value: Value| {
        let mut out = lock(out);
        let _ = writeln!(out, "{value}");
        let _ = out.flush();
    };
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let config: Value = lines
        .next()
        .and_then(Result::ok)
        .and_then(|l| serde_json::from_str(&l).ok())
        .unwrap_or(json!({}));
    let kind = match kind {
        "transport" => PluginKind::Transport,
        "codegen" => PluginKind::Codegen,
        "policy" => PluginKind::Policy,
        other => {
            say(
                &out,
                json!({"error": {"kind": "failed", "message": format!("unknown plugin kind `{other}`")}}),
            );
            return ExitCode::FAILURE;
        }
    };
    let opened = super::read_descriptor(path).and_then(|info| {
        let instance = super::load::open(&info, kind, &config)?;
        Ok(Instance::from(info, instance))
    });
    let instance = match opened {
        Ok(instance) => Arc::new(instance),
        Err(error) => {
            let kind = if matches!(error, PluginError::Panicked { .. }) {
                "panicked"
            } else {
                "failed"
            };
            say(
                &out,
                json!({"error": {"kind": kind, "message": error.to_string()}}),
            );
            return ExitCode::FAILURE;
        }
    };
    say(&out, json!({"ready": true}));
    for line in lines {
        let Ok(line) = line else { break };
        let Ok(request) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (instance, out) = (instance.clone(), out.clone());
        std::thread::spawn(move || {
            let id = request.get("id").cloned().unwrap_or(Value::Null);
            let op = request
                .get("op")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let arg = request.get("arg").cloned().unwrap_or(Value::Null);
            let reply = match instance.handle(op, &arg) {
                Ok(ok) => json!({"id": id, "ok": ok}),
                Err(error) => {
                    let kind = match &error {
                        CallError::Panicked { .. } => "panicked",
                        CallError::BadAnswer { .. } => "bad-answer",
                        _ => "failed",
                    };
                    json!({"id": id, "error": {"kind": kind, "message": error.to_string()}})
                }
            };
            say(&out, reply);
        });
    }
    ExitCode::SUCCESS
}

/// The plugin as the child holds it, with the pumps and listeners it has opened.
struct Instance {
    plugin: Plugin,
    pumps: Mutex<HashMap<u64, super::Pump>>,
    listeners: Mutex<HashMap<u64, super::Listener>>,
    next: AtomicU64,
}

enum Plugin {
    Transport(super::TransportPlugin),
    Codegen(super::CodegenPlugin),
    Policy(super::PolicyPlugin),
}

impl Instance {
    fn from(info: PluginInfo, instance: runbyte_plugin_api::PluginInstance) -> Instance {
        use runbyte_plugin_api::PluginInstance as Raw;
        let plugin = match instance {
            Raw::Transport(raw) => Plugin::Transport(super::TransportPlugin::new(info, raw)),
            Raw::Codegen(raw) => Plugin::Codegen(super::CodegenPlugin::new(info, raw)),
            Raw::Policy(raw) => Plugin::Policy(super::PolicyPlugin::new(info, raw)),
        };
        Instance {
            plugin,
            pumps: Mutex::default(),
            listeners: Mutex::default(),
            next: AtomicU64::new(1),
        }
    }

    fn handle(&self, op: &str, arg: &Value) -> Reply {
        let handle = |key: &str| arg.get(key).and_then(Value::as_u64).unwrap_or_default();
        let wait =
            Duration::from_millis(arg.get("timeout-ms").and_then(Value::as_u64).unwrap_or(0))
                .min(MAX_WAIT);
        let missing = |what: &str| CallError::Isolated {
            plugin: "?".to_owned(),
            message: format!("no such {what}"),
        };
        match (&self.plugin, op) {
            (Plugin::Codegen(plugin), "generate") => plugin.generate(arg),
            (Plugin::Policy(plugin), "limits") => plugin.limits(arg),
            (Plugin::Policy(plugin), "check_call") => plugin.check_call(arg),
            (Plugin::Transport(plugin), "connect") => {
                let pump = plugin.connect(arg)?;
                let id = self.next.fetch_add(1, Ordering::Relaxed);
                lock(&self.pumps).insert(id, pump);
                Ok(json!({"pump": id}))
            }
            (Plugin::Transport(plugin), "listen") => {
                let listener = plugin.listen(arg)?;
                let id = self.next.fetch_add(1, Ordering::Relaxed);
                lock(&self.listeners).insert(id, listener);
                Ok(json!({"listener": id}))
            }
            (Plugin::Transport(_), "pump.send") => {
                let pump = lock(&self.pumps)
                    .get(&handle("pump"))
                    .cloned()
                    .ok_or_else(|| missing("pump"))?;
                pump.send(
                    arg.get("message")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                )
                .map(|()| Value::Null)
            }
            (Plugin::Transport(_), "pump.recv") => {
                let pump = lock(&self.pumps)
                    .get(&handle("pump"))
                    .cloned()
                    .ok_or_else(|| missing("pump"))?;
                Ok(super::wrap::received_to_json(&pump.recv(wait)?))
            }
            (Plugin::Transport(_), "pump.close") => {
                if let Some(pump) = lock(&self.pumps).remove(&handle("pump")) {
                    pump.close();
                }
                Ok(Value::Null)
            }
            (Plugin::Transport(_), "listener.accept") => {
                let listener = lock(&self.listeners)
                    .get(&handle("listener"))
                    .cloned()
                    .ok_or_else(|| missing("listener"))?;
                match listener.accept(wait)? {
                    None => Ok(Value::Null),
                    Some(accepted) => {
                        let id = self.next.fetch_add(1, Ordering::Relaxed);
                        lock(&self.pumps).insert(id, accepted.pump);
                        Ok(json!({"pump": id, "peer": accepted.peer, "session": accepted.session}))
                    }
                }
            }
            (Plugin::Transport(_), "listener.address") => {
                let listener = lock(&self.listeners)
                    .get(&handle("listener"))
                    .cloned()
                    .ok_or_else(|| missing("listener"))?;
                Ok(Value::String(listener.address()))
            }
            (Plugin::Transport(_), "listener.close") => {
                if let Some(listener) = lock(&self.listeners).remove(&handle("listener")) {
                    listener.close();
                }
                Ok(Value::Null)
            }
            (_, other) => Err(CallError::Isolated {
                plugin: "?".to_owned(),
                message: format!("this plugin has no operation `{other}`"),
            }),
        }
    }
}
