//! Runbyte end to end: the built binary and plugin libraries, real child processes.
//! Run with `scripts/test` (it builds the workspace first).

#![allow(clippy::unwrap_used)]

mod config;
mod plugins;
mod serve;
