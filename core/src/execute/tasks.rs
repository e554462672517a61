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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, ErrorData, JsonObject, TaskPayload,
};
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
    /// Task id → its owner (see `Session::task_owner`), in the order they started.
    owners: Mutex<HashMap<String, Owned>>,
    started: AtomicU64,
    /// How the tasks ended, as each execution decided (or a `tasks/cancel` of 2025-11-25).
    ends: Mutex<HashMap<String, Ended>>,
    /// Counts the ends, for those who wait for one.
    ending: tokio::sync::watch::Sender<u64>,
    timeout: Duration,
    /// `[server] state-store`, where every replica finds the tasks.
    store: Option<StateStore>,
}

struct Owned {
    owner: String,
    /// Its place in the order tasks started.
    seq: u64,
}

/// How an execution's task ended, as its execution decided (rmcp's manager holds the result).
#[derive(Clone, Debug)]
pub enum Ended {
    /// It returned a result: `failed` with `isError` (and its first text, cut short).
    Returned {
        failed: Option<String>,
    },
    /// The error its request would have had.
    Error(ErrorData),
    Cancelled,
}

impl Ended {
    /// How an execution's `exit` ended its task.
    pub fn of(exit: &Result<CallToolResult, TaskExit>) -> Ended {
        match exit {
            Ok(result) if result.is_error == Some(true) => {
                let text = result
                    .content
                    .iter()
                    .find_map(|block| block.as_text().map(|text| text.text.as_str()))
                    .unwrap_or("the program failed");
                let cut = text
                    .char_indices()
                    .nth(MAX_MESSAGE)
                    .map_or(text.len(), |(at, _)| at);
                Ended::Returned {
                    failed: Some(text[..cut].to_owned()),
                }
            }
            Ok(_) => Ended::Returned { failed: None },
            Err(TaskExit::Cancelled) => Ended::Cancelled,
            Err(TaskExit::Error(error)) => Ended::Error(error.clone()),
        }
    }
}

/// The most characters of a failed result's text an [`Ended`] keeps.
const MAX_MESSAGE: usize = 512;

/// What a task's request ends with, once the task ended (see [`ExecutionTasks::wait_end`]).
pub enum Outcome {
    Result(CallToolResult),
    Error(ErrorData),
    Cancelled,
}

/// The most tasks one owner may have held at once (running, or ended and kept), and all
/// owners together: past them, no task starts (an ended task is kept as long as it could run,
/// which rmcp's manager cannot be asked to cut short).
const MAX_HELD_PER_OWNER: usize = MAX_RUNNING;
const MAX_HELD: usize = 4 * MAX_RUNNING;

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
            started: AtomicU64::new(0),
            ends: Mutex::default(),
            ending: tokio::sync::watch::channel(0).0,
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
        let owner = self.owners.lock().ok()?.get(id)?.owner.clone();
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
        let owner = self.owners.lock().ok()?.get(id)?.owner.clone();
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

    /// Starts the task `run` makes, owned by `owner`; `None` when [`MAX_RUNNING`] already run,
    /// or too many are held (the caller runs the execution in the request instead).
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
        let seq = self.started.fetch_add(1, Ordering::Relaxed);
        // Owned before it runs, so that even an execution that ends at once finds its owner.
        let task = {
            let mut owners = self.owners.lock().ok()?;
            // Forget the tasks the manager no longer holds (it drops them past their TTL).
            if owners.len() >= MAX_HELD / 2 {
                owners.retain(|id, _| self.manager.get_task(id).is_ok());
                if let Ok(mut ends) = self.ends.lock() {
                    ends.retain(|id, _| owners.contains_key(id));
                }
            }
            let held = owners.values().filter(|held| held.owner == owner).count();
            if owners.len() >= MAX_HELD || held >= MAX_HELD_PER_OWNER {
                // The owner is not named: a legacy session's id is its credential.
                tracing::warn!(
                    "no task started: its client holds {held} tasks (at most \
                     {MAX_HELD_PER_OWNER}), all clients {} (at most {MAX_HELD}); ended tasks \
                     are kept as long as they could run",
                    owners.len()
                );
                return None;
            }
            let task = self.manager.spawn(options, run);
            owners.insert(task.task_id.clone(), Owned { owner, seq });
            task
        };
        Some(CreateTaskResult::new(task))
    }

    /// Whether `id` is an execution's task; `Some(false)` when it is another owner's.
    pub fn owned(&self, id: &str, owner: &str) -> Option<bool> {
        let owners = self.owners.lock().ok()?;
        owners.get(id).map(|holder| holder.owner == owner)
    }

    /// `owner`'s tasks that the manager still holds, each with its place in the order they
    /// started, in that order.
    pub fn owned_by(&self, owner: &str) -> Vec<(u64, String)> {
        let Ok(owners) = self.owners.lock() else {
            return Vec::new();
        };
        let mut owned: Vec<(u64, String)> = owners
            .iter()
            .filter(|(_, held)| held.owner == owner)
            .map(|(id, held)| (held.seq, id.clone()))
            .collect();
        drop(owners);
        owned.retain(|(_, id)| self.manager.get_task(id).is_ok());
        owned.sort_unstable();
        owned
    }

    /// Keeps how task `id` ended, unless it already has an end (a `tasks/cancel` of
    /// 2025-11-25 is final: the task stays cancelled whatever its execution does after).
    pub fn finish(&self, id: &str, ended: Ended) {
        if let Ok(mut ends) = self.ends.lock() {
            ends.entry(id.to_owned()).or_insert(ended);
        }
        self.ending.send_modify(|ends| *ends += 1);
    }

    /// How task `id` ended, if it has.
    pub fn end(&self, id: &str) -> Option<Ended> {
        self.ends.lock().ok()?.get(id).cloned()
    }

    /// Cancels task `id` and holds it cancelled from now on (2025-11-25's `tasks/cancel`);
    /// its execution stops, and its downstream calls are cancelled with it.
    pub fn cancel_now(&self, id: &str) {
        let _ = self.manager.cancel_task(id);
        self.finish(id, Ended::Cancelled);
    }

    /// Cancels every task of `owner`'s still running (its session ended: no one can fetch them).
    pub fn cancel_owned_by(&self, owner: &str) -> usize {
        let running: Vec<String> = self
            .owned_by(owner)
            .into_iter()
            .map(|(_, id)| id)
            .filter(|id| self.end(id).is_none())
            .collect();
        for id in &running {
            self.cancel_now(id);
        }
        running.len()
    }

    /// Waits until task `id` ends and tells what its request ends with; `None` when the
    /// manager no longer holds it. A task the manager failed itself (its TTL elapsed) ends as
    /// that error.
    pub async fn wait_end(&self, id: &str) -> Option<Outcome> {
        let mut ending = self.ending.subscribe();
        // An execution that returned is the manager's to hold a moment later.
        let mut returned_for = 0;
        loop {
            let ended = self.end(id);
            let payload = self.manager.get_task(id).ok()?.payload;
            let object = |object: JsonObject| serde_json::Value::Object(object);
            match (ended, payload) {
                (Some(Ended::Cancelled), _) | (_, TaskPayload::Cancelled) => {
                    return Some(Outcome::Cancelled);
                }
                (Some(Ended::Error(error)), _) => return Some(Outcome::Error(error)),
                (_, TaskPayload::Completed { result }) => {
                    let result = serde_json::from_value(object(result)).map_err(|error| {
                        ErrorData::internal_error(
                            format!("the result is unreadable: {error}"),
                            None,
                        )
                    });
                    return Some(result.map_or_else(Outcome::Error, Outcome::Result));
                }
                (_, TaskPayload::Failed { error }) => {
                    let error = serde_json::from_value(object(error))
                        .unwrap_or_else(|_| ErrorData::internal_error("the task failed", None));
                    return Some(Outcome::Error(error));
                }
                (Some(Ended::Returned { .. }), _) if returned_for < 200 => {
                    returned_for += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                (Some(Ended::Returned { .. }), _) => {
                    return Some(Outcome::Error(ErrorData::internal_error(
                        "the task ended, but its result is not kept",
                        None,
                    )));
                }
                // An end wakes this; the manager's own (a TTL) is seen within a second.
                (None, _) => {
                    let _ = tokio::time::timeout(Duration::from_secs(1), ending.changed()).await;
                }
            }
        }
    }

    /// The tasks themselves.
    pub fn manager(&self) -> &TaskManager {
        &self.manager
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn never_ending(tasks: &ExecutionTasks, owner: &str) -> String {
        let created = tasks
            .start(owner.to_owned(), |context| -> TaskFuture {
                Box::pin(async move {
                    context.cancelled().await;
                    Err(TaskExit::Cancelled)
                })
            })
            .unwrap();
        created.task.task_id
    }

    #[tokio::test]
    async fn the_first_end_is_the_end_and_a_session_s_tasks_are_its_own() {
        let tasks = ExecutionTasks::new(None, None);
        let (a, b) = (never_ending(&tasks, "a"), never_ending(&tasks, "a"));
        let other = never_ending(&tasks, "b");
        let listed: Vec<String> = tasks.owned_by("a").into_iter().map(|(_, id)| id).collect();
        assert_eq!(listed, [a.clone(), b.clone()], "in the order they started");
        assert_eq!(tasks.owned(&other, "a"), Some(false));

        tasks.cancel_now(&a);
        // The execution ends otherwise after: it stays cancelled.
        tasks.finish(&a, Ended::of(&Ok(CallToolResult::success(Vec::new()))));
        assert!(matches!(tasks.end(&a), Some(Ended::Cancelled)));
        assert!(matches!(tasks.wait_end(&a).await, Some(Outcome::Cancelled)));

        // A waiter is woken by the end.
        let waiting = tasks.wait_end(&b);
        let ending = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            tasks.finish(&b, Ended::Error(ErrorData::internal_error("boom", None)));
        };
        let (ended, ()) = tokio::join!(waiting, ending);
        assert!(matches!(ended, Some(Outcome::Error(error)) if error.message == "boom"));

        // The session ends: what still runs of its tasks is cancelled, no one else's.
        assert_eq!(tasks.cancel_owned_by("a"), 0);
        assert_eq!(tasks.cancel_owned_by("b"), 1);
        assert!(matches!(tasks.end(&other), Some(Ended::Cancelled)));
        assert!(tasks.wait_end("no-such-task").await.is_none());
    }

    #[tokio::test]
    async fn one_owner_cannot_hold_every_task() {
        let tasks = ExecutionTasks::new(None, None);
        let quick = |tasks: &ExecutionTasks, owner: &str| {
            tasks.start(owner.to_owned(), |_| -> TaskFuture {
                Box::pin(async { Ok(CallToolResult::success(Vec::new())) })
            })
        };
        for _ in 0..MAX_HELD_PER_OWNER {
            assert!(quick(&tasks, "a").is_some());
        }
        // They all ended, and are kept: none runs, and still "a" may start no more.
        for _ in 0..1000 {
            if tasks.manager().running_task_count() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(tasks.manager().running_task_count(), 0);
        assert!(quick(&tasks, "a").is_none());
        assert!(quick(&tasks, "b").is_some(), "another owner still may");
    }
}
