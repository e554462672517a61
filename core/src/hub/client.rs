//! One downstream connection: connecting, the client handler, and calls.

// MCP logging is deprecated from the 2026-07-28 revision (SEP-2577), but the revisions Runbyte
// speaks downstream (up to 2025-11-25) still send `notifications/message`.
#![allow(deprecated)]

use std::{sync::Arc, time::Duration};

use rmcp::{
    ClientHandler, RoleClient,
    model::{
        ClientCapabilities, ClientConfig, ClientRequest, CreateMessageRequest,
        CreateMessageRequestParams, CreateMessageResult, CustomResult, ElicitRequest,
        ElicitRequestParams, ElicitResult, ErrorCode, ErrorData, Implementation, InputRequest,
        ListToolsRequest, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
        ProgressNotificationParam, ProtocolVersion, ResourceUpdatedNotificationParam,
        ServerNotification, ServerResult, SubscriptionFilter, Tool,
    },
    service::{
        ClientInitializeError, ClientLifecycleMode, ClientServiceExt, NotificationContext,
        RequestContext, RunningService,
    },
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{
    config::{Protocol, ServerConfig},
    plugin::{Pump, TransportPlugin},
    pump::{CloseReason, OnGarbage, PumpTransport, TOO_DEEP},
    relay::{Callers, Question},
};

/// The revision `initialize` asks for: the newest one with the handshake.
pub(crate) const LEGACY_REVISION: ProtocolVersion = ProtocolVersion::LATEST_WITH_INITIALIZE;

/// The most pages one listing follows: a server whose cursors never end is cut off there.
const MAX_PAGES: usize = 1000;

/// The shortest time between two listings of a server's tools by its `ttlMs` (see
/// [`Connection::list_due`]): a server saying 1 ms is listed once a second.
pub(super) const MIN_LIST_TTL: std::time::Duration = std::time::Duration::from_secs(1);

/// A server's tools as last listed, with what was wrong with the ones that had to be mended or
/// left out (one line each, naming the tool).
#[derive(Debug, Clone, Default)]
pub struct Listed {
    /// The tools, each usable.
    pub tools: Arc<Vec<Tool>>,
    /// What was mended or left out.
    pub warnings: Arc<Vec<String>>,
    /// The tools the server's `tools` / `exclude-tools` hide, each with the reason.
    pub hidden: Arc<Vec<(String, String)>>,
    /// The tools held by their pins (see [`crate::pins`]), each with why.
    pub held: Arc<Vec<crate::pins::Held>>,
}

/// The client side of one downstream connection: it passes `list_changed` on to the hub and
/// the server's log messages into ours.
#[derive(Clone)]
pub(super) struct HubClient {
    server: String,
    changes: mpsc::UnboundedSender<Change>,
    /// The calls in flight, whose executions answer what the server asks during them.
    callers: Callers,
}

impl HubClient {
    /// Relays a question the server asked during a call, and reads the answer as `T`.
    async fn relay<T: serde::de::DeserializeOwned>(
        &self,
        question: Question,
    ) -> Result<T, ErrorData> {
        let method = crate::relay::method_of(&question);
        let answer = self.callers.ask(question).await.map_err(|why| {
            tracing::warn!(server = %self.server, "cannot relay `{method}`: {why}");
            ErrorData::new(ErrorCode::INTERNAL_ERROR, why, None)
        })?;
        serde_json::from_value(answer).map_err(|error| {
            ErrorData::new(
                ErrorCode::INTERNAL_ERROR,
                format!("the client's answer to `{method}` is not what the spec says: {error}"),
                None,
            )
        })
    }
}

impl ClientHandler for HubClient {
    /// Elicitation and sampling: what a server asks during a call is relayed to the client of
    /// the execution that made it (see [`crate::relay`]).
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::builder()
            .enable_elicitation()
            .enable_sampling()
            .build();
        // MCP Apps: what a server offers a UI-capable host reaches Runbyte's clients.
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(
                super::apps::APPS_EXTENSION.to_owned(),
                super::apps::apps_capability(),
            );
        // Tasks (SEP-2663): a server may answer a call with a task, which the Hub waits for
        // (`super::tasks::await_task`); a direct call's 2026-07-28 client declares its own.
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(
                rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                Default::default(),
            );
        // What `initialize` sends (in `auto` after a refused `server/discover`, and with
        // `protocol = "2025-11-25"`): the newest revision that has the handshake, never
        // 2026-07-28, which a server that echoes the version would make a stateless connection.
        ClientConfig::new(
            capabilities,
            Implementation::new("runbyte", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(LEGACY_REVISION)
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.relay(InputRequest::Elicitation(ElicitRequest::new(request)))
            .await
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.relay(InputRequest::CreateMessage(CreateMessageRequest::new(
            params,
        )))
        .await
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changes.send(Change::Tools(self.server.clone()));
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changes.send(Change::Resources(self.server.clone()));
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.changes.send(Change::Prompts(self.server.clone()));
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self
            .changes
            .send(Change::ResourceUpdated(self.server.clone(), params.uri));
    }

    /// Progress on a call: to the client that made it, by the token it was sent with.
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.callers
            .progress(
                &params.progress_token,
                params.progress,
                params.total,
                params.message,
            )
            .await;
    }

    /// A log message: to the client whose call is in flight, when it asked for them (see
    /// [`Callers::log`]); always to Runbyte's own log.
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.callers.log(&params).await;
        let server = &self.server;
        let data = params.data;
        match params.level {
            LoggingLevel::Debug => tracing::debug!(server, "{data}"),
            LoggingLevel::Info | LoggingLevel::Notice => tracing::info!(server, "{data}"),
            LoggingLevel::Warning => tracing::warn!(server, "{data}"),
            _ => tracing::error!(server, "{data}"),
        }
    }
}

/// What a downstream server said changed, for the Hub to act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Change {
    /// `notifications/tools/list_changed`: its tools are listed again.
    Tools(String),
    /// `notifications/resources/list_changed`.
    Resources(String),
    /// `notifications/prompts/list_changed`.
    Prompts(String),
    /// `notifications/resources/updated` for a resource (the server's own URI).
    ResourceUpdated(String, String),
}

/// A live connection to one downstream server.
pub struct Connection {
    pub(super) service: RunningService<RoleClient, HubClient>,
    pub(super) listed: std::sync::RwLock<Listed>,
    pub(super) reason: CloseReason,
    pump: Pump,
    /// Cancelled by [`Connection::close`]: the connection's own tasks stop.
    pub(super) ended: CancellationToken,
    /// Its calls in flight, for the questions the server asks during them.
    pub(super) callers: Callers,
    /// The server's `tools` and `exclude-tools`.
    filter: super::filter::ToolFilter,
    /// The tool pins each listing is judged by.
    pins: Option<Arc<crate::pins::Pins>>,
    /// The OAuth access token it was opened with, if any (a new token needs a new connection).
    pub(super) bearer: Option<String>,
    /// When its tools are listed again by the `ttlMs` of its last `tools/list`, for a server
    /// that announces no tool changes (see [`Connection::list_due`]).
    relist_at: std::sync::Mutex<Option<(std::time::Instant, std::time::Duration)>>,
    /// Sends its tool calls past rmcp's service loop, where the transport allows it.
    pub(super) sender: Option<crate::pump::Sender<RoleClient>>,
    /// What rmcp stamps on each request of a 2026-07-28 connection, for the calls `sender`
    /// sends.
    pub(super) stamp: Option<Stamp>,
}

/// What rmcp puts in the `_meta` of every request on a 2026-07-28 connection (a stateless
/// revision carries its lifecycle in each request): the revision, and the client's info and
/// capabilities as the discovery sent them.
pub(super) struct Stamp {
    pub protocol_version: rmcp::model::ProtocolVersion,
    pub client_info: rmcp::model::Implementation,
    pub capabilities: rmcp::model::ClientCapabilities,
}

impl Stamp {
    /// The stamp of a connection that speaks a revision without `initialize`.
    fn of(service: &RunningService<RoleClient, HubClient>) -> Option<Stamp> {
        let info = service.peer().peer_info()?;
        if info.protocol_version.has_initialize() {
            return None;
        }
        let client = service.service().get_info();
        Some(Stamp {
            protocol_version: info.protocol_version.clone(),
            client_info: client.client_info,
            capabilities: client.capabilities,
        })
    }
}

impl Connection {
    /// Whether the connection speaks 2026-07-28 (it was opened with `server/discover`).
    pub fn is_stateless(&self) -> bool {
        self.service
            .peer()
            .peer_info()
            .is_some_and(|info| !info.protocol_version.has_initialize())
    }

    /// The MCP revision the connection speaks.
    pub fn protocol(&self) -> Option<String> {
        let info = self.service.peer().peer_info()?;
        Some(info.protocol_version.to_string())
    }

    /// The changes the server said it announces (`listChanged` of tools, resources, prompts),
    /// as the filter a 2026-07-28 `subscriptions/listen` asks for; `None` when it announces none.
    fn announced_changes(&self) -> Option<SubscriptionFilter> {
        let info = self.service.peer().peer_info()?;
        let capabilities = &info.capabilities;
        let mut filter = SubscriptionFilter::new();
        let said = |announced: Option<bool>| (announced == Some(true)).then_some(true);
        filter.tools_list_changed = said(capabilities.tools.as_ref().and_then(|c| c.list_changed));
        filter.resources_list_changed =
            said(capabilities.resources.as_ref().and_then(|c| c.list_changed));
        filter.prompts_list_changed =
            said(capabilities.prompts.as_ref().and_then(|c| c.list_changed));
        let any = [
            filter.tools_list_changed,
            filter.resources_list_changed,
            filter.prompts_list_changed,
        ]
        .iter()
        .any(Option::is_some);
        any.then_some(filter)
    }

    /// Whether the server announces changes of its lists of `kind` (`listChanged`).
    pub(super) fn announces(&self, kind: super::catalog::Kind) -> bool {
        let Some(filter) = self.announced_changes() else {
            return false;
        };
        match kind {
            super::catalog::Kind::Resources => filter.resources_list_changed.is_some(),
            super::catalog::Kind::Prompts => filter.prompts_list_changed.is_some(),
        }
    }

    /// Whether the server offers resources (`true`) and whether it takes `resources/subscribe`.
    pub(super) fn offers_resources(&self) -> (bool, bool) {
        let Some(info) = self.service.peer().peer_info() else {
            return (false, false);
        };
        match &info.capabilities.resources {
            Some(resources) => (true, resources.subscribe == Some(true)),
            None => (false, false),
        }
    }

    /// Whether the server offers prompts.
    pub(super) fn offers_prompts(&self) -> bool {
        self.service
            .peer()
            .peer_info()
            .is_some_and(|info| info.capabilities.prompts.is_some())
    }

    /// Whether its tools are due to be listed again: the server announces no tool changes, its
    /// last `tools/list` said how long it stays fresh (`ttlMs`, SEP-2549; at least
    /// [`MIN_LIST_TTL`]), and that has passed. A due listing is taken: the next one is due a
    /// `ttlMs` later, whether this one succeeds or not (the listing sets it again).
    pub(super) fn list_due(&self, now: std::time::Instant) -> bool {
        let Ok(mut relist_at) = self.relist_at.lock() else {
            return false;
        };
        match *relist_at {
            Some((at, ttl)) if at <= now => {
                *relist_at = Some((now + ttl, ttl));
                true
            }
            _ => false,
        }
    }

    /// Whether the server is still there.
    pub fn is_alive(&self) -> bool {
        !self.service.is_closed() && self.reason.get().is_none()
    }

    /// Why the connection ended ("exited with status 3; stderr: ..."), once it has.
    pub fn close_reason(&self) -> Option<String> {
        self.reason.get()
    }

    /// The tools as last listed.
    pub fn tools(&self) -> Arc<Vec<Tool>> {
        self.listed().tools
    }

    /// The tools as last listed, with the warnings about them.
    pub fn listed(&self) -> Listed {
        self.listed
            .read()
            .map(|listed| listed.clone())
            .unwrap_or_default()
    }

    /// Lists the tools again (following pagination) and keeps the answer. Each tool is read on
    /// its own: one whose `inputSchema` is missing, null, not an object or too deep is served
    /// untyped, one that cannot be read at all is left out, each with a warning.
    pub async fn relist(&self) -> Result<Listed, String> {
        let mut tools = Vec::new();
        let mut warnings = Vec::new();
        let mut cursor = None;
        // The shortest `ttlMs` above 0 of its pages.
        let mut ttl: Option<u64> = None;
        let mut fresh_for = |page_ttl: Option<u64>| {
            if let Some(page_ttl) = page_ttl.filter(|ttl| *ttl > 0) {
                ttl = Some(ttl.map_or(page_ttl, |ttl| ttl.min(page_ttl)));
            }
        };
        for _ in 0..MAX_PAGES {
            let request = ClientRequest::ListToolsRequest(ListToolsRequest {
                method: Default::default(),
                params: Some(PaginatedRequestParams::default().with_cursor(cursor)),
                extensions: Default::default(),
            });
            let answer = self
                .service
                .peer()
                .send_request(request)
                .await
                .map_err(|e| e.to_string())?;
            cursor = match answer {
                ServerResult::ListToolsResult(page) => {
                    fresh_for(page.ttl_ms);
                    tools.extend(page.tools);
                    page.next_cursor
                }
                // Not a valid list as a whole (rmcp reads it strictly): tool by tool.
                ServerResult::CustomResult(CustomResult(page)) => {
                    fresh_for(page.get("ttlMs").and_then(Value::as_u64));
                    read_page(&page, &mut tools, &mut warnings)?
                }
                _ => return Err("the answer to `tools/list` holds no tools".to_owned()),
            };
            if cursor.is_none() {
                break;
            }
        }
        for warning in &warnings {
            tracing::warn!(server = %self.service.service().server, "{warning}");
        }
        let mut hidden = Vec::new();
        tools.retain(|tool| match self.filter.hides(&tool.name) {
            // Programs read resources through this name (see `crate::hub::READ_RESOURCE`).
            None if tool.name == super::READ_RESOURCE => {
                hidden.push((
                    tool.name.to_string(),
                    "its name is the one programs read resources by".to_owned(),
                ));
                false
            }
            Some(why) => {
                hidden.push((tool.name.to_string(), why));
                false
            }
            None => true,
        });
        let (tools, held) = match &self.pins {
            Some(pins) => {
                let server = &self.service.service().server;
                pins.fetch(server).await;
                let judged = pins.judge(server, tools);
                pins.push(server).await;
                judged
            }
            None => (tools, Vec::new()),
        };
        let listed = Listed {
            tools: Arc::new(tools),
            warnings: Arc::new(warnings),
            hidden: Arc::new(hidden),
            held: Arc::new(held),
        };
        if let Ok(mut slot) = self.listed.write() {
            *slot = listed.clone();
        }
        let announces = self
            .announced_changes()
            .is_some_and(|filter| filter.tools_list_changed.is_some());
        if let Ok(mut relist_at) = self.relist_at.lock() {
            *relist_at = ttl.filter(|_| !announces).map(|ttl| {
                let ttl = std::time::Duration::from_millis(ttl).max(MIN_LIST_TTL);
                (std::time::Instant::now() + ttl, ttl)
            });
        }
        Ok(listed)
    }

    /// Ends the connection: the service stops and the transport closes the pump (a child process
    /// is stopped, an HTTP session deleted).
    pub async fn close(&self) {
        self.ended.cancel();
        self.service.cancellation_token().cancel();
        let pump = self.pump.clone();
        let _ = tokio::task::spawn_blocking(move || pump.close()).await;
    }
}

/// Why a connection that was being opened when the gateway stopped was not kept.
pub(super) const STOPPED: &str = "Runbyte is shutting down";

/// What the transport plugin is told to connect to: the server's table, plus its name.
fn target(name: &str, config: &ServerConfig, fallback: bool) -> serde_json::Value {
    json!({
        "name": name,
        "command": config.command,
        "args": config.args,
        "env": config.env,
        "cwd": config.cwd,
        "url": config.url,
        "headers": config.headers,
        "fallback": if fallback { Some("sse") } else { None },
        "max-message-bytes": config.max_message_bytes,
    })
}

/// Opens a connection: the transport's pump, the MCP handshake (or `server/discover`), the first
/// `tools/list`, and for a 2026-07-28 server that announces tool-list changes a
/// `subscriptions/listen` that passes them on.
#[allow(
    clippy::too_many_arguments,
    reason = "each is one of the Hub's parts a connection needs"
)]
pub(super) async fn connect(
    name: &str,
    config: &ServerConfig,
    transport: TransportPlugin,
    fallback: bool,
    init_timeout: Duration,
    changes: mpsc::UnboundedSender<Change>,
    stop: &CancellationToken,
    pins: Option<&Arc<crate::pins::Pins>>,
) -> Result<Connection, String> {
    let opening = Opening {
        name,
        config,
        pins,
        fallback,
        init_timeout,
        changes: &changes,
        stop,
    };
    match opening.open(transport.clone(), config.protocol).await {
        // `server/discover` was not answered with a usable discover result (no common
        // revision, an empty `{}` or another result, an error of any code, the server closing
        // on it): the handshake may still work, on a fresh connection since the first one is
        // spent. When that fails too, both reasons are told.
        Err(Failed::NotDiscovered(why)) if config.protocol == Protocol::Auto => {
            tracing::info!(server = name, "{why}; trying `initialize`");
            opening
                .open(transport, Protocol::Handshake)
                .await
                .map_err(|failed| format!("{why}; then {}", failed.into_message()))
        }
        other => other.map_err(Failed::into_message),
    }
}

/// Why a connection could not be opened.
enum Failed {
    /// `server/discover` got an answer that is not a discover result Runbyte can use (and the
    /// server did not take the `initialize` that followed on the same connection).
    NotDiscovered(String),
    Other(String),
}

impl Failed {
    fn into_message(self) -> String {
        match self {
            Failed::NotDiscovered(why) | Failed::Other(why) => why,
        }
    }
}

/// Whether a failed `auto` opening is worth a fresh one with `initialize` alone: the server
/// answered `server/discover` (or ended on it) with something other than a discover result
/// Runbyte can use. Only a cancelled opening, or a handshake that failed after the fallback on
/// the same connection (already tried), is not.
fn worth_handshake(error: &ClientInitializeError) -> bool {
    !matches!(
        error,
        ClientInitializeError::Cancelled
            | ClientInitializeError::NoPreferredProtocolVersion
            | ClientInitializeError::LegacyFallbackFailed { .. }
    )
}

/// What one attempt to open a connection needs.
struct Opening<'a> {
    name: &'a str,
    config: &'a ServerConfig,
    pins: Option<&'a Arc<crate::pins::Pins>>,
    fallback: bool,
    init_timeout: Duration,
    changes: &'a mpsc::UnboundedSender<Change>,
    stop: &'a CancellationToken,
}

impl Opening<'_> {
    async fn open(
        &self,
        transport: TransportPlugin,
        protocol: Protocol,
    ) -> Result<Connection, Failed> {
        let (name, init_timeout, stop) = (self.name, self.init_timeout, self.stop);
        let target = target(name, self.config, self.fallback);
        let pump = tokio::task::spawn_blocking(move || transport.connect(&target))
            .await
            .map_err(|e| Failed::Other(format!("the connect task failed: {e}")))?
            .map_err(|e| Failed::Other(e.to_string()))?;
        let callers = Callers::default();
        let read = callers.clone();
        let answers = crate::pump::tool_call_answers().watching(move |message| {
            if let rmcp::model::JsonRpcMessage::Notification(notification) = message {
                match &notification.notification {
                    rmcp::model::ServerNotification::ProgressNotification(progress) => {
                        read.arrived(&progress.params.progress_token);
                    }
                    rmcp::model::ServerNotification::LoggingMessageNotification(_) => {
                        read.log_arrived();
                    }
                    _ => {}
                }
            }
        });
        let transport = PumpTransport::<RoleClient>::reading_directly(
            pump.clone(),
            name.to_owned(),
            OnGarbage::Recover,
            Some(answers),
        );
        let reason = transport.close_reason();
        let sender = transport.sender();
        let client = HubClient {
            server: name.to_owned(),
            changes: self.changes.clone(),
            callers: callers.clone(),
        };
        let (lifecycle, handshake) = match protocol {
            Protocol::Auto => (
                ClientLifecycleMode::Auto {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                    legacy_version: Some(LEGACY_REVISION),
                },
                "`server/discover` or `initialize`",
            ),
            Protocol::Stateless => (
                ClientLifecycleMode::Discover {
                    preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                },
                "`server/discover`",
            ),
            Protocol::Handshake => (ClientLifecycleMode::Initialize, "`initialize`"),
        };
        let started = tokio::select! {
            started = tokio::time::timeout(
                init_timeout,
                client.serve_with_lifecycle(transport, lifecycle),
            ) => started,
            () = stop.cancelled() => {
                close_pump(&pump).await;
                return Err(Failed::Other(STOPPED.to_owned()));
            }
        };
        let closed_why =
            |reason: &CloseReason| reason.get().map(|r| format!(": {r}")).unwrap_or_default();
        let service = match started {
            Ok(Ok(service)) => service,
            Ok(Err(ClientInitializeError::NoCompatibleProtocolVersion {
                server_supported,
                ..
            })) => {
                close_pump(&pump).await;
                let versions: Vec<String> =
                    server_supported.iter().map(ToString::to_string).collect();
                return Err(Failed::NotDiscovered(format!(
                    "the server supports MCP {}, not 2026-07-28",
                    versions.join(", ")
                )));
            }
            Ok(Err(error)) => {
                close_pump(&pump).await;
                // Give the reader a moment to collect the exit status and stderr.
                tokio::time::sleep(Duration::from_millis(50)).await;
                let why = match reason.get() {
                    Some(why) => format!("{handshake} failed: the server {why}"),
                    None => format!("{handshake} failed: {error}"),
                };
                return Err(if protocol == Protocol::Auto && worth_handshake(&error) {
                    Failed::NotDiscovered(why)
                } else {
                    Failed::Other(why)
                });
            }
            Err(_) => {
                close_pump(&pump).await;
                return Err(Failed::Other(format!(
                    "did not answer {handshake} within {} ms{}",
                    init_timeout.as_millis(),
                    closed_why(&reason)
                )));
            }
        };
        let stamp = Stamp::of(&service);
        let connection = Connection {
            service,
            listed: Default::default(),
            reason,
            pump,
            ended: CancellationToken::new(),
            callers,
            filter: super::filter::ToolFilter::new(self.config),
            pins: self.pins.cloned(),
            bearer: None,
            relist_at: Default::default(),
            sender,
            stamp,
        };
        let listed = tokio::select! {
            listed = tokio::time::timeout(init_timeout, connection.relist()) => listed,
            () = stop.cancelled() => {
                connection.close().await;
                return Err(Failed::Other(STOPPED.to_owned()));
            }
        };
        match listed {
            Ok(Ok(_)) => {
                if connection.is_stateless()
                    && let Some(filter) = connection.announced_changes()
                {
                    listen_for_changes(
                        &connection,
                        name,
                        filter,
                        self.changes.clone(),
                        init_timeout,
                    )
                    .await;
                }
                Ok(connection)
            }
            Ok(Err(error)) => {
                connection.close().await;
                Err(Failed::Other(format!(
                    "tools/list failed: {error}{}",
                    closed_why(&connection.reason)
                )))
            }
            Err(_) => {
                connection.close().await;
                Err(Failed::Other(format!(
                    "did not answer `tools/list` within {} ms",
                    init_timeout.as_millis()
                )))
            }
        }
    }
}

/// The longest wait between two attempts to listen again after a subscription ended.
const MAX_LISTEN_RETRY: Duration = Duration::from_secs(60);

/// Follows a 2026-07-28 server's `list_changed` notifications (tools, resources, prompts: those
/// it announces) through `subscriptions/listen` (the legacy revisions send them unasked, to
/// [`HubClient`]) until the connection ends. The first subscription is acknowledged before this returns, so that no
/// change made once the server counts as ready goes unnoticed; one that ends early is opened
/// again, backing off.
async fn listen_for_changes(
    connection: &Connection,
    name: &str,
    filter: SubscriptionFilter,
    changes: mpsc::UnboundedSender<Change>,
    within: Duration,
) {
    let peer = connection.service.peer().clone();
    let closed = connection.ended.clone();
    let server = name.to_owned();
    let first = match tokio::time::timeout(within, peer.listen(filter.clone())).await {
        Ok(Ok(subscription)) => Some(subscription),
        Ok(Err(error)) => {
            tracing::warn!(server, "subscriptions/listen failed: {error}; trying again");
            None
        }
        Err(_) => {
            tracing::warn!(
                server,
                "subscriptions/listen was not acknowledged within {} ms; trying again",
                within.as_millis()
            );
            None
        }
    };
    tokio::spawn(async move {
        let mut wait = Duration::from_secs(1);
        let mut subscription = first;
        loop {
            if let Some(mut open) = subscription.take() {
                loop {
                    let next = tokio::select! {
                        () = closed.cancelled() => return,
                        next = open.next() => next,
                    };
                    let change = match next {
                        Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                            Change::Tools(server.clone())
                        }
                        Ok(Some(ServerNotification::ResourceListChangedNotification(_))) => {
                            Change::Resources(server.clone())
                        }
                        Ok(Some(ServerNotification::PromptListChangedNotification(_))) => {
                            Change::Prompts(server.clone())
                        }
                        Ok(Some(_)) => continue,
                        Ok(None) | Err(_) => break,
                    };
                    wait = Duration::from_secs(1);
                    if changes.send(change).is_err() {
                        return;
                    }
                }
            }
            if peer.is_transport_closed() {
                return;
            }
            tokio::select! {
                () = closed.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            wait = (wait * 2).min(MAX_LISTEN_RETRY);
            subscription = tokio::select! {
                () = closed.cancelled() => return,
                opened = peer.listen(filter.clone()) => match opened {
                    Ok(opened) => Some(opened),
                    Err(error) => {
                        tracing::debug!(server, "subscriptions/listen failed: {error}");
                        None
                    }
                },
            };
        }
    });
}

async fn close_pump(pump: &Pump) {
    let pump = pump.clone();
    let _ = tokio::task::spawn_blocking(move || pump.close()).await;
}

/// Reads one page of a `tools/list` answer that rmcp could not read as a whole, tool by tool;
/// the cursor of the next page.
fn read_page(
    page: &Value,
    tools: &mut Vec<Tool>,
    warnings: &mut Vec<String>,
) -> Result<Option<String>, String> {
    let Some(items) = page.get("tools").and_then(Value::as_array) else {
        return Err("the answer to `tools/list` has no `tools` array".to_owned());
    };
    for (position, item) in items.iter().enumerate() {
        match read_tool(item) {
            Ok((tool, None)) => tools.push(tool),
            Ok((tool, Some(warning))) => {
                warnings.push(format!("`{}`: {warning}", tool.name));
                tools.push(tool);
            }
            Err(warning) => {
                let name = item
                    .get("name")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("tool #{}", position + 1), |n| format!("`{n}`"));
                warnings.push(format!("{name}: {warning}; it is left out"));
            }
        }
    }
    Ok(page
        .get("nextCursor")
        .and_then(Value::as_str)
        .map(str::to_owned))
}

/// One tool of a listing: as it is, or mended (with what was wrong), or why it cannot be used.
fn read_tool(item: &Value) -> Result<(Tool, Option<String>), String> {
    if let Ok(tool) = serde_json::from_value::<Tool>(item.clone()) {
        return Ok((tool, None));
    }
    let Value::Object(fields) = item else {
        return Err("it is not an object".to_owned());
    };
    if !fields.get("name").is_some_and(Value::is_string) {
        return Err("it has no name".to_owned());
    }
    let mut fields = fields.clone();
    let mut wrong = Vec::new();
    let schema_problem = match fields.get("inputSchema") {
        None => Some("it has no inputSchema".to_owned()),
        Some(Value::Null) => Some("its inputSchema is null".to_owned()),
        Some(Value::String(marker)) if marker == TOO_DEEP => Some(format!(
            "its inputSchema nests deeper than the JSON parser allows ({TOO_DEEP})"
        )),
        Some(Value::Object(_)) => None,
        Some(other) => Some(format!(
            "its inputSchema is not an object but {}",
            kind(other)
        )),
    };
    if let Some(problem) = schema_problem {
        fields.insert("inputSchema".to_owned(), json!({"type": "object"}));
        wrong.push(format!(
            "{problem}, so it is served untyped (any arguments object, unchecked)"
        ));
    }
    if fields
        .get("outputSchema")
        .is_some_and(|schema| !schema.is_object() && !schema.is_null())
    {
        fields.remove("outputSchema");
        wrong.push("its outputSchema is unusable and is ignored".to_owned());
    }
    for optional in [
        "annotations",
        "icons",
        "_meta",
        "title",
        "description",
        "execution",
    ] {
        let mut trial = fields.clone();
        trial.remove(optional);
        if fields.contains_key(optional)
            && serde_json::from_value::<Tool>(Value::Object(fields.clone())).is_err()
            && serde_json::from_value::<Tool>(Value::Object(trial)).is_ok()
        {
            fields.remove(optional);
            wrong.push(format!("its `{optional}` is malformed and is ignored"));
        }
    }
    let tool = serde_json::from_value::<Tool>(Value::Object(fields)).map_err(|e| e.to_string())?;
    Ok((tool, (!wrong.is_empty()).then(|| wrong.join("; "))))
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn each_tool_of_a_page_is_read_on_its_own() {
        let page = json!({"tools": [
            {"name": "fine", "inputSchema": {"type": "object"}},
            {"name": "null", "inputSchema": null},
            {"name": "missing"},
            {"name": "string", "inputSchema": "nope"},
            {"name": "deep", "inputSchema": TOO_DEEP},
            {"name": "bad_output", "inputSchema": {}, "outputSchema": 3},
            {"inputSchema": {}},
            7
        ], "nextCursor": "2"});
        let (mut tools, mut warnings) = (Vec::new(), Vec::new());
        let cursor = read_page(&page, &mut tools, &mut warnings).unwrap();
        assert_eq!(cursor.as_deref(), Some("2"));
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(
            names,
            ["fine", "null", "missing", "string", "deep", "bad_output"]
        );
        assert_eq!(tools[1].input_schema.get("type"), Some(&json!("object")));
        assert!(tools[5].output_schema.is_none());
        assert_eq!(warnings.len(), 7, "{warnings:?}");
        assert!(warnings[0].starts_with("`null`: its inputSchema is null"));
        assert!(warnings[3].contains("nests deeper"));
        assert!(warnings[5].starts_with("tool #7: it has no name; it is left out"));
        assert!(warnings[6].starts_with("tool #8: it is not an object"));
    }
}
