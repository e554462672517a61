//! End-to-end benchmarks of the gateway over real transports, against baselines measured in the
//! same run. Run with `scripts/bench` (it builds the release binaries first).
//!
//! Prints one table: each figure with its baseline and their ratio.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use rmcp::{
    RoleClient, ServiceExt,
    model::CallToolRequestParams,
    service::RunningService,
    transport::{StreamableHttpClientTransport, TokioChildProcess},
};
use runbyte_core::{gateway::Gateway, hub::CallOptions};
use runbyte_tests::{TempDir, build_dir, config_with, free_port, parse_config, runbyte};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

async fn stdio_client(dir: &TempDir) -> Client {
    let mut command = tokio::process::Command::new(runbyte());
    command
        .arg("serve")
        .current_dir(dir.path())
        .env("RUNBYTE_LOG", "error");
    ().serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

async fn call(client: &Client, tool: &str, args: Value) -> (String, bool) {
    let mut params = CallToolRequestParams::new(tool.to_owned());
    params.arguments = args.as_object().cloned();
    let result = client.peer().call_tool(params).await.unwrap();
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .collect::<String>();
    (text, result.is_error == Some(true))
}

async fn timed(client: &Client, tool: &str, args: &Value, runs: usize) -> Vec<Duration> {
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let (text, error) = call(client, tool, args.clone()).await;
        samples.push(started.elapsed());
        assert!(!error, "{tool}: {text}");
    }
    samples
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn row(what: &str, value: &str, baseline: &str, ratio: &str) {
    println!("| {what} | {value} | {baseline} | {ratio} |");
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The Hub this process runs itself must start `runbyte demo-server`, not this bench binary.
    // SAFETY: set before any other thread exists.
    unsafe { std::env::set_var("RUNBYTE_EXE", runbyte()) };
    assert!(
        build_dir().ends_with("release"),
        "run with `cargo bench` (release binaries)"
    );
    println!("| measure | value | baseline | ratio |\n|---|---|---|---|");
    execute_overhead().await;
    sequential_calls().await;
    concurrent_calls().await;
    sizes().await;
    http_load().await;
}

/// `execute_code` for a trivial program against a `read_file` round trip (no execution), with
/// process and thread isolation.
async fn execute_overhead() {
    for (isolation, extra) in [
        ("process", ""),
        ("thread", "[sandbox.limits]\nisolation = \"thread\"\n"),
    ] {
        let dir = TempDir::new("bench-overhead");
        dir.write("runbyte.toml", &config_with(extra));
        let client = stdio_client(&dir).await;
        let read = json!({"path": "/servers/demo/echo.ts"});
        let exec = json!({"code": "export default 1;"});
        timed(&client, "read_file", &read, 50).await;
        timed(&client, "execute_code", &exec, 50).await;
        let mut reads = timed(&client, "read_file", &read, 500).await;
        let mut execs = timed(&client, "execute_code", &exec, 500).await;
        let read_median = percentile(&mut reads, 0.5);
        let exec_median = percentile(&mut execs, 0.5);
        let overhead = exec_median.saturating_sub(read_median);
        if isolation == "process" {
            row(
                "read_file round trip over stdio, p99",
                &ms(percentile(&mut reads, 0.99)),
                "target < 1 ms",
                "",
            );
        }
        row(
            &format!("execute_code overhead ({isolation} isolation), median"),
            &ms(overhead),
            &format!("read_file {}", ms(read_median)),
            &format!(
                "{:.2}× the round trip in total",
                exec_median.as_secs_f64() / read_median.as_secs_f64()
            ),
        );
        client.cancel().await.unwrap();
    }
}

/// 100 sequential calls inside one program against the same 100 calls through the Hub directly.
async fn sequential_calls() {
    let dir = TempDir::new("bench-sequential");
    dir.write("runbyte.toml", &config_with(""));
    let runtime = Gateway::hub_only(parse_config(dir.path(), &config_with("")));
    runtime.hub().start().await;
    let mut direct = Vec::new();
    for round in 0..6 {
        let started = Instant::now();
        for _ in 0..100 {
            runtime
                .hub()
                .call(
                    "demo",
                    "echo",
                    json!({"message": "x"}),
                    CallOptions::default(),
                )
                .await
                .unwrap();
        }
        if round > 0 {
            direct.push(started.elapsed());
        }
    }
    runtime.hub().shutdown().await;
    let client = stdio_client(&dir).await;
    let program = json!({"code": "import { echo } from './servers/demo';\nfor (let i = 0; i < 100; i++) await echo({ message: 'x' });"});
    let mut program_runs = timed(&client, "execute_code", &program, 6)
        .await
        .split_off(1);
    client.cancel().await.unwrap();
    let direct = percentile(&mut direct, 0.5);
    let in_program = percentile(&mut program_runs, 0.5);
    row(
        "100 sequential calls in one program, median",
        &ms(in_program),
        &format!("100 direct Hub calls {}", ms(direct)),
        &format!(
            "{:.2}× (target ≤ 1.5×)",
            in_program.as_secs_f64() / direct.as_secs_f64()
        ),
    );
}

/// `Promise.all` over 10 calls to a tool that sleeps 100 ms.
async fn concurrent_calls() {
    let dir = TempDir::new("bench-concurrent");
    dir.write("runbyte.toml", &config_with(""));
    let client = stdio_client(&dir).await;
    let program = json!({"code": "import { sleep } from './servers/demo';\nawait Promise.all(Array.from({ length: 10 }, () => sleep({ ms: 100 })));"});
    timed(&client, "execute_code", &program, 1).await;
    let mut runs = timed(&client, "execute_code", &program, 10).await;
    client.cancel().await.unwrap();
    let median = percentile(&mut runs, 0.5);
    row(
        "Promise.all of 10 × 100 ms calls, median",
        &ms(median),
        "one call 100 ms; target < 150 ms",
        &format!("{:.2}×", median.as_secs_f64() / 0.1),
    );
}

/// What a client loads: Runbyte's tools/list and instructions, against every downstream tool
/// listed directly.
async fn sizes() {
    let dir = TempDir::new("bench-sizes");
    let test_server = build_dir().join("runbyte-test-server");
    let extra = if test_server.exists() {
        format!(
            "[servers.test]\ncommand = {:?}\nargs = [\"--mode\", \"many-tools\", \"--tools\", \"40\"]\n",
            test_server.display().to_string()
        )
    } else {
        String::new()
    };
    dir.write("runbyte.toml", &config_with(&extra));
    let client = stdio_client(&dir).await;
    let tools = client.peer().list_all_tools().await.unwrap();
    let instructions = client
        .peer()
        .peer_info()
        .and_then(|i| i.instructions.clone())
        .unwrap_or_default();
    let own = serde_json::to_string(&json!({"tools": tools}))
        .unwrap()
        .len();
    let (module, _) = call(
        &client,
        "read_file",
        json!({"path": "/servers/demo/search_issues.ts"}),
    )
    .await;
    client.cancel().await.unwrap();
    let runtime = Gateway::hub_only(parse_config(dir.path(), &config_with(&extra)));
    runtime.hub().start().await;
    let mut downstream = 0;
    let mut count = 0;
    for view in runtime.hub().servers().await {
        count += view.tools.len();
        downstream += serde_json::to_string(&json!({"tools": view.tools.as_ref()}))
            .unwrap()
            .len();
    }
    runtime.hub().shutdown().await;
    row(
        "Runbyte tools/list",
        &format!("{own} B"),
        "target < 3 KB",
        "",
    );
    row(
        "Runbyte instructions",
        &format!("{} B", instructions.len()),
        "target < 1.5 KB",
        "",
    );
    row(
        "to see the tools: Runbyte tools/list + one read_file",
        &format!("{} B", own + module.len()),
        &format!("{count} downstream tools listed directly: {downstream} B"),
        &format!("{:.2}×", (own + module.len()) as f64 / downstream as f64),
    );
}

/// 50 concurrent clients × 20 trivial executions over streamable HTTP; then the same 1,000
/// executions from one stdio client, for comparison.
async fn http_load() {
    let dir = TempDir::new("bench-http");
    dir.write("runbyte.toml", &config_with(""));
    let port = free_port();
    let mut server = std::process::Command::new(runbyte())
        .args([
            "serve",
            "--listen",
            "http",
            "--bind",
            &format!("127.0.0.1:{port}"),
        ])
        .current_dir(dir.path())
        .env("RUNBYTE_LOG", "error")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let url = format!("http://127.0.0.1:{port}/mcp");
    let exec = json!({"code": "export default 6 * 7;"});
    let started = Instant::now();
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (url, exec) = (url.clone(), exec.clone());
            tokio::spawn(async move {
                let client = ().serve(StreamableHttpClientTransport::from_uri(url)).await.unwrap();
                let samples = timed(&client, "execute_code", &exec, 20).await;
                client.cancel().await.unwrap();
                samples
            })
        })
        .collect();
    let mut samples = Vec::new();
    for task in tasks {
        samples.extend(task.await.unwrap());
    }
    let wall = started.elapsed();
    let rss = rss_kib(server.id());
    let _ = server.kill();
    let _ = server.wait();
    let p50 = percentile(&mut samples, 0.5);
    let p99 = percentile(&mut samples, 0.99);
    row(
        "HTTP: 50 clients × 20 executions, all succeeded; p50 / p99",
        &format!("{} / {}", ms(p50), ms(p99)),
        "target p99 < 50 ms",
        &format!(
            "{} executions in {:.2} s",
            samples.len(),
            wall.as_secs_f64()
        ),
    );
    row(
        "HTTP: server peak RSS (VmHWM)",
        &format!("{:.1} MB", rss as f64 / 1024.0),
        "target < 200 MB",
        "",
    );

    let client = stdio_client(&dir).await;
    let mut stdio = timed(&client, "execute_code", &exec, 1000).await;
    client.cancel().await.unwrap();
    row(
        "stdio: one client × 1,000 executions; p50 / p99",
        &format!(
            "{} / {}",
            ms(percentile(&mut stdio, 0.5)),
            ms(percentile(&mut stdio, 0.99))
        ),
        "",
        "",
    );
}
