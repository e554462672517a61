//! What differs between operating systems, one module per concern, each with the same interface
//! on every OS; the rest of the crate is portable.
//!
//! - [`read`]: waiting for a pipe's next line within a timeout. Unix: poll(2) from `recv`
//!   itself, and the descriptor for the host's event loop. Windows: anonymous pipes cannot be
//!   polled, so a reader thread per pipe reads lines into a bounded channel, and there is no
//!   descriptor (the host reads the pump from a thread of its own).
//! - [`write`]: writing to a child's stdin without making `send` wait. Unix: the pipe is
//!   non-blocking and `send` writes what it takes at once. Windows: every message is queued for
//!   a writer thread (same 64 MiB bound, same per-request refusal).
//! - [`stdio`]: this process's own stdin and stdout for the listener. Unix: duplicates, and a
//!   poll(2) that tells whether stdout has room now. Windows: duplicated handles; stdout is
//!   always written by the helper thread (no way to ask a pipe or console whether it has room).
//! - [`program`]: finding the program a command names. Unix: `PATH`, as exec does. Windows:
//!   `PATH` with each `PATHEXT` extension, as cmd.exe does, so that `npx` finds `npx.cmd`.
//! - [`tree`]: a child and everything it starts, and stopping all of it. Unix: a process group
//!   (stdin closed, grace, SIGTERM, grace, SIGKILL); on Linux the child also gets SIGTERM when
//!   Runbyte dies (`PR_SET_PDEATHSIG`). Windows: a Job Object that kills the whole tree when it
//!   is closed, including when Runbyte dies (stdin closed, grace, `TerminateJobObject`: there is
//!   no polite signal to send a console program).

#[cfg_attr(unix, path = "unix/read.rs")]
#[cfg_attr(windows, path = "windows/read.rs")]
pub(crate) mod read;

#[cfg_attr(unix, path = "unix/write.rs")]
#[cfg_attr(windows, path = "windows/write.rs")]
pub(crate) mod write;

#[cfg_attr(unix, path = "unix/stdio.rs")]
#[cfg_attr(windows, path = "windows/stdio.rs")]
pub(crate) mod stdio;

#[cfg_attr(unix, path = "unix/program.rs")]
#[cfg_attr(windows, path = "windows/program.rs")]
pub(crate) mod program;

#[cfg_attr(unix, path = "unix/tree.rs")]
#[cfg_attr(windows, path = "windows/tree.rs")]
pub(crate) mod tree;
