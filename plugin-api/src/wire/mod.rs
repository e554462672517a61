//! The JSON that crosses the ABI, as serde types (feature `wire`).
//!
//! The ABI itself carries text: a plugin receives `&str` and answers `String`, and may read and
//! write that text however it likes. These types are the same shapes, declared once, for the
//! host, the bundled plugins and any plugin that would rather not spell keys by hand:
//!
//! | call | the host sends | the plugin answers |
//! |---|---|---|
//! | [`Codegen::generate`](crate::codegen::Codegen::generate) | [`CodegenRequest`] | [`CodegenResponse`] |
//! | [`Policy::limits`](crate::policy::Policy::limits) | [`LimitsContext`] | [`Limits`] |
//! | [`Policy::check_call`](crate::policy::Policy::check_call) | [`Call`] | [`Verdict`] |
//! | [`Transport::listen`](crate::transport::Transport::listen) | [`ListenerOptions`] | |
//!
//! Reading is tolerant where the host's text may grow or a plugin's answer may be older or
//! newer than the host: unknown keys are ignored, and keys the host always sends default when
//! absent (so that a test may send only what it needs). None of these types is part of the
//! `StableAbi` surface: changing them never changes the ABI, only the text.
//!
//! ```ignore
//! use runbyte_plugin_api::wire::{Call, Verdict};
//!
//! fn check_call(call: &str) -> Result<String, String> {
//!     let call: Call = serde_json::from_str(call).map_err(|e| format!("bad call: {e}"))?;
//!     let verdict = if call.tool.starts_with("delete") {
//!         Verdict::deny(format!("`{}` deletes", call.tool))
//!     } else {
//!         Verdict::allow()
//!     };
//!     Ok(verdict.to_json())
//! }
//! ```

mod codegen;
mod limits;
mod listener;
mod policy;

pub use codegen::{
    CodegenRequest, CodegenResponse, DEFAULT_EXTENSION, File, RootRequest, ServerRef,
    ServerRequest, ToolEntry,
};
pub use limits::{Isolation, JudgedCalls, Limits, OutOfRange, RANGES, Range};
pub use listener::ListenerOptions;
pub use policy::{Call, CallContext, LimitsContext, PinState, Verdict};

#[cfg(test)]
mod tests;
