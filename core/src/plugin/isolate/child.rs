//! The child side: `runbyte plugin-host <path> <kind>`. Greets with its protocol version, opens the
//! plugin as the host's `open` says, then answers calls until its stdin closes.
//!
//! Threads. The main thread only reads and dispatches. Calls run on a pool of [`POOL_THREADS`]
//! threads, except the two that wait by design, a pump's `recv` and a listener's `accept` (each up
//! to [`MAX_WAIT`]), which run on one thread per pump and one per listener, started when the pump
//! or listener opens and ended when it closes. So the thread count is fixed, plus one per open
//! connection, however many calls are in flight. Why not the pool for those waits too: the host
//! keeps a `recv` outstanding on every open pump, so a pool smaller than the number of pumps would
//! hold a `send` (or a policy's verdict) behind another pump's wait. Why not every call on the
//! reader: one slow plugin call would then hold up all the others.

use std::{
    collections::HashMap,
    io::{BufRead, Write},
    panic::AssertUnwindSafe,
    path::Path,
    process::ExitCode,
    sync::{Arc, Mutex, mpsc},
    time::Duration,
};

use serde::Deserialize;

use super::{
    lock,
    protocol::{
        AcceptedPump, Answer, FromChild, Kind, MAX_WAIT, Op, PROTOCOL_VERSION, Received,
        RemoteError, RemoteErrorKind, ToChild,
    },
};
use crate::plugin::{
    CallError, Listener, PluginError, Pump, local::Opened, wrap::Received as PumpReceived,
};

/// How many calls run at once apart from the waits (see the module's comment). Policy and codegen
/// calls are short; a transport's `send` may wait on the network, and four let that many go at
/// once.
const POOL_THREADS: usize = 4;

/// Serves the host on stdin and stdout until stdin closes.
pub(crate) fn serve(path: &Path, kind: &str) -> ExitCode {
    let out = Out;
    out.send(&FromChild::Ready {
        version: PROTOCOL_VERSION,
    });
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let Some(Ok(first)) = lines.next() else {
        // The host went away without opening anything.
        return ExitCode::SUCCESS;
    };
    let served = match serde_json::from_str(&first) {
        Ok(ToChild::Open {
            kind: asked,
            config,
        }) => Served::open(path, kind, asked, &config, out),
        Ok(other) => Err(failed(format!("the host sent {other:?} before `open`"))),
        Err(error) => Err(failed(format!(
            "the host's first line is not an `open` of protocol version {PROTOCOL_VERSION}: \
             {error}"
        ))),
    };
    let served = match served {
        Ok(served) => Arc::new(served),
        Err(error) => {
            out.send(&FromChild::Failed { error });
            return ExitCode::FAILURE;
        }
    };
    out.send(&FromChild::Opened);
    for line in lines {
        let Ok(line) = line else { break };
        match serde_json::from_str(&line) {
            Ok(ToChild::Call { id, op }) => served.dispatch(id, op),
            Ok(ToChild::Open { .. }) => tracing::warn!("plugin host: ignoring a second `open`"),
            Err(error) => served.refuse(&line, &error),
        }
    }
    ExitCode::SUCCESS
}

fn failed(message: String) -> RemoteError {
    RemoteError {
        kind: RemoteErrorKind::Failed,
        message,
    }
}

impl From<PluginError> for RemoteError {
    fn from(error: PluginError) -> RemoteError {
        let kind = match error {
            PluginError::Panicked { .. } => RemoteErrorKind::Panicked,
            _ => RemoteErrorKind::Failed,
        };
        RemoteError {
            kind,
            message: error.to_string(),
        }
    }
}

impl From<CallError> for RemoteError {
    fn from(error: CallError) -> RemoteError {
        let kind = match error {
            CallError::Panicked { .. } | CallError::Remote { panicked: true, .. } => {
                RemoteErrorKind::Panicked
            }
            _ => RemoteErrorKind::Failed,
        };
        RemoteError {
            kind,
            message: error.to_string(),
        }
    }
}

/// Stdout, one whole line per message (under stdout's own lock). A failed write means the host is
/// gone: the child exits.
#[derive(Clone, Copy)]
struct Out;

impl Out {
    fn send(self, message: &FromChild) {
        let Ok(mut line) = serde_json::to_vec(message) else {
            return;
        };
        line.push(b'\n');
        let mut stdout = std::io::stdout().lock();
        if stdout
            .write_all(&line)
            .and_then(|()| stdout.flush())
            .is_err()
        {
            std::process::exit(0);
        }
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// Threads taking jobs from one queue, in order.
#[derive(Clone)]
struct Lane {
    jobs: mpsc::Sender<Job>,
}

impl Lane {
    fn start(name: &str, threads: usize) -> std::io::Result<Lane> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for n in 0..threads {
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{n}"))
                .spawn(move || {
                    loop {
                        // Taken alone, so that the lock is not held while the job runs.
                        let job = lock(&queue).recv();
                        let Ok(job) = job else { return };
                        // A job replies itself; one that panics leaves its call unanswered (the
                        // host's deadline covers that) but not the thread dead.
                        let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
                    }
                })?;
        }
        Ok(Lane { jobs })
    }

    fn run(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.jobs.send(Box::new(job)).is_ok()
    }
}

/// The opened plugin, with the pumps and listeners it has opened.
struct Served {
    plugin: Opened,
    name: String,
    out: Out,
    pool: Lane,
    objects: Mutex<Objects>,
}

/// Pumps and listeners by id; each with the lane (its own thread) its waits run on. Dropping one
/// ends its thread once the calls queued on it are done.
#[derive(Default)]
struct Objects {
    last_id: u64,
    pumps: HashMap<u64, (Pump, Lane)>,
    listeners: HashMap<u64, (Listener, Lane)>,
}

impl Served {
    fn open(
        path: &Path,
        started_as: &str,
        kind: Kind,
        config: &serde_json::Value,
        out: Out,
    ) -> Result<Served, RemoteError> {
        let kind = runbyte_plugin_api::PluginKind::from(kind);
        if kind.as_str() != started_as {
            return Err(failed(format!(
                "started for a {started_as} plugin, but asked to open a {kind} plugin"
            )));
        }
        let info = crate::plugin::read_descriptor(path)?;
        let name = info.name.clone();
        let instance = crate::plugin::load::open(&info, kind, config)?;
        let pool = Lane::start("plugin-call", POOL_THREADS)
            .map_err(|e| failed(format!("cannot start threads: {e}")))?;
        Ok(Served {
            plugin: Opened::new(info, instance),
            name,
            out,
            pool,
            objects: Mutex::default(),
        })
    }

    /// Answers a line that is no message, when it has an id to answer.
    fn refuse(&self, line: &str, error: &serde_json::Error) {
        #[derive(Deserialize)]
        struct Id {
            id: u64,
        }
        tracing::warn!(
            "plugin host: a line that is no message of protocol {PROTOCOL_VERSION}: {error}"
        );
        if let Ok(Id { id }) = serde_json::from_str(line) {
            let message = format!("the plugin host could not read the call: {error}");
            self.reply(id, Err(failed(message)));
        }
    }

    fn reply(&self, id: u64, result: Result<Answer, RemoteError>) {
        self.out.send(&FromChild::Reply { id, result });
    }

    /// Queues a call on its lane: its pump's or listener's for the waits, else the pool.
    fn dispatch(self: &Arc<Self>, id: u64, op: Op) {
        let own = match &op {
            Op::PumpRecv { pump, .. } => lock(&self.objects).pumps.get(pump).map(|p| p.1.clone()),
            Op::ListenerAccept { listener, .. } => lock(&self.objects)
                .listeners
                .get(listener)
                .map(|l| l.1.clone()),
            _ => None,
        };
        let lane = own.unwrap_or_else(|| self.pool.clone());
        let served = self.clone();
        if !lane.run(move || {
            let result = served.handle(op);
            served.reply(id, result);
        }) {
            self.reply(
                id,
                Err(failed("the plugin host's threads are gone".to_owned())),
            );
        }
    }

    fn handle(&self, op: Op) -> Result<Answer, RemoteError> {
        let wait = |ms: u64| Duration::from_millis(ms).min(MAX_WAIT);
        match (&self.plugin, op) {
            (Opened::Codegen(plugin), Op::Generate { request }) => {
                Ok(Answer::Json(plugin.generate(&request)?))
            }
            (Opened::Policy(plugin), Op::Limits { context }) => {
                Ok(Answer::Json(plugin.limits(&context)?))
            }
            (Opened::Policy(plugin), Op::CheckCall { call }) => {
                Ok(Answer::Json(plugin.check_call(&call)?))
            }
            (Opened::Transport(plugin), Op::Connect { target }) => {
                let pump = plugin.connect(&target)?;
                Ok(Answer::Pump(self.hold_pump(pump)?))
            }
            (Opened::Transport(plugin), Op::Listen { options }) => {
                let listener = plugin.listen(&options)?;
                let lane = self.lane("listener").inspect_err(|_| listener.close())?;
                let mut objects = lock(&self.objects);
                objects.last_id += 1;
                let id = objects.last_id;
                objects.listeners.insert(id, (listener, lane));
                Ok(Answer::Listener(id))
            }
            (_, Op::PumpSend { pump, message }) => {
                self.pump(pump)?.send(&message)?;
                Ok(Answer::Done)
            }
            (_, Op::PumpRecv { pump, timeout_ms }) => {
                let received = match self.pump(pump)?.recv(wait(timeout_ms))? {
                    PumpReceived::Message(message) => Received::Message(message),
                    PumpReceived::Timeout => Received::Timeout,
                    PumpReceived::Closed(reason) => Received::Closed(reason),
                };
                Ok(Answer::Received(received))
            }
            (_, Op::PumpClose { pump }) => {
                let held = lock(&self.objects).pumps.remove(&pump);
                if let Some((pump, _lane)) = held {
                    pump.close();
                }
                Ok(Answer::Done)
            }
            (
                _,
                Op::ListenerAccept {
                    listener,
                    timeout_ms,
                },
            ) => {
                let Some(accepted) = self.listener(listener)?.accept(wait(timeout_ms))? else {
                    return Ok(Answer::Accepted(None));
                };
                Ok(Answer::Accepted(Some(AcceptedPump {
                    pump: self.hold_pump(accepted.pump)?,
                    peer: accepted.peer,
                    session: accepted.session,
                })))
            }
            (_, Op::ListenerAddress { listener }) => {
                Ok(Answer::Address(self.listener(listener)?.address()))
            }
            (_, Op::ListenerClose { listener }) => {
                let held = lock(&self.objects).listeners.remove(&listener);
                if let Some((listener, _lane)) = held {
                    listener.close();
                }
                Ok(Answer::Done)
            }
            (_, op) => Err(failed(format!(
                "plugin `{}` has no operation `{}`",
                self.name,
                op.name()
            ))),
        }
    }

    fn lane(&self, what: &str) -> Result<Lane, RemoteError> {
        Lane::start(what, 1).map_err(|e| failed(format!("cannot start a thread: {e}")))
    }

    fn hold_pump(&self, pump: Pump) -> Result<u64, RemoteError> {
        let lane = self.lane("pump").inspect_err(|_| pump.close())?;
        let mut objects = lock(&self.objects);
        objects.last_id += 1;
        let id = objects.last_id;
        objects.pumps.insert(id, (pump, lane));
        Ok(id)
    }

    fn pump(&self, id: u64) -> Result<Pump, RemoteError> {
        let pump = lock(&self.objects).pumps.get(&id).map(|p| p.0.clone());
        pump.ok_or_else(|| self.missing("pump", id))
    }

    fn listener(&self, id: u64) -> Result<Listener, RemoteError> {
        let listener = lock(&self.objects).listeners.get(&id).map(|l| l.0.clone());
        listener.ok_or_else(|| self.missing("listener", id))
    }

    fn missing(&self, what: &str, id: u64) -> RemoteError {
        failed(format!(
            "isolated plugin `{}` has no {what} {id} (closed already?)",
            self.name
        ))
    }
}
