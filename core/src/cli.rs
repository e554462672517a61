//! The command line. It only turns flags into settings and calls into the library.

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use clap::{Parser, Subcommand};
use runbyte_plugin_api::PluginKind;
use serde_json::{Value, json};

use crate::{
    auth::AuthFailure,
    auth::{Account, Accounts, Opener},
    config::{self, Auth, Config, Protocol},
    gateway::Gateway,
    hub::{CallOptions, Failure, Status},
    plugin::{self, PluginInfo},
    server::{self, ServeOptions},
};

// Everything the CLI prints goes through these: text a client or a server wrote (skill
// descriptions and schemas, tool names and descriptions, errors, a program's result) may hold
// control characters, and a terminal obeys them (an OSC 52 clipboard write, a title change).
// They are shown escaped instead (see `crate::text::terminal`); line feeds and tabs stay.
macro_rules! say {
    () => { println!() };
    ($($arg:tt)*) => { println!("{}", crate::text::terminal(&format!($($arg)*), true)) };
}
macro_rules! say_part {
    ($($arg:tt)*) => { print!("{}", crate::text::terminal(&format!($($arg)*), true)) };
}
macro_rules! say_err {
    ($($arg:tt)*) => { eprintln!("{}", crate::text::terminal(&format!($($arg)*), true)) };
}

/// Runbyte: an MCP code-mode gateway.
#[derive(Debug, Parser)]
#[command(name = "runbyte", version, about, long_about = None)]
pub struct Cli {
    /// The configuration file (default: ./runbyte.toml, else the user's own
    /// (~/.config/runbyte/runbyte.toml), else the built-in default). Empty means none given: a
    /// launcher's unset setting (the Claude Desktop extension's) passes "".
    #[arg(long, short, global = true, env = "RUNBYTE_CONFIG",
          value_parser = clap::builder::TypedValueParser::map(clap::builder::OsStringValueParser::new(), PathBuf::from))]
    pub config: Option<PathBuf>,
    /// What to log on stderr: error, warn, info, debug, trace, or a tracing filter.
    #[arg(long, global = true, default_value = "info,rmcp=error")]
    pub log_level: String,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What to do; `serve` when none is given.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve MCP clients (the default).
    Serve {
        /// The listener: stdio, http, sse, or a third-party transport (overrides [server] listen).
        #[arg(long)]
        listen: Option<String>,
        /// The address http/sse listen on (overrides [server] bind).
        #[arg(long)]
        bind: Option<String>,
    },
    /// Load the configuration and every plugin, start every server, report each by name.
    Check,
    /// List the plugins found: kind, name, versions, path.
    Plugins,
    /// Add Runbyte to an MCP client's configuration (Claude Desktop, Claude Code, Cursor, VS
    /// Code, Windsurf); with --move-servers, move the servers configured there into
    /// runbyte.toml so that the client sees Runbyte alone. Every file changed is backed up
    /// first; `runbyte setup --undo` restores them.
    Setup {
        /// The client.
        #[arg(required_unless_present = "undo")]
        client: Option<crate::os_paths::Client>,
        /// The client's configuration file (default: where the client keeps it on this OS).
        #[arg(long, value_name = "PATH")]
        config_file: Option<PathBuf>,
        /// The runbyte.toml the client will start Runbyte with; created from the default
        /// configuration when missing (default: --config or RUNBYTE_CONFIG when given, else
        /// the user's own: ~/.config/runbyte/runbyte.toml, ~/Library/Application
        /// Support/runbyte/runbyte.toml, %APPDATA%\runbyte\runbyte.toml).
        #[arg(long, value_name = "PATH")]
        runbyte_config: Option<PathBuf>,
        /// Move the client's other servers into runbyte.toml and out of the client's file.
        #[arg(long)]
        move_servers: bool,
        /// Print the diff of each file it would change; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Restore the files the last `runbyte setup` (of CLIENT, when given) changed.
        #[arg(long, conflicts_with_all = ["config_file", "runbyte_config", "move_servers", "dry_run"])]
        undo: bool,
        /// With --undo: restore files changed since setup wrote them too.
        #[arg(long, requires = "undo")]
        force: bool,
    },
    /// Check this machine's Runbyte, one line each: the binary, plugin folders and plugins,
    /// the configuration, each server, and each MCP client's configuration. Exit code 0 when
    /// nothing is wrong.
    Doctor,
    /// Convert a Claude Desktop, Cursor or VS Code `mcpServers` JSON file to [servers.*] tables.
    Import {
        /// The JSON file.
        file: PathBuf,
    },
    /// A small built-in MCP server over stdio, used by the default configuration.
    DemoServer,
    /// A sandbox worker process, started by the sandbox itself (stdin/stdout protocol).
    #[command(hide = true)]
    Worker {
        /// Ignored: a label that tells workers apart in a process listing.
        label: Vec<String>,
    },
    /// Hosts one plugin for an isolated parent (`isolate = true`); not for people.
    #[command(hide = true)]
    PluginHost {
        /// The plugin library.
        path: PathBuf,
        /// Its kind: transport, codegen or policy.
        kind: String,
    },
    /// List the downstream servers' tools and status.
    Tools {
        /// Only this server.
        server: Option<String>,
    },
    /// List a folder of the virtual filesystem.
    Ls {
        /// The folder.
        #[arg(default_value = "/servers")]
        path: String,
        /// Show each tool's one-line description.
        #[arg(long, short = 'l')]
        descriptions: bool,
    },
    /// Print a module of the virtual filesystem.
    Cat {
        /// The file.
        path: String,
    },
    /// Find tools by what they do.
    Search {
        /// Words to look for.
        query: Vec<String>,
        /// Most hits to show.
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// Run a program (a file, or `-` for stdin) as `execute_code` would; print its result,
    /// console output and summary.
    Exec {
        /// The program's file, or `-`.
        file: PathBuf,
    },
    /// Connect to an MCP server at a URL as Runbyte would (streamable HTTP, falling back to
    /// SSE), list its tools, and call each one with arguments made from its schema (or the
    /// calls given); questions the server asks are answered unattended (accepting the
    /// defaults). Exit code 0 when every call succeeded.
    Probe {
        /// The server's URL.
        url: String,
        /// The MCP revision to speak: auto, 2026-07-28, or a handshake revision (2025-11-25...).
        #[arg(long, default_value = "auto")]
        protocol: String,
        /// The calls to make instead of one per tool: a JSON array of {"name", "arguments"}
        /// (or an object whose `toolCalls` is one).
        #[arg(long)]
        calls: Option<String>,
        /// How to authorize when the server asks (as `auth` in runbyte.toml): `oauth` logs in
        /// on the spot (the URL is printed and opened with $BROWSER), `client-credentials`
        /// needs --client-id and --client-secret. Nothing is kept afterwards.
        #[arg(long)]
        auth: Option<String>,
        /// A client id registered beforehand (`client-id`).
        #[arg(long)]
        client_id: Option<String>,
        /// Its secret (`client-secret`).
        #[arg(long)]
        client_secret: Option<String>,
        /// A client ID metadata document's URL (`client-metadata-url`).
        #[arg(long)]
        client_metadata_url: Option<String>,
    },
    /// Log in to an HTTP server that needs OAuth: prints the authorization URL (and opens a
    /// browser when there is one), waits for the redirect on a loopback port, and keeps the
    /// tokens in a private file under the user's state folder.
    Login {
        /// The server's name in runbyte.toml.
        server: String,
        /// Only print the URL; do not open a browser.
        #[arg(long)]
        no_browser: bool,
    },
    /// Forget the tokens `runbyte login` kept for a server.
    Logout {
        /// The server's name in runbyte.toml.
        server: String,
    },
    /// Print a shell's completion script for runbyte (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Tool definition pins: list them, show a held change, approve it, or forget a server's.
    Pins {
        #[command(subcommand)]
        action: crate::pins::cli::PinsAction,
    },
    /// List the saved skills (name, signature, description), or delete one.
    Skills {
        /// `delete NAME` deletes a skill.
        #[command(subcommand)]
        action: Option<SkillsAction>,
    },
    /// Totals from the audit log: executions, tool calls, and the tokens executions returned
    /// against those of the tool results they read, per server.
    Stats {
        /// The audit log (default: `[server] audit-log`).
        #[arg(long)]
        audit: Option<PathBuf>,
    },
    /// Call one downstream tool and print its result.
    Call {
        /// The server's name.
        server: String,
        /// The tool's name.
        tool: String,
        /// The arguments, a JSON object.
        #[arg(default_value = "{}")]
        args: String,
    },
}

/// What `runbyte skills` does besides listing.
#[derive(Subcommand, Debug)]
pub enum SkillsAction {
    /// Delete a saved skill.
    Delete {
        /// The skill's name.
        name: String,
    },
}

/// Runs the command line; the process's exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::logging::init(&cli.log_level);
    let command = cli.command.unwrap_or(Command::Serve {
        listen: None,
        bind: None,
    });
    if let Command::Worker { .. } = command {
        return crate::sandbox::worker_main();
    }
    if let Command::DemoServer = command {
        return block_on(async {
            match crate::demo::serve_stdio().await {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => fail(&format!("demo server: {error}")),
            }
        });
    }
    if let Command::PluginHost { path, kind } = &command {
        return plugin::serve_isolated(path, kind);
    }
    if let Command::Import { file } = &command {
        return import(file);
    }
    // An empty --config/RUNBYTE_CONFIG is none given (see `Cli::config`).
    let given = cli.config.filter(|path| !path.as_os_str().is_empty());
    if let Command::Setup {
        client,
        config_file,
        runbyte_config,
        move_servers,
        dry_run,
        undo,
        force,
    } = command
    {
        return crate::setup::main(crate::setup::Options {
            client,
            config_file,
            // `--config` / RUNBYTE_CONFIG name the runbyte.toml in use: set up with that one.
            runbyte_config: runbyte_config.or(given),
            move_servers,
            dry_run,
            undo,
            force,
        });
    }
    if let Command::Doctor = command {
        // Doctor reports a configuration that does not load instead of stopping at it.
        return block_on(crate::doctor::main(given.as_deref()));
    }
    if let Command::Completions { shell } = command {
        let mut command = <Cli as clap::CommandFactory>::command();
        clap_complete::generate(shell, &mut command, "runbyte", &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    let config = match Config::find(given.as_deref()) {
        Ok(config) => config,
        Err(error) => return fail(&error.to_string()),
    };
    if let Command::Skills { action } = &command {
        return skills(&config, action.as_ref());
    }
    if let Command::Pins { action } = &command {
        return match crate::pins::cli::main(&config, action) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => fail(&error),
        };
    }
    // One client over stdio: its work hops between fewer threads on one async thread (each hop
    // to a thread asleep on another CPU is a wake-up a direct call does not pay). A listener
    // that serves many clients gets one per CPU.
    let one_client = matches!(
        &command,
        Command::Serve { listen, .. }
            if listen.as_deref().unwrap_or(&config.server.listen) == "stdio"
    );
    if matches!(command, Command::Serve { .. }) {
        crate::platform::memory::one_arena_per_core();
    }
    block_on_with(one_client.then_some(1), async move {
        match command {
            Command::Serve { listen, bind } => serve(config, listen, bind).await,
            Command::Check => check(config).await,
            Command::Plugins => plugins(&config),
            Command::Tools { server } => tools(config, server).await,
            Command::Call { server, tool, args } => call(config, &server, &tool, &args).await,
            Command::Probe {
                url,
                protocol,
                calls,
                auth,
                client_id,
                client_secret,
                client_metadata_url,
            } => {
                let credentials = ProbeCredentials {
                    auth,
                    client_id,
                    client_secret,
                    client_metadata_url,
                };
                probe(config, &url, &protocol, calls.as_deref(), credentials).await
            }
            Command::Login { server, no_browser } => login(config, &server, no_browser).await,
            Command::Logout { server } => logout(&config, &server),
            Command::Exec { file } => exec(config, &file).await,
            Command::Stats { audit } => stats(&config, audit),
            Command::Ls { path, descriptions } => {
                vfs_command(config, |snapshot| {
                    snapshot
                        .list(&path, descriptions)
                        .map_err(|e| e.to_string())
                })
                .await
            }
            Command::Cat { path } => {
                vfs_command(config, |snapshot| {
                    snapshot
                        .read(&path)
                        .map(|c| c.to_string())
                        .map_err(|e| e.to_string())
                })
                .await
            }
            Command::Search { query, limit } => {
                let query = query.join(" ");
                vfs_command(config, |snapshot| {
                    let hits = snapshot.search(&query, limit);
                    if hits.is_empty() {
                        return Err(format!("no tool matches `{query}`"));
                    }
                    Ok(hits
                        .iter()
                        .map(|(tool, score)| {
                            format!(
                                "{:>3}  {}  {}\n     {}\n",
                                score, tool.path, tool.summary, tool.signature
                            )
                        })
                        .collect())
                })
                .await
            }
            Command::DemoServer
            | Command::Skills { .. }
            | Command::Pins { .. }
            | Command::Completions { .. }
            | Command::Import { .. }
            | Command::Setup { .. }
            | Command::Doctor
            | Command::PluginHost { .. }
            | Command::Worker { .. } => ExitCode::SUCCESS,
        }
    })
}

/// `runbyte skills`: what the skills folder holds, or `delete NAME`.
fn skills(config: &Config, action: Option<&SkillsAction>) -> ExitCode {
    let skills = crate::skills::Skills::new(config.server.skills_dir.as_deref());
    if let Some(SkillsAction::Delete { name }) = action {
        return match skills.delete(name) {
            Ok(()) => {
                say!("deleted skill `{name}` from {}", skills.dir().display());
                ExitCode::SUCCESS
            }
            Err(error) => fail(&error),
        };
    }
    let all = skills.refresh();
    if all.is_empty() {
        say!(
            "no skills in {} (save one with the save_skill tool)",
            skills.dir().display()
        );
        return ExitCode::SUCCESS;
    }
    say!("{} skills in {}", all.len(), skills.dir().display());
    // A skill's description and schema are a client's text: one line each, escaped.
    let line = |text: &str| crate::text::terminal(text, false).into_owned();
    for skill in all.iter() {
        say!(
            "{}  {}\n  {}",
            skill.name,
            line(&skill.signature),
            line(skill.description.lines().next().unwrap_or_default())
        );
    }
    ExitCode::SUCCESS
}

fn block_on(future: impl Future<Output = ExitCode>) -> ExitCode {
    block_on_with(None, future)
}

/// The stack of each of the runtime's threads: 8 MiB.
const ASYNC_THREAD_STACK_BYTES: usize = 8 << 20;

/// Runs `future` on a runtime of `threads` async threads (default: one per CPU, or
/// `TOKIO_WORKER_THREADS`, which also overrides `threads`).
fn block_on_with(threads: Option<usize>, future: impl Future<Output = ExitCode>) -> ExitCode {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // A small program is transpiled on the async thread that receives it (see
    // `transpile::Shape::fits_inline`): its threads get the main thread's usual stack, reserved
    // and touched only as used, rather than tokio's 2 MiB.
    builder.thread_stack_size(ASYNC_THREAD_STACK_BYTES);
    if let Some(threads) = threads
        && std::env::var_os("TOKIO_WORKER_THREADS").is_none()
    {
        builder.worker_threads(threads);
    }
    match builder.enable_all().build() {
        Ok(runtime) => {
            let code = runtime.block_on(future);
            // Plugin threads blocked in I/O must not keep the process alive.
            runtime.shutdown_timeout(std::time::Duration::from_millis(500));
            code
        }
        Err(error) => fail(&format!("cannot start the async runtime: {error}")),
    }
}

fn fail(message: &str) -> ExitCode {
    say_err!("error: {}", crate::redact::redact(message));
    ExitCode::FAILURE
}

fn stats(config: &Config, audit: Option<PathBuf>) -> ExitCode {
    let Some(path) = audit.or_else(|| config.server.audit_log.clone()) else {
        return fail(
            "no audit log: name one with --audit, or set `[server] audit-log` in the configuration",
        );
    };
    match crate::stats::Stats::read(&path) {
        Ok(stats) => {
            say_part!("{}", stats.render(&path));
            ExitCode::SUCCESS
        }
        Err(error) => fail(&format!(
            "cannot read the audit log {}: {error}",
            path.display()
        )),
    }
}

fn import(file: &PathBuf) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) => return fail(&format!("cannot read {}: {error}", file.display())),
    };
    match config::import_mcp_servers(&text) {
        Ok(imported) => {
            for note in &imported.notes {
                say_err!("note: {note}");
            }
            say_part!("{}", config::servers_to_toml(&imported));
            ExitCode::SUCCESS
        }
        Err(error) => fail(&format!("{}: {error}", file.display())),
    }
}

async fn serve(config: Config, listen: Option<String>, bind: Option<String>) -> ExitCode {
    let listen = listen.unwrap_or_else(|| config.server.listen.clone());
    let options = match server::options::listener_options(&config, &listen, bind) {
        Ok(options) => options,
        Err(error) => return fail(&error),
    };
    let gateway = match Gateway::new(config) {
        Ok(gateway) => gateway,
        Err(error) => return fail(&error.to_string()),
    };
    let starting = gateway.clone();
    tokio::spawn(async move { starting.start().await });
    // SIGTERM or Ctrl-C (a client closing Runbyte, a service manager stopping it) ends serving
    // the same way a closed stdin does: downstream servers' process groups are stopped too.
    let result = tokio::select! {
        result = server::serve(gateway.clone(), ServeOptions { listen, options }) => result,
        signal = shutdown_signal() => {
            tracing::info!("{signal}: shutting down");
            Ok(())
        }
    };
    gateway.shutdown().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error.to_string()),
    }
}

/// Waits for SIGTERM or SIGINT; names the one that came.
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            return tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    "Ctrl-C"
}

/// The table a plugin of this kind and name is opened with.
fn plugin_table(config: &Config, kind: PluginKind, name: &str) -> Value {
    match kind {
        PluginKind::Transport => config.transport_table(name),
        PluginKind::Codegen => config.dialect_table(name),
        PluginKind::Policy => config.policy_table(name),
    }
}

fn describe(info: &PluginInfo) -> String {
    format!(
        "{:<9} {:<12} {:<8} api {:<2} {}",
        info.kind
            .map_or_else(|| format!("kind-{}", info.raw_kind), |k| k.to_string()),
        info.name,
        info.version,
        info.api_version,
        info.path.display()
    )
}

fn plugins(config: &Config) -> ExitCode {
    let search = plugin::PluginSearch::from_config(config);
    let found = search.discover();
    if found.is_empty() {
        let dirs: Vec<String> = search
            .dirs()
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        return fail(&format!("no plugins found in {}", dirs.join(", ")));
    }
    let mut ok = true;
    for result in found {
        match result {
            Ok(info) => say!("{}", describe(&info)),
            Err(error) => {
                ok = false;
                say!("error: {error}");
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn check(config: Config) -> ExitCode {
    let mut problems = 0usize;
    say!("config   {}  OK", config.source.display());
    // An existing token file is checked as `serve` reads it (a missing one is created by serve).
    if let Some(path) = config
        .server
        .auth_token_file
        .as_deref()
        .filter(|p| p.exists())
    {
        match server::options::token_from_file(path) {
            Ok(_) => say!("token    {}  OK", path.display()),
            Err(error) => {
                say!("token    FAILED: {}", crate::redact::redact(&error));
                problems += 1;
            }
        }
    }
    let search = plugin::PluginSearch::from_config(&config);
    let mut seen: Vec<(PluginKind, String)> = Vec::new();
    for result in search.discover() {
        match result {
            Ok(info) => {
                let kind = info.kind.unwrap_or(PluginKind::Transport);
                let table = plugin_table(&config, kind, &info.name);
                match plugin::open_as_configured(&search, &info, &table) {
                    Ok(false) => say!("plugin   {}  OK", describe(&info)),
                    Ok(true) => say!("plugin   {}  OK (isolated)", describe(&info)),
                    Err(error) => {
                        problems += 1;
                        say!("plugin   {}  FAILED: {error}", describe(&info));
                    }
                }
            }
            Err(error) => {
                problems += 1;
                say!("plugin   FAILED: {error}");
            }
        }
    }
    let mut referenced = vec![(PluginKind::Transport, config.server.listen.clone())];
    referenced.push((PluginKind::Codegen, config.codegen.dialect.clone()));
    for (position, policy) in config.sandbox.policy.names().into_iter().enumerate() {
        say!("policy   #{} {policy}", position + 1);
        referenced.push((PluginKind::Policy, policy));
    }
    for (_, server) in config.enabled_servers() {
        referenced.push((PluginKind::Transport, server.connector().0.to_owned()));
    }
    // Each plugin the configuration names is opened the way `serve` will find it (by name or
    // `[[plugins.load]]`), whether or not the scan above saw a file of that name.
    for (kind, name) in referenced {
        if seen.contains(&(kind, name.clone())) {
            continue;
        }
        let table = plugin_table(&config, kind, &name);
        let opened = match kind {
            PluginKind::Transport => plugin::open_transport(&search, &name, &table).map(drop),
            PluginKind::Codegen => plugin::open_codegen(&search, &name, &table).map(drop),
            PluginKind::Policy => plugin::open_policy(&search, &name, &table).map(drop),
        };
        if let Err(error) = opened {
            problems += 1;
            say!("plugin   {kind} `{name}` is configured but cannot be used: {error}");
        }
        seen.push((kind, name));
    }
    let gateway = Gateway::hub_only(config);
    gateway.hub().start().await;
    let auto = gateway.auto_exposure().await;
    let budget = gateway.config().direct_budget();
    for view in gateway.hub().servers().await {
        match view.status {
            Status::Ready => {
                say!(
                    "server   {:<16} OK  {} tools, MCP {}",
                    view.name,
                    view.tools.len(),
                    view.protocol.as_deref().unwrap_or("?")
                );
                if let Some(choice) = auto.iter().find(|choice| choice.server == view.name) {
                    say!("         {:<16} exposed: {}", "", choice.reason(budget));
                }
                if let Some((_, kept, not_read_only)) = cache_coverage(&gateway, &view) {
                    if kept.is_empty() {
                        say!(
                            "         {:<16} warning: [servers.{}.cache] keeps no tool's results \
                             (it covers none the server marks read-only)",
                            "",
                            view.name
                        );
                    }
                    if !not_read_only.is_empty() {
                        say!(
                            "         {:<16} warning: [servers.{}.cache] names tools not marked \
                             read-only, whose results are never kept: {}",
                            "",
                            view.name,
                            not_read_only.join(", ")
                        );
                    }
                }
                for warning in view.warnings.iter() {
                    say!("         {:<16} warning: {warning}", "");
                }
            }
            Status::Failed { error, .. } => {
                problems += 1;
                say!("server   {:<16} FAILED: {error}", view.name);
            }
            Status::Starting => {
                problems += 1;
                say!("server   {:<16} did not start", view.name);
            }
        }
    }
    gateway.shutdown().await;
    if problems == 0 {
        say!("all OK");
        ExitCode::SUCCESS
    } else {
        say!("{problems} problem(s)");
        ExitCode::FAILURE
    }
}

/// What `[servers.<name>.cache]` does with `view`'s tools: the table, the tools whose results it
/// keeps, and those it names that the server does not mark read-only (never kept), each name
/// escaped for the terminal.
fn cache_coverage(
    gateway: &Gateway,
    view: &crate::hub::ServerView,
) -> Option<(crate::config::ResultCache, Vec<String>, Vec<String>)> {
    let cache = gateway.config().servers.get(&view.name)?.cache.clone()?;
    let line = |text: &str| crate::text::terminal(text, false).into_owned();
    let (kept, not_read_only): (Vec<_>, Vec<_>) = view
        .tools
        .iter()
        .filter(|tool| cache.covers(&tool.name))
        .partition(|tool| gateway.hub().keeps_results(&view.name, tool));
    let names = |tools: Vec<&rmcp::model::Tool>| tools.iter().map(|t| line(&t.name)).collect();
    Some((cache, names(kept), names(not_read_only)))
}

async fn tools(config: Config, only: Option<String>) -> ExitCode {
    let direct = config.direct_servers();
    let exposure: Vec<(String, crate::config::Expose)> = config
        .enabled_servers()
        .map(|(name, _)| (name.clone(), config.exposure(name)))
        .collect();
    let gateway = Gateway::hub_only(config);
    if let Some(server) = &only
        && !gateway.hub().server_names().contains(server)
    {
        return fail(&format!(
            "unknown server `{server}`; the servers are: {}",
            gateway.hub().server_names().join(", ")
        ));
    }
    gateway.hub().start().await;
    let auto = gateway.auto_exposure().await;
    let budget = gateway.config().direct_budget();
    let mut code = ExitCode::SUCCESS;
    for view in gateway.hub().servers().await {
        if only.as_ref().is_some_and(|only| *only != view.name) {
            continue;
        }
        match &view.status {
            Status::Ready => say!(
                "{} (ready, {} tools, MCP {})",
                view.name,
                view.tools.len(),
                view.protocol.as_deref().unwrap_or("?")
            ),
            Status::Failed { error, .. } => {
                code = ExitCode::FAILURE;
                say!("{} (FAILED: {error})", view.name);
            }
            Status::Starting => say!("{} (starting)", view.name),
        }
        let in_code = exposure
            .iter()
            .any(|(name, expose)| *name == view.name && expose.in_code());
        let auto = auto.iter().find(|choice| choice.server == view.name);
        match direct.iter().find(|(name, _)| *name == view.name) {
            Some((_, prefix)) if auto.is_some_and(|choice| choice.direct) => say!(
                "  exposed: {}, as `{prefix}<tool>`",
                auto.map(|choice| choice.reason(budget)).unwrap_or_default()
            ),
            Some(_) if auto.is_some() => say!(
                "  exposed: {}",
                auto.map(|choice| choice.reason(budget)).unwrap_or_default()
            ),
            Some(_) if gateway.config().exposure(&view.name) == crate::config::Expose::Auto => {
                say!("  exposed: auto (to programs; decided for clients once the server is ready)")
            }
            Some((_, prefix)) if in_code => {
                say!("  exposed: to programs, and to clients directly as `{prefix}<tool>`")
            }
            Some((_, prefix)) => say!("  exposed: to clients directly as `{prefix}<tool>`"),
            None => {}
        }
        for warning in view.warnings.iter() {
            say!("  warning: {warning}");
        }
        // Tool names and descriptions are the server's text: one line each, escaped.
        let line = |text: &str| crate::text::terminal(text, false).into_owned();
        if let Some((cache, kept, not_read_only)) = cache_coverage(&gateway, &view) {
            let names = |names: &[String]| match names.is_empty() {
                true => "none".to_owned(),
                false => names.join(", "),
            };
            say!(
                "  cache: results kept {} ms ({}) of: {}",
                cache.ttl_ms,
                match cache.scope {
                    crate::config::ResultScope::Session => "per session",
                    crate::config::ResultScope::Shared => "shared",
                },
                names(&kept)
            );
            if !not_read_only.is_empty() {
                say!(
                    "  cache: not kept, not marked read-only by the server: {}",
                    names(&not_read_only)
                );
            }
        }
        for tool in view.tools.iter() {
            let description = tool.description.as_deref().unwrap_or_default();
            let first_line = description.lines().next().unwrap_or_default();
            say!("  {:<28} {}", line(&tool.name), line(first_line));
        }
        for (tool, why) in view.hidden.iter() {
            say!("  {:<28} (hidden: {})", line(tool), line(why));
        }
        for held in view.held.iter() {
            say!("  {:<28} (held: {})", line(&held.tool), line(&held.message));
        }
    }
    // Direct names no tool got (Runbyte's own, shared, not an MCP tool name): said once.
    for (name, why) in gateway.direct_left_out().await {
        if only
            .as_ref()
            .is_some_and(|only| !why.contains(&format!("server `{only}`")))
        {
            continue;
        }
        println!("direct name {} (hidden: {why})", name.escape_debug());
    }
    gateway.shutdown().await;
    code
}

async fn exec(config: Config, file: &std::path::Path) -> ExitCode {
    let code = if file == std::path::Path::new("-") {
        let mut code = String::new();
        if let Err(error) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut code) {
            return fail(&format!("cannot read the program from stdin: {error}"));
        }
        code
    } else {
        match std::fs::read_to_string(file) {
            Ok(code) => code,
            Err(error) => return fail(&format!("cannot read {}: {error}", file.display())),
        }
    };
    let gateway = match Gateway::new(config) {
        Ok(gateway) => gateway,
        Err(error) => return fail(&error.to_string()),
    };
    gateway.start().await;
    let executor = gateway.executor();
    let result = match executor
        .prepare(
            ("cli", crate::kept::Owner::Session("cli".to_owned())),
            None,
            None,
            crate::execute::Resumable::No,
            crate::telemetry::Parent::default(),
        )
        .await
    {
        Ok(prepared) => {
            // SIGINT or SIGTERM stops the program; the servers are then stopped below, as after
            // any run, rather than orphaned by a process killed mid-call.
            let cancel = tokio_util::sync::CancellationToken::new();
            let on_signal = cancel.clone();
            tokio::spawn(async move {
                let signal = shutdown_signal().await;
                tracing::info!("{signal}: stopping the program");
                on_signal.cancel();
            });
            executor.run("cli", &prepared, code, cancel).await
        }
        Err(message) => {
            gateway.shutdown().await;
            return fail(&message);
        }
    };
    gateway.shutdown().await;
    for block in &result.content {
        match block.as_text() {
            Some(text) => say!("{}", text.text),
            None => say!("{}", serde_json::to_string(block).unwrap_or_default()),
        }
    }
    if result.is_error == Some(true) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// Starts the gateway, runs one question against the VFS, prints the answer.
async fn vfs_command(
    config: Config,
    question: impl FnOnce(&crate::vfs::Snapshot) -> Result<String, String>,
) -> ExitCode {
    let gateway = match Gateway::new(config) {
        Ok(gateway) => gateway,
        Err(error) => return fail(&error.to_string()),
    };
    gateway.start().await;
    let answer = question(&gateway.vfs().snapshot());
    gateway.shutdown().await;
    match answer {
        Ok(text) => {
            say_part!("{text}");
            if !text.ends_with('\n') {
                say!();
            }
            ExitCode::SUCCESS
        }
        Err(error) => fail(&error),
    }
}

/// Arguments for a tool made from its input schema: each required property's default, first
/// choice, or a plain value of its type.
fn made_up_arguments(schema: &serde_json::Map<String, Value>) -> Value {
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema.get("required").and_then(Value::as_array);
    let mut arguments = serde_json::Map::new();
    for name in required.into_iter().flatten().filter_map(Value::as_str) {
        let property = properties
            .and_then(|p| p.get(name))
            .cloned()
            .unwrap_or_default();
        let value = property
            .get("default")
            .or_else(|| property.get("enum").and_then(|e| e.get(0)))
            .cloned()
            .unwrap_or_else(|| match property.get("type").and_then(Value::as_str) {
                Some("boolean") => json!(true),
                Some("integer" | "number") => json!(1),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!("x"),
            });
        arguments.insert(name.to_owned(), value);
    }
    Value::Object(arguments)
}

/// `runbyte probe`'s credential flags.
struct ProbeCredentials {
    auth: Option<String>,
    client_id: Option<String>,
    client_secret: Option<String>,
    client_metadata_url: Option<String>,
}

/// How many times `runbyte probe` logs in again for more scope before it gives up on a call.
const MAX_STEP_UPS: usize = 3;

async fn probe(
    mut config: Config,
    url: &str,
    protocol: &str,
    calls: Option<&str>,
    credentials: ProbeCredentials,
) -> ExitCode {
    let protocol = match protocol {
        "auto" => Protocol::Auto,
        version if version >= "2026-07-28" => Protocol::Stateless,
        _ => Protocol::Handshake,
    };
    let planned: Option<Vec<(String, Value)>> = match calls.map(serde_json::from_str::<Value>) {
        None => None,
        Some(Err(error)) => return fail(&format!("--calls is not valid JSON: {error}")),
        Some(Ok(value)) => {
            let list = value.get("toolCalls").cloned().unwrap_or(value);
            let Some(items) = list.as_array() else {
                return fail("--calls must be an array of {\"name\", \"arguments\"}");
            };
            Some(
                items
                    .iter()
                    .filter_map(|item| {
                        let name = item.get("name")?.as_str()?.to_owned();
                        Some((name, item.get("arguments").cloned().unwrap_or(json!({}))))
                    })
                    .collect(),
            )
        }
    };
    let auth = match credentials.auth.as_deref() {
        None => None,
        Some(text) => match serde_json::from_value::<Auth>(json!(text)) {
            Ok(auth) => Some(auth),
            Err(_) => return fail("--auth must be oauth, client-credentials or none"),
        },
    };
    let server = crate::config::ServerConfig {
        url: Some(url.to_owned()),
        protocol,
        auth,
        client_id: credentials.client_id,
        client_secret: credentials.client_secret,
        client_metadata_url: credentials.client_metadata_url,
        ..Default::default()
    };
    config.servers = [("probe".to_owned(), server)].into_iter().collect();
    let accounts = Accounts::in_memory(&config);
    let account = accounts.get("probe").cloned();
    let gateway: Arc<Gateway> = Gateway::hub_only_with(config, accounts);
    gateway.hub().start().await;
    let Some(mut view) = gateway.hub().server("probe").await else {
        return fail("the server did not start");
    };
    // It asks for OAuth: log in on the spot, then connect again (again if its authorization
    // server changed and refused the new tokens). A server that now names another
    // authorization server than the one its credentials came from is logged in to there, as
    // `runbyte login` would: the person at the browser decides. Which of the two a background
    // retry reported last is a matter of timing, so both are taken alike.
    for _ in 0..MAX_STEP_UPS {
        let (
            Status::Failed {
                failure: failure @ (Failure::NeedsLogin | Failure::Untrusted),
                error,
                ..
            },
            Some(account),
        ) = (&view.status, &account)
        else {
            break;
        };
        if matches!(failure, Failure::Untrusted) {
            say!("  {error}: logging in there");
        }
        if let Err(error) = probe_login(account).await {
            gateway.shutdown().await;
            return fail(&error);
        }
        view = probe_connect(&gateway).await.unwrap_or(view);
    }
    if let Status::Failed { error, .. } = &view.status {
        gateway.shutdown().await;
        return fail(&format!("{url}: {error}"));
    }
    say!(
        "{url} (ready, {} tools, MCP {})",
        view.tools.len(),
        view.protocol.as_deref().unwrap_or("?")
    );
    for warning in view.warnings.iter() {
        say!("  warning: {warning}");
    }
    let planned = planned.unwrap_or_else(|| {
        view.tools
            .iter()
            .map(|tool| (tool.name.to_string(), made_up_arguments(&tool.input_schema)))
            .collect()
    });
    let asker: Arc<dyn crate::relay::Asker> = Arc::new(crate::relay::Unattended);
    let mut failed = 0;
    for (tool, arguments) in planned {
        let mut step_ups = 0;
        let outcome = loop {
            let options = CallOptions {
                asker: Some(asker.clone()),
                ..CallOptions::default()
            };
            let outcome = gateway
                .hub()
                .call("probe", &tool, arguments.clone(), options)
                .await;
            // More scope asked for (HTTP 403, insufficient_scope): log in again for it.
            let wants_scope = matches!(
                &outcome,
                Err(error) if matches!(error.auth(), Some(AuthFailure::InsufficientScope { .. }))
            );
            match (&account, wants_scope) {
                (Some(account), true) if step_ups < MAX_STEP_UPS => {
                    step_ups += 1;
                    if let Err(error) = probe_login(account).await {
                        say!("  {tool}: {error}");
                        break outcome;
                    }
                }
                _ => break outcome,
            }
        };
        match outcome {
            Ok(result) if result.is_error != Some(true) => {
                say!(
                    "  {tool}: ok {}",
                    serde_json::to_string(&result).unwrap_or_default()
                );
            }
            Ok(result) => {
                failed += 1;
                say!(
                    "  {tool}: error {}",
                    serde_json::to_string(&result).unwrap_or_default()
                );
            }
            Err(error) => {
                failed += 1;
                say!("  {tool}: {error}");
            }
        }
    }
    gateway.shutdown().await;
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Connects `runbyte probe`'s server again after a login. A background retry that raced the
/// new connection may report its own end last ("closed by Runbyte"), hiding what the new
/// connection met (its authorization server changed, say): a failure other than a login's is
/// tried again, twice at most, before it is taken as the answer.
async fn probe_connect(gateway: &Gateway) -> Option<crate::hub::ServerView> {
    let mut view = None;
    for _ in 0..3 {
        let _ = gateway.hub().connect_now("probe").await;
        view = gateway.hub().server("probe").await;
        let transient = matches!(
            view.as_ref().map(|view| &view.status),
            Some(Status::Failed {
                failure: Failure::Unreachable | Failure::Exited,
                ..
            })
        );
        if !transient {
            break;
        }
    }
    view
}

/// `runbyte probe`'s login: as `runbyte login`, on the spot.
async fn probe_login(account: &crate::auth::Account) -> Result<(), String> {
    let mut say = |line: &str| say!("  {line}");
    let granted = crate::auth::login(account, Opener::System, &mut say).await?;
    say!("  logged in: scopes {}", describe_scopes(&granted.scopes));
    Ok(())
}

fn describe_scopes(scopes: &[String]) -> String {
    if scopes.is_empty() {
        "(none named)".to_owned()
    } else {
        scopes.join(" ")
    }
}

async fn login(config: Config, server: &str, no_browser: bool) -> ExitCode {
    let Some(settings) = config.servers.get(server) else {
        let known: Vec<&str> = config.servers.keys().map(String::as_str).collect();
        return fail(&format!(
            "unknown server `{server}`; the servers are: {}",
            known.join(", ")
        ));
    };
    match settings.auth {
        Some(Auth::None) => {
            return fail(&format!(
                "server `{server}` has `auth = \"none\"`: nothing to log in to"
            ));
        }
        Some(Auth::ClientCredentials) => {
            return fail(&format!(
                "server `{server}` uses client credentials (`client-id`, `client-secret`): \
                 Runbyte gets its tokens itself, no login needed"
            ));
        }
        _ => {}
    }
    let Some(account) = Account::new(server, settings) else {
        return fail(&format!(
            "server `{server}` is not reached by `url`: OAuth is for HTTP servers (a stdio \
             server takes its credentials in `env`)"
        ));
    };
    if account.store().path().is_none() {
        return fail(
            "cannot keep the tokens: neither XDG_STATE_HOME nor HOME is set, so Runbyte has no \
             folder of yours to keep them in",
        );
    }
    crate::redact::install(&crate::redact::Secrets::from_config(&config));
    let opener = if no_browser {
        Opener::Never
    } else {
        Opener::System
    };
    let mut say = |line: &str| say!("{line}");
    match crate::auth::login(&account, opener, &mut say).await {
        Ok(granted) => {
            let lasts = granted
                .expires_in
                .map(|lifetime| format!("the access token lasts {} s", lifetime.as_secs()))
                .unwrap_or_else(|| "the access token's lifetime was not given".to_owned());
            let refresh = if granted.refreshable {
                "Runbyte refreshes it"
            } else {
                "no refresh token came with it: log in again when it expires"
            };
            say!(
                "Logged in to `{server}`: scopes {}; {lasts}; {refresh}.",
                describe_scopes(&granted.scopes)
            );
            if let Some(file) = granted.file {
                say!("Kept in {} (only you can read it).", file.display());
            }
            ExitCode::SUCCESS
        }
        Err(error) => fail(&error),
    }
}

fn logout(config: &Config, server: &str) -> ExitCode {
    let Some(url) = config.servers.get(server).and_then(|s| s.url.as_deref()) else {
        return fail(&format!("no HTTP server `{server}` in the configuration"));
    };
    let store = crate::auth::store::Store::for_server(server, url);
    match store.clear() {
        Ok(true) => {
            say!(
                "Logged out of `{server}` (deleted {}).",
                store
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Ok(false) => {
            say!("Nothing was kept for `{server}`.");
            ExitCode::SUCCESS
        }
        Err(error) => fail(&error),
    }
}

async fn call(config: Config, server: &str, tool: &str, args: &str) -> ExitCode {
    let args: Value = match serde_json::from_str(args) {
        Ok(args) => args,
        Err(error) => return fail(&format!("the arguments are not valid JSON: {error}")),
    };
    let gateway: Arc<Gateway> = Gateway::hub_only(config);
    let result = gateway
        .hub()
        .call(server, tool, args, CallOptions::default())
        .await;
    gateway.shutdown().await;
    match result {
        Ok(result) => {
            let failed = result.is_error == Some(true);
            match serde_json::to_string_pretty(&result) {
                Ok(text) => say!("{text}"),
                Err(error) => return fail(&format!("cannot print the result: {error}")),
            }
            if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(error) => fail(&error.to_string()),
    }
}
