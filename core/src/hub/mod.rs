//! The Hub: one MCP client per downstream server.
//!
//! Every server is connected in parallel at start, each within its initialize timeout; one that
//! fails never holds up the others. Its failure is kept for display and it is retried with
//! backoff, and a server that dies is started again on its next call. Calls are validated against
//! the tool's `inputSchema`, bounded by a timeout, and cancelled downstream when abandoned.
//!
//! Everything about a server that changes sits in one state under one lock, never held across
//! I/O: a connection is opened outside it, once for every caller waiting, so reading a server's
//! status and tools never waits for a server that is still connecting. `notifications/tools/list_changed` re-lists
//! that server alone, bounded by its init timeout, and a storm of them is coalesced: at most
//! one re-list runs and one waits per server.

mod apps;
mod cache;
mod catalog;
mod client;
mod completion;
pub(crate) mod filter;
mod tasks;
mod transports;
pub mod validate;

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use rmcp::{
    model::{CallToolRequestParams, CallToolResponse, CallToolResult, Tool},
    service::ServiceError,
};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

pub use apps::{APPS_EXTENSION, apps_capability, is_app_only};
pub use catalog::{
    CatalogError, Gathered, Listing, MAX_SUBSCRIPTIONS, READ_RESOURCE, Target, UI_SCHEME, Uris,
    cursor, namespaced_uri, offset, split_uri,
};
use client::Change;
pub use client::{Connection, Listed};
pub use tasks::{MAX_TASKS, TaskRequest};
pub use transports::Transports;

use crate::{
    auth::{Account, Accounts, AuthFailure, NoToken},
    config::{Config, ServerConfig, Share},
    relay::Asker,
};

/// How long `initialize` may take unless a server says otherwise.
pub const DEFAULT_INIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a tool call may take unless the server or the policy says otherwise.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
const FIRST_RETRY: Duration = Duration::from_secs(1);
const MAX_RETRY: Duration = Duration::from_secs(60);
/// How long a re-list waits after `list_changed` before it starts, so that a burst of
/// notifications costs one re-list.
const RELIST_SETTLE: Duration = Duration::from_millis(25);
/// How often the pins files of servers with held tools are looked at for an approval.
const PIN_POLL: Duration = Duration::from_millis(500);

/// Something that happened to a downstream server, for subscribers (the codegen driver, upstream
/// sessions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HubEvent {
    /// The server's tool list changed (or it came up, or went down).
    ToolsChanged { server: String },
    /// The server's resources (or resource templates) changed, or it came up.
    ResourcesChanged { server: String },
    /// The server's prompts changed, or it came up.
    PromptsChanged { server: String },
    /// A resource someone subscribed to changed; `uri` is the one clients read (see [`Uris`]).
    ResourceUpdated { uri: String },
}

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Not yet connected.
    Starting,
    /// Connected; its tools are listed.
    Ready,
    /// Not connected: why in words (`error`), what kind of failure (`failure`), and how many
    /// tries in a row failed.
    Failed {
        error: String,
        attempts: u32,
        failure: Failure,
    },
}

/// What kind of failure keeps a server down: what a caller branches on (the CLI's advice, the
/// doctor, a server's folder note); the words for a person are in [`Status::Failed`]'s `error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// Nobody is logged in (or the login is no longer good): `runbyte login <server>` is
    /// needed, and until it happens nobody is asked again.
    NeedsLogin,
    /// The server names another authorization server than the one it is pinned to: nothing
    /// was sent there; a person decides whether to trust it (`runbyte login <server>`).
    Untrusted,
    /// The connection could not be made (the command or URL failed, the handshake went wrong,
    /// a token could not be had); it is tried again later.
    Unreachable,
    /// The connection was made and then ended; the next call starts it again.
    Exited,
}

/// Why a connection could not be opened: the words and the kind.
struct NotOpened {
    reason: String,
    failure: Failure,
}

/// Why no token could be had, as a reason the server is down.
fn not_opened(no: NoToken) -> NotOpened {
    match no {
        NoToken::NeedsLogin(message) => NotOpened::needs_login(message),
        NoToken::Untrusted(message) => NotOpened {
            reason: message,
            failure: Failure::Untrusted,
        },
        NoToken::Failed(message) => NotOpened::unreachable(message),
    }
}

impl NotOpened {
    fn unreachable(reason: String) -> Self {
        NotOpened {
            reason,
            failure: Failure::Unreachable,
        }
    }

    fn needs_login(reason: String) -> Self {
        NotOpened {
            reason,
            failure: Failure::NeedsLogin,
        }
    }
}

impl Status {
    /// `starting`, `ready` or `failed` (a metric's label).
    pub fn label(&self) -> &'static str {
        match self {
            Status::Starting => "starting",
            Status::Ready => "ready",
            Status::Failed { .. } => "failed",
        }
    }
}

/// A tool call that failed before it produced a result. (A tool that ran and reported an error
/// is a `CallToolResult` with `isError`, not this.)
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    #[error("unknown server `{server}`; the servers are: {known}")]
    UnknownServer { server: String, known: String },
    #[error("server `{server}` has no tool `{tool}`{hint}")]
    UnknownTool {
        server: String,
        tool: String,
        hint: String,
    },
    /// Held by its pin: its definition changed (or it is new) since it was pinned.
    #[error("{message}")]
    Held {
        server: String,
        tool: String,
        message: String,
    },
    #[error("{server}/{tool}: {message}")]
    InvalidArguments {
        server: String,
        tool: String,
        message: String,
    },
    #[error("server `{server}` is unavailable: {reason}")]
    Unavailable { server: String, reason: String },
    #[error("server `{server}` {reason} (while calling `{tool}`)")]
    Exited {
        server: String,
        tool: String,
        reason: String,
        /// The server's authorization refused the call (read where the reason came in).
        auth: Option<AuthFailure>,
    },
    #[error("{server}/{tool} did not answer within {} ms (cancelled)", .after.as_millis())]
    Timeout {
        server: String,
        tool: String,
        after: Duration,
    },
    #[error("{server}/{tool} asked the user for input, but {message}")]
    Input {
        server: String,
        tool: String,
        message: String,
    },
    #[error("{server}/{tool} failed: {message}")]
    Protocol {
        server: String,
        tool: String,
        message: String,
        /// The server's authorization refused the call (read where the message came in).
        auth: Option<AuthFailure>,
        /// The server's JSON-RPC error as it came, when it answered with one (a client that
        /// calls the tool directly gets it as it is).
        answer: Option<Box<rmcp::model::ErrorData>>,
    },
    /// A 2026-07-28 server asked for input during a direct call that passes its questions on
    /// ([`PassThrough`]): the question is in the pass-through, for the client. So is the task,
    /// when the server answered with one (SEP-2663).
    #[error("{server}/{tool} asked the client for input")]
    Asked { server: String, tool: String },
}

impl CallError {
    /// How the server's authorization refused the call, if that is why it failed.
    pub fn auth(&self) -> Option<&AuthFailure> {
        match self {
            CallError::Exited { auth, .. } | CallError::Protocol { auth, .. } => auth.as_ref(),
            _ => None,
        }
    }

    /// Replaces every known secret in what the error quotes (a server's message or exit).
    fn redact(&mut self) {
        let guard = crate::redact::guard();
        match self {
            CallError::Protocol {
                message, answer, ..
            } => {
                *message = guard.redact(message).into_owned();
                if let Some(answer) = answer {
                    guard.redact_serde(answer.as_mut());
                }
            }
            CallError::InvalidArguments { message, .. }
            | CallError::Input { message, .. }
            | CallError::Unavailable {
                reason: message, ..
            }
            | CallError::Exited {
                reason: message, ..
            } => *message = guard.redact(message).into_owned(),
            CallError::UnknownServer { .. }
            | CallError::UnknownTool { .. }
            | CallError::Held { .. }
            | CallError::Asked { .. }
            | CallError::Timeout { .. } => {}
        }
    }
}

/// How one call is made.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// The upstream client session making it (for `share = "session"` servers).
    pub session: Option<String>,
    /// The most it may take; the server's `call-timeout-ms` or the default when `None`.
    pub timeout: Option<Duration>,
    /// Who answers what the tool asks of the user during the call (see [`crate::relay`]);
    /// `None`: nobody, and such a question fails the call.
    pub asker: Option<Arc<dyn Asker>>,
    /// Where the server's progress and log messages during the call go (a direct call's
    /// client); `None`: Runbyte's own log only.
    pub notices: Option<Arc<dyn crate::relay::Notices>>,
    /// A 2026-07-28 client's direct call: a 2026-07-28 server's questions go back to the
    /// client as they came, instead of to `asker`.
    pub pass_through: Option<Arc<PassThrough>>,
}

/// A direct call of a 2026-07-28 client, in front of a 2026-07-28 server: what the server asks
/// (`input_required`) goes to the client as it came, and the client's retry brings the answers
/// and the server's `requestState` back, which the server checks (Runbyte neither reads nor
/// keeps them). A legacy server never sees them.
pub struct PassThrough {
    /// The client's `inputResponses`.
    pub answers: Option<rmcp::model::InputResponses>,
    /// The `requestState` the client echoes.
    pub state: Option<String>,
    /// What the client says it can answer (its request's `_meta` clientCapabilities), told to
    /// the server in place of Runbyte's own.
    pub capabilities: Option<Value>,
    asked: Mutex<Option<rmcp::model::InputRequiredResult>>,
    task: Mutex<Option<rmcp::model::CreateTaskResult>>,
}

impl PassThrough {
    /// A client's call with its retry's answers and state, and its capabilities.
    pub fn new(
        answers: Option<rmcp::model::InputResponses>,
        state: Option<String>,
        capabilities: Option<Value>,
    ) -> Self {
        PassThrough {
            answers,
            state,
            capabilities,
            asked: Mutex::default(),
            task: Mutex::default(),
        }
    }

    /// Whether the client declared the Tasks extension (SEP-2663) for the call.
    fn declares_tasks(&self) -> bool {
        self.capabilities
            .as_ref()
            .and_then(|c| c.pointer("/extensions"))
            .and_then(Value::as_object)
            .is_some_and(|e| e.contains_key(rmcp::model::TASKS_EXTENSION_ID))
    }

    /// The task the server answered the call with (SEP-2663), when it did; only a client that
    /// declared the extension for the call gets one.
    pub fn task(&self) -> Option<rmcp::model::CreateTaskResult> {
        self.task.lock().ok().and_then(|mut task| task.take())
    }

    /// The server's question for the client, when the call ended with one
    /// ([`CallError::Asked`]).
    pub fn asked(&self) -> Option<rmcp::model::InputRequiredResult> {
        self.asked.lock().ok().and_then(|mut asked| asked.take())
    }
}

/// The `_meta` key of a 2026-07-28 request that asks for its log messages, and from which level.
pub const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";

/// The `_meta` key of a 2026-07-28 request that says what its client can answer.
pub const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";

/// The most `input_required` rounds one call to a 2026-07-28 server may take.
pub(super) const MAX_INPUT_ROUNDS: usize = 10;

/// A connection, opened once for everyone who asks while it is being opened. Opening runs
/// outside every lock: the slot's state stays readable while a server takes its time.
type Link = Arc<tokio::sync::OnceCell<Arc<Connection>>>;

/// Everything about a server that changes, under one lock that is never held across I/O.
struct SlotState {
    status: Status,
    listed: Listed,
    /// The MCP revision the shared connection speaks, once connected.
    protocol: Option<String>,
    /// The shared connection (open, being opened, or not yet asked for).
    link: Link,
    /// Connections of `share = "session"` servers, by client session.
    sessions: HashMap<String, Link>,
    backoff: Duration,
    retrying: bool,
    /// Re-listing after `list_changed`: whether one runs, and whether another is due after it.
    relist_running: bool,
    relist_pending: bool,
    /// Tools whose arguments were sent unvalidated (too costly to check), warned about once.
    unjudged: std::collections::HashSet<String>,
}

struct Slot {
    name: String,
    config: ServerConfig,
    /// Its OAuth credentials (servers with a `url`).
    account: Option<Arc<Account>>,
    state: Mutex<SlotState>,
}

impl Slot {
    /// Runs `f` on the state. A panic while it was held leaves the state as it was written.
    fn with<T>(&self, f: impl FnOnce(&mut SlotState) -> T) -> T {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut state)
    }

    fn set_status(&self, status: Status) {
        // Why a server is down is shown in its folder, to programs and by the CLI: a connector's
        // error may quote the server's URL with its userinfo or query secrets.
        let status = match status {
            Status::Failed {
                error,
                attempts,
                failure,
            } => Status::Failed {
                error: crate::redact::redact(&error).into_owned(),
                attempts,
                failure,
            },
            other => other,
        };
        self.with(|state| {
            if status != Status::Ready {
                state.listed = Listed::default();
            }
            state.status = status;
        });
    }

    fn status(&self) -> Status {
        self.with(|state| state.status.clone())
    }

    /// Ready, with these tools.
    fn set_listed(&self, listed: Listed) {
        self.with(|state| {
            state.status = Status::Ready;
            state.listed = listed;
        });
    }

    fn view(&self) -> ServerView {
        let (status, listed, protocol) = self.with(|state| {
            (
                state.status.clone(),
                state.listed.clone(),
                state.protocol.clone(),
            )
        });
        ServerView {
            name: self.name.clone(),
            status,
            protocol,
            tools: listed.tools,
            warnings: listed.warnings,
            hidden: listed.hidden,
            held: listed.held,
        }
    }

    /// The shared connection if one is open.
    fn connection(&self) -> Option<Arc<Connection>> {
        self.with(|state| state.link.get().cloned())
    }

    fn init_timeout(&self) -> Duration {
        self.config
            .init_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_INIT_TIMEOUT)
    }
}

struct Inner {
    transports: Arc<Transports>,
    servers: BTreeMap<String, Arc<Slot>>,
    events: broadcast::Sender<HubEvent>,
    changes: mpsc::UnboundedSender<Change>,
    /// Resources subscribed to downstream (`resources/subscribe`), by server and the server's
    /// own URI, with how many client subscriptions hold each.
    subscribed: Mutex<HashMap<(String, String), usize>>,
    /// The resources subscribed to on 2026-07-28 servers, each by a `subscriptions/listen` of
    /// its own, ended by cancelling its token (see `Hub::subscribe_resource`).
    listening: Mutex<HashMap<(String, String), CancellationToken>>,
    /// Each server's resources, templates and prompts as last listed (see [`catalog::Lists`]).
    lists: catalog::Lists,
    /// How the servers' resource URIs reach clients, and back (see [`Uris`]).
    uris: Uris,
    /// Cancelled by [`Hub::shutdown`]: connections being opened give up and close.
    stopping: CancellationToken,
    /// The servers' tool pins (see [`crate::pins`]).
    pins: Arc<crate::pins::Pins>,
    /// The servers' tasks handed to clients, by Runbyte's id (see [`tasks`]).
    tasks: tasks::Tasks,
    /// Resource reads kept by the servers' caching hints (see [`cache`]).
    reads: cache::Reads,
    /// The tool results kept by `[servers.<name>.cache]`.
    calls: cache::Calls,
}

/// The Hub. Cheap to clone.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

/// A server as the Hub sees it.
#[derive(Debug, Clone)]
pub struct ServerView {
    /// Its name in `runbyte.toml`.
    pub name: String,
    /// Where it stands.
    pub status: Status,
    /// The MCP revision its connection speaks (`2026-07-28`, `2025-11-25`, ...), once connected.
    pub protocol: Option<String>,
    /// Its tools as last listed (empty when it is down).
    pub tools: Arc<Vec<Tool>>,
    /// What was wrong with tools that were served untyped or left out, one line each.
    pub warnings: Arc<Vec<String>>,
    /// The tools its `tools` / `exclude-tools` hide, with the reason.
    pub hidden: Arc<Vec<(String, String)>>,
    /// The tools held by their pins, with why.
    pub held: Arc<Vec<crate::pins::Held>>,
}

impl Hub {
    /// A Hub for the configuration's enabled servers. Nothing connects until [`Hub::start`].
    /// Must be called inside the tokio runtime.
    pub fn new(config: &Config, transports: Arc<Transports>) -> Self {
        let pins = crate::pins::Pins::new(config, None, None);
        Self::with_accounts(config, transports, Accounts::new(config), pins)
    }

    /// [`Hub::new`] with the servers' OAuth accounts and tool pins given.
    pub fn with_accounts(
        config: &Config,
        transports: Arc<Transports>,
        accounts: Accounts,
        pins: crate::pins::Pins,
    ) -> Self {
        let servers = config
            .enabled_servers()
            .map(|(name, server)| {
                let slot = Slot {
                    name: name.clone(),
                    config: server.clone(),
                    account: accounts.get(name).cloned(),
                    state: Mutex::new(SlotState {
                        status: Status::Starting,
                        listed: Listed::default(),
                        protocol: None,
                        link: Link::default(),
                        sessions: HashMap::new(),
                        backoff: FIRST_RETRY,
                        retrying: false,
                        relist_running: false,
                        relist_pending: false,
                        unjudged: Default::default(),
                    }),
                };
                (name.clone(), Arc::new(slot))
            })
            .collect();
        let (events, _) = broadcast::channel(256);
        let (changes, mut changed) = mpsc::unbounded_channel::<Change>();
        let hub = Hub {
            inner: Arc::new(Inner {
                transports,
                servers,
                events,
                changes,
                subscribed: Mutex::default(),
                listening: Mutex::default(),
                lists: catalog::Lists::default(),
                uris: Uris::new(config),
                stopping: CancellationToken::new(),
                pins: Arc::new(pins),
                tasks: tasks::Tasks::default(),
                reads: cache::Reads::default(),
                calls: cache::Calls::default(),
            }),
        };
        hub.watch_pins();
        hub.watch_list_ttls();
        let weak = Arc::downgrade(&hub.inner);
        tokio::spawn(async move {
            while let Some(change) = changed.recv().await {
                let Some(inner) = weak.upgrade() else { return };
                let hub = Hub { inner };
                let event = match change {
                    Change::Tools(server) => {
                        hub.list_changed(&server);
                        continue;
                    }
                    Change::Resources(server) => {
                        hub.inner.lists.forget(&server, catalog::Kind::Resources);
                        hub.inner.reads.forget_server(&server);
                        HubEvent::ResourcesChanged { server }
                    }
                    Change::Prompts(server) => {
                        hub.inner.lists.forget(&server, catalog::Kind::Prompts);
                        HubEvent::PromptsChanged { server }
                    }
                    Change::ResourceUpdated(server, uri) => {
                        hub.inner.reads.forget_uri(&server, &uri);
                        HubEvent::ResourceUpdated {
                            uri: hub.inner.uris.client_uri(&server, &uri),
                        }
                    }
                };
                let _ = hub.inner.events.send(event);
            }
        });
        hub
    }

    /// Connects every server in parallel; returns once each has connected or failed. Failed
    /// servers are retried in the background.
    pub async fn start(&self) {
        let attempts = self.inner.servers.values().map(|slot| {
            let hub = self.clone();
            let slot = slot.clone();
            async move {
                let _ = hub.ensure_connected(&slot).await;
            }
        });
        futures::future::join_all(attempts).await;
    }

    /// Notifications of tool-list changes.
    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.inner.events.subscribe()
    }

    /// The configured servers' names, sorted.
    pub fn server_names(&self) -> Vec<String> {
        self.inner.servers.keys().cloned().collect()
    }

    /// Every server with its status and tools, sorted by name. Never waits for a server that
    /// is connecting.
    pub async fn servers(&self) -> Vec<ServerView> {
        self.inner
            .servers
            .values()
            .map(|slot| slot.view())
            .collect()
    }

    /// A check of whether a server lists a tool now (by its original name), for labels that
    /// must stay bounded (the metrics'): it holds the Hub weakly and never waits.
    pub fn tool_lister(&self) -> impl Fn(&str, &str) -> bool + Send + Sync + 'static {
        let inner = Arc::downgrade(&self.inner);
        move |server, tool| {
            let Some(inner) = inner.upgrade() else {
                return false;
            };
            inner.servers.get(server).is_some_and(|slot| {
                let tools = slot.with(|state| state.listed.tools.clone());
                tools.iter().any(|listed| listed.name == tool)
            })
        }
    }

    /// One server's view, if it is configured.
    pub async fn server(&self, name: &str) -> Option<ServerView> {
        self.inner.servers.get(name).map(|slot| slot.view())
    }

    fn slot(&self, server: &str) -> Result<&Arc<Slot>, CallError> {
        self.inner
            .servers
            .get(server)
            .ok_or_else(|| CallError::UnknownServer {
                server: server.to_owned(),
                known: self.server_names().join(", "),
            })
    }

    /// Connects a server now (after a login), rather than at its next retry.
    pub async fn connect_now(&self, server: &str) -> Result<(), String> {
        let slot = self.slot(server).map_err(|e| e.to_string())?.clone();
        self.ensure_connected(&slot).await.map(|_| ())
    }

    /// The live shared connection to a server, connecting (once, for all callers waiting) when
    /// there is none or the last one died. No lock is held while it connects.
    async fn ensure_connected(&self, slot: &Arc<Slot>) -> Result<Arc<Connection>, String> {
        let link = slot.with(|state| state.link.clone());
        let connection = link.get_or_try_init(|| self.connect(slot)).await?.clone();
        if connection.is_alive() {
            return Ok(connection);
        }
        let why = connection
            .close_reason()
            .unwrap_or_else(|| "closed the connection".to_owned());
        // Whoever finds the dead connection first replaces it; the others then share the new one.
        let replaced = slot.with(|state| {
            let current = Arc::ptr_eq(&state.link, &link);
            if current {
                state.link = Link::default();
                state.listed = Listed::default();
            }
            current
        });
        if replaced {
            tracing::warn!(server = %slot.name, "server {why}; starting it again");
            connection.close().await;
            self.tools_changed(&slot.name);
        }
        let link = slot.with(|state| state.link.clone());
        Ok(link.get_or_try_init(|| self.connect(slot)).await?.clone())
    }

    /// Opens a server's shared connection and records what came of it.
    async fn connect(&self, slot: &Arc<Slot>) -> Result<Arc<Connection>, String> {
        match self.open(slot).await {
            Ok(connection) => {
                let connection = Arc::new(connection);
                let protocol = connection.protocol();
                slot.with(|state| state.protocol = protocol);
                slot.set_listed(connection.listed());
                slot.with(|state| state.backoff = FIRST_RETRY);
                tracing::info!(
                    server = %slot.name,
                    tools = connection.tools().len(),
                    protocol = connection.protocol().unwrap_or_default(),
                    "connected"
                );
                self.tools_changed(&slot.name);
                self.came_up(&slot.name, &connection);
                Ok(connection)
            }
            Err(NotOpened {
                reason: error,
                failure,
            }) => {
                let (attempts, same) = match slot.status() {
                    Status::Failed {
                        attempts,
                        error: last,
                        ..
                    } => (attempts + 1, last == *crate::redact::redact(&error)),
                    _ => (1, false),
                };
                // Said once; a retry that fails the same way again is not news.
                if same {
                    tracing::debug!(server = %slot.name, attempts, "still cannot connect: {error}");
                } else {
                    tracing::warn!(server = %slot.name, attempts, "cannot connect: {error}");
                }
                slot.set_status(Status::Failed {
                    error: error.clone(),
                    attempts,
                    failure,
                });
                self.schedule_retry(slot.clone());
                Err(error)
            }
        }
    }

    async fn open(&self, slot: &Slot) -> Result<Connection, NotOpened> {
        let Some(account) = &slot.account else {
            return self
                .open_with(slot, None)
                .await
                .map_err(NotOpened::unreachable);
        };
        // Until someone logs in, a retry asks nobody.
        if let Some(waiting) = account.awaiting_login() {
            return Err(NotOpened::needs_login(waiting));
        }
        let bearer = account.bearer().await.map_err(not_opened)?;
        let sent_token = bearer.is_some();
        let error = match self.open_with(slot, bearer).await {
            Ok(connection) => return Ok(connection),
            Err(error) => error,
        };
        // A transport's words enter here: the refusal they carry is read once.
        match AuthFailure::of(&error) {
            // The token was refused: refreshed once, then tried again.
            Some(failure @ AuthFailure::Unauthorized { .. }) if sent_token => {
                account.note_challenge(&failure);
                let token = account.refreshed().await.map_err(|no| match no {
                    NoToken::NeedsLogin(message) => {
                        NotOpened::needs_login(format!("{message} (the token was refused)"))
                    }
                    NoToken::Untrusted(message) => NotOpened {
                        reason: format!("{message} (the token was refused)"),
                        failure: Failure::Untrusted,
                    },
                    NoToken::Failed(message) => NotOpened::unreachable(message),
                })?;
                self.open_with(slot, Some(token))
                    .await
                    .map_err(NotOpened::unreachable)
            }
            Some(failure) => Err(match account.explain_refusal(&failure) {
                Some(why) => NotOpened::needs_login(why),
                None => NotOpened::unreachable(error),
            }),
            None => Err(NotOpened::unreachable(error)),
        }
    }

    /// Opens a connection, with `bearer` as its `Authorization` when given.
    async fn open_with(&self, slot: &Slot, bearer: Option<String>) -> Result<Connection, String> {
        let (transport_name, fallback) = slot.config.connector();
        let transport = self
            .inner
            .transports
            .get(transport_name)
            .map_err(|e| e.to_string())?;
        let with_token;
        let config = match &bearer {
            Some(token) => {
                let mut config = slot.config.clone();
                config
                    .headers
                    .retain(|name, _| !name.eq_ignore_ascii_case("authorization"));
                config
                    .headers
                    .insert("Authorization".to_owned(), format!("Bearer {token}"));
                with_token = config;
                &with_token
            }
            None => &slot.config,
        };
        let mut connection = client::connect(
            &slot.name,
            config,
            transport,
            fallback,
            slot.init_timeout(),
            self.inner.changes.clone(),
            &self.inner.stopping,
            Some(&self.inner.pins),
        )
        .await?;
        connection.bearer = bearer;
        // Opened just as the gateway stopped: nobody will close it later.
        if self.inner.stopping.is_cancelled() {
            connection.close().await;
            return Err(client::STOPPED.to_owned());
        }
        Ok(connection)
    }

    /// Replaces `connection` when the token it was opened with is due (it expires within a
    /// minute, or a login here replaced it or gave one to a connection opened without): the next call opens a new one with a fresh token, and
    /// the old one is closed once the calls it carries have had their time.
    async fn retire_if_due(
        &self,
        slot: &Arc<Slot>,
        session: Option<&str>,
        connection: &Arc<Connection>,
    ) -> bool {
        let Some(account) = &slot.account else {
            return false;
        };
        if !account.is_due(connection.bearer.as_deref()).await {
            return false;
        }
        let retired = slot.with(|state| {
            let link = match (slot.config.share, session) {
                (Share::Session, Some(session)) => state.sessions.get(session).cloned(),
                _ => Some(state.link.clone()),
            };
            let current = link
                .and_then(|link| link.get().cloned())
                .is_some_and(|current| Arc::ptr_eq(&current, connection));
            if current {
                match (slot.config.share, session) {
                    (Share::Session, Some(session)) => {
                        state.sessions.remove(session);
                    }
                    _ => state.link = Link::default(),
                }
            }
            current
        });
        if retired {
            tracing::info!(server = %slot.name, "its access token is due: connecting with a fresh one");
            let old = connection.clone();
            let grace = slot
                .config
                .call_timeout_ms
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_CALL_TIMEOUT);
            tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                old.close().await;
            });
        }
        true
    }

    /// Retries a failed server in the background, doubling the wait each time up to a minute.
    fn schedule_retry(&self, slot: Arc<Slot>) {
        let wait = slot.with(|state| {
            if state.retrying {
                return None;
            }
            state.retrying = true;
            let wait = state.backoff;
            state.backoff = (state.backoff * 2).min(MAX_RETRY);
            Some(wait)
        });
        let Some(wait) = wait else { return };
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            slot.with(|state| state.retrying = false);
            let Some(inner) = weak.upgrade() else { return };
            if matches!(slot.status(), Status::Failed { .. }) {
                let _ = Hub { inner }.ensure_connected(&slot).await;
            }
        });
    }

    /// A server said its tools changed: re-list them, unless a re-list is already due (then
    /// the one waiting covers this too). Never waits.
    /// How `[servers.<name>.cache]` keeps the results of `spec` (a tool of `server`): its
    /// ttl, and whether they are shared by every session; `None` when they are not kept (no
    /// table, a tool it does not cover, or one the server does not mark read-only).
    fn result_rule(&self, server: &str, spec: &Tool) -> Option<(Duration, bool)> {
        let cache = self.inner.servers.get(server)?.config.cache.as_ref()?;
        let read_only = spec
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        (read_only && cache.covers(&spec.name)).then(|| {
            (
                Duration::from_millis(cache.ttl_ms),
                cache.scope == crate::config::ResultScope::Shared,
            )
        })
    }

    /// Whether `[servers.<name>.cache]` keeps the results of `spec` (a tool of `server`).
    pub fn keeps_results(&self, server: &str, spec: &Tool) -> bool {
        self.result_rule(server, spec).is_some()
    }

    /// The result kept of a call of `spec` (a tool of `server`) with `arguments` that
    /// `session` may be answered with, while fresh (see [`Hub::keep_result`]).
    pub fn kept_result(
        &self,
        server: &str,
        spec: &Tool,
        arguments: &Value,
        session: &str,
    ) -> Option<CallToolResult> {
        self.result_rule(server, spec)?;
        let item = cache::Calls::item(&spec.name, arguments);
        self.inner.calls.get(server, &item, Some(session))
    }

    /// Keeps `result` of a call of `spec` (a tool of `server`) with `arguments` by `session`,
    /// when `[servers.<name>.cache]` covers it and it is not an error. Whether it was kept.
    pub fn keep_result(
        &self,
        server: &str,
        spec: &Tool,
        arguments: &Value,
        session: &str,
        result: &CallToolResult,
    ) -> bool {
        let Some((ttl, shared)) = self.result_rule(server, spec) else {
            return false;
        };
        if result.is_error == Some(true) {
            return false;
        }
        let item = cache::Calls::item(&spec.name, arguments);
        let session = (!shared).then_some(session);
        self.inner.calls.keep((server, &item), session, result, ttl)
    }

    /// Tells every listener that `server`'s tools changed, and drops the results kept of them
    /// (`[servers.<name>.cache]`).
    fn tools_changed(&self, server: &str) {
        self.inner.calls.forget_server(server);
        let _ = self.inner.events.send(HubEvent::ToolsChanged {
            server: server.to_owned(),
        });
    }

    fn list_changed(&self, server: &str) {
        let Some(slot) = self.inner.servers.get(server) else {
            return;
        };
        let start = slot.with(|state| {
            if state.relist_running {
                state.relist_pending = true;
                return false;
            }
            state.relist_running = true;
            true
        });
        if !start {
            return;
        }
        let (weak, slot) = (Arc::downgrade(&self.inner), slot.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(RELIST_SETTLE).await;
                slot.with(|state| state.relist_pending = false);
                let Some(inner) = weak.upgrade() else {
                    slot.with(|state| state.relist_running = false);
                    return;
                };
                Hub { inner }.relist(&slot).await;
                let again = slot.with(|state| {
                    state.relist_running = state.relist_pending;
                    state.relist_pending
                });
                if !again {
                    return;
                }
            }
        });
    }

    /// Re-lists a server's tools, within its init timeout, and tells subscribers.
    async fn relist(&self, slot: &Slot) {
        self.relist_by(slot, false).await;
    }

    /// Re-lists a server's tools, within its init timeout, and tells subscribers; with
    /// `if_changed` (a listing by the server's `ttlMs`), only when they changed.
    async fn relist_by(&self, slot: &Slot, if_changed: bool) {
        let server = slot.name.as_str();
        let Some(connection) = slot.connection() else {
            return;
        };
        let before = connection.tools();
        let timeout = slot.init_timeout();
        match tokio::time::timeout(timeout, connection.relist()).await {
            Ok(Ok(listed)) if if_changed && *listed.tools == *before => {
                tracing::debug!(server, "tools listed again by their ttlMs: unchanged");
            }
            Ok(Ok(listed)) => {
                tracing::info!(server, tools = listed.tools.len(), "tool list changed");
                if connection.is_alive() {
                    slot.set_listed(listed);
                }
                self.tools_changed(server);
            }
            Ok(Err(error)) => tracing::warn!(server, "re-listing tools failed: {error}"),
            Err(_) => tracing::warn!(
                server,
                "re-listing tools did not finish within {} ms; the last list stays",
                timeout.as_millis()
            ),
        }
    }

    /// Lists again the tools of each server that announces no tool changes once the `ttlMs`
    /// of its last `tools/list` has passed (see `Connection::list_due`), telling subscribers
    /// only of a change: every [`client::MIN_LIST_TTL`], a look at each server's due time.
    fn watch_list_ttls(&self) {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(client::MIN_LIST_TTL).await;
                let Some(inner) = weak.upgrade() else { return };
                let hub = Hub { inner };
                if hub.inner.stopping.is_cancelled() {
                    return;
                }
                let now = std::time::Instant::now();
                for slot in hub.inner.servers.values() {
                    let due = slot
                        .connection()
                        .is_some_and(|connection| connection.list_due(now));
                    if due {
                        hub.relist_by(slot, true).await;
                    }
                }
            }
        });
    }

    /// Lists again the tools of each server that has tools held by their pins once its pins
    /// changed (`runbyte pins approve` or `reset`, or another replica's approval through the
    /// state store), so that a running gateway serves what was approved: one file status (or
    /// one bounded read of the store's key) per such server per [`PIN_POLL`].
    fn watch_pins(&self) {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PIN_POLL).await;
                let Some(inner) = weak.upgrade() else { return };
                let hub = Hub { inner };
                if hub.inner.stopping.is_cancelled() {
                    return;
                }
                for slot in hub.inner.servers.values() {
                    let held = slot.with(|state| !state.listed.held.is_empty())
                        || hub.inner.pins.has_asking(&slot.name);
                    if held && hub.inner.pins.changed(&slot.name).await {
                        hub.relist(slot).await;
                    }
                }
            }
        });
    }

    /// The connection a call from `session` uses: the shared one, or for `share = "session"`
    /// servers the session's own.
    async fn connection_for(
        &self,
        slot: &Arc<Slot>,
        session: Option<&str>,
    ) -> Result<Arc<Connection>, String> {
        let session = match (slot.config.share, session) {
            (Share::Session, Some(session)) => session,
            _ => return self.ensure_connected(slot).await,
        };
        for _ in 0..2 {
            let link = slot.with(|state| {
                state
                    .sessions
                    .entry(session.to_owned())
                    .or_default()
                    .clone()
            });
            let connection = link
                .get_or_try_init(|| async {
                    self.open(slot)
                        .await
                        .map(Arc::new)
                        .map_err(|not| not.reason)
                })
                .await
                .inspect_err(|_| {
                    // A failed open leaves nothing behind for the session.
                    slot.with(|state| {
                        if state
                            .sessions
                            .get(session)
                            .is_some_and(|l| Arc::ptr_eq(l, &link))
                        {
                            state.sessions.remove(session);
                        }
                    });
                })?
                .clone();
            if connection.is_alive() {
                return Ok(connection);
            }
            let replaced = slot.with(|state| {
                let current = state
                    .sessions
                    .get(session)
                    .is_some_and(|l| Arc::ptr_eq(l, &link));
                if current {
                    state.sessions.remove(session);
                }
                current
            });
            if replaced {
                connection.close().await;
            }
        }
        Err("the server's connection for this session keeps closing".to_owned())
    }

    /// Closes the connections a client session opened to `share = "session"` servers.
    pub async fn end_session(&self, session: &str) {
        for slot in self.inner.servers.values() {
            let link = slot.with(|state| state.sessions.remove(session));
            if let Some(connection) = link.as_ref().and_then(|link| link.get()) {
                connection.close().await;
            }
        }
    }

    /// The servers' tool pins.
    pub fn pins(&self) -> &crate::pins::Pins {
        &self.inner.pins
    }

    /// Lists `server`'s tools again now (judged by their pins), and tells subscribers: after
    /// a person approved a definition, so that it is served.
    pub async fn list_again(&self, server: &str) {
        if let Some(slot) = self.inner.servers.get(server) {
            self.relist(slot).await;
        }
    }

    /// The tool called `tool` on `server` as last listed.
    pub async fn tool(&self, server: &str, tool: &str) -> Result<Tool, CallError> {
        let slot = self.slot(server)?;
        let connection =
            self.ensure_connected(slot)
                .await
                .map_err(|reason| CallError::Unavailable {
                    server: server.to_owned(),
                    reason,
                })?;
        let mut listed = connection.listed();
        if listed.held.iter().any(|held| held.tool == tool) && self.inner.pins.changed(server).await
        {
            // Approved (or reset) since: judged again before it is refused.
            self.relist(slot).await;
            listed = connection.listed();
        }
        let tools = listed.tools;
        if let Some(found) = tools.iter().find(|t| t.name == tool) {
            return Ok(found.clone());
        }
        if let Some(held) = listed.held.iter().find(|held| held.tool == tool) {
            return Err(CallError::Held {
                server: server.to_owned(),
                tool: tool.to_owned(),
                message: held.message.clone(),
            });
        }
        if let Some((_, why)) = listed.hidden.iter().find(|(name, _)| name == tool) {
            return Err(CallError::UnknownTool {
                server: server.to_owned(),
                tool: tool.to_owned(),
                hint: format!(" (it is hidden: {why}, in `[servers.{server}]`)"),
            });
        }
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        let hint = match crate::text::closest(tool, names.iter().copied()) {
            Some(close) => format!("; did you mean `{close}`?"),
            None if names.is_empty() => "; it lists no tools".to_owned(),
            None => format!("; its tools are: {}", names.join(", ")),
        };
        Err(CallError::UnknownTool {
            server: server.to_owned(),
            tool: tool.to_owned(),
            hint,
        })
    }

    /// Calls a tool: checks the arguments, sends the call bounded by its timeout (cancelling it
    /// downstream when abandoned), and returns the server's result. Known secrets (OAuth
    /// tokens, configured credentials: `crate::redact::guard`) are refused in the arguments
    /// and replaced in the result and errors, for programs and direct calls alike.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        args: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, CallError> {
        if crate::redact::guarded_in(&args) {
            return Err(CallError::InvalidArguments {
                server: server.to_owned(),
                tool: tool.to_owned(),
                message: "the arguments hold a secret Runbyte keeps from programs (an OAuth \
                          token or a configured credential); the call was not sent"
                    .to_owned(),
            });
        }
        let mut outcome = self.call_unguarded(server, tool, args, options).await;
        match &mut outcome {
            Ok(result) => {
                if crate::redact::guard_result(result) {
                    tracing::warn!(server, tool, "its result held a secret; redacted");
                }
            }
            Err(error) => error.redact(),
        }
        outcome
    }

    async fn call_unguarded(
        &self,
        server: &str,
        tool: &str,
        args: Value,
        options: CallOptions,
    ) -> Result<CallToolResult, CallError> {
        let slot = self.slot(server)?.clone();
        let spec = self.tool(server, tool).await?;
        let (verdict, args) = validate::judge(&spec.input_schema, args).await;
        match verdict {
            validate::Verdict::Valid => {}
            validate::Verdict::Invalid(message) => {
                return Err(CallError::InvalidArguments {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    message,
                });
            }
            validate::Verdict::Unjudged => {
                if slot.with(|state| state.unjudged.insert(tool.to_owned())) {
                    tracing::warn!(
                        server,
                        tool,
                        budget = validate::BUDGET,
                        "arguments to `{server}/{tool}` could not be checked against its \
                         inputSchema within {} visits; such calls are sent unvalidated (said \
                         once per tool)",
                        validate::BUDGET
                    );
                }
            }
        }
        let Value::Object(arguments) = args else {
            return Err(CallError::InvalidArguments {
                server: server.to_owned(),
                tool: tool.to_owned(),
                message: "the arguments must be an object".to_owned(),
            });
        };
        // Only a server with an account may be sent the call a second time (below): only then
        // is a copy of the arguments kept for it.
        let mut arguments = Some(arguments);
        for attempt in 0..2 {
            let sending = match (attempt, &slot.account) {
                (0, Some(_)) => arguments.clone(),
                _ => arguments.take(),
            };
            let outcome = self
                .send_once(&slot, server, tool, sending.unwrap_or_default(), &options)
                .await;
            // A refused token (HTTP 401) is refreshed once and the call sent again: the server
            // did not run it.
            let refused = match &outcome {
                Err(error) => match error.auth() {
                    Some(failure @ AuthFailure::Unauthorized { .. }) => Some(failure.clone()),
                    _ => None,
                },
                Ok(_) => None,
            };
            // Only a refusal asks whether the server uses OAuth (that may read its file).
            let account = slot
                .account
                .as_ref()
                .filter(|account| refused.is_some() && account.uses_oauth());
            let (Some(account), Some(refused)) = (account, refused) else {
                return self.explain_scope(&slot, outcome);
            };
            account.note_challenge(&refused);
            if attempt == 1 {
                return outcome;
            }
            match account.refreshed().await {
                Ok(_) => {
                    tracing::info!(server, "the server refused its access token; refreshed it")
                }
                Err(no) => {
                    let NotOpened { reason, failure } = not_opened(no);
                    slot.set_status(Status::Failed {
                        error: reason.clone(),
                        attempts: 0,
                        failure,
                    });
                    return Err(CallError::Unavailable {
                        server: server.to_owned(),
                        reason,
                    });
                }
            }
        }
        unreachable!("the second attempt returns")
    }

    /// A 403 that asks for more scope says how to get it.
    fn explain_scope(
        &self,
        slot: &Slot,
        outcome: Result<CallToolResult, CallError>,
    ) -> Result<CallToolResult, CallError> {
        match outcome {
            Err(CallError::Protocol {
                server,
                tool,
                message,
                auth: Some(failure @ AuthFailure::InsufficientScope { .. }),
                answer,
            }) => {
                if let Some(account) = &slot.account {
                    account.note_challenge(&failure);
                    account.want_challenged_scopes();
                }
                Err(CallError::Protocol {
                    message: format!(
                        "{message}; it needs more scope: {}",
                        crate::auth::needs_login(&server)
                    ),
                    server,
                    tool,
                    auth: Some(failure),
                    answer,
                })
            }
            other => other,
        }
    }

    /// Sends a call once on the server's current connection (a new one when its token is due).
    async fn send_once(
        &self,
        slot: &Arc<Slot>,
        server: &str,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        options: &CallOptions,
    ) -> Result<CallToolResult, CallError> {
        let session = options.session.as_deref();
        let mut connection = self.connection_for(slot, session).await;
        if let Ok(open) = &connection
            && self.retire_if_due(slot, session, open).await
        {
            connection = self.connection_for(slot, session).await;
        }
        let connection = connection.map_err(|reason| CallError::Unavailable {
            server: server.to_owned(),
            reason,
        })?;
        let timeout = options
            .timeout
            .or(slot.config.call_timeout_ms.map(Duration::from_millis))
            .unwrap_or(DEFAULT_CALL_TIMEOUT);
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = Some(arguments);
        // The caller's span (a tool call's) is current: the server joins its trace (SEP-414).
        let mut meta = rmcp::model::RequestMetaObject::default();
        for (key, value) in crate::telemetry::current_fields() {
            meta.insert(key, Value::String(value));
        }
        let in_flight = connection
            .callers
            .enter(options.asker.clone(), options.notices.clone());
        // A 2026-07-28 server is told in the request which log messages the client wants (a
        // session's server was told by `logging/setLevel`). Its progress comes under the token
        // the request goes with, which is the connection's own (see `send_call`).
        if let Some(level) = options.notices.as_ref().and_then(|n| n.log_level())
            && connection.is_stateless()
            && let Ok(level) = serde_json::to_value(level)
        {
            meta.insert(LOG_LEVEL_META.to_owned(), level);
        }
        if !meta.is_empty() {
            params.meta = Some(meta);
        }
        let started = Instant::now();
        let sending = send_call(&connection, params, options, in_flight.caller());
        let outcome = tokio::time::timeout(timeout, sending).await;
        tracing::debug!(
            server,
            tool,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "call"
        ); // The server asked during the call and could not be answered: that is why it failed.
        let refused = in_flight.caller().refused();
        drop(in_flight);
        if let Some(message) = refused
            && !matches!(&outcome, Ok(Ok(Sent::Result(result))) if result.is_error != Some(true))
        {
            return Err(CallError::Input {
                server: server.to_owned(),
                tool: tool.to_owned(),
                message,
            });
        }
        match outcome {
            Ok(Ok(Sent::Result(result))) => Ok(result),
            Ok(Ok(Sent::Unanswered(message))) => Err(CallError::Input {
                server: server.to_owned(),
                tool: tool.to_owned(),
                message,
            }),
            Ok(Ok(Sent::Asked)) => Err(CallError::Asked {
                server: server.to_owned(),
                tool: tool.to_owned(),
            }),
            Err(_) => Err(CallError::Timeout {
                server: server.to_owned(),
                tool: tool.to_owned(),
                after: timeout,
            }),
            // A transport's words enter here (a failed request's error, the reason the
            // connection closed): the refusal they carry is read once.
            Ok(Err(ServiceError::McpError(error))) => Err(CallError::Protocol {
                server: server.to_owned(),
                tool: tool.to_owned(),
                auth: AuthFailure::of(&error.message),
                message: format!("{} (JSON-RPC error {})", error.message, error.code.0),
                answer: Some(Box::new(error)),
            }),
            Ok(Err(ServiceError::TransportClosed | ServiceError::TransportSend(_))) => {
                // The reader records the exit status a moment after the pipe closes.
                for _ in 0..20 {
                    if connection.close_reason().is_some() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let reason = connection
                    .close_reason()
                    .unwrap_or_else(|| "closed the connection".to_owned());
                slot.set_status(Status::Failed {
                    error: format!("{reason}; restarts on its next call"),
                    attempts: 0,
                    failure: Failure::Exited,
                });
                Err(CallError::Exited {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                    auth: AuthFailure::of(&reason),
                    reason,
                })
            }
            Ok(Err(other)) => Err(CallError::Protocol {
                server: server.to_owned(),
                tool: tool.to_owned(),
                message: other.to_string(),
                auth: None,
                answer: None,
            }),
        }
    }

    /// Closes every connection.
    pub async fn shutdown(&self) {
        self.inner.stopping.cancel();
        // Every connection at once: each close waits (bounded) until its process group is gone,
        // so one after another would add those waits up.
        let mut connections = Vec::new();
        for slot in self.inner.servers.values() {
            slot.with(|state| {
                let link = std::mem::take(&mut state.link);
                connections.extend(link.get().cloned());
                connections.extend(state.sessions.drain().filter_map(|(_, l)| l.get().cloned()));
            });
        }
        futures::future::join_all(connections.iter().map(|connection| connection.close())).await;
    }
}

/// What sending a call came to.
enum Sent {
    Result(CallToolResult),
    /// A 2026-07-28 server's question that nobody could answer, and why.
    Unanswered(String),
    /// A 2026-07-28 server's question or task, passed on to the client ([`PassThrough`]).
    Asked,
}

/// Sends a call. A 2026-07-28 server's `input_required` results are answered by `asker` and the
/// call retried with the answers and the server's `requestState`, at most
/// [`MAX_INPUT_ROUNDS`] times; a legacy server's questions during the call reach `asker`
/// through the connection's [`crate::relay::Callers`]. A task the server answers with is
/// waited for ([`awaited`]), except in a pass-through, whose client gets it.
async fn send_call(
    connection: &Connection,
    mut params: CallToolRequestParams,
    options: &CallOptions,
    caller: &crate::relay::Caller,
) -> Result<Sent, ServiceError> {
    let peer = connection.service.peer();
    let asker = options.asker.as_deref();
    // Past rmcp's service loop where the transport allows (see `pump::Sender`).
    let direct = connection
        .sender
        .as_ref()
        .map(|sender| (sender, connection.stamp.as_ref()));
    if !connection.is_stateless() {
        return match call_once(peer, params, None, caller, direct).await? {
            CallToolResponse::Complete(result) => Ok(Sent::Result(result)),
            CallToolResponse::Task(created) => awaited(peer, created, asker).await,
            _ => Err(ServiceError::UnexpectedResponse),
        };
    }
    if let Some(through) = &options.pass_through {
        params.input_responses = through.answers.clone();
        params.request_state = through.state.clone();
        let capabilities = through.capabilities.clone().map(|capabilities| {
            let mut meta = rmcp::model::RequestMetaObject::default();
            meta.insert(CLIENT_CAPABILITIES_META.to_owned(), capabilities);
            meta
        });
        return match call_once(peer, params, capabilities, caller, direct).await? {
            CallToolResponse::Complete(result) => Ok(Sent::Result(result)),
            CallToolResponse::InputRequired(asked) => {
                if let Ok(mut held) = through.asked.lock() {
                    *held = Some(asked);
                }
                Ok(Sent::Asked)
            }
            CallToolResponse::Task(task) if through.declares_tasks() => {
                if let Ok(mut held) = through.task.lock() {
                    *held = Some(task);
                }
                Ok(Sent::Asked)
            }
            // A client that did not declare the extension never gets a task: it is waited for.
            CallToolResponse::Task(task) => awaited(peer, task, options.asker.as_deref()).await,
            _ => Err(ServiceError::UnexpectedResponse),
        };
    }
    for _ in 0..MAX_INPUT_ROUNDS {
        let asked = match call_once(peer, params.clone(), None, caller, direct).await? {
            CallToolResponse::Complete(result) => return Ok(Sent::Result(result)),
            CallToolResponse::InputRequired(asked) => asked,
            CallToolResponse::Task(created) => return awaited(peer, created, asker).await,
            _ => return Err(ServiceError::UnexpectedResponse),
        };
        let answers = match answer_questions(asked.input_requests, asker).await {
            Ok(answers) => answers,
            Err(why) => return Ok(Sent::Unanswered(why)),
        };
        params.input_responses = (!answers.is_empty()).then_some(answers);
        params.request_state = asked.request_state;
    }
    Ok(Sent::Unanswered(format!(
        "it kept asking for input past {MAX_INPUT_ROUNDS} rounds"
    )))
}

/// A call the server answered with a task (SEP-2663), waited for to its end
/// ([`tasks::await_task`]): the caller (a program) does not have to know.
async fn awaited(
    peer: &rmcp::Peer<rmcp::RoleClient>,
    created: rmcp::model::CreateTaskResult,
    asker: Option<&dyn Asker>,
) -> Result<Sent, ServiceError> {
    Ok(match tasks::await_task(peer, created, asker).await? {
        tasks::Awaiting::Result(result) => Sent::Result(result),
        tasks::Awaiting::Unanswered(why) => Sent::Unanswered(why),
    })
}

/// Answers a 2026-07-28 server's `inputRequests` by `asker`, each question in turn; `Err` says
/// why one could not be (no one to ask, a refusal).
pub(super) async fn answer_questions(
    questions: Option<rmcp::model::InputRequests>,
    asker: Option<&dyn Asker>,
) -> Result<rmcp::model::InputResponses, String> {
    let mut answers = rmcp::model::InputResponses::new();
    for (key, question) in questions.unwrap_or_default() {
        let method = crate::relay::method_of(&question);
        let Some(asker) = asker else {
            return Err(format!(
                "`{method}` cannot be relayed: this execution has no client to ask"
            ));
        };
        let answer = asker
            .ask_again_able(question, crate::relay::Origin::InputRequired)
            .await?;
        answers.insert(key, answer);
    }
    Ok(answers)
}

/// One `tools/call` request, as rmcp's `call_tool_once` sends it, but with the progress token
/// rmcp gives the request recorded on the call's [`Caller`] as it goes (progress read before
/// that is kept for it a moment, see `Caller::sent_with`): the server's progress is routed by
/// it. Dropped before the answer, the request is cancelled
/// downstream (`notifications/cancelled`). `meta` goes into the request's `_meta` over what
/// rmcp puts there.
async fn call_once(
    peer: &rmcp::Peer<rmcp::RoleClient>,
    params: CallToolRequestParams,
    meta: Option<rmcp::model::RequestMetaObject>,
    caller: &crate::relay::Caller,
    direct: Option<(
        &crate::pump::Sender<rmcp::RoleClient>,
        Option<&client::Stamp>,
    )>,
) -> Result<CallToolResponse, ServiceError> {
    use rmcp::model::GetMeta as _;
    let mut request =
        rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(params));
    let routed = direct.and_then(|(sender, stamp)| Some((sender, stamp, sender.route()?)));
    let answer = if let Some((sender, stamp, routed)) = routed {
        let (id, answer) = routed.map_err(|_| ServiceError::TransportClosed)?;
        // What rmcp would add, in its order: a stateless revision's stamp, the caller's
        // `_meta`, a progress token (ids and tokens of its own are far below these).
        let token = rmcp::model::ProgressToken(id.clone());
        if let Some(stamp) = stamp {
            let stamped = request.get_meta_mut();
            stamped.set_protocol_version(stamp.protocol_version.clone());
            stamped.set_client_info(stamp.client_info.clone());
            stamped.set_client_capabilities(stamp.capabilities.clone());
        }
        if let Some(meta) = meta {
            request.get_meta_mut().extend(meta);
        }
        request.get_meta_mut().set_progress_token(token.clone());
        let message = rmcp::model::JsonRpcMessage::request(request, id.clone());
        sender
            .write(&id, &message)
            .map_err(|_| ServiceError::TransportClosed)?;
        caller.sent_with(token).await;
        let abandoned = Abandoned {
            peer: Some(peer.clone()),
            id,
        };
        let answer = match answer.await {
            Ok(rmcp::model::JsonRpcMessage::Response(response)) => Ok(response.result),
            Ok(rmcp::model::JsonRpcMessage::Error(error)) => {
                Err(ServiceError::McpError(error.error))
            }
            Ok(_) => Err(ServiceError::UnexpectedResponse),
            Err(_) => Err(ServiceError::TransportClosed),
        };
        abandoned.disarm();
        answer
    } else {
        let mut options = rmcp::service::PeerRequestOptions::no_options();
        if let Some(meta) = meta {
            options = options.with_meta(meta);
        }
        let handle = peer.send_request_with_option(request, options).await?;
        caller.sent_with(handle.progress_token.clone()).await;
        let abandoned = Abandoned {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let answer = handle.await_response().await;
        abandoned.disarm();
        answer
    };
    // rmcp hands each notification to a task of its own: progress the server sent before its
    // answer may not have been passed on yet, and must not be overtaken by it.
    if caller.has_notices() {
        caller.settle().await;
    }
    match answer? {
        rmcp::model::ServerResult::CallToolResult(result) => Ok(CallToolResponse::Complete(result)),
        rmcp::model::ServerResult::InputRequiredResult(asked) => {
            Ok(CallToolResponse::InputRequired(asked))
        }
        rmcp::model::ServerResult::CreateTaskResult(task) => Ok(CallToolResponse::Task(task)),
        // A result with no content (`{}` or `_meta` only) is a call that returned nothing.
        other => serde_json::to_value(other)
            .ok()
            .filter(|value| {
                value
                    .as_object()
                    .is_some_and(|o| o.keys().all(|k| k == "_meta"))
            })
            .and_then(|value| serde_json::from_value::<CallToolResult>(value).ok())
            .map(CallToolResponse::Complete)
            .ok_or(ServiceError::UnexpectedResponse),
    }
}

/// A request in flight that, dropped unanswered (its caller timed out or went away), tells the
/// server so.
struct Abandoned {
    peer: Option<rmcp::Peer<rmcp::RoleClient>>,
    id: rmcp::model::RequestId,
}

impl Abandoned {
    fn disarm(mut self) {
        self.peer = None;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let cancelled = rmcp::model::CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("the call was abandoned".to_owned()),
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.notify_cancelled(cancelled).await;
            });
        }
    }
}
