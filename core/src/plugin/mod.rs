//! The plugin host: finds plugin files, checks them, opens them, and wraps their raw ABI objects
//! into ordinary Rust types (docs/architecture.md, the plugin boundary). Nothing outside this
//! module sees abi_stable.

mod error;
mod isolate;
mod load;
mod local;
mod wrap;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::Arc,
};

pub use error::{CallError, PluginError};
use isolate::IsolatedHost;
pub(crate) use isolate::serve as serve_isolated;
pub use load::{PluginInfo, read_descriptor};
use runbyte_plugin_api::{PluginInstance, PluginKind};
pub use wrap::{Accepted, CodegenPlugin, Listener, PolicyPlugin, Pump, Received, TransportPlugin};

use crate::config::Config;

/// Where plugins are looked for, in order: `[[plugins.load]]` paths, `[plugins] dirs`, then the
/// running binary's own folder (and its `deps/`, in a cargo build folder), `../lib/runbyte/`
/// beside it (an installed prefix: `bin/runbyte`, `lib/runbyte/*.so`), and the user's
/// `$XDG_DATA_HOME/runbyte/plugins` (`~/.local/share/runbyte/plugins`).
#[derive(Debug, Clone)]
pub struct PluginSearch {
    dirs: Vec<PathBuf>,
    paths: Vec<PathBuf>,
    isolated_paths: Vec<PathBuf>,
    isolated_names: Vec<String>,
    host_exe: PathBuf,
}

/// The user's own plugin folder: `$XDG_DATA_HOME/runbyte/plugins`, else
/// `~/.local/share/runbyte/plugins`.
fn user_plugin_dir() -> Option<PathBuf> {
    crate::dirs::user_folder(crate::dirs::Base::Data, "plugins")
}

impl PluginSearch {
    /// The search order a configuration gives.
    pub fn from_config(config: &Config) -> Self {
        let mut dirs = config.plugins.dirs.clone();
        // The binary's real folder: pipx, uv and Homebrew link `~/.local/bin/runbyte` (or
        // `/opt/homebrew/bin/runbyte`) to the installed one, and on macOS current_exe is the
        // link's path, whose `../lib/runbyte` is not the install's. (Not on Windows, where
        // canonical paths are `\\?\` ones and those tools copy rather than link.)
        if let Some(own) = std::env::current_exe()
            .ok()
            .map(|exe| {
                if cfg!(windows) {
                    exe
                } else {
                    exe.canonicalize().unwrap_or(exe)
                }
            })
            .and_then(|exe| exe.parent().map(Path::to_owned))
        {
            // In a cargo build folder the bundled plugins, built as dependencies of the binary,
            // lie in `deps/` beside it (cargo does not always copy them up).
            let deps = own.join("deps");
            let installed = own.parent().map(|prefix| prefix.join("lib/runbyte"));
            dirs.push(own);
            if deps.is_dir() {
                dirs.push(deps);
            }
            if let Some(installed) = installed.filter(|dir| dir.is_dir()) {
                dirs.push(installed);
            }
        }
        if let Some(user) = user_plugin_dir()
            && user.is_dir()
        {
            dirs.push(user);
        }
        let mut seen = Vec::new();
        dirs.retain(|dir| {
            let key = dir.canonicalize().unwrap_or_else(|_| dir.clone());
            let fresh = !seen.contains(&key);
            seen.push(key);
            fresh
        });
        let paths = config
            .plugins
            .load
            .iter()
            .map(|load| load.path.clone())
            .collect();
        let isolated_paths = config
            .plugins
            .load
            .iter()
            .filter(|load| load.isolate)
            .map(|load| load.path.clone())
            .collect();
        let isolated_names = config.plugins.isolate.clone();
        PluginSearch {
            dirs,
            paths,
            isolated_paths,
            isolated_names,
            host_exe: default_host_exe(),
        }
    }

    /// Runs isolated plugins in `exe plugin-host` (a `runbyte` binary) rather than in the default
    /// one: `RUNBYTE_EXE` when set, else this process's own executable. For programs that embed
    /// Runbyte and are not `runbyte` themselves.
    pub fn with_host_exe(mut self, exe: PathBuf) -> Self {
        self.host_exe = exe;
        self
    }

    /// Whether the configuration asks for this plugin to run in a process of its own.
    pub fn is_isolated(&self, info: &PluginInfo) -> bool {
        self.isolated_names.contains(&info.name) || self.isolated_paths.contains(&info.path)
    }

    /// The folders searched by name.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The file name a plugin found by name has: `librunbyte_<kind>_<name>.so` on Linux.
    pub fn file_name(kind: PluginKind, name: &str) -> String {
        format!(
            "{}runbyte_{}_{}{}",
            std::env::consts::DLL_PREFIX,
            kind,
            name.replace('-', "_"),
            std::env::consts::DLL_SUFFIX
        )
    }

    /// Finds the plugin of `kind` called `name`: a `[[plugins.load]]` file whose descriptor has
    /// that name first (of whatever kind: opening it then says it is the wrong one), else the
    /// conventional file name in each folder.
    pub fn find(&self, kind: PluginKind, name: &str) -> Result<PluginInfo, PluginError> {
        let mut other_kind = None;
        let mut unreadable = None;
        for path in &self.paths {
            // A broken `[[plugins.load]]` file is reported by `check`; it must not hide others.
            let info = match read_descriptor(path) {
                Ok(info) => info,
                Err(error) => {
                    unreadable.get_or_insert(error);
                    continue;
                }
            };
            if info.name == name {
                if info.kind == Some(kind) {
                    return Ok(info);
                }
                other_kind.get_or_insert(info);
            }
        }
        let file = Self::file_name(kind, name);
        for dir in &self.dirs {
            let candidate = dir.join(&file);
            if candidate.exists() {
                return read_descriptor(&candidate);
            }
        }
        if let Some(info) = other_kind {
            return Ok(info);
        }
        // The plugin may be the one in the file that would not load.
        if let Some(error) = unreadable {
            return Err(error);
        }
        Err(PluginError::NotFound {
            kind,
            name: name.to_owned(),
            file,
            searched: self.dirs.clone(),
        })
    }

    /// Every plugin file in the search path, each read or refused on its own.
    pub fn discover(&self) -> Vec<Result<PluginInfo, PluginError>> {
        let mut files: Vec<PathBuf> = self.paths.clone();
        let prefix = format!("{}runbyte_", std::env::consts::DLL_PREFIX);
        for dir in &self.dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut found: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .map(|entry| entry.path())
                .filter(|path| {
                    path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        n.starts_with(&prefix) && n.ends_with(std::env::consts::DLL_SUFFIX)
                    })
                })
                .collect();
            found.sort();
            files.extend(found);
        }
        let mut seen = Vec::new();
        let mut results = Vec::new();
        let mut names: BTreeMap<(u32, String), PathBuf> = BTreeMap::new();
        for path in files {
            let key = path.canonicalize().unwrap_or_else(|_| path.clone());
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            let result = read_descriptor(&path);
            // A name found twice: the first one in search order wins, as `find` would choose.
            if let Ok(info) = &result
                && names
                    .insert((info.raw_kind, info.name.clone()), path.clone())
                    .is_some()
            {
                continue;
            }
            results.push(result);
        }
        results
    }
}

/// Opens a transport plugin found by name (in a child process when it is isolated).
pub fn open_transport(
    search: &PluginSearch,
    name: &str,
    config: &serde_json::Value,
) -> Result<TransportPlugin, PluginError> {
    let info = search.find(PluginKind::Transport, name)?;
    if search.is_isolated(&info) {
        let host = search.start_isolated(info, PluginKind::Transport, config)?;
        return Ok(TransportPlugin::new(host.info().clone(), Arc::new(host)));
    }
    match load::open(&info, PluginKind::Transport, config)? {
        PluginInstance::Transport(raw) => Ok(local::transport(Arc::new(info), raw)),
        _ => unreachable_kind(&info, PluginKind::Transport),
    }
}

/// Opens a codegen dialect plugin found by name (in a child process when it is isolated).
pub fn open_codegen(
    search: &PluginSearch,
    name: &str,
    config: &serde_json::Value,
) -> Result<CodegenPlugin, PluginError> {
    let info = search.find(PluginKind::Codegen, name)?;
    if search.is_isolated(&info) {
        let host = search.start_isolated(info, PluginKind::Codegen, config)?;
        return Ok(CodegenPlugin::new(host.info().clone(), Arc::new(host)));
    }
    match load::open(&info, PluginKind::Codegen, config)? {
        PluginInstance::Codegen(raw) => Ok(local::codegen(Arc::new(info), raw)),
        _ => unreachable_kind(&info, PluginKind::Codegen),
    }
}

/// Opens a policy plugin found by name (in a child process when it is isolated).
pub fn open_policy(
    search: &PluginSearch,
    name: &str,
    config: &serde_json::Value,
) -> Result<PolicyPlugin, PluginError> {
    let info = search.find(PluginKind::Policy, name)?;
    if search.is_isolated(&info) {
        let host = search.start_isolated(info, PluginKind::Policy, config)?;
        return Ok(PolicyPlugin::new(host.info().clone(), Arc::new(host)));
    }
    match load::open(&info, PluginKind::Policy, config)? {
        PluginInstance::Policy(raw) => Ok(local::policy(Arc::new(info), raw)),
        _ => unreachable_kind(&info, PluginKind::Policy),
    }
}

/// Opens a plugin file as whatever kind it says it is, in this process: for tests that vouch for
/// a file.
pub fn open_any(info: &PluginInfo, config: &serde_json::Value) -> Result<PluginKind, PluginError> {
    let kind = info.kind.unwrap_or(PluginKind::Transport);
    load::open(info, kind, config).map(|instance| instance.kind())
}

/// Opens a plugin file the way the configuration says to (in a child process when it is
/// isolated, so that one that crashes takes down only that); whether it was isolated. For
/// `runbyte check`, which vouches for every file it finds.
pub fn open_as_configured(
    search: &PluginSearch,
    info: &PluginInfo,
    config: &serde_json::Value,
) -> Result<bool, PluginError> {
    let kind = info.kind.unwrap_or(PluginKind::Transport);
    if search.is_isolated(info) {
        // Started (and its configuration accepted) by the child; stopped when dropped here.
        return search
            .start_isolated(info.clone(), kind, config)
            .map(|_| true);
    }
    load::open(info, kind, config).map(|_| false)
}

impl PluginSearch {
    fn start_isolated(
        &self,
        info: PluginInfo,
        kind: PluginKind,
        config: &serde_json::Value,
    ) -> Result<IsolatedHost, PluginError> {
        IsolatedHost::start(info, kind, config.clone(), self.host_exe.clone())
    }
}

/// The `runbyte` binary isolated plugins run in unless told otherwise.
fn default_host_exe() -> PathBuf {
    crate::exe::runbyte_exe()
}

// `load::open` checks the instance's kind, so a mismatch here cannot happen; answer with the
// typed error rather than a panic all the same.
fn unreachable_kind<T>(info: &PluginInfo, expected: PluginKind) -> Result<T, PluginError> {
    Err(PluginError::WrongKind {
        name: info.name.clone(),
        path: info.path.clone(),
        found: "another".to_owned(),
        expected,
    })
}
