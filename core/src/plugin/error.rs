use std::path::PathBuf;

use runbyte_plugin_api::PluginKind;

/// Why a plugin could not be used. Each names the plugin and, once found, its file.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PluginError {
    /// No file of that name in any searched folder.
    #[error("{kind} plugin `{name}` not found: looked for {file} in {}", list(.searched))]
    NotFound {
        kind: PluginKind,
        name: String,
        file: String,
        searched: Vec<PathBuf>,
    },
    /// The path named in `[[plugins.load]]` does not exist.
    #[error("plugin file {} does not exist", .path.display())]
    Missing { path: PathBuf },
    /// Someone other than its owner could change the file (it or its folder is writable by
    /// everyone or by a shared group), or its owner is neither root nor the user running
    /// Runbyte: loading it would run whatever they put there. `reason` says which, and the fix.
    #[error("refusing to load {}: {reason}", .path.display())]
    Untrusted { path: PathBuf, reason: String },
    /// The file is not a shared library the OS can load.
    #[error("{} is not a shared library: {reason}", .path.display())]
    NotALibrary { path: PathBuf, reason: String },
    /// A shared library, but without Runbyte's descriptor.
    #[error("{} is not a Runbyte plugin: it exports no `{}` symbol", .path.display(), runbyte_plugin_api::DESCRIPTOR_SYMBOL)]
    NotAPlugin { path: PathBuf },
    /// Built against another plugin API version.
    #[error("plugin `{name}` ({}) was built for plugin API version {found}; this Runbyte loads version {expected}", .path.display())]
    IncompatibleVersion {
        name: String,
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    /// A plugin of another kind than the configuration uses it as.
    #[error("plugin `{name}` ({}) is a {found} plugin, but is configured as a {expected} plugin", .path.display())]
    WrongKind {
        name: String,
        path: PathBuf,
        found: String,
        expected: PluginKind,
    },
    /// The descriptor says the right version, but the root module's layout differs.
    #[error("plugin `{name}` ({}) has an incompatible ABI: {detail}", .path.display())]
    IncompatibleAbi {
        name: String,
        path: PathBuf,
        detail: String,
    },
    /// The plugin refused to open (its own error, usually about its configuration).
    #[error("plugin `{name}` ({}) failed to open: {message}", .path.display())]
    Failed {
        name: String,
        path: PathBuf,
        message: String,
    },
    /// The plugin panicked while opening; the panic was caught.
    #[error("plugin `{name}` ({}) panicked: {message}", .path.display())]
    Panicked {
        name: String,
        path: PathBuf,
        message: String,
    },
    /// Two files claim one name and kind.
    #[error("two {kind} plugins are named `{name}`: {} and {}", .first.display(), .second.display())]
    Duplicate {
        kind: PluginKind,
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// A call into an opened plugin that failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CallError {
    /// The plugin reported an error.
    #[error("{kind} plugin `{plugin}` failed in `{entry}`: {message}")]
    Failed {
        kind: PluginKind,
        plugin: String,
        entry: &'static str,
        message: String,
    },
    /// The plugin panicked; the panic was caught at the boundary.
    #[error("{message}")]
    Panicked {
        plugin: String,
        entry: &'static str,
        message: String,
    },
    /// A transport's `send` refused this one message (too large, the peer too far behind); the
    /// connection stays open, and only the request the message carried fails, with `reason`.
    #[error("{message}")]
    Refused {
        plugin: String,
        /// Why, in words for the caller (it names the server and the limit).
        reason: String,
        /// The whole failure, as the plugin and the host said it.
        message: String,
    },
    /// The plugin answered with something the host cannot use.
    #[error("{kind} plugin `{plugin}` answered `{entry}` with invalid JSON: {message}")]
    BadAnswer {
        kind: PluginKind,
        plugin: String,
        entry: &'static str,
        message: String,
    },
    /// An isolated plugin's host process died, hung or could not be started.
    #[error("isolated plugin `{plugin}` is unavailable: {message}")]
    Isolated { plugin: String, message: String },
    /// An isolated plugin's own failure, as its host process reported it (the message already
    /// names the plugin and the call).
    #[error("{message}")]
    Remote {
        plugin: String,
        panicked: bool,
        message: String,
    },
}
