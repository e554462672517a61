//! Downstream tasks (SEP-2663, `io.modelcontextprotocol/tasks`) handed to clients: a 2026-07-28
//! client's direct call that its server answered with a `CreateTaskResult` gets the task under
//! an id of Runbyte's, and its `tasks/get`, `tasks/update` and `tasks/cancel` go to the server
//! that made the task, on the connection the call went on, with the server's own id.
//!
//! Runbyte's id is random (128 bits) and looked up in a bounded table in the process: the entry
//! names the server, the server's id, the connection's session and the owning client. An id the
//! table does not hold, or one another client owns, is -32602 as an unknown task: one client
//! cannot reach another's task, nor name a task of a server it did not call. The table forgets
//! a task once its server's `ttlMs` has passed twice (the server keeps it no longer), or the
//! oldest when it is full; then its id is unknown. Nothing is kept across restarts.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rmcp::model::{
    CancelTaskParams, CancelTaskRequest, ClientRequest, ErrorData, GetTaskParams, GetTaskRequest,
    GetTaskResult, InputResponses, RequestMetaObject, ServerResult, TASKS_EXTENSION_ID, Task,
    UpdateTaskParams, UpdateTaskRequest,
};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use super::{CLIENT_CAPABILITIES_META, Hub};

/// The most downstream tasks the table holds; a new one past it drops the oldest.
pub const MAX_TASKS: usize = 10_000;

/// How long an entry is kept when its server gave no `ttlMs` (unlimited on its side).
const UNLIMITED_KEEP: Duration = Duration::from_secs(24 * 3600);

/// The longest an entry is kept, whatever the server's `ttlMs`.
const MAX_KEEP: Duration = Duration::from_secs(7 * 24 * 3600);

/// What Runbyte remembers of a downstream task.
#[derive(Debug, Clone)]
struct Entry {
    server: String,
    /// The server's own task id.
    downstream: String,
    /// The client session whose connection the call went on (`share = "session"` servers).
    session: Option<String>,
    /// Who may see the task: the client that made the call.
    owner: String,
    /// The capabilities the client declared for the call, told to the server again on each
    /// task request (2026-07-28 requests carry them).
    capabilities: Option<Value>,
    until: Instant,
}

/// The downstream tasks handed to clients, by Runbyte's id.
#[derive(Debug, Default)]
pub struct Tasks {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    entries: HashMap<String, Entry>,
    /// Ids in the order they were made, for dropping the oldest.
    order: VecDeque<String>,
}

impl Table {
    fn sweep(&mut self, now: Instant) {
        self.entries.retain(|_, entry| entry.until > now);
        let entries = &self.entries;
        self.order.retain(|id| entries.contains_key(id));
    }

    /// Adds an entry; a full table first forgets the expired, then the oldest.
    fn insert(&mut self, id: String, entry: Entry) {
        if self.entries.len() >= MAX_TASKS {
            self.sweep(Instant::now());
        }
        while self.entries.len() >= MAX_TASKS {
            match self.order.pop_front() {
                Some(oldest) => {
                    self.entries.remove(&oldest);
                }
                None => break,
            }
        }
        self.order.push_back(id.clone());
        self.entries.insert(id, entry);
    }
}

/// A task request of a client, by Runbyte's id.
pub enum TaskRequest {
    Get,
    Update(InputResponses),
    Cancel,
}

/// A new id of Runbyte's for a task: 128 random bits, hex.
fn new_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No randomness: a counter mixed with the clock still never repeats in the process.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        bytes[8..].copy_from_slice(&(nanos as u64).to_le_bytes());
    }
    let mut id = String::with_capacity(36);
    id.push_str("rbt-");
    for byte in bytes {
        id.push_str(&format!("{byte:02x}"));
    }
    id
}

/// The error an id nobody (or somebody else) holds gets: the same for both, so an id says
/// nothing about whose it is.
fn unknown(id: &str) -> ErrorData {
    ErrorData::invalid_params(format!("unknown task: {id}"), None)
}

impl Hub {
    /// Takes `task`, which `server` made for a call `owner` made on the connection of
    /// `session`, under a new id of Runbyte's, which replaces the server's in `task`.
    pub fn adopt_task(
        &self,
        server: &str,
        session: Option<&str>,
        owner: &str,
        capabilities: Option<Value>,
        task: &mut Task,
    ) {
        let keep = task.ttl_ms.map_or(UNLIMITED_KEEP, |ttl| {
            Duration::from_millis(ttl.saturating_mul(2)).min(MAX_KEEP)
        });
        let id = new_id();
        let entry = Entry {
            server: server.to_owned(),
            downstream: std::mem::replace(&mut task.task_id, id.clone()),
            session: session.map(str::to_owned),
            owner: owner.to_owned(),
            capabilities,
            until: Instant::now() + keep,
        };
        if let Ok(mut table) = self.inner.tasks.table.lock() {
            table.insert(id, entry);
        }
    }

    /// The task `id` of `owner`'s, if the table holds it for them.
    fn task_entry(&self, id: &str, owner: &str) -> Result<Entry, ErrorData> {
        let mut table = self.inner.tasks.table.lock().map_err(|_| unknown(id))?;
        if table
            .entries
            .get(id)
            .is_some_and(|entry| entry.until <= Instant::now())
        {
            table.entries.remove(id);
            table.order.retain(|other| other != id);
        }
        table
            .entries
            .get(id)
            .filter(|entry| entry.owner == owner)
            .cloned()
            .ok_or_else(|| unknown(id))
    }

    /// Sends `request` for task `id` to the server that made it; `tasks/get`'s answer comes
    /// back under Runbyte's id, the others' as their acknowledgement.
    pub async fn task_request(
        &self,
        id: &str,
        owner: &str,
        request: TaskRequest,
    ) -> Result<ServerResult, ErrorData> {
        let entry = self.task_entry(id, owner)?;
        let downstream = entry.downstream.clone();
        let request = match request {
            TaskRequest::Get => {
                ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(downstream)))
            }
            TaskRequest::Update(answers) => ClientRequest::UpdateTaskRequest(
                UpdateTaskRequest::new(UpdateTaskParams::new(downstream, answers)),
            ),
            TaskRequest::Cancel => ClientRequest::CancelTaskRequest(CancelTaskRequest::new(
                CancelTaskParams::new(downstream),
            )),
        };
        let (connection, within) = self
            .answering(&entry.server, entry.session.as_deref())
            .await
            .map_err(|error| ErrorData::internal_error(error.to_string(), None))?;
        let mut capabilities = entry
            .capabilities
            .clone()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        if let Some(map) = capabilities.as_object_mut() {
            let extensions = map.entry("extensions").or_insert_with(|| json!({}));
            if let Some(extensions) = extensions.as_object_mut() {
                extensions
                    .entry(TASKS_EXTENSION_ID)
                    .or_insert_with(|| json!({}));
            }
        }
        let mut meta = RequestMetaObject::default();
        meta.insert(CLIENT_CAPABILITIES_META.to_owned(), capabilities);
        let options = rmcp::service::PeerRequestOptions::no_options().with_meta(meta);
        let peer = connection.service.peer();
        let sending = async {
            peer.send_request_with_option(request, options)
                .await?
                .await_response()
                .await
        };
        let answer = match tokio::time::timeout(within, sending).await {
            Err(_) => {
                return Err(ErrorData::internal_error(
                    format!("{} did not answer within {within:?}", entry.server),
                    None,
                ));
            }
            Ok(Err(ServiceError::McpError(mut error))) => {
                crate::redact::guard().redact_serde(&mut error);
                return Err(error);
            }
            Ok(Err(other)) => {
                return Err(ErrorData::internal_error(
                    format!("{}: {other}", entry.server),
                    None,
                ));
            }
            Ok(Ok(answer)) => answer,
        };
        Ok(match answer {
            ServerResult::GetTaskResult(mut got) => {
                got.task.task.task_id = id.to_owned();
                ServerResult::GetTaskResult(self.guard_task(&entry.server, got))
            }
            other => other,
        })
    }

    /// A task's inlined result, as a direct call's result reaches its client: the secrets it
    /// quotes redacted, its resource URIs those the client reads ([`super::Uris`]).
    fn guard_task(&self, server: &str, mut got: GetTaskResult) -> GetTaskResult {
        if let rmcp::model::TaskPayload::Completed { result } = &mut got.task.payload
            && let Ok(mut parsed) =
                serde_json::from_value::<rmcp::model::CallToolResult>(Value::Object(result.clone()))
        {
            if crate::redact::guard_result(&mut parsed) {
                tracing::warn!(server, "a task's result held a secret; redacted");
            }
            self.uris().in_result(server, &mut parsed);
            if let Ok(Value::Object(guarded)) = serde_json::to_value(parsed) {
                *result = guarded;
            }
        }
        got
    }
}

/// The shortest and longest waits between two polls of a downstream task, whatever its
/// server suggests; [`DEFAULT_POLL`] when it suggests none.
const POLL_RANGE: (Duration, Duration) = (Duration::from_millis(20), Duration::from_secs(5));
const DEFAULT_POLL: Duration = Duration::from_millis(500);

/// A downstream task that a program's call (or a legacy client's direct call) waits for: when
/// dropped before the task ended (the call timed out, the execution ended or was cancelled),
/// the server is told to cancel it.
struct Awaited {
    peer: Option<rmcp::Peer<rmcp::RoleClient>>,
    id: String,
}

impl Awaited {
    fn ended(mut self) {
        self.peer = None;
    }
}

impl Drop for Awaited {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let request = ClientRequest::CancelTaskRequest(CancelTaskRequest::new(
            CancelTaskParams::new(std::mem::take(&mut self.id)),
        ));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.send_request(request).await;
            });
        }
    }
}

/// What waiting for a downstream task came to.
pub(super) enum Awaiting {
    Result(rmcp::model::CallToolResult),
    /// It asked a question nobody could answer, and why (the task is cancelled).
    Unanswered(String),
}

/// Waits for the task `created` that a server answered a call with, polling `tasks/get` at the
/// interval it suggests, answering the questions it parks on by `asker` (`tasks/update`), to
/// its end: its result when it completed, the server's error when it failed, an error saying
/// so when it was cancelled. Bounded by the caller (the call's timeout): dropped before the
/// end, it cancels the task downstream.
pub(super) async fn await_task(
    peer: &rmcp::Peer<rmcp::RoleClient>,
    created: rmcp::model::CreateTaskResult,
    asker: Option<&dyn crate::relay::Asker>,
) -> Result<Awaiting, ServiceError> {
    use rmcp::model::TaskPayload;
    let id = created.task.task_id;
    let awaited = Awaited {
        peer: Some(peer.clone()),
        id: id.clone(),
    };
    let mut interval = created.task.poll_interval_ms;
    let mut answered = std::collections::HashSet::new();
    loop {
        let wait = interval
            .map_or(DEFAULT_POLL, Duration::from_millis)
            .clamp(POLL_RANGE.0, POLL_RANGE.1);
        tokio::time::sleep(wait).await;
        let request =
            ClientRequest::GetTaskRequest(GetTaskRequest::new(GetTaskParams::new(id.clone())));
        let ServerResult::GetTaskResult(got) = peer.send_request(request).await? else {
            return Err(ServiceError::UnexpectedResponse);
        };
        interval = got.task.task.poll_interval_ms.or(interval);
        match got.task.payload {
            TaskPayload::Working => {}
            TaskPayload::InputRequired { input_requests } => {
                let fresh: rmcp::model::InputRequests = input_requests
                    .into_iter()
                    .filter(|(key, _)| !answered.contains(key))
                    .collect();
                if fresh.is_empty() {
                    continue;
                }
                answered.extend(fresh.keys().cloned());
                let answers = match super::answer_questions(Some(fresh), asker).await {
                    Ok(answers) => answers,
                    Err(why) => return Ok(Awaiting::Unanswered(why)),
                };
                let update = ClientRequest::UpdateTaskRequest(UpdateTaskRequest::new(
                    UpdateTaskParams::new(id.clone(), answers),
                ));
                peer.send_request(update).await?;
            }
            TaskPayload::Completed { result } => {
                awaited.ended();
                return serde_json::from_value(Value::Object(result))
                    .map(Awaiting::Result)
                    .map_err(|_| ServiceError::UnexpectedResponse);
            }
            TaskPayload::Failed { error } => {
                awaited.ended();
                let error = serde_json::from_value::<ErrorData>(Value::Object(error))
                    .unwrap_or_else(|_| {
                        ErrorData::internal_error("its task failed without saying why", None)
                    });
                return Err(ServiceError::McpError(error));
            }
            TaskPayload::Cancelled => {
                awaited.ended();
                return Err(ServiceError::McpError(ErrorData::internal_error(
                    "the server cancelled the task the call became",
                    None,
                )));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn entry(owner: &str, until: Instant) -> Entry {
        Entry {
            server: "s".to_owned(),
            downstream: "d".to_owned(),
            session: None,
            owner: owner.to_owned(),
            capabilities: None,
            until,
        }
    }

    #[test]
    fn ids_are_new_each_time_and_unguessably_long() {
        let (a, b) = (new_id(), new_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 32);
    }

    #[test]
    fn the_table_drops_the_oldest_past_its_bound_and_the_expired() {
        let mut table = Table::default();
        let later = Instant::now() + Duration::from_secs(60);
        for n in 0..MAX_TASKS + 2 {
            table.insert(format!("t{n}"), entry("a", later));
        }
        assert_eq!(table.entries.len(), MAX_TASKS);
        assert!(!table.entries.contains_key("t0") && !table.entries.contains_key("t1"));
        assert!(table.entries.contains_key(&format!("t{}", MAX_TASKS + 1)));
        // Full again, with one expired: it goes, not the oldest.
        let newest = table.order.pop_back().unwrap();
        table.entries.remove(&newest);
        table
            .entries
            .insert("gone".to_owned(), entry("a", Instant::now()));
        table.order.push_front("gone".to_owned());
        let oldest = table.order[1].clone();
        table.insert("new".to_owned(), entry("a", later));
        assert!(!table.entries.contains_key("gone"));
        assert!(table.entries.contains_key(&oldest));
        assert_eq!(table.order.len(), table.entries.len());
    }
}
