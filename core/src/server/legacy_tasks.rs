//! Tasks as MCP 2025-11-25 has them, for a session that negotiated that revision: a
//! `tools/call` of `execute_code` with a `task` field answers at once with the task, and the
//! execution runs on; `tasks/get`, `tasks/result` (which waits for the end), `tasks/list` and
//! `tasks/cancel` reach it. SEP-2663 (2026-07-28, `super::tasks`) replaced this form; rmcp
//! knows only that one, so [`LegacyTasks`] speaks this one over the session's text
//! ([`crate::pump::Rewrite`]):
//!
//! - the `initialize` answer that agrees on 2025-11-25 gets `capabilities.tasks`, and
//!   `execute_code` in `tools/list` gets `execution.taskSupport: "optional"`;
//! - a task-augmented call's answer is replaced by the task it started (`CreateTaskResult`); a
//!   task-augmented call of any other tool is answered -32601, as the revision asks;
//! - the four `tasks/*` requests are renamed [`METHOD_PREFIX`]`tasks/…` for rmcp, which hands
//!   them to the handler as custom requests, answered here ([`LegacyTasks::answer`]).
//!
//! The tasks are the executions' (`crate::execute::ExecutionTasks`), owned by the session:
//! another session never sees them, and they are cancelled when the session ends (no one
//! could fetch them). Their questions (elicitation, approvals) are the session's requests,
//! with the task in `_meta`, and the task is `input_required` while one waits; its progress
//! is its `statusMessage` and, when the call asked with a progress token, notifications. Once
//! it ends the session hears `notifications/tasks/status`. A result with `isError` is a
//! `failed` task, as the revision says. They live in this process: a 2025-11-25 session is
//! one replica's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rmcp::model::{
    CustomNotification, ErrorCode, ErrorData, RequestId, ServerNotification, TaskStatus,
};
use rmcp::{Peer, RoleServer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::execute::{self, ExecutionTasks, TaskEnd, TaskOutcome};
use crate::pump::{Rewrite, Rewritten};
use crate::relay::{Asker, Question, RELATED_TASK_META, SessionAsker};

/// The revision whose tasks these are.
pub const REVISION: &str = "2025-11-25";

/// What the `tasks/*` requests of a 2025-11-25 session are renamed, for rmcp (which would take
/// `tasks/get` and `tasks/cancel` for SEP-2663's).
pub const METHOD_PREFIX: &str = "runbyte/2025-11-25/";

/// The most tasks one `tasks/list` answer holds.
const PAGE: usize = 100;

/// The most `tasks/result` requests of one session that wait at once: each holds a request
/// open and looks at its task each second.
const MAX_WAITING_RESULTS: usize = 64;

/// One of at most so many at once, counted until dropped.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn take(count: &Arc<AtomicUsize>, most: usize) -> Option<Counted> {
        count
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now < most).then_some(now + 1)
            })
            .ok()?;
        Some(Counted(count.clone()))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The most requests whose answers wait to be rewritten: past it (requests never answered),
/// they are forgotten.
const MAX_PENDING: usize = 1024;

/// One session's 2025-11-25 tasks: whether it negotiated that revision, and the answers to
/// rewrite.
#[derive(Default)]
pub struct LegacyTasks {
    /// The session asked for 2025-11-25 in `initialize`, and the answer did not refuse it.
    on: AtomicBool,
    /// The session's first message was read: a session that did not begin with such an
    /// `initialize` never has these tasks, and its messages are not looked at.
    begun: AtomicBool,
    /// Requests whose answers are rewritten (`rewrites` asks for each answer: the count
    /// spares it the lock when there are none).
    pending: Mutex<HashMap<RequestId, Pending>>,
    pending_count: AtomicUsize,
    /// Tasks whose questions wait for the client: task id → how many.
    asking: Mutex<HashMap<String, usize>>,
    /// The session's `tasks/result` requests waiting for their task's end.
    waiting_results: Arc<AtomicUsize>,
    /// The request the message being read was recorded as, until the next message.
    last: Mutex<Option<RequestId>>,
}

enum Pending {
    Initialize,
    ToolsList,
    /// A task-augmented `tools/call` of `execute_code`; the task once it started.
    Call(Option<Value>),
}

impl LegacyTasks {
    /// Whether the session agreed on 2025-11-25.
    pub fn on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }

    /// Whether request `id` is a task-augmented `tools/call` of `execute_code`.
    pub fn augmented(&self, id: &RequestId) -> bool {
        self.on()
            && self
                .pending
                .lock()
                .is_ok_and(|pending| matches!(pending.get(id), Some(Pending::Call(_))))
    }

    /// Answers request `id` with `task` (a 2025-11-25 `Task`) in place of its result.
    pub fn created(&self, id: &RequestId, task: Value) {
        if let Ok(mut pending) = self.pending.lock()
            && let Some(Pending::Call(created)) = pending.get_mut(id)
        {
            *created = Some(task);
        }
    }

    fn expect(&self, id: RequestId, what: Pending) {
        if let Ok(mut last) = self.last.lock() {
            *last = Some(id.clone());
        }
        if let Ok(mut pending) = self.pending.lock() {
            if pending.len() >= MAX_PENDING {
                pending.clear();
            }
            pending.insert(id, what);
            self.pending_count.store(pending.len(), Ordering::Release);
        }
    }

    fn take(&self, id: &RequestId) -> Option<Pending> {
        let mut pending = self.pending.lock().ok()?;
        let taken = pending.remove(id);
        self.pending_count.store(pending.len(), Ordering::Release);
        taken
    }

    /// Answers a renamed `tasks/*` request of `owner`'s (`method` without [`METHOD_PREFIX`]).
    pub async fn answer(
        &self,
        tasks: &ExecutionTasks,
        owner: &str,
        method: &str,
        params: Option<Value>,
        cancel: CancellationToken,
    ) -> Result<Value, ErrorData> {
        let params = params.unwrap_or(Value::Null);
        if method == "tasks/list" {
            return self.list(tasks, owner, params.get("cursor"));
        }
        let id = match params.get("taskId") {
            Some(Value::String(id)) => id.as_str(),
            _ => {
                return Err(ErrorData::invalid_params(
                    format!("{method} needs `taskId`, a string"),
                    None,
                ));
            }
        };
        if tasks.owned(id, owner) != Some(true) {
            return Err(unknown(id));
        }
        match method {
            "tasks/get" => self.task(tasks, id).ok_or_else(|| unknown(id)),
            "tasks/result" => {
                let Some(_waiting) = Counted::take(&self.waiting_results, MAX_WAITING_RESULTS)
                else {
                    return Err(ErrorData::internal_error(
                        format!(
                            "{MAX_WAITING_RESULTS} tasks/result requests of this session already \
                             wait: poll with tasks/get, or wait for one of them"
                        ),
                        None,
                    ));
                };
                let ended = tokio::select! {
                    ended = tasks.wait_end(id) => ended.ok_or_else(|| unknown(id))?,
                    () = cancel.cancelled() => {
                        return Err(ErrorData::internal_error("the request was cancelled", None));
                    }
                };
                result(id, ended)
            }
            "tasks/cancel" => {
                let task = self.task(tasks, id).ok_or_else(|| unknown(id))?;
                let status = task["status"].as_str().unwrap_or_default();
                if matches!(status, "completed" | "failed" | "cancelled") {
                    return Err(ErrorData::invalid_params(
                        format!("task {id} already ended ({status}): it cannot be cancelled"),
                        None,
                    ));
                }
                tasks.cancel_now(id);
                self.task(tasks, id).ok_or_else(|| unknown(id))
            }
            _ => Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("unknown method `{method}`"),
                None,
            )),
        }
    }

    /// `tasks/list`: `owner`'s tasks, oldest first, a page at a time.
    fn list(
        &self,
        tasks: &ExecutionTasks,
        owner: &str,
        cursor: Option<&Value>,
    ) -> Result<Value, ErrorData> {
        let after = match cursor {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(
                cursor
                    .strip_prefix("after-")
                    .and_then(|seq| seq.parse::<u64>().ok())
                    .ok_or_else(|| {
                        ErrorData::invalid_params(format!("unknown cursor: {cursor}"), None)
                    })?,
            ),
            Some(_) => return Err(ErrorData::invalid_params("`cursor` is a string", None)),
        };
        let owned = tasks.owned_by(owner);
        let mut page = owned
            .iter()
            .filter(|(seq, _)| after.is_none_or(|after| *seq > after))
            .filter_map(|(seq, id)| Some((*seq, self.task(tasks, id)?)));
        let listed: Vec<(u64, Value)> = page.by_ref().take(PAGE).collect();
        let mut answer = json!({"tasks": listed.iter().map(|(_, task)| task).collect::<Vec<_>>()});
        if page.next().is_some()
            && let Some((seq, _)) = listed.last()
        {
            answer["nextCursor"] = json!(format!("after-{seq}"));
        }
        Ok(answer)
    }

    /// Task `id` as 2025-11-25 shows it; `None` when no longer held.
    pub fn task(&self, tasks: &ExecutionTasks, id: &str) -> Option<Value> {
        let held = tasks.manager().get_task(id).ok()?.task;
        let asking = self
            .asking
            .lock()
            .is_ok_and(|asking| asking.get(id).is_some_and(|count| *count > 0));
        let mut message = held.status_message;
        let status = match tasks.end(id) {
            Some(TaskEnd::Returned {
                failed: Some(failed),
            }) => {
                message = Some(failed);
                "failed"
            }
            Some(TaskEnd::Returned { failed: None }) => "completed",
            Some(TaskEnd::Error(error)) => {
                message = Some(error.message.to_string());
                "failed"
            }
            Some(TaskEnd::Cancelled) => "cancelled",
            None => match held.status {
                TaskStatus::Working if asking => "input_required",
                TaskStatus::Working => "working",
                TaskStatus::InputRequired => "input_required",
                TaskStatus::Cancelled => "cancelled",
                // The manager's own end: its TTL elapsed.
                _ => "failed",
            },
        };
        let mut task = json!({
            "taskId": held.task_id,
            "status": status,
            "createdAt": held.created_at,
            "lastUpdatedAt": held.last_updated_at,
            "ttl": held.ttl_ms,
        });
        if let Some(message) = message {
            task["statusMessage"] = json!(message);
        }
        if let Some(interval) = held.poll_interval_ms {
            task["pollInterval"] = json!(interval);
        }
        Some(task)
    }
}

/// What `tasks/result` answers for a task that ended so: exactly what its request would
/// have, with the task in `_meta`.
fn result(id: &str, ended: TaskOutcome) -> Result<Value, ErrorData> {
    let related = json!({"taskId": id});
    match ended {
        TaskOutcome::Result(result) => {
            let mut value = serde_json::to_value(result)
                .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
            if let Value::Object(object) = &mut value {
                let meta = object
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Value::Object(meta) = meta {
                    meta.insert(RELATED_TASK_META.to_owned(), related);
                }
            }
            Ok(value)
        }
        TaskOutcome::Error(mut error) => {
            // The error's own data stays: the task goes beside it, or nowhere if it is no object.
            match &mut error.data {
                None => error.data = Some(json!({"_meta": {RELATED_TASK_META: related}})),
                Some(Value::Object(data)) => {
                    data.insert("_meta".to_owned(), json!({RELATED_TASK_META: related}));
                }
                Some(_) => {}
            }
            Err(error)
        }
        TaskOutcome::Cancelled => Err(ErrorData::internal_error(
            format!("task {id} was cancelled"),
            Some(json!({"_meta": {RELATED_TASK_META: related}})),
        )),
    }
}

fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown task: {id}"), None)
}

/// What [`LegacyTasks::incoming`] reads of a message: the rest is skipped unbuilt.
#[derive(serde::Deserialize)]
struct Head {
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    id: Option<RequestId>,
    #[serde(default)]
    params: Option<HeadParams>,
}

#[derive(serde::Deserialize, Default)]
struct HeadParams {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "protocolVersion")]
    protocol_version: Option<String>,
    /// Present and not null: a task-augmented request.
    #[serde(default)]
    task: Option<serde::de::IgnoredAny>,
}

/// A JSON-RPC error answer to request `id`.
fn error_answer(id: &RequestId, code: ErrorCode, message: String) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code.0, "message": message}}).to_string()
}

impl Rewrite for LegacyTasks {
    fn incoming(&self, text: &str) -> Rewritten {
        if self.pending_count.load(Ordering::Acquire) > 0
            && let Ok(mut last) = self.last.lock()
        {
            *last = None;
        }
        // Most messages are none of these: only a text that could be one is read.
        let maybe = if self.on() {
            text.contains("\"task") || text.contains("tools/list")
        } else if self.begun.swap(true, Ordering::AcqRel) {
            false
        } else {
            text.contains("\"initialize\"") && text.contains(REVISION)
        };
        if !maybe {
            return Rewritten::Same;
        }
        // Only what decides is read: a program's arguments are skipped, not built (a text that
        // is no such object, or holds a key twice, is rmcp's to judge).
        let Ok(Head {
            method,
            id: Some(id),
            params,
        }) = serde_json::from_str::<Head>(text)
        else {
            return Rewritten::Same;
        };
        let params = params.unwrap_or_default();
        match method.as_deref().unwrap_or_default() {
            "initialize" if !self.on() => {
                if params.protocol_version.as_deref() == Some(REVISION) {
                    self.expect(id, Pending::Initialize);
                    // Until the answer says otherwise: a client may send its next requests
                    // before it has the answer.
                    self.on.store(true, Ordering::Release);
                }
                Rewritten::Same
            }
            _ if !self.on() => Rewritten::Same,
            "tools/list" => {
                self.expect(id, Pending::ToolsList);
                Rewritten::Same
            }
            "tools/call" if params.task.is_some() => {
                if params.name.as_deref() == Some(crate::own_tools::EXECUTE_CODE) {
                    self.expect(id, Pending::Call(None));
                    return Rewritten::Same;
                }
                Rewritten::Answer(error_answer(
                    &id,
                    ErrorCode::METHOD_NOT_FOUND,
                    format!(
                        "tool `{}` does not run as a task (only `{}` does)",
                        params.name.as_deref().unwrap_or("?"),
                        crate::own_tools::EXECUTE_CODE
                    ),
                ))
            }
            method @ ("tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel") => {
                let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(text) else {
                    return Rewritten::Same;
                };
                let renamed = format!("{METHOD_PREFIX}{method}");
                message.insert("method".to_owned(), Value::String(renamed));
                Rewritten::Message(Value::Object(message).to_string())
            }
            _ => Rewritten::Same,
        }
    }

    fn refused(&self) {
        let last = self.last.lock().ok().and_then(|mut last| last.take());
        if let Some(id) = last {
            self.take(&id);
        }
    }

    fn rewrites(&self, id: &RequestId) -> bool {
        self.pending_count.load(Ordering::Acquire) > 0
            && self
                .pending
                .lock()
                .is_ok_and(|pending| pending.contains_key(id))
    }

    fn outgoing(&self, id: &RequestId, text: String) -> String {
        let Some(pending) = self.take(id) else {
            return text;
        };
        let Ok(mut answer) = serde_json::from_str::<Value>(&text) else {
            return text;
        };
        let Some(result) = answer.get_mut("result").filter(|result| result.is_object()) else {
            return text;
        };
        match pending {
            Pending::Initialize => {
                if result["protocolVersion"] != REVISION {
                    self.on.store(false, Ordering::Release);
                    return text;
                }
                result["capabilities"]["tasks"] = json!({
                    "list": {},
                    "cancel": {},
                    "requests": {"tools": {"call": {}}},
                });
            }
            Pending::ToolsList => {
                let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) else {
                    return text;
                };
                for tool in tools {
                    if tool["name"] == crate::own_tools::EXECUTE_CODE {
                        tool["execution"] = json!({"taskSupport": "optional"});
                    }
                }
            }
            Pending::Call(None) => return text,
            Pending::Call(Some(task)) => {
                *result = json!({
                    "task": task,
                    "_meta": {
                        "io.modelcontextprotocol/model-immediate-response":
                            "The program runs as a task; its result comes with tasks/result.",
                    },
                });
            }
        }
        answer.to_string()
    }
}

/// The session a 2025-11-25 task was started in.
pub struct Requestor {
    pub legacy: Arc<LegacyTasks>,
    pub tasks: Arc<ExecutionTasks>,
    pub peer: Peer<RoleServer>,
    /// The call's progress token's notifications, if it had one.
    pub progress: Option<Arc<dyn execute::Progress>>,
}

impl super::tasks::Requestor for Requestor {
    fn asker(&self, task: &str) -> Arc<dyn Asker> {
        let session = SessionAsker::of(&self.peer).map(|asker| asker.for_task(task.to_owned()));
        Arc::new(Asking {
            session,
            legacy: self.legacy.clone(),
            task: task.to_owned(),
        })
    }

    fn progress(&self) -> Option<Arc<dyn execute::Progress>> {
        self.progress.clone()
    }

    fn ended(&self, task: &str) -> BoxFuture<'static, ()> {
        if let Ok(mut asking) = self.legacy.asking.lock() {
            asking.remove(task);
        }
        let status = self.legacy.task(&self.tasks, task);
        let peer = self.peer.clone();
        Box::pin(async move {
            let Some(status) = status else {
                return;
            };
            let notification = CustomNotification::new("notifications/tasks/status", Some(status));
            let _ = peer
                .send_notification(ServerNotification::CustomNotification(notification))
                .await;
        })
    }
}

/// A task's questions, put to its session; the task is `input_required` while one waits.
struct Asking {
    session: Option<SessionAsker>,
    legacy: Arc<LegacyTasks>,
    task: String,
}

impl Asker for Asking {
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>> {
        let Some(session) = &self.session else {
            return Box::pin(std::future::ready(Err(
                "the session that started the task is gone".to_owned(),
            )));
        };
        let asked = session.ask(question);
        let waiting = Waiting::start(self.legacy.clone(), self.task.clone());
        Box::pin(async move {
            let answer = asked.await;
            drop(waiting);
            answer
        })
    }
}

/// A question waiting, counted against its task until answered (or abandoned).
struct Waiting {
    legacy: Arc<LegacyTasks>,
    task: String,
}

impl Waiting {
    fn start(legacy: Arc<LegacyTasks>, task: String) -> Self {
        if let Ok(mut asking) = legacy.asking.lock() {
            *asking.entry(task.clone()).or_default() += 1;
        }
        Waiting { legacy, task }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Ok(mut asking) = self.legacy.asking.lock()
            && let Some(count) = asking.get_mut(&self.task)
        {
            *count = count.saturating_sub(1);
            if *count == 0 {
                asking.remove(&self.task);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn incoming(legacy: &LegacyTasks, message: Value) -> Rewritten {
        legacy.incoming(&message.to_string())
    }

    fn same(rewritten: Rewritten) -> bool {
        matches!(rewritten, Rewritten::Same)
    }

    /// A session that agreed on 2025-11-25.
    fn agreed() -> LegacyTasks {
        let legacy = LegacyTasks::default();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                          "params": {"protocolVersion": REVISION, "capabilities": {}}});
        assert!(same(incoming(&legacy, init)));
        let id = RequestId::Number(0);
        assert!(legacy.rewrites(&id));
        let answer = json!({"jsonrpc": "2.0", "id": 0,
                            "result": {"protocolVersion": REVISION, "capabilities": {"tools": {}}}});
        let answer: Value =
            serde_json::from_str(&legacy.outgoing(&id, answer.to_string())).unwrap();
        assert!(legacy.on());
        assert_eq!(
            answer["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            json!({})
        );
        assert_eq!(answer["result"]["capabilities"]["tools"], json!({}));
        legacy
    }

    #[test]
    fn only_a_session_that_agreed_on_the_revision_has_its_tasks() {
        // A session that began otherwise (2026-07-28 has no `initialize`) never has them.
        let legacy = LegacyTasks::default();
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                          "params": {"name": "list_directory", "task": {}}});
        assert!(same(incoming(&legacy, call)));
        let get = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get",
                         "params": {"taskId": "x"}});
        assert!(same(incoming(&legacy, get.clone())));
        let init = json!({"jsonrpc": "2.0", "id": 3, "method": "initialize",
                          "params": {"protocolVersion": REVISION}});
        assert!(same(incoming(&legacy, init)));
        assert!(!legacy.on() && !legacy.rewrites(&RequestId::Number(3)));
        assert!(same(incoming(&legacy, get)));

        // Asked for the revision, answered with another: off.
        let legacy = LegacyTasks::default();
        let init = json!({"jsonrpc": "2.0", "id": "i", "method": "initialize",
                          "params": {"protocolVersion": REVISION}});
        assert!(same(incoming(&legacy, init)));
        let id = RequestId::String("i".into());
        let answer = json!({"jsonrpc": "2.0", "id": "i",
                            "result": {"protocolVersion": "2025-06-18", "capabilities": {}}});
        let text = answer.to_string();
        assert_eq!(legacy.outgoing(&id, text.clone()), text);
        assert!(!legacy.on());
        assert!(!legacy.rewrites(&id));
    }

    #[test]
    fn an_agreed_session_has_its_requests_renamed_and_answers_rewritten() {
        let legacy = agreed();
        let get = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get",
                         "params": {"taskId": "x"}});
        let Rewritten::Message(renamed) = incoming(&legacy, get) else {
            panic!("not renamed");
        };
        let renamed: Value = serde_json::from_str(&renamed).unwrap();
        assert_eq!(renamed["method"], format!("{METHOD_PREFIX}tasks/get"));
        assert_eq!(renamed["params"]["taskId"], "x");

        // Another tool as a task: -32601, with the request's id.
        let other = json!({"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                           "params": {"name": "list_directory", "task": {"ttl": 5}}});
        let Rewritten::Answer(refused) = incoming(&legacy, other) else {
            panic!("not refused");
        };
        let refused: Value = serde_json::from_str(&refused).unwrap();
        assert_eq!(refused["id"], "c");
        assert_eq!(refused["error"]["code"], -32601);

        // `task` only in the program's text is no task.
        let quoted = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                            "params": {"name": "execute_code",
                                       "arguments": {"code": "export default {\"task\": 1}"}}});
        assert!(same(incoming(&legacy, quoted)));
        assert!(!legacy.augmented(&RequestId::Number(3)));
        // Nor is a `task` of null.
        let null = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                          "params": {"name": "list_directory", "task": null}});
        assert!(same(incoming(&legacy, null)));

        let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                          "params": {"name": "execute_code", "arguments": {"code": "1"},
                                     "task": {"ttl": 1000}}});
        assert!(same(incoming(&legacy, call)));
        let id = RequestId::Number(4);
        assert!(legacy.augmented(&id));
        legacy.created(&id, json!({"taskId": "t1", "status": "working"}));
        let placeholder = json!({"jsonrpc": "2.0", "id": 4, "result": {"content": []}});
        let answer: Value =
            serde_json::from_str(&legacy.outgoing(&id, placeholder.to_string())).unwrap();
        assert_eq!(answer["result"]["task"]["taskId"], "t1");
        assert!(answer["result"].get("content").is_none());
        // Answered once: the next answer with that id is left alone.
        assert!(!legacy.rewrites(&id));

        let list = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"});
        assert!(same(incoming(&legacy, list)));
        let id = RequestId::Number(5);
        let tools = json!({"jsonrpc": "2.0", "id": 5, "result": {"tools": [
            {"name": "read_file"}, {"name": crate::own_tools::EXECUTE_CODE}
        ]}});
        let answer: Value = serde_json::from_str(&legacy.outgoing(&id, tools.to_string())).unwrap();
        assert!(answer["result"]["tools"][0].get("execution").is_none());
        assert_eq!(
            answer["result"]["tools"][1]["execution"]["taskSupport"],
            "optional"
        );
        // An error answer to a recorded request passes as it is.
        let list = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"});
        assert!(same(incoming(&legacy, list)));
        let error = json!({"jsonrpc": "2.0", "id": 6, "error": {"code": -1, "message": "m"}});
        let text = error.to_string();
        assert_eq!(legacy.outgoing(&RequestId::Number(6), text.clone()), text);
    }

    #[test]
    fn a_failed_tasks_error_keeps_its_data_and_names_the_task() {
        let data = json!({"server": "t", "detail": 1});
        let error = ErrorData::internal_error("boom", Some(data));
        let Err(answered) = result("t1", TaskOutcome::Error(error)) else {
            panic!("an error answered as a result");
        };
        let data = answered.data.unwrap();
        assert_eq!(data["server"], "t");
        assert_eq!(data["_meta"][RELATED_TASK_META]["taskId"], "t1");
        let error = ErrorData::internal_error("boom", Some(json!("text")));
        let Err(answered) = result("t1", TaskOutcome::Error(error)) else {
            panic!("an error answered as a result");
        };
        assert_eq!(answered.data, Some(json!("text")));
    }

    #[test]
    fn the_largest_and_deepest_messages_are_read_without_building_them() {
        let legacy = agreed();
        // 8 MiB of program, `"task` all through it: the call is a task, read once.
        let code = "const o = {\"task\": 1};\n".repeat(8 << 20 >> 5);
        let call = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                          "params": {"name": "execute_code", "arguments": {"code": code},
                                     "task": {}}});
        assert!(same(incoming(&legacy, call)));
        assert!(legacy.augmented(&RequestId::Number(9)));
        // Nested past serde_json's limit (128): rmcp refuses it too; nothing here overflows.
        let deep = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":\
             {{\"name\":\"execute_code\",\"task\":{{}},\"arguments\":{{\"code\":{}1{}}}}}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(same(legacy.incoming(&deep)));
        // Skipped here without recursing; rmcp cannot read it and refuses it, and then what was
        // recorded of it is void: a later call under its id is no task.
        legacy.refused();
        assert!(!legacy.augmented(&RequestId::Number(10)));
        assert!(
            legacy.augmented(&RequestId::Number(9)),
            "an earlier message's record stays"
        );
        let deep_get = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tasks/get\",\"params\":\
             {{\"taskId\":\"x\",\"junk\":{}1{}}}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(same(legacy.incoming(&deep_get)));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_has_at_most_so_many_results_waiting() {
        let legacy = Arc::new(agreed());
        let tasks = Arc::new(ExecutionTasks::new(None, None));
        let id = tasks
            .start(
                "o".to_owned(),
                |context| -> rmcp::task_manager::TaskFuture {
                    Box::pin(async move {
                        context.cancelled().await;
                        Err(rmcp::task_manager::TaskExit::Cancelled)
                    })
                },
            )
            .unwrap()
            .task
            .task_id;
        let cancel = CancellationToken::new();
        let result = |legacy: Arc<LegacyTasks>, tasks: Arc<ExecutionTasks>| {
            let (id, cancel) = (id.clone(), cancel.clone());
            async move {
                let params = Some(json!({"taskId": id}));
                legacy
                    .answer(&tasks, "o", "tasks/result", params, cancel)
                    .await
            }
        };
        let waiting: Vec<_> = (0..MAX_WAITING_RESULTS)
            .map(|_| tokio::spawn(result(legacy.clone(), tasks.clone())))
            .collect();
        for _ in 0..1000 {
            if legacy.waiting_results.load(Ordering::Acquire) == MAX_WAITING_RESULTS {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let refused = result(legacy.clone(), tasks.clone()).await.unwrap_err();
        assert!(refused.message.contains("already wait"), "{refused:?}");
        // A `tasks/get` is still answered, and the waits end with their requests.
        let got = legacy
            .answer(
                &tasks,
                "o",
                "tasks/get",
                Some(json!({"taskId": id})),
                cancel.clone(),
            )
            .await
            .unwrap();
        assert_eq!(got["status"], "working");
        cancel.cancel();
        for wait in waiting {
            assert!(wait.await.unwrap().is_err());
        }
        assert_eq!(legacy.waiting_results.load(Ordering::Acquire), 0);
        assert!(
            result(legacy.clone(), tasks.clone()).await.is_err(),
            "cancelled"
        );
    }

    #[test]
    fn what_is_not_json_rpc_is_left_to_rmcp() {
        let legacy = agreed();
        for text in [
            "{\"task",
            "[{\"method\":\"tasks/get\"}]",
            "{\"method\":\"tasks/get\",\"params\":{\"taskId\":\"x\"}}",
            "{\"id\":{},\"method\":\"tasks/get\"}",
        ] {
            assert!(same(legacy.incoming(text)), "{text}");
        }
    }

    #[test]
    fn the_answers_waiting_to_be_rewritten_are_bounded() {
        let legacy = agreed();
        for id in 0..(MAX_PENDING as u64 + 10) {
            let list = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
            assert!(same(incoming(&legacy, list)));
        }
        assert!(legacy.pending.lock().unwrap().len() <= MAX_PENDING);
    }

    fn arbitrary_message() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let method = prop_oneof![
            Just("tasks/get".to_owned()),
            Just("tasks/result".to_owned()),
            Just("tasks/list".to_owned()),
            Just("tasks/cancel".to_owned()),
            Just("tools/call".to_owned()),
            Just("tools/list".to_owned()),
            Just("initialize".to_owned()),
            "[a-z/]{0,12}",
        ];
        let id = prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(|id| json!(id)),
            "[a-z0-9]{0,6}".prop_map(Value::String),
            Just(json!({})),
        ];
        let task = prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            Just(Some(json!({}))),
            any::<u32>().prop_map(|ttl| Some(json!({"ttl": ttl}))),
            Just(Some(json!("task"))),
        ];
        let name = prop_oneof![
            Just(crate::own_tools::EXECUTE_CODE.to_owned()),
            "[a-z_\"]{0,10}"
        ];
        (method, id, task, name, "[a-z\"{}:]{0,16}").prop_map(|(method, id, task, name, noise)| {
            let mut params = json!({"name": name, "arguments": {"code": noise}});
            if let Some(task) = task {
                params["task"] = task;
            }
            let mut message = json!({"jsonrpc": "2.0", "method": method, "params": params});
            if !id.is_null() {
                message["id"] = id;
            }
            message
        })
    }

    proptest::proptest! {
        /// Whatever an agreed session sends, a message is left alone, renamed (the four
        /// `tasks/*` requests only, nothing else of them changed) or refused (a task-augmented
        /// call of another tool, with its id); whatever any session sends, nothing panics.
        #[test]
        fn an_agreed_session_s_messages_are_only_renamed_or_refused_as_the_revision_asks(
            message in arbitrary_message(),
            garbage in "[ -~]{0,40}",
        ) {
            let legacy = agreed();
            let fresh = LegacyTasks::default();
            let _ = fresh.incoming(&garbage);
            let _ = legacy.incoming(&garbage);
            let method = message["method"].as_str().unwrap_or_default().to_owned();
            let has_id = serde_json::from_value::<RequestId>(message["id"].clone()).is_ok();
            let task = message["params"].get("task").is_some_and(|task| !task.is_null());
            let other_tool = message["params"]["name"] != crate::own_tools::EXECUTE_CODE;
            match legacy.incoming(&message.to_string()) {
                Rewritten::Same => {
                    let renamed = has_id && method.starts_with("tasks/")
                        && ["get", "result", "list", "cancel"].iter().any(|m| method == format!("tasks/{m}"));
                    proptest::prop_assert!(!renamed, "{message}");
                    proptest::prop_assert!(!(has_id && method == "tools/call" && task && other_tool), "{message}");
                }
                Rewritten::Message(text) => {
                    let renamed: Value = serde_json::from_str(&text).unwrap();
                    let mut expected = message.clone();
                    expected["method"] = json!(format!("{METHOD_PREFIX}{method}"));
                    proptest::prop_assert_eq!(renamed, expected);
                }
                Rewritten::Answer(text) => {
                    let answer: Value = serde_json::from_str(&text).unwrap();
                    proptest::prop_assert!(method == "tools/call" && task && other_tool, "{message}");
                    proptest::prop_assert_eq!(&answer["id"], &message["id"]);
                    proptest::prop_assert_eq!(&answer["error"]["code"], &json!(-32601));
                }
            }
            // Any answer to any id comes out as it went in, or as JSON.
            for id in [RequestId::Number(1), RequestId::String("a".into())] {
                if legacy.rewrites(&id) {
                    let out = legacy.outgoing(&id, garbage.clone());
                    proptest::prop_assert!(out == garbage || serde_json::from_str::<Value>(&out).is_ok());
                }
            }
        }
    }
}
