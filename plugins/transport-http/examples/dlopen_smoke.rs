//! Run: `cargo build -p runbyte-transport-http -p runbyte-transport-sse && cargo run -p
//! runbyte-transport-http --example dlopen_smoke`
//!
//! Loads the built `http` and `sse` plugin libraries the way the host does (abi_stable, one
//! library at a time) and drives them from `spawn_blocking` inside a tokio runtime of the
//! "host": an `http` listener with the scripted harness, the `http` connector to it, then an
//! `sse` listener reached through the `http` connector's SSE fallback. Each plugin runs its own
//! tokio; this checks none of them touches the host's.

#![allow(clippy::unwrap_used)]

use std::{path::PathBuf, time::Duration};

use abi_stable::{
    library::lib_header_from_path,
    prefix_type::PrefixTypeTrait,
    std_types::{ROption, RStr},
};
use runbyte_http_common::testing::{Driver, Harness};
use runbyte_plugin_api::{
    HostApi, LogLevel, PluginInstance, PluginModuleRef,
    transport::{
        Accepted, Listener, Pump, RawListenerBox, RawPumpBox, RawReceived, RawTransportBox,
        Received,
    },
};
use serde_json::json;

extern "C" fn host_log(level: LogLevel, plugin: RStr<'_>, message: RStr<'_>) {
    eprintln!("[{plugin} {level:?}] {message}");
}

fn load(file: &str) -> RawTransportBox {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let path: PathBuf = dir.join(file);
    let header = lib_header_from_path(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let module = header.init_root_module::<PluginModuleRef>().unwrap();
    let host = HostApi { log: host_log }.leak_into_prefix();
    match module.open()(RStr::from("{}"), host).into_result().unwrap() {
        PluginInstance::Transport(transport) => transport,
        _ => panic!("{file} is not a transport"),
    }
}

struct RawPump(RawPumpBox);

impl Pump for RawPump {
    fn send(&self, message: &str) -> Result<(), String> {
        self.0
            .send(RStr::from(message))
            .into_result()
            .map_err(|e| e.to_string())
    }
    fn recv(&self, timeout: Duration) -> Received {
        match self.0.recv(timeout.as_millis() as u64).into_result() {
            Ok(RawReceived::Message(m)) => Received::Message(m.into()),
            Ok(RawReceived::Timeout) => Received::Timeout,
            Ok(RawReceived::Closed(r)) => Received::Closed(r.into()),
            Err(e) => Received::Closed(e.to_string()),
        }
    }
    fn close(&self) {
        let _ = self.0.close();
    }
}

struct RawListener(RawListenerBox);

impl Listener for RawListener {
    fn accept(&self, timeout: Duration) -> Result<Option<Accepted>, String> {
        match self.0.accept(timeout.as_millis() as u64).into_result() {
            Ok(ROption::RSome(a)) => Ok(Some(Accepted {
                pump: Box::new(RawPump(a.pump)),
                peer: a.peer.into(),
                session: a.session.into(),
            })),
            Ok(ROption::RNone) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }
    fn address(&self) -> String {
        self.0.address().into_result().unwrap().into()
    }
    fn close(&self) {
        let _ = self.0.close();
    }
}

fn text_of(answer: &serde_json::Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

fn main() {
    let http = load("librunbyte_transport_http.so");
    let sse = load("librunbyte_transport_sse.so");
    let host = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    host.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let options = json!({"bind": "127.0.0.1:0"}).to_string();
            let listener = http.listen(RStr::from(options.as_str())).into_result().unwrap();
            let harness = Harness::serve(Box::new(RawListener(listener)));
            let url = format!("http://{}/mcp", harness.address());
            let target = json!({"name": "smoke", "url": url, "headers": null, "fallback": null}).to_string();
            let pump = http.connect(RStr::from(target.as_str())).into_result().unwrap();
            let mut client = Driver::new(Box::new(RawPump(pump)));
            client.initialize("2025-06-18").unwrap();
            let echo = client.call("tools/call", json!({"name": "echo", "arguments": {"message": "via dlopen"}})).unwrap();
            assert_eq!(text_of(&echo), "via dlopen");
            let slow = client
                .call("tools/call", json!({"name": "slow", "arguments": {"steps": 2, "delayMs": 10}, "_meta": {"progressToken": 1}}))
                .unwrap();
            assert_eq!(text_of(&slow), "done after 2 steps");
            client.pump.close();
            harness.close();

            let listener = sse.listen(RStr::from(options.as_str())).into_result().unwrap();
            let harness = Harness::serve(Box::new(RawListener(listener)));
            let url = format!("http://{}/sse", harness.address());
            let target = json!({"name": "smoke-sse", "url": url, "fallback": "sse"}).to_string();
            let pump = http.connect(RStr::from(target.as_str())).into_result().unwrap();
            let mut client = Driver::new(Box::new(RawPump(pump)));
            client.initialize("2024-11-05").unwrap();
            let echo = client.call("tools/call", json!({"name": "echo", "arguments": {"message": "fallback"}})).unwrap();
            assert_eq!(text_of(&echo), "fallback");
            let pump = sse.connect(RStr::from(target.as_str())).into_result().unwrap();
            let mut direct = Driver::new(Box::new(RawPump(pump)));
            direct.initialize("2024-11-05").unwrap();
            assert_eq!(text_of(&direct.call("tools/call", json!({"name": "echo", "arguments": {"message": "sse"}})).unwrap()), "sse");
            client.pump.close();
            direct.pump.close();
            harness.close();
        })
        .await
        .unwrap();
    });
    eprintln!("dlopen smoke: OK");
}
