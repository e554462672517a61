//! Runbyte end to end: the built binary and plugin libraries, real child processes.
//! Run with `scripts/test` (it builds the workspace first).

#![allow(clippy::unwrap_used)]

mod apps;
mod cache;
mod catalog;
mod config;
mod direct;
mod downstream;
mod edges;
mod eras;
mod execute;
mod hostile;
mod hub;
mod infer;
mod install;
mod legacy_tasks;
mod listeners;
// Unix only: the browser stand-ins are shell scripts, and a token file's mode is checked.
#[cfg(unix)]
mod oauth;
mod old_plugins;
mod ordinary;
mod package;
mod pins;
mod pins_ask;
mod plugins;
mod poison;
mod relay;
mod replicas;
mod secrets;
mod serve;
mod sessions;
mod setup;
// Unix only: termination signals and process groups.
#[cfg(unix)]
mod shutdown;
mod skills;
mod state;
mod tasks;
mod telemetry;
mod thirdparty;
mod tokens;
// Unix only: file modes (Windows checks none; see `config::private`).
#[cfg(unix)]
mod trust;
mod vfs;
mod workspace;
