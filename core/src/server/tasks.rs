//! `tasks/get`, `tasks/update` and `tasks/cancel` of the Tasks extension (SEP-2663): a client's
//! requests about the tasks its direct calls were answered with, sent on to the servers that
//! made them ([`crate::hub::Hub::task_request`]). rmcp answers them -32021 for a request that
//! did not declare the extension, and `tasks/list` and `tasks/result` (which SEP-2663 removed)
//! -32601.

use rmcp::model::{
    CancelTaskParams, ErrorData, GetTaskParams, GetTaskResult, ServerResult, UpdateTaskParams,
};

use crate::hub::{Hub, TaskRequest};

/// `tasks/get` for `owner`.
pub async fn get(
    hub: &Hub,
    owner: &str,
    request: GetTaskParams,
) -> Result<GetTaskResult, ErrorData> {
    match hub
        .task_request(&request.task_id, owner, TaskRequest::Get)
        .await?
    {
        ServerResult::GetTaskResult(got) => Ok(got),
        _ => Err(unexpected("tasks/get")),
    }
}

/// `tasks/update` for `owner`.
pub async fn update(hub: &Hub, owner: &str, request: UpdateTaskParams) -> Result<(), ErrorData> {
    let answers = TaskRequest::Update(request.input_responses);
    acknowledged(
        hub.task_request(&request.task_id, owner, answers).await?,
        "tasks/update",
    )
}

/// `tasks/cancel` for `owner`.
pub async fn cancel(hub: &Hub, owner: &str, request: CancelTaskParams) -> Result<(), ErrorData> {
    let answer = hub
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
