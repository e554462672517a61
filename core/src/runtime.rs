//! The assembled gateway: configuration, plugins and the Hub, as every command uses them.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use crate::{
    config::{Config, ConfigError, DEFAULT_CONFIG},
    hub::{Hub, Transports},
    plugin::PluginSearch,
};

/// Where the configuration comes from: `--config`/`RUNBYTE_CONFIG`, else `./runbyte.toml`, else
/// the built-in default (the demo server), read as if it sat beside the binary.
pub fn load_config(explicit: Option<&Path>) -> Result<Config, ConfigError> {
    if let Some(path) = explicit {
        return Config::load(path);
    }
    let local = PathBuf::from("runbyte.toml");
    if local.is_file() {
        let absolute = std::env::current_dir()
            .map(|dir| dir.join(&local))
            .unwrap_or(local);
        return Config::load(&absolute);
    }
    let base = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_owned))
        .unwrap_or_default();
    tracing::info!("no runbyte.toml here and none given; using the built-in default configuration");
    Config::parse(
        DEFAULT_CONFIG,
        Path::new("<built-in default runbyte.toml>"),
        &base,
    )
}

/// Everything a running Runbyte holds.
pub struct Runtime {
    /// The configuration it started with.
    pub config: Arc<Config>,
    /// Where plugins are found.
    pub search: PluginSearch,
    /// The transport plugins, opened on first use.
    pub transports: Arc<Transports>,
    /// The downstream servers.
    pub hub: Hub,
}

impl Runtime {
    /// Assembles a runtime; nothing connects yet. Must be called inside the tokio runtime.
    pub fn new(config: Config) -> Arc<Self> {
        let search = PluginSearch::from_config(&config);
        let transports = Arc::new(Transports::new(&config, search.clone()));
        let hub = Hub::new(&config, transports.clone());
        Arc::new(Runtime {
            config: Arc::new(config),
            search,
            transports,
            hub,
        })
    }
}
