//! A shard's streams and buckets.
//!
//! The store is split by job:
//! - this module: the in-memory [`Store`] and the one `apply` path that both
//!   replay and live decisions ([`crate::decide`]) change it through;
//! - [`shard`]: the shard's write operations (reserve, decide, wait durable, publish);
//! - [`index`]: reads and record lookups across a stream's layers;
//! - [`verify`]: stream-file reads checked against their index entries' CRC32C;
//! - [`files`]: stream files (data, sparse record index, snapshots) and their names;
//! - [`place`]: large appends written into their stream files before
//!   their journal record (written to the disk once), and [`pipeline`],
//!   a stream's placements in flight;
//! - [`flush`]: the background flush from the journal's memory tail into
//!   stream files, the checkpoint, and space reclamation;
//! - [`pass`]: the flush's visit of the streams it captured, and
//!   [`checkpoint`]: the checkpoint's encoding; [`streams`], the streams
//!   by name, through which every change to one goes (both run in slices
//!   between requests and still take one instant);
//! - [`restore`]: recovery, as a decision table over the checkpoint, the
//!   stream files and the journal;
//! - [`forks`]: fork grants and references;
//! - [`census`]: streams per bucket and the expiry deadlines, and
//!   [`file_sum`], what the streams' files hold, kept as streams come and
//!   go so that nothing counts by scanning.
//!
//! Everything here runs on the shard's own executor thread; no state is shared
//! with other shards. Bucket existence is replicated to every shard by the
//! bucket's home shard (see the binary's `mesh` module).

mod bundles;
mod census;
pub mod checkpoint;
pub mod clean_stop;
pub mod decide;
mod file_sum;
pub mod files;
pub mod flush;
pub mod forks;
mod pass;
mod pipeline;
mod place;
pub mod reads;
pub mod restore;
mod shard;
pub mod spares;
mod streams;
mod verify;

pub use shard::{FlushConfig, Settled, Shard, ShardConfig};
pub use streams::Streams;

use crate::core::body::Ancestor;
use crate::core::stream::Blob;
use crate::core::StreamState;
use crate::handles::{HandleMap, HandleSet};
use crate::ids::BUILTIN_BUCKET;
use crate::log::recovery::RecoveryError;
use crate::log::{CreateRecord, Record};
use crate::signal::Signal;
use crate::tuning::{MAX_SHARED_CONTENT_TYPES, STREAM_ENTRY_BYTES};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::rc::Rc;

pub use crate::core::stream::StreamKey;

/// A live stream and the signal its live readers park on.
pub struct Entry {
    pub state: StreamState,
    /// What live readers park on: made when the first one parks, dropped
    /// at a change that no parked reader holds it any more.
    signal: Option<Rc<Signal>>,
    /// The newest live event, encoded once for every reader at its position.
    pub shared_event: Option<Rc<SharedEvent>>,
    /// Commit number of the newest change readers can observe outside the
    /// append path (create, attrs, retention, snapshot, soft delete):
    /// readers wait until it is durable ([`Shard::settle`]).
    pub settle: u64,
    /// Commit number of its create record.
    pub created: u64,
    /// Retention's hole punches in its own files (none for most streams).
    punches: Option<Box<Punches>>,
    /// The deadline the census queues it under (`census::NOT_QUEUED`: never expires).
    queued_ms: u64,
}

// A stream's in-memory cost (issue 25): rare parts (attributes, fork
// origin, snapshot, producer table, closing stamp, Stream-Seq) and the
// unflushed tail are boxed, and the name is shared with the map, so an idle
// stream's entry stays within this.
const _: () = assert!(std::mem::size_of::<Entry>() <= STREAM_ENTRY_BYTES);

/// Retained-away bytes and records of a stream's own files already given
/// back (hole-punched), and the retention the next flush gives back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Punches {
    done: (u64, u64),
    next: (u64, u64),
}

impl Entry {
    /// (bytes, records) of retention already given back.
    pub fn punched(&self) -> (u64, u64) {
        self.punches.as_ref().map_or((0, 0), |p| p.done)
    }

    /// (bytes, records) of retention the next flush gives back.
    pub fn punch_next(&self) -> (u64, u64) {
        self.punches.as_ref().map_or((0, 0), |p| p.next)
    }

    /// Records the punches; a stream with none holds no box.
    pub fn set_punches(&mut self, done: (u64, u64), next: (u64, u64)) {
        let p = Punches { done, next };
        self.punches = (p != Punches::default()).then(|| Box::new(p));
    }

    /// Records what was given back, the next punch unchanged.
    pub fn set_punched(&mut self, done: (u64, u64)) {
        self.set_punches(done, self.punch_next());
    }

    /// The signal a live reader parks on, and its generation now (the
    /// reader waits until it moves on).
    pub fn park(&mut self) -> (Rc<Signal>, u64) {
        let signal = self.signal.get_or_insert_with(Rc::default).clone();
        let seen = signal.generation();
        (signal, seen)
    }

    /// Wakes the live readers parked on this stream, if any; a signal
    /// nobody holds any more goes (an idle stream keeps none).
    pub fn notify(&mut self) {
        if let Some(signal) = &self.signal {
            signal.notify();
            if Rc::strong_count(signal) == 1 {
                self.signal = None;
            }
        }
    }

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
    /// Streams by name; every change to one goes through it (see [`streams`]).
    pub streams: Streams,
    handles: HandleMap<Rc<StreamKey>>,
    pub(crate) next_handle: u64,
    /// Buckets every shard knows about (replicated).
    pub buckets: HashMap<String, BucketInfo>,
    /// Buckets whose authoritative record lives in this shard's log.
    pub home_buckets: HashMap<String, u64>,
    /// Subscriptions this shard owns: id -> state, encoded by the server.
    pub subscriptions: BTreeMap<String, Vec<u8>>,
    /// This shard's id.
    pub shard: u32,
    /// Fork references to drop on other shards: (parent shard, parent handle).
    pub releases: Vec<(u32, u64)>,
    /// Notified when `releases` grows.
    pub release_signal: Rc<Signal>,
    /// Stream files to delete once a checkpoint without them is durable.
    pub graveyard: Vec<String>,
    /// The last flush's generation (names its snapshot files).
    pub generation: u64,
    /// The journal segment the last checkpoint resumes in: older ones go.
    pub journal_start: u32,
    /// Something was deleted: flush soon to give the space back.
    pub flush_due: bool,
    /// Streams appended to, created or given a new retention since the last
    /// flush's capture: a flush without a checkpoint visits only these.
    pub(crate) written: HandleSet,
    /// Where placed appends the journal since the checkpoint names end in
    /// their data files, by handle (a start replays them into memory and
    /// leaves them in the files): a failed flush never cuts a data file
    /// back below them, or the next start could not read them back.
    /// Emptied once a checkpoint records the streams past them.
    pub(crate) placed_since: HandleMap<u64>,
    /// Streams whose retention moved beyond what was given back
    /// (`Entry::punched`): a capture that gives space back visits these.
    pub(crate) punching: HandleSet,
    /// A snapshot waits for a flush to store it (and a checkpoint to name it).
    pub(crate) snapshots_pending: bool,
    /// Commit number of the newest hard delete: a reader that finds no
    /// stream answers only once it is durable.
    pub(crate) removed: u64,
    /// Producers each stream remembers (see `core::producer::Producers`).
    max_producers: usize,
    /// Streams per bucket and expiry deadlines.
    census: census::Census,
    /// The content types streams share (see [`Store::shared_content_type`]).
    content_types: HashSet<Rc<str>>,
}

/// What a parent shard hands a new fork: the ancestors' files it reads, the
/// retention it inherits, and the materialized sub-offset prefix.
#[derive(Debug, Clone)]
pub struct ForkGrant {
    pub parent_handle: u64,
    pub content_type: String,
    pub ttl_secs: Option<u64>,
    pub expires_at_ms: Option<u64>,
    pub ancestors: Vec<Ancestor>,
    pub retained: u64,
    pub first_record: u64,
    /// The first `sub` units after the fork offset, copied into the fork.
    pub prefix: Vec<u8>,
    pub prefix_messages: Vec<u32>,
}

impl ForkGrant {
    /// The plan the fork's shard creates the fork from: the grant of shard
    /// `parent_shard`, and the request's `Stream-Forked-From`, fork offset and sub-offset.
    pub fn plan(self, parent_shard: u32, from: String, offset: Option<u64>, sub: u64) -> ForkPlan {
        ForkPlan {
            record: crate::log::ForkRecord {
                parent_shard,
                parent_handle: self.parent_handle,
                from,
                offset,
                sub,
                ancestors: self.ancestors,
                retained: self.retained,
                first_record: self.first_record,
            },
            prefix: self.prefix,
            prefix_messages: self.prefix_messages,
        }
    }
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

/// What applying a record did that its caller may act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The state changed (or the record named nothing held here).
    Done,
    /// A stream was created; its initial body starts at this record ordinal.
    Created { start: u64 },
    /// A stream was removed for good; it forked from `(shard, handle)`.
    Removed { fork_of: Option<(u32, u64)> },
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

impl Store {
    /// An empty store for shard `shard` whose streams remember at most
    /// `max_producers` idempotent producers each.
    pub fn new(shard: u32, max_producers: usize) -> Store {
        assert!(max_producers > 0, "a producer table must hold at least one producer");
        Store { shard, max_producers, ..Store::default() }
    }

    /// Applies one record to the state: the one place a record changes a
    /// store, whether it was just decided and logged ([`Store::commit`]) or
    /// is replayed at start ([`Store::replay`]). Decisions build records,
    /// the log makes them durable, this changes state.
    pub fn apply(&mut self, record: Record<'_>) -> Applied {
        let cap = self.max_producers;
        match record {
            Record::BucketCreate { bucket, at_ms } => {
                self.home_buckets.insert(bucket, at_ms);
            }
            Record::BucketDelete { bucket } => {
                self.home_buckets.remove(&bucket);
            }
            Record::Create(c) => {
                self.next_handle = self.next_handle.max(c.handle + 1);
                self.written.insert(c.handle);
                return Applied::Created { start: self.apply_create(&c) };
            }
            Record::Append(a) => {
                self.written.insert(a.handle);
                if let Some(e) = self.by_handle(a.handle) {
                    e.state.apply_append(&a, cap);
                }
            }
            // Its bytes are in the stream files already: nothing to flush.
            Record::Placed(p) => {
                if let Some(e) = self.by_handle(p.append.handle) {
                    e.state.apply_placed(&p, cap);
                }
            }
            Record::Delete { handle } => return Applied::Removed { fork_of: self.remove(handle) },
            Record::SoftDelete { handle } => {
                if let Some(e) = self.by_handle(handle) {
                    e.state.deleted = true;
                    e.notify();
                }
            }
            Record::Attrs { handle, attrs } => {
                if let Some(e) = self.by_handle(handle) {
                    e.state.rare_mut().attrs = attrs;
                }
            }
            Record::Snapshot(r) => self.apply_snapshot(&r),
            Record::Retention { handle, offset, record } => {
                self.written.insert(handle);
                if let Some(e) = self.by_handle(handle) {
                    e.state.retain_from(offset, record);
                }
            }
            Record::SnapshotDelete { handle, offset } => {
                let Some(e) = self.by_handle(handle) else { return Applied::Done };
                if e.state.snapshot.as_ref().is_some_and(|s| s.offset == offset) {
                    let old = e.state.snapshot.take();
                    self.bury_snapshot(handle, old);
                }
            }
            // Seals are checked by the scan and change no stream.
            Record::Seal(_) => {}
            Record::SubscriptionPut { id, state } => {
                self.subscriptions.insert(id, state);
            }
            Record::SubscriptionDelete { id } => {
                self.subscriptions.remove(&id);
            }
        }
        Applied::Done
    }

    /// Applies a record just decided and logged: a removed fork's release
    /// is queued for its source's shard.
    pub fn commit(&mut self, record: Record<'_>) -> Applied {
        let applied = self.apply(record);
        if let Applied::Removed { fork_of: Some(source) } = applied {
            self.releases.push(source);
            self.release_signal.notify();
        }
        applied
    }

    /// Replays one recovered record (the journal written since the
    /// checkpoint): applied, and its appended bytes visible at once (they are
    /// durable). A removed fork releases nothing: every shard counts the
    /// forks that survived afresh at start (`ForkRef`).
    pub fn replay(&mut self, record: Record<'_>) {
        // Recovery replays a placed append as the append it amounts to, with
        // the bytes read back (`restore`): the files it named are cut back.
        assert!(!matches!(record, Record::Placed(_)), "a placed append is replayed with its bytes");
        let appended = match &record {
            Record::Append(a) => Some((a.handle, a.close)),
            _ => None,
        };
        self.apply(record);
        if let Some(e) = appended.and_then(|(handle, _)| self.by_handle(handle)) {
            let (tail, records) = (e.state.tail(), e.state.records());
            e.state.publish(tail, records, appended.is_some_and(|(_, close)| close));
        }
    }

    /// Inserts the stream a create record describes, with its initial body
    /// visible at once (readers wait for the create to be durable through
    /// `settle`). Returns the record ordinal the initial body starts at.
    pub(crate) fn apply_create(&mut self, c: &CreateRecord) -> u64 {
        self.insert(StreamState::from_create(c));
        let cap = self.max_producers;
        let e = self.by_handle(c.handle).expect("just inserted");
        let start = e.state.records();
        if let Some(a) = c.initial_append() {
            let tail = e.state.apply_append(&a, cap);
            let records = e.state.records();
            e.state.publish(tail, records, c.closed);
        }
        start
    }

    /// Publishes snapshot `r` (its blob stays in memory until flushed); the
    /// file of the snapshot it replaces goes to the graveyard.
    pub(crate) fn apply_snapshot(&mut self, r: &crate::log::SnapshotRecord<'_>) {
        self.written.insert(r.handle);
        let Some(e) = self.by_handle(r.handle) else { return };
        let old = e.state.snapshot.take();
        e.state.set_snapshot(r);
        self.snapshots_pending = true;
        self.bury_snapshot(r.handle, old);
    }

    fn bury_snapshot(&mut self, handle: u64, old: Option<Box<crate::core::stream::Snapshot>>) {
        if let Some(Blob::Stored(generation)) = old.map(|s| s.blob) {
            self.graveyard.push(files::snapshot_name(handle, generation));
        }
    }

    /// Queues a removed stream's own files for deletion after the next checkpoint.
    fn bury(&mut self, e: &Entry) {
        let handle = e.state.handle;
        self.graveyard.extend(files::stream_names(handle));
        self.bury_snapshot(handle, e.state.snapshot.clone());
        self.flush_due = true;
    }

    /// Inserts a stream (created, or restored from a checkpoint), replacing
    /// any of the same name.
    pub(crate) fn insert(&mut self, state: StreamState) {
        let key = state.key.clone();
        if let Some(old) = self.streams.remove(&key) {
            self.handles.remove(&old.state.handle);
            self.census.removed(key.bucket(), old.state.handle, old.queued_ms);
        }
        self.handles.insert(state.handle, key.clone());
        let entry = self.entry_of(state);
        self.streams.insert(key, entry);
    }

    /// The entry of a stream coming into the store: its content type
    /// shared, its deadline counted.
    fn entry_of(&mut self, mut state: StreamState) -> Box<Entry> {
        state.content_type = self.shared_content_type(&state.content_type);
        let queued_ms = self.census.added(state.key.bucket(), state.handle, state.lifetime.deadline_ms());
        let punched = (state.retained, state.first_message);
        if punched.0 > 0 {
            // Given back before, perhaps: punched again (idempotent).
            self.punching.insert(state.handle);
        }
        let mut e = Box::new(Entry {
            state,
            signal: None,
            shared_event: None,
            settle: 0,
            created: 0,
            punches: None,
            queued_ms,
        });
        e.set_punches((0, 0), punched);
        e
    }

    /// Takes a checkpoint's streams into an empty store: `streams` come one
    /// at a time, sorted by name (as checkpoints list them), and the map is
    /// built from them in one pass, with no search per stream and the
    /// handle table sized once (no doublings left behind in the heap).
    /// Returns what `streams` returned, or fails, adding nothing, if a name
    /// is out of order or repeated.
    pub(crate) fn adopt<T>(
        &mut self,
        streams: impl FnOnce(&mut dyn FnMut(StreamState)) -> T,
    ) -> Result<T, RecoveryError> {
        assert!(self.streams.is_empty() && self.handles.is_empty(), "streams are adopted into an empty store");
        let mut entries: Vec<(Rc<StreamKey>, Box<Entry>)> = Vec::new();
        let mut unsorted = None;
        let out = streams(&mut |state| {
            if entries.last().is_some_and(|(last, _)| **last >= *state.key) {
                unsorted.get_or_insert_with(|| state.key.to_string());
            }
            entries.push((state.key.clone(), self.entry_of(state)));
        });
        if let Some(name) = unsorted {
            *self = Store::new(self.shard, self.max_producers);
            return Err(format!("stream {name} is out of order or repeated: damaged").into());
        }
        self.handles.reserve(entries.len());
        self.handles.extend(entries.iter().map(|(key, e)| (e.state.handle, key.clone())));
        self.streams = Streams::of(entries.into_iter().collect());
        Ok(out)
    }

    /// The one copy of content type `ct` that streams share. At most
    /// [`MAX_SHARED_CONTENT_TYPES`] are kept: when full, those no stream
    /// holds any more go, and if none does, the stream keeps its own.
    fn shared_content_type(&mut self, ct: &Rc<str>) -> Rc<str> {
        if let Some(held) = self.content_types.get(ct) {
            return held.clone();
        }
        if self.content_types.len() >= MAX_SHARED_CONTENT_TYPES {
            self.content_types.retain(|c| Rc::strong_count(c) > 1);
        }
        if self.content_types.len() < MAX_SHARED_CONTENT_TYPES {
            self.content_types.insert(ct.clone());
        }
        debug_assert!(self.content_types.len() <= MAX_SHARED_CONTENT_TYPES);
        ct.clone()
    }

    /// Producers each stream remembers.
    pub fn max_producers(&self) -> usize {
        self.max_producers
    }

    /// Whether a stream with `handle` is held (a tombstone too).
    pub(crate) fn holds_handle(&self, handle: u64) -> bool {
        self.handles.contains_key(&handle)
    }

    /// The state of the stream with `handle`.
    pub(crate) fn state_of(&self, handle: u64) -> Option<&StreamState> {
        let key = self.handles.get(&handle)?;
        self.streams.get(&**key).map(|e| &e.state)
    }

    pub(crate) fn by_handle(&mut self, handle: u64) -> Option<&mut Entry> {
        let key = self.handles.get(&handle)?;
        self.streams.get_mut(key)
    }

    /// What every stream's own files hold ([`Streams::file_bytes`]).
    pub(crate) fn file_bytes(&mut self) -> u64 {
        self.streams.file_bytes(&self.handles)
    }

    /// Stores stream `handle`'s frozen chunk in its files' layer (the
    /// flush wrote it), if the stream is still here.
    /// Has the next flush move the streams whose extents `bytes`, the
    /// first bytes of bundle `no`, hold ([`Streams::compact_bundle`]).
    pub(crate) fn compact_bundle(&mut self, no: u32, bytes: &[u8]) {
        let moving = self.streams.compact_bundle(&self.handles, no, bytes);
        self.written.extend(moving);
    }

    pub(crate) fn stored_frozen(&mut self, handle: u64) {
        if let Some(key) = self.handles.get(&handle) {
            self.streams.change_settled(key, |e| e.state.body.stored_frozen());
        }
    }

    /// Visits up to `budget` more streams of the capture's pass in
    /// progress (see [`pass`]); returns whether it visited them all.
    pub(crate) fn pass_some(&mut self, budget: usize) -> bool {
        for handle in self.streams.pass().next(budget) {
            if let Some(key) = self.handles.get(&handle) {
                self.streams.visit(key);
            }
            if self.streams.pass().holds(handle) {
                self.streams.pass().gone(handle);
            }
        }
        self.streams.pass().done()
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
            e.notify();
            return None;
        }
        if expired {
            let handle = e.state.handle;
            self.remove_hard(handle);
            return None;
        }
        self.streams.get_mut(key)
    }

    /// Removes a stream for good (live, not logged here: an expiry a reader
    /// finds, whose caller logs it or recomputes it after a restart): as a
    /// logged delete would, with the release of its fork source queued.
    pub fn remove_hard(&mut self, handle: u64) {
        self.commit(Record::Delete { handle });
    }

    /// Removes a stream and queues its files for deletion; the fork source
    /// it referenced, if any, as `(shard, handle)`.
    fn remove(&mut self, handle: u64) -> Option<(u32, u64)> {
        let key = self.handles.remove(&handle)?;
        let mut e = self.streams.remove(&key)?;
        self.census.removed(key.bucket(), handle, e.queued_ms);
        self.bury(&e);
        e.notify();
        e.state.fork().map(|f| (f.parent_shard, f.parent_handle))
    }

    /// The stream at `key` for a write: missing is 404, a tombstone 410.
    pub fn entry(&mut self, key: &StreamKey) -> Result<&mut Entry, StoreError> {
        match self.streams.get_mut(key) {
            None => Err(StoreError::NoStream),
            Some(e) if e.state.deleted => Err(StoreError::Gone),
            Some(e) => Ok(e),
        }
    }

    /// Whether `key` names a stream that is there at `now_ms` (not expired,
    /// not a tombstone): a create of it adds no stream, at most an answer.
    pub fn is_live(&self, key: &StreamKey, now_ms: u64) -> bool {
        self.streams.get(key).is_some_and(|e| !e.state.deleted && !e.state.lifetime.expired(now_ms))
    }

    /// Whether `key` is a soft-deleted stream that forks still depend on (410).
    pub fn is_tombstone(&self, key: &StreamKey) -> bool {
        self.streams.get(key).is_some_and(|e| e.state.deleted)
    }

    /// Number of streams a bucket holds at `now_ms` (tombstones that forks
    /// still read included, expired streams not yet swept excluded): the
    /// census's count less the due streams of the bucket that have expired.
    pub fn count_in_bucket(&self, bucket: &str, now_ms: u64) -> u64 {
        let expired = self
            .census
            .due(now_ms)
            .filter_map(|(_, handle)| self.handles.get(&handle).and_then(|k| self.streams.get(&**k)))
            .filter(|e| e.state.key.bucket() == bucket && e.state.lifetime.expired(now_ms))
            .count() as u64;
        let held = self.census.streams(bucket);
        debug_assert!(expired <= held, "expired streams of a bucket are streams it holds");
        held - expired
    }

    /// The live streams that have expired at `now_ms`, for the sweep to
    /// delete; due streams touched since they were queued move to their
    /// new deadline, and tombstones stay due (forks still read them).
    pub fn expired(&mut self, now_ms: u64) -> Vec<Rc<StreamKey>> {
        let due: Vec<(u64, u64)> = self.census.due(now_ms).collect();
        let mut expired = Vec::new();
        for (queued_ms, handle) in due {
            let key = self.handles.get(&handle).expect("a queued stream is held").clone();
            let e = self.streams.get_mut(&key).expect("a held handle names a stream");
            let deadline = e.state.lifetime.deadline_ms();
            debug_assert!(deadline.is_some_and(|d| d >= queued_ms), "a stream is queued at or before its deadline");
            if !e.state.lifetime.expired(now_ms) {
                e.queued_ms = self.census.requeue(handle, queued_ms, deadline);
            } else if !e.state.deleted {
                expired.push(key);
            }
        }
        expired
    }

    /// Streams of a bucket whose ids start with `prefix` and sort after
    /// `after`, in stream-id order: one range scan from the first of them,
    /// so a page costs its length plus a lookup, however deep it starts.
    pub fn bucket_page<'a>(
        &'a self,
        bucket: &'a str,
        prefix: &'a str,
        after: &'a str,
    ) -> impl Iterator<Item = (&'a StreamKey, &'a Entry)> + 'a {
        use std::ops::Bound;
        // Ids with the prefix are contiguous from the prefix itself on.
        let start = if after >= prefix {
            Bound::Excluded(StreamKey::boxed(bucket, after))
        } else {
            Bound::Included(StreamKey::boxed(bucket, prefix))
        };
        self.streams
            .range::<StreamKey, _>((start.as_ref().map(|k| &**k), Bound::Unbounded))
            .take_while(move |(k, _)| k.bucket() == bucket && k.stream().starts_with(prefix))
            .map(|(k, e)| (&**k, &**e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(s: &mut Store, handle: u64, content_type: &str) {
        s.apply(Record::Create(CreateRecord::bare(handle, "b", &format!("s{handle}"), content_type, 0)));
    }

    /// A checkpoint lists its streams once each, sorted by name: so they
    /// are adopted, and one out of order or repeated is refused, leaving
    /// the store empty.
    #[test]
    fn adopted_streams_come_sorted_once() {
        let state = |h: u64, name: &str| StreamState::from_create(&CreateRecord::bare(h, "b", name, "text/plain", 0));
        let mut s = Store::new(0, 8);
        let out = s.adopt(|add| {
            add(state(1, "a"));
            add(state(2, "c"));
            7
        });
        assert_eq!(out, Ok(7));
        assert_eq!(s.by_handle(2).map(|e| e.state.key.stream().to_string()), Some("c".into()));
        assert_eq!(s.streams.keys().map(|k| k.stream()).collect::<Vec<_>>(), ["a", "c"]);
        for names in [["c", "a"], ["a", "a"]] {
            let mut s = Store::new(0, 8);
            let out = s.adopt(|add| {
                add(state(1, names[0]));
                add(state(2, names[1]));
            });
            assert!(out.unwrap_err().to_string().contains("out of order or repeated"), "{names:?}");
            assert!(s.streams.is_empty() && s.handles.is_empty() && s.census.streams("b") == 0, "{names:?}");
        }
    }

    fn content_type(s: &mut Store, handle: u64) -> Rc<str> {
        s.by_handle(handle).expect("held").state.content_type.clone()
    }

    #[test]
    fn streams_share_one_copy_of_a_content_type_up_to_the_cap() {
        let mut s = Store::new(0, 4);
        create(&mut s, 1, "text/plain");
        create(&mut s, 2, "text/plain");
        assert!(Rc::ptr_eq(&content_type(&mut s, 1), &content_type(&mut s, 2)));
        // Past the cap, while every shared type is held, a stream keeps its own.
        for h in 3..(3 + MAX_SHARED_CONTENT_TYPES as u64) {
            create(&mut s, h, &format!("x/t{h}"));
        }
        assert_eq!(s.content_types.len(), MAX_SHARED_CONTENT_TYPES);
        let last = 2 + MAX_SHARED_CONTENT_TYPES as u64;
        assert!(!s.content_types.contains(&*format!("x/t{last}")), "the type past the cap is not shared");
        create(&mut s, 10_000, &format!("x/t{last}"));
        assert!(!Rc::ptr_eq(&content_type(&mut s, last), &content_type(&mut s, 10_000)));
        // Once a type's streams are gone, its slot goes to the next new type.
        s.apply(Record::Delete { handle: 3 });
        create(&mut s, 10_001, "y/new");
        create(&mut s, 10_002, "y/new");
        assert!(Rc::ptr_eq(&content_type(&mut s, 10_001), &content_type(&mut s, 10_002)));
        assert!(!s.content_types.contains("x/t3"));
        assert!(s.content_types.len() <= MAX_SHARED_CONTENT_TYPES);
    }
}
