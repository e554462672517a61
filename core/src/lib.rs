//! Runbyte: an MCP code-mode gateway.
//!
//! The binary is `runbyte` (`main.rs`); this library holds everything it runs, so that the
//! end-to-end tests and benchmarks can drive the same code.

pub mod audit;
pub mod cli;
pub mod codegen;
pub mod config;
pub mod demo;
pub mod execute;
pub mod hub;
pub mod logging;
pub mod plugin;
pub mod pump;
pub mod redact;
pub mod runtime;
pub mod sandbox;
pub mod server;
pub mod text;
pub mod vfs;
