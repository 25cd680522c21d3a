//! Giving freed heap memory back to the kernel.
//!
//! glibc keeps what a thread's arena freed for its next allocations; a
//! large buffer freed among long-lived data (a checkpoint, a flush's
//! finished tail buffers) would hold its pages for the life of the
//! process. A large transient buffer is made a mapping of its own
//! ([`buffer`]), returned whole when freed; what the heap holds free
//! anyway, [`give_back`] returns (`malloc_trim`).

use crate::tuning::{MAPPED_FROM, OWN_MAPPING};

/// An empty buffer with room for `len` bytes; past [`MAPPED_FROM`] its
/// capacity is beyond glibc's mmap ceiling, so it is a mapping of its own.
pub fn buffer(len: usize) -> Vec<u8> {
    match len > MAPPED_FROM {
        true => Vec::with_capacity(len.max(OWN_MAPPING + 1)),
        false => Vec::with_capacity(len),
    }
}

/// Returns the heap's free pages to the kernel (a no-op off glibc).
pub fn give_back() {
    // SAFETY: malloc_trim only returns free heap memory to the kernel.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
}
