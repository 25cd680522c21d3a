//! A shard's streams and buckets: applies protocol-core decisions through the
//! log, publishes them to readers once durable, and replays the log at start.
//!
//! Everything here runs on the shard's own executor thread; no state is shared
//! with other shards. Bucket existence is replicated to every shard by the
//! bucket's home shard (see the binary's `mesh` module).

use crate::core::append::{self, AppendDecision, AppendError, AppendInput};
use crate::core::create::{self, CreateDecision, CreateError, CreateInput};
use crate::core::StreamState;
use crate::ids::BUILTIN_BUCKET;
use crate::log::recovery::{self, Position};
use crate::log::{AppendRecord, CreateRecord, Log, LogError, ProducerStamp, Record};
use crate::signal::Signal;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// `(bucket_id, stream_id)`.
pub type StreamKey = (String, String);

/// A live stream and the signal its live readers park on.
pub struct Entry {
    pub state: StreamState,
    pub signal: Rc<Signal>,
}

/// Bucket as this shard knows it.
#[derive(Clone, Copy, Debug)]
pub struct BucketInfo {
    pub created_ms: u64,
    /// A delete is being decided: no new streams meanwhile.
    pub deleting: bool,
}

#[derive(Default)]
pub struct Store {
    /// Streams by name, sorted so bucket listings are range scans.
    pub streams: BTreeMap<StreamKey, Entry>,
    handles: HashMap<u64, StreamKey>,
    next_handle: u64,
    /// Buckets every shard knows about (replicated).
    pub buckets: HashMap<String, BucketInfo>,
    /// Buckets whose authoritative record lives in this shard's log.
    pub home_buckets: HashMap<String, u64>,
}

/// Why a store operation failed.
#[derive(Debug, PartialEq, Eq)]
pub enum StoreError {
    NoBucket,
    NoStream,
    /// The bucket is being deleted.
    BucketBusy,
    Create(CreateError),
    Append(AppendError),
    Log(LogError),
}

impl From<LogError> for StoreError {
    fn from(e: LogError) -> Self {
        StoreError::Log(e)
    }
}

/// What an append did, for the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Tail after this append (its Stream-Next-Offset).
    pub next_offset: u64,
    pub closed: bool,
    /// New data was written (vs. duplicate / close-only).
    pub wrote: bool,
    /// Producer epoch and seq to echo.
    pub producer: Option<(u64, u64)>,
    /// Record ordinals assigned: [start, next).
    pub records: (u64, u64),
}

/// A shard: its store and its log.
pub struct Shard {
    pub id: usize,
    pub store: RefCell<Store>,
    pub log: Log,
}

impl Store {
    /// Replays one recovered record.
    pub fn replay(&mut self, record: Record<'_>, at: Position) {
        match record {
            Record::BucketCreate { bucket, at_ms } => {
                self.home_buckets.insert(bucket, at_ms);
            }
            Record::BucketDelete { bucket } => {
                self.home_buckets.remove(&bucket);
            }
            Record::Create(c) => {
                self.next_handle = self.next_handle.max(c.handle + 1);
                self.insert(&c);
            }
            Record::Append(a) => {
                if let Some(e) = self.by_handle(a.handle) {
                    let tail = e.state.apply_append(&a, at.segment, at.data_pos);
                    e.state.publish(tail, a.close);
                }
            }
            Record::Delete { handle } => {
                if let Some(key) = self.handles.remove(&handle) {
                    self.streams.remove(&key);
                }
            }
            Record::Attrs { handle, attrs } => {
                if let Some(e) = self.by_handle(handle) {
                    e.state.attrs = attrs;
                }
            }
            Record::Snapshot(_) | Record::Retention { .. } | Record::SnapshotDelete { .. } => {}
        }
    }

    fn insert(&mut self, c: &CreateRecord) {
        let key = (c.bucket.clone(), c.stream.clone());
        if let Some(old) = self.streams.remove(&key) {
            self.handles.remove(&old.state.handle);
        }
        self.handles.insert(c.handle, key.clone());
        self.streams.insert(
            key,
            Entry {
                state: StreamState::from_create(c),
                signal: Rc::new(Signal::default()),
            },
        );
    }

    fn by_handle(&mut self, handle: u64) -> Option<&mut Entry> {
        let key = self.handles.get(&handle)?;
        self.streams.get_mut(key)
    }

    /// Whether a bucket exists (the built-in one always does).
    pub fn bucket_exists(&self, bucket: &str) -> bool {
        bucket == BUILTIN_BUCKET || self.buckets.contains_key(bucket)
    }

    /// The live entry for a key, dropping it first if it has expired.
    /// Expired streams are removed from memory; the caller logs the delete.
    pub fn live(&mut self, key: &StreamKey, now_ms: u64) -> Option<&mut Entry> {
        let expired = self.streams.get(key)?.state.lifetime.expired(now_ms);
        if expired {
            let e = self.streams.remove(key)?;
            self.handles.remove(&e.state.handle);
            e.signal.notify();
            return None;
        }
        self.streams.get_mut(key)
    }

    /// Number of live streams in a bucket at `now_ms`.
    pub fn count_in_bucket(&self, bucket: &str, now_ms: u64) -> u64 {
        self.bucket_range(bucket)
            .filter(|(_, e)| !e.state.lifetime.expired(now_ms))
            .count() as u64
    }

    /// Streams of a bucket, in stream-id order.
    pub fn bucket_range<'a>(
        &'a self,
        bucket: &'a str,
    ) -> impl Iterator<Item = (&'a StreamKey, &'a Entry)> + 'a {
        self.streams
            .range((bucket.to_string(), String::new())..)
            .take_while(move |(k, _)| k.0 == bucket)
    }
}

impl Shard {
    /// Opens shard `id`'s log under `cfg.dir`, replaying it.
    pub async fn open(id: usize, cfg: crate::log::LogConfig) -> Result<Shard, String> {
        let mut store = Store::default();
        let tail = recovery::scan(&cfg.dir, |r, at| store.replay(r, at))?;
        let mut segments = Vec::new();
        for &no in &tail.segments {
            segments.push(
                crate::log::segment::open_segment(&cfg.dir, no)
                    .await
                    .map_err(|e| format!("cannot open segment {no}: {e}"))?,
            );
        }
        let (active, write_pos) = match segments.pop() {
            Some(s) => (s, tail.write_pos),
            None => (
                crate::log::segment::create_segment(&cfg.dir, 1, cfg.segment_size)
                    .await
                    .map_err(|e| {
                        format!(
                            "cannot create the first log segment in {}: {e}",
                            cfg.dir.display()
                        )
                    })?,
                0,
            ),
        };
        for (b, at) in &store.home_buckets {
            store.buckets.insert(
                b.clone(),
                BucketInfo {
                    created_ms: *at,
                    deleting: false,
                },
            );
        }
        let log = Log::start(cfg, active, write_pos, segments);
        Ok(Shard {
            id,
            store: RefCell::new(store),
            log,
        })
    }

    /// Logs `records` (reserving room first) and returns the last commit number.
    /// Must be followed by `log.durable` before acknowledging.
    async fn reserve(&self, bytes: usize) -> Result<(), LogError> {
        self.log.reserve(bytes + 256).await
    }

    /// PUT: create a stream or confirm an existing one.
    pub async fn create(
        &self,
        key: &StreamKey,
        input: &CreateInput,
        body: &[u8],
        now_ms: u64,
    ) -> Result<(bool, u64, bool), StoreError> {
        self.reserve(
            body.len() + key.0.len() + key.1.len() + input.content_type.len() + input.attrs.len(),
        )
        .await?;
        let (lsn, created, handle) = {
            let mut st = self.store.borrow_mut();
            let gone = self.expire(&mut st, key, now_ms);
            if !st.bucket_exists(&key.0) {
                return Err(StoreError::NoBucket);
            }
            if st.buckets.get(&key.0).is_some_and(|b| b.deleting) {
                return Err(StoreError::BucketBusy);
            }
            let existing = st.streams.get(key).map(|e| &e.state);
            let decision = create::decide(existing, input, body).map_err(StoreError::Create)?;
            match decision {
                CreateDecision::Exists => {
                    let e = st.streams.get(key).expect("exists");
                    let _ = gone;
                    (self.log.assigned(), false, e.state.handle)
                }
                CreateDecision::Create { data, messages } => {
                    let handle = st.next_handle;
                    st.next_handle += 1;
                    let c = CreateRecord {
                        handle,
                        bucket: key.0.clone(),
                        stream: key.1.clone(),
                        content_type: input.content_type.clone(),
                        created_ms: now_ms,
                        ttl_secs: input.ttl_secs,
                        expires_at_ms: input.expires_at_ms,
                        closed: input.closed && data.is_empty(),
                        fork: None,
                        fork_records: 0,
                        attrs: input.attrs.clone(),
                    };
                    let mut lsn = self.log.append(&Record::Create(c.clone())).lsn;
                    st.insert(&c);
                    if !data.is_empty() {
                        let a = AppendRecord {
                            handle,
                            at_ms: now_ms,
                            stream_seq: None,
                            producer: None,
                            close: input.closed,
                            messages,
                            data: &data,
                        };
                        let at = self.log.append(&Record::Append(a.clone()));
                        lsn = at.lsn;
                        let e = st.by_handle(handle).expect("just inserted");
                        e.state.apply_append(&a, at.segment, at.data_pos);
                    }
                    (lsn, true, handle)
                }
            }
        };
        self.log.durable(lsn).await?;
        let mut st = self.store.borrow_mut();
        let e = st.by_handle(handle).ok_or(StoreError::NoStream)?;
        if created {
            let (tail, closed) = (e.state.tail, e.state.closed);
            e.state.publish(tail, closed);
        }
        Ok((created, e.state.visible.tail, e.state.visible.closed))
    }

    /// POST: append (and/or close).
    pub async fn append(
        &self,
        key: &StreamKey,
        input: &AppendInput<'_>,
        now_ms: u64,
    ) -> Result<AppendOutcome, StoreError> {
        self.reserve(
            input.body.len()
                + input.stream_seq.map_or(0, str::len)
                + input.producer.as_ref().map_or(0, |p| p.id.len()),
        )
        .await?;
        let (lsn, handle, out) = {
            let mut st = self.store.borrow_mut();
            self.expire(&mut st, key, now_ms);
            let e = st.streams.get_mut(key).ok_or(StoreError::NoStream)?;
            e.state.lifetime.touch(now_ms);
            let decision = append::decide(&e.state, input).map_err(StoreError::Append)?;
            let records_before = e.state.messages.len() as u64;
            match decision {
                AppendDecision::Duplicate { producer } => {
                    let out = AppendOutcome {
                        next_offset: e.state.tail,
                        closed: e.state.closed,
                        wrote: false,
                        producer,
                        records: (records_before, records_before),
                    };
                    (self.log.assigned(), e.state.handle, out)
                }
                AppendDecision::Close | AppendDecision::Write { .. } => {
                    let (data, messages) = match decision {
                        AppendDecision::Write { data, messages } => (data, messages),
                        _ => (Vec::new(), Vec::new()),
                    };
                    let a = AppendRecord {
                        handle: e.state.handle,
                        at_ms: now_ms,
                        stream_seq: if data.is_empty() {
                            None
                        } else {
                            input.stream_seq.map(str::to_string)
                        },
                        producer: input.producer.clone(),
                        close: input.close,
                        messages,
                        data: &data,
                    };
                    let at = self.log.append(&Record::Append(a.clone()));
                    let next_offset = e.state.apply_append(&a, at.segment, at.data_pos);
                    let out = AppendOutcome {
                        next_offset,
                        closed: e.state.closed,
                        wrote: !data.is_empty(),
                        producer: input.producer.as_ref().map(|p| (p.epoch, p.seq)),
                        records: (records_before, e.state.messages.len() as u64),
                    };
                    (at.lsn, e.state.handle, out)
                }
            }
        };
        self.log.durable(lsn).await?;
        let mut st = self.store.borrow_mut();
        if let Some(e) = st.by_handle(handle) {
            e.state.publish(out.next_offset, out.closed);
            e.signal.notify();
        }
        Ok(out)
    }

    /// DELETE a stream.
    pub async fn delete(&self, key: &StreamKey, now_ms: u64) -> Result<(), StoreError> {
        self.reserve(16).await?;
        let lsn = {
            let mut st = self.store.borrow_mut();
            self.expire(&mut st, key, now_ms);
            let e = st.streams.remove(key).ok_or(StoreError::NoStream)?;
            st.handles.remove(&e.state.handle);
            e.signal.notify();
            self.log
                .append(&Record::Delete {
                    handle: e.state.handle,
                })
                .lsn
        };
        self.log.durable(lsn).await?;
        Ok(())
    }

    /// Replaces a stream's attributes.
    pub async fn set_attrs(
        &self,
        key: &StreamKey,
        attrs: Vec<u8>,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        self.reserve(attrs.len()).await?;
        let lsn = {
            let mut st = self.store.borrow_mut();
            self.expire(&mut st, key, now_ms);
            let e = st.streams.get_mut(key).ok_or(StoreError::NoStream)?;
            if e.state.attrs == attrs {
                self.log.assigned()
            } else {
                e.state.attrs = attrs.clone();
                self.log
                    .append(&Record::Attrs {
                        handle: e.state.handle,
                        attrs,
                    })
                    .lsn
            }
        };
        self.log.durable(lsn).await?;
        Ok(())
    }

    /// Drops `key` if expired, logging the delete so a restart agrees.
    fn expire(&self, st: &mut Store, key: &StreamKey, now_ms: u64) -> bool {
        let handle = st.streams.get(key).map(|e| e.state.handle);
        if st.live(key, now_ms).is_none() {
            if let Some(handle) = handle {
                // Reserved room is not guaranteed here; the record is tiny and
                // the reserve slack (256 bytes) covers it.
                self.log.append(&Record::Delete { handle });
                return true;
            }
        }
        false
    }

    /// Logs a bucket record in this (home) shard and waits until durable.
    pub async fn log_bucket(&self, record: Record<'_>) -> Result<(), StoreError> {
        self.reserve(128).await?;
        let lsn = self.log.append(&record).lsn;
        self.log.durable(lsn).await?;
        Ok(())
    }

    /// Reads `len` bytes of stream data starting at message `first`.
    pub async fn read_messages(&self, parts: &[(u32, u64, u32)]) -> std::io::Result<Vec<u8>> {
        let total: usize = parts.iter().map(|p| p.2 as usize).sum();
        let mut out = Vec::with_capacity(total);
        let mut i = 0;
        while i < parts.len() {
            // Coalesce physically adjacent messages into one read.
            let (seg, pos, mut len) = (parts[i].0, parts[i].1, parts[i].2 as u64);
            let mut j = i + 1;
            while j < parts.len() && parts[j].0 == seg && parts[j].1 == pos + len && len < (4 << 20)
            {
                len += u64::from(parts[j].2);
                j += 1;
            }
            let r = self.log.read(seg, pos, len as usize).await?;
            out.extend_from_slice(&r);
            i = j;
        }
        Ok(out)
    }
}

/// The stamp helper used by the HTTP edge.
pub fn stamp(id: &str, epoch: u64, seq: u64) -> ProducerStamp {
    ProducerStamp {
        id: id.to_string(),
        epoch,
        seq,
    }
}
