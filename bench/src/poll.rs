//! A minimal level-triggered epoll(7) wrapper: one instance per client thread,
//! each registered socket tagged with its connection index.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub const READABLE: u32 = libc::EPOLLIN as u32;
pub const WRITABLE: u32 = libc::EPOLLOUT as u32;
/// Error or hang-up: treat as readable (the read reports what happened).
pub const BROKEN: u32 = (libc::EPOLLERR | libc::EPOLLHUP | libc::EPOLLRDHUP) as u32;

pub struct Poller {
    epfd: RawFd,
    events: Vec<libc::epoll_event>,
}

impl Poller {
    pub fn new(capacity: usize) -> io::Result<Poller> {
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Poller { epfd, events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(16)] })
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, interest: u32, token: usize) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: interest, u64: token as u64 };
        if unsafe { libc::epoll_ctl(self.epfd, op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn add(&self, fd: RawFd, interest: u32, token: usize) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, interest, token)
    }

    pub fn modify(&self, fd: RawFd, interest: u32, token: usize) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, interest, token)
    }

    pub fn remove(&self, fd: RawFd) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        unsafe { libc::epoll_ctl(self.epfd, libc::EPOLL_CTL_DEL, fd, &mut ev) };
    }

    /// Waits up to `timeout`; returns how many events [`Poller::event`] holds.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<usize> {
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        let n = unsafe { libc::epoll_wait(self.epfd, self.events.as_mut_ptr(), self.events.len() as i32, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(0) } else { Err(e) };
        }
        Ok(n as usize)
    }

    /// The i-th ready event of the last wait: (token, event bits).
    pub fn event(&self, i: usize) -> (usize, u32) {
        let e = self.events[i];
        (e.u64 as usize, e.events)
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        unsafe { libc::close(self.epfd) };
    }
}
