//! Giving freed heap memory back to the kernel.
//!
//! glibc keeps what a thread's arena freed for its next allocations; a
//! large buffer freed among long-lived data (a restart's checkpoint, a
//! flush's finished tail buffers) would hold its pages for the life of the
//! process. [`give_back`] returns every whole free page (`malloc_trim`).

/// Returns the heap's free pages to the kernel (a no-op off glibc).
pub fn give_back() {
    // SAFETY: malloc_trim only returns free heap memory to the kernel.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
}
