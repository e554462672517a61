use abi_stable::{StableAbi, std_types::RString};

/// How a plugin call failed.
#[repr(u8)]
#[derive(StableAbi, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The plugin returned an error of its own (bad configuration, a refused connection, ...).
    Failed,
    /// The plugin panicked; the panic was caught at the boundary and the call failed.
    Panicked,
}

/// An error that crosses the ABI: a kind and a message that already names the plugin.
#[repr(C)]
#[derive(StableAbi, Debug, Clone, PartialEq, Eq)]
pub struct PluginError {
    /// Whether the plugin reported the error or panicked.
    pub kind: ErrorKind,
    /// What went wrong, in words for an operator.
    pub message: RString,
}

impl PluginError {
    /// An error the plugin reports itself.
    pub fn failed(message: impl Into<String>) -> Self {
        PluginError {
            kind: ErrorKind::Failed,
            message: RString::from(message.into()),
        }
    }

    /// A caught panic.
    pub fn panicked(message: impl Into<String>) -> Self {
        PluginError {
            kind: ErrorKind::Panicked,
            message: RString::from(message.into()),
        }
    }
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for PluginError {}
