//! The shard's append-only log: framed records in preallocated segment files.

pub mod blocks;
pub mod marks;
pub use sluice_core::record;
pub mod recovery;
pub mod segment;
pub mod writer;

pub use record::{AppendRecord, CreateRecord, ForkRecord, PlacedRecord, ProducerStamp, Record, Seal, SnapshotRecord};
pub use writer::{Appended, FsyncMode, Log, LogConfig, LogError, Resume};
