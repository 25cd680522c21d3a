//! One stream's state: configuration, tail, closure, producers, record
//! ordinals and where its bytes live ([`Body`]), plus the transitions that
//! change them.
//!
//! Two tails are kept. The body's tail moves when an append is decided (so
//! concurrent appends get disjoint offsets); `visible` moves when the append
//! is durable, and is all that readers, HEAD and live tails ever see.

use super::body::{Body, Point};
use super::producer::Producers;
use super::ttl::Lifetime;
use crate::record::{AppendRecord, CreateRecord, ForkRecord, PlacedRecord, ProducerStamp, SnapshotRecord};
use std::rc::Rc;

pub use crate::key::StreamKey;

/// The durable, reader-visible part of the state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Visible {
    pub tail: u64,
    pub closed: bool,
    /// Messages (and so JSON records) visible.
    pub messages: u64,
}

#[derive(Clone, Debug)]
pub struct StreamState {
    pub handle: u64,
    /// Bucket and stream id (one allocation, shared with the store's map).
    pub key: Rc<StreamKey>,
    /// Shared by the streams of one content type (the store holds each once).
    pub content_type: Rc<str>,
    pub json: bool,
    pub created_ms: u64,
    pub last_write_ms: u64,
    pub lifetime: Lifetime,
    pub closed: bool,
    /// What few streams set (attributes, fork origin, closing stamp,
    /// Stream-Seq): one pointer for the rest.
    pub rare: Option<Box<Rare>>,
    pub producers: Producers,
    /// Where the bytes and message boundaries live.
    pub body: Body,
    pub visible: Visible,
    /// Live forks whose parent is this stream.
    pub forks: u32,
    /// Deleted while forks remain: every request gets 410.
    pub deleted: bool,
    /// The latest visible snapshot.
    pub snapshot: Option<Box<Snapshot>>,
    /// Earliest retained offset; reads below it get 410.
    pub retained: u64,
    /// Index of the first retained message (record ordinal F).
    pub first_message: u64,
}

/// The parts of a stream's state that few streams set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rare {
    /// Canonical attribute JSON, empty when none.
    pub attrs: Vec<u8>,
    /// Fork origin, as requested (for idempotent re-creation and release).
    pub fork: Option<ForkRecord>,
    /// The producer stamp whose request closed the stream.
    pub closed_by: Option<ProducerStamp>,
    pub last_stream_seq: Option<String>,
}

/// A published snapshot and where its blob lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub offset: u64,
    pub content_type: String,
    pub digest: String,
    pub len: u32,
    pub blob: Blob,
}

/// Where a snapshot's bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Blob {
    /// Not flushed yet: held in memory.
    Pending(Rc<Vec<u8>>),
    /// In the snapshot file the flush of this generation wrote.
    Stored(u64),
}

impl StreamState {
    /// State of a stream as its create record describes it.
    pub fn from_create(c: &CreateRecord) -> StreamState {
        let rare = Rare { attrs: c.attrs.clone(), fork: c.fork.clone(), ..Rare::default() };
        let (body, retained, first_message) = match &c.fork {
            None => (Body::new(Vec::new(), 0, 0), 0, 0),
            Some(f) => {
                let (base, base_record) = f.ancestors.last().map_or((0, 0), |a| (a.end, a.end_record));
                (Body::new(f.ancestors.clone(), base, base_record), f.retained, f.first_record)
            }
        };
        let tail = body.tail();
        let messages = body.records();
        StreamState {
            handle: c.handle,
            key: StreamKey::shared(&c.bucket, &c.stream),
            json: crate::media::is_json(&c.content_type),
            content_type: Rc::from(c.content_type.as_str()),
            created_ms: c.created_ms,
            last_write_ms: c.created_ms,
            lifetime: Lifetime { ttl_secs: c.ttl_secs, expires_at_ms: c.expires_at_ms, last_access_ms: c.created_ms },
            closed: c.closed,
            rare: rare.boxed(),
            producers: Producers::default(),
            body,
            visible: Visible { tail, closed: c.closed, messages },
            forks: 0,
            deleted: false,
            snapshot: None,
            retained,
            first_message,
        }
    }

    /// Canonical attribute JSON, empty when none.
    pub fn attrs(&self) -> &[u8] {
        self.rare.as_ref().map_or(&[], |r| &r.attrs)
    }

    /// Fork origin, as requested (for idempotent re-creation and release).
    pub fn fork(&self) -> Option<&ForkRecord> {
        self.rare.as_ref()?.fork.as_ref()
    }

    /// The producer stamp whose request closed the stream.
    pub fn closed_by(&self) -> Option<&ProducerStamp> {
        self.rare.as_ref()?.closed_by.as_ref()
    }

    /// The Stream-Seq of the last append that carried one.
    pub fn last_stream_seq(&self) -> Option<&str> {
        self.rare.as_ref()?.last_stream_seq.as_deref()
    }

    /// The rare parts, for a change (made when the stream had none).
    pub fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }

    /// The decided tail (what the next append starts at).
    pub fn tail(&self) -> u64 {
        self.body.tail()
    }

    /// Messages decided so far (the next record ordinal).
    pub fn records(&self) -> u64 {
        self.body.records()
    }

    /// Applies a decided append: its bytes join the unflushed tail, and
    /// its producer joins the at most `max_producers` the stream
    /// remembers (the store's setting). Returns the tail after it.
    /// Visibility is advanced separately.
    pub fn apply_append(&mut self, a: &AppendRecord<'_>, max_producers: usize) -> u64 {
        let records_before = self.records();
        let mut one = [0];
        self.body.push(a.data, super::body::lengths(a.data.len(), &a.messages, &mut one));
        self.appended(a, records_before, max_producers)
    }

    /// Applies a decided placed append: its bytes are in the stream files
    /// already (see [`PlacedRecord`]). Returns the tail after it.
    pub fn apply_placed(&mut self, p: &PlacedRecord, max_producers: usize) -> u64 {
        let records_before = self.records();
        assert_eq!(p.at, self.tail() - self.body.base, "a placed append lands at the tail");
        self.body.place(&p.append.messages);
        self.appended(&p.append, records_before, max_producers)
    }

    /// The state changes append `a` makes besides its bytes (its `data`
    /// is not read: a placed append's are in the stream files).
    fn appended(&mut self, a: &AppendRecord<'_>, records_before: u64, max_producers: usize) -> u64 {
        if a.close {
            self.closed = true;
            if a.producer.is_some() || self.closed_by().is_some() {
                self.rare_mut().closed_by = a.producer.clone();
            }
        }
        if let Some(s) = &a.stream_seq {
            self.rare_mut().last_stream_seq = Some(s.clone());
        }
        if let Some(p) = &a.producer {
            let ack = (self.tail(), records_before, self.records());
            self.producers.record(p, ack, max_producers);
        }
        self.last_write_ms = self.last_write_ms.max(a.at_ms);
        self.lifetime.touch(a.at_ms);
        self.tail()
    }

    /// Makes everything decided up to `(tail, records)` visible to readers
    /// (called once durable for the live path; at once during recovery).
    /// Appends become durable in order, so this only ever moves forward.
    pub fn publish(&mut self, tail: u64, records: u64, closed: bool) {
        assert!(tail <= self.tail(), "visible tail {tail} beyond the decided tail {}", self.tail());
        assert!(records <= self.records(), "visible records {records} beyond the decided {}", self.records());
        if tail >= self.visible.tail {
            self.visible.tail = tail;
            self.visible.messages = self.visible.messages.max(records);
        }
        self.visible.closed |= closed;
    }

    /// What memory alone says about visible `offset` (None when only the
    /// stream files can tell; the shard's index then looks it up).
    pub fn point_in_memory(&self, offset: u64) -> Option<Point> {
        if offset >= self.visible.tail {
            let record = (offset == self.visible.tail).then_some(self.visible.messages);
            return Some(Point { offset, record });
        }
        let c = self.body.ram_at(offset)?;
        let k = c.record_at(offset);
        Some(Point { offset, record: (c.start_of(k) == offset).then_some(k) })
    }

    /// Publishes the snapshot `r`, whose blob is not flushed yet.
    pub fn set_snapshot(&mut self, r: &SnapshotRecord<'_>) {
        self.snapshot = Some(Box::new(Snapshot {
            offset: r.offset,
            content_type: r.content_type.clone(),
            digest: r.digest.clone(),
            len: r.body.len() as u32,
            blob: Blob::Pending(Rc::new(r.body.to_vec())),
        }));
    }

    /// Moves the retention boundary to `offset`, a visible message boundary
    /// that starts record `record`.
    pub fn retain_from(&mut self, offset: u64, record: u64) {
        assert!(offset <= self.visible.tail && record <= self.visible.messages, "retention beyond the visible tail");
        if offset > self.retained {
            self.retained = offset;
            self.first_message = record;
        }
    }
}

impl Rare {
    /// Boxed, or None when it holds nothing.
    pub fn boxed(self) -> Option<Box<Rare>> {
        (self != Rare::default()).then(|| Box::new(self))
    }
}

/// Test fixtures shared by the core's unit tests.
#[cfg(test)]
pub(crate) mod fixture {
    use super::StreamState;
    use crate::record::{AppendRecord, CreateRecord};

    /// A fresh stream of `content_type` created at t=100 ms.
    pub fn stream(content_type: &str) -> StreamState {
        let c = CreateRecord::bare(1, "b", "s", content_type, 100);
        StreamState::from_create(&c)
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
    fn appends_join_the_tail_and_publish_moves_visibility() {
        let mut s = create(false);
        assert_eq!(s.apply_append(&append(b"hello", vec![], false), 16), 5);
        assert_eq!(s.apply_append(&append(b"ab", vec![], true), 16), 7);
        assert_eq!(s.visible, Visible::default());
        s.publish(5, 1, false);
        assert_eq!(s.visible, Visible { tail: 5, closed: false, messages: 1 });
        s.publish(7, 2, true);
        assert_eq!(s.visible, Visible { tail: 7, closed: true, messages: 2 });
        // An older publish arriving late changes nothing.
        s.publish(5, 1, false);
        assert_eq!(s.visible, Visible { tail: 7, closed: true, messages: 2 });
        assert_eq!(s.body.unflushed().map(|c| &c.ends[..]), Some(&[5, 7][..]));
    }

    #[test]
    fn json_records_are_separate_messages() {
        let mut s = create(true);
        s.apply_append(&append(b"1\n22\n", vec![2, 3], false), 16);
        s.publish(5, 2, false);
        assert_eq!(s.records(), 2);
        assert_eq!(s.body.unflushed().map(|c| &c.ends[..]), Some(&[2, 5][..]));
    }

    #[test]
    #[should_panic(expected = "beyond the decided")]
    fn publishing_beyond_the_decided_tail_is_a_bug() {
        create(false).publish(1, 0, false);
    }
}
