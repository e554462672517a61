//! Admission and the pool of worker processes. At most `workers` executions run at once (in
//! either isolation). The others wait in one queue per client, and a place that frees up goes
//! to the clients in turn (round robin), so that one client's flood delays another client's
//! execution by about one execution per worker, not by the whole flood. A client may have
//! `queue_per_client` executions waiting, and all clients `queue` together; beyond either an
//! execution is refused as busy. Idle workers are kept warm; a worker that was killed or died
//! is replaced in the background.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};

use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{ErrorKind, ExecError, SandboxOptions, host::WorkerProcess};

pub(crate) struct Pool {
    pub(crate) options: SandboxOptions,
    admission: Mutex<Admission>,
    idle: Mutex<Vec<WorkerProcess>>,
}

/// Who runs and who waits.
#[derive(Default)]
struct Admission {
    running: usize,
    /// Each client's waiting executions, in order.
    queues: HashMap<String, VecDeque<oneshot::Sender<()>>>,
    /// The clients with waiting executions, in the order they are served next.
    turns: VecDeque<String>,
    waiting: usize,
}

impl Admission {
    /// The next waiter in turn, its client moved to the back of the line.
    fn next_waiter(&mut self) -> Option<oneshot::Sender<()>> {
        while let Some(client) = self.turns.pop_front() {
            let Some(queue) = self.queues.get_mut(&client) else {
                continue;
            };
            let Some(waiter) = queue.pop_front() else {
                self.queues.remove(&client);
                continue;
            };
            self.waiting -= 1;
            if queue.is_empty() {
                self.queues.remove(&client);
            } else {
                self.turns.push_back(client);
            }
            return Some(waiter);
        }
        None
    }
}

/// A place among the running executions; dropping it hands the place to the next in turn.
pub(crate) struct Permit(Arc<Pool>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// A waiter's end of the line: if it goes away after it was handed a place but before it took
/// it, the place is handed on.
struct Waiting {
    pool: Arc<Pool>,
    client: String,
    handed: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some(mut handed) = self.handed.take() else {
            return;
        };
        handed.close();
        if handed.try_recv().is_ok() {
            self.pool.release();
            return;
        }
        // Still in line: leave it, so that the client's queue counts only live waiters.
        let mut admission = self.pool.admission();
        let Some(queue) = admission.queues.get_mut(&self.client) else {
            return;
        };
        let before = queue.len();
        queue.retain(|waiter| !waiter.is_closed());
        let left = before - queue.len();
        if queue.is_empty() {
            admission.queues.remove(&self.client);
        }
        admission.waiting -= left;
    }
}

impl Pool {
    /// A pool; when called inside a tokio runtime, the workers start in the background now.
    pub(crate) fn new(options: SandboxOptions) -> Arc<Pool> {
        let workers = options.workers.max(1);
        let pool = Arc::new(Pool {
            admission: Mutex::new(Admission::default()),
            idle: Mutex::new(Vec::new()),
            options,
        });
        if tokio::runtime::Handle::try_current().is_ok() {
            for _ in 0..workers {
                pool.replace_in_background();
            }
        }
        pool
    }

    fn admission(&self) -> std::sync::MutexGuard<'_, Admission> {
        self.admission
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Hands a freed place to the next waiter in turn, or frees it.
    fn release(self: &Arc<Self>) {
        loop {
            let waiter = {
                let mut admission = self.admission();
                match admission.next_waiter() {
                    Some(waiter) => waiter,
                    None => {
                        admission.running -= 1;
                        return;
                    }
                }
            };
            // A waiter that gave up (cancelled) is skipped; the place goes on to the next.
            if waiter.send(()).is_ok() {
                return;
            }
        }
    }

    /// A place among the running executions for one of `client`'s executions, waiting in its
    /// queue if need be.
    pub(crate) async fn admit(
        self: &Arc<Self>,
        client: &str,
        cancel: &CancellationToken,
    ) -> Result<Permit, ExecError> {
        let busy = |message: String| ExecError {
            kind: ErrorKind::Busy,
            message,
            position: None,
            stack: None,
        };
        let handed = {
            let mut admission = self.admission();
            let workers = self.options.workers.max(1);
            if admission.running < workers && admission.waiting == 0 {
                admission.running += 1;
                return Ok(Permit(self.clone()));
            }
            let mine = admission.queues.get(client).map_or(0, VecDeque::len);
            if mine >= self.options.queue_per_client {
                return Err(busy(format!(
                    "all {workers} sandbox workers are busy and this client already has {mine} \
                     executions queued (the most one client may); try again when one finishes"
                )));
            }
            if admission.waiting >= self.options.queue {
                return Err(busy(format!(
                    "all {workers} sandbox workers are busy and {} executions are queued; try \
                     again",
                    admission.waiting
                )));
            }
            let (tx, rx) = oneshot::channel();
            if !admission.queues.contains_key(client) {
                admission.turns.push_back(client.to_owned());
            }
            admission
                .queues
                .entry(client.to_owned())
                .or_default()
                .push_back(tx);
            admission.waiting += 1;
            rx
        };
        let mut waiting = Waiting {
            pool: self.clone(),
            client: client.to_owned(),
            handed: Some(handed),
        };
        let Some(handed) = waiting.handed.as_mut() else {
            return Err(busy("the sandbox is shutting down".to_owned()));
        };
        tokio::select! {
            answer = handed => {
                waiting.handed = None;
                match answer {
                    Ok(()) => Ok(Permit(self.clone())),
                    Err(_) => Err(busy("the sandbox is shutting down".to_owned())),
                }
            }
            _ = cancel.cancelled() => Err(ExecError {
                kind: ErrorKind::Cancelled,
                message: "the execution was cancelled while waiting for a sandbox worker".to_owned(),
                position: None,
                stack: None,
            }),
        }
    }

    /// An idle live worker, or a new one.
    pub(crate) async fn checkout(&self) -> std::io::Result<WorkerProcess> {
        loop {
            let idle = self.idle.lock().ok().and_then(|mut idle| idle.pop());
            match idle {
                Some(mut worker) => {
                    if !worker.exited() {
                        return Ok(worker);
                    }
                    worker.kill().await;
                }
                None => break,
            }
        }
        WorkerProcess::spawn(&self.options.worker_exe, &self.options.worker_args).await
    }

    /// Returns a healthy worker to the idle set (beyond `workers` idle ones, it is ended).
    pub(crate) fn checkin(&self, worker: WorkerProcess) {
        let mut worker = Some(worker);
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < self.options.workers.max(1)
            && let Some(worker) = worker.take()
        {
            idle.push(worker);
        }
        // Dropping a `WorkerProcess` kills it (`kill_on_drop`).
        drop(worker);
    }

    /// Starts a worker in the background and adds it to the idle set.
    pub(crate) fn replace_in_background(self: &Arc<Self>) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let pool = Arc::downgrade(self);
        handle.spawn(async move {
            let Some(options) = pool.upgrade().map(|p| p.options.clone()) else {
                return;
            };
            match WorkerProcess::spawn(&options.worker_exe, &options.worker_args).await {
                Ok(worker) => {
                    if let Some(pool) = pool.upgrade() {
                        pool.checkin(worker);
                    }
                }
                Err(error) => tracing::warn!(%error, "cannot start a sandbox worker"),
            }
        });
    }
}
