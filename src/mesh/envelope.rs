//! What travels between shards in a batch: forwarded requests, their
//! answers, and relayed SSE events (see `forward` and `relay`).

use super::relays::{Event, Subscription};
use sluice::http::response::Rendered;
use sluice_shards::store::StreamKey;
use std::time::Instant;

/// A request travelling to the owner shard of its stream: its head as
/// received, which the owner parses again, and its body. Bytes rather than
/// the parsed head, target and route: each allocation that crosses to the
/// other shard is freed into the arena of the thread that made it, under a
/// lock that thread takes too (the parsed form was ten such frees per
/// forwarded append; glibc's lock waits were 2.5% of a pooled run).
pub struct Forward {
    /// The accepting shard and its id for the answer.
    pub from: usize,
    pub id: u64,
    pub head: Vec<u8>,
    pub body: Vec<u8>,
    /// When the accepting shard had the whole head (request latency starts there).
    pub started: Instant,
}

/// The owner's answer travelling back to the accepting shard, with the
/// request's buffers the accepting shard allocated, to be freed there (a
/// whole response is rendered into the request's head buffer).
pub struct Answer {
    pub id: u64,
    pub answered: Answered,
    /// The forwarded body's buffer.
    pub body: Vec<u8>,
}

/// How the owner answered a forwarded request.
pub enum Answered {
    /// A whole response.
    Response(Rendered),
    /// A live SSE read joined the owner's relay: write `bytes` (head and
    /// first control event), then follow the stream's relayed events from `from`.
    Live { owner: usize, key: Box<StreamKey>, handle: u64, pump: u64, bytes: Vec<u8>, from: u64 },
    /// Move the connection to the owner and replay the request there.
    Move,
}

/// An answer as its connection receives it.
pub enum Delivered {
    Response(Rendered),
    Live(Subscription),
    Move,
}

/// One item of a batch between two shards.
pub enum Envelope {
    Forward(Forward),
    Answer(Answer),
    /// A live event of a stream (incarnation `handle`) the receiver has SSE subscribers for.
    Event {
        key: Box<StreamKey>,
        handle: u64,
        event: Event,
    },
    /// That stream is gone: its relayed subscribers end.
    Gone {
        key: Box<StreamKey>,
        handle: u64,
    },
    /// A relayed subscriber on shard `from`, fed by pump `pump`, ended.
    Leave {
        from: usize,
        key: Box<StreamKey>,
        handle: u64,
        pump: u64,
    },
}
