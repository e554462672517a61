// The token benchmark of issue 18 (run by scripts/token-bench): what a model's context pays for
// six real MCP servers listed directly and through Runbyte, and for three scripted multi-step
// tasks replayed both ways (the calls a careful agent makes), counted in bytes and in
// `o200k_base` tokens (js-tiktoken, offline).
//
// Direct: the client holds every server's tool definitions, and each call's arguments and result
// enter the context. Through Runbyte: Runbyte's tools and instructions, then the discovery calls
// (search_tools, read_file of the modules used), the program, and its answer.

import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const testDeps = join(root, ".test-deps/node_modules");
const benchDeps = join(root, ".bench-deps");
const runbyte = join(root, process.env.RUNBYTE_BUILD ?? "target/release", "runbyte");
const temps = [];

function fail(message) {
  console.error(`token bench: ${message}`);
  for (const dir of temps) rmSync(dir, { recursive: true, force: true });
  process.exit(1);
}

const sdk = join(testDeps, "@modelcontextprotocol/sdk/dist/esm");
const need = [
  [join(sdk, "client/index.js"), "the MCP TypeScript SDK (scripts/test-deps)"],
  [join(benchDeps, "node_modules/js-tiktoken/dist/lite.js"), "js-tiktoken (scripts/token-bench)"],
  [join(benchDeps, "venv/bin/mcp-server-git"), "mcp-server-git (scripts/token-bench)"],
  [runbyte, "runbyte (cargo build --release)"],
];
for (const [path, what] of need) {
  if (!existsSync(path)) fail(`${what} is missing: ${path}`);
}
const { Client } = await import(pathToFileURL(join(sdk, "client/index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(join(sdk, "client/stdio.js")).href);
const { Tiktoken } = await import(
  pathToFileURL(join(benchDeps, "node_modules/js-tiktoken/dist/lite.js")).href
);
const o200k = (
  await import(pathToFileURL(join(benchDeps, "node_modules/js-tiktoken/dist/ranks/o200k_base.js")).href)
).default;
const encoding = new Tiktoken(o200k);
const tokens = (text) => encoding.encode(text).length;
const bytes = (text) => Buffer.byteLength(text, "utf8");

// ---- fixtures ------------------------------------------------------------------------------------

const work = mkdtempSync(join(tmpdir(), "runbyte-token-bench-"));
temps.push(work);
const notes = join(work, "notes");
mkdirSync(notes);
const topics = ["budget", "hiring", "roadmap", "vendors", "security", "offsite", "metrics", "support"];
for (let i = 0; i < 40; i++) {
  const topic = topics[i % topics.length];
  const mentions = i % 8 === 3 ? " The deadline for this is Friday; owners must confirm." : "";
  const body = Array.from(
    { length: 12 },
    (_, line) =>
      `Meeting ${i} about ${topic}, point ${line}: we reviewed the ${topic} plan, agreed next steps and noted open questions for the team.${line === 6 ? mentions : ""}`,
  ).join("\n");
  writeFileSync(join(notes, `note-${String(i).padStart(2, "0")}.md`), `# ${topic} ${i}\n\n${body}\n`);
}

const memoryFile = join(work, "memory.jsonl");
const companies = ["Acme", "Globex", "Initech", "Umbrella"];
const lines = [];
for (let i = 0; i < 48; i++) {
  const company = companies[i % companies.length];
  lines.push(
    JSON.stringify({
      type: "entity",
      name: `Person ${i}`,
      entityType: "person",
      observations: [
        `works at ${company}`,
        `joined in ${2015 + (i % 9)}`,
        `speaks ${["English", "French", "German", "Spanish"][i % 4]}`,
        `likes ${["chess", "hiking", "jazz", "cooking", "cycling"][i % 5]}`,
      ],
    }),
  );
}
for (const company of companies) {
  lines.push(JSON.stringify({ type: "entity", name: company, entityType: "company", observations: [`${company} is a client`] }));
}
for (let i = 0; i < 48; i++) {
  lines.push(JSON.stringify({ type: "relation", from: `Person ${i}`, to: companies[i % companies.length], relationType: "works_at" }));
}
writeFileSync(memoryFile, lines.join("\n") + "\n");

const repo = join(work, "repo");
mkdirSync(repo);
const git = (...args) => execFileSync("git", args, { cwd: repo, stdio: "pipe" });
git("init", "-q");
const authors = ["Ada Lovelace <ada@example.com>", "Alan Turing <alan@example.com>", "Grace Hopper <grace@example.com>", "Linus T <linus@example.com>"];
for (let i = 0; i < 60; i++) {
  writeFileSync(join(repo, `file-${i % 10}.txt`), `change ${i}\n`);
  git("add", ".");
  const author = authors[(i * 7) % 4];
  git("-c", "user.name=Bench", "-c", "user.email=bench@example.com", "commit", "-q", "-m", `Change number ${i}: adjust file ${i % 10}`, `--author=${author}`);
}

// ---- the six servers -----------------------------------------------------------------------------

const venv = join(benchDeps, "venv/bin");
const servers = {
  everything: { command: process.execPath, args: [join(testDeps, "@modelcontextprotocol/server-everything/dist/index.js"), "stdio"] },
  filesystem: { command: process.execPath, args: [join(benchDeps, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), notes] },
  memory: { command: process.execPath, args: [join(benchDeps, "node_modules/@modelcontextprotocol/server-memory/dist/index.js")], env: { MEMORY_FILE_PATH: memoryFile } },
  time: { command: join(venv, "mcp-server-time"), args: ["--local-timezone", "UTC"] },
  git: { command: join(venv, "mcp-server-git"), args: ["--repository", repo] },
  fetch: { command: join(venv, "mcp-server-fetch"), args: [] },
};

async function connect(command, args, env = {}, cwd = work) {
  const client = new Client({ name: "token-bench", version: "1" });
  const transport = new StdioClientTransport({
    command,
    args,
    cwd,
    env: { ...process.env, ...env },
    stderr: "ignore",
  });
  await client.connect(transport);
  return client;
}

/// What one tool call puts in the context: its arguments and the text its result shows.
function shown(result) {
  const texts = (result.content ?? []).map((block) => (block.type === "text" ? block.text : JSON.stringify(block)));
  if (texts.length === 0 && result.structuredContent) texts.push(JSON.stringify(result.structuredContent));
  return texts.join("\n");
}

class Context {
  constructor() {
    this.text = [];
  }
  add(text) {
    this.text.push(text);
  }
  get bytes() {
    return this.text.reduce((sum, text) => sum + bytes(text), 0);
  }
  get tokens() {
    return this.text.reduce((sum, text) => sum + tokens(text), 0);
  }
}

async function call(client, context, name, args) {
  context.add(JSON.stringify({ name, arguments: args }));
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) fail(`${name} failed: ${shown(result)}`);
  const text = shown(result);
  context.add(text);
  return text;
}

// ---- catalogues ----------------------------------------------------------------------------------

const direct = {};
const catalogue = new Context();
const rows = [];
for (const [name, server] of Object.entries(servers)) {
  const client = await connect(server.command, server.args, server.env);
  const { tools } = await client.listTools();
  const text = JSON.stringify(tools);
  const instructions = client.getInstructions?.() ?? "";
  catalogue.add(text + instructions);
  rows.push([name, tools.length, bytes(text + instructions), tokens(text + instructions)]);
  direct[name] = client;
}

const config = join(work, "runbyte.toml");
let toml = `[plugins]\ndirs = [${JSON.stringify(dirname(runbyte))}]\n\n[server]\nskills-dir = ${JSON.stringify(join(work, "skills"))}\n\n`;
for (const [name, server] of Object.entries(servers)) {
  toml += `[servers.${name}]\ncommand = ${JSON.stringify(server.command)}\nargs = ${JSON.stringify(server.args)}\n`;
  if (server.env) {
    toml += `env = { ${Object.entries(server.env).map(([k, v]) => `${k} = ${JSON.stringify(v)}`).join(", ")} }\n`;
  }
  toml += "\n";
}
writeFileSync(config, toml);
const gateway = await connect(runbyte, ["serve", "--config", config], { RUNBYTE_LOG: "warn", XDG_STATE_HOME: join(work, "state") });
const own = (await gateway.listTools()).tools;
const fixed = JSON.stringify(own) + (gateway.getInstructions?.() ?? "");
// Wait until every server is ready in Runbyte (its folder lists tools).
for (let i = 0; i < 100; i++) {
  const listing = shown(await gateway.callTool({ name: "list_directory", arguments: { path: "/servers", withDescriptions: true } }));
  if (!listing.includes("starting")) break;
  await new Promise((r) => setTimeout(r, 200));
}

// ---- tasks ---------------------------------------------------------------------------------------

async function viaRunbyte(steps) {
  const context = new Context();
  context.add(fixed);
  let answer = "";
  for (const [name, args] of steps) {
    answer = await call(gateway, context, name, args);
  }
  return { context, answer };
}

const tasks = [];

// 1. Which notes mention a deadline?
{
  const context = new Context();
  context.add(catalogue.text.join(""));
  const listed = await call(direct.filesystem, context, "list_directory", { path: notes });
  const paths = [...listed.matchAll(/\[FILE\] (\S+)/g)].map((m) => join(notes, m[1]));
  const read = await call(direct.filesystem, context, "read_multiple_files", { paths });
  const found = read.split("\n---\n").filter((part) => part.includes("deadline")).length;
  const runbyteRun = await viaRunbyte([
    ["search_tools", { query: "read multiple files", limit: 3 }],
    ["read_file", { path: "/servers/filesystem/read_multiple_files.ts" }],
    [
      "execute_code",
      {
        code: `import { list_directory, read_multiple_files } from './servers/filesystem';
const text = (r: any) => typeof r === 'string' ? r : (r.content ?? JSON.stringify(r));
const listed = text(await list_directory({ path: ${JSON.stringify(notes)} }));
const paths = [...listed.matchAll(/\\[FILE\\] (\\S+)/g)].map((m) => ${JSON.stringify(notes + "/")} + m[1]);
const read = text(await read_multiple_files({ paths }));
export default read.split('\\n---\\n').filter((part) => part.includes('deadline')).map((part) => part.split(':')[0].split('/').pop());`,
      },
    ],
  ]);
  if (!runbyteRun.answer.includes("note-03.md")) fail(`task 1 through Runbyte: ${runbyteRun.answer}`);
  tasks.push(["notes that mention a deadline (filesystem)", context, runbyteRun.context, found]);
}

// 2. Who works at Acme, and what do we know about them?
{
  const context = new Context();
  context.add(catalogue.text.join(""));
  await call(direct.memory, context, "search_nodes", { query: "Acme" });
  const runbyteRun = await viaRunbyte([
    ["search_tools", { query: "search knowledge graph nodes", limit: 3 }],
    ["read_file", { path: "/servers/memory/search_nodes.ts" }],
    [
      "execute_code",
      {
        code: `import { search_nodes } from './servers/memory';
const found: any = await search_nodes({ query: 'Acme' });
export default found.entities.filter((e: any) => e.entityType === 'person').map((e: any) => e.name);`,
      },
    ],
  ]);
  if (!runbyteRun.answer.includes("Person 0")) fail(`task 2 through Runbyte: ${runbyteRun.answer}`);
  tasks.push(["people who work at Acme (memory)", context, runbyteRun.context, null]);
}

// 3. Commits per author over the last 60 commits.
{
  const context = new Context();
  context.add(catalogue.text.join(""));
  await call(direct.git, context, "git_log", { repo_path: repo, max_count: 60 });
  const runbyteRun = await viaRunbyte([
    ["search_tools", { query: "git log commits", limit: 3 }],
    ["read_file", { path: "/servers/git/git_log.ts" }],
    [
      "execute_code",
      {
        code: `import { git_log } from './servers/git';
const log: any = await git_log({ repo_path: ${JSON.stringify(repo)}, max_count: 60 });
const text = typeof log === 'string' ? log : JSON.stringify(log);
const counts: Record<string, number> = {};
for (const m of text.matchAll(/Author: ([^\\n]+)/g)) counts[m[1]] = (counts[m[1]] ?? 0) + 1;
export default counts;`,
      },
    ],
  ]);
  if (!runbyteRun.answer.includes("Ada Lovelace")) fail(`task 3 through Runbyte: ${runbyteRun.answer}`);
  tasks.push(["commits per author, last 60 (git)", context, runbyteRun.context, null]);
}

// ---- report --------------------------------------------------------------------------------------

const pad = (text, width) => String(text).padEnd(width);
const num = (n) => String(n).padStart(8);
console.log(`Token benchmark (o200k_base, js-tiktoken); bytes are UTF-8.\n`);
console.log(`${pad("catalogue (tools/list + instructions)", 40)}${num("tools")}${num("bytes")}${num("tokens")}`);
for (const [name, count, b, t] of rows) console.log(`${pad(`  ${name}`, 40)}${num(count)}${num(b)}${num(t)}`);
console.log(`${pad("  six servers listed directly", 40)}${num(rows.reduce((s, r) => s + r[1], 0))}${num(catalogue.bytes)}${num(catalogue.tokens)}`);
console.log(`${pad("  Runbyte (its tools + instructions)", 40)}${num(own.length)}${num(bytes(fixed))}${num(tokens(fixed))}`);
const fixedRatio = tokens(fixed) / catalogue.tokens;
console.log(`  Runbyte's fixed cost: ${bytes(fixed)} bytes (target <= 2048), ${(100 * fixedRatio).toFixed(1)}% of the direct catalogue's tokens\n`);
console.log(`${pad("task: context cost, direct vs Runbyte", 44)}${num("direct")}${num("runbyte")}   ratio`);
let worst = 0;
for (const [name, directCtx, runbyteCtx] of tasks) {
  const ratio = runbyteCtx.tokens / directCtx.tokens;
  worst = Math.max(worst, ratio);
  console.log(`${pad(`  ${name}`, 44)}${num(directCtx.tokens)}${num(runbyteCtx.tokens)}   ${(100 * ratio).toFixed(1)}% (target <= 10%)`);
  const withoutFixed = (runbyteCtx.tokens - tokens(fixed)) / (directCtx.tokens - catalogue.tokens);
  console.log(`${pad("    (without either side's fixed cost)", 44)}${num(directCtx.tokens - catalogue.tokens)}${num(runbyteCtx.tokens - tokens(fixed))}   ${(100 * withoutFixed).toFixed(1)}%`);
}

for (const client of [...Object.values(direct), gateway]) await client.close();
for (const dir of temps) rmSync(dir, { recursive: true, force: true });
const met = bytes(fixed) <= 2048 && worst <= 0.1;
console.log(`\n${met ? "targets met" : "targets NOT met"}`);
process.exit(0);
