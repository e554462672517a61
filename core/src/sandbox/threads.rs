//! Engine threads kept between executions. An engine runs on a thread of its own, with a stack
//! for the QuickJS limit plus margin (17 MiB by default); making one per execution (mapping,
//! guarding and releasing that stack, and the allocator's arena with it) cost more than a small
//! program takes to run. A thread that finished its execution waits here for the next one with
//! the same stack size, for [`IDLE_FOR`]; at most [`MAX_IDLE`] wait at once.
//!
//! Used by thread isolation in the host and by each worker process for its engine, and by the
//! host for transpiling what it does not transpile on its own async thread (see
//! `transpile::transpile_in_host`), whose threads have a stack of their own size.

use std::{
    io,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
        mpsc::{self, RecvTimeoutError},
    },
    thread,
    time::Duration,
};

/// How long an idle engine thread waits for another execution before it exits.
const IDLE_FOR: Duration = Duration::from_secs(30);
/// The most engine threads waiting at once.
const MAX_IDLE: usize = 8;

/// One execution for an engine thread.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

struct Waiting {
    id: u64,
    stack: usize,
    jobs: mpsc::Sender<Job>,
}

static IDLE: Mutex<Vec<Waiting>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(1);

fn idle() -> std::sync::MutexGuard<'static, Vec<Waiting>> {
    IDLE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs `job` on an engine thread with a stack of `stack` bytes: an idle one if there is one,
/// else a new one.
pub(crate) fn run(stack: usize, job: Job) -> io::Result<()> {
    let mut job = job;
    loop {
        let waiting = {
            let mut idle = idle();
            let found = idle.iter().rposition(|waiting| waiting.stack == stack);
            found.map(|at| idle.swap_remove(at))
        };
        let Some(waiting) = waiting else {
            return spawn(stack, job);
        };
        // A thread taken from the list waits for this job (see `serve`); if it died anyway
        // (it cannot, short of an abort), the job comes back and another is tried.
        match waiting.jobs.send(job) {
            Ok(()) => return Ok(()),
            Err(mpsc::SendError(back)) => job = back,
        }
    }
}

/// As [`run`], letting go first of idle threads with another stack size, so that at most one
/// engine stack is kept: a worker process's address space is capped (`RLIMIT_AS`) from what it
/// had at start, and stacks kept for other sizes would eat into the room of the one running.
pub(crate) fn run_alone(stack: usize, job: Job) -> io::Result<()> {
    // Dropping a waiting thread's sender ends its wait: it exits.
    idle().retain(|waiting| waiting.stack == stack);
    run(stack, job)
}

fn spawn(stack: usize, job: Job) -> io::Result<()> {
    thread::Builder::new()
        .name("runbyte-sandbox".to_owned())
        .stack_size(stack)
        .spawn(move || serve(stack, job))
        .map(drop)
}

/// Runs jobs until none comes for [`IDLE_FOR`] or enough threads wait already.
fn serve(stack: usize, first: Job) {
    let mut job = first;
    loop {
        job();
        let (jobs, next) = mpsc::channel();
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        {
            let mut idle = idle();
            if idle.len() >= MAX_IDLE {
                return;
            }
            idle.push(Waiting { id, stack, jobs });
        }
        job = match next.recv_timeout(IDLE_FOR) {
            Ok(job) => job,
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                // Leave the list; if a caller took this thread meanwhile, its job is coming.
                let mut idle = idle();
                match idle.iter().position(|waiting| waiting.id == id) {
                    Some(at) => {
                        idle.swap_remove(at);
                        return;
                    }
                    None => {
                        drop(idle);
                        match next.recv() {
                            Ok(job) => job,
                            Err(_) => return,
                        }
                    }
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// One test, not two: `run_alone` would take a parallel test's idle threads away.
    #[test]
    fn a_finished_thread_runs_the_next_job_and_running_alone_lets_others_go() {
        // Stack sizes of this test's own: no other test's threads answer.
        let (stack, other) = ((3 << 20) + 4096, (3 << 20) + 8192);
        let (tx, rx) = mpsc::channel();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3 {
            let tx = tx.clone();
            run(
                stack,
                Box::new(move || tx.send(thread::current().id()).unwrap()),
            )
            .unwrap();
            seen.insert(rx.recv().unwrap());
            // The thread puts itself back on the list after its job: wait until it has (a
            // loaded machine may take a while), or the next job would start a thread of its own.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while !idle().iter().any(|waiting| waiting.stack == stack)
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        assert_eq!(
            seen.len(),
            1,
            "one thread served them one after another: {seen:?}"
        );
        assert!(idle().iter().any(|waiting| waiting.stack == stack));
        let sender = tx.clone();
        run_alone(
            other,
            Box::new(move || sender.send(thread::current().id()).unwrap()),
        )
        .unwrap();
        let ran_on = rx.recv().unwrap();
        assert!(!seen.contains(&ran_on));
        assert!(!idle().iter().any(|waiting| waiting.stack == stack));
    }
}
