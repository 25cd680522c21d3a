//! A shard's streams and buckets: applies protocol-core decisions through the
//! log, publishes them to readers once durable, and replays the log at start.
//!
//! Everything here runs on the shard's own executor thread; no state is shared
//! with other shards. Bucket existence is replicated to every shard by the
//! bucket's home shard (see the binary's `mesh` module).

use crate::core::append::AppendInput;
use crate::core::create::CreateInput;
use crate::core::StreamState;
use crate::ids::BUILTIN_BUCKET;
use crate::log::recovery::{self, Position};
use crate::log::{CreateRecord, Log, LogError, Record};
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
    /// The newest live event, encoded once for every reader at its position.
    pub shared_event: Option<Rc<SharedEvent>>,
    /// Commit number of the newest change readers can observe outside the
    /// append path (create, attrs, retention, snapshot, soft delete):
    /// readers wait until it is durable ([`Shard::settle`]).
    pub settle: u64,
    /// Commit number of its create record.
    pub created: u64,
}

impl Entry {
    /// Whether a bucket listing taken at durable mark `durable` (see
    /// [`Shard::listing_mark`]) shows this stream at `now_ms`: its create is
    /// durable, and no durable delete or expiry hides it.
    pub fn listed(&self, durable: u64, now_ms: u64) -> bool {
        self.created <= durable
            && !(self.state.deleted && self.settle <= durable)
            && !self.state.lifetime.expired(now_ms)
    }
}

/// An encoded live-read event (SSE data + control) covering `[from, end)`,
/// shared by every subscriber that reaches `from` while it is current.
pub struct SharedEvent {
    pub from: u64,
    pub end: u64,
    pub closed: bool,
    /// The cursor interval the event carries.
    pub cursor: u64,
    pub bytes: Vec<u8>,
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
    pub(crate) next_handle: u64,
    /// Buckets every shard knows about (replicated).
    pub buckets: HashMap<String, BucketInfo>,
    /// Buckets whose authoritative record lives in this shard's log.
    pub home_buckets: HashMap<String, u64>,
    /// This shard's id.
    pub shard: u32,
    /// Fork references to drop on other shards: (parent shard, parent handle).
    pub releases: Vec<(u32, u64)>,
    /// Notified when `releases` grows.
    pub release_signal: Rc<Signal>,
    /// Segment holding each home bucket's create record.
    bucket_segments: HashMap<String, u32>,
    /// Something was deleted since the last space reclamation.
    pub reclaim_due: bool,
    /// Commit number of the newest hard delete: a reader that finds no
    /// stream answers only once it is durable.
    pub(crate) removed: u64,
    /// Producers each stream remembers (see `core::producer::Producers`).
    max_producers: usize,
}

/// What a parent shard hands a new fork: the inherited index and the
/// materialized sub-offset prefix.
#[derive(Debug, Clone)]
pub struct ForkGrant {
    pub parent_handle: u64,
    pub content_type: String,
    pub ttl_secs: Option<u64>,
    pub expires_at_ms: Option<u64>,
    pub inherited: Vec<crate::log::Extent>,
    /// Location of the first `sub` units after the fork offset, copied into the fork.
    pub prefix: Vec<(u32, u32, u64, u32)>,
    pub prefix_messages: Vec<u32>,
}

/// What a PUT did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateOutcome {
    pub created: bool,
    pub tail: u64,
    pub closed: bool,
    /// Record ordinals the initial body created: [start, next).
    pub records: (u64, u64),
}

/// A snapshot or retention position as the request named it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotAt {
    Offset(u64),
    /// `?record=N` on a JSON stream.
    Record(u64),
}

/// A fork ready to be created on this shard.
#[derive(Debug, Clone)]
pub struct ForkPlan {
    pub record: crate::log::ForkRecord,
    /// Materialized prefix bytes and (JSON) their message lengths.
    pub prefix: Vec<u8>,
    pub prefix_messages: Vec<u32>,
}

/// The store's failures are the protocol's errors.
pub use crate::core::Error as StoreError;

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
    /// This shard's log directory.
    dir: std::path::PathBuf,
    /// Other shards' segments that forks here inherit bytes from.
    foreign: RefCell<HashMap<(u32, u32), Rc<glommio::io::BufferedFile>>>,
}

impl Store {
    /// An empty store for shard `shard` whose streams remember at most
    /// `max_producers` idempotent producers each.
    pub fn new(shard: u32, max_producers: usize) -> Store {
        assert!(max_producers > 0, "a producer table must hold at least one producer");
        Store { shard, max_producers, ..Store::default() }
    }

    /// Replays one recovered record.
    pub fn replay(&mut self, record: Record<'_>, at: Position) {
        match record {
            Record::BucketCreate { bucket, at_ms } => {
                self.bucket_segments.insert(bucket.clone(), at.segment);
                self.home_buckets.insert(bucket, at_ms);
            }
            Record::BucketDelete { bucket } => {
                self.bucket_segments.remove(&bucket);
                self.home_buckets.remove(&bucket);
            }
            Record::Create(c) => {
                self.next_handle = self.next_handle.max(c.handle + 1);
                self.apply_create(&c, crate::log::Appended { lsn: 0, segment: at.segment, data_pos: at.data_pos });
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
            Record::SoftDelete { handle } => {
                if let Some(e) = self.by_handle(handle) {
                    e.state.deleted = true;
                }
            }
            Record::Attrs { handle, attrs } => {
                if let Some(e) = self.by_handle(handle) {
                    e.state.attrs = attrs;
                }
            }
            Record::Snapshot(r) => {
                if let Some(e) = self.by_handle(r.handle) {
                    e.state.set_snapshot(&r, at.segment, at.data_pos);
                }
            }
            Record::Retention { handle, offset } => {
                if let Some(e) = self.by_handle(handle) {
                    e.state.retain_from(offset);
                }
            }
            Record::SnapshotDelete { handle, offset } => {
                if let Some(e) = self.by_handle(handle) {
                    if e.state.snapshot.as_ref().is_some_and(|s| s.offset == offset) {
                        e.state.snapshot = None;
                    }
                }
            }
            // Seals are checked by the scan and change no stream.
            Record::Seal(_) => {}
        }
    }

    /// Inserts the stream a create record describes, with its initial body
    /// visible at once (readers wait for the create to be durable through
    /// `settle`). Returns the record ordinal the initial body starts at.
    pub(crate) fn apply_create(&mut self, c: &CreateRecord, at: crate::log::Appended) -> u64 {
        self.insert(c, at.segment);
        let e = self.by_handle(c.handle).expect("just inserted");
        let start = e.state.messages.len() as u64;
        if let Some(a) = c.initial_append() {
            let tail = e.state.apply_append(&a, at.segment, at.data_pos);
            e.state.publish(tail, c.closed);
        }
        start
    }

    fn insert(&mut self, c: &CreateRecord, segment: u32) {
        let key = (c.bucket.clone(), c.stream.clone());
        if let Some(old) = self.streams.remove(&key) {
            self.handles.remove(&old.state.handle);
        }
        self.handles.insert(c.handle, key.clone());
        let mut state = StreamState::from_create(c, self.shard, self.max_producers);
        state.first_segment = segment;
        self.streams.insert(
            key,
            Entry { state, signal: Rc::new(Signal::default()), shared_event: None, settle: 0, created: 0 },
        );
    }

    pub(crate) fn by_handle(&mut self, handle: u64) -> Option<&mut Entry> {
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
        let e = self.streams.get_mut(key)?;
        if e.state.deleted {
            return None;
        }
        let expired = e.state.lifetime.expired(now_ms);
        if expired && e.state.forks > 0 {
            // Forks still read its bytes: keep it as a tombstone.
            e.state.deleted = true;
            e.signal.notify();
            return None;
        }
        if expired {
            let handle = e.state.handle;
            self.remove_hard(handle);
            return None;
        }
        self.streams.get_mut(key)
    }

    /// Removes a stream for good and queues the release of its fork parent.
    pub fn remove_hard(&mut self, handle: u64) {
        let Some(key) = self.handles.remove(&handle) else { return };
        self.reclaim_due = true;
        if let Some(e) = self.streams.remove(&key) {
            e.signal.notify();
            if let Some(f) = &e.state.fork {
                self.releases.push((f.parent_shard, f.parent_handle));
                self.release_signal.notify();
            }
        }
    }

    /// The oldest segment any live stream or bucket still needs: every record
    /// of a stream comes after its create record, so a stream pins segments
    /// from the one holding its create record onward.
    /// The oldest segment a live stream still needs (at most `active`).
    fn oldest_needed(&self, active: u32) -> u32 {
        self.streams.values().map(|e| e.state.first_segment).min().unwrap_or(active).min(active)
    }

    pub fn lowest_pinned(&self) -> Option<u32> {
        let streams = self.streams.values().map(|e| e.state.first_segment);
        streams.chain(self.bucket_segments.values().copied()).min()
    }

    /// The stream at `key` for a write: missing is 404, a tombstone 410.
    pub fn entry(&mut self, key: &StreamKey) -> Result<&mut Entry, StoreError> {
        match self.streams.get_mut(key) {
            None => Err(StoreError::NoStream),
            Some(e) if e.state.deleted => Err(StoreError::Gone),
            Some(e) => Ok(e),
        }
    }

    /// Whether `key` is a soft-deleted stream that forks still depend on (410).
    pub fn is_tombstone(&self, key: &StreamKey) -> bool {
        self.streams.get(key).is_some_and(|e| e.state.deleted)
    }

    /// Number of live streams in a bucket at `now_ms`.
    pub fn count_in_bucket(&self, bucket: &str, now_ms: u64) -> u64 {
        self.bucket_range(bucket).filter(|(_, e)| !e.state.lifetime.expired(now_ms)).count() as u64
    }

    /// Streams of a bucket, in stream-id order.
    pub fn bucket_range<'a>(&'a self, bucket: &'a str) -> impl Iterator<Item = (&'a StreamKey, &'a Entry)> + 'a {
        self.streams.range((bucket.to_string(), String::new())..).take_while(move |(k, _)| k.0 == bucket)
    }
}

impl Shard {
    /// Opens shard `id`'s log under `cfg.dir`, replaying it; each stream
    /// remembers at most `max_producers` idempotent producers.
    pub async fn open(id: usize, cfg: crate::log::LogConfig, max_producers: usize) -> Result<Shard, String> {
        let mut store = Store::new(id as u32, max_producers);
        let tail = recovery::scan(&cfg.dir, recovery::Mode::Repair, |r, at| store.replay(r, at))?;
        let torn_bytes = tail.torn_bytes;
        // Segments after the newest one with records were prepared, or rolled
        // into, but never written before the stop. Writing resumes where the
        // records end; the first blank one is reused as the next segment if
        // whole, and the others are removed, newest first (so a stop midway
        // leaves no gap), so a blank segment never sits between written ones.
        let written = tail.ends.iter().rposition(|&e| e > 0).map_or(1, |i| i + 1).min(tail.segments.len());
        let mut segments = Vec::new();
        for &no in &tail.segments[..written] {
            segments.push(
                crate::log::segment::open_segment(&cfg.dir, no)
                    .await
                    .map_err(|e| format!("cannot open segment {no}: {e}"))?,
            );
        }
        let remove = |no: u32| {
            std::fs::remove_file(crate::log::segment::segment_path(&cfg.dir, no))
                .map_err(|e| format!("cannot remove unwritten segment {no}: {e}"))
        };
        let mut next = None;
        if let Some((&first, rest)) = tail.segments[written..].split_first() {
            for &no in rest.iter().rev() {
                remove(no)?;
            }
            let blank = crate::log::segment::open_segment(&cfg.dir, first)
                .await
                .map_err(|e| format!("cannot open segment {first}: {e}"))?;
            if blank.size >= cfg.segment_size {
                next = Some(blank);
            } else {
                remove(first)?;
            }
        }
        let (write_pos, crc) = segments.len().checked_sub(1).map_or((0, 0), |i| (tail.ends[i], tail.crcs[i]));
        let active = match segments.pop() {
            Some(s) => s,
            None => crate::log::segment::create_segment(&cfg.dir, 1, cfg.segment_size)
                .await
                .map_err(|e| format!("cannot create the first log segment in {}: {e}", cfg.dir.display()))?,
        };
        // A segment without records gets its seal first: of the segment
        // before it, or, when that was reclaimed (the log-start segment's
        // seal is never checked) or never existed, of nothing.
        let before = segments.len().checked_sub(1).map_or((0, 0), |i| (tail.ends[i], tail.crcs[i]));
        let seal = (write_pos == 0).then(|| crate::log::Seal {
            previous: active.no - 1,
            len: before.0,
            crc: before.1,
            size: active.size,
        });
        for (b, at) in &store.home_buckets {
            store.buckets.insert(b.clone(), BucketInfo { created_ms: *at, deleting: false });
        }
        let dir = cfg.dir.clone();
        let head_file = crate::log::marks::Head::open(&cfg.dir)
            .await
            .map_err(|e| format!("cannot open {}/log-head: {e}", cfg.dir.display()))?;
        let resume =
            crate::log::Resume { active, write_pos, crc, older: segments, next, head: tail.head, head_file, seal };
        let log = Log::start(cfg, resume);
        log.stats.torn_bytes.set(torn_bytes);
        Ok(Shard { id, store: RefCell::new(store), log, dir, foreign: RefCell::new(HashMap::new()) })
    }

    /// Reserves log room for a write of about `bytes` (plus slack for a lazy
    /// expiry record); no await may come between this and the append.
    async fn reserve(&self, bytes: usize) -> Result<(), LogError> {
        self.log.reserve(bytes + 256).await
    }

    /// Log room for the data and message lengths an append of `body` can
    /// encode to: JSON normalization keeps at most the body plus one comma,
    /// and each message (at most one per comma, plus one) adds a 4-byte length.
    fn append_room(body: &[u8]) -> usize {
        let messages = body.iter().filter(|&&b| b == b',').count() + 1;
        body.len() + 1 + 4 * messages
    }

    /// PUT: create a stream or confirm an existing one.
    pub async fn create(
        &self,
        key: &StreamKey,
        input: &CreateInput,
        body: &[u8],
        fork: Option<ForkPlan>,
        now_ms: u64,
    ) -> Result<CreateOutcome, StoreError> {
        let inherited = fork
            .as_ref()
            .map_or(0, |f| f.record.inherited.len() * 20 + f.prefix.len() + 4 * f.prefix_messages.len() + 4);
        self.reserve(
            Self::append_room(body)
                + inherited
                + key.0.len()
                + key.1.len()
                + input.content_type.len()
                + input.attrs.len(),
        )
        .await?;
        let decided = self.store.borrow_mut().decide_create(&self.log, key, input, body, fork.as_ref(), now_ms);
        let (created, handle, tail, closed, next) = self.settle_outcome(key, decided).await?;
        self.publish(handle, tail, closed);
        Ok(CreateOutcome { created: created.is_some(), tail, closed, records: (created.unwrap_or(next), next) })
    }

    /// POST: append (and/or close).
    pub async fn append(
        &self,
        key: &StreamKey,
        input: &AppendInput<'_>,
        now_ms: u64,
    ) -> Result<AppendOutcome, StoreError> {
        let extra = input.stream_seq.map_or(0, str::len) + input.producer.as_ref().map_or(0, |p| p.id.len());
        self.reserve(Self::append_room(input.body) + extra).await?;
        let decided = self.store.borrow_mut().decide_append(&self.log, key, input, now_ms);
        let (handle, out) = self.settle_outcome(key, decided).await?;
        self.publish(handle, out.next_offset, out.closed);
        Ok(out)
    }

    /// Append-batch: each frame is its own append; one durable wait for all.
    pub async fn append_batch(
        &self,
        key: &StreamKey,
        content_type: &str,
        frames: &[&[u8]],
        now_ms: u64,
    ) -> Result<Vec<Result<AppendOutcome, StoreError>>, StoreError> {
        let total: usize = frames.iter().map(|f| Self::append_room(f) + 64).sum();
        self.reserve(total).await?;
        let decided = (|| {
            let mut st = self.store.borrow_mut();
            st.expire(&self.log, key, now_ms);
            let e = st.entry(key)?;
            let mut lsn = self.log.assigned();
            let mut results = Vec::with_capacity(frames.len());
            for frame in frames {
                let input = AppendInput {
                    content_type: Some(content_type),
                    body: frame,
                    close: false,
                    stream_seq: None,
                    producer: None,
                    record_match: None,
                };
                results.push(crate::decide::append_one(&self.log, e, &input, now_ms).map(|(l, out)| {
                    lsn = l;
                    out
                }));
            }
            // Refused frames report the tail as decided here: durable below.
            Ok((lsn, (e.state.handle, e.state.tail, e.state.closed, results)))
        })();
        let (handle, tail, closed, results) = self.settle_outcome(key, decided).await?;
        self.publish(handle, tail, closed);
        Ok(results)
    }

    /// Answers only from durable state: a decision waits for its records
    /// (`lsn`); a refusal waits for everything decided before it, and the
    /// stream's tail as decided then is published, so the error reports a
    /// durable tail, never one a crash could take back.
    async fn settle_outcome<T>(&self, key: &StreamKey, decided: Result<(u64, T), StoreError>) -> Result<T, StoreError> {
        match decided {
            Ok((lsn, out)) => {
                self.log.durable(lsn).await?;
                Ok(out)
            }
            Err(refusal) => {
                let lsn = self.log.assigned();
                let tail = self.store.borrow().streams.get(key).map(|e| (e.state.handle, e.state.tail, e.state.closed));
                self.log.durable(lsn).await?;
                if let Some((handle, tail, closed)) = tail {
                    self.publish(handle, tail, closed);
                }
                Err(refusal)
            }
        }
    }

    /// Waits until every hard delete decided so far is durable, and returns
    /// the durable mark a listing filters the rest with ([`Entry::listed`]).
    /// Call right before listing, with no await in between.
    pub async fn listing_mark(&self) -> Result<u64, LogError> {
        loop {
            let need = self.store.borrow().removed;
            self.log.durable(need).await?;
            if self.store.borrow().removed <= need {
                return Ok(self.log.durable_mark());
            }
        }
    }

    /// Waits until everything a reader of `key` could observe is durable:
    /// the stream's newest create/attrs/retention/snapshot/delete change, or,
    /// when there is no such stream, the newest hard delete. Call right
    /// before reading the stream's state, with no await in between.
    pub async fn settle(&self, key: &StreamKey) -> Result<(), LogError> {
        loop {
            let need = {
                let st = self.store.borrow();
                st.streams.get(key).map_or(st.removed, |e| e.settle)
            };
            self.log.durable(need).await?;
            let st = self.store.borrow();
            if st.streams.get(key).map_or(st.removed, |e| e.settle) <= need {
                return Ok(());
            }
        }
    }

    fn publish(&self, handle: u64, tail: u64, closed: bool) {
        if let Some(e) = self.store.borrow_mut().by_handle(handle) {
            e.state.publish(tail, closed);
            e.signal.notify();
        }
    }

    /// PUT {stream}/snapshot/{offset}: publishes a snapshot; returns its digest.
    pub async fn publish_snapshot(
        &self,
        key: &StreamKey,
        at: SnapshotAt,
        content_type: &str,
        body: &[u8],
        expected: Option<&str>,
        now_ms: u64,
    ) -> Result<(u64, String), StoreError> {
        self.reserve(body.len() + content_type.len() + 128).await?;
        let decided = self.store.borrow_mut().decide_snapshot(&self.log, key, at, content_type, body, expected, now_ms);
        self.settle_outcome(key, decided).await
    }

    /// PUT {stream}/retention/{offset}: moves the earliest retained offset.
    pub async fn set_retention(&self, key: &StreamKey, at: SnapshotAt, now_ms: u64) -> Result<u64, StoreError> {
        self.reserve(32).await?;
        let decided = self.store.borrow_mut().decide_retention(&self.log, key, at, now_ms);
        self.settle_outcome(key, decided).await
    }

    /// DELETE a stream: hard when nothing forks from it, soft (410) otherwise.
    pub async fn delete(&self, key: &StreamKey, now_ms: u64) -> Result<(), StoreError> {
        self.reserve(16).await?;
        let decided = self.store.borrow_mut().decide_delete(&self.log, key, now_ms);
        self.settle_outcome(key, decided).await
    }

    /// Takes a fork reference on stream `key` at `offset` (default: tail) and
    /// resolves the first `sub` units after it.
    pub fn grant_fork(
        &self,
        key: &StreamKey,
        offset: Option<u64>,
        sub: u64,
        now_ms: u64,
    ) -> Result<ForkGrant, StoreError> {
        let mut st = self.store.borrow_mut();
        if st.is_tombstone(key) {
            return Err(StoreError::Conflict("the fork source was deleted"));
        }
        let e = st.live(key, now_ms).ok_or(StoreError::NotFound("fork source not found"))?;
        let s = &mut e.state;
        let at = offset.unwrap_or(s.visible.tail);
        if at > s.visible.tail {
            return Err(StoreError::Invalid("Stream-Fork-Offset is beyond the source tail"));
        }
        if s.json && !s.is_boundary(at) {
            return Err(StoreError::Invalid("Stream-Fork-Offset is not a message boundary of this JSON stream"));
        }
        let mut inherited = Vec::new();
        let mut prefix = Vec::new();
        let mut prefix_messages = Vec::new();
        let mut left = sub;
        for m in &s.messages[..s.visible.messages] {
            let end = m.offset + u64::from(m.len);
            if m.offset < at {
                let len = (end.min(at) - m.offset) as u32;
                inherited.push(crate::log::Extent { shard: m.shard, segment: m.segment, pos: m.pos, len });
            }
            if end > at && left > 0 {
                let skip = at.saturating_sub(m.offset);
                if s.json {
                    prefix.push((m.shard, m.segment, m.pos, m.len));
                    prefix_messages.push(m.len);
                    left -= 1;
                } else {
                    let take = (u64::from(m.len) - skip).min(left);
                    prefix.push((m.shard, m.segment, m.pos + skip, take as u32));
                    left -= take;
                }
            }
        }
        if left > 0 {
            return Err(StoreError::Invalid("Stream-Fork-Sub-Offset is past the end of the source"));
        }
        s.forks += 1;
        Ok(ForkGrant {
            parent_handle: s.handle,
            content_type: s.content_type.clone(),
            ttl_secs: s.lifetime.ttl_secs,
            expires_at_ms: s.lifetime.expires_at_ms,
            inherited,
            prefix,
            prefix_messages,
        })
    }

    /// Frees disk: deletes every sealed segment older than the oldest one a
    /// live stream still needs (oldest first, so no gaps appear). Bucket
    /// records in those segments are copied forward first, so a long-lived
    /// bucket never pins old segments.
    pub async fn reclaim_space(&self) -> Result<usize, StoreError> {
        let active = self.log.active_segment();
        let (below, stale) = {
            let mut st = self.store.borrow_mut();
            st.reclaim_due = false;
            let below = st.oldest_needed(active);
            let stale: Vec<(String, u64)> = st
                .bucket_segments
                .iter()
                .filter(|(_, seg)| **seg < below)
                .filter_map(|(b, _)| st.home_buckets.get(b).map(|at| (b.clone(), *at)))
                .collect();
            (below, stale)
        };
        let mut lsn = 0;
        for (bucket, at_ms) in stale {
            self.reserve(128).await?;
            let mut st = self.store.borrow_mut();
            // A bucket being deleted must not be re-created after its delete record.
            let live = st.home_buckets.contains_key(&bucket) && st.buckets.get(&bucket).is_some_and(|b| !b.deleting);
            if live {
                let at = self.log.append(&Record::BucketCreate { bucket: bucket.clone(), at_ms });
                st.bucket_segments.insert(bucket, at.segment);
                lsn = at.lsn;
            }
        }
        self.log.durable(lsn).await?;
        let pinned = self.store.borrow().lowest_pinned().unwrap_or(below);
        self.log.reclaim_below(below.min(pinned)).await.map_err(|e| StoreError::Log(LogError::Failed(e.to_string())))
    }

    /// Disk space by use: segments the next [`Shard::reclaim_space`] would
    /// delete count as reclaimable.
    pub fn disk_usage(&self) -> crate::stats::DiskUsage {
        // Bucket records below this are copied forward by the reclamation.
        self.log.disk_usage(self.store.borrow().oldest_needed(self.log.active_segment()))
    }

    /// Counts a fork recovered on some shard against stream `handle`.
    pub fn add_fork_ref(&self, handle: u64) {
        if let Some(e) = self.store.borrow_mut().by_handle(handle) {
            e.state.forks += 1;
        }
    }

    /// After every shard has counted its forks: tombstones nobody reads any
    /// more are deleted for good.
    pub async fn purge_tombstones(&self) {
        let dead: Vec<u64> = self
            .store
            .borrow()
            .streams
            .values()
            .filter(|e| e.state.deleted && e.state.forks == 0)
            .map(|e| e.state.handle)
            .collect();
        for handle in dead {
            if self.reserve(16).await.is_ok() {
                self.store.borrow_mut().remove_hard(handle);
                self.log.append(&Record::Delete { handle });
            }
        }
    }

    /// Drops one fork reference; a soft-deleted stream with none left goes for good.
    pub async fn release_fork(&self, handle: u64) {
        if self.reserve(16).await.is_err() {
            return;
        }
        let mut st = self.store.borrow_mut();
        let Some(e) = st.by_handle(handle) else { return };
        e.state.forks = e.state.forks.saturating_sub(1);
        if e.state.deleted && e.state.forks == 0 {
            st.remove_hard(handle);
            self.log.append(&Record::Delete { handle });
        }
    }

    /// Replaces a stream's attributes.
    pub async fn set_attrs(&self, key: &StreamKey, attrs: Vec<u8>, now_ms: u64) -> Result<(), StoreError> {
        self.reserve(attrs.len()).await?;
        let decided = self.store.borrow_mut().decide_attrs(&self.log, key, attrs, now_ms);
        self.settle_outcome(key, decided).await
    }

    /// Deletes every stream whose TTL or Expires-At has passed, so streams
    /// nobody touches again still give their space back. Returns how many.
    pub async fn sweep_expired(&self, now_ms: u64) -> usize {
        let expired: Vec<StreamKey> = self
            .store
            .borrow()
            .streams
            .iter()
            .filter(|(_, e)| !e.state.deleted && e.state.lifetime.expired(now_ms))
            .map(|(k, _)| k.clone())
            .collect();
        for key in &expired {
            if self.reserve(16).await.is_err() {
                return 0;
            }
            let mut st = self.store.borrow_mut();
            st.expire(&self.log, key, now_ms);
        }
        expired.len()
    }

    /// Logs a bucket record in this (home) shard and waits until durable.
    pub async fn log_bucket(&self, record: Record<'_>) -> Result<(), StoreError> {
        self.reserve(128).await?;
        let at = self.log.append(&record);
        {
            let mut st = self.store.borrow_mut();
            match &record {
                Record::BucketCreate { bucket, .. } => {
                    st.bucket_segments.insert(bucket.clone(), at.segment);
                }
                Record::BucketDelete { bucket } => {
                    st.bucket_segments.remove(bucket);
                    st.reclaim_due = true;
                }
                _ => {}
            }
        }
        self.log.durable(at.lsn).await?;
        Ok(())
    }

    /// Reads message bytes given as (shard, segment, position, length),
    /// coalescing physically adjacent pieces into one read.
    pub async fn read_messages(&self, parts: &[(u32, u32, u64, u32)]) -> std::io::Result<Vec<u8>> {
        let total: usize = parts.iter().map(|p| p.3 as usize).sum();
        let mut out = Vec::with_capacity(total);
        let mut i = 0;
        while i < parts.len() {
            let (shard, seg, pos, first) = parts[i];
            let mut len = u64::from(first);
            let mut j = i + 1;
            while j < parts.len()
                && (parts[j].0, parts[j].1) == (shard, seg)
                && parts[j].2 == pos + len
                && len < (4 << 20)
            {
                len += u64::from(parts[j].3);
                j += 1;
            }
            if shard as usize == self.id {
                out.extend_from_slice(&self.log.read(seg, pos, len as usize).await?);
            } else {
                out.extend_from_slice(&self.read_foreign(shard, seg, pos, len as usize).await?);
            }
            i = j;
        }
        Ok(out)
    }

    /// Reads another shard's (immutable, already durable) segment bytes that a
    /// fork inherited. Segment files are opened read-only and cached.
    async fn read_foreign(&self, shard: u32, seg: u32, pos: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let cached = self.foreign.borrow().get(&(shard, seg)).cloned();
        let file = match cached {
            Some(f) => f,
            None => {
                let dir = self.dir.parent().unwrap_or(&self.dir).join(format!("shard-{shard}"));
                let f = glommio::io::OpenOptions::new()
                    .read(true)
                    .buffered_open(crate::log::segment::segment_path(&dir, seg))
                    .await
                    .map_err(std::io::Error::from)?;
                let f = Rc::new(f);
                self.foreign.borrow_mut().insert((shard, seg), f.clone());
                f
            }
        };
        let r = file.read_at(pos, len).await.map_err(std::io::Error::from)?;
        if r.len() != len {
            return Err(std::io::Error::other("short read from an inherited segment"));
        }
        Ok(r.to_vec())
    }
}
