//! What tool pins cost: judging a 5,000-tool listing (the first, which pins it all, and an
//! unchanged one), and what they add to a call.
//!
//! Run with `cargo build --release && cargo bench -p runbyte-core --bench pins`: the call
//! benches load the release plugin libraries from beside the release `runbyte` binary and use
//! its built-in demo server, as `benches/hub.rs` does.
//!
//! The target: each `judge_5000_*` under 100 ms (`judge_5000_unchanged` is the worst case of a
//! re-judge: a pins file written less than 3 s before, read again). Compare `calls_1000_pinned` with
//! `calls_1000_pin_off` (the same `echo` calls through one Hub to two demo servers, one with
//! `pin = "off"`): their ratio is what pins add to a call (the held-list scan on the call path).

#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    sync::{Arc, LazyLock},
};

use rmcp::model::Tool;
use runbyte_core::{config::Config, gateway::Gateway, hub::CallOptions, pins::Pins};
use serde_json::json;

fn main() {
    divan::main();
}

fn runbyte() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_runbyte"))
}

fn config(servers: &str) -> Config {
    let dir = runbyte().parent().unwrap().to_owned();
    let text = format!(
        "[plugins]\ndirs = [{:?}]\n{servers}",
        dir.display().to_string()
    );
    Config::parse(&text, Path::new("bench.toml"), &dir).unwrap()
}

/// 5,000 tools with schemas of a realistic size (a few typed properties, descriptions of a
/// couple of sentences, annotations).
static CATALOGUE: LazyLock<Vec<Tool>> = LazyLock::new(|| {
    (0..5000)
        .map(|i| {
            let schema = json!({
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "description": "The record's id."},
                    "query": {"type": "string", "description": "What to look for, in words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                    "fields": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["id"],
            });
            let serde_json::Value::Object(schema) = schema else {
                unreachable!()
            };
            let mut tool = Tool::new(
                format!("tool_{i:04}"),
                format!(
                    "Tool number {i}: reads records of kind {i} and returns the matching ones. \
                     Use it when the user asks about kind {i}."
                ),
                Arc::new(schema),
            );
            tool.annotations = Some(rmcp::model::ToolAnnotations::new().read_only(true));
            tool
        })
        .collect()
});

const SERVER: &str = "[servers.t]\ncommand = \"true\"\n";

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "runbyte-bench-pins-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The first listing of 5,000 tools: every definition digested and the pins file written.
#[divan::bench(sample_count = 10)]
fn judge_5000_first_pin(bencher: divan::Bencher) {
    let config = config(SERVER);
    bencher
        .with_inputs(|| {
            let dir = scratch();
            (Pins::new(&config, Some(&dir), None), dir)
        })
        .bench_local_values(|(pins, dir)| {
            let (served, held) = pins.judge("t", CATALOGUE.clone());
            assert_eq!((served.len(), held.len()), (5000, 0));
            let _ = std::fs::remove_dir_all(dir);
        });
}

/// The same 5,000 tools listed again, unchanged, just after the pins file was written: it is
/// read back under the lock (its stamp cannot yet tell it from a write in the same clock tick)
/// and every definition digested and compared.
#[divan::bench(sample_count = 10)]
fn judge_5000_unchanged(bencher: divan::Bencher) {
    let config = config(SERVER);
    let dir = scratch();
    let pins = Pins::new(&config, Some(&dir), None);
    pins.judge("t", CATALOGUE.clone());
    bencher
        .with_inputs(|| CATALOGUE.clone())
        .bench_local_values(|tools| {
            let (served, held) = pins.judge("t", tools);
            assert_eq!((served.len(), held.len()), (5000, 0));
        });
    let _ = std::fs::remove_dir_all(dir);
}

/// The same, the pins file written long enough ago that its stamp alone tells it is the one
/// read (the usual case: nothing re-read, only every definition digested and compared).
#[divan::bench(sample_count = 10)]
fn judge_5000_unchanged_settled(bencher: divan::Bencher) {
    let config = config(SERVER);
    let dir = scratch();
    let pins = Pins::new(&config, Some(&dir), None);
    pins.judge("t", CATALOGUE.clone());
    let (file, _) = runbyte_core::pins::files(&dir, "t");
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();
    pins.judge("t", CATALOGUE.clone());
    bencher
        .with_inputs(|| CATALOGUE.clone())
        .bench_local_values(|tools| {
            let (served, held) = pins.judge("t", tools);
            assert_eq!((served.len(), held.len()), (5000, 0));
        });
    let _ = std::fs::remove_dir_all(dir);
}

/// The same unchanged listing judged in memory (no state folder).
#[divan::bench(sample_count = 10)]
fn judge_5000_unchanged_in_memory(bencher: divan::Bencher) {
    let pins = Pins::new(&config(SERVER), None, None);
    pins.judge("t", CATALOGUE.clone());
    bencher
        .with_inputs(|| CATALOGUE.clone())
        .bench_local_values(|tools| divan::black_box(pins.judge("t", tools)));
}

static TOKIO: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
});

/// One Hub, two demo servers: `pinned` (the default, `pin = "hold"`) and `unpinned` (`pin =
/// "off"`).
static HUB: LazyLock<Arc<Gateway>> = LazyLock::new(|| {
    let table = |name: &str, extra: &str| {
        format!(
            "[servers.{name}]\ncommand = {:?}\nargs = [\"demo-server\"]\n{extra}\n",
            runbyte().display().to_string()
        )
    };
    let tables = table("pinned", "") + &table("unpinned", "pin = \"off\"");
    TOKIO.block_on(async {
        let runtime = Gateway::hub_only_in_memory(config(&tables));
        runtime.hub().start().await;
        runtime
    })
});

fn calls(server: &str) {
    let hub = HUB.hub();
    TOKIO.block_on(async {
        for _ in 0..1000 {
            let args = json!({"message": "hello"});
            hub.call(server, "echo", args, CallOptions::default())
                .await
                .unwrap();
        }
    });
}

/// 1,000 sequential `echo` calls to the server whose tools are pinned...
#[divan::bench(sample_count = 20)]
fn calls_1000_pinned() {
    calls("pinned");
}

/// ...and to the one with `pin = "off"`.
#[divan::bench(sample_count = 20)]
fn calls_1000_pin_off() {
    calls("unpinned");
}
