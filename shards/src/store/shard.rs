//! A shard's write operations: reserve journal room, decide through the
//! protocol core ([`crate::decide`]), wait until durable, then publish to
//! readers; and opening a shard (restore, then resume the journal).

use super::clean_stop::{self, CheckpointId};
use super::files::StreamFiles;
use super::restore::{self, Restored};
use super::{AppendOutcome, BucketInfo, CreateOutcome, ForkPlan, SnapshotAt, Store, StoreError, StreamKey};
use crate::core::append::AppendInput;
use crate::core::body::Point;
use crate::core::create::CreateInput;
use crate::log::recovery::{Mode, RecoveryError};
use crate::log::{Log, LogConfig, LogError, Record};
use crate::signal::Signal;
use crate::storage::Storage;
use crate::tuning::{DISK_FREE_REFRESH, FLUSH_BACKLOG, JOURNAL_ROOM_SEGMENTS};
use std::cell::{Cell, RefCell};

/// How a shard keeps its unflushed tail bounded.
#[derive(Clone, Copy, Debug)]
pub struct FlushConfig {
    /// Flush once this many journal bytes were appended since the last flush.
    pub bytes: u64,
    /// Flush at least this often when anything changed.
    pub every: std::time::Duration,
    /// A checkpoint that only gives space back waits until the last one is
    /// this many times as old as its flush took
    /// ([`crate::tuning::CHECKPOINT_FREE_SPACING`]; 0: at every flush).
    pub free_spacing: u32,
    /// A flush that writes this many streams or more makes their files
    /// durable with one sync of the file system, fewer with an fdatasync
    /// per file ([`crate::tuning::SYNC_ONCE_STREAMS`]; at least 1).
    pub sync_once: usize,
    /// An append of this many bytes or more is placed in its stream file
    /// when it can be, never entering memory or the journal
    /// ([`crate::tuning::PLACE_FROM`]; `usize::MAX`: never; at least 1).
    pub place_from: usize,
    /// A stream whose own index and data take at most this many bytes
    /// keeps them in a bundle, a file small streams share
    /// ([`crate::tuning::BUNDLE_MAX`]; 0: every stream has files of its own).
    pub bundle_max: u32,
    /// A flush visits, encodes and hands back this many streams at a time,
    /// requests running between slices ([`crate::tuning::FLUSH_SLICE`]; at least 1).
    pub slice: usize,
}

/// The last checkpoint a flush installed (see [`Shard::stop_clean`] and
/// `Shard::may_free`).
#[derive(Clone, Copy)]
pub(crate) struct Installed {
    pub id: CheckpointId,
    pub ended: std::time::Instant,
    pub took: std::time::Duration,
}

/// What a write does to the disk: the disk room it needs depends on it
/// (see [`Shard::disk_room`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Room {
    /// Adds data (snapshots, attributes, bucket creates).
    Grows,
    /// Adds stream data (creates, forks, appends): as `Grows`, and only
    /// within the cold tier's cap ([`crate::tiered::CAP`]).
    Data,
    /// Gives space back once flushed (deletes, retention, expiry, bucket deletes).
    Frees,
}

/// Which reading of the free disk space a check takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// The last one, if under [`DISK_FREE_REFRESH`] old, less what the
    /// journal took since.
    Cached,
    /// statvfs now.
    Fresh,
}

/// Everything a shard is opened with.
#[derive(Clone, Debug)]
pub struct ShardConfig {
    pub log: LogConfig,
    /// Stream-file descriptors the shard may keep open
    /// ([`crate::tuning::MIN_OPEN_FILES`]..=`MAX_OPEN_FILES`).
    pub open_files: usize,
    /// Producers each stream remembers.
    pub max_producers: usize,
    pub flush: FlushConfig,
    /// Shards sharing the data dir's file system: a write that adds data
    /// counts on its share of the free space only.
    pub shards: usize,
    /// Where the store's file operations go (the simulation injects faults).
    pub storage: Storage,
}

/// A shard: its store, its journal and its stream files.
pub struct Shard {
    pub id: usize,
    pub store: RefCell<Store>,
    pub log: Log,
    pub files: StreamFiles,
    pub flush: FlushConfig,
    /// `log.appended_bytes()` when the last flush took its capture.
    pub(crate) flushed: Cell<u64>,
    /// Notified when a flush ends.
    pub(crate) flush_done: Signal,
    pub(crate) flushing: Cell<bool>,
    /// Why the last flush failed (cleared by the next that succeeds).
    pub(crate) flush_error: RefCell<Option<LogError>>,
    pub flush_stats: crate::stats::FlushStats,
    /// `log.appended_bytes()` when the last checkpoint written was
    /// captured, and its length (see `Shard::lagging`).
    pub(crate) checkpointed: Cell<(u64, usize)>,
    /// A flush since the last checkpoint stored bytes it does not record.
    pub(crate) unrecorded: Cell<bool>,
    /// The next flush writes a checkpoint whatever its size.
    pub(crate) force_checkpoint: Cell<bool>,
    /// The checkpoint the last flush that wrote one installed, when that
    /// flush ended and how long it took.
    pub(crate) installed: Cell<Option<Installed>>,
    /// The clean stop's flush ran ([`Shard::stop_clean`]): no flush runs after it.
    pub(crate) stopped: Cell<bool>,
    /// Tail buffers one flush leaves for the next capture.
    pub spares: RefCell<super::spares::Spares>,
    /// Free disk bytes when last read, when, and the journal's appended bytes then.
    disk_free: Cell<Option<(std::time::Instant, u64, u64)>>,
    /// See [`ShardConfig::shards`].
    shards: u64,
    /// `log.appended_bytes()` when last counted toward the cold tier's cap.
    capped: Cell<u64>,
    /// Streams with placed appends in flight (`super::place`), by handle:
    /// nothing else appends to them meanwhile.
    pub(crate) placing: RefCell<crate::handles::HandleMap<super::pipeline::Pipeline>>,
    /// Notified when a placement ends.
    pub(crate) placed: Signal,
}

/// What [`Shard::settle`] saw of its stream, read with its last lookup:
/// a caller that reads it before its next await need not look again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settled {
    /// The stream is there (live or a tombstone) in JSON mode.
    pub json: bool,
}

impl Shard {
    /// Opens shard `id` under `cfg.log.dir`: restores its store from the
    /// checkpoint, its stream files and the journal written since.
    pub async fn open(id: usize, cfg: ShardConfig) -> Result<Shard, RecoveryError> {
        let ShardConfig { log: cfg, open_files, max_producers, flush, shards, storage } = cfg;
        assert!(shards > id, "shard {id} of {shards}");
        assert!(flush.sync_once >= 1, "a flush of one stream or more syncs somehow");
        assert!(flush.place_from >= 1, "an append places at least one byte");
        assert!(flush.slice >= 1, "a flush's slice holds at least one stream");
        let root = cfg.dir.parent().unwrap_or(&cfg.dir).to_path_buf();
        let files = StreamFiles::new(&root, id as u32, open_files, storage);
        let (streams, storage) = (files.dir(id as u32), files.storage());
        storage.create_dir_all(&streams).map_err(|e| format!("cannot create {}: {e}", streams.display()))?;
        let bundles = files.bundles_dir();
        storage.create_dir_all(&bundles).map_err(|e| format!("cannot create {}: {e}", bundles.display()))?;
        storage.sync_dir(&cfg.dir).await.map_err(|e| format!("cannot sync {}: {e}", cfg.dir.display()))?;
        let Restored { mut store, tail, checked } =
            restore::restore(storage, &cfg.dir, id as u32, max_producers, Mode::Repair)?;
        store.streams.bundles.set_max(flush.bundle_max);
        // Before anything is written: a crash from here on must not find the mark.
        clean_stop::remove(storage, &cfg.dir)
            .await
            .map_err(|e| format!("cannot remove {}: {e}", cfg.dir.join(clean_stop::CLEAN_STOP).display()))?;
        match checked {
            None => tracing::info!(
                shard = id,
                streams = store.streams.len(),
                "stopped cleanly: stream files trusted as the checkpoint records them"
            ),
            Some(checked) if !store.streams.is_empty() => tracing::info!(
                shard = id,
                streams = store.streams.len(),
                checked,
                "after a crash: stream files checked for the streams the journal since the checkpoint names"
            ),
            Some(_) => {}
        }
        let torn_bytes = tail.torn_bytes;
        // Segments after the newest one with records were prepared, or rolled
        // into, but never written before the stop. Writing resumes where the
        // records end; the first blank one is reused (as the next segment, or
        // the first when none has records) if whole, and the others are
        // removed, newest first (so a stop midway leaves no gap), so a blank
        // segment never sits between written ones. One cut short (prepared
        // under its own name by an earlier binary) is prepared again.
        let written = tail.ends.iter().rposition(|&e| e > 0).map_or(0, |i| i + 1);
        let mut segments = Vec::new();
        for &no in &tail.segments[..written] {
            segments.push(
                crate::log::segment::open_segment(&cfg.dir, no, cfg.dsync())
                    .await
                    .map_err(|e| format!("cannot open segment {no}: {e}"))?,
            );
        }
        let remove = |no: u32| {
            std::fs::remove_file(crate::log::segment::segment_path(&cfg.dir, no))
                .map_err(|e| format!("cannot remove unwritten segment {no}: {e}"))
        };
        let mut blank = None;
        if let Some((&first, rest)) = tail.segments[written..].split_first() {
            for &no in rest.iter().rev() {
                remove(no)?;
            }
            let whole = crate::log::segment::open_segment(&cfg.dir, first, cfg.dsync())
                .await
                .map_err(|e| format!("cannot open segment {first}: {e}"))?;
            if whole.size >= cfg.segment_size {
                blank = Some(whole);
            } else {
                remove(first)?;
            }
        }
        let (write_pos, crc) = segments.len().checked_sub(1).map_or((0, 0), |i| (tail.ends[i], tail.crcs[i]));
        let (active, next) = match (segments.pop(), blank) {
            (Some(s), next) => (s, next),
            (None, Some(first)) => (first, None),
            (None, None) => {
                let no = tail.segments.first().copied().unwrap_or(1);
                let first = crate::log::segment::create_segment(&cfg.dir, no, cfg.segment_size, cfg.dsync())
                    .await
                    .map_err(|e| format!("cannot create the first log segment in {}: {e}", cfg.dir.display()))?;
                (first, None)
            }
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
        let head_file = crate::log::marks::Head::open(&cfg.dir)
            .await
            .map_err(|e| format!("cannot open {}/log-head: {e}", cfg.dir.display()))?;
        let resume =
            crate::log::Resume { active, write_pos, crc, older: segments, next, head: tail.head, head_file, seal };
        let log = Log::start(cfg, resume);
        log.stats.torn_bytes.set(torn_bytes);
        let flushed = log.appended_bytes();
        Ok(Shard {
            id,
            store: RefCell::new(store),
            log,
            files,
            flush,
            flushed: Cell::new(flushed),
            flush_done: Signal::default(),
            flushing: Cell::new(false),
            flush_error: RefCell::new(None),
            flush_stats: crate::stats::FlushStats::new(flushed),
            checkpointed: Cell::new((flushed, 0)),
            unrecorded: Cell::new(false),
            force_checkpoint: Cell::new(false),
            installed: Cell::new(None),
            stopped: Cell::new(false),
            spares: RefCell::new(super::spares::Spares::new((FLUSH_BACKLOG * flush.bytes) as usize)),
            disk_free: Cell::new(None),
            shards: shards as u64,
            capped: Cell::new(flushed),
            placing: RefCell::default(),
            placed: Signal::default(),
        })
    }

    /// Reserves log room for a write of about `bytes` that `room` says adds
    /// data or gives space back (plus slack for a lazy
    /// expiry record); no await may come between this and the append.
    /// Waits first while the flusher is too far behind, so the memory the
    /// unflushed tail holds stays bounded.
    pub(crate) async fn reserve(&self, bytes: usize, room: Room) -> Result<(), LogError> {
        self.flush_room().await?;
        self.disk_room(bytes as u64, room)?;
        if room == Room::Data {
            self.tier_room(bytes as u64)?;
        }
        self.log.reserve(bytes + 256).await
    }

    /// Refuses a write that adds stream data (`507`) while the cold tier
    /// holds writes: the data files' bytes the object store has not
    /// confirmed would pass `--local-bytes` (see [`crate::tiered::Cap`]).
    /// Counts the journal bytes this shard appended since it last did.
    pub(super) fn tier_room(&self, bytes: u64) -> Result<(), LogError> {
        let appended = self.log.appended_bytes();
        let new = appended - self.capped.replace(appended);
        if !crate::tiered::CAP.room(new, bytes) {
            return Err(LogError::Unconfirmed);
        }
        Ok(())
    }

    /// Refuses a write (`507`) unless the disk keeps room for the flush to
    /// copy every unflushed byte, this write included, into stream files,
    /// and [`JOURNAL_ROOM_SEGMENTS`] journal segments more (the active one, whose flushed bytes
    /// stay until it rolls, and the next): the flush is what frees journal
    /// segments, so a disk filled by the journal alone could never drain.
    /// Shards share the file system, so such a write counts on its shard's
    /// share of the free space only: what every shard's flush needs then
    /// fits at once. A record that gives space back needs room only for
    /// itself and the flush, in all the free space: it may use the room the
    /// others keep, so on a disk full of streams a DELETE still goes
    /// through and its flush frees the files.
    pub(super) fn disk_room(&self, bytes: u64, room: Room) -> Result<(), LogError> {
        let unflushed = self.log.appended_bytes() - self.flushed.get();
        let (segments, share) = match room {
            Room::Grows | Room::Data => (JOURNAL_ROOM_SEGMENTS, self.shards),
            Room::Frees => (0, 1),
        };
        let need = unflushed.saturating_add(bytes).saturating_add(segments * self.log.segment_size());
        let fits = |free: Option<u64>| free.is_none_or(|free| free / share >= need);
        // A refusal is made on a fresh reading only: a cached one may
        // predate the flush that unlinked a deleted stream's files.
        if fits(self.free_bytes(Reading::Cached)) || fits(self.free_bytes(Reading::Fresh)) {
            return Ok(());
        }
        Err(LogError::NoSpace)
    }

    /// Free disk bytes: read (statvfs) at most every [`DISK_FREE_REFRESH`],
    /// and in between counted down by the journal bytes appended since, so
    /// the write path makes no syscall for it; [`Reading::Fresh`] reads now.
    fn free_bytes(&self, reading: Reading) -> Option<u64> {
        let (now, appended) = (std::time::Instant::now(), self.log.appended_bytes());
        match self.disk_free.get() {
            Some((at, free, then)) if reading == Reading::Cached && now.duration_since(at) < DISK_FREE_REFRESH => {
                Some(free.saturating_sub(appended - then))
            }
            _ => {
                let free = self.files.free_bytes().ok()?;
                self.disk_free.set(Some((now, free, appended)));
                Some(free)
            }
        }
    }

    /// Log room for the data and message lengths an append of `body` can
    /// encode to: JSON normalization keeps at most the body plus one comma,
    /// and each message adds a 4-byte length. Only a JSON array holds more
    /// than one message, at most one per comma plus one; counting them in
    /// other bodies (a 1 MiB text append) would cost a pass over every byte
    /// for nothing.
    fn append_room(body: &[u8]) -> usize {
        let array = crate::core::json::is_array(body);
        let messages = if array { body.iter().filter(|&&b| b == b',').count() + 1 } else { 1 };
        body.len() + 1 + 4 * messages
    }

    /// Log room for what an append records besides its bytes and lengths:
    /// its `Stream-Seq` and producer id.
    pub(super) fn stamp_room(input: &AppendInput<'_>) -> usize {
        input.stream_seq.map_or(0, str::len) + input.producer.as_ref().map_or(0, |p| p.id.len())
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
            .map_or(0, |f| f.record.ancestors.len() * 44 + f.prefix.len() + 4 * f.prefix_messages.len() + 4);
        // Repeating the create of a stream that is there adds no stream data
        // (the answer is 200 or 409): the cold tier's cap does not hold it.
        let room = if self.store.borrow().is_live(key, now_ms) { Room::Grows } else { Room::Data };
        self.reserve(
            Self::append_room(body)
                + inherited
                + key.bucket().len()
                + key.stream().len()
                + input.content_type.len()
                + input.attrs.len(),
            room,
        )
        .await?;
        let decided = self.store.borrow_mut().decide_create(&self.log, key, input, body, fork.as_ref(), now_ms);
        let c = self.settle_outcome(key, decided).await?;
        self.publish(c.handle, c.tail, c.records, c.closed);
        Ok(CreateOutcome {
            created: c.start.is_some(),
            tail: c.tail,
            closed: c.closed,
            records: (c.start.unwrap_or(c.records), c.records),
        })
    }

    /// POST: append (and/or close).
    pub async fn append(
        &self,
        key: &StreamKey,
        input: &AppendInput<'_>,
        now_ms: u64,
    ) -> Result<AppendOutcome, StoreError> {
        // Boxed: placing is most of this future's size (2.5 of 2.6 KiB),
        // and every small append's task would carry it.
        if self.may_place(input) {
            if let Some(placed) = Box::pin(self.place(key, input, now_ms)).await {
                return placed;
            }
        }
        self.reserve_unplaced(key, Self::append_room(input.body) + Self::stamp_room(input)).await?;
        let decided = self.store.borrow_mut().decide_append(&self.log, key, input, now_ms, None);
        let (handle, out) = self.settle_outcome(key, decided).await?;
        self.publish(handle, out.next_offset, out.records.1, out.closed);
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
        self.reserve_unplaced(key, total).await?;
        let decided = (|| {
            let mut st = self.store.borrow_mut();
            st.expire(&self.log, key, now_ms);
            let cap = st.max_producers();
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
                results.push(super::decide::append_one(&self.log, (&mut *e, cap), &input, now_ms, None).map(
                    |(l, out)| {
                        lsn = l;
                        out
                    },
                ));
            }
            // Refused frames report the tail as decided here: durable below.
            let decided = (e.state.handle, e.state.tail(), e.state.records(), e.state.closed, results);
            st.written.insert(decided.0);
            Ok((lsn, decided))
        })();
        let (handle, tail, records, closed, results) = self.settle_outcome(key, decided).await?;
        self.publish(handle, tail, records, closed);
        Ok(results)
    }

    /// Answers only from durable state: a decision waits for its records
    /// (`lsn`); a refusal waits for everything decided before it, and the
    /// stream's tail as decided then is published, so the error reports a
    /// durable tail, never one a crash could take back.
    pub(super) async fn settle_outcome<T>(
        &self,
        key: &StreamKey,
        decided: Result<(u64, T), StoreError>,
    ) -> Result<T, StoreError> {
        match decided {
            Ok((lsn, out)) => {
                self.log.durable(lsn).await?;
                debug_assert!(self.log.durable_mark() >= lsn, "an outcome is answered, and published, once durable");
                Ok(out)
            }
            Err(refusal) => {
                let lsn = self.log.assigned();
                let tail = self
                    .store
                    .borrow()
                    .streams
                    .get(key)
                    .map(|e| (e.state.handle, e.state.tail(), e.state.records(), e.state.closed));
                self.log.durable(lsn).await?;
                if let Some((handle, tail, records, closed)) = tail {
                    self.publish(handle, tail, records, closed);
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
    pub async fn settle(&self, key: &StreamKey) -> Result<Settled, LogError> {
        let look = || {
            let st = self.store.borrow();
            let e = st.streams.get(key);
            (e.map_or(st.removed, |e| e.settle), Settled { json: e.is_some_and(|e| e.state.json) })
        };
        let (mut need, mut seen) = look();
        // The common case, already durable, costs one lookup: nothing waits,
        // so nothing can change before the caller reads.
        while need > self.log.durable_mark() {
            self.log.durable(need).await?;
            (need, seen) = look();
        }
        Ok(seen)
    }

    pub(super) fn publish(&self, handle: u64, tail: u64, records: u64, closed: bool) {
        if let Some(e) = self.store.borrow_mut().by_handle(handle) {
            e.state.publish(tail, records, closed);
            e.notify();
        }
    }

    /// Resolves a snapshot or retention position to a point the index
    /// vouches for: a record ordinal becomes its offset, an offset learns
    /// whether a record starts there.
    async fn resolve(&self, key: &StreamKey, at: SnapshotAt, now_ms: u64) -> Result<Point, StoreError> {
        let (tail, first, records) = {
            let mut st = self.store.borrow_mut();
            let s = &st.live(key, now_ms).ok_or(StoreError::NoStream)?.state;
            (s.visible.tail, s.first_message, s.visible.messages)
        };
        let found = match at {
            SnapshotAt::Record(r) if r < first => return Err(crate::core::coordinates::TRIMMED),
            SnapshotAt::Record(r) if r > records => return Err(crate::core::snapshot::BEYOND_TAIL),
            SnapshotAt::Record(r) => self.record_offset(key, r).await.map(|offset| Point { offset, record: Some(r) }),
            // The core refuses it as beyond the tail.
            SnapshotAt::Offset(o) if o > tail => return Ok(Point { offset: o, record: None }),
            SnapshotAt::Offset(o) => self.point(key, o).await,
        };
        found.map_err(|e| {
            tracing::error!(shard = self.id, key = %key, error = %e, "index lookup failed");
            StoreError::ReadFailed
        })
    }

    /// Waits while the journal holds more unflushed bytes than the flusher
    /// may fall behind by ([`FLUSH_BACKLOG`] flushes' worth); refuses with the
    /// flusher's error when flushes are failing (a full disk: 507).
    pub(super) async fn flush_room(&self) -> Result<(), LogError> {
        loop {
            let behind = self.log.appended_bytes() - self.flushed.get();
            if behind <= self.flush.bytes.saturating_mul(FLUSH_BACKLOG) || self.log.is_failed() {
                return Ok(());
            }
            if let Some(e) = self.flush_error.borrow().clone() {
                return Err(e);
            }
            let seen = self.flush_done.generation();
            self.flush_done.changed(seen).await;
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
        let at = self.resolve(key, at, now_ms).await?;
        self.reserve(body.len() + content_type.len() + 128, Room::Grows).await?;
        let decided = self.store.borrow_mut().decide_snapshot(&self.log, key, at, content_type, body, expected, now_ms);
        self.settle_outcome(key, decided).await
    }

    /// PUT {stream}/retention/{offset}: moves the earliest retained offset.
    pub async fn set_retention(&self, key: &StreamKey, at: SnapshotAt, now_ms: u64) -> Result<u64, StoreError> {
        let at = self.resolve(key, at, now_ms).await?;
        self.reserve(48, Room::Frees).await?;
        let decided = self.store.borrow_mut().decide_retention(&self.log, key, at, now_ms);
        self.settle_outcome(key, decided).await
    }

    /// DELETE a stream: hard when nothing forks from it, soft (410) otherwise.
    pub async fn delete(&self, key: &StreamKey, now_ms: u64) -> Result<(), StoreError> {
        self.reserve(16, Room::Frees).await?;
        let decided = self.store.borrow_mut().decide_delete(&self.log, key, now_ms);
        self.settle_outcome(key, decided).await
    }

    /// Disk space by use: the journal's segments (those the next flush
    /// deletes count as reclaimable) and the stream files (an index counted
    /// whole, its retained-away pages too).
    pub fn disk_usage(&self) -> crate::stats::DiskUsage {
        let mut st = self.store.borrow_mut();
        let mut u = self.log.disk_usage(st.journal_start);
        u.live += st.file_bytes();
        // Bundle bytes no stream's extent is in: compaction gives them back.
        let (size, live) = st.streams.bundles.bytes();
        u.reclaimable += size - live;
        u
    }

    /// Replaces a stream's attributes.
    pub async fn set_attrs(&self, key: &StreamKey, attrs: Vec<u8>, now_ms: u64) -> Result<(), StoreError> {
        self.reserve(attrs.len(), Room::Grows).await?;
        let decided = self.store.borrow_mut().decide_attrs(&self.log, key, attrs, now_ms);
        self.settle_outcome(key, decided).await
    }

    /// Deletes every stream whose TTL or Expires-At has passed, so streams
    /// nobody touches again still give their space back. Returns how many.
    pub async fn sweep_expired(&self, now_ms: u64) -> usize {
        let expired = self.store.borrow_mut().expired(now_ms);
        for key in &expired {
            if self.reserve(16, Room::Frees).await.is_err() {
                return 0;
            }
            let mut st = self.store.borrow_mut();
            st.expire(&self.log, key, now_ms);
        }
        expired.len()
    }

    /// Logs a bucket record in this (home) shard, or a subscription record
    /// in its owner shard, and waits until durable.
    pub async fn log_meta(&self, record: Record<'_>) -> Result<(), StoreError> {
        let (bytes, room) = match &record {
            Record::BucketDelete { .. } | Record::SubscriptionDelete { .. } => (128, Room::Frees),
            Record::SubscriptionPut { id, state } => (128 + id.len() + state.len(), Room::Grows),
            _ => (128, Room::Grows),
        };
        self.reserve(bytes, room).await?;
        let at = self.log.append(&record);
        self.store.borrow_mut().replay(record);
        self.log.durable(at.lsn).await?;
        Ok(())
    }
}
