//! The user's own folders for what Runbyte keeps, by the XDG base-directory rules: plugins and
//! saved skills under the data folder, inferred result shapes and credentials under the state
//! folder. On Windows, where neither the XDG variables nor `HOME` are usually set, both are
//! `%LOCALAPPDATA%\runbyte` (the subfolders differ), under the user's profile (its ACL admits
//! the user, SYSTEM and the administrators: what keeps the private files there private). A leaf.

use std::path::PathBuf;

/// Which XDG base folder.
#[derive(Debug, Clone, Copy)]
pub enum Base {
    /// `$XDG_DATA_HOME`, else `~/.local/share`.
    Data,
    /// `$XDG_STATE_HOME`, else `~/.local/state`.
    State,
}

/// `<base>/runbyte/<sub>`; `None` when neither the variable (absolute) nor `HOME` is set (nor,
/// on Windows, `LOCALAPPDATA`).
pub fn user_folder(base: Base, sub: &str) -> Option<PathBuf> {
    let (variable, fallback) = match base {
        Base::Data => ("XDG_DATA_HOME", ".local/share"),
        Base::State => ("XDG_STATE_HOME", ".local/state"),
    };
    let folder = std::env::var_os(variable)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(fallback)));
    #[cfg(windows)]
    let folder = folder.or_else(|| {
        std::env::var_os("LOCALAPPDATA")
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
    });
    Some(folder?.join("runbyte").join(sub))
}
