//! sluice-shards: everything one shard owns, below the HTTP edge.
//!
//! - [`core`]: the deterministic protocol core (no I/O, no clock), the
//!   `sluice-core` crate.
//! - [`log`]: framed records in preallocated segments, group commit, recovery.
//! - [`store`]: a shard's streams and buckets, applying core decisions to the
//!   log; its write decisions (`store::decide`) run over any journal (live log or simulation).
//! - [`ids`], [`offset`]: names, placement and offset tokens.
//! - [`stats`]: lock-free per-shard counters and histograms for metrics.
//! - [`storage`]: the store's file operations, real or with injected faults.
//! - [`tick`]: the timer every executor keeps armed (a glommio stall bound).
//! - [`iowq`]: the cap on a shard thread's io_uring worker threads.
//! - [`tasks`]: counted task spawning; [`woken`]: polls a future only when it woke.
//! - [`every`]: a repeated warning, logged at most once per interval.
//! - [`heap`]: freed heap memory given back to the kernel.
//! - [`hold`]: the backup's hold on a shard's clean-up (issue 27).
//! - [`tiered`]: stream bytes held only in the object store, and their reader (issue 27).

/// The protocol core lives in its own crate, without glommio.
pub use sluice_core as core;
pub use sluice_core::codec;
pub mod every;
pub mod handles;
pub mod heap;
pub mod hold;
pub mod ids;
pub mod iowq;
pub mod log;
pub mod offset;
pub mod signal;
pub mod stats;
pub mod storage;
pub mod store;
pub mod tasks;
#[cfg(test)]
mod test_dir;
pub mod tick;
pub mod tiered;
pub mod tuning;
pub mod woken;
