//! The `runbyte` binary, for the child processes Runbyte starts of itself (sandbox workers,
//! isolated plugins). A leaf: every room that starts such a process reaches down to it.

use std::path::PathBuf;

/// `RUNBYTE_EXE` when set (tests that embed the library set it), else this process's own
/// executable.
pub fn runbyte_exe() -> PathBuf {
    std::env::var_os("RUNBYTE_EXE")
        .map(PathBuf::from)
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("runbyte"))
}
