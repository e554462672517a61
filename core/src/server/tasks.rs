//! The Tasks extension (SEP-2663) on Runbyte's side: `execute_code` run as a task for a
//! 2026-07-28 client that declared the extension ([`start`], kept in
//! [`crate::execute::ExecutionTasks`]), and `tasks/get`,
//! `tasks/update` and `tasks/cancel`, which reach either such an execution or the server whose
//! task answered a direct call ([`crate::hub::Hub::task_request`]). rmcp answers them -32021
//! for a request that did not declare the extension, and `tasks/list` and `tasks/result` (which
//! SEP-2663 removed) -32601.
//!
//! An execution's task lives in this process (rmcp's `TaskManager`): a replica that did not
//! start it does not know its id. While it runs, its `statusMessage` says for how long and how
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

use crate::execute::{self, Retry};
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
}

/// Starts `started` as a task of `gateway`'s; `None` when the most tasks already run (the
/// caller runs it in the request instead).
pub fn start(gateway: Arc<Gateway>, started: Started) -> Option<CreateTaskResult> {
    let owner = started.owner.clone();
    let tasks = gateway.tasks().clone();
    tasks.start(owner, move |context| -> TaskFuture {
        Box::pin(run(gateway, started, context))
    })
}

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
    let asker = Arc::new(TaskAsker {
        context: context.clone(),
        next: AtomicU64::new(1),
    });
    let client = execute::Client {
        session: &session,
        listener: Some(&started.listener),
        fairness: &started.fairness,
        keeps: started.keeps,
        asker: Some(asker),
        capabilities: started.capabilities,
        progress: Some(Arc::new(TaskStatus(context.clone()))),
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
    let answer = gateway
        .hub()
        .task_request(&request.task_id, owner, TaskRequest::Cancel)
        .await?;
    acknowledged(answer, "tasks/cancel")
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
