//! Sandbox benchmarks. Run: `cargo bench -p runbyte-core --bench sandbox`.
//!
//! - a trivial program end to end through `Sandbox::execute`, in a warm worker process and on a
//!   host thread (the difference is the cost of process isolation);
//! - one tool call end to end (the bridge answers at once), and a hundred one after another (the
//!   per-call cost of the engine and the host, without a downstream server);
//! - transpiling a 230-line TypeScript program.

#![allow(clippy::unwrap_used)]

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use futures::future::BoxFuture;
use runbyte_core::sandbox::{
    Execution, Isolation, Limits, ModuleProvider, Sandbox, SandboxOptions, ToolBridge, ToolCall,
    transpile,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

fn main() {
    divan::main();
}

struct Modules(Arc<str>);

impl ModuleProvider for Modules {
    fn load(&self, path: &str) -> Option<Arc<str>> {
        (path == "/servers/demo/index.ts").then(|| self.0.clone())
    }
    fn paths(&self) -> Vec<String> {
        vec!["/servers/demo/index.ts".to_owned()]
    }
    fn generation(&self) -> u64 {
        1
    }
}

struct Echo;

impl ToolBridge for Echo {
    fn call(&self, call: ToolCall) -> BoxFuture<'static, Result<Value, String>> {
        Box::pin(async move { Ok(call.arguments) })
    }
}

struct Fixture {
    runtime: tokio::runtime::Runtime,
    sandbox: Sandbox,
    modules: Arc<Modules>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let sandbox = runtime.block_on(async {
            let sandbox = Sandbox::new(SandboxOptions {
                worker_exe: env!("CARGO_BIN_EXE_runbyte").into(),
                ..SandboxOptions::default()
            });
            // Let the pool warm up.
            tokio::time::sleep(Duration::from_millis(500)).await;
            sandbox
        });
        let index = "import { callTool } from 'runbyte:bridge';\n\
                     export async function echo(args: object): Promise<unknown> {\n\
                     \x20 return await callTool('demo', 'echo', args);\n}\n";
        let modules = Arc::new(Modules(Arc::from(
            transpile(index, "/servers/demo/index.ts").unwrap().code(),
        )));
        Fixture {
            runtime,
            sandbox,
            modules,
        }
    })
}

fn execute(source: &str, isolation: Isolation) -> Value {
    let fixture = fixture();
    let execution = Execution {
        source: source.to_owned(),
        limits: Limits {
            isolation,
            ..Limits::default()
        },
        modules: fixture.modules.clone(),
        bridge: Arc::new(Echo),
        cancel: CancellationToken::new(),
        client: "bench".to_owned(),
    };
    let outcome = fixture.runtime.block_on(fixture.sandbox.execute(execution));
    outcome.result.unwrap()
}

const TRIVIAL: &str = "const x: number = 20;\nexport default x + 22;";
const ONE_CALL: &str =
    "import { echo } from './servers/demo';\nexport default await echo({ n: 1 });";

#[divan::bench]
fn trivial_in_worker_process() -> Value {
    execute(TRIVIAL, Isolation::Process)
}

#[divan::bench]
fn trivial_on_host_thread() -> Value {
    execute(TRIVIAL, Isolation::Thread)
}

#[divan::bench]
fn one_tool_call_in_worker_process() -> Value {
    execute(ONE_CALL, Isolation::Process)
}

#[divan::bench]
fn one_tool_call_on_host_thread() -> Value {
    execute(ONE_CALL, Isolation::Thread)
}

const HUNDRED_CALLS: &str = "import { echo } from './servers/demo';\nlet sum = 0;\n\
     for (let i = 0; i < 100; i++) sum += ((await echo({ n: i })) as { n: number }).n;\n\
     export default sum;";

#[divan::bench]
fn hundred_tool_calls_in_worker_process() -> Value {
    execute(HUNDRED_CALLS, Isolation::Process)
}

#[divan::bench]
fn hundred_tool_calls_on_host_thread() -> Value {
    execute(HUNDRED_CALLS, Isolation::Thread)
}

/// A 230-line agent program: imports, interfaces, helpers, a loop over tool calls.
fn program_230_lines() -> String {
    let mut out = String::from(
        "/**\n * Finds crash reports, fetches each, and summarises the bugs among them.\n \
         * (A benchmark fixture: shaped like an agent's program, only longer.)\n */\n\
         import { echo, search_issues, get_issue } from './servers/demo';\n\
         import type { Issue } from './servers/demo/types';\n\n",
    );
    for i in 0..18 {
        out.push_str(&format!(
            "interface Row{i} {{\n\
             \x20 id: number;\n\
             \x20 title: string;\n\
             \x20 labels?: string[];\n\
             }}\n\
             async function step{i}(rows: Row{i}[], limit: number = {i}): Promise<Map<number, string>> {{\n\
             \x20 const out = new Map<number, string>();\n\
             \x20 for (const row of rows.filter((r) => (r.labels ?? []).includes('bug')).slice(0, limit)) {{\n\
             \x20   out.set(row.id, `${{row.title}} (${{(row.labels ?? []).join(', ')}})` as string);\n\
             \x20 }}\n\
             \x20 return out;\n\
             }}\n"
        ));
    }
    out.push_str(
        "export default async function main(): Promise<unknown> {\n\
         \x20 const found = (await search_issues({ query: 'crash', limit: 10 })) as Issue[];\n\
         \x20 const detailed = await Promise.all(found.map((f) => get_issue({ id: f.id })));\n\
         \x20 const summary = await step0(detailed as Row0[]);\n\
         \x20 await echo({ message: `done: ${summary.size}` });\n\
         \x20 return [...summary.entries()];\n\
         }\n",
    );
    out
}

#[divan::bench]
fn transpile_230_lines(bencher: divan::Bencher) {
    let source = program_230_lines();
    assert_eq!(source.lines().count(), 230);
    bencher.bench(|| transpile(divan::black_box(&source), "agent.ts").unwrap());
}
