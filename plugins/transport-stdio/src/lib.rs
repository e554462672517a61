//! `stdio`: Runbyte's stdio transport.
//!
//! - The **connector** starts a downstream server as a child process and exchanges
//!   newline-delimited JSON-RPC over its stdin and stdout. The child gets a scrubbed environment
//!   (a short allowlist plus what the config names), its stderr is drained into the host's log
//!   line by line with the server's name (the tail is kept for the exit report), lines are capped
//!   in length, and closing ends the whole process tree (npx and uvx start grandchildren): on
//!   Unix its process group (stdin closed, then SIGTERM, then SIGKILL), on Windows its Job
//!   Object (stdin closed, then `TerminateJobObject`).
//! - The **listener** serves one upstream client over this process's own stdin and stdout.
//!   On Unix, stdin is read straight from `recv`, and offered to the host's event loop
//!   (`readable_fd`): a request reaches the runtime without a reader thread handing it over.
//!   An answer of up to 4 KiB is written at once when stdout has room and nothing waits before
//!   it; others wait, in order, for a helper thread (`sends_without_blocking`).
//!
//! What differs between operating systems is in [`sys`], one module per concern; Windows reads
//! each pipe on a thread of its own and gives the host no descriptor (the host then reads the
//! pump from a thread).
//!
//! Configuration (`[transports.stdio]`, all optional): `inherit-env` (more variable names to
//! pass through), `max-line-bytes` (default 64 MiB), `stop-grace-ms` (default 1000: how long a
//! child has between each step of the shutdown). A server's own table may set
//! `max-message-bytes`, the cap on one message from that server (default: `max-line-bytes`).
//! A message over the cap that answers a request fails that request at once, with an error that
//! names the server and the cap; a message to a server refused because too much already waits
//! for its stdin (64 MiB) fails only the request it carried.

mod child;
mod lines;
mod listener;
mod overlong;
mod stdin;
mod stdout;
mod sys;

use runbyte_plugin_api::{
    export_plugin,
    transport::{Listener, Pump, Transport},
};
use serde::Deserialize;

/// Environment variables a child process inherits from Runbyte's own environment.
#[cfg(not(windows))]
pub const ENV_ALLOWLIST: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR",
    "TZ",
];

/// Environment variables a child process inherits from Runbyte's own environment. Windows
/// programs need more than Unix ones to start at all: without `SYSTEMROOT`, Python cannot seed
/// its random numbers and Node's networking fails; `PATHEXT` and `COMSPEC` let `npx.cmd` run;
/// the profile folders are where npm and uv keep their caches. (Names are matched without
/// regard to case, as Windows does.)
#[cfg(windows)]
pub const ENV_ALLOWLIST: &[&str] = &[
    "APPDATA",
    "COMSPEC",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "NUMBER_OF_PROCESSORS",
    "OS",
    "PATH",
    "PATHEXT",
    "PROCESSOR_ARCHITECTURE",
    "PROGRAMDATA",
    "PROGRAMFILES",
    "PROGRAMFILES(X86)",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "TMP",
    "USERNAME",
    "USERPROFILE",
    "WINDIR",
];

/// The plugin's own table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Config {
    #[serde(default)]
    inherit_env: Vec<String>,
    #[serde(default = "default_max_line")]
    max_line_bytes: usize,
    #[serde(default = "default_grace")]
    stop_grace_ms: u64,
}

fn default_max_line() -> usize {
    64 << 20
}

fn default_grace() -> u64 {
    1000
}

/// The `stdio` transport.
pub struct Stdio {
    config: Config,
}

impl Transport for Stdio {
    fn open(config: &str) -> Result<Self, String> {
        let config: Config =
            serde_json::from_str(config).map_err(|e| format!("[transports.stdio]: {e}"))?;
        Ok(Stdio { config })
    }

    fn connect(&self, target: &str) -> Result<Box<dyn Pump>, String> {
        let target: child::Target =
            serde_json::from_str(target).map_err(|e| format!("bad stdio target: {e}"))?;
        Ok(Box::new(child::ChildPump::spawn(target, &self.config)?))
    }

    fn listen(&self, _options: &str) -> Result<Box<dyn Listener>, String> {
        Ok(Box::new(listener::StdioListener::new(
            self.config.max_line_bytes,
        )))
    }
}

export_plugin! { kind: transport, name: "stdio", plugin: Stdio }

#[cfg(test)]
mod tests;
