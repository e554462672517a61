//! Runbyte end to end: the built binary and plugin libraries, real child processes.
//! Run with `scripts/test` (it builds the workspace first).

#![allow(clippy::unwrap_used)]

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
mod listeners;
mod oauth;
mod ordinary;
mod package;
mod plugins;
mod relay;
mod replicas;
mod secrets;
mod serve;
mod sessions;
mod setup;
mod shutdown;
mod skills;
mod telemetry;
mod thirdparty;
mod tokens;
mod trust;
mod vfs;
mod workspace;
