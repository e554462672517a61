//! Runbyte end to end: the built binary and plugin libraries, real child processes.
//! Run with `scripts/test` (it builds the workspace first).

#![allow(clippy::unwrap_used)]

mod config;
mod downstream;
mod execute;
mod hub;
mod listeners;
mod plugins;
mod serve;
mod sessions;
mod thirdparty;
mod vfs;
