//! A sandbox worker's two pipes at the byte level: whether stdin has something within a time,
//! what it has now, and a write to stdout that does not wait for a host that is itself waiting
//! for the worker to read. The lines and messages on top are the engine's (`PipeInbox`).
//!
//! - Unix: `poll(2)` on stdin, and stdout made non-blocking: a write the pipe cannot take answers
//!   `WouldBlock`, and [`WorkerPipes::wait_to_write`] waits for either pipe.
//! - Windows: anonymous pipes cannot be polled, so a thread reads stdin (64 KiB at a time) into a
//!   channel that the other calls look at; stdout blocks, which cannot deadlock because that
//!   thread keeps taking what the host sends meanwhile. What the host sends is what the engine
//!   asked for (replies, modules) and a `run` or `cancel` at a time, so the channel stays small.

use std::{fs::File, io};

/// Read at most this much at once.
const CHUNK: usize = 64 << 10;

pub(crate) use imp::WorkerPipes;

impl WorkerPipes {
    /// The process's stdin and stdout (duplicated handles of them, open for its life).
    pub(crate) fn stdio() -> io::Result<Self> {
        #[cfg(unix)]
        let (input, output) = {
            use std::os::fd::AsFd;
            (
                io::stdin().as_fd().try_clone_to_owned()?,
                io::stdout().as_fd().try_clone_to_owned()?,
            )
        };
        #[cfg(windows)]
        let (input, output) = {
            use std::os::windows::io::AsHandle;
            (
                io::stdin().as_handle().try_clone_to_owned()?,
                io::stdout().as_handle().try_clone_to_owned()?,
            )
        };
        Self::new(File::from(input), File::from(output))
    }
}

#[cfg(unix)]
mod imp {
    use std::{fs::File, io, os::fd::AsRawFd, time::Duration};

    /// See the module's documentation.
    pub(crate) struct WorkerPipes {
        input: File,
        output: File,
    }

    impl WorkerPipes {
        /// Reads `input` and writes `output`, which is made non-blocking (nothing else may write
        /// to it; where that cannot be set, writes block).
        pub(crate) fn new(input: File, output: File) -> io::Result<Self> {
            let fd = output.as_raw_fd();
            // SAFETY: fcntl(2) on a descriptor `output` owns, changing only its O_NONBLOCK flag.
            unsafe {
                let flags = libc::fcntl(fd, libc::F_GETFL);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
                }
            }
            Ok(WorkerPipes { input, output })
        }

        /// Whether there is something to read (or the end) within `timeout`.
        pub(crate) fn readable(&self, timeout: Duration) -> bool {
            let mut poll = libc::pollfd {
                fd: self.input.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // Rounded up, so that a wait of less than a millisecond waits rather than spins.
            let millis = timeout.as_micros().div_ceil(1000);
            let millis = libc::c_int::try_from(millis).unwrap_or(libc::c_int::MAX);
            loop {
                // SAFETY: one valid pollfd for the call, on a descriptor `self` owns.
                let ready = unsafe { libc::poll(&mut poll, 1, millis) };
                if ready >= 0 {
                    return ready > 0;
                }
                if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    // Not pollable: a read decides (it waits).
                    return true;
                }
            }
        }

        /// Appends what stdin has (after [`WorkerPipes::readable`], without waiting) to
        /// `buffer`; false at its end (or on an error).
        pub(crate) fn read(&self, buffer: &mut Vec<u8>) -> bool {
            buffer.reserve(super::CHUNK);
            let filled = buffer.len();
            let spare = buffer.spare_capacity_mut();
            let read = loop {
                // SAFETY: reads at most `spare.len()` bytes into the vector's spare capacity,
                // valid (and not aliased) for the call.
                let read = unsafe {
                    libc::read(
                        self.input.as_raw_fd(),
                        spare.as_mut_ptr().cast(),
                        spare.len(),
                    )
                };
                if read >= 0 {
                    break read as usize;
                }
                if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                    break 0;
                }
            };
            // SAFETY: `read` bytes past `filled` were just written by read(2).
            unsafe { buffer.set_len(filled + read) };
            read > 0
        }

        /// Writes what stdout takes now: `WouldBlock` when it takes nothing.
        pub(crate) fn write(&self, bytes: &[u8]) -> io::Result<usize> {
            io::Write::write(&mut &self.output, bytes)
        }

        /// Waits until stdout takes more or stdin has something; whether stdin has.
        pub(crate) fn wait_to_write(&self) -> bool {
            let mut polls = [
                libc::pollfd {
                    fd: self.output.as_raw_fd(),
                    events: libc::POLLOUT,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.input.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two valid pollfds for the call, on descriptors `self` owns.
            let ready = unsafe { libc::poll(polls.as_mut_ptr(), 2, -1) };
            ready > 0 && polls[1].revents != 0
        }
    }
}

#[cfg(windows)]
mod imp {
    use std::{
        cell::RefCell,
        fs::File,
        io::{self, Read},
        sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError, channel},
        time::Duration,
    };

    /// See the module's documentation.
    pub(crate) struct WorkerPipes {
        /// What the reader thread read; closed at stdin's end.
        chunks: Receiver<Vec<u8>>,
        /// A chunk taken by [`WorkerPipes::readable`] and not yet read; `Some(empty)` is the end.
        taken: RefCell<Option<Vec<u8>>>,
        output: File,
    }

    impl WorkerPipes {
        /// Reads `input` on a thread of its own and writes `output`.
        pub(crate) fn new(mut input: File, output: File) -> io::Result<Self> {
            let (sender, chunks) = channel();
            std::thread::Builder::new()
                .name("worker-stdin".to_owned())
                .spawn(move || {
                    let mut chunk = vec![0; super::CHUNK];
                    loop {
                        match input.read(&mut chunk) {
                            Ok(0) => return,
                            Ok(read) => {
                                if sender.send(chunk[..read].to_vec()).is_err() {
                                    return;
                                }
                            }
                            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                            // A broken pipe is how Windows says the writer is gone.
                            Err(_) => return,
                        }
                    }
                })?;
            Ok(WorkerPipes {
                chunks,
                taken: RefCell::new(None),
                output,
            })
        }

        /// Whether there is something to read (or the end) within `timeout`.
        pub(crate) fn readable(&self, timeout: Duration) -> bool {
            let mut taken = self.taken.borrow_mut();
            if taken.is_some() {
                return true;
            }
            let chunk = if timeout.is_zero() {
                match self.chunks.try_recv() {
                    Ok(chunk) => chunk,
                    Err(TryRecvError::Empty) => return false,
                    Err(TryRecvError::Disconnected) => Vec::new(),
                }
            } else {
                match self.chunks.recv_timeout(timeout) {
                    Ok(chunk) => chunk,
                    Err(RecvTimeoutError::Timeout) => return false,
                    Err(RecvTimeoutError::Disconnected) => Vec::new(),
                }
            };
            *taken = Some(chunk);
            true
        }

        /// Appends what stdin has (after [`WorkerPipes::readable`], without waiting) to
        /// `buffer`; false at its end.
        pub(crate) fn read(&self, buffer: &mut Vec<u8>) -> bool {
            let first = match self.taken.borrow_mut().take() {
                Some(chunk) => chunk,
                None => match self.chunks.recv() {
                    Ok(chunk) => chunk,
                    Err(_) => Vec::new(),
                },
            };
            if first.is_empty() {
                return false;
            }
            buffer.extend_from_slice(&first);
            // Whatever else came meanwhile, up to a chunk's worth more; the end is seen next.
            while buffer.len() < super::CHUNK {
                match self.chunks.try_recv() {
                    Ok(chunk) => buffer.extend_from_slice(&chunk),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        *self.taken.borrow_mut() = Some(Vec::new());
                        break;
                    }
                }
            }
            true
        }

        /// Writes to stdout, waiting until it takes something (stdin is read meanwhile by the
        /// reader thread).
        pub(crate) fn write(&self, bytes: &[u8]) -> io::Result<usize> {
            io::Write::write(&mut &self.output, bytes)
        }

        /// Never called: [`WorkerPipes::write`] does not answer `WouldBlock`.
        pub(crate) fn wait_to_write(&self) -> bool {
            self.readable(Duration::from_millis(1))
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::*;

    /// A pipe's two ends as files.
    pub(crate) fn pipe() -> (File, File) {
        let (reader, writer) = io::pipe().unwrap();
        #[cfg(unix)]
        return (
            File::from(std::os::fd::OwnedFd::from(reader)),
            File::from(std::os::fd::OwnedFd::from(writer)),
        );
        #[cfg(windows)]
        return (
            File::from(std::os::windows::io::OwnedHandle::from(reader)),
            File::from(std::os::windows::io::OwnedHandle::from(writer)),
        );
    }

    #[test]
    fn worker_pipes_see_bytes_as_they_come_then_the_end_and_write_through() {
        use std::io::{Read, Write};
        let (input, mut host_writes) = pipe();
        let (mut host_reads, output) = pipe();
        let pipes = WorkerPipes::new(input, output).unwrap();
        let quick = Duration::from_millis(20);
        assert!(!pipes.readable(quick));
        assert!(!pipes.readable(Duration::ZERO));
        host_writes.write_all(b"one\n").unwrap();
        assert!(pipes.readable(Duration::from_secs(30)));
        let mut buffer = b"zero ".to_vec();
        assert!(pipes.read(&mut buffer));
        assert_eq!(buffer, b"zero one\n");
        assert!(!pipes.readable(quick));

        assert_eq!(pipes.write(b"out\n").unwrap(), 4);
        let mut got = [0; 4];
        host_reads.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"out\n");

        host_writes.write_all(b"two").unwrap();
        drop(host_writes);
        let mut rest = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while pipes.readable(Duration::from_secs(30)) && pipes.read(&mut rest) {
            assert!(std::time::Instant::now() < deadline, "no end seen");
        }
        assert_eq!(rest, b"two");
        // The end stays the end.
        assert!(pipes.readable(Duration::ZERO));
        assert!(!pipes.read(&mut rest));
    }
}
