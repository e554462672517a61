//! Run: `cargo run -p runbyte-transport-http --example harness_server -- 127.0.0.1:3000`
//!
//! Serves the scripted test harness (initialize, ping, tools/list, logging/setLevel, tools/call)
//! over the `http` listener at `http://<bind>/mcp`, for the MCP conformance suite:
//! `node .../conformance/dist/index.js server --url http://127.0.0.1:3000/mcp`.

#![allow(clippy::unwrap_used)]

use runbyte_http_common::testing::Harness;
use runbyte_plugin_api::transport::Transport;
use runbyte_transport_http::HttpTransport;

fn main() {
    let bind = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3000".to_owned());
    let transport = HttpTransport::open("{}").unwrap();
    let options = serde_json::json!({ "bind": bind }).to_string();
    let listener = match transport.listen(&options) {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("harness_server: {error}");
            std::process::exit(1);
        }
    };
    let harness = Harness::serve(listener);
    eprintln!(
        "harness_server: listening on http://{}/mcp",
        harness.address()
    );
    loop {
        std::thread::park();
    }
}
