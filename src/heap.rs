//! The allocator's thresholds, fixed once at start (issue 25: memory given
//! back when streams go idle).
//!
//! glibc raises its mmap threshold to the size of the largest mmapped block
//! freed (up to 32 MiB) and its trim threshold to twice that. A server that
//! once freed a large buffer (the checkpoint it loaded or encoded, a
//! restore's decoded streams) then serves allocations of megabytes from the
//! shards' arenas and keeps up to 64 MiB free at the top of each arena for
//! good: a non-main arena's top is given back only past the trim threshold,
//! and `malloc_trim` never trims it. Fixed thresholds keep blocks of
//! [`MMAP_THRESHOLD`] and more out of the arenas and give back a top of
//! [`TRIM_THRESHOLD`] and more when it is freed.
//!
//! Measured with `bench/many.sh`'s streams (100k of 10 B, two shards), RSS
//! per stream: 871 -> 776 B once flushed, 821 -> 587 B after a restart.
//! 128 KiB thresholds (glibc's defaults, kept fixed) gave 754 and 587 B;
//! 4 and 8 MiB 860 and 610 B. 1 MiB keeps the 256 KiB read chunks in
//! the arenas (an mmapped block costs a map, page faults and an unmap per
//! use).

/// Blocks this large and larger are mapped on their own, and unmapped when freed.
pub const MMAP_THRESHOLD: usize = 1 << 20;
/// Free memory at the top of an arena beyond this is given back at once.
pub const TRIM_THRESHOLD: usize = 2 << 20;

/// Fixes the thresholds; call before any thread starts.
pub fn configure() {
    #[cfg(target_env = "gnu")]
    for (param, value) in [(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD), (libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD)] {
        let value = i32::try_from(value).expect("a threshold fits in an int");
        // SAFETY: mallopt only changes the allocator's parameters.
        let ok = unsafe { libc::mallopt(param, value) };
        assert_eq!(ok, 1, "glibc takes malloc parameter {param} = {value}");
    }
}
