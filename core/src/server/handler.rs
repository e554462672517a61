//! The MCP server logic every listener serves: Runbyte's own tools.

// MCP logging (`logging/setLevel`, `notifications/message`) is deprecated from the 2026-07-28
// revision (SEP-2577); legacy sessions (up to 2025-11-25) have it.
#![allow(deprecated)]

use std::{
    collections::HashSet,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams,
        CompleteResult, ContentBlock, CustomRequest, CustomResult, ErrorCode,
        GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams, GetSkillResult,
        Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
        ListSkillsResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
        PaginatedRequestParams, ProgressNotificationParam, ProgressToken,
        ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference,
        ResourceContents, ResultType, ServerCapabilities, ServerConfig, SetLevelRequestParams,
        SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
    },
    service::{RequestContext, SubscriptionContext},
};
use serde_json::{Value, json};

use crate::{
    execute::{self, Retry},
    gateway::Gateway,
    relay::{Asker, SessionAsker},
    telemetry::{self, Parent},
};

use crate::own_tools::{
    self as tools, ExecuteCode, ListDirectory, NotOwn, OwnTool, ReadFile, SaveSkill, SearchTools,
};

/// One client session's server.
#[derive(Clone)]
pub struct Session {
    gateway: Arc<Gateway>,
    session: String,
    /// The transport whose listener the client came through (`stdio`, `http`).
    listener: Arc<str>,
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
    /// The resources this (legacy) session subscribed to with `resources/subscribe`, by
    /// Runbyte's URI.
    subscriptions: Arc<Mutex<HashSet<String>>>,
    /// How many resources this session's open `subscriptions/listen` requests follow.
    listening: Arc<AtomicUsize>,
    /// Whose turn a 2026-07-28 execution waits for in the sandbox's admission (see
    /// [`fairness_key`]): each such execution is a session of its own, so without this one
    /// client's flood would be many clients.
    fairness: Arc<str>,
    /// Tasks as 2025-11-25 has them, if the session agreed on that revision.
    legacy_tasks: Arc<super::legacy_tasks::LegacyTasks>,
}

/// Resources a listen follows, counted against its session's bound until it ends.
struct Following {
    count: usize,
    listening: Arc<AtomicUsize>,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.listening.fetch_sub(self.count, Ordering::SeqCst);
    }
}

/// The fairness key of a connection's 2026-07-28 executions: over a network, the peer's
/// address without the port (each HTTP request may come on a connection of its own, and the
/// listener's one bearer token names no one); over stdio (one client) the connection.
pub fn fairness_key(peer: &str, session: &str) -> String {
    match peer.parse::<std::net::SocketAddr>() {
        Ok(address) => format!("peer {}", address.ip()),
        Err(_) => format!("session {session}"),
    }
}

/// The severity order of MCP log levels, lowest first.
#[allow(deprecated)]
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl Session {
    /// The server for one client session.
    /// The server for one client session, whose client connected from `peer`.
    pub fn new(gateway: Arc<Gateway>, session: String, listener: Arc<str>, peer: &str) -> Self {
        Session {
            gateway,
            fairness: fairness_key(peer, &session).into(),
            session,
            listener,
            log_level: Arc::new(Mutex::new(None)),
            subscriptions: Arc::default(),
            listening: Arc::default(),
            legacy_tasks: Arc::default(),
        }
    }

    /// The session's 2025-11-25 tasks, which its transport rewrites the messages of.
    pub fn with_legacy_tasks(self, legacy_tasks: Arc<super::legacy_tasks::LegacyTasks>) -> Self {
        Session {
            legacy_tasks,
            ..self
        }
    }

    /// Who owns a legacy session's tasks: the session.
    fn session_owner(&self) -> String {
        format!("session {}", self.session)
    }

    /// Who owns the tasks this client's calls make, and alone may see them: a legacy session
    /// itself; a 2026-07-28 client (a session per request) by its [`fairness_key`], its
    /// address over a network (the listener's one token names no one), the connection over
    /// stdio. The task ids are unguessable besides.
    fn task_owner(&self, context: &RequestContext<RoleServer>) -> String {
        match SessionAsker::of(&context.peer) {
            Some(_) => self.session_owner(),
            None => self.fairness.to_string(),
        }
    }

    /// Before the gateway's first round of connections is done, waits for it (each server
    /// ready or failed), at most the longest of the servers' init timeouts and never more than
    /// [`LIST_WAIT`]: a client that lists once, right after connecting, sees the tools,
    /// resources and prompts of servers that take a moment to start. Once the round is done
    /// this returns at once.
    async fn settle(&self) {
        let longest = self
            .gateway
            .config()
            .enabled_servers()
            .map(|(_, server)| {
                server.init_timeout_ms.map_or(
                    crate::hub::DEFAULT_INIT_TIMEOUT,
                    std::time::Duration::from_millis,
                )
            })
            .max()
            .unwrap_or_default();
        let _ = tokio::time::timeout(longest.min(LIST_WAIT), self.gateway.ready()).await;
    }

    /// Holds `count` more of the session's [`MAX_SESSION_SUBSCRIPTIONS`] for a listen, until
    /// the guard is dropped; an error when they are not free.
    fn follow(&self, count: usize) -> Result<Following, ErrorData> {
        let legacy = self.subscriptions.lock().map_or(0, |held| held.len());
        let mut now = self.listening.load(Ordering::SeqCst);
        loop {
            if legacy + now + count > MAX_SESSION_SUBSCRIPTIONS {
                return Err(too_many_subscriptions(""));
            }
            match self.listening.compare_exchange(
                now,
                now + count,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => {
                    return Ok(Following {
                        count,
                        listening: self.listening.clone(),
                    });
                }
                Err(changed) => now = changed,
            }
        }
    }

    /// Whether the session subscribed to the resource at Runbyte's `uri`.
    pub fn is_subscribed(&self, uri: &str) -> bool {
        self.subscriptions
            .lock()
            .is_ok_and(|subscribed| subscribed.contains(uri))
    }

    /// The session ended: its resource subscriptions end with it.
    pub async fn end(&self) {
        let uris: Vec<String> = self
            .subscriptions
            .lock()
            .map(|mut subscribed| subscribed.drain().collect())
            .unwrap_or_default();
        for uri in uris {
            let _ = self.gateway.hub().unsubscribe_resource(&uri).await;
        }
        // Its 2025-11-25 tasks: no one can fetch them now.
        if self.legacy_tasks.on() {
            let cancelled = self.gateway.tasks().cancel_owned_by(&self.session_owner());
            if cancelled > 0 {
                tracing::info!(
                    session = %crate::logging::session_tag(&self.session),
                    "the session ended: {cancelled} of its tasks cancelled"
                );
            }
        }
    }

    /// Sends the client a log message, if it asked for messages of this level
    /// (`logging/setLevel`); nothing is sent before it asks.
    #[allow(deprecated)]
    pub async fn log(&self, peer: &rmcp::Peer<RoleServer>, level: LoggingLevel, message: String) {
        let wanted = self.log_level.lock().ok().and_then(|l| *l);
        let Some(wanted) = wanted else { return };
        if severity(level) < severity(wanted) {
            return;
        }
        let mut params = LoggingMessageNotificationParam::new(level, Value::String(message));
        params.logger = Some("runbyte".to_owned());
        let _ = peer.notify_logging_message(params).await;
    }

    /// Whose values `./state` keeps for this client's programs: a session that lasts across
    /// its requests, which no other client can present. A legacy session is one (its id is
    /// the listener's, unguessable over HTTP); so is a 2026-07-28 client over stdio (the one
    /// connection of this process, its only client). A 2026-07-28 client over a network has
    /// none: each request is a connection of its own, and what it could be known by (its
    /// address, the listener's one bearer token) is shared by every client on its host or
    /// with the token, so keeping for it could hand one client's values to another.
    fn keeps(&self, context: &RequestContext<RoleServer>) -> crate::kept::Owner {
        if SessionAsker::of(&context.peer).is_some() || &*self.listener == "stdio" {
            return crate::kept::Owner::Session(self.session.clone());
        }
        crate::kept::Owner::Refused(format!(
            "a 2026-07-28 client over `{}` has no session that lasts across its requests, and \
             nothing it could be known by (its address, the listener's bearer token) is its \
             alone; keep data within one program, or connect as a 2025-11-25 session (or over \
             stdio)",
            self.listener
        ))
    }

    async fn list_directory(
        &self,
        call: ListDirectory<'_>,
        context: &RequestContext<RoleServer>,
    ) -> Result<String, String> {
        let snapshot = self.gateway.vfs().settled(STARTUP_GRACE).await;
        if crate::vfs::is_state(call.path) {
            let shelf = self.gateway.executor().shelf(&self.keeps(context));
            return snapshot
                .list_state(call.path, call.with_descriptions, &shelf)
                .map_err(|e| e.to_string());
        }
        snapshot
            .list(call.path, call.with_descriptions)
            .map_err(|e| e.to_string())
    }

    async fn read_file(
        &self,
        call: ReadFile<'_>,
        context: &RequestContext<RoleServer>,
    ) -> Result<String, String> {
        let path = call.path.to_owned();
        let snapshot = self.gateway.vfs().settled(STARTUP_GRACE).await;
        if crate::vfs::is_state(&path) {
            let shelf = self.gateway.executor().shelf(&self.keeps(context));
            return snapshot
                .read_state(&path, &shelf)
                .map(|content| content.to_string())
                .map_err(|e| e.to_string());
        }
        // A saved skill is read from disk: on a blocking thread.
        let read = if snapshot.reads_disk(&path) {
            tokio::task::spawn_blocking(move || snapshot.read(&path))
                .await
                .map_err(|e| e.to_string())?
        } else {
            snapshot.read(&path)
        };
        read.map(|content| content.to_string())
            .map_err(|e| e.to_string())
    }

    async fn search_tools(&self, call: SearchTools<'_>) -> Result<String, String> {
        let (query, limit) = (call.query, call.limit());
        let snapshot = self.gateway.vfs().settled(STARTUP_GRACE).await;
        let hits = snapshot.search(query, limit);
        if hits.is_empty() {
            return Ok(format!(
                "No tool matches `{query}`. list_directory('/servers') shows every server."
            ));
        }
        let mut out = String::new();
        for (tool, _) in hits {
            if tool.path.starts_with("/skills/") {
                out.push_str(&format!(
                    "skill {}: {}\n  import {} from './skills/{}';\n  {}\n",
                    tool.name, tool.summary, tool.identifier, tool.name, tool.signature
                ));
                continue;
            }
            let folder = tool
                .path
                .trim_start_matches("/servers/")
                .split('/')
                .next()
                .unwrap_or_default();
            out.push_str(&format!(
                "{}/{}: {}\n  import {{ {} }} from './servers/{folder}';\n  {}\n",
                tool.server, tool.name, tool.summary, tool.identifier, tool.signature
            ));
        }
        Ok(out)
    }

    /// `save_skill`: checks and saves the program, then serves it under `/skills`.
    async fn save_skill(&self, call: SaveSkill<'_>) -> Result<String, String> {
        let request = crate::skills::SaveRequest {
            skill: crate::skills::Skill {
                name: call.name.to_owned(),
                description: call.description.to_owned(),
                code: call.code.to_owned(),
                args: call.args,
            },
            overwrite: call.overwrite,
        };
        let skills = self.gateway.skills().clone();
        let saved = tokio::task::spawn_blocking(move || skills.save(request))
            .await
            .map_err(|e| format!("saving failed: {e}"))??;
        self.gateway.refresh_skills().await;
        Ok(saved)
    }
}

impl Session {
    /// Hands one program to the executor ([`execute::Executor::execute_code`]) with what it
    /// needs of this client: who answers questions (a legacy session; a 2026-07-28 client is
    /// asked with `input_required`, whose retry resumes the execution), where progress goes,
    /// the trace parent and the request's cancellation.
    async fn execute_code(
        &self,
        call: ExecuteCode<'_>,
        retry: Retry,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let code = call.code.to_owned();
        let asker = SessionAsker::of(&context.peer);
        let capabilities = context.client_capabilities().unwrap_or_default();
        let started = |requestor| super::tasks::Started {
            code: code.clone(),
            session: self.session.clone(),
            listener: self.listener.to_string(),
            fairness: self.fairness.to_string(),
            owner: self.task_owner(context),
            keeps: self.keeps(context),
            capabilities: capabilities.clone(),
            parent: Parent::from_meta(&context.meta),
            requestor,
        };
        // A 2025-11-25 session's task-augmented call gets the task at once
        // (`super::legacy_tasks`), and the execution runs on.
        if self.legacy_tasks.augmented(&context.id) {
            let requestor = super::legacy_tasks::Requestor {
                legacy: self.legacy_tasks.clone(),
                tasks: self.gateway.tasks().clone(),
                peer: context.peer.clone(),
                progress: PeerProgress::of(context),
            };
            let started = started(Some(Arc::new(requestor)));
            let Some(created) = super::tasks::start(self.gateway.clone(), started).await else {
                return Err(ErrorData::internal_error(
                    format!(
                        "too many tasks: at most {} run at once, and ended ones are kept for a \
                         while; call again later, or without `task`",
                        execute::MAX_RUNNING_TASKS
                    ),
                    None,
                ));
            };
            let tasks = self.gateway.tasks();
            let task = self.legacy_tasks.task(tasks, &created.task.task_id);
            self.legacy_tasks
                .created(&context.id, task.unwrap_or_default());
            return Ok(CallToolResult::success(Vec::new()).into());
        }
        // A 2026-07-28 client that declared the Tasks extension gets a task at once, and the
        // execution runs on (`super::tasks`).
        if asker.is_none()
            && retry.state.is_none()
            && capabilities.supports_tasks()
            && let Some(created) = super::tasks::start(self.gateway.clone(), started(None)).await
        {
            return Ok(CallToolResponse::Task(created));
        }
        let client = execute::Client {
            session: &self.session,
            listener: Some(&self.listener),
            fairness: &self.fairness,
            keeps: self.keeps(context),
            asker: asker.map(|a| Arc::new(a) as Arc<dyn Asker>),
            capabilities,
            progress: PeerProgress::of(context),
            parent: Parent::from_meta(&context.meta),
            cancel: context.ct.clone(),
        };
        let executor = self.gateway.executor();
        executor.execute_code(code, retry, client).await
    }
}

/// Progress notifications to the client whose request asked for them (its progress token).
struct PeerProgress {
    peer: rmcp::Peer<RoleServer>,
    token: ProgressToken,
}

impl PeerProgress {
    /// Where `context`'s progress goes, when the request carries a progress token.
    fn of(context: &RequestContext<RoleServer>) -> Option<Arc<dyn execute::Progress>> {
        let token = context.meta.get_progress_token()?;
        Some(Arc::new(PeerProgress {
            peer: context.peer.clone(),
            token,
        }))
    }
}

impl execute::Progress for PeerProgress {
    fn tell(&self, seconds: f64, message: String) -> futures::future::BoxFuture<'static, bool> {
        let mut params = ProgressNotificationParam::new(self.token.clone(), seconds);
        params.message = Some(message);
        let peer = self.peer.clone();
        Box::pin(async move { peer.notify_progress(params).await.is_ok() })
    }
}

/// A direct call's progress and log messages, to the client that made it: progress when its
/// request carries a progress token, log messages from the level it asked for (a legacy
/// session by `logging/setLevel`, a 2026-07-28 request in its `_meta`); nothing it did not ask for.
#[allow(deprecated)]
struct PeerNotices {
    peer: rmcp::Peer<RoleServer>,
    token: Option<ProgressToken>,
    level: Option<LoggingLevel>,
}

#[allow(deprecated)]
impl PeerNotices {
    fn of(
        context: &RequestContext<RoleServer>,
        session_level: &Mutex<Option<LoggingLevel>>,
    ) -> Self {
        let level = if context.peer.peer_info().is_some() {
            session_level.lock().ok().and_then(|level| *level)
        } else {
            context
                .meta
                .get(crate::hub::LOG_LEVEL_META)
                .and_then(|level| serde_json::from_value(level.clone()).ok())
        };
        PeerNotices {
            peer: context.peer.clone(),
            token: context.meta.get_progress_token(),
            level,
        }
    }
}

#[allow(deprecated)]
impl crate::relay::Notices for PeerNotices {
    fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> futures::future::BoxFuture<'static, ()> {
        let Some(token) = self.token.clone() else {
            return Box::pin(async {});
        };
        let mut params = ProgressNotificationParam::new(token, progress);
        params.total = total;
        params.message = message;
        let peer = self.peer.clone();
        Box::pin(async move {
            let _ = peer.notify_progress(params).await;
        })
    }

    fn log(
        &self,
        message: LoggingMessageNotificationParam,
    ) -> futures::future::BoxFuture<'static, ()> {
        let wanted = self
            .level
            .is_some_and(|wanted| severity(message.level) >= severity(wanted));
        if !wanted {
            return Box::pin(async {});
        }
        let peer = self.peer.clone();
        Box::pin(async move {
            let _ = peer.notify_logging_message(message).await;
        })
    }

    fn log_level(&self) -> Option<LoggingLevel> {
        self.level
    }
}

/// How long after start the VFS tools wait for servers still starting: what is about to be
/// ready is shown ready, and a server that takes longer delays no one (its folder says
/// "starting").
const STARTUP_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// The longest `tools/list`, `resources/list`, `resources/templates/list` and `prompts/list`
/// wait for the servers' first round of connections (see `Session::settle`); a server slower
/// than that is listed once it is ready, and clients are told (`list_changed`).
const LIST_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The most resources one session follows, through `resources/subscribe` (legacy) and every
/// `subscriptions/listen` it holds open together: each is a downstream subscription and an
/// entry in the Hub, so a client cannot grow them without bound (the Hub bounds them over every
/// client too: [`crate::hub::MAX_SUBSCRIPTIONS`]).
const MAX_SESSION_SUBSCRIPTIONS: usize = 64;

/// The error past [`MAX_SESSION_SUBSCRIPTIONS`].
fn too_many_subscriptions(uri: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_PARAMS,
        format!(
            "this session holds {MAX_SESSION_SUBSCRIPTIONS} resource subscriptions, the most it \
             may (resources/subscribe and subscriptions/listen together); unsubscribe from one, \
             or end a listen, first"
        ),
        Some(json!({"uri": uri})),
    )
}

/// A resource or prompt request's failure, as the JSON-RPC error a client gets: -32602 (with
/// the URI) for what does not exist, -32603 for a server that failed.
fn catalog_error(error: crate::hub::CatalogError, uri: Option<&str>) -> ErrorData {
    let code = if error.is_not_found() {
        ErrorCode::INVALID_PARAMS
    } else {
        ErrorCode::INTERNAL_ERROR
    };
    ErrorData::new(code, error.to_string(), uri.map(|uri| json!({"uri": uri})))
}

/// Where the page a list request asks for starts: 0 without a cursor; -32602 for a cursor
/// Runbyte did not give.
/// A completion's reference names no prompt or template Runbyte serves: -32602 saying why.
fn invalid_reference(why: String, reference: &Reference) -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_PARAMS,
        why,
        serde_json::to_value(reference)
            .ok()
            .map(|reference| json!({ "ref": reference })),
    )
}

fn page_offset(request: Option<&PaginatedRequestParams>) -> Result<usize, ErrorData> {
    match request.and_then(|r| r.cursor.as_deref()) {
        None => Ok(0),
        Some(cursor) => crate::hub::offset(cursor).ok_or_else(|| {
            ErrorData::new(
                ErrorCode::INVALID_PARAMS,
                "invalid cursor: pass the `nextCursor` of the previous page as it was given",
                Some(json!({"cursor": cursor.chars().take(128).collect::<String>()})),
            )
        }),
    }
}

impl ServerHandler for Session {
    // Logging is deprecated from 2026-07-28 (SEP-2577); the revisions Runbyte serves have it.
    /// The handshake; when the servers could all be listed directly without Runbyte's own
    /// tools (see `crate::gateway::auto`), it first waits as `tools/list` does for them, so
    /// that the instructions match the listing.
    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        if self.gateway.config().may_list_alone() {
            self.settle().await;
            self.gateway.lists_alone().await;
        }
        self.negotiate_initialize(&request)
    }

    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        // `listChanged`: the session forwards a downstream server's tool changes, so a client
        // knows to look at /servers again. Resources and prompts are the downstream servers',
        // gathered (see `crate::hub::catalog`), with their changes and resource subscriptions.
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_logging()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_resources_subscribe()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_completions()
            .enable_skills()
            .build();
        // MCP Apps (SEP-1865): the servers' UI resources and their tools' `_meta` pass through.
        // Tasks (SEP-2663): a server's task answering a direct call passes through, and the
        // client's task requests reach that server (`super::tasks`).
        let extensions = capabilities.extensions.get_or_insert_with(Default::default);
        extensions.insert(
            crate::hub::APPS_EXTENSION.to_owned(),
            crate::hub::apps_capability(),
        );
        extensions.insert(
            rmcp::model::TASKS_EXTENSION_ID.to_owned(),
            Default::default(),
        );
        let mut info = ServerConfig::new(capabilities);
        info.server_info = Implementation::new("runbyte", env!("CARGO_PKG_VERSION"));
        info.instructions = (!self.gateway.listed_alone()).then(|| tools::INSTRUCTIONS.to_owned());
        info
    }

    /// List changes of tools, resources and prompts, and updates of resources (by Runbyte's
    /// URIs, each naming a configured server): `subscriptions/listen` (2026-07-28) delivers
    /// those, as the legacy revisions' notifications and `resources/subscribe` do.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        let wanted = |asked: Option<bool>| asked.filter(|wanted| *wanted);
        accepted.tools_list_changed = wanted(requested.tools_list_changed);
        accepted.resources_list_changed = wanted(requested.resources_list_changed);
        accepted.prompts_list_changed = wanted(requested.prompts_list_changed);
        let rule = self.gateway.hub().uris();
        accepted.resource_subscriptions = requested.resource_subscriptions.as_ref().map(|uris| {
            uris.iter()
                .filter(|uri| !rule.targets(uri).is_empty())
                .cloned()
                .collect()
        });
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        use crate::hub::HubEvent;
        use tokio::sync::broadcast::error::RecvError;
        let mut events = self.gateway.hub().subscribe();
        let accepted = context.accepted().clone();
        // The resources listened to are subscribed to downstream while the listen lasts: each
        // one a server lists (or its templates expand to), within the session's bound, or the
        // listen ends with an error naming the one refused.
        let mut seen = HashSet::new();
        let wanted: Vec<String> = accepted
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|uri| seen.insert(uri.as_str()))
            .cloned()
            .collect();
        let _listening = self.follow(wanted.len())?;
        let mut held = Vec::new();
        for uri in wanted {
            match self.gateway.hub().subscribe_resource(&uri).await {
                Ok(()) => held.push(uri),
                Err(error) => {
                    for uri in held {
                        let _ = self.gateway.hub().unsubscribe_resource(&uri).await;
                    }
                    return Err(catalog_error(error, Some(&uri)));
                }
            }
        }
        let on = |flag: Option<bool>| flag == Some(true);
        let outcome = loop {
            let event = tokio::select! {
                () = context.cancelled() => break Ok(()),
                event = events.recv() => event,
            };
            let sink = context.sink();
            let sent = match event {
                Ok(HubEvent::ToolsChanged { .. }) | Err(RecvError::Lagged(_))
                    if on(accepted.tools_list_changed) =>
                {
                    sink.notify_tool_list_changed().await
                }
                Ok(HubEvent::ResourcesChanged { .. }) if on(accepted.resources_list_changed) => {
                    sink.notify_resource_list_changed().await
                }
                Ok(HubEvent::PromptsChanged { .. }) if on(accepted.prompts_list_changed) => {
                    sink.notify_prompt_list_changed().await
                }
                Ok(HubEvent::ResourceUpdated { uri }) if held.contains(&uri) => {
                    sink.notify_resource_updated(uri).await
                }
                Err(RecvError::Closed) => break Ok(()),
                Ok(_) | Err(RecvError::Lagged(_)) => Ok(()),
            };
            if sent.is_err() {
                break Ok(());
            }
        };
        for uri in held {
            let _ = self.gateway.hub().unsubscribe_resource(&uri).await;
        }
        outcome
    }

    /// The downstream servers' resources, with the URIs clients read (see [`crate::hub::Uris`]), then
    /// the saved skills' files, in pages (see [`crate::hub::Gathered::page`]).
    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let offset = page_offset(request.as_ref())?;
        self.settle().await;
        let mut resources = self.gateway.hub().list_resources().await;
        resources.push(crate::hub::Listing::new(self.gateway.skills().resources()));
        let (page, next) = resources.page(offset);
        let mut result = ListResourcesResult::with_all_items(page);
        result.next_cursor = next.map(crate::hub::cursor);
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let offset = page_offset(request.as_ref())?;
        self.settle().await;
        let (page, next) = self
            .gateway
            .hub()
            .list_resource_templates()
            .await
            .page(offset);
        let mut result = ListResourceTemplatesResult::with_all_items(page);
        result.next_cursor = next.map(crate::hub::cursor);
        Ok(result)
    }

    /// Reads a resource from the server its URI names. An unknown URI is -32602 with the URI
    /// (as 2026-07-28 asks; never an empty `contents`); a server's failure is -32603.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if request.uri.starts_with(crate::skills::SKILL_SCHEME) {
            let (skills, uri) = (self.gateway.skills().clone(), request.uri.clone());
            let read = tokio::task::spawn_blocking(move || skills.read_resource(&uri))
                .await
                .ok()
                .flatten();
            return match read {
                Some((text, mime)) => Ok(ReadResourceResult::new(vec![
                    ResourceContents::text(text, request.uri.clone()).with_mime_type(mime),
                ])
                .into()),
                None => Err(ErrorData::new(
                    ErrorCode::INVALID_PARAMS,
                    format!("Resource not found: no saved skill file `{}`", request.uri),
                    Some(json!({"uri": request.uri})),
                )),
            };
        }
        match self
            .gateway
            .hub()
            .read_resource(&request.uri, Some(&self.session))
            .await
        {
            // A legacy server's result has no `resultType`; 2026-07-28 requires it (rmcp drops
            // it again for legacy clients).
            Ok(mut result) => {
                result.result_type = Some(ResultType::COMPLETE);
                Ok(result.into())
            }
            Err(error) => Err(catalog_error(error, Some(&request.uri))),
        }
    }

    #[allow(deprecated)] // resources/subscribe belongs to the legacy revisions Runbyte serves.
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // The URI is held before the downstream subscription is made, so that two requests for
        // it at once subscribe downstream once; a failure lets it go again.
        let reserved = match self.subscriptions.lock() {
            Ok(subscribed) if subscribed.contains(&request.uri) => return Ok(()),
            Ok(subscribed)
                if subscribed.len() + self.listening.load(Ordering::SeqCst)
                    >= MAX_SESSION_SUBSCRIPTIONS =>
            {
                return Err(too_many_subscriptions(&request.uri));
            }
            Ok(mut subscribed) => subscribed.insert(request.uri.clone()),
            Err(_) => false,
        };
        if !reserved {
            return Ok(());
        }
        let subscribed = self.gateway.hub().subscribe_resource(&request.uri).await;
        if let Err(error) = subscribed {
            if let Ok(mut held) = self.subscriptions.lock() {
                held.remove(&request.uri);
            }
            return Err(catalog_error(error, Some(&request.uri)));
        }
        Ok(())
    }

    #[allow(deprecated)] // resources/unsubscribe belongs to the legacy revisions Runbyte serves.
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let held = self
            .subscriptions
            .lock()
            .map(|mut subscribed| subscribed.remove(&request.uri))
            .unwrap_or(false);
        if held {
            let _ = self.gateway.hub().unsubscribe_resource(&request.uri).await;
        }
        Ok(())
    }

    /// The saved skills, as the skills extension (SEP-2640) lists them (all in one page).
    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        Ok(ListSkillsResult::with_all_items(
            self.gateway.skills().mcp_skills(),
        ))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        match self.gateway.skills().mcp_skill_at(&request.uri) {
            Some(skill) => Ok(GetSkillResult::new(skill)),
            None => Err(ErrorData::new(
                ErrorCode::INVALID_PARAMS,
                format!("no saved skill at `{}`", request.uri),
                Some(json!({"uri": request.uri})),
            )),
        }
    }

    /// The downstream servers' prompts, each named with its server's prefix.
    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let offset = page_offset(request.as_ref())?;
        self.settle().await;
        let mut prompts = crate::hub::Gathered::default();
        prompts.push(crate::hub::Listing::new(self.gateway.prompts().await));
        let (page, next) = prompts.page(offset);
        let mut result = ListPromptsResult::with_all_items(page);
        result.next_cursor = next.map(crate::hub::cursor);
        Ok(result)
    }

    async fn get_prompt(
        &self,
        mut request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let target = match self.gateway.prompt_target(&request.name).await {
            Some(Err(why)) => {
                return Err(ErrorData::new(
                    ErrorCode::INVALID_PARAMS,
                    why,
                    Some(json!({"name": request.name})),
                ));
            }
            Some(Ok(target)) => Some(target),
            None => None,
        };
        let Some((server, prompt)) = target else {
            return Err(ErrorData::new(
                ErrorCode::INVALID_PARAMS,
                format!(
                    "unknown prompt `{}`: prompts are named `<server>_<prompt>` (or with the \
                     server's `direct-prefix`), as prompts/list gives them",
                    request.name
                ),
                None,
            ));
        };
        request.name = prompt;
        request.meta = None;
        // A 2026-07-28 client answers the server's questions itself, by retrying; a legacy
        // client is asked.
        let asker = SessionAsker::of(&context.peer).map(|a| Arc::new(a) as Arc<dyn Asker>);
        let through = asker.is_none().then(|| {
            crate::hub::PassThrough::new(
                request.input_responses.take(),
                request.request_state.take(),
                None,
            )
        });
        match self
            .gateway
            .hub()
            .get_prompt(
                &server,
                request,
                Some(&self.session),
                asker,
                through.as_ref(),
            )
            .await
        {
            Ok(GetPromptResponse::Complete(mut result)) => {
                result.result_type = Some(ResultType::COMPLETE);
                Ok(result.into())
            }
            Ok(asked) => Ok(asked),
            Err(error) => Err(catalog_error(error, None)),
        }
    }

    /// `completion/complete` for a downstream prompt (by Runbyte's name for it) or resource
    /// template (by Runbyte's URI for it): asked of its server with the server's own name or
    /// template, and the server's values answered as they are.
    async fn complete(
        &self,
        mut request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let server = match &mut request.r#ref {
            Reference::Prompt(prompt) => {
                let target = self.gateway.prompt_target(&prompt.name).await;
                let (server, name) = match target {
                    Some(Ok(target)) => target,
                    Some(Err(why)) => return Err(invalid_reference(why, &request.r#ref)),
                    None => {
                        let why = format!("unknown prompt `{}`", prompt.name);
                        return Err(invalid_reference(why, &request.r#ref));
                    }
                };
                prompt.name = name;
                server
            }
            Reference::Resource(template) => {
                // The server the URI names, else the one server showing its URIs as they are
                // (with several, which one's template it is cannot be told).
                let targets = self.gateway.hub().uris().targets(&template.uri);
                let target = match targets.as_slice() {
                    [one] => Some(one),
                    [named, ..] if named.named => Some(named),
                    _ => None,
                };
                let Some((server, original)) =
                    target.map(|target| (target.server.clone(), target.uri.clone().into_owned()))
                else {
                    let why = format!(
                        "`{}` is not a resource template Runbyte lists (resources/templates/list \
                         gives them)",
                        template.uri
                    );
                    return Err(invalid_reference(why, &request.r#ref));
                };
                template.uri = original;
                server
            }
            _ => {
                let why = "completion/complete names a reference Runbyte does not know".to_owned();
                return Err(invalid_reference(why, &request.r#ref));
            }
        };
        request.meta = None;
        match self
            .gateway
            .hub()
            .complete(&server, request, Some(&self.session))
            .await
        {
            Ok(mut result) => {
                result.result_type = Some(ResultType::COMPLETE);
                Ok(result)
            }
            Err(error) => Err(catalog_error(error, None)),
        }
    }

    // `logging/setLevel` belongs to the revisions Runbyte serves (deprecated only from 2026-07-28).
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // A 2026-07-28 client (no handshake) asks per request (`_meta` logLevel) instead.
        if context.peer.peer_info().is_none() {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "Method not found: logging/setLevel is not part of MCP 2026-07-28",
                None,
            ));
        }
        if let Ok(mut level) = self.log_level.lock() {
            *level = Some(request.level);
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        self.settle().await;
        let direct = self.gateway.direct_tools().await;
        // With only direct tools worth listing (see `crate::gateway::auto`), Runbyte's own
        // stay callable and unlisted.
        let mut tools = match self.gateway.listed_alone() {
            true => Vec::new(),
            false => tools::tools(),
        };
        tools.extend(direct);
        Ok(ListToolsResult::with_all_items(tools))
    }

    /// `runbyte/metrics` (see [`telemetry::METRICS_METHOD`]): the metrics as OpenMetrics text,
    /// `{"contentType": …, "text": …}`; a method-not-found error when `[telemetry] metrics` is
    /// off, as for any other unknown method.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        // A 2025-11-25 session's `tasks/*`, renamed (`super::legacy_tasks`).
        let legacy = request
            .method
            .strip_prefix(super::legacy_tasks::METHOD_PREFIX)
            .filter(|_| self.legacy_tasks.on());
        if let Some(method) = legacy {
            let tasks = self.gateway.tasks();
            let owner = self.session_owner();
            return self
                .legacy_tasks
                .answer(tasks, &owner, method, request.params, context.ct)
                .await
                .map(CustomResult::new);
        }
        let metrics = self
            .gateway
            .telemetry()
            .metrics()
            .filter(|_| request.method == telemetry::METRICS_METHOD);
        let Some(metrics) = metrics else {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("unknown method `{}`", request.method),
                None,
            ));
        };
        let servers = self.gateway.hub().servers().await;
        let text = metrics.render(
            servers
                .iter()
                .map(|server| (server.name.as_str(), server.status.label())),
        );
        Ok(CustomResult::new(
            json!({"contentType": telemetry::CONTENT_TYPE, "text": text}),
        ))
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let owner = self.task_owner(&context);
        super::tasks::get(&self.gateway, &owner, request).await
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.task_owner(&context);
        super::tasks::update(&self.gateway, &owner, request).await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let owner = self.task_owner(&context);
        super::tasks::cancel(&self.gateway, &owner, request).await
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let retry = Retry {
            state: request.request_state,
            answers: request.input_responses,
        };
        let args = Value::Object(request.arguments.unwrap_or_default());
        let answer = match OwnTool::parse(&request.name, &args) {
            Ok(OwnTool::ListDirectory(call)) => self.list_directory(call, &context).await,
            Ok(OwnTool::ReadFile(call)) => self.read_file(call, &context).await,
            Ok(OwnTool::SearchTools(call)) => self.search_tools(call).await,
            Ok(OwnTool::SaveSkill(call)) => self.save_skill(call).await,
            Ok(OwnTool::ExecuteCode(call)) => {
                return self.execute_code(call, retry, &context).await;
            }
            Err(NotOwn::Arguments(why)) => Err(why.to_string()),
            Err(NotOwn::Unknown)
                if let Some(target) = self.gateway.direct_target(&request.name).await =>
            {
                let target = match target {
                    Ok(target) => target,
                    Err(why) => {
                        return Ok(CallToolResult::error(vec![ContentBlock::text(why)]).into());
                    }
                };
                // Over HTTP, the headers SEP-2243 has mirror the tool's designated arguments.
                let headers = context
                    .meta
                    .get(runbyte_plugin_api::transport::PARAM_HEADERS_META)
                    .and_then(Value::as_object);
                if let Some(headers) = headers
                    && let Some(tool) = self.gateway.direct_tool(&request.name).await
                    && let Err(why) =
                        super::param_headers::check(&tool.input_schema, &args, headers)
                {
                    return Err(ErrorData::new(ErrorCode::HEADER_MISMATCH, why, None));
                }
                let asker = SessionAsker::of(&context.peer).map(|a| Arc::new(a) as Arc<dyn Asker>);
                let mut retry = retry;
                // A retry that answers Runbyte's own question (`execute::direct_ask`): its
                // server never sees that state.
                let ours = retry
                    .state
                    .as_deref()
                    .and_then(|state| state.strip_prefix(execute::direct_ask::STATE_PREFIX))
                    .filter(|_| asker.is_none())
                    .map(str::to_owned);
                let ours = ours.map(|state| {
                    retry.state = None;
                    execute::direct_ask::DirectRetry {
                        state,
                        answers: retry.answers.take(),
                    }
                });
                // A 2026-07-28 client answers its server's questions itself, by retrying.
                let pass_through = asker.is_none().then(|| {
                    let capabilities = context.meta.get(crate::hub::CLIENT_CAPABILITIES_META);
                    Arc::new(crate::hub::PassThrough::new(
                        retry.answers,
                        retry.state,
                        capabilities.cloned(),
                    ))
                });
                let owner = self.task_owner(&context);
                let call = execute::DirectCall {
                    session: &self.session,
                    owner: &owner,
                    listener: Some(&self.listener),
                    asker,
                    target: (&target.0, &target.1),
                    arguments: args,
                    parent: Parent::from_meta(&context.meta),
                    notices: Some(Arc::new(PeerNotices::of(&context, &self.log_level))),
                    pass_through,
                    retry: ours,
                };
                return match self.gateway.executor().direct(call).await {
                    Ok(response) => Ok(response),
                    Err(execute::DirectError::Server(error)) => Err(error),
                    Err(execute::DirectError::Failed(message)) => {
                        Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into())
                    }
                };
            }
            Err(NotOwn::Unknown) => return Err(tools::unknown_tool(&request.name)),
        };
        Ok(match answer {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        }
        .into())
    }
}
