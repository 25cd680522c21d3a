//! The store's write decisions over any [`Journal`]: each validates a request
//! against a [`Store`] through the protocol core, logs the records it decides
//! and applies them to the in-memory state, with no I/O and no await. The
//! shard runs them against its [`Log`](crate::log::Log) (then waits for
//! durability); the deterministic simulation runs the same code against an
//! in-memory journal. Each decision builds a record, logs it, then applies
//! it with [`Store::commit`]; replay applies the same records through the
//! same [`Store::apply`] ([`Store::replay`]). Appends apply through
//! `StreamState::apply_append` on the entry in hand, as `Store::apply` does,
//! and their caller marks the stream written, as it does too.

use crate::core::append::{self, AppendDecision, AppendInput};
use crate::core::body::{lengths, Point};
use crate::core::create::{self, CreateDecision, CreateInput};
use crate::core::snapshot;
use crate::log::{AppendRecord, Appended, CreateRecord, PlacedRecord, Record, SnapshotRecord};
use crate::store::{AppendOutcome, Applied, Entry, ForkPlan, Store, StoreError, StreamKey};
use std::borrow::Cow;

/// Where decided records go.
pub trait Journal {
    /// Encodes `record` at the tail (room was reserved).
    fn append(&self, record: &Record<'_>) -> Appended;
    /// The commit number of the newest record.
    fn assigned(&self) -> u64;
}

impl Journal for crate::log::Log {
    fn append(&self, record: &Record<'_>) -> Appended {
        crate::log::Log::append(self, record)
    }

    fn assigned(&self) -> u64 {
        crate::log::Log::assigned(self)
    }
}

/// A decision: the commit number to wait for, and what to answer.
pub type Decided<T> = Result<(u64, T), StoreError>;

/// What a create decided, for the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// The record ordinal the initial body started at (`None`: the stream existed).
    pub start: Option<u64>,
    pub handle: u64,
    pub tail: u64,
    pub closed: bool,
    /// The record tail (the ordinal the next record gets).
    pub records: u64,
}

impl Store {
    /// Drops `key` if expired: logs the delete (soft while forks read the
    /// stream), then applies it, so a restart agrees. The callers reserved
    /// log room; the reserve slack covers this record.
    pub fn expire(&mut self, log: &impl Journal, key: &StreamKey, now_ms: u64) {
        // One lookup on the common path: a live stream that has not expired.
        let Some((handle, forked)) = self
            .streams
            .get(key)
            .filter(|e| !e.state.deleted && e.state.lifetime.expired(now_ms))
            .map(|e| (e.state.handle, e.state.forks > 0))
        else {
            return;
        };
        let record = if forked { Record::SoftDelete { handle } } else { Record::Delete { handle } };
        log.append(&record);
        self.commit(record);
        debug_assert!(self.live(key, now_ms).is_none(), "an expired stream is dropped or becomes a tombstone");
    }

    /// PUT: creates a stream (with its initial body) or confirms an existing one.
    pub fn decide_create(
        &mut self,
        log: &impl Journal,
        key: &StreamKey,
        input: &CreateInput,
        body: &[u8],
        fork: Option<&ForkPlan>,
        now_ms: u64,
    ) -> Decided<Created> {
        self.expire(log, key, now_ms);
        if self.is_tombstone(key) {
            return Err(create::CONFLICT);
        }
        if let (Some(e), Some(plan)) = (self.streams.get(key), fork) {
            let same = e.state.fork().is_some_and(|f| {
                f.from == plan.record.from && f.offset == plan.record.offset && f.sub == plan.record.sub
            });
            if !same {
                return Err(create::CONFLICT);
            }
        }
        if !self.bucket_exists(key.bucket()) {
            return Err(StoreError::NoBucket);
        }
        if self.buckets.get(key.bucket()).is_some_and(|b| b.deleting) {
            return Err(StoreError::BucketBusy);
        }
        let existing = self.streams.get(key).map(|e| &e.state);
        let decision = create::decide(existing, input, body)?;
        let (lsn, created, handle) = match decision {
            CreateDecision::Exists => {
                // Answer with the state as decided now (the creator's
                // records included): it is durable once `assigned` is.
                let e = self.streams.get(key).expect("exists");
                (log.assigned(), None, e.state.handle)
            }
            CreateDecision::Create { mut data, mut messages } => {
                if let Some(plan) = fork {
                    // The materialized sub-offset prefix comes first; each
                    // part naming no lengths is one message of its bytes.
                    let (mut one, mut other) = ([0], [0]);
                    let mut lens = lengths(plan.prefix.len(), &plan.prefix_messages, &mut one).to_vec();
                    lens.extend_from_slice(lengths(data.len(), &messages, &mut other));
                    let mut all = plan.prefix.clone();
                    all.extend_from_slice(&data);
                    (data, messages) = (all, lens);
                }
                let handle = self.next_handle;
                self.next_handle += 1;
                let c = CreateRecord {
                    handle,
                    bucket: key.bucket().to_string(),
                    stream: key.stream().to_string(),
                    content_type: input.content_type.clone(),
                    created_ms: now_ms,
                    ttl_secs: input.ttl_secs,
                    expires_at_ms: input.expires_at_ms,
                    closed: input.closed,
                    fork: fork.map(|f| f.record.clone()),
                    attrs: input.attrs.clone(),
                    initial: data,
                    initial_messages: messages,
                };
                let rec = Record::Create(c);
                let at = log.append(&rec);
                let Applied::Created { start } = self.commit(rec) else { unreachable!("a create creates") };
                let e = self.by_handle(handle).expect("just inserted");
                (e.settle, e.created) = (at.lsn, at.lsn);
                (at.lsn, Some(start), handle)
            }
        };
        let s = &self.by_handle(handle).expect("decided on a live entry").state;
        Ok((lsn, Created { start: created, handle: s.handle, tail: s.tail(), closed: s.closed, records: s.records() }))
    }

    /// POST: one append (and/or close); returns the handle and the outcome.
    /// With `placed` (the CRC32C of `input.body`), the body was written at
    /// the stream's tail in its data file already (`Shard::place`) and the
    /// decision must write it as sent: the record names the bytes.
    pub fn decide_append(
        &mut self,
        log: &impl Journal,
        key: &StreamKey,
        input: &AppendInput<'_>,
        now_ms: u64,
        placed: Option<u32>,
    ) -> Decided<(u64, AppendOutcome)> {
        let cap = self.max_producers();
        let write = |e: &mut Entry| {
            let (lsn, out) = append_one(log, (&mut *e, cap), input, now_ms, placed)?;
            Ok((lsn, (e.state.handle, out)))
        };
        // One lookup on the common path, a live stream that has not expired;
        // any other goes through `expire` and `entry` as every write does.
        let live = |e: &&mut Entry| !e.state.deleted && !e.state.lifetime.expired(now_ms);
        let decided: Decided<(u64, AppendOutcome)> = match self.streams.get_mut(key).filter(live) {
            Some(e) => write(e),
            None => {
                self.expire(log, key, now_ms);
                write(self.entry(key)?)
            }
        };
        if let Ok((_, (handle, _))) = &decided {
            self.written.insert(*handle);
        }
        decided
    }

    /// DELETE a stream: hard when nothing forks from it, soft (410) otherwise.
    pub fn decide_delete(&mut self, log: &impl Journal, key: &StreamKey, now_ms: u64) -> Decided<()> {
        self.expire(log, key, now_ms);
        let e = self.entry(key)?;
        let handle = e.state.handle;
        if e.state.forks > 0 {
            let record = Record::SoftDelete { handle };
            e.settle = log.append(&record).lsn;
            let settle = e.settle;
            self.commit(record);
            Ok((settle, ()))
        } else {
            let record = Record::Delete { handle };
            self.removed = log.append(&record).lsn;
            self.commit(record);
            Ok((self.removed, ()))
        }
    }

    /// PUT {stream}/snapshot/{offset}: publishes a snapshot; answers its offset and digest.
    #[allow(clippy::too_many_arguments)]
    pub fn decide_snapshot(
        &mut self,
        log: &impl Journal,
        key: &StreamKey,
        at: Point,
        content_type: &str,
        body: &[u8],
        expected: Option<&str>,
        now_ms: u64,
    ) -> Decided<(u64, String)> {
        self.expire(log, key, now_ms);
        let e = self.live(key, now_ms).ok_or(StoreError::NoStream)?;
        let offset = at.offset;
        match snapshot::decide_publish(&e.state, at, content_type, body, expected) {
            Err(e) => Err(e),
            Ok(snapshot::Publish::Same(d)) => Ok((log.assigned(), (offset, d))),
            Ok(snapshot::Publish::Write(digest)) => {
                let rec = SnapshotRecord {
                    handle: e.state.handle,
                    offset,
                    content_type: content_type.to_string(),
                    digest,
                    body,
                };
                let (handle, digest) = (rec.handle, rec.digest.clone());
                let record = Record::Snapshot(rec);
                let lsn = log.append(&record).lsn;
                self.commit(record);
                self.by_handle(handle).expect("decided on a live entry").settle = lsn;
                Ok((lsn, (offset, digest)))
            }
        }
    }

    /// PUT {stream}/retention/{offset}: moves the earliest retained offset.
    pub fn decide_retention(&mut self, log: &impl Journal, key: &StreamKey, at: Point, now_ms: u64) -> Decided<u64> {
        self.expire(log, key, now_ms);
        let e = self.live(key, now_ms).ok_or(StoreError::NoStream)?;
        let offset = at.offset;
        match snapshot::decide_retention(&e.state, at) {
            Err(e) => Err(e),
            Ok(false) => Ok((log.assigned(), offset)),
            Ok(true) => {
                let record = at.record.expect("retention moves only to a message boundary");
                let handle = e.state.handle;
                let retention = Record::Retention { handle, offset, record };
                let lsn = log.append(&retention).lsn;
                self.commit(retention);
                self.by_handle(handle).expect("decided on a live entry").settle = lsn;
                Ok((lsn, offset))
            }
        }
    }

    /// Replaces a stream's attributes.
    pub fn decide_attrs(&mut self, log: &impl Journal, key: &StreamKey, attrs: Vec<u8>, now_ms: u64) -> Decided<()> {
        self.expire(log, key, now_ms);
        let e = self.entry(key)?;
        if e.state.attrs() != attrs {
            let record = Record::Attrs { handle: e.state.handle, attrs };
            e.settle = log.append(&record).lsn;
            self.commit(record);
        }
        Ok((log.assigned(), ()))
    }
}

/// Decides and logs one append against `e` (no await: the caller reserved
/// room); `placed` as for [`Store::decide_append`].
pub fn append_one(
    log: &impl Journal,
    (e, max_producers): (&mut Entry, usize),
    input: &AppendInput<'_>,
    now_ms: u64,
    placed: Option<u32>,
) -> Result<(u64, AppendOutcome), StoreError> {
    e.state.lifetime.touch(now_ms);
    let decision = append::decide(&e.state, input)?;
    let records_before = e.state.records();
    let (data, messages) = match decision {
        AppendDecision::Duplicate { producer } => {
            // A retry answers with what the original append answered.
            let ack = input.producer.as_ref().and_then(|p| e.state.producers.get(&p.id)).map(|p| p.ack);
            let (next_offset, records) = match ack {
                Some((offset, start, next)) if producer.is_some() => (offset, (start, next)),
                _ => (e.state.tail(), (records_before, records_before)),
            };
            let out = AppendOutcome { next_offset, closed: e.state.closed, wrote: false, producer, records };
            return Ok((log.assigned(), out));
        }
        AppendDecision::Write { data, messages } => (data, messages),
        AppendDecision::Close => (std::borrow::Cow::Borrowed(&[][..]), Vec::new()),
    };
    let a = AppendRecord {
        handle: e.state.handle,
        at_ms: now_ms,
        stream_seq: if data.is_empty() { None } else { input.stream_seq.map(str::to_string) },
        producer: input.producer.clone(),
        close: input.close,
        messages,
        data: &data,
    };
    let (at, next_offset) = match placed {
        None => (log.append(&Record::Append(a.clone())), e.state.apply_append(&a, max_producers)),
        Some(crc) => {
            assert!(
                matches!(&data, Cow::Borrowed(d) if d.len() == input.body.len() && !d.is_empty()),
                "placed bytes are the body as sent"
            );
            let messages = lengths(data.len(), &a.messages, &mut [0]).to_vec();
            let p = PlacedRecord {
                append: AppendRecord { messages, data: &[], ..a },
                at: e.state.tail() - e.state.body.base,
                len: data.len() as u64,
                crc,
            };
            (log.append(&Record::Placed(p.clone())), e.state.apply_placed(&p, max_producers))
        }
    };
    let out = AppendOutcome {
        next_offset,
        closed: e.state.closed,
        wrote: !data.is_empty(),
        producer: input.producer.as_ref().map(|p| (p.epoch, p.seq)),
        records: (records_before, e.state.records()),
    };
    Ok((at.lsn, out))
}
