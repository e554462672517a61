//! Where the executions run as tasks (SEP-2663) are kept: rmcp's [`TaskManager`] in this
//! process, with who owns each task. The gateway holds one; `crate::server` starts executions in
//! it and answers `tasks/get`, `tasks/update` and `tasks/cancel` from it.
//!
//! With `[server] state-store`, each task is also recorded there ([`Record`], under its id, for
//! as long as it may run and be kept): its state each second while it runs, its end and result
//! once done. A replica that does not run a task answers `tasks/get` from that record, for the
//! record's owner only, and its `tasks/cancel` leaves a mark the running replica looks for each
//! second. A result larger than [`MAX_KEPT_TASK`] is recorded without it: only the replica
//! that ran it has it, and the others say so. A store that cannot be reached changes nothing
//! for the replica running the task (a WARN names the store).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{CallToolResult, CreateTaskResult, DetailedTask, JsonObject, TaskPayload};
use rmcp::task_manager::{TaskContext, TaskExit, TaskFuture, TaskManager, TaskOptions};
use serde::{Deserialize, Serialize};

use crate::state_store::{MAX_KEPT_TASK, StateStore, StoreError};

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
    /// `[server] state-store`, where every replica finds the tasks.
    store: Option<StateStore>,
}

/// A task as the state store keeps it.
#[derive(Serialize, Deserialize)]
pub struct Record {
    pub owner: String,
    /// Its state, with its result or error once it ended, unless that was too large.
    pub task: DetailedTask,
    /// The size of a result too large to be recorded (then `task` says `working`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_bytes: Option<usize>,
}

impl ExecutionTasks {
    pub fn new(timeout: Option<Duration>, store: Option<StateStore>) -> Self {
        ExecutionTasks {
            manager: TaskManager::new(),
            owners: Mutex::default(),
            timeout: timeout.unwrap_or(DEFAULT_TASK_TIMEOUT),
            store,
        }
    }

    /// The state store the tasks are recorded in, if any.
    pub fn store(&self) -> Option<&StateStore> {
        self.store.as_ref()
    }

    /// How long a record is kept: as long as a task may run, then as long again once it ended.
    fn keep(&self, ended: bool) -> Duration {
        if ended {
            self.timeout
        } else {
            self.timeout.saturating_mul(2)
        }
    }

    /// Records task `id` as it is now in this process (`None`: no store, or no such task).
    pub async fn record(&self, id: &str) -> Option<Result<(), StoreError>> {
        let store = self.store.as_ref()?;
        let task = self.manager.get_task(id).ok()?;
        let owner = self.owners.lock().ok()?.get(id)?.clone();
        let ended = !matches!(
            task.payload,
            TaskPayload::Working | TaskPayload::InputRequired { .. }
        );
        let record = Record {
            owner,
            task,
            result_bytes: None,
        };
        let bytes = serde_json::to_vec(&record).ok()?;
        Some(store.put_task(id, &bytes, self.keep(ended)).await)
    }

    /// Records task `id` as ended with `exit` (before rmcp's manager holds it so): its result
    /// or error, or only its size when that is more than [`MAX_KEPT_TASK`].
    pub async fn record_end(
        &self,
        id: &str,
        exit: &Result<CallToolResult, TaskExit>,
    ) -> Option<Result<(), StoreError>> {
        let store = self.store.as_ref()?;
        let now = self.manager.get_task(id).ok()?;
        let owner = self.owners.lock().ok()?.get(id)?.clone();
        let mut base = now.task;
        base.last_updated_at = rmcp::task_manager::current_timestamp();
        let object = |value: Result<serde_json::Value, _>| match value {
            Ok(serde_json::Value::Object(map)) => map,
            _ => JsonObject::new(),
        };
        let payload = match exit {
            Ok(result) => TaskPayload::Completed {
                result: object(serde_json::to_value(result)),
            },
            Err(TaskExit::Cancelled) => TaskPayload::Cancelled,
            Err(TaskExit::Error(error)) => TaskPayload::Failed {
                error: object(serde_json::to_value(error)),
            },
        };
        let mut record = Record {
            owner,
            task: DetailedTask::new(base.clone(), payload),
            result_bytes: None,
        };
        let mut bytes = serde_json::to_vec(&record).ok()?;
        if bytes.len() > MAX_KEPT_TASK {
            record.result_bytes = Some(bytes.len());
            record.task = DetailedTask::new(base, TaskPayload::Working);
            bytes = serde_json::to_vec(&record).ok()?;
        }
        Some(store.put_task(id, &bytes, self.keep(true)).await)
    }

    /// Task `id` as the state store has it (`Ok(None)`: no store, or no such record).
    pub async fn recorded(&self, id: &str) -> Result<Option<Record>, StoreError> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let Some(bytes) = store.task(id).await? else {
            return Ok(None);
        };
        // A record no replica wrote is no task.
        Ok(serde_json::from_slice(&bytes).ok())
    }

    /// Asks the replica running task `id` to cancel it.
    pub async fn cancel_elsewhere(&self, id: &str) -> Result<(), StoreError> {
        match &self.store {
            Some(store) => store.cancel_task(id, self.keep(false)).await,
            None => Ok(()),
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
