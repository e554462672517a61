//! A connection's reading half that sees a close from another thread.
//!
//! Unix: `shutdown(2)` from the closing thread wakes a read blocked in another (it returns end
//! of input), so the reader just reads. Windows: `shutdown` aborts no pending receive, so the
//! reader waits for input with `WSAPoll`, at most [`CHECK`] at a time, and looks at the close
//! flags in between. (A read timeout would do the same with less code, but Winsock leaves a
//! connection whose receive timed out "in an indeterminate state".)

use std::{
    io,
    net::{Shutdown, TcpStream},
    time::Duration,
};

/// How often a Windows reader with nothing to read looks whether the pump was closed.
#[cfg_attr(not(windows), allow(dead_code))]
const CHECK: Duration = Duration::from_millis(100);

/// `stream`, read until `stopped` says the pump or its listener was closed: then the connection
/// is shut down (the closer may not have reached it yet: the reader removes it from the
/// listener's list as it ends) and reading gives end of input.
pub(crate) struct Wakeable<F> {
    pub(crate) stream: TcpStream,
    pub(crate) stopped: F,
}

impl<F: Fn() -> bool> io::Read for Wakeable<F> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        loop {
            if (self.stopped)() {
                let _ = self.stream.shutdown(Shutdown::Both);
                return Ok(0);
            }
            if readable(&self.stream, CHECK)? {
                return (&self.stream).read(buffer);
            }
        }
    }
}

/// Whether `stream` has input (or an end, or an error) now: a blocking read then wakes on
/// `shutdown`, so there is nothing to wait for here.
#[cfg(not(windows))]
fn readable(_stream: &TcpStream, _within: Duration) -> io::Result<bool> {
    Ok(true)
}

/// Whether `stream` has input (or an end, or an error) within `within`.
#[cfg(windows)]
fn readable(stream: &TcpStream, within: Duration) -> io::Result<bool> {
    use std::os::windows::io::AsRawSocket;

    use windows_sys::Win32::Networking::WinSock::{POLLRDNORM, WSAPOLLFD, WSAPoll};

    let mut poll = WSAPOLLFD {
        fd: stream.as_raw_socket() as usize,
        events: POLLRDNORM,
        revents: 0,
    };
    let millis = i32::try_from(within.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one valid WSAPOLLFD for a socket `stream` owns, for the call only.
    let ready = unsafe { WSAPoll(&mut poll, 1, millis) };
    if ready < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(ready > 0)
}
