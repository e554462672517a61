//! The command line. It only turns flags into settings and calls into the library.

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use clap::{Parser, Subcommand};
use runbyte_plugin_api::PluginKind;
use serde_json::{Value, json};

use crate::{
    config::{self, Config},
    hub::{CallOptions, Status},
    plugin::{self, PluginInfo},
    runtime::{self, Runtime},
    server::{self, ServeOptions},
};

/// Runbyte: an MCP code-mode gateway.
#[derive(Debug, Parser)]
#[command(name = "runbyte", version, about, long_about = None)]
pub struct Cli {
    /// The configuration file (default: ./runbyte.toml, else the built-in default).
    #[arg(long, short, global = true, env = "RUNBYTE_CONFIG")]
    pub config: Option<PathBuf>,
    /// What to log on stderr: error, warn, info, debug, trace, or a tracing filter.
    #[arg(long, global = true, default_value = "info")]
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
    /// Convert a Claude Desktop, Cursor or VS Code `mcpServers` JSON file to [servers.*] tables.
    Import {
        /// The JSON file.
        file: PathBuf,
    },
    /// A small built-in MCP server over stdio, used by the default configuration.
    DemoServer,
    /// List the downstream servers' tools and status.
    Tools {
        /// Only this server.
        server: Option<String>,
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

/// Runs the command line; the process's exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::logging::init(&cli.log_level);
    let command = cli.command.unwrap_or(Command::Serve {
        listen: None,
        bind: None,
    });
    if let Command::DemoServer = command {
        return block_on(async {
            match crate::demo::serve_stdio().await {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => fail(&format!("demo server: {error}")),
            }
        });
    }
    if let Command::Import { file } = &command {
        return import(file);
    }
    let config = match runtime::load_config(cli.config.as_deref()) {
        Ok(config) => config,
        Err(error) => return fail(&error.to_string()),
    };
    block_on(async move {
        match command {
            Command::Serve { listen, bind } => serve(config, listen, bind).await,
            Command::Check => check(config).await,
            Command::Plugins => plugins(&config),
            Command::Tools { server } => tools(config, server).await,
            Command::Call { server, tool, args } => call(config, &server, &tool, &args).await,
            Command::DemoServer | Command::Import { .. } => ExitCode::SUCCESS,
        }
    })
}

fn block_on(future: impl Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
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
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

fn import(file: &PathBuf) -> ExitCode {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(error) => return fail(&format!("cannot read {}: {error}", file.display())),
    };
    match config::import_mcp_servers(&text) {
        Ok(imported) => {
            for note in &imported.notes {
                eprintln!("note: {note}");
            }
            print!("{}", config::servers_to_toml(&imported));
            ExitCode::SUCCESS
        }
        Err(error) => fail(&format!("{}: {error}", file.display())),
    }
}

async fn serve(config: Config, listen: Option<String>, bind: Option<String>) -> ExitCode {
    let listen = listen.unwrap_or_else(|| config.server.listen.clone());
    let options = json!({
        "bind": bind.or_else(|| config.server.bind.clone()).unwrap_or_else(|| "127.0.0.1:3000".to_owned()),
        "allowed-hosts": config.server.allowed_hosts,
        "allowed-origins": config.server.allowed_origins,
        "max-body-bytes": config.server.max_body_bytes.unwrap_or(4 << 20),
    });
    let runtime = Runtime::new(config);
    let hub = runtime.hub.clone();
    tokio::spawn(async move { hub.start().await });
    let result = server::serve(runtime.clone(), ServeOptions { listen, options }).await;
    runtime.hub.shutdown().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => fail(&error.to_string()),
    }
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
            Ok(info) => println!("{}", describe(&info)),
            Err(error) => {
                ok = false;
                println!("error: {error}");
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
    println!("config   {}  OK", config.source.display());
    let search = plugin::PluginSearch::from_config(&config);
    let mut seen: Vec<(PluginKind, String)> = Vec::new();
    for result in search.discover() {
        match result {
            Ok(info) => {
                let kind = info.kind.unwrap_or(PluginKind::Transport);
                let table = plugin_table(&config, kind, &info.name);
                match plugin::open_any(&info, &table) {
                    Ok(_) => println!("plugin   {}  OK", describe(&info)),
                    Err(error) => {
                        problems += 1;
                        println!("plugin   {}  FAILED: {error}", describe(&info));
                    }
                }
                if let Some(kind) = info.kind {
                    seen.push((kind, info.name.clone()));
                }
            }
            Err(error) => {
                problems += 1;
                println!("plugin   FAILED: {error}");
            }
        }
    }
    let mut referenced = vec![(PluginKind::Transport, config.server.listen.clone())];
    referenced.push((PluginKind::Codegen, config.codegen.dialect.clone()));
    for (position, policy) in config.sandbox.policy.names().into_iter().enumerate() {
        println!("policy   #{} {policy}", position + 1);
        referenced.push((PluginKind::Policy, policy));
    }
    for (_, server) in config.enabled_servers() {
        referenced.push((PluginKind::Transport, server.connector().0.to_owned()));
    }
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
            println!("plugin   {kind} `{name}` is configured but cannot be used: {error}");
        }
        seen.push((kind, name));
    }
    let runtime = Runtime::new(config);
    runtime.hub.start().await;
    for view in runtime.hub.servers().await {
        match view.status {
            Status::Ready => println!("server   {:<16} OK  {} tools", view.name, view.tools.len()),
            Status::Failed { error, .. } => {
                problems += 1;
                println!("server   {:<16} FAILED: {error}", view.name);
            }
            Status::Starting => {
                problems += 1;
                println!("server   {:<16} did not start", view.name);
            }
        }
    }
    runtime.hub.shutdown().await;
    if problems == 0 {
        println!("all OK");
        ExitCode::SUCCESS
    } else {
        println!("{problems} problem(s)");
        ExitCode::FAILURE
    }
}

async fn tools(config: Config, only: Option<String>) -> ExitCode {
    let runtime = Runtime::new(config);
    if let Some(server) = &only
        && !runtime.hub.server_names().contains(server)
    {
        return fail(&format!(
            "unknown server `{server}`; the servers are: {}",
            runtime.hub.server_names().join(", ")
        ));
    }
    runtime.hub.start().await;
    let mut code = ExitCode::SUCCESS;
    for view in runtime.hub.servers().await {
        if only.as_ref().is_some_and(|only| *only != view.name) {
            continue;
        }
        match &view.status {
            Status::Ready => println!("{} (ready, {} tools)", view.name, view.tools.len()),
            Status::Failed { error, .. } => {
                code = ExitCode::FAILURE;
                println!("{} (FAILED: {error})", view.name);
            }
            Status::Starting => println!("{} (starting)", view.name),
        }
        for tool in view.tools.iter() {
            let description = tool.description.as_deref().unwrap_or_default();
            let first_line = description.lines().next().unwrap_or_default();
            println!("  {:<28} {first_line}", tool.name);
        }
    }
    runtime.hub.shutdown().await;
    code
}

async fn call(config: Config, server: &str, tool: &str, args: &str) -> ExitCode {
    let args: Value = match serde_json::from_str(args) {
        Ok(args) => args,
        Err(error) => return fail(&format!("the arguments are not valid JSON: {error}")),
    };
    let runtime: Arc<Runtime> = Runtime::new(config);
    let result = runtime
        .hub
        .call(server, tool, args, CallOptions::default())
        .await;
    runtime.hub.shutdown().await;
    match result {
        Ok(result) => {
            let failed = result.is_error == Some(true);
            match serde_json::to_string_pretty(&result) {
                Ok(text) => println!("{text}"),
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
