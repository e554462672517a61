// The catalogue benchmark of issue 33, end to end: what an execution and a search cost when the
// gateway holds a large catalogue. An MCP client of the official TypeScript SDK over stdio, against
// `runbyte serve` with SERVERS stdio servers of TOOLS generated tools each (the test server's
// `--mode generated-only --tools N`: `tool_0000`…, realistic schemas) and one server of one tool,
// the baseline of "one tool from a large server". With RUNBYTE_OLD, an older build runs the same
// figures in the same run, alternating, so that machine noise hits both alike.
//
//   node tests/benches/catalog.mjs          (scripts/bench runs it after the release build)
//
// Environment:
//   RUNBYTE_OLD=dir     a cargo `target/release` folder of an older build (its `runbyte` and its
//                       plugin libraries): adds an "old" column
//   BENCH_SERVERS=n     generated servers (default 20); BENCH_TOOLS=n tools each (default 250)
//   BENCH_ROUNDS=n      samples of each repeated figure (default 15)
//
// Exits non-zero, saying why, when a prerequisite is missing or any answer is wrong.

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const deps = join(root, ".test-deps/node_modules");
const temps = [];

function fail(message) {
  console.error(`catalog bench: ${message}`);
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  process.exit(1);
}

// ---- prerequisites -----------------------------------------------------------------------------

const sdkDir = join(deps, "@modelcontextprotocol/sdk/dist/esm");
if (!existsSync(join(sdkDir, "client/index.js"))) {
  fail(`the MCP TypeScript SDK is not installed (${sdkDir} is missing): run scripts/test-deps`);
}
const { Client } = await import(pathToFileURL(join(sdkDir, "client/index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(join(sdkDir, "client/stdio.js")).href);

const PLUGINS = ["transport_stdio", "policy_limits", "codegen_typescript"];

function checkBuild(dir, what) {
  const exe = join(dir, "runbyte");
  if (!existsSync(exe)) fail(`${exe} is missing: ${what}`);
  for (const plugin of PLUGINS) {
    const file = `librunbyte_${plugin}.so`;
    if (!existsSync(join(dir, file)) && !existsSync(join(dir, "deps", file))) {
      fail(`${dir} has no ${file}: ${what}`);
    }
  }
  return exe;
}

const release = join(root, "target/release");
// The downstream servers are this build's test server, for both gateways.
const testServer = join(release, "runbyte-test-server");
if (!existsSync(testServer)) fail(`${testServer} is missing: run \`cargo build --release --workspace\``);
const builds = [{ tag: "new", dir: release, exe: checkBuild(release, "run `cargo build --release --workspace` first") }];
if (process.env.RUNBYTE_OLD) {
  const dir = resolve(process.env.RUNBYTE_OLD);
  builds.unshift({ tag: "old", dir, exe: checkBuild(dir, "RUNBYTE_OLD must name a cargo target/release folder") });
}

const envInt = (name, fallback) => {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) fail(`${name}=${text} is not a positive integer`);
  return value;
};
const SERVERS = envInt("BENCH_SERVERS", 20);
const TOOLS = envInt("BENCH_TOOLS", 250);
const ROUNDS = envInt("BENCH_ROUNDS", 15);
const TOTAL = SERVERS * TOOLS;

// ---- one gateway -------------------------------------------------------------------------------

function text(result) {
  return (result?.content ?? [])
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("");
}

function programValue(result) {
  const body = text(result);
  const cut = body.lastIndexOf("\n--- ");
  try {
    return JSON.parse(cut < 0 ? body : body.slice(0, cut));
  } catch {
    return undefined;
  }
}

function config(build) {
  const lines = ["[plugins]", `dirs = [${JSON.stringify(build.dir)}]`, ""];
  const server = (name, args) =>
    lines.push(`[servers.${name}]`, `command = ${JSON.stringify(testServer)}`, `args = ${JSON.stringify(args)}`, "");
  for (let i = 0; i < SERVERS; i++) server(`m${i}`, ["--mode", "generated-only", "--tools", String(TOOLS)]);
  server("one", ["--mode", "generated-only", "--tools", "1"]);
  return lines.join("\n");
}

const childEnv = { ...process.env };
delete childEnv.RUNBYTE_EXE;

async function start(build) {
  const dir = mkdtempSync(join(tmpdir(), "runbyte-catalog-"));
  temps.push(dir);
  writeFileSync(join(dir, "runbyte.toml"), config(build));
  const transport = new StdioClientTransport({
    command: build.exe,
    args: ["serve"],
    cwd: dir,
    env: { ...childEnv, RUNBYTE_LOG: "error", RUNBYTE_EXE: build.exe },
    stderr: "pipe",
  });
  let tail = "";
  transport.stderr?.on("data", (chunk) => {
    tail = (tail + chunk.toString()).slice(-4096);
  });
  const client = new Client({ name: `catalog-bench-${build.tag}`, version: "1.0.0" });
  const started = performance.now();
  try {
    await client.connect(transport);
  } catch (error) {
    fail(`${build.tag}: cannot connect: ${error.message}\n${tail}`);
  }
  const gateway = { build, client, transport, stderr: () => tail };
  // Ready: every server's folder listed with its tools.
  for (;;) {
    const listing = text(await client.callTool({ name: "list_directory", arguments: { path: "/servers" } }));
    const ready = listing.split("\n").filter((l) => /^\w+\/(\s|$)/.test(l)).length;
    if (ready === SERVERS + 1 && !/starting|unavailable/.test(listing)) break;
    if (performance.now() - started > 120_000) fail(`${build.tag}: the servers never became ready:\n${listing}\n${tail}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  gateway.listed = performance.now() - started;
  gateway.cpuAtReady = cpuMs(transport.pid);
  return gateway;
}

async function execute(gateway, code, expected, what) {
  const started = performance.now();
  const result = await gateway.client.callTool({ name: "execute_code", arguments: { code } });
  const elapsed = performance.now() - started;
  const value = programValue(result);
  if (result.isError || JSON.stringify(value) !== JSON.stringify(expected)) {
    fail(`${gateway.build.tag}: ${what} answered wrongly (expected ${JSON.stringify(expected)}):\n${text(result)}\n${gateway.stderr()}`);
  }
  return elapsed;
}

async function search(gateway, query, expected) {
  const started = performance.now();
  const result = await gateway.client.callTool({ name: "search_tools", arguments: { query, limit: 10 } });
  const elapsed = performance.now() - started;
  if (result.isError || !text(result).includes(expected)) {
    fail(`${gateway.build.tag}: search_tools ${JSON.stringify(query)} does not find ${expected}:\n${text(result)}`);
  }
  return elapsed;
}

function rssMiB(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kib = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
    return kib / 1024;
  } catch {
    return NaN;
  }
}

// The CPU time the gateway's own process has used (its threads, not its servers'), in ms; Linux only.
function cpuMs(pid) {
  try {
    // After the name, which may itself hold ") ".
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(") ") + 2).split(" ");
    // utime and stime, in clock ticks of 10 ms (USER_HZ is 100 on Linux).
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return NaN;
  }
}

// ---- programs ----------------------------------------------------------------------------------

const TRIVIAL = "export default 1";
const CALL = (server) =>
  `import { tool_0000 } from "./servers/${server}";\nconst r = await tool_0000({ query: "q" });\nexport default JSON.stringify(r).includes("tool_0000");`;
const NAMESPACE = `import * as s from "./servers";\nexport default [Object.keys(s).length, Object.keys(s.m${SERVERS - 1}).length, typeof s.m0.tool_0001];`;
const NAMESPACE_VALUE = [SERVERS + 1, TOOLS, "function"];
// Queries and a hit each must show (the generated tools share five descriptions).
const QUERIES = [
  ["update a record with a patch", "tool_0003"],
  ["create task priority tags", "tool_0001"],
  ["fetch record by id", "tool_0002"],
  ["service status", "tool_0004"],
  ["free text search query", "tool_0000"],
  [`tool_${String(TOOLS - 1).padStart(4, "0")}`, `tool_${String(TOOLS - 1).padStart(4, "0")}`],
];

// ---- the run -----------------------------------------------------------------------------------

const figures = new Map(builds.map((b) => [b.tag, {}]));
const put = (tag, key, value) => {
  const f = figures.get(tag);
  (f[key] ??= []).push(value);
};
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

const startedAt = performance.now();
try {
  // Gateways are started one at a time (their start is measured), then used alternately.
  const gateways = [];
  for (const build of builds) {
    const gateway = await start(build);
    put(build.tag, "listed", gateway.listed);
    put(build.tag, "cpuAtReady", gateway.cpuAtReady);
    // The namespace import first, on a fresh gateway: every worker's first time. Workers are
    // taken in turn, so 2 × the pool's size covers each at least once.
    for (let i = 0; i < 8; i++) {
      put(build.tag, i === 0 ? "nsFirst" : "nsNext", await execute(gateway, NAMESPACE, NAMESPACE_VALUE, "the namespace import"));
    }
    gateways.push(gateway);
  }
  for (const g of gateways) {
    // Warm up.
    await execute(g, TRIVIAL, 1, "the trivial program");
    await execute(g, CALL("m3"), true, "one tool of m3");
    await execute(g, CALL("one"), true, "the 1-tool server's tool");
    await search(g, QUERIES[0][0], QUERIES[0][1]);
  }
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? gateways : [...gateways].reverse();
    for (const g of order) {
      const tag = g.build.tag;
      put(tag, "trivial", await execute(g, TRIVIAL, 1, "the trivial program"));
      put(tag, "callBig", await execute(g, CALL("m3"), true, "one tool of m3"));
      put(tag, "callOne", await execute(g, CALL("one"), true, "the 1-tool server's tool"));
      put(tag, "ns", await execute(g, NAMESPACE, NAMESPACE_VALUE, "the namespace import"));
      const [query, expected] = QUERIES[round % QUERIES.length];
      put(tag, "search", await search(g, query, expected));
    }
  }
  for (const g of gateways) put(g.build.tag, "rss", rssMiB(g.transport.pid));
  await Promise.race([
    Promise.allSettled(gateways.map((g) => g.client.close())),
    new Promise((r) => setTimeout(r, 5000)),
  ]);
} catch (error) {
  fail(error.stack ?? String(error));
}
const seconds = (performance.now() - startedAt) / 1000;

// ---- report ------------------------------------------------------------------------------------

const fmt = (ms) => (Number.isNaN(ms) || ms === undefined ? "—" : ms < 10 ? `${ms.toFixed(2)} ms` : `${ms.toFixed(1)} ms`);
const tags = builds.map((b) => b.tag);
const get = (tag, key, pick = median) => pick(figures.get(tag)[key] ?? [NaN]);
const max = (values) => Math.max(...values);
const rows = [
  ["servers listed after start (one sample)", (t) => fmt(get(t, "listed")), "ready ≤ 1 s after the servers answer"],
  ["the gateway's CPU time from start to then (one sample, Linux)", (t) => fmt(get(t, "cpuAtReady")), "—"],
  ["`export default 1`", (t) => fmt(get(t, "trivial")), "—"],
  [
    `one tool of a ${TOOLS}-tool server, called (× the 1-tool server's)`,
    (t) => `${fmt(get(t, "callBig"))} (${(get(t, "callBig") / get(t, "callOne")).toFixed(2)}×)`,
    "≤ 1.3×",
  ],
  ["the same against the 1-tool server", (t) => fmt(get(t, "callOne")), "—"],
  [`\`import * as s from './servers'\` (${TOTAL} tools), first on a fresh gateway`, (t) => fmt(get(t, "nsFirst")), "≤ 50 ms"],
  ["the same, slowest of the next 7 (each worker's first)", (t) => fmt(get(t, "nsNext", max)), "≤ 50 ms"],
  ["the same, warm (median)", (t) => fmt(get(t, "ns")), "≤ 50 ms"],
  [`\`search_tools\` over ${TOTAL} tools (round trip)`, (t) => fmt(get(t, "search")), "≤ 2 ms per query"],
  ["gateway resident memory at the end", (t) => `${get(t, "rss").toFixed(0)} MiB`, "≤ 100 MiB"],
];
console.log(
  `\nCatalogue costs (issue 33): ${SERVERS} servers × ${TOOLS} tools + one 1-tool server, medians of ${ROUNDS} alternating rounds; node ${process.version}, ${seconds.toFixed(1)} s\n`,
);
console.log(`| figure | ${tags.join(" | ")} | target |`);
console.log(`|---|${tags.map(() => "---|").join("")}---|`);
for (const [label, cell, target] of rows) console.log(`| ${label} | ${tags.map(cell).join(" | ")} | ${target} |`);
if (tags.includes("old")) {
  const r = (key, pick) => (get("old", key, pick) / get("new", key, pick)).toFixed(1);
  console.log(
    `\nold ÷ new: trivial ${r("trivial")}×, one tool of ${TOOLS} ${r("callBig")}×, namespace first ${r("nsFirst")}×, namespace warm ${r("ns")}×, search ${r("search")}×, memory ${r("rss")}×`,
  );
}
for (const dir of temps) rmSync(dir, { recursive: true, force: true });
process.exit(0);
