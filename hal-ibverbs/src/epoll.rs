//! A minimal `epoll` set: one file descriptor that is readable when any of
//! the descriptors added to it is, so that a caller polls one fd for
//! several event sources.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An `epoll` instance (closed on drop).
#[derive(Debug)]
pub(crate) struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    /// `epoll_create1(EPOLL_CLOEXEC)`.
    pub(crate) fn new() -> io::Result<Epoll> {
        // SAFETY: no pointer is passed; a negative return is an error.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor this process owns and nothing
        // else holds.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Watches `fd` for readability (level-triggered). `fd` must stay open
    /// while the set is used (a closed fd leaves the set by itself).
    pub(crate) fn add(&self, fd: RawFd) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
        // SAFETY: `ev` is a valid `epoll_event` for the duration of the call.
        let r = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether any watched fd is readable, waiting up to `timeout_ms`
    /// (0: not at all; a signal counts as nothing ready).
    pub(crate) fn ready(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 1];
        // SAFETY: `ev` has room for the one event the count allows.
        let r = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), ev.as_mut_ptr(), 1, timeout_ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(false) } else { Err(e) };
        }
        Ok(r > 0)
    }
}

impl AsRawFd for Epoll {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
