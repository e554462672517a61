//! Unix: duplicates of this process's stdin and stdout, and whether stdout has room now.

use std::{
    fs::File,
    os::fd::{AsRawFd, FromRawFd},
};

/// A descriptor of its own for this process's stdin, closed with the `File`; stdin stays open.
pub(crate) fn stdin() -> Result<File, String> {
    duplicate(libc::STDIN_FILENO, "stdin")
}

/// The same for stdout.
pub(crate) fn stdout() -> Result<File, String> {
    duplicate(libc::STDOUT_FILENO, "stdout")
}

fn duplicate(fd: i32, name: &str) -> Result<File, String> {
    // SAFETY: dup(2) of a standard descriptor; the new one is owned by the `File` below.
    let copy = unsafe { libc::dup(fd) };
    if copy < 0 {
        return Err(format!(
            "cannot use {name}: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `copy` was just opened above and nothing else owns it.
    Ok(unsafe { File::from_raw_fd(copy) })
}

/// Whether `out` has room for a write of `PIPE_BUF` bytes now (a pipe that polls writable has
/// a free page).
pub(crate) fn writable_now(out: &File) -> bool {
    let mut poll = libc::pollfd {
        fd: out.as_raw_fd(),
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd for a descriptor the caller owns, for the call only.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready == 1 && poll.revents & libc::POLLOUT != 0 && poll.revents & libc::POLLERR == 0
}
