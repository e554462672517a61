//! The listener: one upstream client over this process's own stdin and stdout.

use std::{
    collections::VecDeque,
    fs::File,
    io::Write,
    os::fd::{AsRawFd, FromRawFd},
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

use crate::stdout::{Next, Stdout};

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

/// The client's messages are read from stdin straight from `recv` (see [`Stdout`]), and the
/// host waits on stdin in its own event loop: no thread hands them over.
struct StdioPump {
    /// A duplicate of stdin, closed with the pump; stdin itself stays open.
    input: Mutex<Stdout<File>>,
    fd: i32,
    out: Output,
    ended: Mutex<Option<String>>,
    max_line: usize,
}

impl StdioPump {
    fn start(max_line: usize) -> Result<Self, String> {
        // SAFETY: dup(2) of this process's stdin; the new descriptor is owned by the `File`.
        let fd = unsafe { libc::dup(libc::STDIN_FILENO) };
        if fd < 0 {
            return Err(format!(
                "cannot read stdin: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: `fd` was just opened above and nothing else owns it.
        let input = unsafe { File::from_raw_fd(fd) };
        Ok(StdioPump {
            input: Mutex::new(Stdout::new(input, max_line)),
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
        Some(self.fd)
    }

    fn sends_without_blocking(&self) -> bool {
        true
    }
}

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
    /// Lines waiting for the helper.
    backlog: VecDeque<Vec<u8>>,
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
        // SAFETY: dup(2) of this process's stdout; the new descriptor is owned by the `File`.
        let fd = unsafe { libc::dup(libc::STDOUT_FILENO) };
        if fd < 0 {
            return Err(format!(
                "cannot write stdout: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: `fd` was just opened above and nothing else owns it.
        let out = unsafe { File::from_raw_fd(fd) };
        let outgoing = Outgoing {
            out,
            backlog: VecDeque::new(),
            writing: false,
            helper: false,
            closed: false,
            failed: None,
        };
        Ok(Output {
            shared: Arc::new((Mutex::new(outgoing), Condvar::new())),
        })
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
            && writable_now(state.out.as_raw_fd())
        {
            return state.out.write_all(&line).map_err(|e| {
                let failed = format!("cannot write to stdout: {e}");
                state.failed = Some(failed.clone());
                failed
            });
        }
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
        let Some(line) = state.backlog.pop_front() else {
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
            return;
        }
    }
}

/// Whether `fd` has room for a write now (a pipe: a free page, at least [`ATOMIC_WRITE`]).
fn writable_now(fd: i32) -> bool {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd for a descriptor the caller owns, for the call only.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready == 1 && poll.revents & libc::POLLOUT != 0 && poll.revents & libc::POLLERR == 0
}
