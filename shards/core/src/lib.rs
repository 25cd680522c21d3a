//! sluice-core: the protocol core: per-stream state and the decisions the
//! Durable Streams protocol asks for, the journal's record kinds and their
//! codec, with no I/O, no clock and no executor (no glommio).
//!
//! Like quinn-proto, it is deterministic: callers pass the current time in
//! milliseconds and get back a decision (what to log, what to answer). The
//! shard runtime performs the I/O and applies the same state transitions when
//! it replays the log at start-up, so live state and recovered state come
//! from one code path.

pub mod append;
pub mod batch;
pub mod body;
pub mod codec;
pub mod coordinates;
pub mod create;
pub mod cursor;
pub mod error;
pub mod index;
pub mod int;
pub mod json;
pub mod key;
pub mod limits;
pub mod line_error;
pub mod media;
pub mod producer;
pub mod record;
pub mod snapshot;
pub mod stream;
pub mod ttl;

pub use error::Error;
pub use media::{is_json, media_type, same_media_type};
pub use stream::StreamState;
