//! A descriptor that becomes readable when an inbox gets something: what a listener's pumps give
//! the host as `Pump::readable_fd`, so the host waits for every session in its own event loop
//! instead of keeping a reader thread (and a writer thread) per session.
//!
//! Linux: one `eventfd` per inbox. Other Unix systems (macOS): a socket pair (two descriptors).
//! Windows: none (the host's event loop waits on Unix descriptors only), so [`Wake::new`] fails
//! with [`std::io::ErrorKind::Unsupported`], the inbox has no descriptor and the host reads each
//! session from a thread of its own, as it does any pump without `readable_fd`. The
//! receiver [`drain`](Wake::drain)s it before it looks at the queue, and a sender
//! [`signal`](Wake::signal)s after it has queued, so a message queued after the drain always
//! leaves the descriptor readable: no wake-up is lost.

#[cfg(target_os = "linux")]
mod imp {
    use std::{
        fs::File,
        io::{self, Read, Write},
        os::fd::{AsRawFd, FromRawFd},
    };

    pub(super) struct Imp(File);

    impl Imp {
        pub(super) fn new() -> io::Result<Self> {
            // SAFETY: eventfd takes no pointers; the result is checked before use.
            let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `fd` is a new descriptor that nothing else owns.
            Ok(Self(unsafe { File::from_raw_fd(fd) }))
        }

        pub(super) fn signal(&self) {
            // Fails only when the counter would overflow (it is then readable anyway).
            let _ = (&self.0).write(&1u64.to_ne_bytes());
        }

        pub(super) fn drain(&self) {
            let mut counter = [0u8; 8];
            let _ = (&self.0).read(&mut counter);
        }

        pub(super) fn fd(&self) -> i32 {
            self.0.as_raw_fd()
        }
    }
}

#[cfg(all(unix, not(target_os = "linux")))]
mod imp {
    use std::{
        io::{self, Read, Write},
        os::{fd::AsRawFd, unix::net::UnixStream},
    };

    pub(super) struct Imp {
        reader: UnixStream,
        writer: UnixStream,
    }

    impl Imp {
        pub(super) fn new() -> io::Result<Self> {
            let (reader, writer) = UnixStream::pair()?;
            reader.set_nonblocking(true)?;
            writer.set_nonblocking(true)?;
            Ok(Self { reader, writer })
        }

        pub(super) fn signal(&self) {
            // A full buffer is already readable.
            let _ = (&self.writer).write(&[1]);
        }

        pub(super) fn drain(&self) {
            let mut buffer = [0u8; 256];
            while matches!((&self.reader).read(&mut buffer), Ok(n) if n > 0) {}
        }

        pub(super) fn fd(&self) -> i32 {
            self.reader.as_raw_fd()
        }
    }
}

#[cfg(not(unix))]
mod imp {
    /// Never made: see the module documentation.
    pub(super) enum Imp {}

    impl Imp {
        pub(super) fn new() -> std::io::Result<Self> {
            Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "no descriptor for the host to wait on, on this system",
            ))
        }
        pub(super) fn signal(&self) {
            match *self {}
        }
        pub(super) fn drain(&self) {
            match *self {}
        }
        pub(super) fn fd(&self) -> i32 {
            match *self {}
        }
    }
}

/// See the module documentation.
pub struct Wake(imp::Imp);

impl Wake {
    pub fn new() -> std::io::Result<Self> {
        imp::Imp::new().map(Self)
    }

    /// Makes the descriptor readable. Never blocks.
    pub fn signal(&self) {
        self.0.signal();
    }

    /// Makes the descriptor not readable until the next [`signal`](Self::signal).
    pub fn drain(&self) {
        self.0.drain();
    }

    /// The descriptor; valid as long as `self`.
    pub fn fd(&self) -> i32 {
        self.0.fd()
    }
}
