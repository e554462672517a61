//! The stable ABI between Runbyte and its plugins.
//!
//! A Runbyte plugin is a shared library (`crate-type = ["cdylib"]`) that depends on this crate
//! alone and exports itself with one macro, [`export_plugin!`]. There are three kinds:
//!
//! | kind | you implement | the host calls |
//! |---|---|---|
//! | transport | [`transport::Transport`] | `connect` (a client connection to a downstream MCP server) and/or `listen` (accept upstream MCP clients); both hand back a blocking [`transport::Pump`] of JSON-RPC text |
//! | codegen dialect | [`codegen::Codegen`] | `generate`: a JSON request in, a JSON list of files out |
//! | sandbox policy | [`policy::Policy`] | `limits` and `check_call`: JSON in, JSON out |
//!
//! Everything that crosses the boundary is plain text: the plugin's own configuration table
//! from `runbyte.toml` (as a JSON object), tool specifications, generated files and verdicts.
//! The host validates what comes back and reports problems with the plugin's name. With the
//! `wire` feature, the `wire` module holds those shapes as serde types, declared once for the
//! host and any plugin (off by default: the ABI alone needs neither serde nor serde_json).
//!
//! Rules a plugin must keep:
//! - **No shared async runtime.** The host's tokio runtime is invisible to a dynamic library.
//!   A plugin that does I/O owns its threads (or builds a private runtime) and exposes a
//!   blocking, thread-safe pump.
//! - **No panic crosses the boundary.** The adapters behind [`export_plugin!`] catch every
//!   panic and hand the host an error ([`PluginError`] with [`ErrorKind::Panicked`]) naming the
//!   plugin and the entry point, so a panicking plugin fails its call, not the host.
//! - **Logs go to the host** through [`log`]; a plugin never writes to stdout, which is the
//!   protocol channel when Runbyte serves over stdio.
//!
//! ```ignore
//! use runbyte_plugin_api::{export_plugin, policy::Policy};
//!
//! struct AllowAll;
//!
//! impl Policy for AllowAll {
//!     fn open(_config: &str) -> Result<Self, String> {
//!         Ok(AllowAll)
//!     }
//!     fn limits(&self, _context: &str) -> Result<String, String> {
//!         Ok("{}".to_owned())
//!     }
//!     fn check_call(&self, _call: &str) -> Result<String, String> {
//!         Ok(r#"{"allow":true}"#.to_owned())
//!     }
//! }
//!
//! export_plugin! { kind: policy, name: "allow-all", plugin: AllowAll }
//! ```

// `#[sabi_trait]` expands to impls that trip these two lints; the expansion is abi_stable's.
#![allow(non_local_definitions, clippy::unnecessary_cast)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod codegen;
mod descriptor;
mod error;
#[doc(hidden)]
pub mod export;
mod guard;
mod host;
mod module;
pub mod policy;
pub mod text;
pub mod transport;
#[cfg(feature = "wire")]
pub mod wire;

pub use abi_stable;
pub use descriptor::{
    DESCRIPTOR_MAGIC, DESCRIPTOR_SYMBOL, PLUGIN_API_VERSION, PluginKind, RawDescriptor,
};
pub use error::{ErrorKind, PluginError, Signal};
pub use host::{HostApi, HostApiRef, LogLevel, log};
pub use module::{PluginDescriptor, PluginInstance, PluginModule, PluginModuleRef};
