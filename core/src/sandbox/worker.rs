//! `runbyte worker`: one engine process. Reads host messages on stdin, writes its own on stdout
//! (nothing else ever goes to stdout), runs one execution at a time, each on a fresh thread with
//! the stack its limit asks for. Exits when stdin closes, even in the middle of an execution.

use std::{
    io::{BufRead, Write},
    process::ExitCode,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc,
    },
    thread,
    time::Duration,
};

use super::{
    engine::{self, Link, ModuleCache, ModuleSource},
    host::ENGINE_STACK_MARGIN,
    protocol::{FromEngine, PROTOCOL_VERSION, ToEngine},
};

/// The body of `runbyte worker`.
pub fn worker_main() -> ExitCode {
    let stdout = Arc::new(Mutex::new(std::io::stdout()));
    let send = move |message: FromEngine| {
        let Ok(mut line) = serde_json::to_vec(&message) else {
            return;
        };
        line.push(b'\n');
        let written = match stdout.lock() {
            Ok(mut out) => out.write_all(&line).and_then(|()| out.flush()),
            Err(_) => Err(std::io::Error::other("stdout lock poisoned")),
        };
        if written.is_err() {
            // The host is gone.
            std::process::exit(0);
        }
    };
    send(FromEngine::Ready {
        version: PROTOCOL_VERSION,
    });
    let (to_engine, inbox) = mpsc::channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    let reader = thread::Builder::new()
        .name("runbyte-worker-stdin".to_owned())
        .spawn(move || {
            let stdin = std::io::stdin();
            let mut stdin = stdin.lock();
            let mut line = String::new();
            loop {
                line.clear();
                match stdin.read_line(&mut line) {
                    Ok(0) | Err(_) => std::process::exit(0),
                    Ok(_) => {}
                }
                let message: ToEngine = match serde_json::from_str(line.trim_end()) {
                    Ok(message) => message,
                    Err(error) => {
                        tracing::error!(%error, "sandbox worker: unreadable message from the host");
                        std::process::exit(2);
                    }
                };
                match &message {
                    ToEngine::Run { .. } => flag.store(false, Ordering::SeqCst),
                    ToEngine::Cancel => flag.store(true, Ordering::SeqCst),
                    _ => {}
                }
                if to_engine.send(message).is_err() {
                    std::process::exit(0);
                }
            }
        });
    if reader.is_err() {
        return ExitCode::FAILURE;
    }
    let mut link = Link::new(Box::new(send), inbox);
    let cache = Arc::new(Mutex::new(ModuleCache::default()));
    loop {
        let message = match link.next(Duration::from_secs(3600)) {
            Ok(message) => message,
            Err(true) => return ExitCode::SUCCESS,
            Err(false) => continue,
        };
        // Replies that arrive after their execution ended are dropped here.
        let ToEngine::Run {
            program,
            limits,
            generation,
        } = message
        else {
            continue;
        };
        if let Ok(mut cache) = cache.lock() {
            cache.refresh(generation);
        }
        let modules = ModuleSource::Remote(cache.clone());
        let cancel = cancel.clone();
        let stack = limits.stack_bytes.saturating_add(ENGINE_STACK_MARGIN);
        let engine = thread::Builder::new()
            .name("runbyte-sandbox".to_owned())
            .stack_size(stack)
            .spawn(move || engine::run(&program, limits, link, modules, cancel));
        let Ok(engine) = engine else {
            return ExitCode::FAILURE;
        };
        match engine.join() {
            Ok((report, back)) => {
                back.send(FromEngine::Done { report });
                link = back;
            }
            Err(_) => return ExitCode::FAILURE,
        }
    }
}
