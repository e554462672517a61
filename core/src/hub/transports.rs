//! Transport plugins, opened on first use and kept.

use std::{collections::HashMap, sync::Mutex};

use crate::{
    config::Config,
    plugin::{self, PluginError, PluginSearch, TransportPlugin},
};

/// The transport plugins a configuration uses, each opened once with its `[transports.<name>]`
/// table.
pub struct Transports {
    search: PluginSearch,
    tables: HashMap<String, serde_json::Value>,
    opened: Mutex<HashMap<String, Result<TransportPlugin, PluginError>>>,
}

impl Transports {
    /// Transports found through `search`, configured from `config`.
    pub fn new(config: &Config, search: PluginSearch) -> Self {
        let tables = config
            .transports
            .keys()
            .map(|name| (name.clone(), config.transport_table(name)))
            .collect();
        Transports {
            search,
            tables,
            opened: Mutex::new(HashMap::new()),
        }
    }

    /// The transport plugin called `name`, opening it on first use. A plugin that failed to open
    /// keeps failing with the same error.
    pub fn get(&self, name: &str) -> Result<TransportPlugin, PluginError> {
        let mut opened = self.opened.lock().unwrap_or_else(|p| p.into_inner());
        opened
            .entry(name.to_owned())
            .or_insert_with(|| {
                let table = self
                    .tables
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| serde_json::json!({}));
                plugin::open_transport(&self.search, name, &table)
            })
            .clone()
    }
}
