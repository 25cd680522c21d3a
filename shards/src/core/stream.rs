//! One stream's state: configuration, tail, closure, producers, record
//! ordinals and the message index, plus the transitions that change them.
//!
//! Two tails are kept. `tail` moves when an append is decided (so concurrent
//! appends get disjoint offsets); `visible` moves when the append is durable,
//! and is all that readers, HEAD and live tails ever see.

use super::producer::Producers;
use super::ttl::Lifetime;
use crate::log::{AppendRecord, CreateRecord, ForkRecord, ProducerStamp, SnapshotRecord};

/// One message (an append, or one JSON record) and where its bytes live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// Stream offset of the first byte.
    pub offset: u64,
    pub len: u32,
    /// The shard whose segments hold the bytes (an ancestor's, for forks).
    pub shard: u32,
    pub segment: u32,
    /// File position in the segment.
    pub pos: u64,
}

/// The durable, reader-visible part of the state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Visible {
    pub tail: u64,
    pub closed: bool,
    /// Messages (and so JSON records) visible.
    pub messages: usize,
}

#[derive(Clone, Debug)]
pub struct StreamState {
    pub handle: u64,
    pub bucket: String,
    pub name: String,
    pub content_type: String,
    pub json: bool,
    pub created_ms: u64,
    pub last_write_ms: u64,
    pub lifetime: Lifetime,
    /// Canonical attribute JSON, empty when none.
    pub attrs: Vec<u8>,
    pub tail: u64,
    pub closed: bool,
    /// The producer stamp whose request closed the stream.
    pub closed_by: Option<ProducerStamp>,
    pub last_stream_seq: Option<String>,
    pub producers: Producers,
    pub messages: Vec<Message>,
    pub visible: Visible,
    /// The shard this stream lives on.
    pub shard: u32,
    /// Fork origin, as requested (for idempotent re-creation and release).
    pub fork: Option<ForkRecord>,
    /// Live forks whose parent is this stream.
    pub forks: u32,
    /// Deleted while forks remain: every request gets 410.
    pub deleted: bool,
    /// The latest visible snapshot.
    pub snapshot: Option<Snapshot>,
    /// Earliest retained offset; reads below it get 410.
    pub retained: u64,
    /// Index of the first retained message (record ordinal F).
    pub first_message: usize,
    /// Log segment holding this stream's create record (its oldest record).
    pub first_segment: u32,
}

/// A published snapshot and where its blob lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub offset: u64,
    pub content_type: String,
    pub digest: String,
    pub segment: u32,
    pub pos: u64,
    pub len: u32,
}

impl StreamState {
    /// State of a stream as its create record describes it, remembering at
    /// most `max_producers` producers.
    pub fn from_create(c: &CreateRecord, shard: u32, max_producers: usize) -> StreamState {
        let mut messages = Vec::new();
        let mut tail = 0;
        for e in c.fork.iter().flat_map(|f| f.inherited.iter()) {
            messages.push(Message { offset: tail, len: e.len, shard: e.shard, segment: e.segment, pos: e.pos });
            tail += u64::from(e.len);
        }
        let inherited = messages.len();
        let mut fork = c.fork.clone();
        if let Some(f) = &mut fork {
            f.inherited = Vec::new();
        }
        StreamState {
            handle: c.handle,
            bucket: c.bucket.clone(),
            name: c.stream.clone(),
            json: super::is_json(&c.content_type),
            content_type: c.content_type.clone(),
            created_ms: c.created_ms,
            last_write_ms: c.created_ms,
            lifetime: Lifetime { ttl_secs: c.ttl_secs, expires_at_ms: c.expires_at_ms, last_access_ms: c.created_ms },
            attrs: c.attrs.clone(),
            tail,
            closed: c.closed,
            closed_by: None,
            last_stream_seq: None,
            producers: Producers::new(max_producers),
            messages,
            visible: Visible { tail, closed: c.closed, messages: inherited },
            shard,
            fork,
            forks: 0,
            deleted: false,
            snapshot: None,
            retained: 0,
            first_message: 0,
            first_segment: 0,
        }
    }

    /// Applies a decided append whose bytes sit at `(segment, data_pos)`.
    /// Returns the tail after it. Visibility is advanced separately.
    pub fn apply_append(&mut self, a: &AppendRecord<'_>, segment: u32, data_pos: u64) -> u64 {
        let records_before = self.messages.len() as u64;
        let mut pos = data_pos;
        if a.messages.is_empty() && !a.data.is_empty() {
            self.push_message(a.data.len() as u32, segment, pos);
        }
        for &len in &a.messages {
            self.push_message(len, segment, pos);
            pos += u64::from(len);
        }
        if a.close {
            self.closed = true;
            self.closed_by = a.producer.clone();
        }
        if let Some(s) = &a.stream_seq {
            self.last_stream_seq = Some(s.clone());
        }
        if let Some(p) = &a.producer {
            let ack = (self.tail, records_before, self.messages.len() as u64);
            self.producers.record(p, ack);
        }
        self.last_write_ms = self.last_write_ms.max(a.at_ms);
        self.lifetime.touch(a.at_ms);
        self.tail
    }

    fn push_message(&mut self, len: u32, segment: u32, pos: u64) {
        self.messages.push(Message { offset: self.tail, len, shard: self.shard, segment, pos });
        self.tail += u64::from(len);
    }

    /// Makes everything decided so far visible to readers (called once durable
    /// for the live path; at once during recovery).
    pub fn publish(&mut self, up_to_tail: u64, closed: bool) {
        assert!(up_to_tail <= self.tail, "visible tail {up_to_tail} beyond the decided tail {}", self.tail);
        if up_to_tail >= self.visible.tail {
            self.visible.tail = up_to_tail;
            // Appends become durable in order: advance instead of searching.
            let mut n = self.visible.messages;
            while n < self.messages.len() && self.messages[n].offset < up_to_tail {
                n += 1;
            }
            self.visible.messages = n;
        }
        self.visible.closed |= closed;
    }

    /// Index of the first visible message that ends after `offset`.
    pub fn message_at(&self, offset: u64) -> usize {
        self.messages[..self.visible.messages].partition_point(|m| m.offset + u64::from(m.len) <= offset)
    }

    /// Publishes the snapshot `r`, whose blob sits at `(segment, pos)`.
    pub fn set_snapshot(&mut self, r: &SnapshotRecord<'_>, segment: u32, pos: u64) {
        self.snapshot = Some(Snapshot {
            offset: r.offset,
            content_type: r.content_type.clone(),
            digest: r.digest.clone(),
            segment,
            pos,
            len: r.body.len() as u32,
        });
    }

    /// Moves the retention boundary to `offset` (a visible message boundary).
    pub fn retain_from(&mut self, offset: u64) {
        self.retained = self.retained.max(offset);
        self.first_message = self.messages.partition_point(|m| m.offset < self.retained);
    }

    /// Offset of record ordinal `r` (the tail when `r` is the record tail).
    pub fn record_offset(&self, r: usize) -> Option<u64> {
        match r.cmp(&self.visible.messages) {
            std::cmp::Ordering::Less => Some(self.messages[r].offset),
            std::cmp::Ordering::Equal => Some(self.visible.tail),
            std::cmp::Ordering::Greater => None,
        }
    }

    /// Whether `offset` is a message boundary within the visible stream.
    pub fn is_boundary(&self, offset: u64) -> bool {
        offset == self.visible.tail
            || self.messages[..self.visible.messages].binary_search_by_key(&offset, |m| m.offset).is_ok()
    }
}

/// Test fixtures shared by the core's unit tests.
#[cfg(test)]
pub(crate) mod fixture {
    use super::StreamState;
    use crate::log::{AppendRecord, CreateRecord};

    /// A fresh stream of `content_type` created at t=100 ms.
    pub fn stream(content_type: &str) -> StreamState {
        let c = CreateRecord {
            handle: 1,
            bucket: "b".into(),
            stream: "s".into(),
            content_type: content_type.into(),
            created_ms: 100,
            ttl_secs: None,
            expires_at_ms: None,
            closed: false,
            fork: None,
            attrs: vec![],
            initial: vec![],
            initial_messages: vec![],
        };
        StreamState::from_create(&c, 0, 16)
    }

    /// A plain append record for stream handle 1 at t=200 ms.
    pub fn append(data: &[u8], messages: Vec<u32>, close: bool) -> AppendRecord<'_> {
        AppendRecord { handle: 1, at_ms: 200, stream_seq: None, producer: None, close, messages, data }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::fixture::{append, stream};

    fn create(json: bool) -> StreamState {
        stream(if json { "application/json" } else { "text/plain" })
    }

    #[test]
    fn appends_index_messages_and_publish_moves_visibility() {
        let mut s = create(false);
        assert_eq!(s.apply_append(&append(b"hello", vec![], false), 1, 1000), 5);
        assert_eq!(s.apply_append(&append(b"ab", vec![], true), 1, 2000), 7);
        assert_eq!(s.visible, Visible::default());
        s.publish(5, false);
        assert_eq!(s.visible, Visible { tail: 5, closed: false, messages: 1 });
        s.publish(7, true);
        assert_eq!(s.visible, Visible { tail: 7, closed: true, messages: 2 });
        assert_eq!(s.messages[1], Message { offset: 5, len: 2, shard: 0, segment: 1, pos: 2000 });
        assert_eq!(s.message_at(0), 0);
        assert_eq!(s.message_at(5), 1);
        assert_eq!(s.message_at(6), 1);
        assert_eq!(s.message_at(7), 2);
        assert!(s.is_boundary(5) && !s.is_boundary(3) && s.is_boundary(7));
    }

    #[test]
    fn json_records_are_separate_messages() {
        let mut s = create(true);
        s.apply_append(&append(b"1,22,", vec![2, 3], false), 1, 10);
        s.publish(5, false);
        assert_eq!(s.messages.len(), 2);
        assert_eq!(s.messages[1], Message { offset: 2, len: 3, shard: 0, segment: 1, pos: 12 });
    }
}
