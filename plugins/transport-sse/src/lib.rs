//! `sse`: the legacy HTTP+SSE transport. Its connector and listener arrive with the Hub and
//! listener work; until then it loads and answers its descriptor.

use runbyte_plugin_api::{export_plugin, transport::Transport};

/// The `sse` transport.
pub struct Sse;

impl Transport for Sse {
    fn open(_config: &str) -> Result<Self, String> {
        Ok(Sse)
    }
}

export_plugin! { kind: transport, name: "sse", plugin: Sse }
