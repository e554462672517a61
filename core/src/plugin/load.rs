//! Opening one plugin file: the descriptor first (plain `dlsym`), then abi_stable's root module.

use std::{
    collections::HashMap,
    ffi::CStr,
    path::{Path, PathBuf},
    sync::{Mutex, OnceLock},
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

/// Reads a plugin file's descriptor. The file is opened once and checked through that
/// descriptor (see [`open_trusted`]); the library loaded is that open file, never the path
/// looked up again. The library stays loaded (plugins live as long as the process).
pub fn read_descriptor(path: &Path) -> Result<PluginInfo, PluginError> {
    let load_path = open_trusted(path)?;
    // SAFETY: loading a library runs its constructors. Only files named by the operator's
    // configuration or found in its plugin folders get here (plugins are trusted code:
    // docs/architecture.md, the plugin boundary), and files others could have written were
    // refused above.
    let library =
        unsafe { libloading::Library::new(&load_path) }.map_err(|e| PluginError::NotALibrary {
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

/// The files [`open_trusted`] opened and checked: for each file (device, inode), the path the
/// loader uses; for each path asked for, the file it was when checked last.
#[derive(Default)]
struct Opened {
    files: HashMap<(u64, u64), PathBuf>,
    paths: HashMap<PathBuf, (u64, u64)>,
}

fn opened() -> std::sync::MutexGuard<'static, Opened> {
    static OPENED: OnceLock<Mutex<Opened>> = OnceLock::new();
    OPENED
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Opens a plugin file once, refuses it unless only its owner (root or the user running
/// Runbyte) can change it, and returns the path the loader must use: on Linux
/// `/proc/self/fd/<n>` of the descriptor that was checked, kept open for the life of the
/// process, so that a file swapped in at `path` after the check is never the one loaded.
///
/// Refused as untrusted: a file or its folder (the folder of `path` and,
/// through a symlink, the file's real folder) writable by everyone, or by a group other than
/// the owner's private group (group id = owner's user id, what umask 002 systems create); a
/// file or folder owned by a user other than root and the effective user.
pub(crate) fn open_trusted(path: &Path) -> Result<PathBuf, PluginError> {
    let file = std::fs::File::open(path).map_err(|_| PluginError::Missing {
        path: path.to_owned(),
    })?;
    let metadata = file.metadata().map_err(|_| PluginError::Missing {
        path: path.to_owned(),
    })?;
    let untrusted = |reason: String| PluginError::Untrusted {
        path: path.to_owned(),
        reason,
    };
    if !metadata.is_file() {
        return Err(PluginError::NotALibrary {
            path: path.to_owned(),
            reason: "not a regular file".to_owned(),
        });
    }
    check_owner_and_mode(&metadata, "the file").map_err(untrusted)?;
    let mut folders: Vec<PathBuf> = path.parent().map(Path::to_owned).into_iter().collect();
    if let Some(real) = real_path(&file, path).as_deref().and_then(Path::parent)
        && !folders.iter().any(|f| same_file(f, real))
    {
        folders.push(real.to_owned());
    }
    for folder in folders {
        let folder = if folder.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            folder
        };
        let Ok(dir) = std::fs::metadata(&folder) else {
            continue;
        };
        check_owner_and_mode(&dir, &format!("its folder {}", folder.display()))
            .map_err(untrusted)?;
    }
    Ok(keep_open(path, file, &metadata))
}

/// The path the checked file is loaded from. Linux: the open descriptor itself. A file checked
/// before (under this path or another) keeps its first descriptor, so that one descriptor stays
/// open per library, not per check, and dlopen finds the library already loaded by that name.
#[cfg(target_os = "linux")]
fn keep_open(path: &Path, file: std::fs::File, metadata: &std::fs::Metadata) -> PathBuf {
    use std::os::{fd::IntoRawFd, unix::fs::MetadataExt};
    let identity = (metadata.dev(), metadata.ino());
    let mut opened = opened();
    opened.paths.insert(path.to_owned(), identity);
    // The descriptor stays open for the life of the process: the library is never unloaded,
    // and its `/proc/self/fd` name must keep meaning this file.
    opened
        .files
        .entry(identity)
        .or_insert_with(|| PathBuf::from(format!("/proc/self/fd/{}", file.into_raw_fd())))
        .clone()
}

#[cfg(not(target_os = "linux"))]
fn keep_open(path: &Path, _file: std::fs::File, _metadata: &std::fs::Metadata) -> PathBuf {
    // No descriptor path to load from: the check and the load each look the path up.
    path.to_owned()
}

/// The path [`read_descriptor`] loaded `path` from, checking it now if it never was.
fn load_path(path: &Path) -> Result<PathBuf, PluginError> {
    {
        let opened = opened();
        if let Some(load_path) = opened.paths.get(path).and_then(|id| opened.files.get(id)) {
            return Ok(load_path.clone());
        }
    }
    open_trusted(path)
}

/// Where the open file really is (through symlinks), when the system can say.
fn real_path(file: &std::fs::File, path: &Path) -> Option<PathBuf> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let _ = path;
        std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = file;
        path.canonicalize().ok()
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Why `what` (the file, or its folder) could be changed by someone other than its owner, or
/// is owned by someone Runbyte should not trust.
#[cfg(unix)]
fn check_owner_and_mode(metadata: &std::fs::Metadata, what: &str) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let mode = metadata.mode() & 0o7777;
    if mode & 0o002 != 0 {
        return Err(format!(
            "{what} is writable by everyone (mode {mode:04o}); `chmod o-w` it"
        ));
    }
    if mode & 0o020 != 0 && metadata.gid() != metadata.uid() {
        return Err(format!(
            "{what} is writable by group {} (mode {mode:04o}); `chmod g-w` it",
            metadata.gid()
        ));
    }
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    let me = unsafe { libc::geteuid() };
    if metadata.uid() != 0 && metadata.uid() != me {
        return Err(format!(
            "{what} is owned by user {}, neither root nor the user running Runbyte ({me})",
            metadata.uid()
        ));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_owner_and_mode(_: &std::fs::Metadata, _: &str) -> Result<(), String> {
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
    let header =
        lib_header_from_path(&load_path(&info.path)?).map_err(|e| abi(library_error(&e)))?;
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
