//! `runbyte doctor`: one line per check of this machine's Runbyte, each OK or what to do: the
//! binary, the plugin folders and each plugin found (with its ABI version), the configuration,
//! each server (started and listed, each within its init timeout, as `runbyte check` does), and
//! each MCP client's file: there?, does it start Runbyte (with which command and runbyte.toml),
//! which of its servers bypass Runbyte. The exit code is non-zero when a line says FAIL.

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use runbyte_plugin_api::PluginKind;
use serde_json::Value;

use crate::{
    config::Config,
    gateway::Gateway,
    hub::Status,
    os_paths::Client,
    plugin::{PluginError, PluginSearch},
    setup,
};

/// A check's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Ok,
    /// Works, but something deserves a look.
    Warn,
    /// Broken: the line says what to do.
    Fail,
    /// Nothing to check (a client that is not installed).
    Absent,
}

struct Report {
    failures: usize,
    warnings: usize,
}

impl Report {
    fn line(&mut self, what: &str, verdict: Verdict, text: &str) {
        let label = match verdict {
            Verdict::Ok => "OK",
            Verdict::Warn => {
                self.warnings += 1;
                "WARN"
            }
            Verdict::Fail => {
                self.failures += 1;
                "FAIL"
            }
            Verdict::Absent => "--",
        };
        println!(
            "{}",
            crate::text::terminal(&format!("{what:<8} {label:<4} {text}"), true)
        );
    }
}

/// Runs `runbyte doctor` with the configuration `serve` would use (`explicit` is `--config`).
pub async fn main(explicit: Option<&Path>) -> ExitCode {
    let mut report = Report {
        failures: 0,
        warnings: 0,
    };
    let exe = std::env::current_exe()
        .map(|exe| exe.display().to_string())
        .unwrap_or_else(|e| format!("(cannot tell: {e})"));
    report.line(
        "binary",
        Verdict::Ok,
        &format!("{exe} (runbyte {})", env!("CARGO_PKG_VERSION")),
    );

    let config = match Config::find(explicit) {
        Ok(config) => {
            let origin = origin(explicit, &config.source);
            report.line(
                "config",
                Verdict::Ok,
                &format!(
                    "{} ({origin}): parses, {} server(s)",
                    config.source.display(),
                    config.servers.len()
                ),
            );
            Some(config)
        }
        Err(error) => {
            report.line(
                "config",
                Verdict::Fail,
                &format!("{error}: fix the file at that place (the rest below uses the defaults)"),
            );
            None
        }
    };

    plugins(&mut report, config.as_ref());
    if let Some(config) = config {
        servers(&mut report, config).await;
    }
    for client in Client::ALL {
        client_line(&mut report, client);
    }

    if report.failures == 0 {
        println!(
            "all OK{}",
            if report.warnings > 0 {
                format!(" ({} warning(s))", report.warnings)
            } else {
                String::new()
            }
        );
        ExitCode::SUCCESS
    } else {
        println!("{} problem(s) to fix", report.failures);
        ExitCode::FAILURE
    }
}

/// Where the configuration came from, in words.
fn origin(explicit: Option<&Path>, source: &Path) -> &'static str {
    if explicit.is_some() {
        "given by --config or RUNBYTE_CONFIG"
    } else if source.is_absolute()
        && crate::config::user_config_file().is_some_and(|user| user == source)
    {
        "the user's own"
    } else if source.is_absolute() {
        "this folder's"
    } else {
        "none found: the built-in default"
    }
}

fn plugins(report: &mut Report, config: Option<&Config>) {
    let fallback = Config::default();
    let config = config.unwrap_or(&fallback);
    let search = PluginSearch::from_config(config);
    // The built-in default names a source tree's build folder, which an installed binary has
    // not: only a file's own `dirs` are the user's to fix.
    let own_dirs: &[PathBuf] = if config.source.is_absolute() {
        &config.plugins.dirs
    } else {
        &[]
    };
    for dir in own_dirs {
        if !dir.is_dir() {
            report.line(
                "plugins",
                Verdict::Warn,
                &format!(
                    "{} (in [plugins] dirs) is not a folder: remove it or make it",
                    dir.display()
                ),
            );
        }
    }
    let searched: Vec<String> = search
        .dirs()
        .iter()
        .filter(|dir| dir.is_dir())
        .map(|dir| dir.display().to_string())
        .collect();
    report.line(
        "plugins",
        Verdict::Ok,
        &format!("searched {}", searched.join(", ")),
    );
    let mut found = 0;
    for result in search.discover() {
        match result {
            Ok(info) => {
                found += 1;
                let kind = info
                    .kind
                    .map_or_else(|| format!("kind-{}", info.raw_kind), |k| k.to_string());
                report.line(
                    "plugin",
                    Verdict::Ok,
                    &format!(
                        "{kind} {} {} (ABI {}) {}",
                        info.name,
                        info.version,
                        info.api_version,
                        info.path.display()
                    ),
                );
            }
            Err(error) => {
                let fix = plugin_fix(&error);
                report.line("plugin", Verdict::Fail, &format!("{error}: {fix}"));
            }
        }
    }
    if found == 0 {
        report.line(
            "plugins",
            Verdict::Fail,
            "no plugins found: keep the bundled ones beside the binary (or in ../lib/runbyte), \
             or name their folder in [plugins] dirs",
        );
    }
    // Each plugin the configuration names must be found by name.
    let mut wanted = vec![
        (PluginKind::Transport, config.server.listen.clone()),
        (PluginKind::Codegen, config.codegen.dialect.clone()),
    ];
    wanted.extend(
        config
            .sandbox
            .policy
            .names()
            .into_iter()
            .map(|name| (PluginKind::Policy, name)),
    );
    for (_, server) in config.enabled_servers() {
        wanted.push((PluginKind::Transport, server.connector().0.to_owned()));
    }
    wanted.sort_by(|a, b| (a.0 as u32, &a.1).cmp(&(b.0 as u32, &b.1)));
    wanted.dedup();
    for (kind, name) in wanted {
        if let Err(error) = search.find(kind, &name) {
            report.line(
                "plugin",
                Verdict::Fail,
                &format!(
                    "the configuration uses {kind} plugin `{name}`: {error}: {}",
                    plugin_fix(&error)
                ),
            );
        }
    }
}

/// What to do about a plugin that cannot be used.
fn plugin_fix(error: &PluginError) -> &'static str {
    match error {
        PluginError::NotFound { .. } | PluginError::Missing { .. } => {
            "install it, or name its folder in [plugins] dirs"
        }
        PluginError::Untrusted { .. } => "make it writable by its owner alone (chmod go-w)",
        PluginError::NotALibrary { .. } | PluginError::NotAPlugin { .. } => {
            "remove it from the plugin folder (files named librunbyte_* are taken for plugins)"
        }
        PluginError::IncompatibleVersion { .. } | PluginError::IncompatibleAbi { .. } => {
            "rebuild it against this Runbyte's plugin-api, or remove it"
        }
        PluginError::Duplicate { .. } => "remove one of the two",
        PluginError::WrongKind { .. }
        | PluginError::Failed { .. }
        | PluginError::Panicked { .. } => "see `runbyte check`",
    }
}

async fn servers(report: &mut Report, config: Config) {
    if config.enabled_servers().next().is_none() {
        report.line(
            "servers",
            Verdict::Warn,
            "none configured: add [servers.NAME] tables (`runbyte import FILE` converts a client's)",
        );
        return;
    }
    let gateway = Gateway::hub_only(config);
    gateway.hub().start().await;
    for view in gateway.hub().servers().await {
        match &view.status {
            Status::Ready => report.line(
                "server",
                Verdict::Ok,
                &format!(
                    "{}: {} tool(s), MCP {}",
                    view.name,
                    view.tools.len(),
                    view.protocol.as_deref().unwrap_or("?")
                ),
            ),
            Status::Failed { error, .. } => report.line(
                "server",
                Verdict::Fail,
                &format!(
                    "{}: {}: check [servers.{}] (`runbyte tools {}` shows it alone)",
                    view.name,
                    crate::redact::redact(error),
                    view.name,
                    view.name
                ),
            ),
            Status::Starting => report.line(
                "server",
                Verdict::Fail,
                &format!(
                    "{}: did not start within its init timeout: raise `init-timeout-ms` or \
                     check its command",
                    view.name
                ),
            ),
        }
    }
    gateway.shutdown().await;
}

fn client_line(report: &mut Report, client: Client) {
    let what = "client";
    let title = client.title();
    let Some(file) = setup::client_file(client) else {
        report.line(
            what,
            Verdict::Absent,
            &format!("{title}: no home folder in the environment to look in"),
        );
        return;
    };
    let shown = file.display();
    let text = match std::fs::read(&file) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            report.line(
                what,
                Verdict::Absent,
                &format!(
                    "{title}: no {shown} (`runbyte setup {}` makes it)",
                    client.id()
                ),
            );
            return;
        }
        Err(error) => {
            report.line(
                what,
                Verdict::Fail,
                &format!("{title}: cannot read {shown}: {error}"),
            );
            return;
        }
    };
    let root = match setup::jsonc_value(&text) {
        Ok(root) => root,
        Err(error) => {
            report.line(
                what,
                Verdict::Fail,
                &format!("{title}: {shown}: {error}: {title} cannot read it either; fix that line"),
            );
            return;
        }
    };
    let servers = root
        .get(client.servers_key())
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let (ours, others): (Vec<_>, Vec<_>) = servers
        .iter()
        .partition(|(_, entry)| setup::starts_runbyte(entry));
    if ours.is_empty() {
        report.line(
            what,
            Verdict::Warn,
            &format!(
                "{title}: {shown} does not start Runbyte: `runbyte setup {}` adds it",
                client.id()
            ),
        );
    }
    for (name, entry) in &ours {
        let command = entry.get("command").and_then(Value::as_str).unwrap_or("");
        let problem = if !command_exists(command) {
            Some(format!(
                "its command {command} is not there: run `runbyte setup {}` again",
                client.id()
            ))
        } else {
            match setup::entry_config(entry) {
                Some(config) => Config::load(&config)
                    .err()
                    .map(|error| format!("its configuration does not load: {error}")),
                None => None,
            }
        };
        let config = setup::entry_config(entry)
            .map(|c| c.display().to_string())
            .unwrap_or_else(|| "the default configuration".to_owned());
        match problem {
            None => report.line(
                what,
                Verdict::Ok,
                &format!("{title}: {shown} starts Runbyte as `{name}`: {command} with {config}"),
            ),
            Some(problem) => report.line(
                what,
                Verdict::Fail,
                &format!("{title}: {shown}: `{name}` starts Runbyte, but {problem}"),
            ),
        }
    }
    if !others.is_empty() && !ours.is_empty() {
        let names: Vec<&str> = others.iter().map(|(name, _)| name.as_str()).collect();
        report.line(
            what,
            Verdict::Warn,
            &format!(
                "{title}: {} server(s) bypass Runbyte: {}: `runbyte setup {} --move-servers` moves them",
                names.len(),
                names.join(", "),
                client.id()
            ),
        );
    }
}

/// Whether a client could start `command`: an existing file when it is a path, else a program
/// on PATH.
fn command_exists(command: &str) -> bool {
    let path = Path::new(command);
    if command.is_empty() {
        return false;
    }
    if path.components().count() > 1 {
        return path.is_file();
    }
    let extensions: &[&str] = if cfg!(windows) {
        &["", ".exe", ".cmd", ".bat"]
    } else {
        &[""]
    };
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir: PathBuf| {
            extensions
                .iter()
                .any(|ext| dir.join(format!("{command}{ext}")).is_file())
        })
    })
}
