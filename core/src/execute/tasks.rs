//! Where the executions run as tasks (SEP-2663) are kept: rmcp's [`TaskManager`] in this
//! process, with who owns each task. The gateway holds one; `crate::server` starts executions in
//! it and answers `tasks/get`, `tasks/update` and `tasks/cancel` from it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::CreateTaskResult;
use rmcp::task_manager::{TaskContext, TaskFuture, TaskManager, TaskOptions};

/// The most executions that run as tasks at once.
pub const MAX_RUNNING: usize = 256;

/// How long an execution's task may take when `task-timeout-ms` does not say.
pub const DEFAULT_TASK_TIMEOUT: Duration = Duration::from_secs(3600);

/// The poll interval an execution's task suggests.
const POLL_INTERVAL_MS: u64 = 500;

/// The executions run as tasks, with who owns each.
pub struct ExecutionTasks {
    manager: TaskManager,
    /// Task id → its owner (see `Session::task_owner`).
    owners: Mutex<HashMap<String, String>>,
    timeout: Duration,
}

impl ExecutionTasks {
    pub fn new(timeout: Option<Duration>) -> Self {
        ExecutionTasks {
            manager: TaskManager::new(),
            owners: Mutex::default(),
            timeout: timeout.unwrap_or(DEFAULT_TASK_TIMEOUT),
        }
    }

    /// Starts the task `run` makes, owned by `owner`; `None` when [`MAX_RUNNING`] already run
    /// (the caller runs the execution in the request instead).
    pub fn start(
        &self,
        owner: String,
        run: impl FnOnce(TaskContext) -> TaskFuture,
    ) -> Option<CreateTaskResult> {
        if self.manager.running_task_count() >= MAX_RUNNING {
            return None;
        }
        let ttl = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
        let options = TaskOptions::new()
            .with_ttl_ms(ttl)
            .with_poll_interval_ms(POLL_INTERVAL_MS);
        let task = self.manager.spawn(options, run);
        if let Ok(mut owners) = self.owners.lock() {
            // Forget the tasks the manager no longer holds (it drops them past their TTL).
            if owners.len() >= 4 * MAX_RUNNING {
                owners.retain(|id, _| self.manager.get_task(id).is_ok());
            }
            owners.insert(task.task_id.clone(), owner);
        }
        Some(CreateTaskResult::new(task))
    }

    /// Whether `id` is an execution's task; `Some(false)` when it is another owner's.
    pub fn owned(&self, id: &str, owner: &str) -> Option<bool> {
        let owners = self.owners.lock().ok()?;
        owners.get(id).map(|holder| holder == owner)
    }

    /// The tasks themselves.
    pub fn manager(&self) -> &TaskManager {
        &self.manager
    }
}
