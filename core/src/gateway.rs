//! The gateway, assembled: the composition root that every command uses (plugins, the Hub, the
//! VFS and its codegen driver, the policies, the sandbox). One `Gateway` serves every client;
//! each client is a `server::Session`.

pub mod auto;
pub mod names;

use std::sync::Arc;

use tokio::sync::watch;

use crate::{
    audit::AuditLog,
    auth::Accounts,
    codegen::CodegenDriver,
    config::Config,
    exe::runbyte_exe,
    execute::{Executor, Gate, Parts, StateSettings},
    hub::{Hub, Transports},
    infer::Inferred,
    plugin::{self, PluginError, PluginSearch, PolicyPlugin},
    sandbox::SandboxOptions,
    telemetry::Telemetry,
    vfs::Vfs,
};

/// The names of the directly exposed tools ([`Gateway::direct_naming`]).
struct DirectNaming {
    naming: names::Naming,
    /// The tools themselves, when asked for.
    tools: std::collections::HashMap<(String, String), rmcp::model::Tool>,
    /// The ready `auto` servers that do not fit the direct budget now.
    unfit: Vec<String>,
    /// Whether clients see the direct tools without Runbyte's own (see [`auto`]).
    alone: bool,
}

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A plugin could not be used.
    #[error("{0}")]
    Plugin(#[from] PluginError),
    /// The audit log could not be opened.
    #[error("{0}")]
    Audit(String),
    /// `[telemetry]` could not be set up.
    #[error("{0}")]
    Telemetry(String),
    /// The `requestState` signing key could not be read.
    #[error("[server] state-key-file: {0}")]
    StateKey(String),
    /// The state store's URL cannot be used.
    #[error("[server] state-store: {0}")]
    StateStore(String),
}

/// Everything a running Runbyte holds: it builds the rooms (the Hub, the VFS and its codegen
/// driver, the executor) and hands each what it needs; callers reach them through its methods.
pub struct Gateway {
    /// The configuration it started with.
    config: Arc<Config>,
    /// The transport plugins, opened on first use.
    transports: Arc<Transports>,
    /// The downstream servers.
    hub: Hub,
    /// The virtual filesystem.
    vfs: Arc<Vfs>,
    /// The codegen driver, when the gateway serves the VFS.
    codegen: Option<Arc<CodegenDriver>>,
    /// The saved skills' folder.
    skills: crate::skills::Skills,
    /// Held across a refresh of the skills (the read and the VFS's update, on the blocking
    /// thread, so that a caller that stops waiting does not let it go early): refreshes end in
    /// the order they began, and the startup read of a large folder cannot finish after a
    /// save's refresh and put back a list without the skill just saved.
    skills_refreshing: Arc<std::sync::Mutex<()>>,
    /// Traces and metrics (all off unless `[telemetry]` turns them on).
    telemetry: Telemetry,
    /// Programs, their pauses, and direct calls.
    executor: Arc<Executor>,
    /// `execute_code` run as tasks (SEP-2663), in the process.
    tasks: Arc<crate::execute::ExecutionTasks>,
    ready: watch::Receiver<bool>,
    ready_tx: watch::Sender<bool>,
    /// The warnings of [`names`], each said once.
    warned: names::Warned,
    /// The `expose = "auto"` servers' catalogues, weighed once each (see [`auto`]).
    weighed: auto::Weighed,
    /// Whether the last listing showed the direct tools alone (see [`auto`]).
    alone: std::sync::atomic::AtomicBool,
}

impl Gateway {
    /// A gateway with only the Hub: for `runbyte tools` and `runbyte call`, which need no dialect
    /// or policy. Must be called inside the tokio runtime.
    pub fn hub_only(config: Config) -> Arc<Self> {
        let accounts = Accounts::new(&config);
        Self::hub_only_with(config, accounts)
    }

    /// [`Gateway::hub_only`] with the servers' OAuth accounts given (`runbyte probe` keeps its
    /// credentials in memory).
    pub fn hub_only_with(config: Config, accounts: Accounts) -> Arc<Self> {
        Self::hub_only_pinned(config, accounts, crate::pins::default_dir())
    }

    /// [`Gateway::hub_only`] whose tool pins are kept in memory alone (a first listing is
    /// pinned, nothing is read from or written to the state folder): for in-process tests and
    /// benches, which share one process and so one state folder.
    pub fn hub_only_in_memory(config: Config) -> Arc<Self> {
        let accounts = Accounts::new(&config);
        Self::hub_only_pinned(config, accounts, None)
    }

    fn hub_only_pinned(
        config: Config,
        accounts: Accounts,
        pins: Option<std::path::PathBuf>,
    ) -> Arc<Self> {
        let search = PluginSearch::from_config(&config);
        // `runbyte tools` and `runbyte call` run no execution: nothing to trace or count.
        Self::assemble(
            config,
            search,
            None,
            Vec::new(),
            None,
            Telemetry::default(),
            accounts,
            pins,
        )
    }

    /// The whole gateway: the dialect and every policy opened (an error names the plugin), the
    /// VFS kept in step with the Hub. Nothing connects until [`Gateway::start`].
    pub fn new(config: Config) -> Result<Arc<Self>, StartError> {
        let search = PluginSearch::from_config(&config);
        let dialect_name = config.codegen.dialect.clone();
        let dialect =
            plugin::open_codegen(&search, &dialect_name, &config.dialect_table(&dialect_name))?;
        let policies = config
            .sandbox
            .policy
            .names()
            .iter()
            .map(|name| plugin::open_policy(&search, name, &config.policy_table(name)))
            .collect::<Result<Vec<_>, _>>()?;
        let audit = AuditLog::from_config(&config).map_err(StartError::Audit)?;
        let servers = config.servers.keys().cloned().collect();
        let telemetry =
            Telemetry::from_config(&config.telemetry, servers).map_err(StartError::Telemetry)?;
        let accounts = Accounts::new(&config);
        let gateway = Self::assemble(
            config,
            search,
            Some(dialect),
            policies,
            audit,
            telemetry,
            accounts,
            crate::pins::default_dir(),
        );
        // A key file or a store that cannot be used is a start-up error, not a surprise at the
        // first pause.
        let state = state_settings(&gateway.config);
        state.store().map_err(StartError::StateStore)?;
        if state.key_file.is_some() {
            gateway.executor.paused().map_err(StartError::StateKey)?;
        }
        Ok(gateway)
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "each is one part of the gateway its constructors choose"
    )]
    fn assemble(
        config: Config,
        search: PluginSearch,
        dialect: Option<plugin::CodegenPlugin>,
        policies: Vec<PolicyPlugin>,
        audit: Option<AuditLog>,
        telemetry: Telemetry,
        accounts: Accounts,
        pins_dir: Option<std::path::PathBuf>,
    ) -> Arc<Self> {
        crate::redact::install(&crate::redact::Secrets::from_config(&config));
        let transports = Arc::new(Transports::new(&config, search));
        // Only a serving gateway (it has a dialect) writes pins; `runbyte tools`, `call`,
        // `probe` and `doctor` judge by them read-only, so a held tool is held there too.
        let dir = pins_dir;
        let pins = match dialect {
            Some(_) => crate::pins::Pins::new(&config, dir.as_deref(), audit.clone()),
            None => crate::pins::Pins::read_only(&config, dir.as_deref(), audit.clone()),
        };
        // With `[server] state-store`, every replica judges by the pins kept there. A URL that
        // cannot be opened is a start-up error of the serving gateway (`Gateway::new`).
        let store = config
            .server
            .state_store
            .as_deref()
            .and_then(|url| crate::state_store::StateStore::open(url).ok());
        let pins = pins.kept_in(store.clone());
        let hub = Hub::with_accounts(&config, transports.clone(), accounts, pins);
        if let Some(metrics) = telemetry.metrics() {
            metrics.only_listed(hub.tool_lister());
        }
        let vfs = Arc::new(Vfs::default());
        let code: Vec<String> = config
            .enabled_servers()
            .filter(|(name, _)| config.exposure(name).in_code())
            .map(|(name, _)| name.clone())
            .collect();
        // Only a gateway that serves the VFS shows inferred types, so only it records them.
        let inferred = dialect.as_ref().map(|_| {
            Arc::new(Inferred::new(
                &config,
                crate::infer::default_dir().as_deref(),
            ))
        });
        let codegen = dialect.map(|dialect| {
            CodegenDriver::new(dialect, hub.clone(), vfs.clone(), &code, inferred.clone())
        });
        let (ready_tx, ready) = watch::channel(false);
        let skills = crate::skills::Skills::new(config.server.skills_dir.as_deref());
        let defaults = SandboxOptions::default();
        let executor = Executor::new(Parts {
            gate: Gate::new(hub.clone(), audit, telemetry.clone(), inferred),
            policies,
            vfs: vfs.clone(),
            codegen: codegen.clone(),
            sandbox: SandboxOptions {
                worker_exe: runbyte_exe(),
                workers: config.sandbox.workers.unwrap_or(defaults.workers),
                queue: config.sandbox.queue.unwrap_or(defaults.queue),
                ..defaults
            },
            direct_only: config
                .enabled_servers()
                .filter(|(name, _)| !config.exposure(name).in_code())
                .map(|(name, _)| name.clone())
                .collect(),
            state: state_settings(&config),
            summary: config.server.summary,
        });
        let tasks = Arc::new(crate::execute::ExecutionTasks::new(
            config
                .server
                .task_timeout_ms
                .map(std::time::Duration::from_millis),
            store,
        ));
        Arc::new(Gateway {
            skills,
            skills_refreshing: Arc::default(),
            config: Arc::new(config),
            transports,
            hub,
            vfs,
            codegen,
            telemetry,
            tasks,
            executor: Arc::new(executor),
            ready,
            ready_tx,
            warned: names::Warned::default(),
            weighed: auto::Weighed::default(),
            alone: Default::default(),
        })
    }

    /// How the tools of servers exposed directly (`expose = "direct"`, `"both"`, and `"auto"`
    /// while it fits) are named (see [`names`]), and with `keep` the tools themselves: the
    /// tools of servers not ready are absent until they are. Each tool left out is warned of
    /// once.
    async fn direct_naming(&self, keep: bool) -> DirectNaming {
        let mut views = Vec::new();
        for (server, prefix) in self.config.direct_servers() {
            if let Some(view) = self.hub.server(&server).await {
                views.push((server, prefix, view));
            }
        }
        let auto = self.choose_auto(views.iter().map(|(server, _, view)| (server, view)));
        let alone = auto.iter().any(|choice| choice.alone.is_some());
        self.alone
            .store(alone, std::sync::atomic::Ordering::Relaxed);
        let unfit: Vec<String> = auto
            .into_iter()
            .filter(|choice| !choice.direct)
            .map(|choice| choice.server)
            .collect();
        let mut things = Vec::new();
        let mut tools = std::collections::HashMap::new();
        for (server, prefix, view) in &views {
            let is_auto = self.config.exposure(server) == crate::config::Expose::Auto;
            // An `auto` server is listed once it is ready and fits.
            if is_auto && (unfit.contains(server) || view.status != crate::hub::Status::Ready) {
                continue;
            }
            for tool in view.tools.iter() {
                things.push((server.clone(), prefix.clone(), tool.name.to_string()));
                if keep {
                    tools.insert((server.clone(), tool.name.to_string()), tool.clone());
                }
            }
        }
        let (naming, warnings) = names::name_all(things, "tool", &names::OWN_TOOLS, true);
        self.warned.warn(&warnings);
        DirectNaming {
            naming,
            tools,
            unfit,
            alone,
        }
    }

    /// What `expose = "auto"` decides now for each ready `auto` server (see [`auto`]).
    pub async fn auto_exposure(&self) -> Vec<auto::AutoChoice> {
        let mut views = Vec::new();
        for (server, _) in self.config.enabled_servers() {
            if let Some(view) = self.hub.server(server).await {
                views.push((server.clone(), view));
            }
        }
        self.choose_auto(views.iter().map(|(server, view)| (server, view)))
    }

    /// [`auto::choose`] over the ready `auto` servers among `views` (which hold every `auto`
    /// server that has a view): alone when every enabled server is `auto` or `direct` and
    /// every `auto` one is ready.
    fn choose_auto<'a>(
        &self,
        views: impl Iterator<Item = (&'a String, &'a crate::hub::ServerView)>,
    ) -> Vec<auto::AutoChoice> {
        use crate::config::Expose;
        let candidates: Vec<(String, u64)> = views
            .filter(|(server, view)| {
                self.config.exposure(server) == Expose::Auto
                    && view.status == crate::hub::Status::Ready
            })
            .map(|(server, view)| (server.clone(), self.weighed.weigh(server, &view.tools)))
            .collect();
        let auto_servers = self
            .config
            .enabled_servers()
            .filter(|(server, _)| self.config.exposure(server) == Expose::Auto)
            .count();
        let may_be_alone = self.config.may_list_alone() && auto_servers == candidates.len();
        let budget = self.config.direct_budget();
        let alone = may_be_alone.then(|| budget.saturating_add(crate::own_tools::surface_tokens()));
        auto::choose(&candidates, budget, alone)
    }

    /// Whether the last listing showed clients the direct tools without Runbyte's own (see
    /// [`auto`]): what the handshake's instructions follow.
    pub fn listed_alone(&self) -> bool {
        self.alone.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Decides again whether clients see the direct tools alone, and says so.
    pub async fn lists_alone(&self) -> bool {
        self.direct_naming(false).await.alone
    }

    /// The direct names left out (see [`names`]), each with why, sorted: for `runbyte tools`.
    pub async fn direct_left_out(&self) -> Vec<(String, String)> {
        let DirectNaming { naming, .. } = self.direct_naming(false).await;
        let mut left_out: Vec<(String, String)> = naming.left_out.into_iter().collect();
        left_out.sort();
        left_out
    }

    /// The tools of servers exposed directly, named with their server's prefix, with their
    /// schemas, annotations and output schemas; those of servers not ready are absent until
    /// they are, and so is a tool whose name is not an MCP tool name or would be one of
    /// Runbyte's own or another's (see [`names`]).
    pub async fn direct_tools(&self) -> Vec<rmcp::model::Tool> {
        let DirectNaming {
            naming, mut tools, ..
        } = self.direct_naming(true).await;
        naming
            .named
            .into_iter()
            .filter_map(|named| {
                let mut exposed = tools.remove(&(named.server.clone(), named.item))?;
                exposed.name = named.exposed.into();
                // A UI resource's URI (MCP Apps) is the one the client reads.
                self.hub.uris().in_tool(&named.server, &mut exposed);
                Some(exposed)
            })
            .collect()
    }

    /// The directly exposed tool listed under `name`, as [`Gateway::direct_tools`] lists it.
    pub async fn direct_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        let DirectNaming {
            naming, mut tools, ..
        } = self.direct_naming(true).await;
        let named = naming
            .named
            .into_iter()
            .find(|named| named.exposed == name)?;
        let mut exposed = tools.remove(&(named.server, named.item))?;
        exposed.name = named.exposed.into();
        Some(exposed)
    }

    /// The server and tool a directly exposed name stands for: the one listed under it; for a
    /// name left out, why (`Err`); for a name not listed, the server with the longest prefix
    /// it starts with (whose call then says why it cannot be made).
    pub async fn direct_target(&self, name: &str) -> Option<Result<(String, String), String>> {
        let DirectNaming { naming, unfit, .. } = self.direct_naming(false).await;
        let target = names::resolve(&naming, &self.config.direct_servers(), name)?;
        // An `auto` server whose catalogue does not fit the direct budget now is not listed:
        // its tools are called from programs.
        if let Ok((server, _)) = &target
            && unfit.contains(server)
        {
            return Some(Err(format!(
                "`{name}` is not listed: server `{server}` is exposed `auto` and its tools' \
                 definitions do not fit the direct budget (`runbyte tools` says why); call it \
                 from a program (`./servers/{server}`)"
            )));
        }
        Some(target)
    }

    /// Reads the skills folder again (on a blocking thread) and serves what it holds under
    /// `/skills`; only each skill's name, description, signature and digests stay in memory.
    pub async fn refresh_skills(&self) {
        let (skills, vfs) = (self.skills.clone(), self.vfs.clone());
        let refreshing = self.skills_refreshing.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let _one_at_a_time = refreshing.lock().unwrap_or_else(|p| p.into_inner());
            let index = skills.refresh();
            let (files, entries) = crate::skills::vfs_files(&skills, &index);
            vfs.set_skills(files, entries);
        })
        .await;
    }

    /// The prompts of every server that offers them, each named with its server's prefix
    /// (`direct-prefix`, else `<server>_`); prompts that would share a name are left out, with
    /// a warning (see [`names`]).
    pub async fn prompts(&self) -> Vec<rmcp::model::Prompt> {
        let (naming, mut prompts) = self.prompt_naming().await;
        naming
            .named
            .into_iter()
            .filter_map(|named| {
                let mut prompt = prompts.remove(&(named.server, named.item))?;
                prompt.name = named.exposed;
                Some(prompt)
            })
            .collect()
    }

    async fn prompt_naming(
        &self,
    ) -> (
        names::Naming,
        std::collections::HashMap<(String, String), rmcp::model::Prompt>,
    ) {
        let prefixes: std::collections::HashMap<String, String> =
            self.config.prefixes().into_iter().collect();
        let mut things = Vec::new();
        let mut all = std::collections::HashMap::new();
        for (server, prompts) in self.hub.list_prompts().await {
            let prefix = prefixes.get(&server).cloned().unwrap_or_default();
            for prompt in prompts {
                things.push((server.clone(), prefix.clone(), prompt.name.clone()));
                all.insert((server.clone(), prompt.name.clone()), prompt);
            }
        }
        let (naming, warnings) = names::name_all(things, "prompt", &[], false);
        self.warned.warn(&warnings);
        (naming, all)
    }

    /// The server and prompt a prompt name given to clients stands for, by the rule of
    /// [`Gateway::direct_target`] ([`names::resolve`]): the prompt listed under it; for a name
    /// two would share, why (`Err`); a name not listed goes to the server with the longest
    /// prefix it starts with.
    pub async fn prompt_target(&self, name: &str) -> Option<Result<(String, String), String>> {
        let (naming, _) = self.prompt_naming().await;
        names::resolve(&naming, &self.config.prefixes(), name)
    }

    /// The configuration it started with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The transport plugins (their listeners serve clients).
    pub fn transports(&self) -> &Arc<Transports> {
        &self.transports
    }

    /// The downstream servers.
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The virtual filesystem.
    pub fn vfs(&self) -> &Vfs {
        &self.vfs
    }

    /// The saved skills' folder.
    pub fn skills(&self) -> &crate::skills::Skills {
        &self.skills
    }

    /// Traces and metrics.
    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    /// Runs programs, their pauses and resumptions, and direct calls.
    pub fn executor(&self) -> &Arc<Executor> {
        &self.executor
    }

    /// The executions run as tasks.
    pub fn tasks(&self) -> &Arc<crate::execute::ExecutionTasks> {
        &self.tasks
    }

    /// A client session ended: its share of the servers and its token totals go.
    pub async fn end_session(&self, session: &str) {
        self.hub.end_session(session).await;
        self.executor.forget(session);
    }

    /// Stops the servers and sends what telemetry holds: the last thing a command does.
    pub async fn shutdown(&self) {
        self.hub.shutdown().await;
        self.telemetry.shutdown().await;
    }

    /// Connects every server and generates the VFS; then keeps the VFS in step. Returns once
    /// the first round is done (each server connected or failed).
    pub async fn start(self: &Arc<Self>) {
        self.refresh_skills().await;
        if self.codegen.is_some() {
            // The tokenizer's tables take a moment to load: not on the first execution's path.
            tokio::task::spawn_blocking(crate::tokens::warm);
        }
        self.hub.start().await;
        if let Some(codegen) = &self.codegen {
            let events = self.hub.subscribe();
            codegen.catch_up().await;
            tokio::spawn(codegen.clone().run(events));
        }
        // A store that does not answer is told at start, not at the first large pause; nothing
        // waits on it (a pause without it resumes only on its replica).
        if self.config.server.state_store.is_some()
            && let Ok(paused) = self.executor.paused()
            && let Some(store) = paused.store().cloned()
        {
            tokio::spawn(async move {
                if let Err(error) = store.ping().await {
                    tracing::warn!(
                        "{error}: until it answers, executions resume only where they paused"
                    );
                }
            });
        }
        let _ = self.ready_tx.send(true);
    }

    /// Waits until [`Gateway::start`] has finished its first round.
    pub async fn ready(&self) {
        let mut ready = self.ready.clone();
        let _ = ready.wait_for(|ready| *ready).await;
    }
}

/// Where paused executions' state is signed and shared, as `[server]` says.
fn state_settings(config: &Config) -> StateSettings {
    StateSettings {
        key_file: config.server.state_key_file.clone(),
        store: config.server.state_store.clone(),
    }
}
