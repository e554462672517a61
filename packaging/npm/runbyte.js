#!/usr/bin/env node
// The `runbyte` command of the npm package: runs the binary of this platform's package
// (@runbyte/<platform>-<arch>, an optional dependency that npm installs only where its `os` and
// `cpu` match), with stdio inherited, signals passed on and its exit status returned. No
// download happens at install or run time.
"use strict";

const { spawn } = require("child_process");
const path = require("path");

const PLATFORMS = {
  "linux-x64": "Linux x64",
  "linux-arm64": "Linux arm64",
  "darwin-arm64": "macOS on Apple silicon",
  "darwin-x64": "macOS on Intel",
  "win32-x64": "Windows x64",
};

// A clear message on stderr and exit status 1, never a stack trace.
function fail(lines) {
  process.stderr.write(`runbyte: ${lines.join("\n")}\n`);
  process.exit(1);
}

const key = `${process.platform}-${process.arch}`;
if (!(key in PLATFORMS)) {
  fail([
    `there is no prebuilt runbyte for ${key} (prebuilt: ${Object.keys(PLATFORMS).join(", ")}).`,
    "Build it from source: https://github.com/runbyte/runbyte (cargo build --release).",
  ]);
}
const pkg = `@runbyte/${key}`;
const version = require("../package.json").version;
let dir;
try {
  dir = path.dirname(require.resolve(`${pkg}/package.json`));
} catch {
  fail([
    `the package ${pkg} (the runbyte binary for ${PLATFORMS[key]}) is not installed.`,
    "It is an optional dependency of runbyte: it is left out when optional dependencies are",
    "omitted (npm --omit=optional or --no-optional, yarn --ignore-optional, a lockfile made on",
    "another platform). Install it next to runbyte with:",
    `    npm install ${pkg}@${version}`,
  ]);
}
const binary = path.join(dir, "bin", process.platform === "win32" ? "runbyte.exe" : "runbyte");

// `runbyte setup` writes this command into client configurations: the one that got here.
const env = { ...process.env };
if (!env.RUNBYTE_LAUNCH) env.RUNBYTE_LAUNCH = "npx -y runbyte";

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit", env });
const forward = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGBREAK"].filter(
  (signal) => process.platform === "win32" ? signal !== "SIGQUIT" : signal !== "SIGBREAK",
);
for (const signal of forward) {
  process.on(signal, () => {
    try {
      child.kill(signal);
    } catch {
      // The child has gone already; its exit ends this process.
    }
  });
}
child.on("error", (error) => {
  fail([`could not start ${binary}: ${error.message}`, `Reinstall ${pkg}@${version}.`]);
});
child.on("exit", (code, signal) => {
  if (signal) {
    // End the same way the child did, so the caller sees the signal.
    for (const forwarded of forward) process.removeAllListeners(forwarded);
    process.kill(process.pid, signal);
    // Where the signal does not end this process (Windows), the shell's convention.
    process.exit(128 + (require("os").constants.signals[signal] || 0));
  }
  process.exit(code === null ? 1 : code);
});
