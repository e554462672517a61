//! Windows: the child runs in a Job Object of its own, which everything it starts joins, set to
//! kill every process in it when its last handle closes (`JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`):
//! so a Runbyte that dies, however it dies, takes its servers' trees with it (what
//! `PR_SET_PDEATHSIG` does on Linux). The child is created suspended and resumed only once it
//! is in the job, so nothing it starts can escape.
//!
//! Stopping: stdin closed, `grace` for the child to exit, then `TerminateJobObject` for whatever
//! is left. There is no SIGTERM step: Windows has no polite signal for a console program that
//! is not attached to our console.
//!
//! Fallback: when the job cannot be made or joined (a Windows older than 8 where Runbyte itself
//! runs in a job that forbids nesting), the server runs without one; stopping it then ends only
//! the child, and a Runbyte killed outright leaves it running until it sees its stdin close.

use std::{
    os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle},
    process::{Child, Command, ExitStatus},
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use runbyte_plugin_api::{LogLevel, log};
use windows_sys::Win32::{
    Foundation::{CloseHandle, INVALID_HANDLE_VALUE},
    System::{
        Diagnostics::ToolHelp::{
            CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
        },
        JobObjects::{
            AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
            JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
            JobObjectBasicAccountingInformation, JobObjectExtendedLimitInformation,
            QueryInformationJobObject, SetInformationJobObject, TerminateJobObject,
        },
        Threading::{CREATE_SUSPENDED, OpenThread, ResumeThread, THREAD_SUSPEND_RESUME},
    },
};

use crate::child::{lock, wait_exit};

/// How long the job may take to empty after `TerminateJobObject` before the stop gives up with
/// a warning.
const KILLED_WAIT: Duration = Duration::from_millis(500);

/// The exit code `TerminateJobObject` gives every process of the job.
const TERMINATED: u32 = 1;

/// Sets up `command` before it is spawned: created suspended, until [`Tree::adopt`] has put it
/// in its job and resumed it.
pub(crate) fn prepare(command: &mut Command) {
    use std::os::windows::process::CommandExt;
    command.creation_flags(CREATE_SUSPENDED);
}

/// The job a child and everything it starts run in.
pub(crate) struct Tree {
    job: Option<OwnedHandle>,
    /// The stop terminated the job: the exit code is ours, not the server's.
    terminated: AtomicBool,
}

impl Tree {
    /// Puts `child` (just spawned, suspended by [`prepare`]) in a new job and lets it run. An
    /// error means it could not be resumed: the caller kills it.
    pub(crate) fn adopt(child: &Child, name: &str) -> std::io::Result<Tree> {
        let job = new_job().and_then(|job| {
            // SAFETY: both handles are valid and owned by live values for the call.
            let joined =
                unsafe { AssignProcessToJobObject(job.as_raw_handle(), child.as_raw_handle()) };
            if joined == 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(job)
        });
        let job = match job {
            Ok(job) => Some(job),
            Err(error) => {
                log(
                    LogLevel::Warn,
                    &format!(
                        "[{name}] cannot run the server in a job object ({error}): stopping it \
                         will not stop what it starts"
                    ),
                );
                None
            }
        };
        resume(child.id())?;
        Ok(Tree {
            job,
            terminated: AtomicBool::new(false),
        })
    }

    /// Ends the tree: waits `grace` for the child to exit (its stdin is closed), then
    /// terminates whatever is left in the job (grandchildren included, even when the child
    /// exited by itself) and waits for that.
    pub(crate) fn stop(&self, child: &Mutex<Child>, grace: Duration, name: &str) {
        let exited = wait_exit(child, grace);
        let Some(job) = &self.job else {
            if !exited {
                let _ = lock(child).kill();
            }
            return;
        };
        if active_processes(job) == Some(0) {
            return;
        }
        log(
            LogLevel::Debug,
            &format!("[{name}] still running after stdin closed; terminating its job"),
        );
        self.terminate(job);
        let deadline = Instant::now() + KILLED_WAIT;
        while active_processes(job).is_some_and(|n| n > 0) {
            if Instant::now() >= deadline {
                log(
                    LogLevel::Warn,
                    &format!(
                        "[{name}] its job still has processes {} ms after it was terminated",
                        KILLED_WAIT.as_millis()
                    ),
                );
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = lock(child).try_wait();
    }

    /// Ends the tree at once, without waiting (when no thread can be had to stop it).
    pub(crate) fn kill(&self, child: &Mutex<Child>) {
        match &self.job {
            Some(job) => self.terminate(job),
            None => {
                let _ = lock(child).kill();
            }
        }
    }

    fn terminate(&self, job: &OwnedHandle) {
        self.terminated.store(true, Ordering::SeqCst);
        // SAFETY: a valid job handle owned by `self`.
        unsafe { TerminateJobObject(job.as_raw_handle(), TERMINATED) };
    }

    /// What `status` says beyond an exit code: that the stop terminated the server.
    pub(crate) fn describe(&self, status: ExitStatus) -> Option<String> {
        (self.terminated.load(Ordering::SeqCst) && status.code() == Some(TERMINATED as i32))
            .then(|| "was terminated (with everything it started)".to_owned())
    }
}

/// A job that kills its processes when its last handle closes.
fn new_job() -> std::io::Result<OwnedHandle> {
    // SAFETY: no security attributes and no name; the result is checked before use.
    let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
    if raw.is_null() {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new handle that nothing else owns.
    let job = unsafe { OwnedHandle::from_raw_handle(raw) };
    let mut limits = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
    limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
    // SAFETY: `limits` is the structure this information class takes, with its size.
    let set = unsafe {
        SetInformationJobObject(
            job.as_raw_handle(),
            JobObjectExtendedLimitInformation,
            std::ptr::from_ref(&limits).cast(),
            size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
        )
    };
    if set == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(job)
}

/// How many processes are alive in `job`; `None` when that cannot be read.
fn active_processes(job: &OwnedHandle) -> Option<u32> {
    let mut info = JOBOBJECT_BASIC_ACCOUNTING_INFORMATION::default();
    // SAFETY: `info` is the structure this information class fills, with its size.
    let read = unsafe {
        QueryInformationJobObject(
            job.as_raw_handle(),
            JobObjectBasicAccountingInformation,
            std::ptr::from_mut(&mut info).cast(),
            size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
            std::ptr::null_mut(),
        )
    };
    (read != 0).then_some(info.ActiveProcesses)
}

/// Resumes the threads of process `pid` (a process created suspended has one).
fn resume(pid: u32) -> std::io::Result<()> {
    // SAFETY: takes no pointers; the result is checked before use.
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if raw == INVALID_HANDLE_VALUE {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new handle that nothing else owns.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(raw) };
    let mut entry = THREADENTRY32 {
        dwSize: size_of::<THREADENTRY32>() as u32,
        ..THREADENTRY32::default()
    };
    let mut resumed = 0;
    // SAFETY: a valid snapshot handle and an entry whose size field is set.
    let mut more = unsafe { Thread32First(snapshot.as_raw_handle(), &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: takes no pointers; the handle is checked, used once and closed.
            unsafe {
                let thread = OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID);
                if !thread.is_null() {
                    if ResumeThread(thread) != u32::MAX {
                        resumed += 1;
                    }
                    CloseHandle(thread);
                }
            }
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snapshot.as_raw_handle(), &mut entry) } != 0;
    }
    if resumed == 0 {
        return Err(std::io::Error::other(format!(
            "cannot resume process {pid}: no thread of it was found"
        )));
    }
    Ok(())
}
