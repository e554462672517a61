//! The fixtures of the Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`): tools the
//! server runs as tasks, a task store in memory (rmcp's [`TaskManager`]), and `tasks/get`,
//! `tasks/update`, `tasks/cancel` on it.
//!
//! The server decides: a task-supporting tool called by a client that declared the extension
//! (at `initialize`, or per request in `_meta`) answers with a `CreateTaskResult` at once and
//! runs on; from a client without it, an optional-task tool runs to its result in the call and
//! a required-task one is error -32021. rmcp gates the `tasks/*` methods on the same
//! declaration (-32021) and answers -32602 for an id the store does not hold; `tasks/list` and
//! `tasks/result`, removed by SEP-2663, are -32601.
//!
//! - `greet`: sync only, `Hello, {name}!`;
//! - `slow_compute`: optional task, sleeps `seconds` (0: at once), settles `cancelled` when
//!   cancelled mid-run;
//! - `failing_job`: required task, a tool error (`isError`) after about a second;
//! - `protocol_error_job`: optional task, fails with a JSON-RPC error (status `failed`);
//! - `confirm_delete`: optional task, parks `input_required` on one elicitation;
//! - `multi_input`: optional task, parks on two elicitations at once;
//! - `test_tool_with_task`: required task, asks `user_name` by `InputRequiredResult` first
//!   (SEP-2322), then becomes a task whose result greets the name;
//! - `task_cancellations` (not the suite's; for Runbyte's tests): sync, how many `tasks/cancel`
//!   reached a task that was still running.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, CreateTaskResult, GetTaskParams, GetTaskResult, InputRequest, InputRequests,
    InputRequiredResult, Tool, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskContext, TaskExit, TaskFuture, TaskManager, TaskOptions};
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

use super::input_required::elicited_field;
use super::{client_capabilities, from_json};
use crate::server::State;

/// The tools that [`call_tool`] runs.
pub const NAMES: &[&str] = &[
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
    "task_cancellations",
];

/// The tools a client must take as tasks: without the extension they are error -32021.
const REQUIRED: &[&str] = &["failing_job", "test_tool_with_task"];

/// How long a task is kept from its creation (and as long again once it ended), as `ttlMs`.
const TTL_MS: u64 = 60_000;

/// The poll interval the tasks suggest, as `pollIntervalMs`.
const POLL_INTERVAL_MS: u64 = 200;

/// The task store every connection of the process shares.
#[derive(Default)]
pub struct Tasks {
    manager: TaskManager,
    /// `tasks/cancel` requests that reached a running task.
    cancelled: AtomicU64,
}

impl fmt::Debug for Tasks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tasks")
            .field("running", &self.manager.running_task_count())
            .field("cancelled", &self.cancelled)
            .finish()
    }
}

/// The task fixtures, as the suite describes them.
pub fn tools() -> Vec<Tool> {
    let none = json!({"type": "object", "properties": {}});
    let listed = json!([
        {"name": "greet", "description": "Sync only: `Hello, {name}!`.",
         "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
        {"name": "slow_compute", "description": "A task (optional): sleeps `seconds`, then says so; cancelled mid-run it settles cancelled.",
         "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}, "label": {"type": "string"}}}},
        {"name": "failing_job", "description": "A task (required): a tool error after about a second.", "inputSchema": none},
        {"name": "protocol_error_job", "description": "A task (optional): fails with a JSON-RPC error.", "inputSchema": none},
        {"name": "confirm_delete", "description": "A task (optional): asks to confirm deleting `filename` (input_required).",
         "inputSchema": {"type": "object", "properties": {"filename": {"type": "string"}}}},
        {"name": "multi_input", "description": "A task (optional): asks two questions at once (input_required).", "inputSchema": none},
        {"name": "test_tool_with_task", "description": "A task (required): asks `user_name` by InputRequiredResult, then greets it from a task.", "inputSchema": none},
        {"name": "task_cancellations", "description": "How many tasks/cancel reached a running task.", "inputSchema": none}
    ]);
    from_json::<Vec<Tool>>("the task fixtures", listed).unwrap_or_default()
}

/// Runs task fixture `request.name`: as a task where the client declared the extension.
pub async fn call_tool(
    state: &State,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let name = request.name.to_string();
    let arguments = request.arguments.unwrap_or_default();
    if name == "greet" {
        let who = arguments.get("name").and_then(Value::as_str).unwrap_or("");
        return Ok(text(format!("Hello, {who}!")).into());
    }
    if name == "task_cancellations" {
        let count = state.fixture.tasks.cancelled.load(Ordering::SeqCst);
        return Ok(text(count.to_string()).into());
    }
    let declared = client_capabilities(&context).supports_tasks();
    if !declared && REQUIRED.contains(&name.as_str()) {
        return Err(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        ));
    }
    let work: Work = match name.as_str() {
        "test_tool_with_task" => {
            let responses = request.input_responses.unwrap_or_default();
            match elicited_field(&responses, "user_name", "name") {
                Some(who) => Work::Greet(who),
                None => {
                    let mut asked = InputRequests::new();
                    asked.insert("user_name".to_owned(), elicitation("What is your name?")?);
                    return Ok(CallToolResponse::InputRequired(
                        InputRequiredResult::from_input_requests(asked),
                    ));
                }
            }
        }
        "slow_compute" => Work::Sleep {
            seconds: arguments
                .get("seconds")
                .and_then(Value::as_f64)
                .unwrap_or(1.0)
                .clamp(0.0, 3600.0),
            label: arguments
                .get("label")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        },
        "failing_job" => Work::Fail,
        "protocol_error_job" => Work::ProtocolError,
        "confirm_delete" => Work::Confirm(
            arguments
                .get("filename")
                .and_then(Value::as_str)
                .unwrap_or("file")
                .to_owned(),
        ),
        "multi_input" => Work::TwoQuestions,
        other => {
            return Err(ErrorData::invalid_params(
                format!("{other} is not a task fixture"),
                None,
            ));
        }
    };
    if !declared {
        return Ok(match work.run(None).await {
            Ok(result) => result.into(),
            Err(TaskExit::Error(error)) => return Err(error),
            Err(TaskExit::Cancelled) => tool_error("cancelled").into(),
        });
    }
    let options = TaskOptions::new()
        .with_ttl_ms(TTL_MS)
        .with_poll_interval_ms(POLL_INTERVAL_MS);
    let task = state
        .fixture
        .tasks
        .manager
        .spawn(options, move |context| -> TaskFuture {
            Box::pin(async move { work.run(Some(context)).await })
        });
    Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
}

/// `tasks/get`.
pub fn get(state: &State, request: &GetTaskParams) -> Result<GetTaskResult, ErrorData> {
    let task = state.fixture.tasks.manager.get_task(&request.task_id)?;
    Ok(GetTaskResult::new(task))
}

/// `tasks/update`: answers to the questions a task parks on; unknown keys are ignored.
pub fn update(state: &State, request: UpdateTaskParams) -> Result<(), ErrorData> {
    state
        .fixture
        .tasks
        .manager
        .update_task(&request.task_id, request.input_responses)
}

/// `tasks/cancel`: acknowledged at once, on a running task and on an ended one alike.
pub fn cancel(state: &State, request: &CancelTaskParams) -> Result<(), ErrorData> {
    let tasks = &state.fixture.tasks;
    let running = tasks
        .manager
        .get_task(&request.task_id)
        .is_ok_and(|task| !task.status().is_terminal());
    tasks.manager.cancel_task(&request.task_id)?;
    if running {
        tasks.cancelled.fetch_add(1, Ordering::SeqCst);
    }
    Ok(())
}

/// What a task fixture does, in the call or as a task.
enum Work {
    Sleep { seconds: f64, label: String },
    Fail,
    ProtocolError,
    Confirm(String),
    TwoQuestions,
    Greet(String),
}

impl Work {
    /// Does the work; `task` is the task's handle when it runs as one (questions need it).
    async fn run(self, task: Option<TaskContext>) -> Result<CallToolResult, TaskExit> {
        match self {
            Self::Sleep { seconds, label } => {
                let sleep = tokio::time::sleep(Duration::from_secs_f64(seconds));
                match &task {
                    Some(task) => tokio::select! {
                        () = sleep => {}
                        () = task.cancelled() => return Err(TaskExit::Cancelled),
                    },
                    None => sleep.await,
                }
                Ok(text(format!("computed {label} in {seconds} s")))
            }
            Self::Fail => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok(tool_error("failing_job fails on purpose"))
            }
            Self::ProtocolError => Err(TaskExit::Error(ErrorData::internal_error(
                "protocol_error_job fails on purpose",
                None,
            ))),
            Self::Confirm(filename) => {
                let task = asking(task)?;
                let answer = task
                    .request_input("confirm", elicitation(&format!("Delete {filename}?"))?)
                    .await?;
                Ok(match accepted(&answer) {
                    true => text(format!("deleted {filename}")),
                    false => text(format!("kept {filename}")),
                })
            }
            Self::TwoQuestions => {
                let task = asking(task)?;
                let (first, second) = (
                    elicitation("First question?")?,
                    elicitation("Second question?")?,
                );
                let (first, second) = tokio::join!(
                    task.request_input("first", first),
                    task.request_input("second", second),
                );
                let (first, second) = (first?, second?);
                Ok(text(format!(
                    "first: {}; second: {}",
                    accepted(&first),
                    accepted(&second)
                )))
            }
            Self::Greet(who) => Ok(text(format!("Hello, {who}!"))),
        }
    }
}

/// The task a question is asked on; without one (a client without the extension) the
/// fixture has no way to ask.
fn asking(task: Option<TaskContext>) -> Result<TaskContext, TaskExit> {
    task.ok_or_else(|| {
        TaskExit::Error(ErrorData::missing_required_client_capability(
            ClientCapabilities::builder().enable_tasks().build(),
        ))
    })
}

fn accepted(answer: &Value) -> bool {
    answer.get("action").and_then(Value::as_str) == Some("accept")
}

fn elicitation(message: &str) -> Result<InputRequest, ErrorData> {
    let request = json!({"method": "elicitation/create", "params": {
        "mode": "form",
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "confirm": {"type": "boolean"}}
        }
    }});
    from_json("an elicitation", request)
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn the_elicitation_parses() {
        let request = serde_json::to_value(elicitation("Sure?").unwrap()).unwrap();
        assert_eq!(request["method"], json!("elicitation/create"));
    }

    #[test]
    fn every_task_fixture_is_listed() {
        let listed: Vec<String> = tools().iter().map(|tool| tool.name.to_string()).collect();
        assert_eq!(listed, NAMES);
    }
}
