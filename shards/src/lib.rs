//! sluice-shards: everything one shard owns, below the HTTP edge.
//!
//! - [`core`]: the deterministic protocol core (no I/O, no clock).
//! - [`log`]: framed records in preallocated segments, group commit, recovery.
//! - [`store`]: a shard's streams and buckets, applying core decisions to the log.
//! - [`ids`], [`offset`]: names, placement and offset tokens.
//! - [`stats`]: lock-free per-shard counters and histograms for metrics.

pub mod codec;
pub mod core;
pub mod ids;
pub mod log;
pub mod offset;
pub mod signal;
pub mod stats;
pub mod store;
