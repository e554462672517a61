//! No code. This crate's manifest names the dependency features that the workspace's test and
//! example members turn on, so that the default members (what `cargo run --release` builds) ask
//! for the same ones and share one build with `cargo build --workspace`.
