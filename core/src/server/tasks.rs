//! The Tasks extension (SEP-2663) on Runbyte's side: `execute_code` run as a task for a
//! 2026-07-28 client that declared the extension ([`start`], kept in
//! [`crate::execute::ExecutionTasks`]), and `tasks/get`,
//! `tasks/update` and `tasks/cancel`, which reach either such an execution or the server whose
//! task answered a direct call ([`crate::hub::Hub::task_request`]). rmcp answers them -32021
//! for a request that did not declare the extension, and `tasks/list` and `tasks/result` (which
//! SEP-2663 removed) -32601, except in a 2025-11-25 session, which has that revision's tasks
//! (`super::legacy_tasks`, on the same [`start`]).
//!
//! An execution's task lives in this process (rmcp's `TaskManager`). Without `[server]
//! state-store`, a replica that did not start it does not know its id; with one, the task is
//! recorded there each second and at its end (`execute::TaskRecord`), and any replica answers
//! `tasks/get` for its owner from that record, and `tasks/cancel` by a mark the running replica
//! looks for each second (`tasks/update`, which answers a question, must reach the replica
//! running it). While it runs, its `statusMessage` says for how long and how
//! many tool calls it made (each second). Its questions (elicitation, a policy's approval) are the
//! task's `input_required` status, answered by `tasks/update`; `tasks/cancel` stops the
//! execution, whose downstream calls are cancelled with it. A task may run `task-timeout-ms`
//! (1 hour by default), then it fails; it is kept as long again once it ended, and at most
//! 256 run at once (`execute::ExecutionTasks`; past that, `execute_code` answers in the request
//! as before).
//! A result is as large as the execution's own limits allow (`max-output-bytes`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolResponse, CancelTaskParams, ClientCapabilities, CreateTaskResult, ErrorData,
    GetTaskParams, GetTaskResult, ServerResult, UpdateTaskParams,
};
use rmcp::task_manager::{TaskContext, TaskExit, TaskFuture};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::execute::{self, ExecutionTasks, Retry, TaskEnd};
use crate::gateway::Gateway;
use crate::hub::TaskRequest;
use crate::relay::{Asker, Question};
use crate::telemetry::Parent;

/// What an execution run as a task needs of its client, owned (it outlives the request).
pub struct Started {
    pub code: String,
    pub session: String,
    pub listener: String,
    pub fairness: String,
    pub owner: String,
    pub keeps: crate::kept::Owner,
    pub capabilities: ClientCapabilities,
    pub parent: Parent,
    /// A 2025-11-25 session's task (`super::legacy_tasks`): it asks and is told through the
    /// session. `None`: SEP-2663's, whose questions are the task's `inputRequests`.
    pub requestor: Option<Arc<dyn Requestor>>,
}

/// The session a task of 2025-11-25 was started in, which its questions and progress reach.
pub trait Requestor: Send + Sync {
    /// Who answers task `task`'s questions.
    fn asker(&self, task: &str) -> Arc<dyn Asker>;
    /// Where its progress goes besides its `statusMessage`, if anywhere.
    fn progress(&self) -> Option<Arc<dyn execute::Progress>>;
    /// Told once task `task` ended (`notifications/tasks/status`).
    fn ended(&self, task: &str) -> BoxFuture<'static, ()>;
}

/// Starts `started` as a task of `gateway`'s; `None` when the most tasks already run (the
/// caller runs it in the request instead).
pub async fn start(gateway: Arc<Gateway>, started: Started) -> Option<CreateTaskResult> {
    let owner = started.owner.clone();
    let tasks = gateway.tasks().clone();
    let recording = tasks.clone();
    let created = tasks.clone().start(owner, move |context| -> TaskFuture {
        Box::pin(async move {
            let id = context.task_id().to_owned();
            let recorder = tokio::spawn(record(tasks.clone(), context.clone()));
            let requestor = started.requestor.clone();
            let exit = run(gateway, started, context).await;
            recorder.abort();
            tasks.finish(&id, TaskEnd::of(&exit));
            if let Some(requestor) = requestor {
                requestor.ended(&id).await;
            }
            if let Some(Err(error)) = tasks.record_end(&id, &exit).await {
                tracing::warn!(task = %id, "the task's end is not recorded: {error}");
            }
            exit
        })
    })?;
    // Recorded before the client has its id, so that any replica it asks next knows it.
    let id = &created.task.task_id;
    if let Some(Err(error)) = recording.record(id).await {
        tracing::warn!(task = %id, "the task runs here only, other replicas do not see it: {error}");
    }
    Some(created)
}

/// With a state store, records the task `context` is for each second, and cancels it when
/// another replica asked to; a WARN (once) when the store cannot be reached. Aborted when the
/// execution ends.
async fn record(tasks: Arc<ExecutionTasks>, context: TaskContext) {
    let Some(store) = tasks.store().cloned() else {
        return;
    };
    let id = context.task_id().to_owned();
    let mut warned = false;
    let mut tick = tokio::time::interval(RECORD_EVERY);
    loop {
        tick.tick().await;
        let recorded = match tasks.record(&id).await {
            Some(Ok(())) => store.task_cancelled(&id).await,
            Some(Err(error)) => Err(error),
            None => return,
        };
        match recorded {
            Ok(true) => {
                let _ = tasks.manager().cancel_task(&id);
            }
            Ok(false) => {}
            Err(error) if !warned => {
                warned = true;
                tracing::warn!(
                    task = %id,
                    "the task runs here only, other replicas do not see it: {error}"
                );
            }
            Err(_) => {}
        }
    }
}

/// How often a running task is recorded in the state store and looks for a cancel.
const RECORD_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs one execution as the task `context`: its questions are the task's, its cancellation
/// the execution's.
async fn run(
    gateway: Arc<Gateway>,
    started: Started,
    context: TaskContext,
) -> Result<rmcp::model::CallToolResult, TaskExit> {
    let session = format!("{}/task-{}", started.session, context.task_id());
    let cancel = CancellationToken::new();
    let watcher = {
        let (context, cancel) = (context.clone(), cancel.clone());
        tokio::spawn(async move {
            context.cancelled().await;
            cancel.cancel();
        })
    };
    let status = TaskStatus(context.clone());
    let (asker, progress): (Arc<dyn Asker>, Arc<dyn execute::Progress>) = match &started.requestor {
        Some(requestor) => (
            requestor.asker(context.task_id()),
            Arc::new(AlsoTo(status, requestor.progress())),
        ),
        None => (
            Arc::new(TaskAsker {
                context: context.clone(),
                next: AtomicU64::new(1),
            }),
            Arc::new(status),
        ),
    };
    let client = execute::Client {
        session: &session,
        listener: Some(&started.listener),
        fairness: &started.fairness,
        keeps: started.keeps,
        asker: Some(asker),
        capabilities: started.capabilities,
        progress: Some(progress),
        parent: started.parent,
        cancel,
    };
    let answer = gateway
        .executor()
        .execute_code(started.code, Retry::default(), client)
        .await;
    watcher.abort();
    gateway.hub().end_session(&session).await;
    if context.is_cancel_requested() {
        return Err(TaskExit::Cancelled);
    }
    match answer {
        Ok(CallToolResponse::Complete(result)) => Ok(result),
        Ok(_) => Err(TaskExit::Error(ErrorData::internal_error(
            "the execution ended without a result",
            None,
        ))),
        Err(error) => Err(TaskExit::Error(error)),
    }
}

/// An execution's progress (every second: how long it has run, how many tool calls) as its
/// task's `statusMessage`, which `tasks/get` shows.
struct TaskStatus(TaskContext);

impl execute::Progress for TaskStatus {
    fn tell(&self, _seconds: f64, message: String) -> BoxFuture<'static, bool> {
        self.0.set_status_message(message);
        Box::pin(std::future::ready(true))
    }
}

/// The task's `statusMessage`, and the progress notifications the request asked for: a
/// client that cannot be told (it went away, to come back) still finds the status.
struct AlsoTo(TaskStatus, Option<Arc<dyn execute::Progress>>);

impl execute::Progress for AlsoTo {
    fn tell(&self, seconds: f64, message: String) -> BoxFuture<'static, bool> {
        let notified = self
            .1
            .as_ref()
            .map(|progress| progress.tell(seconds, message.clone()));
        let status = self.0.tell(seconds, message);
        Box::pin(async move {
            if let Some(notified) = notified {
                notified.await;
            }
            status.await
        })
    }
}

/// Puts an execution's questions to its client as the task's `inputRequests`.
struct TaskAsker {
    context: TaskContext,
    next: AtomicU64,
}

impl Asker for TaskAsker {
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>> {
        let key = format!("q{}", self.next.fetch_add(1, Ordering::Relaxed));
        let context = self.context.clone();
        Box::pin(async move {
            context
                .request_input(key, question)
                .await
                .map_err(|_| "the task was cancelled before the client answered".to_owned())
        })
    }
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown task: {id}"), None)
}

/// `tasks/get` for `owner`.
pub async fn get(
    gateway: &Gateway,
    owner: &str,
    request: GetTaskParams,
) -> Result<GetTaskResult, ErrorData> {
    let tasks = gateway.tasks();
    match tasks.owned(&request.task_id, owner) {
        Some(true) => {
            return Ok(GetTaskResult::new(
                tasks.manager().get_task(&request.task_id)?,
            ));
        }
        Some(false) => return Err(unknown(&request.task_id)),
        None => {}
    }
    if let Some(record) = elsewhere(gateway, &request.task_id, owner).await? {
        if let Some(bytes) = record.result_bytes {
            return Err(ErrorData::internal_error(
                format!(
                    "task {} ended, but its result ({bytes} bytes) is more than the state store \
                     keeps ({} bytes): only the replica that ran it has it; ask again there",
                    request.task_id,
                    crate::state_store::MAX_KEPT_TASK
                ),
                None,
            ));
        }
        return Ok(GetTaskResult::new(record.task));
    }
    let hub = gateway.hub();
    match hub
        .task_request(&request.task_id, owner, TaskRequest::Get)
        .await?
    {
        ServerResult::GetTaskResult(got) => Ok(got),
        _ => Err(unexpected("tasks/get")),
    }
}

/// `tasks/update` for `owner`.
pub async fn update(
    gateway: &Gateway,
    owner: &str,
    request: UpdateTaskParams,
) -> Result<(), ErrorData> {
    let tasks = gateway.tasks();
    match tasks.owned(&request.task_id, owner) {
        Some(true) => {
            return tasks
                .manager()
                .update_task(&request.task_id, request.input_responses);
        }
        Some(false) => return Err(unknown(&request.task_id)),
        None => {}
    }
    if elsewhere(gateway, &request.task_id, owner).await?.is_some() {
        return Err(ErrorData::invalid_params(
            format!(
                "task {} runs on another replica: its answers must reach that one (a 2026-07-28 \
                 balancer cannot send them there; answer in the request instead)",
                request.task_id
            ),
            None,
        ));
    }
    let answers = TaskRequest::Update(request.input_responses);
    let answer = gateway
        .hub()
        .task_request(&request.task_id, owner, answers)
        .await?;
    acknowledged(answer, "tasks/update")
}

/// `tasks/cancel` for `owner`.
pub async fn cancel(
    gateway: &Gateway,
    owner: &str,
    request: CancelTaskParams,
) -> Result<(), ErrorData> {
    let tasks = gateway.tasks();
    match tasks.owned(&request.task_id, owner) {
        Some(true) => return tasks.manager().cancel_task(&request.task_id),
        Some(false) => return Err(unknown(&request.task_id)),
        None => {}
    }
    if elsewhere(gateway, &request.task_id, owner).await?.is_some() {
        return tasks
            .cancel_elsewhere(&request.task_id)
            .await
            .map_err(|error| ErrorData::internal_error(error.to_string(), None));
    }
    let answer = gateway
        .hub()
        .task_request(&request.task_id, owner, TaskRequest::Cancel)
        .await?;
    acknowledged(answer, "tasks/cancel")
}

/// Task `id` as the state store records it, when another replica runs it for `owner`; another
/// owner's is unknown, as here. `Ok(None)`: no store, no such task there, or a store that
/// cannot be read (a WARN names it).
async fn elsewhere(
    gateway: &Gateway,
    id: &str,
    owner: &str,
) -> Result<Option<execute::TaskRecord>, ErrorData> {
    let recorded = match gateway.tasks().recorded(id).await {
        Ok(recorded) => recorded,
        // A downstream server's task is still answered; an execution's elsewhere is unknown.
        Err(error) => {
            tracing::warn!(task = %id, "cannot look the task up: {error}");
            None
        }
    };
    match recorded {
        Some(record) if record.owner == owner => Ok(Some(record)),
        Some(_) => Err(unknown(id)),
        None => Ok(None),
    }
}

/// An acknowledgement is empty (`{}`, or `resultType` and `_meta` only): whatever the server
/// put in it, the client gets rmcp's empty one.
fn acknowledged(answer: ServerResult, method: &str) -> Result<(), ErrorData> {
    match answer {
        ServerResult::TaskAckResult(_) | ServerResult::EmptyResult(_) => Ok(()),
        _ => Err(unexpected(method)),
    }
}

fn unexpected(method: &str) -> ErrorData {
    ErrorData::internal_error(format!("the server's answer to {method} was not one"), None)
}
