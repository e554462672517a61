//! The Hub's overhead against a bare rmcp client, concurrent calls, and parallel start.
//!
//! Run with `cargo build --release && cargo bench -p runbyte-core --bench hub`: the benches load
//! the release plugin libraries from beside the release `runbyte` binary and use its built-in
//! demo server as the downstream stdio server.
//!
//! Compare `hub_1000_sequential_calls` with `bare_rmcp_1000_sequential_calls` (the same `echo`
//! calls to the same kind of server): their ratio is the Hub's overhead.
//!
//! Compare `get_issue_100_calls_recorded` with `get_issue_100_calls` (a tool without an
//! `outputSchema` that answers JSON text, its answer parsed as the bridge does): their ratio is
//! what inferring its result type costs a call. `record_one_issue` is that cost alone.
//! `get_issue_100_calls_recorded_and_counted` adds counting each answer's tokens.

#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    sync::{Arc, LazyLock},
    time::Duration,
};

use rmcp::{
    RoleClient, ServiceExt, model::CallToolRequestParams, service::RunningService,
    transport::TokioChildProcess,
};
use runbyte_core::{config::Config, gateway::Gateway, hub::CallOptions, infer::Inferred};
use serde_json::json;

fn main() {
    divan::main();
}

fn runbyte() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_runbyte"))
}

static TOKIO: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
});

fn config(servers: &str) -> Config {
    let dir = runbyte().parent().unwrap().to_owned();
    let text = format!(
        "[plugins]\ndirs = [{:?}]\n{servers}",
        dir.display().to_string()
    );
    Config::parse(&text, Path::new("bench.toml"), &dir).unwrap()
}

fn demo_table(name: &str, delay: &str) -> String {
    format!(
        "[servers.{name}]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep {delay}; exec \\\"$0\\\" demo-server\", {:?}]\n",
        runbyte().display().to_string()
    )
}

static HUB: LazyLock<Arc<Gateway>> = LazyLock::new(|| {
    TOKIO.block_on(async {
        let runtime = Gateway::hub_only(config(&demo_table("demo", "0")));
        runtime.hub().start().await;
        runtime
    })
});

static BARE: LazyLock<RunningService<RoleClient, ()>> = LazyLock::new(|| {
    TOKIO.block_on(async {
        let mut command = tokio::process::Command::new(runbyte());
        command.arg("demo-server").env("RUNBYTE_LOG", "warn");
        ().serve(TokioChildProcess::new(command).unwrap())
            .await
            .unwrap()
    })
});

/// 1,000 sequential `echo` calls through the Hub (schema check, routing, the stdio plugin's
/// pump), in one task.
#[divan::bench(sample_count = 20)]
fn hub_1000_sequential_calls() {
    let hub = &HUB.hub();
    TOKIO.block_on(async {
        for _ in 0..1000 {
            let args = json!({"message": "hello"});
            hub.call("demo", "echo", args, CallOptions::default())
                .await
                .unwrap();
        }
    });
}

/// The same 1,000 calls from a bare rmcp client over rmcp's own child-process transport.
#[divan::bench(sample_count = 20)]
fn bare_rmcp_1000_sequential_calls() {
    let peer = BARE.peer().clone();
    TOKIO.block_on(async {
        for _ in 0..1000 {
            let mut params = CallToolRequestParams::new("echo");
            params.arguments = json!({"message": "hello"}).as_object().cloned();
            peer.call_tool(params).await.unwrap();
        }
    });
}

/// What the bridge does with an untyped tool's answer: its text parsed as JSON.
fn issue_value(result: rmcp::model::CallToolResult) -> serde_json::Value {
    let text = &result.content[0].as_text().unwrap().text;
    serde_json::from_str(text).unwrap()
}

static INFERRED: LazyLock<Inferred> = LazyLock::new(|| Inferred::new(HUB.config(), None));

/// 100 calls of `get_issue` (no `outputSchema`, JSON text), each answer parsed...
#[divan::bench(sample_count = 20)]
fn get_issue_100_calls() {
    let hub = &HUB.hub();
    TOKIO.block_on(async {
        for id in 0..100u64 {
            let args = json!({"id": id % 8 + 1});
            let result = hub
                .call("demo", "get_issue", args, CallOptions::default())
                .await;
            divan::black_box(issue_value(result.unwrap()));
        }
    });
}

/// ...and the same with each answer's shape recorded, as a program's calls are.
#[divan::bench(sample_count = 20)]
fn get_issue_100_calls_recorded() {
    let hub = &HUB.hub();
    let inferred = &*INFERRED;
    TOKIO.block_on(async {
        let tool = hub.tool("demo", "get_issue").await.unwrap();
        for id in 0..100u64 {
            let args = json!({"id": id % 8 + 1});
            let result = hub
                .call("demo", "get_issue", args, CallOptions::default())
                .await;
            let value = issue_value(result.unwrap());
            inferred.record("demo", &tool, &value);
            divan::black_box(value);
        }
    });
}

/// ...and the same with each answer's tokens counted too, as a program's calls are (on blocking
/// threads; the counts awaited at the end, as an execution's are before its summary).
#[divan::bench(sample_count = 20)]
fn get_issue_100_calls_recorded_and_counted() {
    let hub = &HUB.hub();
    let inferred = &*INFERRED;
    runbyte_core::tokens::warm();
    TOKIO.block_on(async {
        let tool = hub.tool("demo", "get_issue").await.unwrap();
        let pending = runbyte_core::tokens::Pending::default();
        for id in 0..100u64 {
            let args = json!({"id": id % 8 + 1});
            let result = hub.call("demo", "get_issue", args, CallOptions::default());
            let result = result.await.unwrap();
            pending.add("demo", &result);
            let value = issue_value(result);
            inferred.record("demo", &tool, &value);
            divan::black_box(value);
        }
        divan::black_box(pending.by_server(std::time::Duration::from_secs(60)).await);
    });
}

/// Recording one `get_issue` answer's shape: the walk, the merge, the lock.
#[divan::bench]
fn record_one_issue(bencher: divan::Bencher) {
    let hub = &HUB.hub();
    let inferred = &*INFERRED;
    let (tool, value) = TOKIO.block_on(async {
        let tool = hub.tool("demo", "get_issue").await.unwrap();
        let result = hub.call(
            "demo",
            "get_issue",
            json!({"id": 1}),
            CallOptions::default(),
        );
        (tool, issue_value(result.await.unwrap()))
    });
    bencher.bench(|| inferred.record("demo", &tool, divan::black_box(&value)));
}

/// 100 concurrent calls to a tool that sleeps 100 ms: the target is under 300 ms.
#[divan::bench(sample_count = 10)]
fn concurrent_100_sleeps_of_100ms() {
    let hub = &HUB.hub();
    TOKIO.block_on(async {
        let calls =
            (0..100).map(|_| hub.call("demo", "sleep", json!({"ms": 100}), CallOptions::default()));
        for result in futures::future::join_all(calls).await {
            result.unwrap();
        }
    });
}

/// Starting (spawn, initialize, tools/list) one server that takes 300 ms to come up...
#[divan::bench(sample_count = 5)]
fn start_one_slow_server() {
    start(&demo_table("s0", "0.3"));
}

/// ...and five of them: parallel start makes this the slowest one's time, not the sum.
#[divan::bench(sample_count = 5)]
fn start_five_slow_servers() {
    let tables: String = (0..5)
        .map(|i| demo_table(&format!("s{i}"), "0.3"))
        .collect();
    start(&tables);
}

fn start(tables: &str) {
    TOKIO.block_on(async {
        let runtime = Gateway::hub_only(config(tables));
        runtime.hub().start().await;
        for view in runtime.hub().servers().await {
            assert!(!view.tools.is_empty(), "{} did not start", view.name);
        }
        runtime.hub().shutdown().await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    });
}
