//! Runbyte: an MCP code-mode gateway.
//!
//! The binary is `runbyte` (`main.rs`); this library holds everything it runs, so that the
//! end-to-end tests and benchmarks can drive the same code. `docs/architecture.md` describes its
//! rooms.
//!
//! stdout is the protocol channel in stdio mode: only the CLI's output paths may print to it.
#![deny(clippy::print_stdout)]

mod audit;
pub mod auth;
// The CLI's commands print their answers.
#[allow(clippy::print_stdout)]
pub mod cli;
mod codegen;
pub mod config;
mod demo;
// `runbyte doctor` and `runbyte setup` print their reports too.
mod dirs;
#[allow(clippy::print_stdout)]
mod doctor;
mod exe;
mod execute;
pub mod gateway;
pub mod hub;
pub mod infer;
mod kept;
mod logging;
pub mod os_paths;
mod own_tools;
pub mod pins;
mod platform;
pub mod plugin;
mod policy;
mod pump;
mod redact;
mod relay;
pub mod sandbox;
mod server;
#[allow(clippy::print_stdout)]
mod setup;
mod skills;
mod state_store;
mod stats;
mod telemetry;
mod text;
pub mod tokens;
pub mod vfs;
