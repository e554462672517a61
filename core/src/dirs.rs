//! The user's own folders for what Runbyte keeps, by the XDG base-directory rules: plugins and
//! saved skills under the data folder, inferred result shapes under the state folder. A leaf.

use std::path::PathBuf;

/// Which XDG base folder.
#[derive(Debug, Clone, Copy)]
pub enum Base {
    /// `$XDG_DATA_HOME`, else `~/.local/share`.
    Data,
    /// `$XDG_STATE_HOME`, else `~/.local/state`.
    State,
}

/// `<base>/runbyte/<sub>`; `None` when neither the variable (absolute) nor `HOME` is set.
pub fn user_folder(base: Base, sub: &str) -> Option<PathBuf> {
    let (variable, fallback) = match base {
        Base::Data => ("XDG_DATA_HOME", ".local/share"),
        Base::State => ("XDG_STATE_HOME", ".local/state"),
    };
    let folder = std::env::var_os(variable)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(fallback)))?;
    Some(folder.join("runbyte").join(sub))
}
