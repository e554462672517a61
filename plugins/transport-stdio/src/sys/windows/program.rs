//! Windows: Rust's `Command` finds a bare name on `PATH` only as `name.exe`, while the commands
//! MCP configurations name are often batch files (`npx` is `npx.cmd`, as are most npm-installed
//! tools). A bare name is looked up as cmd.exe would: each `PATH` folder in turn, each extension
//! of `PATHEXT` in turn. What is not found there is left to `Command` (which also searches the
//! system folders, and names the program when it cannot find it). `Command` runs a `.cmd` or
//! `.bat` through cmd.exe with its arguments escaped for it (or refuses arguments it cannot
//! escape safely).

use std::{
    ffi::{OsStr, OsString},
    path::{Path, PathBuf},
};

/// cmd.exe's default `PATHEXT`.
const DEFAULT_PATHEXT: &str = ".COM;.EXE;.BAT;.CMD";

/// What to run for `command`, given the child's `PATH`.
pub(crate) fn resolve(command: &str, path: Option<&OsStr>) -> PathBuf {
    let bare = !command.contains(['/', '\\', ':']) && Path::new(command).extension().is_none();
    let (true, Some(path)) = (bare, path) else {
        return PathBuf::from(command);
    };
    let pathext = std::env::var("PATHEXT").unwrap_or_else(|_| DEFAULT_PATHEXT.to_owned());
    let extensions: Vec<&str> = pathext
        .split(';')
        .filter(|e| e.starts_with('.') && e.len() > 1)
        .collect();
    for folder in std::env::split_paths(path) {
        for extension in &extensions {
            let mut name = OsString::from(command);
            name.push(extension);
            let candidate = folder.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    PathBuf::from(command)
}
