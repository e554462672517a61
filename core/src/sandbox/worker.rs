//! `runbyte worker`: one engine process. Reads host messages on stdin, writes its own on stdout
//! (nothing else ever goes to stdout), runs one execution at a time, each on a fresh thread with
//! the stack its limit asks for. Stdin is read by the thread waiting for a message (the engine's
//! own during an execution: a tool call's reply wakes it directly), and looked at by a running
//! program's interrupt handler (see [`PipeInbox`]). Exits when stdin closes, even in the middle
//! of an execution.

use std::{
    process::ExitCode,
    sync::{Arc, Mutex, atomic::AtomicBool},
    time::{Duration, Instant},
};

use super::{
    engine::{self, Link, ModuleCache, ModuleSource, PipeInbox},
    host::ENGINE_STACK_MARGIN,
    protocol::{FromEngine, PROTOCOL_VERSION, Program, Report, ToEngine},
    transpile,
};

/// The memory a worker may use beyond the QuickJS heap and the stacks, above what it had when
/// it started: room for SWC to transpile the largest source accepted (1 MiB of ordinary
/// TypeScript takes about 100 MiB) and the module cache. Past it an allocation fails and the
/// worker dies; the host reports the execution as having exceeded the sandbox's memory, and
/// replaces the worker.
pub(crate) const TRANSPILE_MEMORY_BYTES: usize = 1 << 30;

/// The address space a worker had when it started, the base that [`limit_memory`] adds to.
static BASE_ADDRESS_SPACE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Bounds the worker's address space (`RLIMIT_AS`, the soft limit only, so that the next run
/// may set another) to what it had at start plus `extra` bytes. Address space, not resident
/// memory: it counts stacks and allocator arenas as reserved, hence the generous room. Best
/// effort: where it cannot be read or set, the deadline still bounds the worker.
#[cfg(target_os = "linux")]
fn limit_memory(extra: usize) {
    let base = *BASE_ADDRESS_SPACE.get_or_init(|| {
        std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|statm| statm.split_whitespace().next()?.parse::<usize>().ok())
            .map_or(0, |pages| pages.saturating_mul(page_size()))
    });
    if base == 0 {
        return;
    }
    // Threads reserve their stacks and a malloc arena each (64 MiB) up front.
    let limit = base.saturating_add(extra).saturating_add(512 << 20);
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
    // SAFETY: setrlimit reads one valid `rlimit`; lowering or raising the soft limit up to the
    // hard one is always allowed.
    unsafe { libc::setrlimit(libc::RLIMIT_AS, &wanted) };
}

#[cfg(target_os = "linux")]
fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

#[cfg(not(target_os = "linux"))]
fn limit_memory(_extra: usize) {}

/// The body of `runbyte worker`.
pub fn worker_main() -> ExitCode {
    limit_memory(TRANSPILE_MEMORY_BYTES);
    let cancel = Arc::new(AtomicBool::new(false));
    // Stdin is read by whichever thread waits for a message: the engine's own while it runs.
    let mut link = Link::from_pipe(PipeInbox::new(
        libc::STDIN_FILENO,
        libc::STDOUT_FILENO,
        cancel.clone(),
    ));
    link.send(FromEngine::Ready {
        version: PROTOCOL_VERSION,
    });
    let cache = Arc::new(Mutex::new(ModuleCache::default()));
    loop {
        let message = match link.next(Duration::from_secs(3600)) {
            Ok(message) => message,
            Err(true) => return ExitCode::SUCCESS,
            Err(false) => continue,
        };
        // Replies that arrive after their execution ended are dropped here.
        let (program, mut limits, determinism, generation) = match message {
            ToEngine::Run {
                program,
                limits,
                determinism,
                generation,
            } => (program, limits, determinism, generation),
            ToEngine::Transpile { id, source } => {
                limit_memory(TRANSPILE_MEMORY_BYTES);
                let result = transpile::transpile_as(&source, engine::AGENT_MODULE, true);
                link.send(FromEngine::Transpiled { id, result });
                continue;
            }
            _ => continue,
        };
        limit_memory(
            limits
                .memory_bytes
                .saturating_add(limits.stack_bytes)
                .saturating_add(ENGINE_STACK_MARGIN)
                .saturating_add(TRANSPILE_MEMORY_BYTES),
        );
        let program = match program {
            Program::Transpiled(program) => program,
            Program::Source(source) => {
                // Transpiling counts against the execution's time: what it took, the engine
                // has less.
                let started = Instant::now();
                let transpiled = transpile::transpile_as(&source, engine::AGENT_MODULE, true);
                let small = source.len() <= super::IN_PROCESS_TRANSPILE_BYTES;
                drop(source);
                let spent = started.elapsed().as_millis().min(u64::MAX as u128) as u64;
                limits.spent_ms = limits.spent_ms.saturating_add(spent);
                match transpiled {
                    Ok(program) => {
                        // A small source cannot make the transpiler run away (the scan bounds
                        // it), and the host counts it as started already: one message fewer.
                        if !small {
                            link.send(FromEngine::Started);
                        }
                        program
                    }
                    Err(error) => {
                        link.send(FromEngine::Done {
                            report: Report {
                                result: Err(error),
                                calls: 0,
                                failed_calls: 0,
                                logs_dropped: 0,
                            },
                        });
                        continue;
                    }
                }
            }
        };
        if let Ok(mut cache) = cache.lock() {
            cache.refresh(generation);
        }
        let modules = ModuleSource::Remote(cache.clone());
        let cancel = cancel.clone();
        let stack = limits.stack_bytes.saturating_add(ENGINE_STACK_MARGIN);
        let (ended, end) = std::sync::mpsc::channel();
        let started = super::threads::run_alone(
            stack,
            Box::new(move || {
                let _ = ended.send(engine::run(
                    &program,
                    limits,
                    determinism,
                    link,
                    modules,
                    cancel,
                ));
            }),
        );
        if started.is_err() {
            return ExitCode::FAILURE;
        }
        match end.recv() {
            Ok((report, back)) => {
                back.send(FromEngine::Done { report });
                link = back;
            }
            Err(_) => return ExitCode::FAILURE,
        }
    }
}
