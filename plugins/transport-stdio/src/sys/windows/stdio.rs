//! Windows: duplicated handles of this process's stdin and stdout. Neither a pipe nor a console
//! can be asked whether a write would block, so stdout is always written by the helper thread.

use std::{fs::File, os::windows::io::AsHandle};

/// A handle of its own for this process's stdin, closed with the `File`; stdin stays open.
pub(crate) fn stdin() -> Result<File, String> {
    let handle = std::io::stdin().as_handle().try_clone_to_owned();
    handle
        .map(File::from)
        .map_err(|e| format!("cannot use stdin: {e}"))
}

/// The same for stdout.
pub(crate) fn stdout() -> Result<File, String> {
    let handle = std::io::stdout().as_handle().try_clone_to_owned();
    handle
        .map(File::from)
        .map_err(|e| format!("cannot use stdout: {e}"))
}

/// Never known: every answer goes through the helper thread.
pub(crate) fn writable_now(_out: &File) -> bool {
    false
}
