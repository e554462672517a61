//! The listener: one upstream client over this process's own stdin and stdout.

use std::{
    collections::VecDeque,
    fs::File,
    io::Write,
    sync::{
        Arc, Condvar, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::{Duration, Instant},
};

use runbyte_plugin_api::{
    LogLevel, log,
    transport::{Accepted, Listener, Pump, Received},
};

use crate::{
    stdout::Next,
    sys::{read::Incoming, stdio},
};

pub(crate) struct StdioListener {
    taken: AtomicBool,
    closed: AtomicBool,
    max_line: usize,
}

impl StdioListener {
    pub(crate) fn new(max_line: usize) -> Self {
        StdioListener {
            taken: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            max_line,
        }
    }
}

impl Listener for StdioListener {
    fn accept(&self, timeout: Duration) -> Result<Option<Accepted>, String> {
        if self.closed.load(Ordering::SeqCst) {
            return Err("the stdio listener is closed".to_owned());
        }
        if self.taken.swap(true, Ordering::SeqCst) {
            // stdio has exactly one client.
            thread::sleep(timeout);
            return Ok(None);
        }
        Ok(Some(Accepted {
            pump: Box::new(StdioPump::start(self.max_line)?),
            peer: "stdio".to_owned(),
            session: "stdio".to_owned(),
        }))
    }

    fn address(&self) -> String {
        "stdio".to_owned()
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

/// The client's messages are read from stdin straight from `recv` on Unix, and the host waits
/// on stdin in its own event loop: no thread hands them over (see [`Incoming`]).
struct StdioPump {
    /// A duplicate of stdin, closed with the pump; stdin itself stays open.
    input: Mutex<Incoming<File>>,
    fd: Option<i32>,
    out: Output,
    ended: Mutex<Option<String>>,
    max_line: usize,
}

impl StdioPump {
    fn start(max_line: usize) -> Result<Self, String> {
        let input = Incoming::new(stdio::stdin()?, max_line, "stdin")
            .map_err(|e| format!("cannot start reading stdin: {e}"))?;
        let fd = input.readable_fd();
        Ok(StdioPump {
            input: Mutex::new(input),
            fd,
            out: Output::new()?,
            ended: Mutex::new(None),
            max_line,
        })
    }

    fn end(&self, reason: String) -> Received {
        if let Ok(mut ended) = self.ended.lock() {
            ended.get_or_insert(reason.clone());
        }
        Received::Closed(reason)
    }
}

impl Pump for StdioPump {
    fn send(&self, message: &str) -> Result<(), String> {
        self.out.send(message)
    }

    fn recv(&self, timeout: Duration) -> Received {
        if let Ok(ended) = self.ended.lock()
            && let Some(reason) = ended.clone()
        {
            return Received::Closed(reason);
        }
        let Ok(mut input) = self.input.lock() else {
            return Received::Closed("poisoned".to_owned());
        };
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match input.next(left) {
                Next::Line(line) => return Received::Message(line),
                Next::Timeout => return Received::Timeout,
                Next::TooLong(skipped) => log(
                    LogLevel::Error,
                    &format!(
                        "dropped a {}-byte line from stdin: longer than the {}-byte cap",
                        skipped.length, self.max_line
                    ),
                ),
                Next::Eof => return self.end("stdin closed".to_owned()),
                Next::Failed(e) => return self.end(format!("reading stdin failed: {e}")),
            }
        }
    }

    fn close(&self) {
        if let Ok(mut ended) = self.ended.lock() {
            ended.get_or_insert_with(|| "closed".to_owned());
        }
        self.out.close();
    }

    fn readable_fd(&self) -> Option<i32> {
        self.fd
    }

    fn sends_without_blocking(&self) -> bool {
        true
    }
}

/// The most answers a client may leave unread on stdout before its session ends: 64 MiB.
const MAX_BACKLOG: usize = 64 << 20;

/// The most a pipe takes in one write without splitting it (`PIPE_BUF`), and what a pipe that
/// polls writable has room for.
const ATOMIC_WRITE: usize = 4096;

/// The client's stdout, written without making the caller wait: a message of at most
/// [`ATOMIC_WRITE`] bytes goes out at once when stdout has room and nothing is queued before it
/// (the common answer: the host sends it from its own task, with no writer thread woken); any
/// other waits, in order, for a helper thread that writes it out as the client reads. Stdout
/// stays blocking (`O_NONBLOCK` would change a terminal it shares with the shell).
struct Output {
    shared: Arc<(Mutex<Outgoing>, Condvar)>,
}

struct Outgoing {
    /// A duplicate of stdout.
    out: File,
    /// Lines waiting for the helper, and their bytes.
    backlog: VecDeque<Vec<u8>>,
    queued: usize,
    /// The helper is writing a line now.
    writing: bool,
    helper: bool,
    closed: bool,
    failed: Option<String>,
}

fn lock(mutex: &Mutex<Outgoing>) -> std::sync::MutexGuard<'_, Outgoing> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Output {
    fn new() -> Result<Self, String> {
        Ok(Output::over(stdio::stdout()?))
    }

    /// Writing to `out` (stdout, or a test's pipe).
    fn over(out: File) -> Self {
        let outgoing = Outgoing {
            out,
            backlog: VecDeque::new(),
            queued: 0,
            writing: false,
            helper: false,
            closed: false,
            failed: None,
        };
        Output {
            shared: Arc::new((Mutex::new(outgoing), Condvar::new())),
        }
    }

    fn send(&self, message: &str) -> Result<(), String> {
        let mut line = Vec::with_capacity(message.len() + 1);
        line.extend_from_slice(message.as_bytes());
        line.push(b'\n');
        let (mutex, wake) = &*self.shared;
        let mut state = lock(mutex);
        if let Some(failed) = &state.failed {
            return Err(failed.clone());
        }
        if state.backlog.is_empty()
            && !state.writing
            && line.len() <= ATOMIC_WRITE
            && stdio::writable_now(&state.out)
        {
            return state.out.write_all(&line).map_err(|e| {
                let failed = format!("cannot write to stdout: {e}");
                state.failed = Some(failed.clone());
                failed
            });
        }
        if state.queued + line.len() > MAX_BACKLOG {
            // A client that leaves this much unread is not reading: its session ends, and
            // Runbyte does not hold its answers without bound.
            let failed = format!(
                "the client has left {} of answers unread on stdout (at most {} MiB wait)",
                state.queued,
                MAX_BACKLOG >> 20
            );
            state.failed = Some(failed.clone());
            state.backlog.clear();
            state.queued = 0;
            return Err(failed);
        }
        state.queued += line.len();
        state.backlog.push_back(line);
        if !state.helper {
            let shared = self.shared.clone();
            thread::Builder::new()
                .name("stdio-stdout".to_owned())
                .spawn(move || write_out(&shared))
                .map_err(|e| format!("cannot start the stdout thread: {e}"))?;
            state.helper = true;
        }
        wake.notify_one();
        Ok(())
    }

    /// Lets the helper end once the lines queued are written.
    fn close(&self) {
        let (mutex, wake) = &*self.shared;
        lock(mutex).closed = true;
        wake.notify_one();
    }
}

/// The helper: writes the queued lines in order, each with stdout blocking as long as the
/// client does not read.
fn write_out(shared: &(Mutex<Outgoing>, Condvar)) {
    let (mutex, wake) = shared;
    let mut state = lock(mutex);
    loop {
        let Some(line) = state
            .backlog
            .pop_front()
            .inspect(|line| state.queued -= line.len())
        else {
            if state.closed || state.failed.is_some() {
                return;
            }
            state = wake
                .wait(state)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            continue;
        };
        let mut out = match state.out.try_clone() {
            Ok(out) => out,
            Err(e) => {
                state.failed = Some(format!("cannot write to stdout: {e}"));
                return;
            }
        };
        state.writing = true;
        drop(state);
        let written = out.write_all(&line);
        drop(out);
        state = lock(mutex);
        state.writing = false;
        if let Err(e) = written {
            state.failed = Some(format!("cannot write to stdout: {e}"));
            state.backlog.clear();
            state.queued = 0;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::Read;

    use super::*;

    fn pipe() -> (std::io::PipeReader, File) {
        let (reader, writer) = std::io::pipe().unwrap();
        #[cfg(unix)]
        let writer = File::from(std::os::fd::OwnedFd::from(writer));
        #[cfg(windows)]
        let writer = File::from(std::os::windows::io::OwnedHandle::from(writer));
        (reader, writer)
    }

    /// Small answers go out in order behind large ones; a client that reads nothing ends its
    /// session once 64 MiB wait, instead of Runbyte holding answers without bound.
    #[test]
    fn answers_keep_their_order_and_an_unread_backlog_is_bounded() {
        let (mut reader, writer) = pipe();
        let output = Output::over(writer);
        let big = "b".repeat(100_000);
        let expected: Vec<String> = (0..20)
            .map(|i| {
                if i % 3 == 0 {
                    format!("{big}{i}")
                } else {
                    format!("small {i}")
                }
            })
            .collect();
        for line in &expected {
            output.send(line).unwrap();
        }
        let mut read = Vec::new();
        let mut buffer = vec![0; 1 << 16];
        while read.iter().filter(|&&b| b == b'\n').count() < expected.len() {
            let n = reader.read(&mut buffer).unwrap();
            assert!(n > 0);
            read.extend_from_slice(&buffer[..n]);
        }
        let lines: Vec<&str> = std::str::from_utf8(&read).unwrap().lines().collect();
        assert_eq!(lines, expected);

        // Nobody reads from here on: the pipe fills, then the backlog.
        let mb = "m".repeat(1 << 20);
        let refused = (0..80).find_map(|_| output.send(&mb).err());
        let refused = refused.expect("refused before 80 MiB wait");
        assert!(refused.contains("unread on stdout"), "{refused}");
        assert!(output.send("later").is_err(), "the session stays ended");
        drop(reader);
    }
}
