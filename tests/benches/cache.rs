//! The cost of reading one cacheable resource 100 times from a program, against the same program
//! reading it once, measured in the same run, end to end: a real MCP client over stdio,
//! `runbyte serve`, and the test server's fixtures over stdio. Before each timed program the
//! server's list changes, so each reads the server once (the 100 reads' summary says
//! `99 from cache`) and both pay the same re-list. Run with
//! `cargo bench -p runbyte-tests --bench cache` after building the binaries
//! (`cargo build --release --workspace`; or `scripts/bench`).

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use rmcp::{
    RoleClient, ServiceExt, model::CallToolRequestParams, service::RunningService,
    transport::TokioChildProcess,
};
use runbyte_tests::{TempDir, config_of, runbyte, test_server_table};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

const RUNS: usize = 30;

async fn call(client: &Client, args: Value) -> String {
    let mut params = CallToolRequestParams::new("execute_code");
    params.arguments = args.as_object().cloned();
    let result = client.peer().call_tool(params).await.unwrap();
    let text = result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.clone())
        .collect::<String>();
    assert!(result.is_error != Some(true), "{text}");
    text
}

fn reads(uri: &str, times: usize) -> Value {
    json!({"code": format!(
        "import {{ readResource }} from './servers/resources';\n\
         let last;\n\
         for (let i = 0; i < {times}; i++) {{\n\
           [last] = await readResource('runbyte://fixtures/{uri}');\n\
         }}\n\
         export default last.text;"
    )})
}

/// "One read plus the program": one read of `uri`, then the same loop keeping its own copy of
/// the answer and handing out a fresh one each time (what any cache in the program costs).
fn read_then_own_copies(uri: &str, times: usize) -> Value {
    json!({"code": format!(
        "import {{ readResource }} from './servers/resources';\n\
         const read = await readResource('runbyte://fixtures/{uri}');\n\
         const kept = JSON.stringify(read);\n\
         async function again(uri) {{\n\
           const match = /^(?:runbyte|ui):\\/\\/([^/]+)\\//.exec(uri);\n\
           if (!match) throw new Error('no');\n\
           decodeURIComponent(match[1]);\n\
           return JSON.parse(kept);\n\
         }}\n\
         let last = read[0];\n\
         for (let i = 1; i < {times}; i++) {{\n\
           [last] = await again('runbyte://fixtures/{uri}');\n\
         }}\n\
         export default last.text;"
    )})
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let dir = TempDir::new("bench-cache");
        dir.write(
            "runbyte.toml",
            &config_of(&[test_server_table(
                "fixtures",
                &["--mode", "conformance"],
                "",
            )]),
        );
        let mut command = tokio::process::Command::new(runbyte());
        command
            .arg("serve")
            .current_dir(dir.path())
            .env("RUNBYTE_LOG", "error");
        let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
        let once = reads("test://cached-private", 1);
        let hundred = reads("test://cached-private", 100);
        let uncached = reads("test://static-text", 100);
        let own = read_then_own_copies("test://cached-private", 100);
        let change = json!({"code": "import { callTool } from 'runbyte:bridge';\n\
            export default await callTool('fixtures', 'test_trigger_resource_change', {});"});
        // The server's list changes, and Runbyte hears of it: what Runbyte kept is gone.
        let changed = || async {
            call(&client, change.clone()).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // Warm up: the sandbox, the VFS, the connection.
        for _ in 0..5 {
            call(&client, once.clone()).await;
            call(&client, hundred.clone()).await;
        }
        let (mut single, mut cached, mut cold) = (Vec::new(), Vec::new(), 0);
        let (mut every, mut owned) = (Vec::new(), Vec::new());
        for _ in 0..RUNS {
            changed().await;
            let started = Instant::now();
            call(&client, own.clone()).await;
            owned.push(started.elapsed());
            changed().await;
            let started = Instant::now();
            call(&client, once.clone()).await;
            single.push(started.elapsed());
            changed().await;
            let started = Instant::now();
            let text = call(&client, hundred.clone()).await;
            cached.push(started.elapsed());
            cold += usize::from(text.contains("99 from cache"));
            let started = Instant::now();
            call(&client, uncached.clone()).await;
            every.push(started.elapsed());
        }
        let (every, owned) = (median(&mut every), median(&mut owned));
        let (single, cached) = (median(&mut single), median(&mut cached));
        let ratio = cached.as_secs_f64() / single.as_secs_f64();
        println!("| what | median | baseline | ratio |");
        println!("|---|---|---|---|");
        println!(
            "| a program reading a cacheable resource 100 times ({cold}/{RUNS} runs read the \
             server once) | {:.3} ms | the same program reading it once: {:.3} ms | {ratio:.2}× |",
            cached.as_secs_f64() * 1000.0,
            single.as_secs_f64() * 1000.0
        );
        println!(
            "| the same | {:.3} ms | one read, then the loop handing out its own copies: {:.3} ms \
             | {:.2}× |",
            cached.as_secs_f64() * 1000.0,
            owned.as_secs_f64() * 1000.0,
            cached.as_secs_f64() / owned.as_secs_f64()
        );
        println!(
            "| the same program reading an uncacheable resource 100 times | {:.3} ms | the cached \
             one: {:.3} ms | {:.2}× |",
            every.as_secs_f64() * 1000.0,
            cached.as_secs_f64() * 1000.0,
            every.as_secs_f64() / cached.as_secs_f64()
        );
        client.cancel().await.unwrap();
    });
}
