//! The listener: one upstream client over this process's own stdin and stdout.

use std::{
    fs::File,
    io::Write,
    os::fd::FromRawFd,
    sync::{
        Mutex,
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
    out: Mutex<std::io::Stdout>,
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
            out: Mutex::new(std::io::stdout()),
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
        let out = self
            .out
            .lock()
            .map_err(|_| "stdout lock poisoned".to_owned())?;
        let mut out = out.lock();
        out.write_all(message.as_bytes())
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush())
            .map_err(|e| format!("cannot write to stdout: {e}"))
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
    }

    fn readable_fd(&self) -> Option<i32> {
        Some(self.fd)
    }
}
