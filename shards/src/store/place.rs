//! Large appends written once (issue 24): an append of
//! [`super::FlushConfig::place_from`] bytes or more to a stream that has
//! stream files is *placed*: once the stream's bytes are all in its files
//! (a flush stores what memory holds, while its other writers wait), it
//! is written at the tail of its data file, with its index entries, and
//! made durable there (an
//! fdatasync of each file); only then is it decided, and its journal
//! record names the bytes (position, length, CRC32C) instead of carrying
//! them (`record::PlacedRecord`). Through the journal the bytes reached
//! the disk three times: the journal, the zero-fill of its next segment,
//! and the flush into the stream file.
//!
//! Order: the bytes are durable before the record is appended, so a
//! durable record always finds them; a crash before the record leaves
//! bytes past what any record names, which recovery cuts back like a
//! flush the crash cut off. The decision lands the stream's files at the
//! new tail at once (`Body::place`): nothing is left for the flush, and
//! readers wait for the record's commit as for any append.
//!
//! Pipeline: placements to one stream take consecutive ranges past its
//! tail as they come ([`Pipeline`]), are written concurrently, and are
//! decided in the order they took them, each once its bytes are durable:
//! concurrent writers of one stream share the disk's queue as they share
//! a group commit on the journal path. While any is in flight, nothing
//! else appends to the stream ([`Shard::reserve_unplaced`] waits), so no
//! flush writes those ranges, and each is decided at the tail it was
//! written at. A placement that is not decided after all (its stream went
//! or was closed, a write or the journal room failed, the core decides
//! otherwise once the ones before it are applied) breaks the pipeline:
//! the ones after it are not decided either (their ranges no longer
//! follow the tail), each takes the journal path, which answers it, and
//! the last cuts the bytes past the tail back (best effort: the next
//! write goes there). A stream deleted meanwhile has its files removed: a
//! placement writes only into files that exist
//! ([`super::files::StreamFiles::extend`]).
//!
//! Recovery (`super::restore`) reads a placed append since the checkpoint
//! back from its data file, checks its CRC, and replays it as the append
//! it amounts to; the file keeps those bytes until a checkpoint records
//! them. With a tier set, nothing is placed: the tier may drop a data
//! file's local bytes past what a checkpoint records, which a replay
//! would need.

use super::files::{FileName, Sync};
use super::pipeline::{Pipeline, SyncStep};
use super::shard::Room;
use super::{AppendOutcome, Shard, StoreError, StreamKey};
use crate::core::append::{self, AppendDecision, AppendInput};
use crate::core::body::{lengths, message_ends};
use crate::core::index::{self, IndexEnd};
use crate::core::StreamState;
use crate::log::LogError;
use std::borrow::Cow;

/// A pipeline being started: dropped before it is ready, it goes, and
/// the stream's writers waiting on it go on.
struct Starting<'a> {
    shard: &'a Shard,
    handle: u64,
}

impl Drop for Starting<'_> {
    fn drop(&mut self) {
        let mut placing = self.shard.placing.borrow_mut();
        if placing.get(&self.handle).is_some_and(|p| !p.ready) {
            placing.remove(&self.handle);
            self.shard.placed.notify();
        }
    }
}

/// One placement's range of its stream. Dropping it (decided or not) lets
/// the next one be decided.
struct Claim<'a> {
    shard: &'a Shard,
    handle: u64,
    /// Its turn in the pipeline.
    turn: u64,
    /// The stream's tail and record count where its bytes go.
    tail: u64,
    records: u64,
    /// Where that is in the own data file.
    at: u64,
    index: IndexEnd,
    /// The message lengths the append decides.
    messages: Vec<u32>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut placing = self.shard.placing.borrow_mut();
        let p = placing.get_mut(&self.handle).expect("a claim's pipeline stays until its claims are done");
        p.finish(self.turn);
        if p.done == p.taken {
            placing.remove(&self.handle);
        }
        self.shard.placed.notify();
    }
}

/// The message lengths `input` appends to `s` as sent, when it may be
/// placed: the stream has stream files of its own (not a bundle's extent:
/// a flush moves it out once it outgrows one), and the core decides to
/// write the body unchanged (no normalization, not a retry).
fn placeable(s: &StreamState, input: &AppendInput<'_>) -> Option<Vec<u32>> {
    if !s.body.has_own_files() {
        return None;
    }
    match append::decide(s, input) {
        Ok(AppendDecision::Write { data: Cow::Borrowed(d), messages }) if d.len() == input.body.len() => {
            Some(lengths(d.len(), &messages, &mut [0]).to_vec())
        }
        _ => None,
    }
}

impl Shard {
    /// Whether `input` is large enough to be placed (see the module header).
    pub(super) fn may_place(&self, input: &AppendInput<'_>) -> bool {
        input.body.len() >= self.flush.place_from && !crate::tiered::installed()
    }

    /// Places `input` when it [may](Self::may_place) be; `None`: it takes
    /// the journal path, which answers it.
    pub(super) async fn place(
        &self,
        key: &StreamKey,
        input: &AppendInput<'_>,
        now_ms: u64,
    ) -> Option<Result<AppendOutcome, StoreError>> {
        debug_assert!(self.may_place(input));
        let len = input.body.len() as u64;
        let room = async {
            self.flush_room().await?;
            self.disk_room(len, Room::Data)?;
            self.tier_room(len)
        };
        if let Err(e) = room.await {
            return Some(Err(e.into()));
        }
        let claim = self.claim(key, input, now_ms).await?;
        let written = self.write_placed(&claim, input.body).await;
        self.turn_of(&claim).await;
        let crc = match written {
            Ok(crc) => crc,
            Err(e) => {
                tracing::debug!(shard = self.id, key = %key, error = %e, "placing an append failed; it takes the journal");
                self.abandon(key, claim).await;
                return None;
            }
        };
        if let Err(e) = self.reserve(Self::stamp_room(input) + 4 * claim.messages.len(), Room::Data).await {
            self.abandon(key, claim).await;
            return Some(Err(e.into()));
        }
        // Still the stream, the tail and the decision it was placed for.
        let same = self.live_handle(key, now_ms) == Some(claim.handle) && {
            let st = self.store.borrow();
            let s = &st.streams[key].state;
            s.body.all_stored()
                && (s.body.stored, s.body.stored_records) == (claim.tail, claim.records)
                && placeable(s, input).as_ref() == Some(&claim.messages)
        };
        let decided = same.then(|| self.store.borrow_mut().decide_append(&self.log, key, input, now_ms, Some(crc)));
        let Some(decided) = decided else {
            self.abandon(key, claim).await;
            return None;
        };
        // The stream files hold bytes no checkpoint records yet.
        self.unrecorded.set(true);
        drop(claim);
        let (handle, out) = match self.settle_outcome(key, decided).await {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        };
        self.publish(handle, out.next_offset, out.records.1, out.closed);
        Some(Ok(out))
    }

    /// Takes the next range of `key`'s pipeline for `input`, starting the
    /// pipeline (a flush stores what memory holds of the stream first)
    /// when none is in flight; `None` when the stream is not there, has no
    /// stream files yet (the journal path writes its first bytes, and a
    /// flush creates them), the pipeline broke, or the append may not be
    /// placed.
    async fn claim(&self, key: &StreamKey, input: &AppendInput<'_>, now_ms: u64) -> Option<Claim<'_>> {
        let handle = self.live_handle(key, now_ms)?;
        let first = loop {
            let seen = self.placed.generation();
            match self.placing.borrow_mut().entry(handle) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(Pipeline::starting());
                    break true;
                }
                std::collections::hash_map::Entry::Occupied(o) if o.get().broken => return None,
                std::collections::hash_map::Entry::Occupied(o) if o.get().ready => break false,
                std::collections::hash_map::Entry::Occupied(_) => {}
            }
            self.placed.changed(seen).await;
        };
        // Until it is ready, the pipeline goes with a start that does not
        // finish (the stream went, a flush failed, the request went away).
        let starting = first.then_some(Starting { shard: self, handle });
        if first && !self.all_stored(key, handle, now_ms).await {
            return None;
        }
        let st = self.store.borrow();
        let e = st.streams.get(key).filter(|e| e.state.handle == handle)?;
        let mut placing = self.placing.borrow_mut();
        let p = placing.get_mut(&handle).expect("the pipeline joined or started");
        let messages = placeable(&e.state, input)?;
        if first {
            let b = &e.state.body;
            (p.ready, p.end, p.records, p.index) = (true, b.stored, b.stored_records, b.index_end());
        }
        let ends: Vec<u64> = message_ends(p.end, &messages).collect();
        let claim = Claim {
            shard: self,
            handle,
            turn: p.taken,
            tail: p.end,
            records: p.records,
            at: p.end - e.state.body.base,
            index: p.index,
            messages,
        };
        p.index = index::planned(p.index, &ends);
        (p.end, p.records, p.taken) = (*ends.last().expect("a message"), p.records + ends.len() as u64, p.taken + 1);
        drop(placing);
        drop(starting);
        Some(claim)
    }

    /// Flushes until the live stream `handle` at `key` holds nothing in
    /// memory; false when it went or a flush failed.
    async fn all_stored(&self, key: &StreamKey, handle: u64, now_ms: u64) -> bool {
        loop {
            if self.live_handle(key, now_ms) != Some(handle) {
                return false;
            }
            let stored = self.store.borrow().streams[key].state.body.all_stored();
            if stored {
                return true;
            }
            if self.flushing.get() {
                let seen = self.flush_done.generation();
                self.flush_done.changed(seen).await;
            } else if self.flush().await.is_err() {
                return false;
            }
        }
    }

    /// Waits until every placement that took a range before `c` is done:
    /// placements are decided in the order they took their ranges.
    async fn turn_of(&self, c: &Claim<'_>) {
        loop {
            let seen = self.placed.generation();
            let waiting = self.placing.borrow().get(&c.handle).is_some_and(|p| p.done < c.turn);
            if !waiting {
                return;
            }
            self.placed.changed(seen).await;
        }
    }

    /// The handle of the live stream at `key`.
    fn live_handle(&self, key: &StreamKey, now_ms: u64) -> Option<u64> {
        let st = self.store.borrow();
        let e = st.streams.get(key)?;
        (!e.state.deleted && !e.state.lifetime.expired(now_ms)).then_some(e.state.handle)
    }

    /// Writes the claimed append's bytes and index entries, durable (with
    /// `--fsync always`) when this returns; returns the bytes' CRC32C.
    async fn write_placed(&self, c: &Claim<'_>, body: &[u8]) -> std::io::Result<u32> {
        let mut pages = Vec::with_capacity(index::PAGE_HEADER as usize + 16 * c.messages.len());
        let ends: Vec<u64> = message_ends(c.tail, &c.messages).collect();
        let (_, crc) = index::encode_summed(c.index, &ends, body, &mut pages);
        let (data, idx) = (FileName::Data(c.handle), FileName::Index(c.handle));
        self.files.extend(data, c.at, body, Sync::Later).await?;
        self.files.extend(idx, c.index.len, &pages, Sync::Later).await?;
        if self.log.dsync() {
            self.sync_placed(c.handle).await?;
        }
        Ok(crc)
    }

    /// Makes the writes to stream `handle`'s files that returned before
    /// this call durable: by a sync of both files that starts after now,
    /// this call's own or one a placement in flight started meanwhile
    /// (group commit for the stream's pipeline). After a failed sync
    /// nothing it covered is known to be durable: every placement waiting
    /// on one fails.
    async fn sync_placed(&self, handle: u64) -> std::io::Result<()> {
        let need = self.pipeline(handle, |p| p.sync_needed());
        loop {
            let seen = self.placed.generation();
            match self.pipeline(handle, |p| p.next_sync(need)) {
                SyncStep::Durable => return Ok(()),
                SyncStep::Failed => return Err(std::io::Error::other("a sync of the stream's files failed")),
                SyncStep::Wait => self.placed.changed(seen).await,
                SyncStep::Start(n) => {
                    let (data, idx) = (FileName::Data(handle), FileName::Index(handle));
                    let synced = crate::woken::join_all(vec![self.files.sync(data), self.files.sync(idx)]).await;
                    let synced = synced.into_iter().collect::<std::io::Result<Vec<()>>>();
                    self.pipeline(handle, |p| p.synced(n, synced.is_ok()));
                    self.placed.notify();
                    synced?;
                }
            }
        }
    }

    /// Runs `f` on stream `handle`'s pipeline, which a claim in hand keeps.
    fn pipeline<T>(&self, handle: u64, f: impl FnOnce(&mut Pipeline) -> T) -> T {
        f(self.placing.borrow_mut().get_mut(&handle).expect("a claim's pipeline stays until its claims are done"))
    }

    /// A claimed placement that is not decided: the pipeline breaks, and
    /// the last one done cuts the bytes past the stream's tail back when
    /// the stream still ends where this one was to go (best effort).
    async fn abandon(&self, key: &StreamKey, c: Claim<'_>) {
        let last = self.pipeline(c.handle, |p| {
            p.broken = true;
            p.taken == c.turn + 1
        });
        let unchanged = self
            .store
            .borrow()
            .streams
            .get(key)
            .is_some_and(|e| e.state.handle == c.handle && e.state.body.stored == c.tail);
        if last && unchanged {
            for (name, len) in [(FileName::Data(c.handle), c.at), (FileName::Index(c.handle), c.index.len)] {
                if let Err(e) = self.files.truncate(name, len).await {
                    tracing::debug!(shard = self.id, file = %name, error = %e, "cannot cut an abandoned placement back");
                }
            }
        }
    }

    /// Reserves journal room for an append to `key` that is not placed,
    /// once no placement is in flight for the stream (see the module
    /// header). Call right before deciding, with no await in between.
    pub(super) async fn reserve_unplaced(&self, key: &StreamKey, bytes: usize) -> Result<(), LogError> {
        loop {
            self.reserve(bytes, Room::Data).await?;
            let seen = self.placed.generation();
            let held = {
                let placing = self.placing.borrow();
                !placing.is_empty()
                    && self.store.borrow().streams.get(key).is_some_and(|e| placing.contains_key(&e.state.handle))
            };
            if !held {
                return Ok(());
            }
            self.placed.changed(seen).await;
        }
    }
}
