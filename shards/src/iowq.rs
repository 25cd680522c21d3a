//! The cap on a shard thread's io_uring worker threads (issue 24, item 7).
//!
//! The kernel runs an io_uring operation that would block (a buffered write
//! or `fdatasync` of a stream file, an open that creates one) on a worker
//! thread, `iou-wrk-<tid>`, from a pool that belongs to the submitting
//! thread, shared by all its rings. Unless told otherwise the pool grows to
//! min(ring entries, 4 x online CPUs) threads for work that ends and to
//! `RLIMIT_NPROC` for work that may wait forever: 256 threads per shard on
//! a 64-CPU host during a many-stream flush. [`cap_workers`] sets the
//! limits in [`crate::tuning`] with `IORING_REGISTER_IOWQ_MAX_WORKERS`
//! (Linux 5.15); on an older kernel it logs one warning and the kernel's
//! defaults stay.
//!
//! The kernel sizes a thread's pool by the first ring the thread makes.
//! glommio probes the kernel's operations once per process, with a ring
//! of 2 entries, on the thread of the first executor: before the cap the
//! first shard had at most 2 workers for file work (the others 8, on 2
//! CPUs): its flush's [`crate::tuning::FLUSH_CONCURRENCY`] concurrent
//! stream writes ran 2 at a time.
//!
//! glommio 0.9 does not give out its rings' descriptors, and the kernel
//! applies the limits to the pool of the thread that calls (whichever ring
//! the call names), so the call is made on a ring of our own, one entry,
//! closed at once: the limits stay with the thread's pool, which lives as
//! long as the thread. Naming one of glommio's rings, found among the
//! process's descriptors, could name another shard's ring and race its
//! close; a ring of our own names nothing else.

use crate::tuning::{IOWQ_BOUNDED_WORKERS, IOWQ_UNBOUNDED_WORKERS};
use std::io::{Error, Result};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Once;

/// `io_uring_register` opcode (include/uapi/linux/io_uring.h).
const IORING_REGISTER_IOWQ_MAX_WORKERS: libc::c_uint = 19;

/// Caps the calling thread's io_uring workers at `bounded` for work that
/// ends (file reads, writes, syncs, opens) and `unbounded` for work that
/// may wait forever; 0 leaves a limit as it is. Returns the limits before.
/// Call on the executor's thread, after its rings exist.
pub fn cap(bounded: u32, unbounded: u32) -> Result<[u32; 2]> {
    // struct io_uring_params: 120 bytes, 8-aligned; zeroed, no flags.
    let mut params = [0u64; 15];
    // SAFETY: io_uring_setup(2) reads and fills the params we own; it
    // returns a new descriptor, which `OwnedFd` then owns and closes.
    let ring = unsafe {
        let fd = libc::syscall(libc::SYS_io_uring_setup, 1 as libc::c_uint, params.as_mut_ptr());
        if fd < 0 {
            return Err(Error::last_os_error());
        }
        OwnedFd::from_raw_fd(fd as libc::c_int)
    };
    let mut limits = [bounded, unbounded];
    // SAFETY: io_uring_register(2) reads two u32 limits from the array we
    // own and writes the previous two back into it.
    let r = unsafe {
        libc::syscall(
            libc::SYS_io_uring_register,
            ring.as_raw_fd(),
            IORING_REGISTER_IOWQ_MAX_WORKERS,
            limits.as_mut_ptr(),
            2 as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(Error::last_os_error());
    }
    Ok(limits)
}

/// Caps the calling shard thread's io_uring workers at the tuned limits; a
/// failure (a kernel before 5.15: `EINVAL`) is logged once per process and
/// the shard goes on with the kernel's defaults.
pub fn cap_workers() {
    static WARNED: Once = Once::new();
    match cap(IOWQ_BOUNDED_WORKERS, IOWQ_UNBOUNDED_WORKERS) {
        Ok([bounded, unbounded]) => tracing::debug!(
            bounded = IOWQ_BOUNDED_WORKERS,
            unbounded = IOWQ_UNBOUNDED_WORKERS,
            was_bounded = bounded,
            was_unbounded = unbounded,
            "io_uring worker threads capped"
        ),
        Err(e) => WARNED.call_once(|| {
            tracing::warn!(
                error = %e,
                "cannot cap io_uring worker threads (IORING_REGISTER_IOWQ_MAX_WORKERS needs Linux 5.15): \
                 the kernel's limit stays, up to 4 per CPU per shard"
            )
        }),
    }
}
