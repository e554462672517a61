//! End-to-end checks of `runbyte-test-server`: the real binary over stdio, streamable HTTP
//! and legacy SSE. Run: `cargo test -p runbyte-test-server`.

#![allow(clippy::unwrap_used)]

mod ask;
mod common;
mod conformance;
mod http;
mod sse;
mod stdio;
