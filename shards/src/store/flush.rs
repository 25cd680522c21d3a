//! The flush: moves every stream's unflushed tail from memory into its
//! stream files and, when one is due (see [`Shard::lagging`]), writes a
//! checkpoint, so the journal before it can go.
//!
//! Order (each step durable before the next; recovery's decision table in
//! [`super::restore`] handles a crash between any two):
//! 1. capture, with no await: note the journal position and the streams
//!    written since the last capture, whose tails the pass then freezes a
//!    slice at a time ([`super::pass`]), and, when a checkpoint is due
//!    ([`Shard::lagging`], [`Shard::may_free`]), start encoding it as of
//!    that instant, a slice at a time once the pass is done, while steps 2
//!    and 3 run ([`super::Streams`]);
//! 2. wait until the journal holds everything captured (it is durable);
//! 3. write data, then index pages, then new snapshot files, each file
//!    made durable (fdatasync) before its write returns, and sync the
//!    streams directory;
//! 4. write the checkpoint to a temporary file, fdatasync it, rename it
//!    over the old one, sync the shard directory (a flush without one
//!    ends after step 5's first part: recovery knows its state as a flush
//!    cut off before its checkpoint);
//! 5. serve the frozen chunks from the files, delete the files the
//!    checkpoint no longer needs (deleted streams, replaced snapshots), give
//!    retained-away ranges back (hole punch), delete journal segments
//!    wholly before the captured position.
//!
//! A failure up to the rename of step 4 undoes the flush: the old
//! checkpoint stands, memory serves the chunks again and the stream files
//! are cut back to what it records (a data file never below the placed
//! appends the journal names: after a start they are in memory and still
//! in the file, and the next start reads them back from there). From the rename on, the flush is done:
//! the new checkpoint records the chunks, so nothing may cut them back. A
//! failure after it (the directory sync, an unlink, a hole punch, the
//! journal's reclamation) only postpones step 5's clean-up: each step is
//! idempotent, what failed is queued again (doomed files back to the
//! graveyard, punches back to their start) and a later flush retries it.
//! Files and segments are only given back once the checkpoint that no
//! longer needs them is durable (its directory synced), and not while the
//! backup holds the shard ([`crate::hold`]): then step 5 is queued as if it
//! had failed, so a copy in progress finds every file its checkpoint needs.

use super::bundles::Mark;
use super::checkpoint::{self, Header, CHECKPOINT};
use super::clean_stop::{self, CheckpointId, CLEAN_STOP};
use super::files::{snapshot_name, FileName, Sync, BUNDLES_DIR, STREAMS_DIR};
use super::pass::{Job, Pass, Punch};
use super::shard::Installed;
use super::spares::Spares;
use super::{Shard, StreamKey};
use crate::core::body::BundleAt;
use crate::core::index::{self, INDEX_PAGE};
use crate::core::stream::Blob;
use crate::every::Every;
use crate::log::writer::io_to_log;
use crate::log::LogError;
use crate::tick::period;
use crate::tuning::{CHECKPOINT_LAG, FLUSH_CONCURRENCY, FLUSH_PAUSE, FLUSH_POLL, UNLINKS_PER_YIELD};
use crate::woken::join_all;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Everything one flush captured.
struct Capture {
    generation: u64,
    journal: (u32, u64),
    lsn: u64,
    /// `flushed` before this capture.
    flushed_before: u64,
    /// `--flush-bytes` of journal or more came since the last capture: the
    /// tail buffers are worth keeping (`super::spares`).
    large: bool,
    jobs: Vec<Job>,
    snapshots: Vec<(u64, Rc<Vec<u8>>)>,
    punches: Vec<Punch>,
    doomed: Vec<String>,
    /// Where bundle reservations stood at the capture.
    bundles: Mark,
    /// A checkpoint is due: the store's streams encode it
    /// ([`Shard::encode_checkpoint`]).
    encoding: bool,
    /// The checkpoint written, once encoded: its id and length.
    checkpoint: Option<(CheckpointId, usize)>,
}

fn io(what: &str) -> impl Fn(std::io::Error) -> LogError + '_ {
    move |e| match io_to_log(e) {
        LogError::Failed(why) => LogError::Failed(format!("flush: {what}: {why}")),
        no_space => no_space,
    }
}

impl Shard {
    /// Flushes whenever enough journal bytes piled up, or the interval
    /// passed with anything to do. A failed flush changes nothing a restart
    /// depends on (the journal still holds everything and the old checkpoint
    /// stands): its chunks go back to memory and the next flush writes them
    /// again, whatever the page cache lost. Writers get the error once they
    /// would run too far ahead ([`Shard::reserve`]).
    pub async fn flush_loop(&self) {
        let mut last = Instant::now();
        let warn = Every::default();
        let mut idle = false;
        loop {
            glommio::timer::sleep(period(FLUSH_POLL)).await;
            if self.log.is_failed() || self.flushing.get() || self.stopped.get() {
                continue;
            }
            let behind = self.log.appended_bytes() - self.flushed.get();
            let retry = self.flush_error.borrow().is_some();
            let due = behind >= self.flush.bytes
                || (last.elapsed() >= self.flush.every && (behind > 0 || retry || self.store.borrow().flush_due));
            if !due && last.elapsed() >= self.flush.every && !idle {
                // Idle for an interval: the kept tail buffers and the free
                // memory at the top of the shard's arena go back, once
                // (`give_back`, when buffers went, trims the top too).
                if !self.spares.borrow_mut().refill(std::iter::empty(), false) {
                    crate::heap::trim_top();
                }
                idle = true;
            }
            if due {
                (last, idle) = (Instant::now(), false);
                if let Err(e) = self.flush().await {
                    if let Some(held) = warn.allow(Instant::now()) {
                        tracing::warn!(shard = self.id, error = ?e, repeats = held, "flush failed; retrying");
                    }
                    // Shards share the disk: retry at staggered times, so on a
                    // nearly full one a flush can finish and free journal
                    // segments for the next.
                    glommio::timer::sleep(period(FLUSH_POLL * (self.id as u32 + 1))).await;
                }
            }
        }
    }

    /// Waits until stream `handle` at `key` has its bytes below `offset` in
    /// its stream files, recorded by a checkpoint (a fork on another shard
    /// reads them there, so no restart of this one may cut them back),
    /// flushing if needed. Bytes in a bundle's extent move into files of
    /// the stream's own first: forks read files by stream
    /// ([`super::bundles`]).
    /// A flush that failed only in its clean-up still stored the bytes.
    pub async fn flush_through(&self, key: &StreamKey, handle: u64, offset: u64) -> Result<(), LogError> {
        let mut failed = None;
        loop {
            let stored = {
                let mut st = self.store.borrow_mut();
                let body = st.streams.get(key).filter(|e| e.state.handle == handle).map(|e| &e.state.body);
                let stored = body.map(|b| (b.stored, offset > b.base && !b.has_own_files()));
                if let Some((_, true)) = stored {
                    st.streams.bundles.leave_for_own_files(handle);
                    st.written.insert(handle);
                }
                stored
            };
            match stored {
                None => return Ok(()),
                Some((s, false)) if s >= offset && !self.unrecorded.get() => return Ok(()),
                Some(_) if failed.is_some() => return Err(failed.expect("checked")),
                Some(_) if self.flushing.get() => {
                    let seen = self.flush_done.generation();
                    self.flush_done.changed(seen).await;
                }
                Some(_) => {
                    self.force_checkpoint.set(true);
                    failed = self.flush().await.err();
                }
            }
        }
    }

    /// The clean stop, once nothing more is appended: waits for a flush in
    /// progress, then flushes everything with a checkpoint and marks that
    /// checkpoint as the one every stream file matches
    /// ([`super::clean_stop`]). No flush runs after it, so the mark holds.
    pub async fn stop_clean(&self) -> Result<(), LogError> {
        while self.flushing.get() {
            let seen = self.flush_done.generation();
            self.flush_done.changed(seen).await;
        }
        self.force_checkpoint.set(true);
        let flushed = self.flush().await;
        self.stopped.set(true);
        flushed?;
        let id = self.installed.get().expect("a flush with a forced checkpoint that succeeded installed one").id;
        clean_stop::write(self.files.storage(), &self.shard_dir(), id).await.map_err(io(CLEAN_STOP))
    }

    /// One flush (see the module header). Not reentrant, and not after the
    /// clean stop's.
    pub async fn flush(&self) -> Result<(), LogError> {
        assert!(!self.flushing.get(), "one flush at a time");
        if self.stopped.get() {
            return Err(LogError::Failed("flush: the shard stopped".into()));
        }
        self.flushing.set(true);
        let started = Instant::now();
        self.move_out_of_a_bundle().await;
        let mut c = self.capture();
        let ending = Ending(&self.store);
        self.pass(&mut c).await;
        let stats = &self.flush_stats;
        let r = match self.flush_steps(&mut c).await {
            Err(e) => {
                self.undo(&c).await;
                self.give_back(&c).await;
                // The next flush redoes all of this one, checkpoint included
                // (it replaces a temporary file this one may have left).
                self.force_checkpoint.set(true);
                Err(e)
            }
            Ok(()) => {
                self.stored(&c).await;
                match c.checkpoint {
                    Some((id, len)) => {
                        self.checkpointed.set((self.flushed.get(), len));
                        self.installed.set(Some(Installed { id, ended: Instant::now(), took: started.elapsed() }));
                        stats.checkpoint_bytes.set(stats.checkpoint_bytes.get() + len as u64);
                        self.unrecorded.set(false);
                        self.store.borrow_mut().placed_since.clear();
                        self.clean_up(&c).await
                    }
                    None => {
                        self.unrecorded.set(self.unrecorded.get() || !c.jobs.is_empty());
                        Ok(())
                    }
                }
            }
        };
        drop(ending);
        // After a large flush, the written chunks' buffers that no reader
        // holds serve the next capture's large tails; the rest are freed
        // here, a slice at a time.
        let mut finished = Vec::new();
        self.in_slices(c.jobs, |j| {
            if let Ok(chunk) = Rc::try_unwrap(j.chunk) {
                if Spares::worth_keeping(&chunk.bytes) {
                    finished.push(chunk.bytes);
                }
            }
        })
        .await;
        self.spares.borrow_mut().refill(finished.into_iter(), c.large);
        if r.is_err() {
            stats.failed.set(stats.failed.get() + 1);
        } else {
            stats.ok.set(stats.ok.get() + 1);
            stats.stored_through.set(self.flushed.get());
        }
        stats.seconds.observe(started.elapsed().as_secs_f64());
        self.close_unreferenced();
        *self.flush_error.borrow_mut() = r.clone().err();
        self.flushing.set(false);
        self.flush_done.notify();
        r
    }

    /// A flush failed before its checkpoint: memory serves everything again
    /// and the next flush redoes the work. The snapshot files it may have
    /// written carry its generation, which no checkpoint names and no later
    /// flush writes again: they go to the graveyard (recovery would refuse
    /// them as extra files once a later checkpoint stands).
    async fn undo(&self, c: &Capture) {
        self.in_slices(&c.jobs, |j| {
            let mut st = self.store.borrow_mut();
            if let Some(e) = st.by_handle(j.handle) {
                e.state.body.thaw();
            }
            // The next capture visits it again.
            st.written.insert(j.handle);
        })
        .await;
        {
            let mut st = self.store.borrow_mut();
            let dead = st.streams.bundles.rewind(c.bundles);
            st.graveyard.extend(dead.into_iter().map(|no| FileName::Bundle(no).to_string()));
            st.written.extend(c.snapshots.iter().map(|(handle, _)| *handle));
            st.snapshots_pending |= !c.snapshots.is_empty();
            st.graveyard.extend(c.snapshots.iter().map(|(handle, _)| snapshot_name(*handle, c.generation)));
        }
        self.punch_again(&c.punches);
        // The journal bytes the capture covered are unflushed again.
        self.flushed.set(c.flushed_before);
    }

    /// Queues `punches` for the next flush (a hole punch is idempotent).
    fn punch_again(&self, punches: &[Punch]) {
        let mut st = self.store.borrow_mut();
        for p in punches {
            if let Some(e) = st.by_handle(p.handle) {
                e.set_punched(p.from);
                st.punching.insert(p.handle);
            }
        }
    }

    /// After a failed flush, cuts the stream files back to what the
    /// checkpoint records, so a full disk gets the partial writes' space back
    /// (best effort: recovery cuts them back too), but never a data file
    /// below the placed bytes the journal names ([`super::Store::placed_since`]).
    async fn give_back(&self, c: &Capture) {
        let (mut failed, mut first) = (0, None);
        // Extents are written where no checkpoint points; files a stream
        // was leaving its bundle for are written again from the start.
        for j in c.jobs.iter().filter(|j| j.from.is_none() && j.to.is_none()) {
            let placed = self.store.borrow().placed_since.get(&j.handle).copied().unwrap_or(0);
            let data = (j.chunk.start - j.origin).max(placed);
            let stored = [(FileName::Data(j.handle), data), (FileName::Index(j.handle), j.index.len)];
            for (name, len) in stored {
                if let Err(e) = self.files.truncate(name, len).await {
                    failed += 1;
                    first.get_or_insert((name, e));
                }
            }
        }
        if let Some((file, error)) = first {
            tracing::debug!(shard = self.id, %file, %error, failed, "cannot cut stream files back");
        }
    }

    fn capture(&self) -> Capture {
        let mut st = self.store.borrow_mut();
        let journal = self.log.position();
        let lsn = self.log.assigned();
        let flushed_before = self.flushed.replace(self.log.appended_bytes());
        let large = self.log.appended_bytes() - flushed_before >= self.flush.bytes;
        st.generation += 1;
        let generation = st.generation;
        // Bundles nothing lives in go like any file no stream needs.
        let emptied = st.streams.bundles.take_emptied();
        st.graveyard.extend(emptied.into_iter().map(|no| FileName::Bundle(no).to_string()));
        let forced = self.force_checkpoint.take();
        let may_free = forced || self.may_free();
        let frees = st.flush_due || !st.graveyard.is_empty();
        // Snapshot files carry this flush's generation: only a checkpoint names them.
        let due = forced || st.snapshots_pending || (frees && may_free) || self.lagging();
        // Only the streams written since the last capture have new bytes,
        // a pending snapshot or a retention that moved (`written`, whose
        // room goes with it: a burst of creates leaves no table behind),
        // and only those whose retention is not all given back have space
        // to give back (`punching`): a capture costs what changed, not the
        // shard's stream count, checkpoint or not. The pass visits them in
        // slices ([`Shard::pass`]).
        let punch = due && may_free;
        let mut visit = std::mem::take(&mut st.written);
        if punch {
            visit.extend(st.punching.iter().copied());
        }
        let bundles = st.streams.bundles.mark();
        let spares = match large {
            true => self.spares.borrow_mut().lend(),
            false => Spares::new(0),
        };
        let pass = Pass::new(visit, punch, spares);
        #[cfg(debug_assertions)]
        nothing_left_behind(&st, |h| pass.holds(h), &[]);
        st.streams.begin_pass(pass);
        // Space given back now; the pass adds retention that moved since
        // the last capture.
        st.flush_due &= !due;
        st.snapshots_pending = false;
        let doomed = if due { st.graveyard.clone() } else { Vec::new() };
        if due {
            let header = Header {
                generation,
                journal,
                next_handle: st.next_handle,
                home_buckets: &st.home_buckets,
                doomed: &doomed,
                subscriptions: &st.subscriptions,
            };
            let encoder = checkpoint::Encoder::new(&header, st.streams.len());
            st.streams.begin_checkpoint(encoder);
        }
        Capture {
            generation,
            journal,
            lsn,
            flushed_before,
            large,
            jobs: Vec::new(),
            snapshots: Vec::new(),
            punches: Vec::new(),
            doomed,
            bundles,
            encoding: due,
            checkpoint: None,
        }
    }

    /// Step 1's pass over the streams the capture named, [`FlushConfig::slice`]
    /// at a time with a pause between slices; the jobs, snapshots and
    /// punches it took go to `c`.
    async fn pass(&self, c: &mut Capture) {
        self.sliced(|st, n| st.pass_some(n)).await;
        let mut st = self.store.borrow_mut();
        let taken = st.streams.end_pass().expect("still passing");
        assert!(taken.done(), "every stream the capture named is visited");
        self.spares.borrow_mut().put_back(taken.spares);
        for (handle, pending) in taken.punching {
            match pending {
                true => st.punching.insert(handle),
                false => st.punching.remove(&handle),
            };
        }
        st.flush_due |= !st.punching.is_empty();
        #[cfg(debug_assertions)]
        nothing_left_behind(&st, |h| st.written.contains(&h), &taken.snapshots);
        (c.jobs, c.snapshots, c.punches) = (taken.jobs, taken.snapshots, taken.punches);
    }

    /// Runs `step` (a [`FlushConfig::slice`] of some work in the store,
    /// returning whether it is all done) until it is done, with
    /// [`between_slices`] between slices.
    async fn sliced(&self, mut step: impl FnMut(&mut super::Store, usize) -> bool) {
        while !step(&mut self.store.borrow_mut(), self.flush.slice) {
            between_slices().await;
        }
        crate::heap::settle();
    }

    /// Runs `f` on each of `items`, a [`FlushConfig::slice`] at a time with
    /// [`between_slices`] between slices.
    async fn in_slices<T>(&self, items: impl IntoIterator<Item = T>, mut f: impl FnMut(T)) {
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 && i % self.flush.slice == 0 {
                between_slices().await;
            }
            f(item);
        }
        crate::heap::settle();
    }

    /// Step 1's checkpoint, encoded [`FlushConfig::slice`] streams at a
    /// time with a pause between slices, so that requests (and the I/O
    /// they wait for) run between them; it records the state at the
    /// capture all the same ([`super::Streams`]).
    async fn encode_checkpoint(&self) -> Vec<u8> {
        self.sliced(|st, n| st.streams.encode_some(n)).await;
        let encoder = self.store.borrow_mut().streams.end_checkpoint().expect("still encoding");
        encoder.finish()
    }

    /// Steps 2-4, up to the checkpoint's rename: an error leaves the old
    /// checkpoint in place. The checkpoint is encoded while steps 2 and 3
    /// wait for the disk.
    async fn flush_steps(&self, c: &mut Capture) -> Result<(), LogError> {
        let encoding = c.encoding;
        let encoded = async move {
            match encoding {
                true => Some(self.encode_checkpoint().await),
                false => None,
            }
        };
        let (encoded, stored) = futures_lite::future::zip(encoded, self.store_files(c)).await;
        stored?;
        let Some(bytes) = encoded else { return Ok(()) };
        c.checkpoint = Some((CheckpointId::of(c.generation, &bytes), bytes.len()));
        let storage = self.files.storage();
        storage.install(&self.shard_dir(), CHECKPOINT, bytes).await.map_err(io(CHECKPOINT))
    }

    /// Steps 2 and 3: the journal holds what the capture took, then its
    /// chunks and snapshots are in durable stream files.
    async fn store_files(&self, c: &Capture) -> Result<(), LogError> {
        self.log.durable(c.lsn).await?;
        // Many streams' files: written, then made durable by one sync of
        // the file system, not an fdatasync each (a burst of small streams
        // flushed 2.5k streams a second: each sync wrote its own inode and
        // directory blocks). Its handle is opened before the writes.
        let file_system = match c.jobs.len() >= self.flush.sync_once {
            true => Some(self.files.file_system().map_err(io(STREAMS_DIR))?),
            false => None,
        };
        let sync = if file_system.is_some() { Sync::Later } else { Sync::File };
        for batch in c.jobs.chunks(FLUSH_CONCURRENCY) {
            let done = join_all(batch.iter().map(|j| self.store_chunk(j, sync)).collect()).await;
            done.into_iter().collect::<Result<Vec<()>, _>>().map_err(io_to_log)?;
        }
        // Extents are written without a sync each: each bundle written is
        // synced once (or with the file system), and its directory, which
        // may have a new one.
        let mut bundles: Vec<u32> = c.jobs.iter().filter_map(|j| j.to.map(|t| t.no.get())).collect();
        bundles.dedup();
        if file_system.is_none() {
            for no in &bundles {
                self.files.sync(FileName::Bundle(*no)).await.map_err(io(BUNDLES_DIR))?;
            }
        }
        for (handle, blob) in &c.snapshots {
            let name = FileName::Snapshot(*handle, c.generation);
            let what = name.to_string();
            self.files.write(name, 0, blob, sync).await.map_err(io(&what))?;
        }
        let storage = self.files.storage();
        if let Some(fs) = &file_system {
            storage.sync_fs(fs).await.map_err(io(STREAMS_DIR))?;
        }
        if !bundles.is_empty() {
            storage.sync_dir(&self.files.bundles_dir()).await.map_err(io(BUNDLES_DIR))?;
        }
        storage.sync_dir(&self.files.dir(self.id as u32)).await.map_err(io(STREAMS_DIR))
    }

    /// A flush writes a checkpoint when one is forced (a fork needs its
    /// source's stored bytes recorded, [`Shard::flush_through`]; the redo
    /// of a failed flush; the clean stop), when it records new snapshot
    /// files, when it gives space back (files to delete, ranges to punch, a
    /// clean-up to retry) and [`Shard::may_free`], and when
    /// [`Shard::lagging`]. Otherwise the flush only moves tails into stream
    /// files, a state recovery knows as a flush cut off before its
    /// checkpoint (files cut back, the journal since the checkpoint
    /// replayed, and kept until then): a trickle of appends to a shard of
    /// many streams costs stream-file writes, not a rewrite of every
    /// stream's state each interval.
    ///
    /// Once the journal since the last checkpoint is 1/[`CHECKPOINT_LAG`]
    /// of that checkpoint's size: a restart replays at most about that
    /// much journal (plus one interval's).
    fn lagging(&self) -> bool {
        let (at, len) = self.checkpointed.get();
        (self.log.appended_bytes() - at).saturating_mul(CHECKPOINT_LAG) >= len as u64
    }

    /// Whether a checkpoint may be written to give space back: once the
    /// last one is [`super::FlushConfig::free_spacing`] times as old as its
    /// flush took. A small shard's checkpoint takes milliseconds, so it frees at
    /// every flush; a shard of a million streams frees every ten seconds or
    /// so instead of rewriting every stream's state each interval while
    /// streams are deleted.
    fn may_free(&self) -> bool {
        self.frees_after().is_zero()
    }

    /// How long until a checkpoint may give space back ([`Shard::may_free`]).
    pub fn frees_after(&self) -> Duration {
        let left = |i: Installed| (i.took * self.flush.free_spacing).saturating_sub(i.ended.elapsed());
        self.installed.get().map_or(Duration::ZERO, left)
    }

    /// Closes the cached descriptors of stream files no stream held here
    /// reads any more (its own, or one it has as an ancestor): another
    /// shard deletes a stream's files once no fork references it, and an
    /// open descriptor here would keep their space from the file system.
    /// Only the cache is visited (a few hundred descriptors), each asked of
    /// the handle table or of the forks' ancestor counts, never the streams
    /// (a walk over a million took its shard tens of milliseconds). At the
    /// end of every flush, checkpoint or not: a shard whose flushes write
    /// none for a while kept another shard's deleted files open until its
    /// next (`fork_simulation` seed 1101).
    fn close_unreferenced(&self) {
        let st = self.store.borrow();
        let own = self.id as u32;
        self.files.retain_open(|shard, handle| {
            (shard == own && st.holds_handle(handle)) || st.streams.inherits(shard, handle)
        });
    }

    /// Step 5, after the checkpoint's rename (see the module header): every
    /// step is tried; what failed is queued for a later flush and the first
    /// error is returned.
    async fn clean_up(&self, c: &Capture) -> Result<(), LogError> {
        let storage = self.files.storage();
        // While the backup copies this shard, nothing is given back (see `crate::hold`).
        let cleaning = crate::hold::begin_clean_up(self.id);
        let synced = match cleaning {
            None => Ok(false),
            Some(_) => storage.sync_dir(&self.shard_dir()).await.map(|()| true),
        };
        if !matches!(synced, Ok(true)) {
            // The new checkpoint may not survive a crash (or the backup may
            // still copy the old one): it may still need every file, punched
            // range and segment.
            self.store.borrow_mut().graveyard.extend(c.doomed.iter().cloned());
            self.punch_again(&c.punches);
            self.store.borrow_mut().flush_due = true;
            return synced.map(|_| ()).map_err(io(CHECKPOINT));
        }
        let mut first: Option<LogError> = None;
        let streams = self.files.dir(self.id as u32);
        let mut left = Vec::new();
        for (i, name) in c.doomed.iter().enumerate() {
            if i > 0 && i % UNLINKS_PER_YIELD == 0 {
                glommio::executor().yield_now().await;
            }
            if let Some(f) = FileName::parse(name) {
                self.files.forget(f);
            }
            match storage.unlink(&streams.join(name)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    first.get_or_insert(io(name)(e));
                    left.push(name.clone());
                }
                _ => {}
            }
        }
        let mut unpunched = Vec::new();
        for p in &c.punches {
            let punched = match self.files.punch(FileName::Data(p.handle), p.bytes.0, p.bytes.1).await {
                Ok(()) => self.punch_index(p).await,
                Err(e) => Err(e),
            };
            if let Err(e) = punched {
                first.get_or_insert(io("hole punch")(e));
                unpunched.push(*p);
            }
        }
        if let Err(e) = self.log.reclaim_below(c.journal.0).await {
            first.get_or_insert(io("journal reclamation")(e));
        }
        self.punch_again(&unpunched);
        let mut st = self.store.borrow_mut();
        st.graveyard.extend(left);
        if first.is_some() {
            st.flush_due = true;
        }
        first.map_or(Ok(()), Err)
    }

    /// Before a capture: when a bundle is mostly dead, reads it and has
    /// the flush move the streams still in it to the bundle being filled
    /// ([`super::bundles`]); a read that fails leaves it for a later flush.
    async fn move_out_of_a_bundle(&self) {
        let Some((no, size)) = self.store.borrow().streams.bundles.worth_compacting() else { return };
        let name = FileName::Bundle(no);
        match self.files.read(self.id as u32, name, 0, size as usize).await {
            Ok(bytes) => self.store.borrow_mut().compact_bundle(no, &bytes),
            Err(e) => tracing::debug!(shard = self.id, bundle = %name, error = %e, "cannot read a bundle to compact"),
        }
    }

    /// The shard's directory, which holds the checkpoint.
    fn shard_dir(&self) -> PathBuf {
        let streams = self.files.dir(self.id as u32);
        streams.parent().expect("the streams directory is inside the shard directory").to_path_buf()
    }

    /// Gives back the index pages before the one holding `p.record` (or,
    /// when every stored record is retained away, the last one), whole
    /// pages only: the last page is never punched, nor one a later record
    /// is in.
    async fn punch_index(&self, p: &Punch) -> std::io::Result<()> {
        let layer = {
            let mut st = self.store.borrow_mut();
            match st.by_handle(p.handle) {
                Some(e) if e.state.body.stored_records > e.state.body.base_record => {
                    e.state.body.own_files(self.id as u32, p.handle)
                }
                _ => return Ok(()),
            }
        };
        let last = p.record.min(layer.end_record - 1);
        let (page, _, _) = self.index_page(layer, |h| h.record <= last).await?;
        self.files.punch(FileName::Index(p.handle), 0, page * INDEX_PAGE).await
    }

    /// Writes one frozen chunk's bytes, then its index pages, each durable
    /// when its write returns, or, with [`Sync::Later`], once the flush
    /// syncs the file system ([`super::files::StreamFiles::write`]).
    ///
    /// A bundled stream's stored index and data are read back from their
    /// extent (`j.from`) and written again with the chunk's: as a new
    /// extent (`j.to`), or from the start of files of its own.
    async fn store_chunk(&self, j: &Job, sync: Sync) -> std::io::Result<()> {
        let c = &j.chunk;
        let mut pages = Vec::with_capacity(c.ends.len() * 2 + index::PAGE_HEADER as usize);
        let end = index::encode(j.index, &c.ends, &c.bytes, &mut pages);
        assert_eq!(end.len, j.index_after, "the index ends where the capture planned");
        let old = match j.from {
            Some(from) => {
                let name = FileName::Bundle(from.no.get());
                self.files.read(self.id as u32, name, from.index_pos(), j.carried_len() as usize).await?
            }
            None => Vec::new(),
        };
        let (old_index, old_data) = old.split_at(if j.from.is_some() { j.index.len as usize } else { 0 });
        if let Some(to) = j.to {
            let len = BundleAt::HEADER + j.index_after + (c.end() - j.origin);
            let mut extent = Vec::with_capacity(len as usize);
            for part in [&BundleAt::header(j.handle, len)[..], old_index, &pages, old_data, &c.bytes] {
                extent.extend_from_slice(part);
            }
            assert_eq!(extent.len() as u64, len, "the extent the pass reserved");
            return self.files.write(FileName::Bundle(to.no.get()), u64::from(to.at), &extent, Sync::Later).await;
        }
        if j.from.is_some() {
            self.files.write(FileName::Data(j.handle), 0, old_data, Sync::Later).await?;
            self.files.write(FileName::Index(j.handle), 0, old_index, Sync::Later).await?;
        }
        self.files.write(FileName::Data(j.handle), c.start - j.origin, &c.bytes, sync).await?;
        self.files.write(FileName::Index(j.handle), j.index.len, &pages, sync).await
    }

    /// After the checkpoint: readers get frozen chunks from the files, and
    /// files written for streams or snapshots that went away meanwhile join
    /// the graveyard.
    async fn stored(&self, c: &Capture) {
        self.in_slices(&c.jobs, |j| self.store.borrow_mut().stored_frozen(j.handle)).await;
        let mut st = self.store.borrow_mut();
        for (handle, blob) in &c.snapshots {
            let name = snapshot_name(*handle, c.generation);
            let current = st.by_handle(*handle).and_then(|e| e.state.snapshot.as_mut());
            match current {
                Some(s) if matches!(&s.blob, Blob::Pending(b) if Rc::ptr_eq(b, blob)) => {
                    s.blob = Blob::Stored(c.generation)
                }
                _ => st.graveyard.push(name),
            }
        }
        let buried = st.graveyard.drain(..c.doomed.len()).collect::<Vec<_>>();
        assert_eq!(buried, c.doomed, "the graveyard only grows between a capture and its checkpoint");
        if c.checkpoint.is_some() {
            st.journal_start = c.journal.0;
        } else {
            assert!(c.doomed.is_empty() && c.snapshots.is_empty(), "only a checkpoint gives files back");
        }
    }
}

/// Ends the flush's pass and checkpoint encoding, if the flush goes away
/// (or fails) before they finished.
struct Ending<'a>(&'a std::cell::RefCell<super::Store>);

impl Drop for Ending<'_> {
    fn drop(&mut self) {
        let mut st = self.0.borrow_mut();
        st.streams.end_pass();
        st.streams.end_checkpoint();
    }
}

/// No stream has unflushed bytes or a snapshot to store that neither a
/// pass took (`taken`) nor `waits` for (the pass at its capture, the next
/// capture once it is done), nor space to give back that `punching` does
/// not name. Checked over every stream, in debug builds only: the
/// capture's cost is what changed.
#[cfg(debug_assertions)]
fn nothing_left_behind(st: &super::Store, waits: impl Fn(u64) -> bool, taken: &[(u64, Rc<Vec<u8>>)]) {
    use crate::core::stream::Snapshot;
    st.streams.check_file_bytes(&st.handles);
    for e in st.streams.values() {
        let s = &e.state;
        if waits(s.handle) {
            continue;
        }
        assert!(s.body.unflushed().is_none_or(|c| c.bytes.is_empty()), "stream {} has bytes to flush", s.handle);
        let pending = matches!(s.snapshot.as_deref(), Some(Snapshot { blob: Blob::Pending(_), .. }));
        assert!(!pending || taken.iter().any(|(h, _)| *h == s.handle), "stream {} has a snapshot to store", s.handle);
        assert_eq!(e.punch_next(), (s.retained, s.first_message), "stream {}'s retention moved unseen", s.handle);
        let gives_back = e.punch_next().0 > e.punched().0;
        assert!(!gives_back || st.punching.contains(&s.handle), "stream {} has space to give back", s.handle);
    }
}

/// What follows a slice of a flush's work: what the slice freed sorted
/// into the heap's bins ([`crate::heap::settle`]), then a pause in which
/// requests (and the I/O they wait for) run.
async fn between_slices() {
    crate::heap::settle();
    glommio::timer::sleep(FLUSH_PAUSE).await;
}
