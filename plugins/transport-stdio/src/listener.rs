//! The listener: one upstream client over this process's own stdin and stdout.

use std::{
    io::{BufReader, Write},
    sync::{
        Mutex,
        atomic::{AtomicBool, Ordering},
        mpsc::{self, Receiver, RecvTimeoutError},
    },
    thread,
    time::Duration,
};

use runbyte_plugin_api::{
    LogLevel, log,
    transport::{Accepted, Listener, Pump, Received},
};

use crate::lines::{Line, read_line};

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

struct StdioPump {
    lines: Mutex<Receiver<Received>>,
    out: Mutex<std::io::Stdout>,
    ended: Mutex<Option<String>>,
}

impl StdioPump {
    fn start(max_line: usize) -> Result<Self, String> {
        let (sender, lines) = mpsc::channel();
        thread::Builder::new()
            .name("stdio-listener".to_owned())
            .spawn(move || {
                let mut stdin = BufReader::new(std::io::stdin());
                loop {
                    let event = match read_line(&mut stdin, max_line) {
                        Line::Text(line) if line.trim().is_empty() => continue,
                        Line::Text(line) => Received::Message(line),
                        Line::TooLong(length) => {
                            log(LogLevel::Error, &format!("dropped a {length}-byte line from stdin: longer than the {max_line}-byte cap"));
                            continue;
                        }
                        Line::Eof => Received::Closed("stdin closed".to_owned()),
                        Line::Failed(e) => Received::Closed(format!("reading stdin failed: {e}")),
                    };
                    let last = matches!(event, Received::Closed(_));
                    if sender.send(event).is_err() || last {
                        return;
                    }
                }
            })
            .map_err(|e| format!("cannot start the stdin thread: {e}"))?;
        Ok(StdioPump {
            lines: Mutex::new(lines),
            out: Mutex::new(std::io::stdout()),
            ended: Mutex::new(None),
        })
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
        let Ok(lines) = self.lines.lock() else {
            return Received::Closed("poisoned".to_owned());
        };
        match lines.recv_timeout(timeout) {
            Ok(Received::Closed(reason)) => {
                if let Ok(mut ended) = self.ended.lock() {
                    *ended = Some(reason.clone());
                }
                Received::Closed(reason)
            }
            Ok(event) => event,
            Err(RecvTimeoutError::Timeout) => Received::Timeout,
            Err(RecvTimeoutError::Disconnected) => Received::Closed("stdin closed".to_owned()),
        }
    }

    fn close(&self) {
        if let Ok(mut ended) = self.ended.lock() {
            ended.get_or_insert_with(|| "closed".to_owned());
        }
    }
}
