//! Logs go to stderr, always: in stdio mode stdout is the protocol channel.

use tracing_subscriber::EnvFilter;

/// Installs the stderr subscriber. `level` is a `tracing` filter (`info`, `debug`,
/// `runbyte=debug,rmcp=warn`); `RUNBYTE_LOG` overrides it.
pub fn init(level: &str) {
    let filter = std::env::var("RUNBYTE_LOG")
        .ok()
        .and_then(|value| EnvFilter::try_new(value).ok())
        .or_else(|| EnvFilter::try_new(level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}
