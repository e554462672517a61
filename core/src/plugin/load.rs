//! Opening one plugin file: the descriptor first (plain `dlsym`), then abi_stable's root module.

use std::{
    ffi::CStr,
    path::{Path, PathBuf},
    sync::OnceLock,
};

use abi_stable::{
    library::{LibraryError, lib_header_from_path},
    prefix_type::PrefixTypeTrait,
    std_types::{RResult, RStr},
};
use runbyte_plugin_api::{
    DESCRIPTOR_MAGIC, DESCRIPTOR_SYMBOL, ErrorKind, HostApi, HostApiRef, LogLevel,
    PLUGIN_API_VERSION, PluginInstance, PluginKind, PluginModuleRef, RawDescriptor,
};

use super::PluginError;

/// What a plugin file says it is, read before anything in it is trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginInfo {
    /// The plugin's name.
    pub name: String,
    /// What it provides; `None` when the descriptor names a kind this Runbyte does not know.
    pub kind: Option<PluginKind>,
    /// The raw kind number, for reporting an unknown kind.
    pub raw_kind: u32,
    /// The plugin's own version.
    pub version: String,
    /// The plugin API version it was built against.
    pub api_version: u32,
    /// The library file.
    pub path: PathBuf,
}

impl PluginInfo {
    fn kind_name(&self) -> String {
        self.kind.map_or_else(
            || format!("unknown-kind-{}", self.raw_kind),
            |k| k.to_string(),
        )
    }
}

/// Reads a plugin file's descriptor. The library stays loaded (plugins live as long as the
/// process).
pub fn read_descriptor(path: &Path) -> Result<PluginInfo, PluginError> {
    let metadata = std::fs::metadata(path).map_err(|_| PluginError::Missing {
        path: path.to_owned(),
    })?;
    refuse_world_writable(path, &metadata)?;
    // SAFETY: loading a library runs its constructors. Only files named by the operator's
    // configuration or found in its plugin folders get here (DESIGN.md §3: plugins are
    // trusted code), and world-writable files were refused above.
    let library =
        unsafe { libloading::Library::new(path) }.map_err(|e| PluginError::NotALibrary {
            path: path.to_owned(),
            reason: short_dl_error(&e.to_string()),
        })?;
    let symbol = format!("{DESCRIPTOR_SYMBOL}\0");
    // SAFETY: the symbol, when present, is the `RawDescriptor` static that `export_plugin!`
    // writes; its C layout is fixed for every API version. We read it through a pointer.
    let descriptor: *const RawDescriptor = unsafe {
        match library.get::<*const RawDescriptor>(symbol.as_bytes()) {
            Ok(symbol) => *symbol,
            Err(_) => {
                return Err(PluginError::NotAPlugin {
                    path: path.to_owned(),
                });
            }
        }
    };
    // SAFETY: non-null (dlsym found it) and points at a `RawDescriptor` static.
    let descriptor = unsafe { &*descriptor };
    if descriptor.magic != DESCRIPTOR_MAGIC
        || descriptor.name.is_null()
        || descriptor.version.is_null()
    {
        return Err(PluginError::NotAPlugin {
            path: path.to_owned(),
        });
    }
    // SAFETY: `RawDescriptor::new` guarantees NUL-terminated `'static` strings.
    let (name, version) = unsafe {
        (
            CStr::from_ptr(descriptor.name)
                .to_string_lossy()
                .into_owned(),
            CStr::from_ptr(descriptor.version)
                .to_string_lossy()
                .into_owned(),
        )
    };
    let info = PluginInfo {
        name,
        kind: PluginKind::from_raw(descriptor.kind),
        raw_kind: descriptor.kind,
        version,
        api_version: descriptor.api_version,
        path: path.to_owned(),
    };
    // Plugins are never unloaded: a library's code may still run on threads it started, and
    // abi_stable keeps references into it.
    std::mem::forget(library);
    Ok(info)
}

#[cfg(unix)]
fn refuse_world_writable(path: &Path, metadata: &std::fs::Metadata) -> Result<(), PluginError> {
    use std::os::unix::fs::PermissionsExt;
    if metadata.permissions().mode() & 0o002 != 0 {
        return Err(PluginError::WorldWritable {
            path: path.to_owned(),
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn refuse_world_writable(_: &Path, _: &std::fs::Metadata) -> Result<(), PluginError> {
    Ok(())
}

/// dlopen's message repeats the path; keep what follows it.
fn short_dl_error(message: &str) -> String {
    message
        .rsplit(": ")
        .next()
        .unwrap_or(message)
        .trim()
        .to_owned()
}

/// Checks the descriptor against what the configuration expects, loads the root module and opens
/// the plugin with its configuration table.
pub fn open(
    info: &PluginInfo,
    expected: PluginKind,
    config: &serde_json::Value,
) -> Result<PluginInstance, PluginError> {
    let name = info.name.clone();
    let path = info.path.clone();
    if info.api_version != PLUGIN_API_VERSION {
        return Err(PluginError::IncompatibleVersion {
            name,
            path,
            found: info.api_version,
            expected: PLUGIN_API_VERSION,
        });
    }
    if info.kind != Some(expected) {
        return Err(PluginError::WrongKind {
            name,
            path,
            found: info.kind_name(),
            expected,
        });
    }
    let abi = |detail: String| PluginError::IncompatibleAbi {
        name: info.name.clone(),
        path: info.path.clone(),
        detail,
    };
    let header = lib_header_from_path(&info.path).map_err(|e| abi(library_error(&e)))?;
    let module = header
        .init_root_module::<PluginModuleRef>()
        .map_err(|e| match e {
            LibraryError::RootModule { .. } => PluginError::Panicked {
                name: info.name.clone(),
                path: info.path.clone(),
                message: library_error(&e),
            },
            other => abi(library_error(&other)),
        })?;
    let descriptor = (module.descriptor())();
    if descriptor.name.as_str() != info.name || descriptor.kind != expected {
        return Err(abi(format!(
            "its root module says it is {} plugin `{}`, its descriptor {} plugin `{}`",
            descriptor.kind,
            descriptor.name,
            info.kind_name(),
            info.name
        )));
    }
    let config = config.to_string();
    match (module.open())(RStr::from(config.as_str()), host_api()) {
        RResult::ROk(instance) if instance.kind() == expected => Ok(instance),
        RResult::ROk(instance) => Err(PluginError::WrongKind {
            name,
            path,
            found: instance.kind().to_string(),
            expected,
        }),
        RResult::RErr(error) => {
            let message = error.message.into_string();
            Err(match error.kind {
                ErrorKind::Panicked => PluginError::Panicked {
                    name,
                    path,
                    message,
                },
                ErrorKind::Failed => PluginError::Failed {
                    name,
                    path,
                    message,
                },
            })
        }
    }
}

fn library_error(error: &LibraryError) -> String {
    // abi_stable's layout diffs are long; the first lines say what differs.
    let text = error.to_string();
    let mut lines: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(8)
        .collect();
    if text.lines().count() > 8 {
        lines.push("...");
    }
    lines.join(" ")
}

/// The callbacks every plugin gets; created once.
fn host_api() -> HostApiRef {
    static API: OnceLock<HostApiRef> = OnceLock::new();
    *API.get_or_init(|| HostApi { log: plugin_log }.leak_into_prefix())
}

extern "C" fn plugin_log(level: LogLevel, plugin: RStr<'_>, message: RStr<'_>) {
    // A panic must not unwind out of an `extern "C"` function; logging should never panic, but
    // a subscriber is arbitrary code.
    let _ = std::panic::catch_unwind(|| {
        let (plugin, message) = (plugin.as_str(), message.as_str());
        match level {
            LogLevel::Error => tracing::error!(target: "runbyte::plugin", plugin, "{message}"),
            LogLevel::Warn => tracing::warn!(target: "runbyte::plugin", plugin, "{message}"),
            LogLevel::Info => tracing::info!(target: "runbyte::plugin", plugin, "{message}"),
            LogLevel::Debug => tracing::debug!(target: "runbyte::plugin", plugin, "{message}"),
            LogLevel::Trace => tracing::trace!(target: "runbyte::plugin", plugin, "{message}"),
        }
    });
}
