//! Runbyte: an MCP code-mode gateway.
//!
//! The binary is `runbyte` (`main.rs`); this library holds everything it runs, so that the
//! end-to-end tests and benchmarks can drive the same code. `docs/architecture.md` describes its
//! rooms.
//!
//! stdout is the protocol channel in stdio mode: only the CLI's output paths may print to it.
#![deny(clippy::print_stdout)]

pub mod audit;
// The CLI's commands print their answers.
#[allow(clippy::print_stdout)]
pub mod cli;
pub mod codegen;
pub mod config;
pub mod demo;
pub mod exe;
pub mod execute;
pub mod gateway;
pub mod hub;
pub mod logging;
pub mod plugin;
pub mod policy;
pub mod pump;
pub mod redact;
pub mod sandbox;
pub mod server;
pub mod text;
pub mod vfs;
