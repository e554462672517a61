//! The sandbox end to end: real QuickJS, real `runbyte worker` processes, a small bridge that
//! answers like a server (echoing, sleeping, failing, never answering).
//!
//! Run: `cargo test -p runbyte-core --test sandbox`.

#![allow(clippy::unwrap_used)]

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
use runbyte_core::sandbox::{
    Determinism, ErrorKind, Execution, Isolation, Limits, ModuleProvider, Observed, Outcome,
    Sandbox, SandboxOptions, ToolBridge, ToolCall, Turn, transpile,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const BOTH: [Isolation; 2] = [Isolation::Process, Isolation::Thread];

/// A tool wrapper as the TypeScript dialect generates it.
fn wrapper(server: &str, tool: &str, function: &str) -> String {
    format!(
        "import {{ callTool }} from \"runbyte:bridge\";\n\
         /** Calls tool \"{tool}\" of server \"{server}\". */\n\
         export async function {function}(args: {function}Args): Promise<unknown> {{\n\
         \x20 return (await callTool(\"{server}\", \"{tool}\", args)) as unknown;\n\
         }}\n\
         export interface {function}Args {{ [key: string]: unknown }}\n"
    )
}

/// The VFS: generated modules, transpiled like the codegen driver does.
struct Vfs {
    files: Mutex<HashMap<String, Arc<str>>>,
    generation: AtomicU64,
    /// What this provider is, for engine threads that keep its modules compiled.
    identity: Arc<()>,
}

impl Vfs {
    fn demo() -> Arc<Vfs> {
        let tools = ["echo", "sleep", "fail", "never", "add_numbers"];
        let mut sources: Vec<(String, String)> = tools
            .iter()
            .map(|tool| {
                let name = if *tool == "add_numbers" {
                    "add-numbers"
                } else {
                    tool
                };
                (
                    format!("/servers/demo/{tool}.ts"),
                    wrapper("demo", name, tool),
                )
            })
            .collect();
        let index: String = tools
            .iter()
            .map(|tool| format!("export * from './{tool}';\n"))
            .collect();
        sources.push(("/servers/demo/index.ts".to_owned(), index));
        sources.push((
            "/servers/github/index.ts".to_owned(),
            "export * from './search';\n".to_owned(),
        ));
        sources.push((
            "/servers/github/search.ts".to_owned(),
            wrapper("github", "search", "search"),
        ));
        sources.push((
            "/servers/index.ts".to_owned(),
            "export * as demo from './demo/index';\nexport * as github from './github/index';\n"
                .to_owned(),
        ));
        let files = sources
            .into_iter()
            .map(|(path, source)| {
                let code = transpile(&source, &path).unwrap().code().to_owned();
                (path, Arc::from(code))
            })
            .collect();
        Arc::new(Vfs {
            files: Mutex::new(files),
            generation: AtomicU64::new(1),
            identity: Arc::new(()),
        })
    }

    fn put(&self, path: &str, source: &str) {
        let code = transpile(source, path).unwrap().code().to_owned();
        self.files
            .lock()
            .unwrap()
            .insert(path.to_owned(), Arc::from(code));
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

impl ModuleProvider for Vfs {
    fn load(&self, path: &str) -> Option<Arc<str>> {
        self.files.lock().unwrap().get(path).cloned()
    }
    fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self.files.lock().unwrap().keys().cloned().collect();
        paths.sort();
        paths
    }
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
    fn identity(&self) -> Option<std::sync::Weak<dyn std::any::Any + Send + Sync>> {
        let identity: Arc<dyn std::any::Any + Send + Sync> = self.identity.clone();
        Some(Arc::downgrade(&identity))
    }
}

/// Answers like a server: `echo` returns its arguments, `sleep` waits `ms`, `fail` fails,
/// `never` never answers, `add-numbers` adds.
/// It can also stand for a replay: its `determinism` is what executions are given, what they
/// observe is kept in `observed`, and with `instant` set `sleep` returns at once (as a
/// recorded result does).
#[derive(Default)]
struct Bridge {
    calls: Mutex<Vec<ToolCall>>,
    in_flight: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    determinism: Mutex<Option<Determinism>>,
    observed: Mutex<Observed>,
    instant: std::sync::atomic::AtomicBool,
}

impl ToolBridge for Bridge {
    fn determinism(&self) -> Determinism {
        self.determinism
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_else(Determinism::fresh)
    }

    fn observe(&self, observed: Observed) {
        self.observed.lock().unwrap().extend(observed);
    }

    fn call(&self, call: ToolCall) -> BoxFuture<'static, Result<Value, String>> {
        self.calls.lock().unwrap().push(call.clone());
        let (in_flight, peak) = (self.in_flight.clone(), self.peak.clone());
        let instant = self.instant.load(Ordering::SeqCst);
        Box::pin(async move {
            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            let result = match call.tool.as_str() {
                "echo" | "search" => Ok(call.arguments.clone()),
                "sleep" => {
                    let ms = call.arguments["ms"].as_u64().unwrap_or(0);
                    if !instant {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                    Ok(json!({ "slept": ms }))
                }
                "fail" => Err(format!("{} failed on purpose", call.tool)),
                "never" => futures::future::pending().await,
                "add-numbers" => Ok(json!(
                    call.arguments["a"].as_f64().unwrap_or(0.0)
                        + call.arguments["b"].as_f64().unwrap_or(0.0)
                )),
                other => Err(format!("unknown tool {other}")),
            };
            in_flight.fetch_sub(1, Ordering::SeqCst);
            result
        })
    }
}

fn options() -> SandboxOptions {
    SandboxOptions {
        worker_exe: env!("CARGO_BIN_EXE_runbyte").into(),
        ..SandboxOptions::default()
    }
}

struct Harness {
    sandbox: Sandbox,
    vfs: Arc<Vfs>,
    bridge: Arc<Bridge>,
}

impl Harness {
    fn new() -> Harness {
        Harness::with(options())
    }

    fn with(options: SandboxOptions) -> Harness {
        Harness {
            sandbox: Sandbox::new(options),
            vfs: Vfs::demo(),
            bridge: Arc::new(Bridge::default()),
        }
    }

    fn execution(&self, source: &str, limits: Limits) -> Execution {
        Execution {
            source: source.to_owned(),
            limits,
            modules: self.vfs.clone(),
            bridge: self.bridge.clone(),
            cancel: CancellationToken::new(),
            client: "test".to_owned(),
        }
    }

    async fn run_with(&self, source: &str, limits: Limits) -> Outcome {
        self.sandbox.execute(self.execution(source, limits)).await
    }

    async fn run(&self, source: &str, isolation: Isolation) -> Outcome {
        self.run_with(source, limits(isolation)).await
    }

    /// After anything, the next execution must work normally.
    async fn still_works(&self, isolation: Isolation) {
        let outcome = self
            .run(
                "import { echo } from './servers/demo';\nexport default await echo({ ok: 1 });",
                isolation,
            )
            .await;
        assert_eq!(
            outcome.result,
            Ok(json!({ "ok": 1 })),
            "{isolation:?}: {outcome:?}"
        );
    }
}

fn limits(isolation: Isolation) -> Limits {
    Limits {
        isolation,
        ..Limits::default()
    }
}

/// Short limits for programs that misbehave.
fn tight(isolation: Isolation) -> Limits {
    Limits {
        timeout: Duration::from_secs(1),
        isolation,
        ..Limits::default()
    }
}

fn value(outcome: &Outcome) -> &Value {
    match &outcome.result {
        Ok(value) => value,
        Err(error) => panic!("expected a value, got {error:?} (logs: {:?})", outcome.logs),
    }
}

fn error(outcome: &Outcome, kind: ErrorKind) -> &runbyte_core::sandbox::ExecError {
    match &outcome.result {
        Err(error) if error.kind == kind => error,
        other => panic!("expected {kind:?}, got {other:?}"),
    }
}

/// Within the deadline plus grace, with slack for a busy machine.
fn promptly(outcome: &Outcome, limits: &Limits) {
    let bound = limits.timeout + Duration::from_millis(500) + Duration::from_millis(1500);
    assert!(
        outcome.duration < bound,
        "took {:?}, bound {bound:?}",
        outcome.duration
    );
}

mod imports {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn every_form_resolves() {
        let h = Harness::new();
        let forms = [
            "import { echo } from './servers/demo'; export default await echo({ v: 1 });",
            "import { echo } from '/servers/demo'; export default await echo({ v: 1 });",
            "import { echo } from 'servers/demo'; export default await echo({ v: 1 });",
            "import { echo } from './servers/demo/index'; export default await echo({ v: 1 });",
            "import { echo } from './servers/demo/index.ts'; export default await echo({ v: 1 });",
            "import { echo } from './servers/demo/echo'; export default await echo({ v: 1 });",
            "import { echo } from './servers/demo/echo.ts'; export default await echo({ v: 1 });",
            "import { echo } from './servers/demo/echo.js'; export default await echo({ v: 1 });",
            "import { demo } from './servers'; export default await demo.echo({ v: 1 });",
            "import * as s from '/servers/index.ts'; export default await s.demo.echo({ v: 1 });",
            "import { callTool } from 'runbyte:bridge'; export default await callTool('demo', 'echo', { v: 1 });",
            "const m = await import('./servers/demo'); export default await m.echo({ v: 1 });",
        ];
        for isolation in BOTH {
            for form in forms {
                let outcome = h.run(form, isolation).await;
                assert_eq!(
                    outcome.result,
                    Ok(json!({ "v": 1 })),
                    "{isolation:?} {form}"
                );
            }
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_missing_module_lists_what_exists() {
        let h = Harness::new();
        for isolation in BOTH {
            let outcome = h
                .run(
                    "import { echo } from './servers/dmo';\nexport default await echo({});",
                    isolation,
                )
                .await;
            let e = error(&outcome, ErrorKind::Module);
            assert!(e.message.contains("./servers/dmo"), "{e:?}");
            assert!(e.message.contains("the servers are: demo, github"), "{e:?}");
            assert!(e.message.contains("did you mean `/servers/demo`?"), "{e:?}");

            let outcome = h
                .run("import x from 'lodash';\nexport default x;", isolation)
                .await;
            let e = error(&outcome, ErrorKind::Module);
            assert!(e.message.contains("`lodash`"), "{e:?}");
            h.still_works(isolation).await;
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_missing_export_lists_the_exports() {
        let h = Harness::new();
        for isolation in BOTH {
            let source = "// a comment\nimport { ech } from './servers/demo';\nexport default await ech({});\n";
            let outcome = h.run(source, isolation).await;
            let e = error(&outcome, ErrorKind::Module);
            assert!(e.message.contains("has no export `ech`"), "{e:?}");
            assert!(
                e.message.contains("add_numbers, echo, fail, never, sleep"),
                "{e:?}"
            );
            assert!(e.message.contains("did you mean `echo`?"), "{e:?}");
            assert_eq!(e.position.map(|p| p.0), Some(2), "{e:?}");
            h.still_works(isolation).await;
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_new_generation_is_seen_by_warm_workers() {
        let h = Harness::new();
        for isolation in BOTH {
            h.vfs
                .put("/servers/demo/extra.ts", "export const answer: number = 1;");
            let source = "import { answer } from './servers/demo/extra'; export default answer;";
            assert_eq!(h.run(source, isolation).await.result, Ok(json!(1)));
            h.vfs
                .put("/servers/demo/extra.ts", "export const answer: number = 2;");
            assert_eq!(h.run(source, isolation).await.result, Ok(json!(2)));
            assert_eq!(h.run(source, isolation).await.result, Ok(json!(2)));
        }
    }

    /// A module read back from what an earlier execution compiled behaves as the source does,
    /// down to the line an error is thrown at.
    #[tokio::test(flavor = "multi_thread")]
    async fn modules_compiled_once_run_alike_after() {
        let h = Harness::new();
        h.vfs.put(
            "/servers/demo/thrower.ts",
            "export const tag: string = \"thrower\";\n\nexport function boom(): never {\n  throw new Error(\"boom from the module\");\n}\n",
        );
        let source = "import { boom, tag } from './servers/demo/thrower';\n\
                      import * as all from './servers';\n\
                      try { boom(); } catch (e) {\n\
                        export default [tag, Object.keys(all.demo).length, String(e.stack)];\n\
                      }";
        let source = source.replace("export default", "globalThis.out =")
            + "\nexport default globalThis.out;";
        for isolation in BOTH {
            let mut seen = Vec::new();
            for _ in 0..3 {
                let outcome = h.run(&source, isolation).await;
                seen.push(value(&outcome).clone());
            }
            let stack = seen[0][2].as_str().unwrap_or_default().to_owned();
            assert!(
                stack.contains("at boom (/servers/demo/thrower.ts:3"),
                "{isolation:?}: {stack}"
            );
            assert_eq!(seen[0][0], json!("thrower"));
            assert_eq!(seen[0][1], json!(5), "{isolation:?}: {seen:?}");
            assert!(
                seen.iter().all(|v| *v == seen[0]),
                "{isolation:?}: {seen:?}"
            );
        }
    }
}

mod programs {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn exec_top_level_await_and_export_default() {
        let h = Harness::new();
        let cases = [
            (
                "import { add_numbers } from './servers/demo';\n\
                 async function exec(): Promise<unknown> {\n  return await add_numbers({ a: 2, b: 3 });\n}\n",
                json!(5),
            ),
            ("const exec = async () => 'arrow';", json!("arrow")),
            (
                "export async function exec() { return 'exported'; }",
                json!("exported"),
            ),
            (
                "import { echo } from './servers/demo';\nconst r = await echo({ x: 'tla' });\nexport default r;",
                json!({ "x": "tla" }),
            ),
            (
                "export default async function main() { return 42; }",
                json!(42),
            ),
            ("export default Promise.resolve([1, 2]);", json!([1, 2])),
            ("let x: number = 1; x += 1;", Value::Null),
            (
                "await new Promise<void>((resolve) => setTimeout(resolve, 20));\nexport default 'timer';",
                json!("timer"),
            ),
        ];
        for isolation in BOTH {
            for (source, expected) in &cases {
                let outcome = h.run(source, isolation).await;
                assert_eq!(
                    &outcome.result,
                    &Ok(expected.clone()),
                    "{isolation:?}: {source}"
                );
            }
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn results_render_deterministically() {
        let h = Harness::new();
        let source = r#"
            const cyclic: any = { name: "c" };
            cyclic.self = cyclic;
            export default {
              nan: NaN, inf: Infinity, ninf: -Infinity, big: 123n, neg0: -0, float: 1.5,
              date: new Date(0),
              map: new Map<string, number>([["a", 1]]),
              set: new Set([1, 2]),
              undef: undefined,
              arr: [1, undefined, () => 1],
              fn: function named() {},
              sym: Symbol("s"),
              err: new TypeError("bad"),
              bytes: new Uint8Array([1, 2, 3]),
              cyclic,
              promise: Promise.resolve(1),
              get computed() { return 7; },
            };
        "#;
        for isolation in BOTH {
            let outcome = h.run(source, isolation).await;
            assert_eq!(
                value(&outcome),
                &json!({
                    "nan": "NaN", "inf": "Infinity", "ninf": "-Infinity", "big": "123n",
                    "neg0": 0, "float": 1.5,
                    "date": "1970-01-01T00:00:00.000Z",
                    "map": { "$map": [["a", 1]] },
                    "set": { "$set": [1, 2] },
                    "arr": [1, null, "[Function (anonymous)]"],
                    "fn": "[Function named]",
                    "sym": "Symbol(s)",
                    "err": { "name": "TypeError", "message": "bad" },
                    "bytes": [1, 2, 3],
                    "cyclic": { "name": "c", "self": "[Circular]" },
                    "promise": "[Promise]",
                    "computed": 7,
                }),
                "{isolation:?}"
            );
            let deep = h
                .run(
                    "let v: any = 1; for (let i = 0; i < 500; i++) v = [v]; export default v;",
                    isolation,
                )
                .await;
            assert!(value(&deep).to_string().contains("[Too deep]"));
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn console_is_captured_and_formatted() {
        let h = Harness::new();
        let source = "console.log('hello', 1, { a: [1, 2] });\n\
                      console.warn(new Error('careful'));\n\
                      console.error(undefined, null, 2n, Symbol('x'));\n\
                      console.info('i'); console.debug('d');\n";
        for isolation in BOTH {
            let outcome = h.run(source, isolation).await;
            let lines: Vec<(String, String)> = outcome
                .logs
                .iter()
                .map(|l| (l.level.clone(), l.text.clone()))
                .collect();
            assert_eq!(
                lines,
                [
                    ("log".into(), "hello 1 {\"a\":[1,2]}".into()),
                    ("warn".into(), "Error: careful".into()),
                    ("error".into(), "undefined null 2n Symbol(x)".into()),
                    ("info".into(), "i".into()),
                    ("debug".into(), "d".into()),
                ],
                "{isolation:?}"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn tool_failures_are_errors_the_program_can_catch() {
        let h = Harness::new();
        let source = "import { fail, echo } from './servers/demo';\n\
                      let caught = '';\n\
                      try { await fail({}); } catch (e) { caught = `${e instanceof Error}: ${(e as Error).message}`; }\n\
                      export default { caught, after: await echo({ n: 1 }) };";
        for isolation in BOTH {
            let outcome = h.run(source, isolation).await;
            assert_eq!(
                value(&outcome),
                &json!({ "caught": "true: fail failed on purpose", "after": { "n": 1 } })
            );
            assert_eq!((outcome.calls, outcome.failed_calls), (2, 1));
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn waiting_on_nothing_is_an_error_not_a_hang() {
        let h = Harness::new();
        for isolation in BOTH {
            let outcome = h.run("await new Promise(() => {});", isolation).await;
            let e = error(&outcome, ErrorKind::Runtime);
            assert!(e.message.contains("nothing will ever settle"), "{e:?}");
            assert!(outcome.duration < Duration::from_secs(5));
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn limits_out_of_range_are_refused_by_name_not_adjusted() {
        let h = Harness::new();
        for isolation in BOTH {
            // Zero memory would be no limit to QuickJS, zero stack no stack check: refused, as
            // every value outside its range is, naming the key and the range.
            for (limits, message) in [
                (
                    Limits {
                        stack_bytes: 0,
                        ..limits(isolation)
                    },
                    "`stack-kb = 0` is out of range: it must be 64 to 524288 (KiB)",
                ),
                (
                    Limits {
                        memory_bytes: 0,
                        ..limits(isolation)
                    },
                    "`memory-mb = 0` is out of range: it must be 1 to 65536 (MiB)",
                ),
                (
                    Limits {
                        max_in_flight: 0,
                        ..limits(isolation)
                    },
                    "`max-in-flight = 0` is out of range: it must be 1 to 10000 (calls)",
                ),
                (
                    Limits {
                        timeout: Duration::from_secs(2 * 24 * 3600),
                        ..limits(isolation)
                    },
                    "`timeout-ms = 172800000` is out of range: it must be 0 to 86400000 (ms)",
                ),
            ] {
                let outcome = h.run_with("export default 1;", limits).await;
                let e = error(&outcome, ErrorKind::Limit);
                assert!(e.message.contains(message), "{isolation:?}: {e:?}");
            }
            // No time left is not a bad limit: the execution times out at once.
            let spent = Limits {
                timeout: Duration::ZERO,
                ..limits(isolation)
            };
            error(
                &h.run_with("export default 1;", spent).await,
                ErrorKind::Timeout,
            );
        }
    }

    #[test]
    fn execute_is_send() {
        fn send<T: Send>(_: &T) {}
        let h = Harness::new();
        let future = h
            .sandbox
            .execute(h.execution("1", limits(Isolation::Thread)));
        send(&future);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn globals_are_only_the_builtins() {
        let h = Harness::new();
        let source = "export default ['require','process','std','os','fetch','performance','__runbyte_exec','callTool']\
                      .filter((n) => n in globalThis);";
        for isolation in BOTH {
            assert_eq!(h.run(source, isolation).await.result, Ok(json!([])));
        }
    }
}

mod concurrency {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn ten_calls_run_at_once() {
        let h = Harness::new();
        let source = "import { sleep } from './servers/demo';\n\
                      const started = Date.now();\n\
                      const all = await Promise.all(Array.from({ length: 10 }, () => sleep({ ms: 100 })));\n\
                      export default { n: all.length, ms: Date.now() - started };";
        for isolation in BOTH {
            h.bridge.peak.store(0, Ordering::SeqCst);
            let outcome = h.run(source, isolation).await;
            let ms = value(&outcome)["ms"].as_u64().unwrap();
            assert!(ms < 300, "{isolation:?}: 10 × 100 ms took {ms} ms");
            assert_eq!(h.bridge.peak.load(Ordering::SeqCst), 10);
            assert_eq!(outcome.calls, 10);
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn calls_beyond_max_in_flight_wait_their_turn() {
        let h = Harness::new();
        let source = "import { sleep } from './servers/demo';\n\
                      export default (await Promise.all(Array.from({ length: 9 }, () => sleep({ ms: 50 })))).length;";
        for isolation in BOTH {
            h.bridge.peak.store(0, Ordering::SeqCst);
            let limits = Limits {
                max_in_flight: 3,
                ..limits(isolation)
            };
            let outcome = h.run_with(source, limits).await;
            assert_eq!(outcome.result, Ok(json!(9)));
            assert_eq!(h.bridge.peak.load(Ordering::SeqCst), 3);
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn busy_when_pool_and_queue_are_full() {
        let h = Harness::with(SandboxOptions {
            workers: 1,
            queue: 1,
            ..options()
        });
        let slow =
            "import { sleep } from './servers/demo'; export default await sleep({ ms: 600 });";
        let (a, b, c) = tokio::join!(
            h.run(slow, Isolation::Process),
            async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                h.run(slow, Isolation::Process).await
            },
            async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                h.run(slow, Isolation::Process).await
            },
        );
        assert_eq!(a.result, Ok(json!({ "slept": 600 })));
        assert_eq!(b.result, Ok(json!({ "slept": 600 })));
        let e = error(&c, ErrorKind::Busy);
        assert_eq!(
            e.message,
            "all 1 sandbox workers are busy and 1 executions are queued; try again"
        );
    }
}

mod positions {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn syntax_errors_point_into_the_source() {
        let h = Harness::new();
        let source =
            "interface A { x: number }\nconst a: A = { x: 1 };\nconst b: number = a.x +;\n";
        for isolation in BOTH {
            let e = error(&h.run(source, isolation).await, ErrorKind::Syntax).clone();
            assert_eq!(e.position, Some((3, 24)), "{e:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn runtime_errors_point_into_the_typescript_source() {
        let h = Harness::new();
        let source = "interface Point {\n  x: number;\n  y: number;\n}\n\
                      type Maybe<T> = T | undefined;\n\
                      function boom(p: Point, extra: Maybe<string>): number {\n\
                      \x20 const v: any = extra as unknown as any;\n\
                      \x20 return v.missing.deep + p.x;\n\
                      }\n\
                      async function exec(): Promise<number> {\n\
                      \x20 const p: Point = { x: 1, y: 2 };\n\
                      \x20 return boom(p, undefined);\n\
                      }\n";
        for isolation in BOTH {
            let outcome = h.run(source, isolation).await;
            let e = error(&outcome, ErrorKind::Runtime);
            assert!(e.message.starts_with("TypeError:"), "{e:?}");
            assert_eq!(e.position.map(|p| p.0), Some(8), "{e:?}");
            let stack = e.stack.as_deref().unwrap();
            assert!(stack.contains("boom (agent.ts:8:"), "{stack}");
            assert!(stack.contains("exec (agent.ts:12:"), "{stack}");
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn thrown_values_read_well() {
        let h = Harness::new();
        for isolation in BOTH {
            let e = error(
                &h.run("throw 'plain';", isolation).await,
                ErrorKind::Runtime,
            )
            .clone();
            assert_eq!(e.message, "Uncaught \"plain\"");
            let e = error(
                &h.run("throw { code: 42 };", isolation).await,
                ErrorKind::Runtime,
            )
            .clone();
            assert_eq!(e.message, "Uncaught {\"code\":42}");
            let e = error(
                &h.run(
                    "class MyError extends Error { name = 'MyError' }\nthrow new MyError('x');",
                    isolation,
                )
                .await,
                ErrorKind::Runtime,
            )
            .clone();
            assert_eq!(e.message, "MyError: x");
            // The error was made in the constructor (line 1), thrown from line 2.
            assert_eq!(e.position.map(|p| p.0), Some(1));
            assert!(e.stack.as_deref().unwrap().contains("agent.ts:2:"), "{e:?}");
        }
    }
}

mod adversarial {
    use super::*;

    async fn stops(h: &Harness, source: &str, isolation: Isolation, kind: ErrorKind) -> Outcome {
        let limits = tight(isolation);
        let outcome = h.run_with(source, limits.clone()).await;
        error(&outcome, kind);
        promptly(&outcome, &limits);
        h.still_works(isolation).await;
        outcome
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn loops_end_at_the_deadline() {
        let h = Harness::new();
        for isolation in BOTH {
            let source =
                "function spin(): void {\n  let i = 0;\n  while (true) { i++; }\n}\nspin();";
            let outcome = stops(&h, source, isolation, ErrorKind::Timeout).await;
            let e = outcome.result.unwrap_err();
            assert!(e.message.contains("time limit of 1 s"), "{e:?}");
            // Where it was when stopped.
            assert!(
                e.stack
                    .as_deref()
                    .unwrap_or_default()
                    .contains("spin (agent.ts:"),
                "{e:?}"
            );
            stops(
                &h,
                "for (;;) { try { for (;;) {} } catch (e) { for (;;) {} } finally { for (;;) {} } }",
                isolation,
                ErrorKind::Timeout,
            )
            .await;
            stops(&h, "for (;;) await null;", isolation, ErrorKind::Timeout).await;
            stops(
                &h,
                "export default /(a+)+b/.test('a'.repeat(40));",
                isolation,
                ErrorKind::Timeout,
            )
            .await;
            // A promise chain that never ends grows too: the clock or the memory limit stops it.
            let limits = tight(isolation);
            let outcome = h
                .run_with(
                    "const spin = (): Promise<void> => Promise.resolve().then(spin); await spin();",
                    limits.clone(),
                )
                .await;
            assert!(
                matches!(&outcome.result, Err(e) if matches!(e.kind, ErrorKind::Timeout | ErrorKind::Memory)),
                "{outcome:?}"
            );
            promptly(&outcome, &limits);
            h.still_works(isolation).await;
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn builtins_that_never_poll_are_stopped_from_outside() {
        let h = Harness::new();
        for isolation in BOTH {
            stops(
                &h,
                "const a = new Array(2 ** 28); export default a.join('x').length;",
                isolation,
                ErrorKind::Timeout,
            )
            .await;
            let outcome = h
                .run_with(
                    "export default (new Array(1e9) + '').length;",
                    tight(isolation),
                )
                .await;
            // Either the clock or the memory limit ends it, promptly either way.
            assert!(
                matches!(&outcome.result, Err(e) if matches!(e.kind, ErrorKind::Timeout | ErrorKind::Memory)),
                "{outcome:?}"
            );
            promptly(&outcome, &tight(isolation));
            h.still_works(isolation).await;
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn memory_and_stack_limits() {
        let h = Harness::new();
        for isolation in BOTH {
            let outcome = stops(
                &h,
                "const keep: unknown[] = [];\nfor (let i = 0; ; i++) keep.push(new Float64Array(1 << 20));",
                isolation,
                ErrorKind::Memory,
            )
            .await;
            assert_eq!(
                outcome.result.unwrap_err().message,
                "memory limit exceeded (64 MiB)"
            );
            stops(
                &h,
                "const a: number[][] = []; while (true) a.push(new Array(1e6).fill(1));",
                isolation,
                ErrorKind::Memory,
            )
            .await;
            stops(
                &h,
                "const a: string[][] = []; while (true) a.push('xy'.repeat(1 << 19).split(''));",
                isolation,
                ErrorKind::Memory,
            )
            .await;
            let outcome = stops(
                &h,
                "function f(n: number): number { return f(n + 1) + 1; }\nf(0);",
                isolation,
                ErrorKind::Stack,
            )
            .await;
            assert_eq!(outcome.result.unwrap_err().position.map(|p| p.0), Some(1));
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_call_budget_holds() {
        let h = Harness::new();
        let source = "import { echo } from './servers/demo';\n\
                      let ok = 0, refused = '';\n\
                      for (let i = 0; i < 3000; i++) {\n\
                      \x20 try { await echo({ i }); ok++; } catch (e) { refused = (e as Error).message; }\n\
                      }\n\
                      export default { ok, refused };";
        for isolation in BOTH {
            let limits = Limits {
                timeout: Duration::from_secs(20),
                ..limits(isolation)
            };
            let outcome = h.run_with(source, limits).await;
            let v = value(&outcome);
            assert_eq!(v["ok"], json!(1000));
            assert!(
                v["refused"]
                    .as_str()
                    .unwrap()
                    .contains("at most 1000 tool calls"),
                "{v}"
            );
            assert_eq!((outcome.calls, outcome.failed_calls), (3000, 2000));
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_call_that_never_returns_ends_at_the_deadline() {
        let h = Harness::new();
        for isolation in BOTH {
            stops(
                &h,
                "import { never } from './servers/demo'; await never({});",
                isolation,
                ErrorKind::Timeout,
            )
            .await;
            // A short call timeout rejects the call itself, which the program may handle.
            let limits = Limits {
                call_timeout: Duration::from_millis(200),
                ..tight(isolation)
            };
            let outcome = h
                .run_with(
                    "import { never } from './servers/demo';\ntry { await never({}); } catch (e) { console.log((e as Error).message); }\nexport default 'went on';",
                    limits,
                )
                .await;
            assert_eq!(outcome.result, Ok(json!("went on")));
            assert_eq!(outcome.logs[0].text, "demo.never timed out after 200 ms");
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn prototype_pollution_changes_nothing_sent() {
        let h = Harness::new();
        let source = r#"
            import { echo } from './servers/demo';
            (Object.prototype as any).injected = 'evil';
            Object.defineProperty(Object.prototype, 'also', { value: 1, enumerable: true });
            (Object.prototype as any).toJSON = () => ({ hijacked: true });
            (Array.prototype as any)[1] = 'hole-filler';
            (Array.prototype as any).toJSON = () => 'array hijacked';
            JSON.stringify = () => '{"hijacked":true}';
            Object.keys = () => ['hijacked'];
            Object.entries = () => [['hijacked', true]];
            (Date.prototype as any).toISOString = () => 'hijacked';
            (Date.prototype as any).toJSON = () => 'hijacked';
            await echo({ a: 1, list: [1, , 3], when: new Date(0), nested: { b: 'x' } });
            export default 'sent';
        "#;
        for isolation in BOTH {
            h.bridge.calls.lock().unwrap().clear();
            let outcome = h.run(source, isolation).await;
            assert_eq!(outcome.result, Ok(json!("sent")), "{isolation:?}");
            let calls = h.bridge.calls.lock().unwrap().clone();
            assert_eq!(calls.len(), 1);
            assert_eq!(
                calls[0].arguments,
                json!({ "a": 1, "list": [1, null, 3], "when": "1970-01-01T00:00:00.000Z", "nested": { "b": "x" } })
            );
            assert_eq!(
                (calls[0].server.as_str(), calls[0].tool.as_str()),
                ("demo", "echo")
            );
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn hostile_arguments_are_refused_by_name() {
        let h = Harness::new();
        let cases = [
            (
                "const a: any = { b: {} }; a.b.c = a;",
                "argument `b.c` refers back to the arguments themselves (a cycle)",
            ),
            (
                "const a: any = { b: { get c() { throw new Error('nope'); } } };",
                "argument `b.c`: its getter threw Error: nope",
            ),
            (
                "const a: any = { b: { big: 10n } };",
                "argument `b.big` is a BigInt; tool arguments must be JSON",
            ),
            (
                "const a: any = { f: () => 1 };",
                "argument `f` is a function; tool arguments must be JSON",
            ),
            (
                "const a: any = { s: Symbol('x') };",
                "argument `s` is a symbol; tool arguments must be JSON",
            ),
            (
                "const a: any = { n: NaN };",
                "argument `n` is NaN, which JSON cannot carry",
            ),
            (
                "const a: any = { p: Promise.resolve(1) };",
                "argument `p` is a Promise (a missing `await`?)",
            ),
            (
                "const a: any = { list: [1, new Map()] };",
                "argument `list[1]` is a Map",
            ),
            (
                "const a: any = { 'odd key': { x: 1n } };",
                "argument `[\"odd key\"].x` is a BigInt",
            ),
            (
                "const a: any = 'text';",
                "the arguments must be an object, not a string",
            ),
            (
                "let a: any = {}; for (let i = 0; i < 100; i++) a = { a };",
                "nests deeper than 64 levels",
            ),
        ];
        for isolation in BOTH {
            h.bridge.calls.lock().unwrap().clear();
            for (setup, expected) in cases {
                let source =
                    format!("import {{ echo }} from './servers/demo';\n{setup}\nawait echo(a);");
                let outcome = h.run(&source, isolation).await;
                let e = error(&outcome, ErrorKind::Runtime);
                assert!(
                    e.message.contains(expected),
                    "{isolation:?}: {} ⟶ {}",
                    setup,
                    e.message
                );
                assert!(e.message.starts_with("Error: demo.echo: "), "{}", e.message);
            }
            assert!(
                h.bridge.calls.lock().unwrap().is_empty(),
                "nothing hostile was sent"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn console_floods_are_bounded() {
        let h = Harness::new();
        for isolation in BOTH {
            let outcome = stops(
                &h,
                "for (;;) console.log('flood '.repeat(100));",
                isolation,
                ErrorKind::Timeout,
            )
            .await;
            let kept: usize = outcome.logs.iter().map(|l| l.text.len() + 1).sum();
            assert!(kept <= 64 << 10, "{kept}");
            assert!(
                outcome.logs_dropped > 1 << 20,
                "dropped {}",
                outcome.logs_dropped
            );
            // Result plus console fit the output limit: the console yields to the result.
            let outcome = h
                .run(
                    "for (let i = 0; i < 2000; i++) console.log('line ' + i);\nexport default 'r'.repeat(60000);",
                    isolation,
                )
                .await;
            let kept: usize = outcome.logs.iter().map(|l| l.text.len() + 1).sum();
            assert!(kept + 60002 <= 64 << 10, "{kept}");
            assert!(outcome.logs_dropped > 0);
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_huge_result_is_a_clear_error() {
        let h = Harness::new();
        for isolation in BOTH {
            let outcome = h
                .run("export default Array.from({ length: 1e5 }, (_, i) => ({ i, s: 'x'.repeat(10) }));", isolation)
                .await;
            let e = error(&outcome, ErrorKind::Limit);
            assert!(
                e.message.contains("larger than the output limit of 64 KiB"),
                "{e:?}"
            );
            h.still_works(isolation).await;
        }
    }

    /// A short program can still nest deep: 250 brackets in 500 bytes. The host transpiles a
    /// short, shallow program on the async thread that receives it; this one must go to the
    /// transpiler's own large stack instead (on this test's 2 MiB async threads, SWC's debug
    /// build needs several times more for it, and overflowing would abort the whole process).
    #[tokio::test(flavor = "multi_thread")]
    async fn a_short_program_nested_deep_is_transpiled_off_the_async_thread() {
        let h = Harness::new();
        for (open, close) in [("(", ")"), ("[", "]"), ("f(() => ", ")")] {
            let source = format!(
                "const f = (g: () => unknown) => g;\nexport default {}1{};",
                open.repeat(250),
                close.repeat(250)
            );
            for isolation in BOTH {
                let outcome = h.run(&source, isolation).await;
                assert!(outcome.result.is_ok(), "{isolation:?} {open}: {outcome:?}");
            }
        }
        h.still_works(Isolation::Thread).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn deeply_nested_source_is_refused() {
        let h = Harness::new();
        for isolation in BOTH {
            let outcome = h.run(&"(".repeat(100_000), isolation).await;
            let e = error(&outcome, ErrorKind::Syntax);
            assert!(
                e.message.contains("nests brackets more than 256 levels"),
                "{e:?}"
            );
            let outcome = h
                .run(
                    &format!("export default {}1;", "!".repeat(100_000)),
                    isolation,
                )
                .await;
            error(&outcome, ErrorKind::Syntax);
            // Nor can a comment ended by a carriage return, or a quote in a regular expression,
            // hide the depth that follows it from the scan (the parser reads it as code).
            for hider in ["// x\r", "const q = /'/;\n"] {
                let source = format!(
                    "{hider}export default {}1{};",
                    "(".repeat(1000),
                    ")".repeat(1000)
                );
                let outcome = h.run(&source, isolation).await;
                let e = error(&outcome, ErrorKind::Syntax);
                assert!(e.message.contains("256 levels"), "{hider:?}: {e:?}");
            }
            h.still_works(isolation).await;
        }
    }
}

mod lifecycle {
    use super::*;

    /// The pids of this process's workers carrying `label`.
    fn workers_labelled(label: &str) -> Vec<i32> {
        let mut pids = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if args.iter().any(|a| a == "worker") && args.iter().any(|a| a == label) {
                pids.push(pid);
            }
        }
        pids
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_killed_worker_is_a_crash_and_is_replaced() {
        let label = format!("kill-test-{}", std::process::id());
        let h = Harness::with(SandboxOptions {
            worker_args: vec!["worker".to_owned(), label.clone()],
            ..options()
        });
        h.still_works(Isolation::Process).await;
        let run = h.run(
            "import { sleep } from './servers/demo'; export default await sleep({ ms: 5000 });",
            Isolation::Process,
        );
        let kill = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let pids = workers_labelled(&label);
            assert!(!pids.is_empty());
            for pid in pids {
                std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status()
                    .unwrap();
            }
        };
        let (outcome, ()) = tokio::join!(run, kill);
        let e = error(&outcome, ErrorKind::Crashed);
        assert!(e.message.contains("the sandbox worker died"), "{e:?}");
        assert!(
            e.message.contains("SIGKILL") || e.message.contains("signal: 9"),
            "{e:?}"
        );
        h.still_works(Isolation::Process).await;
    }

    /// Each execution gets an engine of its own, made ahead of it on the thread that runs it,
    /// and a worker keeps serving from its engine thread while the stack fits: a program that
    /// changes the built-ins leaves nothing for the next, the stack limit of each execution is
    /// its own, and a change of stack size moves the worker to a new engine thread and back.
    #[tokio::test(flavor = "multi_thread")]
    async fn every_execution_starts_fresh_whatever_its_stack() {
        let h = Harness::with(SandboxOptions {
            workers: 1,
            ..options()
        });
        let pollute = "globalThis.leaked = 42; Object.prototype.polluted = 1; \
                       JSON.stringify = () => 'hijacked'; export default 1;";
        let look = "export default [typeof leaked, ({} as any).polluted ?? null, \
                    JSON.stringify({ a: 1 })];";
        let clean = json!(["undefined", null, "{\"a\":1}"]);
        // Recursion that fits 8 MiB of QuickJS stack and not 256 KiB.
        let deep = "function f(n: number): number { return n === 0 ? 0 : 1 + f(n - 1); }\n\
                    export default f(5000);";
        for isolation in BOTH {
            let small = Limits {
                stack_bytes: 256 << 10,
                ..limits(isolation)
            };
            let large = Limits {
                stack_bytes: 8 << 20,
                ..limits(isolation)
            };
            for (round, stack) in [&large, &small, &large, &large, &small]
                .into_iter()
                .enumerate()
            {
                let what = format!("{isolation:?}, round {round}, stack {}", stack.stack_bytes);
                let outcome = h.run_with(pollute, stack.clone()).await;
                assert_eq!(outcome.result, Ok(json!(1)), "{what}");
                let outcome = h.run_with(look, stack.clone()).await;
                assert_eq!(outcome.result, Ok(clean.clone()), "{what}: {outcome:?}");
                let outcome = h.run_with(deep, stack.clone()).await;
                if stack.stack_bytes == large.stack_bytes {
                    assert_eq!(outcome.result, Ok(json!(5000)), "{what}: {outcome:?}");
                } else {
                    let e = error(&outcome, ErrorKind::Stack);
                    assert!(e.message.contains("(256 KiB)"), "{what}: {e:?}");
                }
            }
            h.still_works(isolation).await;
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn cancellation_stops_promptly() {
        let h = Harness::new();
        let programs = [
            "import { sleep } from './servers/demo'; export default await sleep({ ms: 10000 });",
            "for (;;) {}",
            "import { never } from './servers/demo'; await never({});",
        ];
        for isolation in BOTH {
            for program in programs {
                let execution = h.execution(program, limits(isolation));
                let cancel = execution.cancel.clone();
                let started = Instant::now();
                let (outcome, ()) = tokio::join!(h.sandbox.execute(execution), async {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    cancel.cancel();
                });
                error(&outcome, ErrorKind::Cancelled);
                assert!(
                    started.elapsed() < Duration::from_secs(2),
                    "{:?}",
                    started.elapsed()
                );
                h.still_works(isolation).await;
            }
        }
    }
}

/// The stages around QuickJS, bounded: what a program sends the host and what it asks the
/// transpiler to do. Each of these took the gateway down, lost data or grew it without bound
/// before.
mod bounds {
    use super::*;

    /// Hundreds of concurrent calls with 20 KB arguments and results, repeated: every byte
    /// comes back. A partly read line used to be dropped when another branch of the host's
    /// `select!` won (4 runs in 10 failed with "unreadable message" in process isolation).
    #[tokio::test(flavor = "multi_thread")]
    async fn the_worker_channel_loses_nothing_under_load() {
        let h = Harness::new();
        let program = "import { echo } from './servers/demo';\n\
             const pad = 'abcdefghij'.repeat(2048);\n\
             const results = await Promise.all(Array.from({ length: 300 }, (_, i) =>\n\
               echo({ i, pad: pad + i })));\n\
             export default results.every((r: any, i) => r.i === i && r.pad === pad + i)\n\
               ? results.length : results.find((r: any, i) => r.i !== i || r.pad !== pad + i);";
        for isolation in BOTH {
            for round in 0..5 {
                let outcome = h.run(program, isolation).await;
                assert_eq!(
                    outcome.result,
                    Ok(json!(300)),
                    "{isolation:?}, round {round}"
                );
            }
        }
    }

    /// 200 calls that each reference one 1 MiB string, one at a time, the first taking 3 s: the
    /// host reads calls only as places in flight free up, so it holds one of them, not all that
    /// the engine made meanwhile (with 600 calls, 1.9 GB before). The gateway's resident memory
    /// under such a flood is measured from outside in `tests/e2e/hostile.rs`.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_flood_of_large_calls_is_held_back() {
        let h = Harness::new();
        let program = "import { sleep } from './servers/demo';\n\
             const big = 'x'.repeat(1 << 20);\n\
             await Promise.all(Array.from({ length: 200 }, (_, i) => sleep({ ms: i ? 0 : 3000, big })));\n\
             export default 'done';";
        for isolation in BOTH {
            let limits = Limits {
                timeout: Duration::from_secs(60),
                max_in_flight: 1,
                ..limits(isolation)
            };
            // A bridge that keeps nothing of the calls (the harness's records them all).
            let bridge = Arc::new(Forgetful::default());
            let execution = Execution {
                bridge: bridge.clone(),
                ..h.execution(program, limits)
            };
            let outcome = h.sandbox.execute(execution).await;
            assert_eq!(outcome.result, Ok(json!("done")), "{isolation:?}");
            // One call in flight, and the next one read while it runs.
            assert!(
                outcome.held_argument_bytes <= (2 << 20) + 4096,
                "{isolation:?}: the host held {} bytes of arguments at once",
                outcome.held_argument_bytes
            );
            assert!(outcome.held_argument_bytes >= 1 << 20, "{outcome:?}");
            assert!(bridge.peak.load(Ordering::SeqCst) <= 1);
            assert_eq!(bridge.calls.load(Ordering::SeqCst), 200);
        }
    }

    /// Sleeps `ms`, counting calls and the most in flight; keeps nothing.
    #[derive(Default)]
    struct Forgetful {
        calls: Arc<AtomicUsize>,
        in_flight: Arc<AtomicUsize>,
        peak: Arc<AtomicUsize>,
    }

    impl ToolBridge for Forgetful {
        fn call(&self, call: ToolCall) -> BoxFuture<'static, Result<Value, String>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let (in_flight, peak) = (self.in_flight.clone(), self.peak.clone());
            let ms = call.arguments["ms"].as_u64().unwrap_or(0);
            drop(call);
            Box::pin(async move {
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                Ok(json!({ "slept": ms }))
            })
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn names_over_the_cap_are_refused_before_any_lookup() {
        let h = Harness::new();
        let program = "import { callTool } from 'runbyte:bridge';\n\
             const long = 'n'.repeat(1 << 20);\n\
             const errors = [];\n\
             for (const [s, t] of [[long, 'echo'], ['demo', long]]) {\n\
               try { await callTool(s, t, {}); } catch (e) { errors.push(String(e.message)); }\n\
             }\n\
             export default errors;";
        for isolation in BOTH {
            let before = h.bridge.calls.lock().unwrap().len();
            let outcome = h.run(program, isolation).await;
            let errors = value(&outcome).as_array().unwrap().clone();
            assert_eq!(errors.len(), 2, "{isolation:?}: {errors:?}");
            for error in errors {
                let error = error.as_str().unwrap();
                assert!(error.contains("names are at most 1024 bytes"), "{error}");
                assert!(error.len() < 300, "{error}");
            }
            assert_eq!(h.bridge.calls.lock().unwrap().len(), before);
            h.still_works(isolation).await;
        }
    }

    /// Sources that nest without braces (gigabytes and seconds in SWC, or its stack) and a
    /// source at the size cap: each ends one execution with an error naming the limit, within
    /// the deadline, and the next execution runs normally.
    #[tokio::test(flavor = "multi_thread")]
    async fn hostile_sources_cost_one_execution() {
        let h = Harness::new();
        let sources = [
            ("if (a)\n".repeat(100_000), "operators"),
            ("for (;;)".repeat(120_000), "operators"),
            ("do\n".repeat(300_000), "operators"),
            ("x".repeat(MAX_SOURCE + 1), "1 MiB"),
        ];
        for isolation in BOTH {
            for (source, names) in &sources {
                let limits = tight(isolation);
                let outcome = h.run_with(source, limits.clone()).await;
                let e = error(&outcome, ErrorKind::Syntax);
                assert!(e.message.contains(names), "{isolation:?}: {e:?}");
                promptly(&outcome, &limits);
                h.still_works(isolation).await;
            }
        }
    }

    /// A flood of sources just under the in-host size, from many clients at once: transpiled a
    /// few at a time before admission, each answered, none lost.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_flood_of_small_sources_is_answered_in_full() {
        let h = Arc::new(Harness::new());
        let filler: String = (0..700).map(|i| format!("const v{i} = {i};\n")).collect();
        let program = format!("{filler}export default v699 + 1;");
        assert!(program.len() <= runbyte_core::sandbox::IN_PROCESS_TRANSPILE_BYTES);
        let mut flood = tokio::task::JoinSet::new();
        for i in 0..120 {
            let isolation = BOTH[i % 2];
            let execution = Execution {
                client: format!("c{i}"),
                ..h.execution(&program, limits(isolation))
            };
            let h = h.clone();
            flood.spawn(async move { h.sandbox.execute(execution).await });
        }
        let mut answered = 0;
        while let Some(outcome) = flood.join_next().await {
            assert_eq!(outcome.unwrap().result, Ok(json!(700)));
            answered += 1;
        }
        assert_eq!(answered, 120);
    }

    const MAX_SOURCE: usize = runbyte_core::sandbox::MAX_SOURCE_BYTES;

    /// Thread isolation transpiles a large source in a worker process: a big but ordinary
    /// program still runs, and its time counts against the deadline.
    #[tokio::test(flavor = "multi_thread")]
    async fn large_programs_run_in_both_isolations() {
        let h = Harness::new();
        let body: String = (0..4000)
            .map(|i| format!("const v{i}: number = {i};\n"))
            .collect();
        let program = format!("{body}export default v3999 + 1;");
        assert!(program.len() > runbyte_core::sandbox::IN_PROCESS_TRANSPILE_BYTES);
        for isolation in BOTH {
            let outcome = h.run(&program, isolation).await;
            assert_eq!(outcome.result, Ok(json!(4000)), "{isolation:?}");
        }
    }
}

/// Generated programs, and the corpus of those that ever broke something: each ends one
/// execution (a result or a clear error) within its deadline, the host stays within a memory
/// bound, and the next execution runs normally.
mod generated {
    use super::*;
    use proptest::prelude::*;

    /// Pieces that nest, chain or confuse a scanner, in any order.
    const PIECES: &[&str] = &[
        "if (a)",
        "if (a) x",
        "for (;;)",
        "for (x of y)",
        "for await (x of y)",
        "while (a)",
        "with (a)",
        "do",
        "else",
        "a:",
        "x =>",
        "async x =>",
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        "`${",
        "}`",
        "`",
        "/*",
        "*/",
        "//",
        "'",
        "\"",
        "\\",
        ";",
        ",",
        "\n",
        " ",
        "!",
        "-",
        "+ 1",
        "a.b",
        "?.",
        "??",
        "? 1 :",
        "new",
        "typeof",
        "await",
        "yield",
        "in",
        "as any",
        "<T>",
        "keyof",
        "extends",
        "=",
        "=>",
        "...",
        "@d",
        "class C",
        "function f()",
        "return",
        "x",
        "1",
        "/re/g",
        "#!",
        "\u{2028}",
        "é",
        "\r",
        "// c\r",
        "/'/",
        "/[/*]/",
    ];

    fn program() -> impl Strategy<Value = String> {
        (
            prop::collection::vec((0..PIECES.len(), 1usize..400), 1..40),
            any::<bool>(),
        )
            .prop_map(|(runs, tail)| {
                let mut source = String::new();
                for (piece, times) in runs {
                    source.push_str(&PIECES[piece].repeat(times));
                    source.push(' ');
                }
                if tail {
                    source.push_str("\nexport default 1;");
                }
                source
            })
    }

    fn resident() -> usize {
        std::fs::read_to_string("/proc/self/status")
            .unwrap_or_default()
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|kb| {
                kb.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<usize>()
                    .ok()
            })
            .map_or(0, |kb| kb * 1024)
    }

    /// What the host may grow by while running hostile programs: two QuickJS heaps (thread
    /// isolation, 64 MiB each) and SWC's work on a 16 KiB source, with room to spare.
    const HOST_GROWTH: usize = 512 << 20;

    async fn costs_one_execution(h: &Harness, source: &str, isolation: Isolation, base: usize) {
        let limits = Limits {
            timeout: Duration::from_secs(2),
            ..limits(isolation)
        };
        let outcome = h.run_with(source, limits.clone()).await;
        promptly(&outcome, &limits);
        if let Err(e) = &outcome.result {
            assert!(!e.message.is_empty(), "{isolation:?}: {e:?}");
            assert_ne!(e.kind, ErrorKind::Crashed, "{isolation:?}: {e:?}");
        }
        let grew = resident().saturating_sub(base);
        assert!(grew < HOST_GROWTH, "{isolation:?}: grew {} MiB", grew >> 20);
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 24,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn generated_programs_cost_one_execution(source in program()) {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let h = Harness::new();
                let base = resident();
                for isolation in BOTH {
                    costs_one_execution(&h, &source, isolation, base).await;
                }
                h.still_works(Isolation::Thread).await;
            });
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_corpus_of_programs_costs_one_execution_each() {
        let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus/programs");
        let mut files: Vec<_> = std::fs::read_dir(folder)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "ts"))
            .collect();
        files.sort();
        assert!(files.len() >= 10, "{files:?}");
        let h = Harness::new();
        let base = resident();
        for file in files {
            let source = std::fs::read_to_string(&file).unwrap();
            for isolation in BOTH {
                costs_one_execution(&h, &source, isolation, base).await;
                h.still_works(isolation).await;
            }
        }
    }
}

/// Executions are admitted fairly across clients: a flood from one leaves another's program
/// waiting about one deadline, not the whole flood (40 s for 40 spinning programs before).
mod fairness {
    use super::*;

    #[tokio::test(flavor = "multi_thread")]
    async fn a_flood_from_one_client_leaves_another_served() {
        let h = Arc::new(Harness::new());
        let spin = |client: &str| Execution {
            client: client.to_owned(),
            ..h.execution("for (;;) {}", tight(Isolation::Process))
        };
        let mut flood = tokio::task::JoinSet::new();
        for _ in 0..12 {
            let (h, execution) = (h.clone(), spin("flooder"));
            flood.spawn(async move { h.sandbox.execute(execution).await });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let started = Instant::now();
        let outcome = h
            .sandbox
            .execute(Execution {
                client: "polite".to_owned(),
                ..h.execution("export default 1;", limits(Isolation::Process))
            })
            .await;
        let waited = started.elapsed();
        assert_eq!(outcome.result, Ok(json!(1)));
        // Two workers, each busy for one 1 s deadline plus grace: one of them frees up first.
        assert!(waited < Duration::from_millis(2500), "waited {waited:?}");
        assert!(outcome.queued > Duration::from_millis(300), "{outcome:?}");
        assert!(
            outcome.duration.saturating_sub(outcome.queued) < Duration::from_millis(1000),
            "{outcome:?}"
        );
        flood.abort_all();
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn one_client_may_queue_only_its_share() {
        let h = Arc::new(Harness::with(SandboxOptions {
            workers: 1,
            queue_per_client: 3,
            ..options()
        }));
        let mut flood = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let (h, execution) = (
                h.clone(),
                Execution {
                    client: "flooder".to_owned(),
                    ..h.execution("for (;;) {}", tight(Isolation::Process))
                },
            );
            flood.spawn(async move { h.sandbox.execute(execution).await });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        let refused = h
            .sandbox
            .execute(Execution {
                client: "flooder".to_owned(),
                ..h.execution("export default 1;", limits(Isolation::Process))
            })
            .await;
        let e = error(&refused, ErrorKind::Busy);
        assert!(e.message.contains("this client already has 3"), "{e:?}");
        // Another client is still queued, not refused.
        let served = h
            .sandbox
            .execute(Execution {
                client: "other".to_owned(),
                ..h.execution("export default 2;", limits(Isolation::Process))
            })
            .await;
        assert_eq!(served.result, Ok(json!(2)));
        flood.abort_all();
    }
}

/// A program whose result depends on the clock, on `Math.random` and on whether a timer fires
/// before a call's reply: a replay given the first run's seed and observations takes the first
/// run's path, though its call now answers at once; without them it would not.
#[tokio::test]
async fn a_replay_sees_the_first_runs_clock_randomness_and_turns() {
    let program = r#"
        import { callTool } from "runbyte:bridge";
        const order: string[] = [];
        const started = Date.now();
        const random = [Math.random(), Math.random()];
        setTimeout(() => order.push("timer"), 40);
        await callTool("demo", "sleep", { ms: 200 });
        order.push("reply");
        const stamp = new Date().getTime();
        await callTool("demo", "echo", {});
        export default {
          order, started, stamp, random,
          later: Date.now() >= stamp,
          dates: [typeof Date(), new Date(0) instanceof Date, new Date(0), Date.UTC(2020, 0, 1)],
        };
    "#;
    for isolation in BOTH {
        let first = Harness::new();
        *first.bridge.determinism.lock().unwrap() = Some(Determinism {
            seed: 42,
            record: true,
            replay: Observed::default(),
        });
        let original = first.run(program, isolation).await.result.unwrap();
        assert_eq!(
            original["order"],
            json!(["timer", "reply"]),
            "{isolation:?}"
        );
        assert_eq!(
            original["dates"],
            json!(["string", true, "1970-01-01T00:00:00.000Z", 1577836800000u64]),
            "{isolation:?}"
        );
        let observed = first.bridge.observed.lock().unwrap().clone();
        assert_eq!(observed.clock.len(), 2, "{isolation:?}: {observed:?}");
        assert_eq!(
            observed.turns,
            vec![Turn::Timer(1), Turn::Reply(1)],
            "{isolation:?}"
        );

        let replay = Harness::new();
        replay.bridge.instant.store(true, Ordering::SeqCst);
        *replay.bridge.determinism.lock().unwrap() = Some(Determinism {
            seed: 42,
            record: true,
            replay: observed.clone(),
        });
        let replayed = replay.run(program, isolation).await.result.unwrap();
        for key in ["order", "started", "stamp", "random"] {
            assert_eq!(replayed[key], original[key], "{isolation:?}: {key}");
        }
        assert_eq!(replayed["later"], json!(true), "{isolation:?}");
        // The replay records the same observations again (its journal goes on from them).
        assert_eq!(*replay.bridge.observed.lock().unwrap(), observed);

        // Without the observations the same fast call changes the path; the seed alone still
        // gives the same numbers.
        let live = Harness::new();
        live.bridge.instant.store(true, Ordering::SeqCst);
        *live.bridge.determinism.lock().unwrap() = Some(Determinism {
            seed: 42,
            ..Determinism::default()
        });
        let fresh = live.run(program, isolation).await.result.unwrap();
        assert_eq!(fresh["order"], json!(["reply"]), "{isolation:?}");
        assert_eq!(fresh["random"], original["random"], "{isolation:?}");
        assert!(live.bridge.observed.lock().unwrap().is_empty());
    }
}

/// A program that reads the clock in a loop outgrows what a run records: it says so (and so is
/// not replayable) rather than sending ever more.
#[tokio::test]
async fn a_run_records_a_bounded_number_of_observations() {
    let harness = Harness::new();
    *harness.bridge.determinism.lock().unwrap() = Some(Determinism {
        seed: 1,
        record: true,
        replay: Observed::default(),
    });
    let program = r#"
        import { callTool } from "runbyte:bridge";
        let last = 0;
        for (let i = 0; i < 20000; i++) last = Date.now();
        await callTool("demo", "echo", {});
        export default last > 0;
    "#;
    let outcome = harness.run(program, Isolation::Process).await;
    assert_eq!(outcome.result, Ok(json!(true)));
    let observed = harness.bridge.observed.lock().unwrap().clone();
    assert!(observed.overflow, "{}", observed.len());
    assert!(observed.clock.is_empty());
}

/// `Date` is wrapped on first use: before that it can be replaced or inspected like any global.
#[tokio::test]
async fn date_behaves_as_the_built_in_whenever_it_is_first_touched() {
    let harness = Harness::new();
    for isolation in BOTH {
        let replaced = harness
            .run(
                "(globalThis as any).Date = 5;\nexport default Date;",
                isolation,
            )
            .await;
        assert_eq!(replaced.result, Ok(json!(5)), "{isolation:?}");
        let inspected = harness
            .run(
                "const d = Object.getOwnPropertyDescriptor(globalThis, 'Date')!;\n\
                 export default [typeof Date, d === undefined, Date.name, Date.length,\n\
                   Object.keys(globalThis).includes('Date'), new Date(86400000).getUTCDate(),\n\
                   Date.now() > 1.7e12];",
                isolation,
            )
            .await;
        assert_eq!(
            inspected.result,
            Ok(json!(["function", false, "Date", 7, false, 2, true])),
            "{isolation:?}"
        );
    }
}
