// A real 2025-11-25 tasks client: the official TypeScript SDK's experimental tasks API, over
// stdio to `runbyte serve` (run in the folder given, which holds runbyte.toml), or over
// streamable HTTP to a Runbyte at the URL given. Runs three programs as tasks (one that
// completes, one that asks a question, one cancelled mid-run), lists the tasks, and prints what
// it saw as one JSON object on stdout.
//
//   node tests/node/tasks_client.mjs <node_modules> <runbyte> <folder>
//   node tests/node/tasks_client.mjs <node_modules> <http://127.0.0.1:PORT/mcp>

import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [modules, runbyte, folder] = process.argv.slice(2);
const sdk = join(modules, "@modelcontextprotocol/sdk/dist/esm");
const load = async (path) => import(pathToFileURL(join(sdk, path)).href);
const { Client } = await load("client/index.js");
const { StdioClientTransport } = await load("client/stdio.js");
const { StreamableHTTPClientTransport } = await load("client/streamableHttp.js");
const { ElicitRequestSchema } = await load("types.js");

const client = new Client(
  { name: "tasks-e2e", version: "1" },
  { capabilities: { elicitation: {} } },
);
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params);
  return { action: "accept", content: { answer: "green" } };
});
const transport = runbyte.startsWith("http")
  ? new StreamableHTTPClientTransport(new URL(runbyte))
  : new StdioClientTransport({
      command: runbyte,
      args: ["serve"],
      cwd: folder,
      env: { ...process.env, RUNBYTE_LOG: "warn" },
      stderr: "inherit",
    });
await client.connect(transport);

const seen = {
  protocol: transport._protocolVersion ?? null,
  capabilities: client.getServerCapabilities(),
};
const tools = await client.listTools();
seen.taskSupport = tools.tools.find((tool) => tool.name === "execute_code")?.execution ?? null;

const tasks = client.experimental.tasks;
// Runs `code` as a task to its end: the kinds of messages the stream gave, and the last.
async function asTask(code) {
  const kinds = [];
  let last = null;
  let taskId = null;
  const stream = tasks.callToolStream(
    { name: "execute_code", arguments: { code } },
    undefined,
    { task: { ttl: 60000 } },
  );
  for await (const message of stream) {
    kinds.push(message.type);
    if (message.type === "taskCreated") taskId = message.task.taskId;
    last = message.type === "error" ? { error: String(message.error?.message) } : message;
  }
  return { taskId, kinds, last };
}

seen.completed = await asTask(
  "import { slow } from './servers/t';\nexport default await slow({ms: 1500});",
);
seen.asking = await asTask(
  "import { ask } from './servers/t';\nexport default await ask({ message: 'colour?' });",
);
seen.asked = asked;

// Cancelled mid-run: started, then cancelled while it works.
const long = tasks.callToolStream(
  {
    name: "execute_code",
    arguments: { code: "import { slow } from './servers/t';\nexport default await slow({ms: 60000});" },
  },
  undefined,
  { task: { ttl: 60000 } },
);
const first = await long.next();
const longId = first.value.task.taskId;
await new Promise((resolve) => setTimeout(resolve, 1000));
seen.cancel = await tasks.cancelTask(longId);
seen.afterCancel = await tasks.getTask(longId);
seen.listed = (await tasks.listTasks()).tasks.map((task) => [task.taskId, task.status]);
seen.longId = longId;
// The downstream server saw its call cancelled (it counts `notifications/cancelled`).
const count = "import { cancelled_count } from './servers/t';\nexport default await cancelled_count({});";
for (let attempt = 0; attempt < 100; attempt++) {
  const answer = await client.callTool({ name: "execute_code", arguments: { code: count } });
  seen.downstreamCancelled = answer.content[0].text;
  if (seen.downstreamCancelled.startsWith("1")) break;
  await new Promise((resolve) => setTimeout(resolve, 200));
}

console.log(JSON.stringify(seen));
await client.close();
process.exit(0);
