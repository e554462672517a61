//! The MCP handler: what the server lists, and how the handshake and `tools/list` misbehave.
//!
//! One [`State`] is shared by every connection of the process (every HTTP or SSE session), so
//! `change_tools` and `cancelled_count` see the whole process, as a gateway's test would.

use std::borrow::Cow;
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskMethod, CancelTaskParams,
    CancelledNotificationParam, CompleteRequestMethod, CompleteRequestParams, CompleteResult,
    DiscoverResult, GetPromptRequestMethod, GetPromptRequestParams, GetPromptResponse,
    GetTaskMethod, GetTaskParams, GetTaskResult, Implementation, InitializeRequestParams,
    InitializeResult, ListPromptsRequestMethod, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestMethod, ReadResourceRequestParams, ReadResourceResponse, Resource,
    ResourceTemplate, ServerCapabilities, ServerConfig, SetLevelRequestMethod,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestMethod,
    UnsubscribeRequestParams, UpdateTaskMethod, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext, SubscriptionSink};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};

use crate::calls;
use crate::catalog;
use crate::cli::{Mode, Settings};
use crate::conformance;

pub const SERVER_NAME: &str = "runbyte-test-server";

const INSTRUCTIONS: &str = "Runbyte's test server: tools that misbehave on purpose. \
                            See `runbyte-test-server --help`.";

/// Exit code of `--mode crash-on-initialize`.
pub const CRASH_ON_INITIALIZE_CODE: i32 = 3;
/// Exit code of `--mode crash-on-list`.
pub const CRASH_ON_LIST_CODE: i32 = 4;

/// What every connection of the process shares.
#[derive(Debug)]
pub struct State {
    pub settings: Settings,
    fixed_tools: Vec<Tool>,
    added_tools: Mutex<Vec<Tool>>,
    /// Descriptions `change_tools` gave, by tool name.
    descriptions: Mutex<std::collections::BTreeMap<String, String>>,
    cancelled: AtomicU64,
    /// `tools/call` requests so far (every tool but `ask`).
    calls: AtomicU64,
    /// `tools/list` requests so far.
    lists: AtomicU64,
    /// Clients that connected through `initialize`; told of tool list changes.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// 2026-07-28 clients' `subscriptions/listen` streams; told of tool list changes.
    subscriptions: Mutex<Vec<(u64, SubscriptionSink)>>,
    next_subscription: AtomicU64,
    /// Kept so that the grandchildren stay ours to reap if they end before we do.
    pub grandchildren: Mutex<Vec<Child>>,
    /// What `--mode conformance`'s fixtures remember.
    pub fixture: conformance::Fixture,
}

/// A poisoned lock only means another call panicked while holding it; the data stays usable.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl State {
    pub fn new(settings: Settings) -> Arc<Self> {
        let fixed_tools = catalog::fixed_tools(&settings);
        Arc::new(Self {
            settings,
            fixed_tools,
            added_tools: Mutex::new(Vec::new()),
            descriptions: Mutex::new(Default::default()),
            cancelled: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            lists: AtomicU64::new(0),
            peers: Mutex::new(Vec::new()),
            subscriptions: Mutex::new(Vec::new()),
            next_subscription: AtomicU64::new(0),
            grandchildren: Mutex::new(Vec::new()),
            fixture: conformance::Fixture::default(),
        })
    }

    /// The sessions still connected and the `subscriptions/listen` streams, to notify.
    pub fn listeners(&self) -> (Vec<Peer<RoleServer>>, Vec<SubscriptionSink>) {
        lock(&self.peers).retain(|peer| !peer.is_transport_closed());
        let sinks = lock(&self.subscriptions)
            .iter()
            .map(|(_, sink)| sink.clone())
            .collect();
        (lock(&self.peers).clone(), sinks)
    }

    pub fn cancelled_count(&self) -> u64 {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// Counts a `tools/call` request.
    pub fn count_call(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }

    /// How many `tools/call` requests arrived so far (every tool but `ask`), this one included.
    pub fn calls_count(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    /// How many `tools/list` requests arrived so far.
    pub fn list_count(&self) -> u64 {
        self.lists.load(Ordering::SeqCst)
    }

    /// Every tool, in listing order.
    pub fn all_tools(&self) -> Vec<Tool> {
        let mut tools = self.fixed_tools.clone();
        tools.extend(lock(&self.added_tools).iter().cloned());
        let descriptions = lock(&self.descriptions);
        for tool in &mut tools {
            if let Some(description) = descriptions.get(tool.name.as_ref()) {
                tool.description = Some(description.clone().into());
            }
        }
        changed_on_disk(tools)
    }

    /// Gives the listed tool `name` a new description.
    pub fn describe(&self, name: &str, description: &str) {
        lock(&self.descriptions).insert(name.to_owned(), description.to_owned());
    }

    /// Whether `name` is a listed tool without behaviour of its own (added by a mode or by
    /// `change_tools`): those answer with their name and arguments.
    pub fn is_echo_tool(&self, name: &str) -> bool {
        let listed = |tool: &Tool| tool.name == name;
        (self.fixed_tools.iter().any(listed) && !calls::is_normal_tool(name))
            || lock(&self.added_tools).iter().any(listed)
            || (self.settings.has(Mode::BrokenSchemas) && catalog::BROKEN.contains(&name))
    }

    /// Adds the next `added_<k>` tool and returns its name.
    pub fn add_tool(&self) -> String {
        let mut added = lock(&self.added_tools);
        let tool = catalog::added_tool(added.len() + 1);
        let name = tool.name.to_string();
        added.push(tool);
        name
    }

    /// Sends `notifications/tools/list_changed` to every client still connected; returns how
    /// many were told.
    pub async fn notify_tools_changed(&self) -> usize {
        if self.settings.list_ttl_ms.is_some() {
            return 0;
        }
        let peers: Vec<_> = lock(&self.peers).clone();
        let sinks: Vec<_> = lock(&self.subscriptions)
            .iter()
            .map(|(_, sink)| sink.clone())
            .collect();
        let mut told = 0;
        for peer in peers {
            if peer.notify_tool_list_changed().await.is_ok() {
                told += 1;
            }
        }
        for sink in sinks {
            if sink.notify_tool_list_changed().await.is_ok() {
                told += 1;
            }
        }
        lock(&self.peers).retain(|peer| !peer.is_transport_closed());
        told
    }

    /// The `page_size` tools after `cursor` (an offset), and the cursor of the next page.
    fn page(&self, cursor: Option<&str>) -> Result<ListToolsResult, ErrorData> {
        let tools = self.all_tools();
        let start = match cursor {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|start| *start <= tools.len())
                .ok_or_else(|| {
                    ErrorData::invalid_params(
                        format!("tools/list: invalid cursor {cursor:?}"),
                        None,
                    )
                })?,
        };
        let size = self.settings.page_size;
        let end = if size == 0 {
            tools.len()
        } else {
            start.saturating_add(size).min(tools.len())
        };
        let mut result = ListToolsResult::with_all_items(tools[start..end].to_vec());
        result.ttl_ms = self.settings.list_ttl_ms;
        if end < tools.len() {
            result.next_cursor = Some(end.to_string());
        }
        Ok(result)
    }
}

/// The handler; cheap to clone, one per connection.
#[derive(Debug, Clone)]
pub struct TestServer {
    state: Arc<State>,
}

impl TestServer {
    pub fn new(state: Arc<State>) -> Self {
        Self { state }
    }

    /// The crash and hang modes act on the opening handshake, whichever form it takes.
    async fn on_handshake(&self) {
        if self.state.settings.has(Mode::CrashOnInitialize) {
            crate::exit_now(CRASH_ON_INITIALIZE_CODE, "crashing on initialize");
        }
        if self.state.settings.has(Mode::HangOnInitialize) {
            eprintln!("{SERVER_NAME}: hanging on initialize");
            std::future::pending::<()>().await;
        }
    }
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        let resources = [Mode::HugeResources, Mode::Apps];
        let capabilities = if conformance::serving(&self.state) {
            let mut capabilities = conformance::capabilities();
            // `--list-ttl-ms`: no list announces its changes.
            if self.state.settings.list_ttl_ms.is_some() {
                for changed in [
                    capabilities.tools.as_mut().map(|c| &mut c.list_changed),
                    capabilities.prompts.as_mut().map(|c| &mut c.list_changed),
                    capabilities.resources.as_mut().map(|c| &mut c.list_changed),
                ]
                .into_iter()
                .flatten()
                {
                    *changed = None;
                }
            }
            capabilities
        } else if resources.iter().any(|mode| self.state.settings.has(*mode)) {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .build()
        } else if self.state.settings.list_ttl_ms.is_some() {
            ServerCapabilities::builder().enable_tools().build()
        } else {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build()
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        match &self.state.settings.max_protocol_version {
            Some(max) => Cow::Borrowed(ProtocolVersion::known_up_to(max)),
            None => Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS),
        }
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.on_handshake().await;
        context.peer.set_peer_info(request.clone());
        {
            let mut peers = lock(&self.state.peers);
            peers.retain(|peer| !peer.is_transport_closed());
            peers.push(context.peer.clone());
        }
        self.negotiate_initialize(&request)
    }

    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        self.on_handshake().await;
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let settings = &self.state.settings;
        let earlier = self.state.lists.fetch_add(1, Ordering::SeqCst);
        if settings.has(Mode::HangOnRelist) && earlier > 0 {
            eprintln!(
                "{SERVER_NAME}: hanging on tools/list number {}",
                earlier + 1
            );
            std::future::pending::<()>().await;
        }
        if settings.has(Mode::CrashOnList) {
            crate::exit_now(CRASH_ON_LIST_CODE, "crashing on tools/list");
        }
        if settings.has(Mode::HangOnList) {
            eprintln!("{SERVER_NAME}: hanging on tools/list");
            std::future::pending::<()>().await;
        }
        if !settings.list_delay.is_zero() {
            tokio::time::sleep(settings.list_delay).await;
        }
        if settings.has(Mode::ListError) {
            return Err(ErrorData::internal_error(
                "tools/list fails on purpose (--mode list-error)",
                None,
            ));
        }
        self.state
            .page(request.as_ref().and_then(|params| params.cursor.as_deref()))
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        if self.state.settings.has(Mode::Apps) {
            return Ok(crate::apps::resources());
        }
        if conformance::serving(&self.state) {
            return Ok(conformance::resources::list(&self.state));
        }
        const TOTAL: usize = 3000;
        const PAGE: usize = 500;
        let start: usize = request
            .and_then(|params| params.cursor)
            .and_then(|cursor| cursor.parse().ok())
            .unwrap_or(0);
        let description = "d".repeat(2048);
        let resources = (start..(start + PAGE).min(TOTAL))
            .map(|n| {
                Resource::new(
                    format!("test://item/{n}"),
                    format!("item {n} */ \u{1b}]0;owned\u{7} \u{202e}reversed"),
                )
                .with_description(description.clone())
            })
            .collect();
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = (start + PAGE < TOTAL).then(|| (start + PAGE).to_string());
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        if self.state.settings.has(Mode::Apps) {
            return Ok(crate::apps::templates());
        }
        if conformance::serving(&self.state) {
            return Ok(conformance::resources::templates());
        }
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new("test://item/{id}", "item"),
        ]))
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if conformance::serving(&self.state) {
            conformance::resources::subscribe(&self.state, &request.uri);
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !conformance::serving(&self.state) {
            return Err(ErrorData::method_not_found::<UnsubscribeRequestMethod>());
        }
        conformance::resources::unsubscribe(&self.state, &request.uri);
        Ok(())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if self.state.settings.has(Mode::Apps) {
            return crate::apps::read(&request).map(Into::into);
        }
        if !conformance::serving(&self.state) {
            return Err(ErrorData::method_not_found::<ReadResourceRequestMethod>());
        }
        conformance::resources::read(&self.state, &request)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        if !conformance::serving(&self.state) {
            return Err(ErrorData::method_not_found::<ListPromptsRequestMethod>());
        }
        conformance::prompts::list(&self.state).map(|mut listed| {
            listed.ttl_ms = self.state.settings.list_ttl_ms;
            listed
        })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if !conformance::serving(&self.state) {
            return Err(ErrorData::method_not_found::<GetPromptRequestMethod>());
        }
        conformance::prompts::get(&self.state, request, context).await
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        if !conformance::serving(&self.state) {
            return Err(ErrorData::method_not_found::<CompleteRequestMethod>());
        }
        conformance::prompts::completion(&request)
    }

    #[expect(
        deprecated,
        reason = "logging is deprecated by SEP-2577; the conformance suite still tests it"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        conformance::set_level(&self.state, &request, &context)
            .ok_or_else(ErrorData::method_not_found::<SetLevelRequestMethod>)
    }

    /// The schema rmcp checks `Mcp-Param-*` headers against (SEP-2243).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.state
            .all_tools()
            .into_iter()
            .find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if conformance::is_fixture_tool(&self.state, &request.name) {
            return conformance::call_tool(&self.state, request, context).await;
        }
        calls::call(&self.state, request, context).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        if !conformance::serving(&self.state) {
            return Err(ErrorData::method_not_found::<GetTaskMethod>());
        }
        conformance::tasks::get(&self.state, &request)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !conformance::serving(&self.state) {
            return Err(ErrorData::method_not_found::<UpdateTaskMethod>());
        }
        conformance::tasks::update(&self.state, request)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !conformance::serving(&self.state) {
            return Err(ErrorData::method_not_found::<CancelTaskMethod>());
        }
        conformance::tasks::cancel(&self.state, &request)
    }

    async fn on_cancelled(
        &self,
        _notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.state.cancelled.fetch_add(1, Ordering::SeqCst);
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed;
        // rmcp keeps only what the capabilities advertise: these need `--mode conformance`.
        accepted.prompts_list_changed = requested.prompts_list_changed;
        accepted.resources_list_changed = requested.resources_list_changed;
        accepted.resource_subscriptions = requested.resource_subscriptions.clone();
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        // Request ids repeat across connections, so each subscription gets a key of its own.
        let key = self.state.next_subscription.fetch_add(1, Ordering::SeqCst);
        lock(&self.state.subscriptions).push((key, context.sink().clone()));
        context.cancelled().await;
        lock(&self.state.subscriptions).retain(|(other, _)| *other != key);
        Ok(())
    }
}

#[cfg(test)]
mod tests;

/// The variable naming a JSON file of changes to the listed tools, read at every listing, so
/// that a change survives a restart: `{"<tool>": {"description": .., "inputSchema": ..,
/// "annotations": .., "name": "<its new name>"}}`, each field replacing the tool's; a prompt's
/// under `"prompt:<name>"`.
pub const TOOL_CHANGES_VAR: &str = "RUNBYTE_TEST_TOOL_CHANGES";

fn changed_on_disk(tools: Vec<Tool>) -> Vec<Tool> {
    changed_listing(tools, "", |tool| tool.name.to_string())
}

/// `items` with the changes of [`TOOL_CHANGES_VAR`]'s file under `prefix` + each one's name
/// (`prompt:<name>` for prompts) applied.
pub fn changed_listing<T: serde::Serialize + serde::de::DeserializeOwned>(
    items: Vec<T>,
    prefix: &str,
    name: impl Fn(&T) -> String,
) -> Vec<T> {
    let Some(file) = std::env::var_os(TOOL_CHANGES_VAR) else {
        return items;
    };
    let changes: serde_json::Map<String, serde_json::Value> = std::fs::read_to_string(&file)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    items
        .into_iter()
        .map(|item| {
            let key = format!("{prefix}{}", name(&item));
            let Some(serde_json::Value::Object(change)) = changes.get(&key) else {
                return item;
            };
            let Ok(serde_json::Value::Object(mut listed)) = serde_json::to_value(&item) else {
                return item;
            };
            listed.extend(change.clone());
            serde_json::from_value(serde_json::Value::Object(listed)).unwrap_or(item)
        })
        .collect()
}
