//! `http`: the streamable HTTP transport. Its connector and listener arrive with the Hub and
//! listener work; until then it loads and answers its descriptor.

use runbyte_plugin_api::{export_plugin, transport::Transport};

/// The `http` transport.
pub struct Http;

impl Transport for Http {
    fn open(_config: &str) -> Result<Self, String> {
        Ok(Http)
    }
}

export_plugin! { kind: transport, name: "http", plugin: Http }
