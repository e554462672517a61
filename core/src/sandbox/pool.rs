//! Admission and the pool of worker processes. At most `workers` executions run at once (in
//! either isolation); up to `queue` more wait their turn; beyond that an execution is refused as
//! busy. Idle workers are kept warm; a worker that was killed or died is replaced in the
//! background.

use std::sync::{
    Arc, Mutex,
    atomic::{AtomicUsize, Ordering},
};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use super::{ErrorKind, ExecError, SandboxOptions, host::WorkerProcess};

pub(crate) struct Pool {
    pub(crate) options: SandboxOptions,
    permits: Arc<Semaphore>,
    waiting: AtomicUsize,
    idle: Mutex<Vec<WorkerProcess>>,
}

impl Pool {
    /// A pool; when called inside a tokio runtime, the workers start in the background now.
    pub(crate) fn new(options: SandboxOptions) -> Arc<Pool> {
        let workers = options.workers.max(1);
        let pool = Arc::new(Pool {
            permits: Arc::new(Semaphore::new(workers)),
            waiting: AtomicUsize::new(0),
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

    /// A place among the running executions, waiting in the queue if need be.
    pub(crate) async fn admit(
        &self,
        cancel: &CancellationToken,
    ) -> Result<OwnedSemaphorePermit, ExecError> {
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let queued = self.waiting.fetch_add(1, Ordering::SeqCst);
        let _leave = Leave(&self.waiting);
        if queued >= self.options.queue {
            return Err(ExecError {
                kind: ErrorKind::Busy,
                message: format!(
                    "all {} sandbox workers are busy and {queued} executions are queued; try \
                     again",
                    self.options.workers.max(1)
                ),
                position: None,
                stack: None,
            });
        }
        tokio::select! {
            permit = self.permits.clone().acquire_owned() => permit.map_err(|_| ExecError {
                kind: ErrorKind::Busy,
                message: "the sandbox is shutting down".to_owned(),
                position: None,
                stack: None,
            }),
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

/// Leaves the queue when dropped.
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
