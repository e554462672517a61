//! The plugin's own tokio runtime, and the tasks each connection spawns on it.

use std::{
    future::Future,
    io,
    sync::{Mutex, mpsc},
    time::Duration,
};

use tokio::{
    runtime::{Builder, Handle, Runtime},
    task::AbortHandle,
};

use crate::lock;

/// A multi-thread tokio runtime private to one transport instance.
///
/// Two worker threads: HTTP connections are I/O-bound, and the machine Runbyte targets is small.
/// Dropping it shuts it down in the background, without waiting for its tasks, so a drop on any
/// thread (including one the host's runtime owns) never blocks or panics.
pub struct PrivateRuntime {
    runtime: Option<Runtime>,
    handle: Handle,
}

impl PrivateRuntime {
    /// Builds the runtime; `name` names its threads (`runbyte-http`, ...).
    pub fn new(name: &str) -> io::Result<Self> {
        let runtime = Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name(format!("runbyte-{name}"))
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        Ok(Self {
            runtime: Some(runtime),
            handle,
        })
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }
}

impl Drop for PrivateRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The tasks of one connection or listener, aborted together when it closes.
pub struct Tasks {
    handle: Handle,
    running: Mutex<Running>,
}

struct Running {
    closed: bool,
    handles: Vec<AbortHandle>,
}

impl Tasks {
    pub fn new(handle: Handle) -> Self {
        Self {
            handle,
            running: Mutex::new(Running {
                closed: false,
                handles: Vec::new(),
            }),
        }
    }

    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Spawns `future` unless [`abort_all`](Self::abort_all) already ran.
    pub fn spawn<F>(&self, future: F) -> Option<AbortHandle>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let mut running = lock(&self.running);
        if running.closed {
            return None;
        }
        let abort = self.handle.spawn(future).abort_handle();
        running.handles.retain(|handle| !handle.is_finished());
        running.handles.push(abort.clone());
        Some(abort)
    }

    /// Aborts every task and refuses new ones.
    pub fn abort_all(&self) {
        let handles = {
            let mut running = lock(&self.running);
            running.closed = true;
            std::mem::take(&mut running.handles)
        };
        for handle in handles {
            handle.abort();
        }
    }

    pub fn is_closed(&self) -> bool {
        lock(&self.running).closed
    }
}

/// Runs `future` on the runtime behind `handle` and waits up to `timeout` for its output, from
/// any thread: unlike `block_on`, this works on a thread that is itself inside a runtime.
/// `None` when the time ran out (the future is then aborted).
pub fn wait_for<F>(handle: &Handle, future: F, timeout: Duration) -> Option<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let task = handle.spawn(async move {
        let _ = tx.send(future.await);
    });
    match rx.recv_timeout(timeout) {
        Ok(output) => Some(output),
        Err(_) => {
            task.abort();
            None
        }
    }
}
