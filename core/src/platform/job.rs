//! A child process's tree and lifetime, for the children Runbyte starts itself (sandbox workers,
//! isolated plugin hosts).
//!
//! - Windows: each child joins a Job Object of its own as soon as it is spawned, with
//!   `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`: the child and every process it starts afterwards die
//!   when the [`ChildJob`] is dropped, and when Runbyte dies in any way (the system closes its
//!   handles). A worker's job also carries its memory cap ([`ChildJob::cap_memory`]). A child
//!   that starts processes of its own before it joins (it has not read a message yet, so it
//!   does not) would leave those outside.
//! - Unix: nothing here. A worker and a plugin host exit when their stdin closes, which it does
//!   when Runbyte dies; a plugin's own children are that plugin's (transport-stdio puts a server
//!   in a process group with a parent-death signal). [`ChildJob::cap_memory`] does nothing: a
//!   worker caps itself ([`super::memory`]).

/// A child bound to its job; see the module's documentation. Dropping it kills the child and
/// its descendants on Windows.
pub(crate) struct ChildJob {
    /// `None` where the child could not join one (logged): it is then bound as on Unix.
    #[cfg(windows)]
    job: Option<imp::Job>,
}

impl ChildJob {
    /// Binds a child just spawned with tokio.
    pub(crate) fn of_tokio(child: &tokio::process::Child) -> Self {
        #[cfg(windows)]
        return Self::bind(child.raw_handle());
        #[cfg(not(windows))]
        {
            let _ = child;
            ChildJob {}
        }
    }

    /// Binds a child just spawned with `std`.
    pub(crate) fn of_std(child: &std::process::Child) -> Self {
        #[cfg(windows)]
        return Self::bind(Some(std::os::windows::io::AsRawHandle::as_raw_handle(
            child,
        )));
        #[cfg(not(windows))]
        {
            let _ = child;
            ChildJob {}
        }
    }

    #[cfg(windows)]
    fn bind(process: Option<std::os::windows::io::RawHandle>) -> Self {
        let job = process.map(imp::Job::new).transpose();
        let job = job.unwrap_or_else(|error| {
            tracing::debug!(%error, "a child process could not join a job of its own");
            None
        });
        ChildJob { job }
    }

    /// Caps a worker's memory at what it used at the first call plus `extra` bytes (and the
    /// room of [`super::memory::PHYSICAL_ROOM`]); each call replaces the previous cap. Windows
    /// only: elsewhere the worker caps itself.
    pub(crate) fn cap_memory(&self, extra: usize) {
        #[cfg(windows)]
        if let Some(job) = &self.job
            && let Err(error) = job.cap_memory(extra)
        {
            tracing::debug!(%error, "cannot cap a sandbox worker's memory");
        }
        #[cfg(not(windows))]
        let _ = extra;
    }
}

#[cfg(windows)]
mod imp {
    use std::{io, os::windows::io::RawHandle};

    use windows_sys::Win32::{
        Foundation::{CloseHandle, HANDLE},
        System::{
            JobObjects::{
                AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
                JOB_OBJECT_LIMIT_PROCESS_MEMORY, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
                JobObjectExtendedLimitInformation, SetInformationJobObject,
            },
            ProcessStatus::{K32GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS_EX},
        },
    };

    /// An owned job handle with the child in it.
    pub(super) struct Job {
        handle: HANDLE,
        process: RawHandle,
        /// The child's commit at the first cap (it is idle then, and has started).
        base: std::sync::OnceLock<usize>,
    }

    // SAFETY: both handles are kernel handles, usable from any thread; the process handle is
    // the child's, which outlives its job (the `Child` is dropped after it or with it).
    unsafe impl Send for Job {}
    // SAFETY: the calls made through a shared `Job` (SetInformationJobObject,
    // K32GetProcessMemoryInfo) are thread-safe.
    unsafe impl Sync for Job {}

    impl Job {
        pub(super) fn new(process: RawHandle) -> io::Result<Self> {
            // SAFETY: no security attributes and no name: a new anonymous job, or null.
            let handle = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
            if handle.is_null() {
                return Err(io::Error::last_os_error());
            }
            let job = Job {
                handle,
                process,
                base: std::sync::OnceLock::new(),
            };
            job.set(JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, 0)?;
            // SAFETY: both handles are valid: the job just created, the child's from its spawn.
            if unsafe { AssignProcessToJobObject(job.handle, process.cast()) } == 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(job)
        }

        pub(super) fn cap_memory(&self, extra: usize) -> io::Result<()> {
            let base = *self.base.get_or_init(|| commit(self.process).unwrap_or(0));
            let cap = base
                .saturating_add(extra)
                .saturating_add(crate::platform::memory::PHYSICAL_ROOM);
            self.set(
                JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_PROCESS_MEMORY,
                cap,
            )
        }

        fn set(&self, flags: u32, process_memory: usize) -> io::Result<()> {
            let mut limits = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
            limits.BasicLimitInformation.LimitFlags = flags;
            limits.ProcessMemoryLimit = process_memory;
            // SAFETY: a valid job handle, and a limits struct of the class and size given.
            let done = unsafe {
                SetInformationJobObject(
                    self.handle,
                    JobObjectExtendedLimitInformation,
                    (&raw const limits).cast(),
                    size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
                )
            };
            if done == 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }
    }

    #[cfg(test)]
    impl Job {
        /// The per-process memory limit the job holds, if one is set.
        pub(super) fn memory_cap(&self) -> Option<usize> {
            use windows_sys::Win32::System::JobObjects::QueryInformationJobObject;
            let mut limits = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
            // SAFETY: a valid job handle, and a limits struct of the class and size given.
            let done = unsafe {
                QueryInformationJobObject(
                    self.handle,
                    JobObjectExtendedLimitInformation,
                    (&raw mut limits).cast(),
                    size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
                    std::ptr::null_mut(),
                )
            };
            let set = limits.BasicLimitInformation.LimitFlags & JOB_OBJECT_LIMIT_PROCESS_MEMORY;
            (done != 0 && set != 0).then_some(limits.ProcessMemoryLimit)
        }
    }

    /// Whether this process runs under Wine, which keeps a job's memory limit without
    /// enforcing it.
    #[cfg(test)]
    pub(super) fn under_wine() -> bool {
        use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};
        let ntdll: Vec<u16> = "ntdll.dll\0".encode_utf16().collect();
        // SAFETY: a NUL-terminated module name; ntdll is loaded in every process.
        let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
        // SAFETY: a valid module handle and a NUL-terminated export name.
        !module.is_null()
            && unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) }.is_some()
    }

    impl Drop for Job {
        fn drop(&mut self) {
            // SAFETY: the job handle is owned here and closed once; closing it kills what is in
            // the job (KILL_ON_JOB_CLOSE).
            unsafe { CloseHandle(self.handle) };
        }
    }

    /// A process's commit (private bytes).
    fn commit(process: RawHandle) -> Option<usize> {
        let mut counters = PROCESS_MEMORY_COUNTERS_EX {
            cb: size_of::<PROCESS_MEMORY_COUNTERS_EX>() as u32,
            ..PROCESS_MEMORY_COUNTERS_EX::default()
        };
        // SAFETY: a valid process handle, and a counters struct of the size given.
        let done = unsafe {
            K32GetProcessMemoryInfo(process.cast(), (&raw mut counters).cast(), counters.cb)
        };
        (done != 0).then_some(counters.PrivateUsage)
    }
}

#[cfg(all(test, windows))]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::{
        process::{Child, Command, ExitStatus, Stdio},
        time::{Duration, Instant},
    };

    use super::ChildJob;

    /// Run as a child by the tests below.
    #[test]
    #[ignore = "a child of the job tests"]
    fn job_child_sleeps() {
        std::thread::sleep(Duration::from_secs(120));
    }

    /// Run as a child by the tests below: touches 2 GiB, 32 MiB at a time.
    #[test]
    #[ignore = "a child of the job tests"]
    fn job_child_allocates() {
        let mut held = Vec::new();
        for _ in 0..64 {
            held.push(vec![1u8; 32 << 20]);
        }
        std::thread::sleep(Duration::from_secs(120));
        assert_eq!(held.len(), 64);
    }

    /// This test binary running one of the children above.
    fn child(name: &str) -> Child {
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                &format!("platform::job::tests::{name}"),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    /// How `child` ended, within a minute.
    fn ended(child: &mut Child) -> Option<ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        None
    }

    #[test]
    fn dropping_a_childs_job_ends_the_child() {
        let mut child = child("job_child_sleeps");
        let job = ChildJob::of_std(&child);
        assert!(job.job.is_some(), "the child joined no job");
        std::thread::sleep(Duration::from_millis(300));
        assert!(child.try_wait().unwrap().is_none(), "the child ended early");
        drop(job);
        assert!(ended(&mut child).is_some(), "the child outlived its job");
    }

    #[test]
    fn a_child_past_its_memory_cap_is_stopped() {
        let mut child = child("job_child_allocates");
        let job = ChildJob::of_std(&child);
        let inner = job.job.as_ref().expect("the child joined no job");
        // The base is what the child has committed now, before its allocations.
        let set = inner.cap_memory(0);
        if super::imp::under_wine() {
            // Wine has Job Objects but no per-process memory limit: what it says is all to see.
            eprintln!(
                "under Wine: setting the cap: {set:?}; reading it back: {:?}",
                inner.memory_cap()
            );
            let _ = child.kill();
            return;
        }
        set.unwrap();
        let cap = inner.memory_cap().expect("the job holds no memory cap");
        assert!(cap >= crate::platform::memory::PHYSICAL_ROOM, "{cap}");
        let status = ended(&mut child).expect("the child was not stopped at its cap");
        assert!(!status.success(), "{status}");
        drop(job);
    }
}
