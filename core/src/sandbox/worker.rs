//! `runbyte worker`: one engine process. Reads host messages on stdin, writes its own on stdout
//! (nothing else ever goes to stdout), runs one execution at a time on a thread with the stack
//! its limit asks for (kept for the next while that stack fits). Stdin is read by the thread
//! waiting for a message (the engine thread's own, between executions too: a tool call's reply
//! and the next execution wake it directly), and looked at by a running program's interrupt
//! handler (see [`PipeInbox`]). Exits when stdin closes, even in the middle of an execution.

use std::{
    process::ExitCode,
    sync::{Arc, Mutex, atomic::AtomicBool},
    time::{Duration, Instant},
};

use crate::platform::memory;

use super::{
    Determinism,
    engine::{self, Link, ModuleCache, ModuleSource, PipeInbox, WorkerPipes},
    protocol::{
        EngineLimits, FromEngine, PROTOCOL_VERSION, Program, Report, TRANSPILE_MEMORY_BYTES,
        ToEngine,
    },
    transpile::{self, Transpiled},
};

/// The body of `runbyte worker`.
///
/// The messages are read by the thread that runs the engine: once an execution has started an
/// engine thread with the stack its limits ask for, that thread reads the next messages too and
/// runs the next execution itself while the stack it needs stays the same, so that neither the
/// start of an execution nor its report waits for another thread to wake. The main thread takes
/// over again only when an execution needs another stack.
pub fn worker_main() -> ExitCode {
    memory::cap_self(TRANSPILE_MEMORY_BYTES);
    let cancel = Arc::new(AtomicBool::new(false));
    // Stdin is read by whichever thread waits for a message: the engine's own while it runs.
    let pipes = match WorkerPipes::stdio() {
        Ok(pipes) => pipes,
        Err(error) => {
            tracing::error!(%error, "sandbox worker: cannot use stdin and stdout");
            return ExitCode::FAILURE;
        }
    };
    let link = Link::from_pipe(PipeInbox::new(pipes, cancel.clone()));
    link.send(FromEngine::Ready {
        version: PROTOCOL_VERSION,
    });
    let mut worker = Worker {
        link,
        cache: Arc::new(Mutex::new(ModuleCache::default())),
        cancel,
    };
    let mut next = worker.serve(None);
    loop {
        let Next::Run(run) = next else {
            return ExitCode::SUCCESS;
        };
        let stack = run.stack();
        let (ended, end) = std::sync::mpsc::channel();
        let started = super::threads::run_alone(
            stack,
            Box::new(move || {
                let mut worker = worker;
                worker.execute(run);
                let next = worker.serve(Some(stack));
                let _ = ended.send((worker, next));
            }),
        );
        if started.is_err() {
            return ExitCode::FAILURE;
        }
        (worker, next) = match end.recv() {
            Ok(back) => back,
            Err(_) => return ExitCode::FAILURE,
        };
    }
}

/// What a worker holds between messages.
struct Worker {
    link: Link,
    cache: Arc<Mutex<ModuleCache>>,
    cancel: Arc<AtomicBool>,
}

/// An execution ready for an engine: transpiled, its memory limit set.
struct Run {
    program: Transpiled,
    limits: EngineLimits,
    determinism: Determinism,
}

impl Run {
    /// The engine thread's stack: the QuickJS limit plus margin.
    fn stack(&self) -> usize {
        self.limits.thread_stack()
    }
}

/// Why [`Worker::serve`] returned.
enum Next {
    /// The host is gone.
    Exit,
    /// An execution that needs an engine thread with another stack.
    Run(Run),
}

impl Worker {
    /// Answers messages until the host goes away or an execution needs a stack other than
    /// `stack` (the current thread's, when it is an engine thread). An execution that fits runs
    /// here.
    fn serve(&mut self, stack: Option<usize>) -> Next {
        loop {
            let message = match self.link.next(Duration::from_secs(3600)) {
                Ok(message) => message,
                Err(true) => return Next::Exit,
                Err(false) => continue,
            };
            // Replies that arrive after their execution ended are dropped here.
            let run = match message {
                ToEngine::Run {
                    program,
                    limits,
                    determinism,
                    generation,
                } => self.prepare(program, limits, determinism, generation),
                ToEngine::Transpile { id, source } => {
                    memory::cap_self(TRANSPILE_MEMORY_BYTES);
                    let result = transpile::transpile_as(&source, transpile::AGENT_MODULE, true);
                    self.link.send(FromEngine::Transpiled { id, result });
                    continue;
                }
                _ => continue,
            };
            let Some(run) = run else { continue };
            if stack != Some(run.stack()) {
                return Next::Run(run);
            }
            self.execute(run);
        }
    }

    /// Sets the memory limit for an execution and transpiles its source if need be; `None` when
    /// the source did not transpile (its report is sent).
    fn prepare(
        &mut self,
        program: Program,
        mut limits: EngineLimits,
        determinism: Determinism,
        generation: u64,
    ) -> Option<Run> {
        memory::cap_self(limits.execution_memory());
        let program = match program {
            Program::Transpiled(program) => program,
            Program::Source(source) => {
                // Transpiling counts against the execution's time: what it took, the engine
                // has less.
                let started = Instant::now();
                let transpiled = transpile::transpile_as(&source, transpile::AGENT_MODULE, true);
                let small = source.len() <= super::IN_PROCESS_TRANSPILE_BYTES;
                drop(source);
                let spent = started.elapsed().as_millis().min(u64::MAX as u128) as u64;
                limits.spent_ms = limits.spent_ms.saturating_add(spent);
                match transpiled {
                    Ok(program) => {
                        // A small source cannot make the transpiler run away (the scan bounds
                        // it), and the host counts it as started already: one message fewer.
                        if !small {
                            self.link.send(FromEngine::Started);
                        }
                        program
                    }
                    Err(error) => {
                        self.link.send(FromEngine::Done {
                            report: Report {
                                result: Err(error),
                                calls: 0,
                                failed_calls: 0,
                                logs_dropped: 0,
                                cached: Default::default(),
                            },
                        });
                        return None;
                    }
                }
            }
        };
        if let Ok(mut cache) = self.cache.lock() {
            cache.refresh(generation);
        }
        Some(Run {
            program,
            limits,
            determinism,
        })
    }

    /// Runs one execution on this thread (an engine thread with the stack it needs) and sends
    /// its report; then makes the next execution's engine, before reading the next message.
    fn execute(&mut self, run: Run) {
        let Run {
            program,
            limits,
            determinism,
        } = run;
        let modules = ModuleSource::Remote(self.cache.clone());
        // The link goes to the engine for the execution and comes back with its report.
        let (_, nowhere) = super::mailbox::mailbox();
        let link = std::mem::replace(&mut self.link, Link::new(Box::new(|_| {}), nowhere));
        let (report, link) = engine::run(
            &program,
            limits,
            determinism,
            link,
            modules,
            self.cancel.clone(),
        );
        link.send(FromEngine::Done { report });
        self.link = link;
        engine::yield_then_between_runs();
    }
}
