// The per-call benchmark of issue 14, end to end: an MCP client of the official TypeScript SDK
// over stdio, against `runbyte serve` (process and thread isolation) with
// `@modelcontextprotocol/server-everything` downstream over stdio, and against the same client
// calling server-everything directly. Every variant runs in the same process, alternating round
// by round (the order rotating), so machine noise hits them all alike. Reports medians. One
// more figure, direct only: the 100 calls with the client busy for 200 µs before each (as a
// gateway is between a program's calls), the pauses not counted; on a machine whose idle CPUs
// sleep deeply, a downstream answers a slower client more slowly.
//
//   node tests/benches/percall.mjs          (scripts/bench runs it after the release build)
//
// Environment:
//   BENCH_ROUNDS=n      rounds of the call figures (default 30); the trivial-program count scales
//                       with it (200 at 30) unless BENCH_TRIVIAL=n sets it
//   RUNBYTE_OLD=dir     a cargo `target/release` folder of an older build (its `runbyte` and its
//                       plugin libraries): adds "old process" / "old thread" columns, measured in
//                       the same alternating rounds
//
// Exits non-zero, saying why, when a prerequisite is missing or any result is wrong.

import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const deps = join(root, ".test-deps/node_modules");

const temps = [];

function fail(message) {
  console.error(`percall bench: ${message}`);
  // The children see their stdin close when this process exits, and stop.
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  process.exit(1);
}

// ---- prerequisites -----------------------------------------------------------------------------

const sdkDir = join(deps, "@modelcontextprotocol/sdk/dist/esm");
const everything = join(deps, "@modelcontextprotocol/server-everything/dist/index.js");
for (const [path, what] of [
  [join(sdkDir, "client/index.js"), "the MCP TypeScript SDK"],
  [everything, "@modelcontextprotocol/server-everything"],
]) {
  if (!existsSync(path)) fail(`${what} is not installed (${path} is missing): run scripts/test-deps`);
}
// The SDK is imported by path: an ES module resolves bare names from its own folder only
// (NODE_PATH does not apply to `import`), and this file does not sit under .test-deps.
const { Client } = await import(pathToFileURL(join(sdkDir, "client/index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(join(sdkDir, "client/stdio.js")).href);

// The plugins a `runbyte serve` of this configuration loads by name.
const PLUGINS = ["transport_stdio", "policy_limits", "codegen_typescript"];

function checkBuild(dir, what) {
  const exe = join(dir, "runbyte");
  if (!existsSync(exe)) {
    fail(`${exe} is missing: ${what}`);
  }
  for (const plugin of PLUGINS) {
    const file = `librunbyte_${plugin}.so`;
    if (!existsSync(join(dir, file)) && !existsSync(join(dir, "deps", file))) {
      fail(`${dir} has no ${file}: ${what}`);
    }
  }
  return exe;
}

const release = join(root, "target/release");
const builds = [
  { tag: "", dir: release, exe: checkBuild(release, "run `cargo build --release --workspace` first") },
];
if (process.env.RUNBYTE_OLD) {
  const dir = resolve(process.env.RUNBYTE_OLD);
  builds.push({ tag: "old ", dir, exe: checkBuild(dir, "RUNBYTE_OLD must name a cargo target/release folder") });
}

const envInt = (name, fallback) => {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) fail(`${name}=${text} is not a positive integer`);
  return value;
};
const ROUNDS = envInt("BENCH_ROUNDS", 30);
const TRIVIAL = envInt("BENCH_TRIVIAL", Math.max(20, Math.round((200 * ROUNDS) / 30)));
const WARMUP_TRIVIAL = Math.max(10, Math.round(TRIVIAL / 4));
const WARMUP_ROUNDS = Math.max(2, Math.round(ROUNDS / 10));

// ---- clients -----------------------------------------------------------------------------------

const clients = [];

async function connect(name, command, args, cwd, env) {
  const transport = new StdioClientTransport({ command, args, cwd, env, stderr: "pipe" });
  // The child's stderr, kept (the last 4 KiB) to show when something goes wrong.
  let tail = "";
  transport.stderr?.on("data", (chunk) => {
    tail = (tail + chunk.toString()).slice(-4096);
  });
  const client = new Client({ name: `percall-bench-${name}`, version: "1.0.0" });
  const entry = { name, client, stderr: () => tail };
  clients.push(entry);
  try {
    await client.connect(transport);
  } catch (error) {
    fail(`${name}: cannot connect to ${command} ${args.join(" ")}: ${error.message}\n${tail}`);
  }
  return entry;
}

const childEnv = { ...process.env };
delete childEnv.RUNBYTE_EXE;

// server-everything, the downstream of every variant, run by this same node.
const everythingCommand = process.execPath;
const everythingArgs = [everything, "stdio"];

async function startRunbyte(build, isolation) {
  const dir = mkdtempSync(join(tmpdir(), "runbyte-percall-"));
  temps.push(dir);
  // `dirs` names the build's own folder so that the binary loads the plugins built with it
  // (runbyte searches its own folder too, after `dirs`; naming it keeps an older build honest).
  writeFileSync(
    join(dir, "runbyte.toml"),
    [
      "[plugins]",
      `dirs = [${JSON.stringify(build.dir)}]`,
      "",
      "[sandbox]",
      'policy = "limits"',
      "",
      "[sandbox.limits]",
      `isolation = ${JSON.stringify(isolation)}`,
      "",
      "[servers.everything]",
      `command = ${JSON.stringify(everythingCommand)}`,
      `args = ${JSON.stringify(everythingArgs)}`,
      "",
    ].join("\n"),
  );
  const name = `${build.tag}${isolation}`;
  const entry = await connect(name, build.exe, ["serve"], dir, {
    ...childEnv,
    RUNBYTE_LOG: "error",
    RUNBYTE_EXE: build.exe,
  });
  // The downstream server starts in the background: wait until a program can call it.
  const deadline = Date.now() + 30_000;
  for (;;) {
    const result = await entry.client.callTool({ name: "execute_code", arguments: { code: READY } });
    if (!result.isError && programValue(result) === "Echo: ready") break;
    if (Date.now() > deadline) {
      fail(`${name}: server-everything never became callable; last answer: ${text(result)}\n${entry.stderr()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  // The generated module: what a program imports.
  const module = await entry.client.callTool({
    name: "read_file",
    arguments: { path: "/servers/everything/echo.ts" },
  });
  if (module.isError || !/export async function echo\(/.test(text(module))) {
    fail(`${name}: /servers/everything/echo.ts does not export echo:\n${text(module)}`);
  }
  return entry;
}

// ---- programs and checks -----------------------------------------------------------------------

const IMPORT = 'import { echo } from "./servers/everything/echo";\n';
const READY = `${IMPORT}export default await echo({ message: "ready" });`;
const TRIVIAL_PROGRAM = "export default 1";
// Each program checks every answer itself and returns how many were right.
// The check costs next to nothing when the answer is the text (as generated modules give it); an
// answer of another shape (an older build's, say) is searched for the text instead.
const IS_ECHO = `const isEcho = (r, i) =>
  r === "Echo: m" + i || (typeof r !== "string" && JSON.stringify(r).includes(JSON.stringify("Echo: m" + i)));
`;
const SEQUENTIAL = (n) =>
  `${IMPORT}${IS_ECHO}let right = 0;
for (let i = 0; i < ${n}; i++) {
  if (isEcho(await echo({ message: "m" + i }), i)) right++;
}
export default right;`;
const PARALLEL = (n) =>
  `${IMPORT}${IS_ECHO}const all = await Promise.all(Array.from({ length: ${n} }, (_, i) => echo({ message: "m" + i })));
export default all.filter(isEcho).length;`;
const PROGRAMS = { seq100: SEQUENTIAL(100), par10: PARALLEL(10), seq10: SEQUENTIAL(10) };

function text(result) {
  return (result?.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("");
}

// execute_code answers the program's value as JSON, then a summary line.
function programValue(result) {
  const body = text(result);
  const cut = body.lastIndexOf("\n--- ");
  try {
    return JSON.parse(cut < 0 ? body : body.slice(0, cut));
  } catch {
    return undefined;
  }
}

// The gateway's own figure for the execution: its answer's `_meta`, or (an older build) its
// summary line ("--- 12 ms · ...").
function reportedMs(result) {
  const account = result._meta?.["runbyte/execution"];
  if (account && typeof account.durationMs === "number") return account.durationMs;
  const match = /\n--- (\d+(?:\.\d+)?) ms/.exec(text(result));
  return match ? Number(match[1]) : NaN;
}

async function execute(entry, code, expected, what) {
  const started = performance.now();
  const result = await entry.client.callTool({ name: "execute_code", arguments: { code } });
  const elapsed = performance.now() - started;
  const value = programValue(result);
  if (result.isError || value !== expected) {
    fail(`${entry.name}: ${what} answered wrongly (expected ${JSON.stringify(expected)}):\n${text(result)}\n${entry.stderr()}`);
  }
  return { elapsed, reported: reportedMs(result) };
}

async function echoDirect(entry, i) {
  const result = await entry.client.callTool({ name: "echo", arguments: { message: `m${i}` } });
  if (result.isError || text(result) !== `Echo: m${i}`) {
    fail(`${entry.name}: echo answered wrongly:\n${JSON.stringify(result)}\n${entry.stderr()}`);
  }
}

async function readFile(entry) {
  const started = performance.now();
  const result = await entry.client.callTool({
    name: "read_file",
    arguments: { path: "/servers/everything/echo.ts" },
  });
  const elapsed = performance.now() - started;
  if (result.isError) fail(`${entry.name}: read_file failed:\n${text(result)}`);
  return elapsed;
}

// ---- the variants ------------------------------------------------------------------------------

// Each variant's figures: one function per figure, timing one run.
function runbyteVariant(entry) {
  return {
    name: entry.name,
    kind: "runbyte",
    trivial: () => execute(entry, TRIVIAL_PROGRAM, 1, "the trivial program"),
    roundTrip: () => readFile(entry),
    seq100: () => execute(entry, PROGRAMS.seq100, 100, "100 sequential echo"),
    par10: () => execute(entry, PROGRAMS.par10, 10, "10 echo via Promise.all"),
    seq10: () => execute(entry, PROGRAMS.seq10, 10, "10 sequential echo"),
  };
}

function directVariant(entry) {
  const timed = async (body) => {
    const started = performance.now();
    await body();
    return { elapsed: performance.now() - started, reported: NaN };
  };
  return {
    name: "direct",
    kind: "direct",
    trivial: null,
    roundTrip: async () => (await timed(() => echoDirect(entry, 0))).elapsed,
    seq100: () =>
      timed(async () => {
        for (let i = 0; i < 100; i++) await echoDirect(entry, i);
      }),
    par10: () => timed(() => Promise.all(Array.from({ length: 10 }, (_, i) => echoDirect(entry, i)))),
    seq10: () =>
      timed(async () => {
        for (let i = 0; i < 10; i++) await echoDirect(entry, i);
      }),
    // 100 sequential calls, the client busy for PAUSE_MS before each (as a gateway is between
    // a program's calls), the pauses not counted: how much slower the downstream answers a
    // client that is slower to ask.
    seq100Paced: async () => {
      let paused = 0;
      const started = performance.now();
      for (let i = 0; i < 100; i++) {
        const from = performance.now();
        while (performance.now() - from < PAUSE_MS) {}
        paused += performance.now() - from;
        await echoDirect(entry, i);
      }
      return { elapsed: performance.now() - started - paused, reported: NaN };
    },
  };
}

const PAUSE_MS = 0.2;

const median = (values) => {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

// ---- run ---------------------------------------------------------------------------------------

const startedAt = performance.now();
let variants;
try {
  const direct = directVariant(
    await connect("direct", everythingCommand, everythingArgs, root, { ...childEnv }),
  );
  const runbytes = [];
  for (const build of builds) {
    for (const isolation of ["process", "thread"]) {
      runbytes.push(runbyteVariant(await startRunbyte(build, isolation)));
    }
  }
  variants = [...runbytes, direct];
} catch (error) {
  fail(error.stack ?? String(error));
}

const FIGURES = ["seq100", "par10", "seq10"];
// Figures only some variants have.
const EXTRA_FIGURES = ["seq100Paced"];
const samples = new Map(
  variants.map((v) => [
    v.name,
    {
      trivial: [],
      trivialReported: [],
      roundTrip: [],
      ...Object.fromEntries([...FIGURES, ...EXTRA_FIGURES].flatMap((f) => [[f, []], [`${f}Reported`, []]])),
    },
  ]),
);

// Variants in an order that rotates with the round, so none always goes first.
const rotated = (list, round) => list.map((_, i) => list[(i + round) % list.length]);

async function trivialPass(count, record) {
  for (let i = 0; i < count; i++) {
    for (const v of rotated(variants, i)) {
      const s = samples.get(v.name);
      if (v.trivial) {
        const { elapsed, reported } = await v.trivial();
        if (record) {
          s.trivial.push(elapsed);
          s.trivialReported.push(reported);
        }
      }
      // The bare MCP round trip of each peer: read_file on runbyte (no sandbox), echo direct.
      const trip = await v.roundTrip();
      if (record) s.roundTrip.push(trip);
    }
  }
}

async function callPass(rounds, record) {
  for (let round = 0; round < rounds; round++) {
    for (const v of rotated(variants, round)) {
      const s = samples.get(v.name);
      for (const figure of rotated([...FIGURES, ...EXTRA_FIGURES], round).filter((f) => v[f])) {
        const { elapsed, reported } = await v[figure]();
        if (record) {
          s[figure].push(elapsed);
          s[`${figure}Reported`].push(reported);
        }
      }
    }
  }
}

try {
  await trivialPass(WARMUP_TRIVIAL, false);
  await callPass(WARMUP_ROUNDS, false);
  await trivialPass(TRIVIAL, true);
  await callPass(ROUNDS, true);
} catch (error) {
  fail(error.stack ?? String(error));
}
const seconds = (performance.now() - startedAt) / 1000;

// ---- report ------------------------------------------------------------------------------------

const m = (name, key) => median(samples.get(name)[key]);
const fmt = (ms) => (Number.isNaN(ms) ? "—" : ms < 10 ? `${ms.toFixed(3)} ms` : `${ms.toFixed(2)} ms`);
const ratio = (a, b) => `${(a / b).toFixed(2)}×`;

const runbyteNames = variants.filter((v) => v.kind === "runbyte").map((v) => v.name);
const columns = runbyteNames.map((n) => `${n} isolation`);
const BEFORE = {
  trivial: "0.86 ms / 0.86 ms",
  seq100: "1.41× / 1.24×",
  par10: "2.86 ms (2.25×) / 2.33 ms",
  seq10: "5.29 ms / 4.27 ms",
};
const rows = [
  ["trivial program (`export default 1`)", "trivial", null, "≤ 0.6 ms process isolation"],
  ["100 sequential `echo` (÷ 100 direct sequential)", "seq100", "seq100", "≤ 1.1× process, ≤ 1.05× thread"],
  ["10 `echo` via `Promise.all` (÷ 10 direct in parallel)", "par10", "par10", "≤ 1.3×"],
  ["10 sequential `echo` (÷ 10 direct sequential)", "seq10", "seq10", "—"],
];

console.log(
  `\nPer-call overhead (issue 14): medians of ${TRIVIAL} trivial programs and ${ROUNDS} rounds of the call figures per variant, alternating; node ${process.version}, ${seconds.toFixed(1)} s\n`,
);
console.log(`| figure | ${columns.join(" | ")} | direct | target | issue 14 before (process / thread) |`);
console.log(`|---|${columns.map(() => "---|").join("")}---|---|---|`);
for (const [label, key, directKey, target] of rows) {
  const cells = runbyteNames.map((n) => {
    const value = m(n, key);
    return directKey ? `${fmt(value)} (${ratio(value, m("direct", directKey))})` : fmt(value);
  });
  const direct = directKey ? fmt(m("direct", directKey)) : "—";
  console.log(`| ${label} | ${cells.join(" | ")} | ${direct} | ${target} | ${BEFORE[key]} |`);
}

// Targets, for the current build.
const verdicts = [];
const check = (ok, what) => verdicts.push(`${ok ? "met" : "MISSED"}: ${what}`);
check(m("process", "trivial") <= 0.6, `trivial program ≤ 0.6 ms in process isolation (${fmt(m("process", "trivial"))})`);
check(m("process", "seq100") / m("direct", "seq100") <= 1.1, `100 sequential ≤ 1.1× direct in process isolation (${ratio(m("process", "seq100"), m("direct", "seq100"))})`);
check(m("thread", "seq100") / m("direct", "seq100") <= 1.05, `100 sequential ≤ 1.05× direct in thread isolation (${ratio(m("thread", "seq100"), m("direct", "seq100"))})`);
for (const iso of ["process", "thread"]) {
  check(m(iso, "par10") / m("direct", "par10") <= 1.3, `Promise.all ≤ 1.3× direct in ${iso} isolation (${ratio(m(iso, "par10"), m("direct", "par10"))})`);
}
console.log(`\nTargets (this build): ${verdicts.join("; ")}`);
for (const tag of builds.map((b) => b.tag)) {
  const p = m(`${tag}process`, "trivial");
  const t = m(`${tag}thread`, "trivial");
  if (p > 1.5 * t) {
    console.log(`NOTE: ${tag}process isolation's trivial program (${fmt(p)}) is far above thread isolation's (${fmt(t)}).`);
  }
}

// Where the time goes (cheap: figures already measured). The bare MCP round trip is read_file on
// runbyte (no sandbox) and one echo direct; per call is (100 sequential − trivial) ÷ 100.
console.log("\nWhere the time goes (medians):");
console.log(`| | ${[...runbyteNames, "direct"].join(" | ")} |`);
console.log(`|---|${[...runbyteNames, "direct"].map(() => "---|").join("")}`);
const line = (label, f) => console.log(`| ${label} | ${[...runbyteNames, "direct"].map(f).join(" | ")} |`);
line("bare MCP round trip (runbyte read_file / one direct echo)", (n) => fmt(m(n, "roundTrip")));
line("trivial program − round trip (sandbox, per execution)", (n) =>
  n === "direct" ? "—" : fmt(m(n, "trivial") - m(n, "roundTrip")),
);
line("per call, sequential: (100 seq − trivial) ÷ 100 / direct ÷ 100", (n) =>
  fmt(n === "direct" ? m(n, "seq100") / 100 : (m(n, "seq100") - m(n, "trivial")) / 100),
);
// A `Promise.all` program is one execution round trip (the trivial program) and its calls: the
// calls alone against the direct figure (the target above compares the whole execution).
line("10 `echo` via `Promise.all` − trivial program (the calls alone) / 10 direct in parallel", (n) =>
  n === "direct"
    ? fmt(m(n, "par10"))
    : `${fmt(m(n, "par10") - m(n, "trivial"))} (${ratio(m(n, "par10") - m(n, "trivial"), m("direct", "par10"))})`,
);
line("gateway-reported execution time of 100 sequential (whole ms)", (n) =>
  n === "direct" ? "—" : fmt(m(n, "seq100Reported")),
);
line(`direct per call when the client pauses ${PAUSE_MS * 1000} µs before each (pauses not counted)`, (n) =>
  n === "direct" ? fmt(m(n, "seq100Paced") / 100) : "—",
);

// ---- clean up ----------------------------------------------------------------------------------

await Promise.race([
  Promise.allSettled(clients.map((c) => c.client.close())),
  new Promise((r) => setTimeout(r, 5000)),
]);
for (const dir of temps) rmSync(dir, { recursive: true, force: true });
process.exit(0);
