use std::ffi::c_char;

use abi_stable::StableAbi;

/// The version of the plugin ABI this crate defines.
///
/// A plugin records the version it was built against in its descriptor; the host refuses a
/// plugin whose version differs from its own and names both. The number changes only when the
/// ABI changes incompatibly; appended entry points keep it.
pub const PLUGIN_API_VERSION: u32 = 1;

/// The exported symbol that holds a plugin's [`RawDescriptor`].
///
/// The host reads it with a plain `dlsym` before it trusts anything else in the library, so that
/// a library that is not a Runbyte plugin, or one built for another API version, is refused by
/// name rather than by an opaque layout error.
pub const DESCRIPTOR_SYMBOL: &str = "RUNBYTE_PLUGIN_DESCRIPTOR";

/// The first eight bytes of every [`RawDescriptor`].
pub const DESCRIPTOR_MAGIC: [u8; 8] = *b"RUNBYTE\0";

/// What a plugin provides. A plugin is exactly one kind.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PluginKind {
    /// Connectors to downstream MCP servers and/or listeners for upstream MCP clients.
    Transport = 1,
    /// A codegen dialect: the source files the virtual filesystem shows for a server's tools.
    Codegen = 2,
    /// A sandbox policy: execution limits and a verdict on each tool call.
    Policy = 3,
}

impl PluginKind {
    /// The kind's name as written in `runbyte.toml` and in file names (`transport`, `codegen`,
    /// `policy`).
    pub const fn as_str(self) -> &'static str {
        match self {
            PluginKind::Transport => "transport",
            PluginKind::Codegen => "codegen",
            PluginKind::Policy => "policy",
        }
    }

    /// The kind for a raw descriptor value, or `None` for a value this API does not know.
    pub const fn from_raw(raw: u32) -> Option<PluginKind> {
        match raw {
            1 => Some(PluginKind::Transport),
            2 => Some(PluginKind::Codegen),
            3 => Some(PluginKind::Policy),
            _ => None,
        }
    }
}

impl std::fmt::Display for PluginKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The C-layout descriptor every plugin exports as [`DESCRIPTOR_SYMBOL`].
///
/// Its layout never changes, whatever the API version: the host can always read it, and so can
/// always say which plugin and which version it is refusing. [`export_plugin!`] writes it; a
/// plugin writes one by hand only to test the host's refusal.
///
/// [`export_plugin!`]: crate::export_plugin
#[repr(C)]
#[derive(Debug)]
pub struct RawDescriptor {
    /// Always [`DESCRIPTOR_MAGIC`].
    pub magic: [u8; 8],
    /// The [`PLUGIN_API_VERSION`] the plugin was built against.
    pub api_version: u32,
    /// A [`PluginKind`] as `u32`.
    pub kind: u32,
    /// The plugin's name, NUL-terminated UTF-8, `'static`.
    pub name: *const c_char,
    /// The plugin's own version, NUL-terminated UTF-8, `'static`.
    pub version: *const c_char,
}

// SAFETY: the pointers refer to immutable, NUL-terminated `'static` strings.
unsafe impl Sync for RawDescriptor {}

impl RawDescriptor {
    /// A descriptor for the current API version. `name` and `version` must end in `"\0"`.
    ///
    /// # Panics
    /// At compile time (it is used in a `static`) when either string lacks its trailing NUL.
    pub const fn new(kind: PluginKind, name: &'static str, version: &'static str) -> Self {
        Self::with_api_version(PLUGIN_API_VERSION, kind as u32, name, version)
    }

    /// A descriptor claiming any API version and kind; for tests of the host's refusals.
    ///
    /// # Panics
    /// At compile time when either string lacks its trailing NUL.
    pub const fn with_api_version(
        api_version: u32,
        kind: u32,
        name: &'static str,
        version: &'static str,
    ) -> Self {
        assert!(ends_with_nul(name), "a plugin name must end in \\0");
        assert!(ends_with_nul(version), "a plugin version must end in \\0");
        RawDescriptor {
            magic: DESCRIPTOR_MAGIC,
            api_version,
            kind,
            name: name.as_ptr().cast(),
            version: version.as_ptr().cast(),
        }
    }
}

const fn ends_with_nul(text: &str) -> bool {
    let bytes = text.as_bytes();
    !bytes.is_empty() && bytes[bytes.len() - 1] == 0
}
