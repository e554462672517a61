use std::sync::OnceLock;

use abi_stable::{StableAbi, std_types::RStr};

/// The severity of a message a plugin logs through the host.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Something failed.
    Error,
    /// Something looks wrong but work goes on.
    Warn,
    /// Ordinary events worth an operator's attention (a child started, a session opened).
    Info,
    /// Detail for debugging.
    Debug,
    /// Very verbose detail.
    Trace,
}

/// What the host offers a plugin. The host passes it to `open`; append-only.
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = HostApiRef)))]
pub struct HostApi {
    /// Writes one message to the host's log (stderr or its log file), tagged with the plugin.
    #[sabi(last_prefix_field)]
    pub log: extern "C" fn(level: LogLevel, plugin: RStr<'_>, message: RStr<'_>),
}

struct Installed {
    host: HostApiRef,
    plugin: &'static str,
}

static HOST: OnceLock<Installed> = OnceLock::new();

pub(crate) fn install(host: HostApiRef, plugin: &'static str) {
    let _ = HOST.set(Installed { host, plugin });
}

/// Logs `message` through the host. Before the host has opened the plugin (for instance in the
/// plugin's own unit tests), the message goes to stderr.
pub fn log(level: LogLevel, message: &str) {
    match HOST.get() {
        Some(installed) => {
            (installed.host.log())(level, RStr::from(installed.plugin), RStr::from(message))
        }
        None => eprintln!("[{level:?}] {message}"),
    }
}
