//! Unix: the child leads a process group of its own, and stopping it stops the group: stdin
//! closed, then SIGTERM, then SIGKILL (npx and uvx start grandchildren).
//!
//! Linux: the child also asks for SIGTERM when Runbyte dies (`PR_SET_PDEATHSIG`). Other Unix
//! systems (macOS) have no such request: a Runbyte killed outright leaves its servers to their
//! stdin, whose end is then closed, so a server that exits on end of input (every MCP SDK's
//! stdio server does) goes; a grandchild that does not read it is orphaned and keeps running.

use std::{
    process::{Child, Command, ExitStatus},
    sync::Mutex,
    thread,
    time::{Duration, Instant},
};

use runbyte_plugin_api::{LogLevel, log};

use crate::child::{lock, wait_exit};

/// How long a group may take to vanish after SIGKILL (it cannot refuse; the kernel may still be
/// tearing down a large process) before the stop gives up with a warning.
const KILLED_WAIT: Duration = Duration::from_millis(500);

/// Sets up `command` before it is spawned: its own process group and, on Linux, SIGTERM when
/// the thread that spawns it ends.
pub(crate) fn prepare(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    // Its own process group, so that stopping it stops its children too.
    command.process_group(0);
    #[cfg(target_os = "linux")]
    {
        // SAFETY: the closure runs in the forked child before exec and calls only prctl(2),
        // which is async-signal-safe; it touches no memory of the parent.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

/// The process group a child leads.
pub(crate) struct Tree {
    pgid: Option<i32>,
}

impl Tree {
    /// Takes charge of the group `child` (just spawned, with [`prepare`]) leads.
    pub(crate) fn adopt(child: &Child, _name: &str) -> std::io::Result<Tree> {
        Ok(Tree {
            pgid: i32::try_from(child.id()).ok(),
        })
    }

    /// Ends the group: waits `grace` for the leader to exit (its stdin is closed), SIGTERM to
    /// the group, waits `grace` for the group to go, then SIGKILL and waits for that. The group
    /// is signalled even when the leader exited by itself: a grandchild keeps it.
    pub(crate) fn stop(&self, child: &Mutex<Child>, grace: Duration, name: &str) {
        let Some(pgid) = self.pgid else {
            return;
        };
        if !wait_exit(child, grace) {
            log(
                LogLevel::Debug,
                &format!("[{name}] still running after stdin closed; SIGTERM"),
            );
        }
        if wait_group_gone(child, pgid, Duration::ZERO) {
            return;
        }
        signal_group(pgid, libc::SIGTERM);
        if wait_group_gone(child, pgid, grace) {
            return;
        }
        log(
            LogLevel::Warn,
            &format!("[{name}] process group {pgid} ignored SIGTERM; SIGKILL"),
        );
        signal_group(pgid, libc::SIGKILL);
        if !wait_group_gone(child, pgid, KILLED_WAIT) {
            log(
                LogLevel::Warn,
                &format!(
                    "[{name}] process group {pgid} still has processes {} ms after SIGKILL",
                    KILLED_WAIT.as_millis()
                ),
            );
        }
    }

    /// Kills the group at once, without waiting (when no thread can be had to stop it).
    pub(crate) fn kill(&self, _child: &Mutex<Child>) {
        if let Some(pgid) = self.pgid {
            signal_group(pgid, libc::SIGKILL);
        }
    }

    /// What `status` says beyond an exit code: the signal that killed the child.
    pub(crate) fn describe(&self, status: ExitStatus) -> Option<String> {
        use std::os::unix::process::ExitStatusExt;
        status
            .signal()
            .map(|signal| format!("was killed by signal {signal}"))
    }
}

/// Waits up to `within` until no live process is left in group `pgid`. The leader is reaped on
/// the way: until it is, its zombie keeps the group (and its id) in existence.
fn wait_group_gone(child: &Mutex<Child>, pgid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let _ = lock(child).try_wait();
        if !group_alive(pgid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

fn signal_group(pgid: i32, signal: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals the process group the child leads (it was
    // started with process_group(0)); an absent group gives ESRCH, which we ignore.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// Whether group `pgid` still has a live process. A zombie does not count: it is dead, and it
/// is its reaper's (PID 1 or a subreaper for an orphaned grandchild), not ours, to collect.
fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks that the group exists and may be signalled; nothing is sent.
    let exists = unsafe { libc::kill(-pgid, 0) } == 0
        || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH);
    exists && live_member(pgid)
}

/// Whether a process that is not a zombie has process group `pgid`, from `/proc`.
#[cfg(target_os = "linux")]
fn live_member(pgid: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    let pgid = pgid.to_string();
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return false;
        };
        // After the command name in parentheses: state, ppid, pgrp, ...
        let mut fields = stat
            .rsplit(')')
            .next()
            .unwrap_or_default()
            .split_whitespace();
        let state = fields.next();
        let group = fields.nth(1);
        group == Some(pgid.as_str()) && state != Some("Z")
    })
}

/// Without `/proc`, a group that exists counts as live: a zombie grandchild (its reaper has not
/// collected it yet) makes the stop send one signal more than needed, never one less.
#[cfg(not(target_os = "linux"))]
fn live_member(_pgid: i32) -> bool {
    true
}
