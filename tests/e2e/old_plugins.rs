//! The previous release's plugin libraries keep loading and working in this host: the plugin
//! ABI only ever grows by its append rules (see `docs/architecture.md`, "Versions").
//!
//! The libraries are read from the folder `RUNBYTE_OLD_PLUGINS` names: the plugins of an earlier
//! release (`cargo build` at that release's commit, then its `target/debug/*.so`, `.dylib` or
//! `.dll`). Without it the tests say so and pass: CI builds no earlier release; there
//! `plugin-api`'s layout test pins what these check.

use std::path::PathBuf;

use runbyte_core::plugin::{self, CallError, PluginError, PluginSearch, Received};
use runbyte_plugin_api::PluginKind;
use runbyte_tests::{JsonLines, TempDir, build_dir, runbyte};
use serde_json::{Value, json};

/// The folder of old plugins, or `None` (said on stderr) when there is none.
fn old_plugins() -> Option<PathBuf> {
    let Some(dir) = std::env::var_os("RUNBYTE_OLD_PLUGINS").map(PathBuf::from) else {
        eprintln!("skipped: RUNBYTE_OLD_PLUGINS names no folder of a previous release's plugins");
        return None;
    };
    if dir
        .join(PluginSearch::file_name(PluginKind::Transport, "stdio"))
        .is_file()
    {
        Some(dir)
    } else {
        eprintln!(
            "skipped: no previous release's plugins in {} (set RUNBYTE_OLD_PLUGINS)",
            dir.display()
        );
        None
    }
}

/// A configuration that finds plugins in `old` first, with the demo server.
fn config_in(old: &std::path::Path) -> String {
    format!(
        "[plugins]\ndirs = [{:?}, {:?}]\n\n[servers.demo]\ncommand = {:?}\nargs = [\"demo-server\"]\n\n\
         [sandbox]\npolicy = \"limits\"\n\n[sandbox.limits]\ntimeout-ms = 20000\n",
        old.display().to_string(),
        build_dir().display().to_string(),
        runbyte().display().to_string()
    )
}

fn search_in(old: &std::path::Path) -> PluginSearch {
    let config = runbyte_tests::parse_config(old, &config_in(old));
    PluginSearch::from_config(&config)
}

/// Every old library opens (the fixtures fail as they always did), and each kind answers as
/// the current build of the same plugin does.
#[test]
fn the_previous_releases_plugins_load_and_answer_as_the_current_ones() {
    let Some(old) = old_plugins() else { return };
    let search = search_in(&old);
    let current = runbyte_tests::parse_config(&build_dir(), &runbyte_tests::config_with(""));
    let current = PluginSearch::from_config(&current);
    let bundled = [
        (PluginKind::Transport, "stdio"),
        (PluginKind::Transport, "http"),
        (PluginKind::Transport, "sse"),
        (PluginKind::Transport, "tcp"),
        (PluginKind::Codegen, "typescript"),
        (PluginKind::Codegen, "jsdoc"),
        (PluginKind::Codegen, "dts"),
        (PluginKind::Policy, "limits"),
        (PluginKind::Policy, "readonly"),
    ];
    let mut opened = 0;
    for (kind, name) in bundled {
        let Ok(info) = search.find(kind, name) else {
            continue;
        };
        if !info.path.starts_with(&old) {
            continue;
        }
        plugin::open_any(&info, &json!({})).unwrap_or_else(|error| panic!("{name}: {error}"));
        opened += 1;
    }
    assert!(opened >= 6, "only {opened} old plugins opened");

    // A codegen dialect writes the same files as today's build of it.
    let request = json!({
        "servers": [{"name": "s", "tools": [{
            "name": "add",
            "description": "Adds.",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}}},
        }]}],
    });
    let old_ts = plugin::open_codegen(&search, "typescript", &json!({})).unwrap();
    let new_ts = plugin::open_codegen(&current, "typescript", &json!({})).unwrap();
    assert!(old_ts.info().path.starts_with(&old));
    assert_eq!(
        old_ts.generate(&request).ok(),
        new_ts.generate(&request).ok(),
        "the old and new typescript dialects disagree"
    );

    // A policy gives the same limits and verdicts.
    let old_limits = plugin::open_policy(&search, "limits", &json!({"timeout-ms": 1000})).unwrap();
    let new_limits = plugin::open_policy(&current, "limits", &json!({"timeout-ms": 1000})).unwrap();
    assert!(old_limits.info().path.starts_with(&old));
    assert_eq!(
        old_limits.limits(&json!({})).unwrap(),
        new_limits.limits(&json!({})).unwrap()
    );

    // Each failing fixture fails as it was built to, with a typed error; the host goes on.
    for (stem, name) in [
        ("libfixture_plugin_wrong_version", "oldapi"),
        ("libfixture_plugin_not_a_plugin", "none"),
    ] {
        let path = old.join(format!("{stem}{}", std::env::consts::DLL_SUFFIX));
        if path.is_file() {
            let refused = plugin::read_descriptor(&path)
                .and_then(|info| plugin::open_any(&info, &json!({})).map(|_| ()));
            assert!(
                matches!(
                    refused,
                    Err(PluginError::IncompatibleVersion { .. } | PluginError::NotAPlugin { .. })
                ),
                "{name}: {refused:?}"
            );
        }
    }
}

/// More than the stdio connector lets wait for a child's stdin (its `MAX_BACKLOG`, 64 MiB).
const MORE_THAN_THE_BACKLOG: usize = 65 << 20;

/// The old stdio connector talks to a real server, and a message it refuses (too large)
/// fails only that request: the host still reads the old plugins' refusal.
#[test]
fn the_previous_releases_stdio_connector_carries_messages_and_refusals() {
    let Some(old) = old_plugins() else { return };
    let stdio = plugin::open_transport(&search_in(&old), "stdio", &json!({})).unwrap();
    assert!(stdio.info().path.starts_with(&old));
    let pump = stdio
        .connect(&json!({
            "name": "demo",
            "command": runbyte().display().to_string(),
            "args": ["demo-server"],
        }))
        .unwrap();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    pump.send(&initialize.to_string()).unwrap();
    let answer = next_answer(&pump, "initialize");
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
    // More than may wait for the child's stdin: refused in the old plugins' form, and only
    // that message.
    let huge = json!({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {
        "pad": "x".repeat(MORE_THAN_THE_BACKLOG)}});
    let refused = pump.send(&huge.to_string()).unwrap_err();
    assert!(
        matches!(&refused, CallError::Refused { reason, .. } if reason.starts_with("a 68157")),
        "{refused:?}"
    );
    pump.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}).to_string())
        .unwrap();
    let answer = next_answer(&pump, "ping");
    assert_eq!(answer["id"], 3, "{answer}");
    pump.close();
}

/// The next message from `pump`, which must come within 20 s.
fn next_answer(pump: &plugin::Pump, to: &str) -> Value {
    match pump.recv(std::time::Duration::from_secs(20)).unwrap() {
        Received::Message(text) => serde_json::from_str(&text).unwrap(),
        Received::Timeout => panic!("no answer to {to}"),
        Received::Closed(why) => panic!("closed: {why}"),
    }
}

/// `runbyte serve` with the old plugins found first (the stdio listener and connector, the
/// typescript dialect, the limits policy) runs a program that calls the demo server.
#[test]
fn the_gateway_serves_with_the_previous_releases_plugins() {
    let Some(old) = old_plugins() else { return };
    let dir = TempDir::new("old-plugins");
    dir.write("runbyte.toml", &config_in(&old));
    let listed = runbyte_tests::run(dir.path(), &["plugins"]);
    assert_eq!(listed.code, Some(0), "{listed:?}");
    let stdio = PluginSearch::file_name(PluginKind::Transport, "stdio");
    assert!(
        listed
            .stdout
            .contains(&old.join(&stdio).display().to_string()),
        "{}",
        listed.stdout
    );
    let mut served = JsonLines::start(&config_in(&old));
    let code = "import { echo } from './servers/demo/index';\n\
                export default async () => await echo({ message: 'from-old-plugins' });";
    let answer = served.call(1, "execute_code", json!({"code": code}), json!({}));
    let text = answer.to_string();
    assert!(text.contains("from-old-plugins"), "{answer}");
    assert!(answer["result"]["isError"] != true, "{answer}");
}
