//! Cross-shard messages: batches of forwarded requests and their answers,
//! connection handoff (live SSE) to a stream's owner shard, and request/reply
//! for bucket-level operations (the only state shared by shards). Below the
//! per-shard state: the types of what travels ([`envelope`]), the tables
//! that match replies to their askers ([`replies`]), the per-destination
//! queues ([`batches`]), the relays' state ([`relays`]), and the sending
//! end every message leaves by ([`link`]; `held` in tests).

pub mod answerers;
pub mod batches;
pub mod envelope;
#[cfg(test)]
pub mod held;
pub mod link;
pub mod relays;
pub mod replies;

use envelope::Envelope;
pub use link::{Link, PeerGone};
use sluice_shards::store::StreamKey;
use std::os::fd::RawFd;

/// One stream in a bucket listing.
#[derive(Clone, Debug)]
pub struct Listed {
    pub stream_id: String,
    pub closed: bool,
    pub content_type: String,
    pub tail: u64,
    pub created_ms: u64,
    pub last_write_ms: u64,
}

/// Bucket-level requests between shards.
#[derive(Debug)]
pub enum BucketReq {
    /// To the home shard: create the bucket.
    Create { bucket: String },
    /// To the home shard: delete the bucket if empty.
    Delete { bucket: String },
    /// To every shard: the bucket now exists.
    Added { bucket: String, created_ms: u64 },
    /// To every shard: stop creating streams in the bucket and count them.
    PrepareDelete { bucket: String },
    /// To every shard: the delete happened (`commit`) or was called off.
    FinishDelete { bucket: String, commit: bool },
    /// To every shard: count live streams in the bucket.
    Count { bucket: String },
    /// To every shard: streams after `after` matching `prefix`, at most `limit`.
    List { bucket: String, prefix: String, after: String, limit: usize },
    /// To a fork source's shard: take a reference and describe the fork point.
    ForkGrant { key: Box<StreamKey>, offset: Option<u64>, sub: u64 },
    /// To a fork source's shard: a fork of stream `handle` is gone.
    ForkRelease { handle: u64 },
    /// At start: a recovered fork still references stream `handle`.
    ForkRef { handle: u64 },
    /// To every shard: a snapshot of its metrics for /v1/metrics.
    Metrics,
    /// Subscription index, append and wake-event messages.
    Subs(crate::subscriptions::SubsReq),
}

#[derive(Debug)]
pub enum BucketRep {
    /// The request's outcome.
    Done(Result<(), sluice_shards::core::Error>),
    Count(u64),
    Listing(Vec<Listed>),
    Fork(Result<sluice_shards::store::ForkGrant, sluice_shards::core::Error>),
    Metrics(Box<crate::metrics::ShardSnapshot>),
}

pub enum Message {
    /// Requests for streams the receiver owns, and answers to its requests.
    Batch {
        from: usize,
        envelopes: Vec<Envelope>,
    },
    /// A connection whose next request (live SSE) targets a stream this shard owns.
    Handoff {
        fd: RawFd,
        buffered: Vec<u8>,
    },
    Request {
        from: usize,
        id: u64,
        req: BucketReq,
    },
    Reply {
        id: u64,
        rep: BucketRep,
    },
}
