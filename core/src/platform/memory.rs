//! A sandbox worker's memory beyond QuickJS's own limit. QuickJS's allocator limit
//! (`JS_SetMemoryLimit`, the execution's `memory_bytes`) is the first bound on every OS; what it
//! does not count (SWC transpiling a large source, the module cache, the engine's native stack,
//! allocator slack) is bounded per OS, at the worker's figure when it started plus what its
//! execution may use ([`cap_self`]'s `extra`):
//!
//! - Linux: `RLIMIT_AS`, set by the worker on itself (the soft limit only, so that the next
//!   run may set another). Address space, not resident memory: it counts stacks and allocator
//!   arenas as reserved, hence [`ADDRESS_SPACE_ROOM`]. Past it an allocation fails and the
//!   worker dies.
//! - macOS, which does not enforce `RLIMIT_AS`: a watchdog thread in the worker reads its
//!   physical footprint (`proc_pid_rusage`'s `ri_phys_footprint`, the figure the kernel's
//!   memory pressure handling uses) every [`WATCH_EVERY`] and exits with [`CAP_EXIT_CODE`] past
//!   the cap. The bound is as late as one interval's allocations: a worker may pass its cap by
//!   what it allocates in 20 ms before it is stopped.
//! - Windows: a Job Object's per-process commit limit (`JOB_OBJECT_LIMIT_PROCESS_MEMORY`), set by
//!   the host on the worker's job ([`super::job::ChildJob::cap_memory`]), because only the
//!   job's holder can set it; [`cap_self`] does nothing there. Past it an allocation fails and
//!   the worker dies, as on Linux.
//! - Elsewhere: nothing; the deadline still bounds the worker, and QuickJS's limit its heap.
//!
//! Best effort everywhere: where a figure cannot be read or a limit set, the deadline still
//! bounds the worker.

/// Bounds the allocator to one arena per core (glibc, Linux), before the gateway starts its
/// threads. By default glibc gives each thread that allocates while another does an arena of
/// its own, up to eight per core; the gateway's async and blocking threads leave most of them
/// part-empty: with 5,000 tools listed, about a sixth of its resident memory. Elsewhere (and
/// in sandbox workers, whose address space is capped with room for their arenas) nothing.
pub fn one_arena_per_core() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let arenas = libc::c_int::try_from(cores.clamp(1, 64)).unwrap_or(2);
        // SAFETY: mallopt sets one allocator parameter; M_ARENA_MAX takes any positive count.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, arenas) };
    }
}

/// Gives the allocator's free pages back to the OS (glibc, Linux): after a large structure
/// built once (a catalogue's modules, the tokenizer's tables) its temporaries leave free pages
/// inside the heap that glibc keeps resident. Elsewhere nothing: other allocators return them.
pub fn give_back_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory; 0 keeps no padding at the heap's top.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Room above the worker's start and its execution's figures where the cap counts reserved
/// address space (Linux): threads reserve their stacks and a malloc arena each (64 MiB) up front.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) const ADDRESS_SPACE_ROOM: usize = 512 << 20;

/// Room above the worker's start and its execution's figures where the cap counts memory in use
/// (macOS's footprint, Windows's commit): touched stacks, allocator slack, thread bookkeeping.
#[cfg_attr(not(any(target_os = "macos", windows)), allow(dead_code))]
pub(crate) const PHYSICAL_ROOM: usize = 256 << 20;

/// How often the macOS watchdog reads the worker's footprint.
#[cfg_attr(not(target_os = "macos"), allow(dead_code))]
pub(crate) const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// The exit code of a worker stopped by its watchdog (macOS), which the host reports as the
/// worker's memory cap.
pub(crate) const CAP_EXIT_CODE: i32 = 88;

/// Bounds this process (a worker) to what it used when first called plus `extra` bytes (and the
/// OS's room); each call replaces the previous bound. See the module's documentation per OS.
pub(crate) fn cap_self(extra: usize) {
    imp::cap_self(extra);
}

#[cfg(target_os = "linux")]
mod imp {
    /// The address space the worker had when first capped.
    static BASE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

    pub(super) fn cap_self(extra: usize) {
        let base = *BASE.get_or_init(|| {
            std::fs::read_to_string("/proc/self/statm")
                .ok()
                .and_then(|statm| statm.split_whitespace().next()?.parse::<usize>().ok())
                .map_or(0, |pages| pages.saturating_mul(page_size()))
        });
        if base == 0 {
            return;
        }
        let limit = base
            .saturating_add(extra)
            .saturating_add(super::ADDRESS_SPACE_ROOM);
        let mut current = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one `rlimit` into the valid struct passed.
        if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut current) } != 0 {
            return;
        }
        let wanted = libc::rlimit {
            rlim_cur: (limit as libc::rlim_t).min(current.rlim_max),
            rlim_max: current.rlim_max,
        };
        // SAFETY: setrlimit reads one valid `rlimit`; lowering or raising the soft limit up to
        // the hard one is always allowed.
        unsafe { libc::setrlimit(libc::RLIMIT_AS, &wanted) };
    }

    pub(super) fn page_size() -> usize {
        // SAFETY: sysconf only reads a system constant.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size).unwrap_or(4096)
    }
}

#[cfg(target_os = "macos")]
mod imp {
    use std::sync::{Arc, OnceLock};

    use super::Watchdog;

    /// The footprint at the first cap, and the watchdog (`None` when either failed).
    static WATCHDOG: OnceLock<Option<(usize, Arc<Watchdog>)>> = OnceLock::new();

    pub(super) fn cap_self(extra: usize) {
        let started = WATCHDOG.get_or_init(|| {
            let base = footprint()?;
            let watchdog = Arc::new(Watchdog::default());
            let spawned = watchdog.spawn(super::WATCH_EVERY, footprint, |footprint, cap| {
                tracing::error!(
                    "sandbox worker: its memory ({} MiB) passed its cap ({} MiB); exiting",
                    footprint >> 20,
                    cap >> 20
                );
                std::process::exit(super::CAP_EXIT_CODE);
            });
            if let Err(error) = spawned {
                tracing::warn!(%error, "sandbox worker: no memory watchdog");
                return None;
            }
            Some((base, watchdog))
        });
        if let Some((base, watchdog)) = started {
            watchdog.set(
                base.saturating_add(extra)
                    .saturating_add(super::PHYSICAL_ROOM),
            );
        }
    }

    /// This process's physical footprint.
    fn footprint() -> Option<usize> {
        // SAFETY: an all-zero `rusage_info_v2` is a valid value of that plain C struct.
        let mut info: libc::rusage_info_v2 = unsafe { std::mem::zeroed() };
        // SAFETY: proc_pid_rusage writes one `rusage_info_v2` (the flavour asked) into the
        // valid struct passed, for this process.
        let done = unsafe {
            libc::proc_pid_rusage(
                libc::getpid(),
                libc::RUSAGE_INFO_V2,
                (&raw mut info).cast::<libc::rusage_info_t>(),
            )
        };
        (done == 0).then(|| usize::try_from(info.ri_phys_footprint).unwrap_or(usize::MAX))
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
mod imp {
    pub(super) fn cap_self(_extra: usize) {}
}

/// A cap on a figure sampled now and then (macOS's footprint), with what to do past it. The
/// decision and the loop are the same on every OS; only macOS runs one in production.
#[cfg(any(target_os = "macos", test))]
#[derive(Default)]
pub(crate) struct Watchdog {
    /// The cap in bytes; 0 while none is set.
    cap: std::sync::atomic::AtomicUsize,
}

#[cfg(any(target_os = "macos", test))]
impl Watchdog {
    /// Sets the cap, from the next sample on.
    pub(crate) fn set(&self, cap: usize) {
        self.cap.store(cap, std::sync::atomic::Ordering::Relaxed);
    }

    /// The cap that `figure` passes, if it does (none while no cap is set).
    pub(crate) fn passed(&self, figure: usize) -> Option<usize> {
        let cap = self.cap.load(std::sync::atomic::Ordering::Relaxed);
        (cap != 0 && figure > cap).then_some(cap)
    }

    #[cfg_attr(not(target_os = "macos"), allow(dead_code))]
    /// Samples every `every` on a thread of its own; calls `over(figure, cap)` once, at the first
    /// sample past the cap, and stops. A sample that cannot be read is skipped.
    pub(crate) fn spawn(
        self: &std::sync::Arc<Self>,
        every: std::time::Duration,
        sample: fn() -> Option<usize>,
        over: impl FnOnce(usize, usize) + Send + 'static,
    ) -> std::io::Result<()> {
        let watchdog = self.clone();
        std::thread::Builder::new()
            .name("memory-watchdog".to_owned())
            .stack_size(64 << 10)
            .spawn(move || {
                loop {
                    std::thread::sleep(every);
                    if let Some(figure) = sample()
                        && let Some(cap) = watchdog.passed(figure)
                    {
                        return over(figure, cap);
                    }
                }
            })
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_watchdog_passes_nothing_without_a_cap_and_only_what_is_over_it() {
        let watchdog = Watchdog::default();
        assert_eq!(watchdog.passed(usize::MAX), None);
        watchdog.set(100 << 20);
        assert_eq!(watchdog.passed(100 << 20), None);
        assert_eq!(watchdog.passed((100 << 20) + 1), Some(100 << 20));
        watchdog.set(200 << 20);
        assert_eq!(watchdog.passed((100 << 20) + 1), None);
    }

    /// This process's resident memory, the figure a test can move (the production figure is
    /// macOS's footprint, which Linux does not have).
    #[cfg(target_os = "linux")]
    fn resident() -> Option<usize> {
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
        Some(pages.saturating_mul(imp::page_size()))
    }

    /// The watchdog's loop against a real figure: memory touched past a lowered cap is seen
    /// within a few samples, and not before the cap is lowered.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_watchdog_sees_touched_memory_pass_its_cap() {
        use std::{
            sync::{Arc, mpsc},
            time::Duration,
        };
        let base = resident().unwrap();
        let watchdog = Arc::new(Watchdog::default());
        // Far above anything this test process holds, other tests included.
        watchdog.set(base + (4 << 30));
        let (passed, seen) = mpsc::channel();
        watchdog
            .spawn(Duration::from_millis(5), resident, move |figure, cap| {
                let _ = passed.send((figure, cap));
            })
            .unwrap();
        let touched = vec![1u8; 128 << 20];
        assert!(seen.recv_timeout(Duration::from_millis(200)).is_err());
        let cap = resident().unwrap() - (64 << 20);
        watchdog.set(cap);
        let (figure, reported) = seen.recv_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(reported, cap);
        assert!(figure > cap, "{figure} is not past {cap}");
        assert_eq!(
            touched.iter().map(|&b| usize::from(b)).sum::<usize>(),
            128 << 20
        );
    }
}
