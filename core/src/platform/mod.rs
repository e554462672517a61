//! What differs by operating system, one module per concern, each with an implementation per OS
//! or a fallback said in its documentation. The rest of the crate calls these and tests no `cfg`
//! of its own for them.
//!
//! | concern | Linux | macOS | Windows |
//! |---|---|---|---|
//! | a worker's pipes ([`pipes`]) | `poll(2)` on stdin and a non-blocking stdout | the same | a thread reads stdin into a channel; stdout blocks |
//! | a worker's memory ([`memory`]) | `RLIMIT_AS`, set by the worker | a watchdog thread on the worker's footprint (`proc_pid_rusage`), which exits past the cap | a Job Object's per-process commit limit, set by the host ([`job`]) |
//! | a child's lifetime ([`job`]) | the child exits when its stdin closes | the same | the same, and a Job Object (`KILL_ON_JOB_CLOSE`) kills the child and its descendants when the host drops it or dies |
//!
//! Elsewhere in the crate, with their fallbacks in place: private file modes (`config/private.rs`,
//! `audit.rs`, `auth/store.rs`), `flock` of the credentials file, the plugin trust check and the
//! `/proc/self/fd` load of a checked plugin (`plugin/load.rs`), a skill file's change stamp
//! (`skills.rs`), and the termination signals (`cli.rs`).

pub(crate) mod job;
pub(crate) mod memory;
pub(crate) mod pipes;
