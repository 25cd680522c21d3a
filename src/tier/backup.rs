//! Continuous backup: a thread that, every `--backup-interval`, holds the
//! shards' clean-up, ships what changed in the data dir (see [`super::scan`])
//! as packs, then a manifest naming everything a restore needs (see
//! [`super::layout`]), and lets the shards go again.
//!
//! One cycle:
//! 1. hold every shard (`sluice_shards::hold`): from here until the manifest
//!    is confirmed, no checkpoint-doomed file, retained range or journal
//!    segment is given back, so the checkpoint read next keeps everything
//!    it needs;
//! 2. read every shard's checkpoint;
//! 3. wait for fresh durable journal positions ([`super::progress`]): they
//!    are at or past each checkpoint's, so its journal is complete up to
//!    them, and every append acknowledged before step 3 began is below them;
//! 4. scan, upload the packs, then the manifest, each retried with backoff
//!    until it is confirmed (a failure reports the store degraded; the
//!    shards keep serving and keep every local copy meanwhile);
//! 5. release the shards; drop the local copies the cold tier may drop and
//!    cap writes by what is confirmed (see [`super::tiering`]); compact a few
//!    mostly-dead packs (see [`super::compact`]); now and then delete what no
//!    kept manifest names.

use super::args::{TierArgs, FIRST_BACKOFF, KEEP_MANIFESTS, MAX_BACKOFF, MAX_CYCLE_TIMES, PART_BYTES};
use super::client::Remote;
use super::compact;
use super::extents::Resolved;
use super::layout::{self, Extent, Journal, Manifest, MANIFESTS, MAX_PACK_BYTES, PACKS};
use super::scan::{self, Found, Stat, Tracked};
use super::tiering::{self, Marks};
use super::{fetch, status::now_ms};
use super::{progress, status};
use crate::tier::error::TierError;
use bytes::Bytes;
use sluice_shards::log::marks;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a cycle waits for the shards to publish fresh positions.
const FRESH_LIMIT: Duration = Duration::from_secs(5);
/// How long a shutdown waits for the last cycle.
const STOP_LIMIT: Duration = Duration::from_secs(5);
/// Every this many cycles, unreferenced objects are deleted; and once
/// more when the backup falls idle after any cycle (nothing left to ship),
/// so packs and manifests an idle node no longer needs go too, and an idle
/// node lists nothing more until it writes again.
const GC_EVERY: u64 = 10;

pub struct Backup {
    remote: Remote,
    dir: PathBuf,
    shards: usize,
    interval: Duration,
    stop: Arc<AtomicBool>,
    files: BTreeMap<String, Tracked>,
    seq: u64,
    /// Packs of recent manifests, by cycle (for deleting unreferenced packs).
    recent: VecDeque<(u64, BTreeSet<String>)>,
    /// Every pack's size (listed at the start, then as shipped), for compaction.
    pack_sizes: BTreeMap<String, u64>,
    /// When the journal positions of this run's newest manifest were taken,
    /// and the positions (a compaction manifest describes the same data dir).
    last: Option<(u64, Vec<Journal>)>,
    /// The cycle whose manifest compaction last found nothing to do in (or failed on).
    compact_checked: u64,
    /// The cycle after which unreferenced objects were last deleted.
    collected: u64,
    /// Packs compaction emptied, with the epoch of the reading thread's
    /// mapping from which no read uses them (see [`super::leases`]).
    retired: Vec<(String, u64)>,
    /// A manifest of this run is confirmed (before it, a cycle ships even
    /// when nothing looks changed: the last manifest may be another run's).
    shipped_once: bool,
    /// The cold tier: `--local-bytes`, `--tier-after`, every data file's
    /// tiered boundary, where the reading thread finds tiered bytes, and
    /// when this run's cycles were confirmed (Unix ms, by cycle).
    local_limit: Option<u64>,
    tier_after: Option<Duration>,
    marks: Marks,
    map: fetch::Map,
    confirmed_at: BTreeMap<u64, u64>,
}

/// The running backup thread.
pub struct Running {
    stop: Arc<AtomicBool>,
    done: std::sync::mpsc::Receiver<()>,
}

impl Running {
    /// Finishes the current cycle (a last one if none runs; failed steps are
    /// no longer retried) and ends the thread, waiting at most `STOP_LIMIT`
    /// (a store that does not answer must not hold up a shutdown).
    pub fn stop(self) {
        self.stop.store(true, Relaxed);
        if self.done.recv_timeout(STOP_LIMIT).is_err() {
            tracing::warn!("the last backup cycle did not finish in time; stopping without it");
        }
    }
}

impl Backup {
    /// Prepares a backup of `dir` to `remote`, continuing the cycle numbers
    /// already there.
    pub fn new(
        remote: Remote,
        dir: &Path,
        shards: usize,
        tier: &TierArgs,
        map: fetch::Map,
    ) -> Result<Backup, TierError> {
        let seq = remote.list(MANIFESTS)?.iter().filter_map(|k| layout::manifest_seq(k)).max().unwrap_or(0);
        // Resume from the newest manifest: files still on disk with the same
        // identity ship only what changed since (a crash changes nothing
        // below what was shipped: stream files hold durable journal bytes
        // only, and recovery zeroes journal bytes past the durable end only).
        // The metric families show from the first scrape on, before the first cycle.
        status::get().enabled.store(true, Relaxed);
        let (mut files, mut recent) = (BTreeMap::new(), VecDeque::new());
        if seq > 0 {
            match Manifest::decode(&remote.get(&layout::manifest_key(seq))?) {
                Ok(m) => {
                    files = scan::resume(&m.files);
                    recent.push_back((seq, m.packs().into_iter().map(str::to_string).collect()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "the newest backup manifest is unreadable; shipping everything again")
                }
            }
        }
        let marks = tiered_marks(dir, shards, &files, &map)?;
        let pack_sizes = remote.list_sized(PACKS)?.into_iter().collect();
        let backup = Backup {
            remote,
            dir: dir.to_path_buf(),
            shards,
            interval: tier.backup_interval,
            stop: Arc::new(AtomicBool::new(false)),
            files,
            seq,
            recent,
            pack_sizes,
            last: None,
            compact_checked: 0,
            collected: 0,
            retired: Vec::new(),
            shipped_once: false,
            local_limit: tier.local_bytes,
            tier_after: tier.tier_after,
            marks,
            map,
            confirmed_at: BTreeMap::new(),
        };
        // Before the shards take writes: they count from their first.
        backup.measure();
        Ok(backup)
    }

    /// Runs cycles on a thread of its own until stopped.
    pub fn start(mut self) -> Running {
        let stop = self.stop.clone();
        let (tx, done) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("sluice-backup".into())
            .spawn(move || {
                self.run();
                let _ = tx.send(());
            })
            .expect("the backup thread starts");
        Running { stop, done }
    }

    fn run(&mut self) {
        loop {
            let started = Instant::now();
            let stopping = self.stop.load(Relaxed);
            let mut idle = false;
            match self.cycle() {
                Ok(shipped) => {
                    idle = shipped == 0;
                    tracing::debug!(
                        seq = self.seq,
                        shipped,
                        took_ms = started.elapsed().as_millis() as u64,
                        "backup cycle"
                    );
                    if let Err(e) = self.drop_confirmed() {
                        tracing::warn!(error = %e, "dropping confirmed local copies failed; retried next cycle");
                    }
                    self.measure();
                    if !stopping && self.seq != self.compact_checked {
                        if let Err(e) = self.compact() {
                            self.compact_checked = self.seq;
                            tracing::warn!(error = %e, "pack compaction failed; planned again after the next cycle");
                        }
                    }
                }
                Err(e) => {
                    status::get().failed(&e.to_string());
                    tracing::warn!(error = %e, "backup cycle failed; local copies kept, retrying");
                }
            }
            if stopping {
                return;
            }
            if self.seq >= self.collected + GC_EVERY || (idle && self.seq != self.collected) {
                match self.collect() {
                    Ok(()) => self.collected = self.seq,
                    Err(e) => tracing::debug!(error = %e, "deleting unreferenced backup objects failed; retried later"),
                }
            }
            // A cycle starts every half interval: an append is then confirmed
            // within one interval whenever a cycle takes under half of one.
            let wait = (self.interval / 2).saturating_sub(started.elapsed());
            let until = Instant::now() + wait;
            while Instant::now() < until && !self.stop.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(20).min(until - Instant::now()));
            }
        }
    }

    /// Retries `f` with backoff until it succeeds or the backup stops.
    fn retry<T>(&self, mut f: impl FnMut(&Remote) -> Result<T, TierError>) -> Result<T, TierError> {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let t = Instant::now();
            match f(&self.remote) {
                Ok(v) => {
                    status::get().upload_micros.fetch_add(t.elapsed().as_micros() as u64, Relaxed);
                    return Ok(v);
                }
                Err(e) => {
                    status::get().failed(&e.to_string());
                    if self.stop.load(Relaxed) {
                        return Err(e);
                    }
                    tracing::debug!(error = %e, backoff_ms = backoff.as_millis() as u64, "object store step failed");
                    let until = Instant::now() + backoff;
                    while Instant::now() < until && !self.stop.load(Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// One cycle (see the module header); returns the bytes shipped.
    fn cycle(&mut self) -> Result<u64, TierError> {
        let _held: Vec<_> = (0..self.shards).map(|i| sluice_shards::hold::of(i).acquire()).collect();
        let mut checkpoints = BTreeMap::new();
        for i in 0..self.shards {
            let rel = format!("shard-{i}/{}", sluice_shards::store::checkpoint::CHECKPOINT);
            if let Ok(mut f) = std::fs::File::open(self.dir.join(&rel)) {
                let stat = Stat::of(&f.metadata().map_err(|e| format!("{rel}: {e}"))?);
                let mut bytes = Vec::new();
                std::io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| format!("{rel}: {e}"))?;
                checkpoints.insert(rel, (Stat { size: bytes.len() as u64, ..stat }, bytes));
            }
        }
        let before = progress::read(self.shards);
        let taken_unix_ms = status::now_ms();
        let published = progress::fresh(&before, FRESH_LIMIT).ok_or("shards did not publish journal positions")?;
        let mut journals = Vec::new();
        for (i, p) in published.iter().enumerate() {
            let head = marks::read_head(&self.dir.join(format!("shard-{i}")))?.unwrap_or(0);
            journals.push(Journal { position: p.position, head: head.min(p.position.0) });
        }
        let positions: Vec<(u32, u64)> = journals.iter().map(|j| j.position).collect();
        let mut found: BTreeMap<String, (PathBuf, Found)> = BTreeMap::new();
        for (rel, (path, stat)) in scan::walk(&self.dir).map_err(|e| format!("scanning {}: {e}", self.dir.display()))? {
            let stat = checkpoints.get(&rel).map_or(stat, |(s, _)| *s);
            let tiered = self.marks.get(&rel).filter(|(_, m)| m.ino == stat.ino).map_or(0, |(_, m)| m.boundary);
            found.insert(rel.clone(), (path, scan::plan(&rel, stat, self.files.get(&rel), &positions, tiered)));
        }
        whole(&found, &journals)?;
        let backlog: u64 = found.values().filter_map(|(_, f)| f.delta.as_ref()).map(|d| d.to - d.from).sum();
        status::get().backlog_bytes.store(backlog, Relaxed);
        if backlog == 0 && self.shipped_once && found.keys().eq(self.files.keys()) {
            // Nothing changed: the newest manifest already describes now.
            status::get().confirmed(taken_unix_ms);
            return Ok(0);
        }
        let seq = self.seq + 1;
        let mut packer = Packer { seq, n: 0, buf: Vec::new(), shipped: 0 };
        let mut extents: BTreeMap<String, Vec<Extent>> = BTreeMap::new();
        let mut vanished = BTreeSet::new();
        for (rel, (path, f)) in &found {
            let Some(d) = &f.delta else { continue };
            let mut at = d.from;
            while at < d.to {
                let room = (MAX_PACK_BYTES - packer.buf.len() as u64).min(d.to - at);
                let start = packer.buf.len();
                let read = match checkpoints.get(rel) {
                    Some((_, bytes)) => {
                        packer.buf.extend_from_slice(&bytes[at as usize..(at + room) as usize]);
                        Ok(())
                    }
                    None => read_into(path, at, room, &mut packer.buf),
                };
                if let Err(e) = read {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        packer.buf.truncate(start);
                        vanished.insert(rel.clone());
                        break;
                    }
                    return Err(format!("{rel}: {e}").into());
                }
                extents.entry(rel.clone()).or_default().push(Extent {
                    pack: layout::pack_key(seq, packer.n),
                    pack_offset: start as u64,
                    file_offset: at,
                    len: room,
                });
                at += room;
                if packer.buf.len() as u64 >= MAX_PACK_BYTES {
                    self.ship(&mut packer)?;
                }
            }
        }
        if !packer.buf.is_empty() {
            self.ship(&mut packer)?;
        }
        let mut files = BTreeMap::new();
        let mut tracked = BTreeMap::new();
        for (rel, (_, f)) in found {
            if vanished.contains(&rel) {
                continue;
            }
            let before = self.files.get(&rel);
            let entry = scan::entry_after(before, &f, extents.remove(&rel).unwrap_or_default());
            files.insert(rel.clone(), entry.clone());
            tracked.insert(rel, Tracked { stat: f.stat, shipped: f.shipped, entry });
        }
        let manifest = Manifest { seq, taken_unix_ms, journals: journals.clone(), files };
        let body = Bytes::from(manifest.encode());
        self.retry(|r| r.put(&layout::manifest_key(seq), body.clone()))?;
        self.confirmed_manifest(&manifest, body.len());
        self.last = Some((taken_unix_ms, journals));
        self.files = tracked;
        self.seq = seq;
        self.shipped_once = true;
        status::get().backlog_bytes.store(0, Relaxed);
        status::get().confirmed(taken_unix_ms);
        self.remember_confirmed(seq, now_ms());
        Ok(packer.shipped)
    }

    /// Counts manifest `m` (of `len` bytes) uploaded and remembers its packs.
    fn confirmed_manifest(&mut self, m: &Manifest, len: usize) {
        status::get().upload_bytes.fetch_add(len as u64, Relaxed);
        status::get().uploads.fetch_add(1, Relaxed);
        self.recent.push_back((m.seq, m.packs().into_iter().map(str::to_string).collect()));
        while self.recent.len() > KEEP_MANIFESTS + 1 {
            self.recent.pop_front();
        }
    }

    /// Remembers when the bytes of cycle `seq`'s packs count as confirmed.
    fn remember_confirmed(&mut self, seq: u64, unix_ms: u64) {
        self.confirmed_at.insert(seq, unix_ms);
        while self.confirmed_at.len() > MAX_CYCLE_TIMES {
            self.confirmed_at.pop_first();
        }
    }

    /// When the bytes of cycle `seq`'s packs count as confirmed (Unix ms):
    /// cycles older than this run's count as confirmed with its first.
    fn confirmed_when(&self, seq: u64) -> u64 {
        let first = self.confirmed_at.values().next().copied().unwrap_or(0);
        self.confirmed_at.get(&seq).copied().unwrap_or(if seq < self.seq { first } else { u64::MAX })
    }

    /// One compaction step (see [`super::compact`]), between cycles: the
    /// live bytes of the emptiest packs copied into one new pack, then a
    /// manifest describing the same data dir as the newest one, with those
    /// bytes in the new pack. Requests are tried once: a failure leaves the
    /// newest manifest as it was (the old packs stay named), and the step
    /// is planned again after the next cycle. Only once the new manifest is
    /// confirmed does the reading thread map tiered bytes to the new pack;
    /// the old packs go by the rule for every pack (see [`Self::collect`]).
    fn compact(&mut self) -> Result<(), TierError> {
        let Some((taken_unix_ms, journals)) = self.last.clone() else { return Ok(()) };
        let Some(plan) = compact::plan(self.files.iter().map(|(p, t)| (p, &t.entry)), &self.pack_sizes) else {
            self.compact_checked = self.seq;
            return Ok(());
        };
        let (body, read) = compact::copy(&self.remote, &plan)?;
        let s = status::get();
        s.compaction_read_bytes.fetch_add(read, Relaxed);
        let seq = self.seq + 1;
        let key = layout::pack_key(seq, 0);
        self.put_pack(&key, Bytes::from(body), false)?;
        let moved: BTreeMap<String, Vec<Extent>> =
            plan.paths().into_iter().map(|p| (p.to_string(), plan.rewrite(p, &self.files[p].entry, &key))).collect();
        let files = self
            .files
            .iter()
            .map(|(p, t)| {
                let extents = moved.get(p).cloned().unwrap_or_else(|| t.entry.extents.clone());
                (p.clone(), layout::FileEntry { extents, ..t.entry.clone() })
            })
            .collect();
        let manifest = Manifest { seq, taken_unix_ms, journals, files };
        let body = Bytes::from(manifest.encode());
        // A manifest whose PUT failed may be in the store all the same:
        // its cycle number (and pack key) is never used again.
        self.seq = seq;
        self.remote.put(&layout::manifest_key(seq), body.clone())?;
        self.confirmed_manifest(&manifest, body.len());
        for (p, extents) in &moved {
            self.files.get_mut(p).expect("planned from these files").entry.extents = extents.clone();
        }
        // The moved bytes count as confirmed when the newest of their old packs was.
        let when = plan.packs.iter().filter_map(|k| layout::pack_seq(k)).map(|s| self.confirmed_when(s)).max();
        self.remember_confirmed(seq, when.unwrap_or(0));
        let epoch = self.map.remap(moved.iter().map(|(p, e)| (p, Resolved::new(e))));
        self.retired.extend(plan.packs.iter().map(|k| (k.clone(), epoch)));
        s.compacted_bytes.fetch_add(plan.bytes, Relaxed);
        s.compacted_packs.fetch_add(plan.packs.len() as u64, Relaxed);
        tracing::info!(seq, packs = plan.packs.len(), moved = plan.bytes, read, "packs compacted");
        Ok(())
    }

    /// The cold tier's step after a confirmed cycle (see [`super::tiering`]):
    /// forgets the marks of data files gone, chooses what to drop, and drops it.
    fn drop_confirmed(&mut self) -> Result<(), TierError> {
        let gone: Vec<String> = self.marks.keys().filter(|p| !self.files.contains_key(*p)).cloned().collect();
        let mut changed: BTreeSet<u32> = gone.iter().map(|p| self.marks[p].0).collect();
        for p in &gone {
            self.marks.remove(p);
            self.map.files.write().unwrap_or_else(|e| e.into_inner()).remove(p);
        }
        let local = tiering::local_bytes(&self.dir, self.shards);
        let (mut paths, mut candidates) = (Vec::new(), Vec::new());
        if self.local_limit.is_some() || self.tier_after.is_some() {
            let when = |seq| self.confirmed_when(seq);
            for (rel, t) in &self.files {
                let Some((shard, handle)) = tiering::data_file(rel) else { continue };
                let boundary = self.marks.get(rel).map_or(0, |(_, m)| m.boundary);
                candidates.push(tiering::candidate(&t.entry, t.shipped, boundary, when));
                paths.push((rel.clone(), sluice_shards::tiered::Mark { handle, ino: t.stat.ino, boundary }, shard));
            }
        }
        let older = self.tier_after.map(|d| now_ms().saturating_sub(d.as_millis() as u64));
        let chosen = tiering::choose(&candidates, local, self.local_limit, older);
        let mut punches = Vec::new();
        {
            let mut map = self.map.files.write().unwrap_or_else(|e| e.into_inner());
            for (&i, &to) in &chosen {
                let (rel, mark, shard) = &paths[i];
                map.insert(rel.clone(), Resolved::new(&self.files[rel].entry.extents));
                self.marks.insert(rel.clone(), (*shard, sluice_shards::tiered::Mark { boundary: to, ..*mark }));
                changed.insert(*shard);
                punches.push((rel.clone(), mark.boundary, to));
            }
        }
        for shard in changed {
            tiering::store(&self.dir, shard, &self.marks)?;
        }
        for (rel, from, to) in punches {
            match tiering::punch(&self.dir.join(&rel), from, to) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(format!("{rel}: punching: {e}").into())
                }
                _ => tracing::debug!(file = %rel, from, to, "local copy dropped (held in the object store)"),
            }
        }
        status::get().tiered_bytes.store(self.marks.values().map(|(_, m)| m.boundary).sum(), Relaxed);
        Ok(())
    }

    /// Measures the data files once ([`tiering::measure`]): their bytes on
    /// disk for the metrics and, with `--local-bytes`, the cap on writes by
    /// what the newest confirmed manifest holds (see [`tiering::cap_writes`]).
    fn measure(&self) {
        let appended = sluice_shards::tiered::CAP.appended();
        let (local, unconfirmed) =
            tiering::measure(&self.dir, self.shards, |p| self.files.get(p).map(|t| (t.stat.ino, t.shipped)));
        status::get().local_bytes.store(local, Relaxed);
        if let Some(limit) = self.local_limit {
            tiering::cap_writes(appended, unconfirmed, limit);
        }
    }

    /// Uploads the packer's pack (retrying until confirmed) and starts the next.
    fn ship(&mut self, p: &mut Packer) -> Result<(), TierError> {
        let all = Bytes::from(std::mem::take(&mut p.buf));
        p.shipped += all.len() as u64;
        self.put_pack(&layout::pack_key(p.seq, p.n), all, true)?;
        p.n += 1;
        Ok(())
    }

    /// Uploads pack `key` in parts, retrying until confirmed (`retry`) or once.
    fn put_pack(&mut self, key: &str, all: Bytes, retry: bool) -> Result<(), TierError> {
        let parts: Vec<Bytes> =
            (0..all.len()).step_by(PART_BYTES).map(|i| all.slice(i..(i + PART_BYTES).min(all.len()))).collect();
        match retry {
            true => self.retry(|r| r.put_parts(key, parts.clone()))?,
            false => self.remote.put_parts(key, parts)?,
        }
        let s = status::get();
        s.upload_bytes.fetch_add(all.len() as u64, Relaxed);
        s.uploads.fetch_add(1, Relaxed);
        self.pack_sizes.insert(key.to_string(), all.len() as u64);
        Ok(())
    }

    /// Deletes manifests older than the newest `KEEP_MANIFESTS + 1`, and
    /// packs older than the oldest kept manifest that none of them names
    /// and no read of the cold tier may still use (packs compaction emptied
    /// stay while a read that mapped its bytes to them runs).
    fn collect(&mut self) -> Result<(), TierError> {
        let seqs: Vec<u64> = self.remote.list(MANIFESTS)?.iter().filter_map(|k| layout::manifest_seq(k)).collect();
        let (old, kept) = kept_manifests(seqs);
        let mut needed = BTreeSet::new();
        for &seq in &kept {
            match self.recent.iter().find(|(s, _)| *s == seq) {
                Some((_, packs)) => needed.extend(packs.iter().cloned()),
                None => {
                    let m = Manifest::decode(&self.remote.get(&layout::manifest_key(seq))?)?;
                    needed.extend(m.packs().into_iter().map(str::to_string));
                }
            }
        }
        self.retired.retain(|(_, epoch)| self.map.leases.held_before(*epoch));
        needed.extend(self.retired.iter().map(|(k, _)| k.clone()));
        for key in unneeded_packs(self.remote.list(PACKS)?, &kept, &needed) {
            self.remote.delete(&key)?;
            self.pack_sizes.remove(&key);
        }
        for seq in old {
            self.remote.delete(&layout::manifest_key(seq))?;
        }
        Ok(())
    }
}

/// Manifests to delete and to keep (the newest `KEEP_MANIFESTS + 1`).
fn kept_manifests(mut seqs: Vec<u64>) -> (Vec<u64>, Vec<u64>) {
    seqs.sort_unstable();
    let kept = seqs.split_off(seqs.len().saturating_sub(KEEP_MANIFESTS + 1));
    (seqs, kept)
}

/// Packs older than the oldest kept manifest that no kept manifest names
/// (a newer pack may belong to a cycle still running).
fn unneeded_packs(packs: Vec<String>, kept: &[u64], needed: &BTreeSet<String>) -> Vec<String> {
    let oldest_kept = kept.iter().min().copied().unwrap_or(0);
    packs.into_iter().filter(|k| layout::pack_seq(k).is_some_and(|s| s < oldest_kept) && !needed.contains(k)).collect()
}

/// Refuses to describe a data dir that lost what a restore needs (the
/// directory removed or damaged under the server): the newest manifest must
/// stay one a node can start from, so such a cycle fails and the last good
/// manifest stands.
fn whole<T>(found: &BTreeMap<String, T>, journals: &[Journal]) -> Result<(), TierError> {
    for (i, j) in journals.iter().enumerate() {
        let need = [marks::LOG_HEAD.to_string(), format!("{:010}.seg", j.position.0)];
        if let Some(missing) = need.iter().map(|n| format!("shard-{i}/{n}")).find(|p| !found.contains_key(p)) {
            return Err(format!("{missing} is missing from the data dir: not backing up a damaged data dir").into());
        }
    }
    Ok(())
}

/// Every shard's cold-tier marks, published for the shards, with the
/// extents of their files for the reading thread. Refuses a data dir whose
/// tiered bytes the newest manifest does not hold (a wiped or other bucket).
fn tiered_marks(
    dir: &Path,
    shards: usize,
    files: &BTreeMap<String, Tracked>,
    map: &fetch::Map,
) -> Result<Marks, TierError> {
    let mut marks = Marks::new();
    let mut map = map.files.write().unwrap_or_else(|e| e.into_inner());
    for shard in 0..shards as u32 {
        let mine = tiering::load(dir, shard)?;
        for m in &mine {
            let path = fetch::data_path(shard, m.handle);
            let held = files.get(&path).filter(|t| t.stat.ino == m.ino).map(|t| Resolved::new(&t.entry.extents));
            if held.as_ref().and_then(|r| r.range(0, m.boundary)).is_none() {
                return Err(format!(
                    "{path}: its first {} bytes are tiered (dropped locally), but the newest backup manifest \
                     does not hold them: is --tier-url the bucket and prefix this data dir backs up to?",
                    m.boundary
                )
                .into());
            }
            map.insert(path.clone(), held.expect("checked"));
            marks.insert(path, (shard, *m));
        }
        sluice_shards::tiered::publish(shard, &mine);
    }
    Ok(marks)
}

/// The pack being filled.
struct Packer {
    seq: u64,
    n: u32,
    buf: Vec<u8>,
    shipped: u64,
}

/// Appends `len` bytes of `path` from `at` to `buf` (a file that got
/// shorter meanwhile reads as zeros past its end, as restore writes it).
fn read_into(path: &Path, at: u64, len: u64, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let f = std::fs::File::open(path)?;
    let start = buf.len();
    buf.resize(start + len as usize, 0);
    let mut done = 0;
    while done < len as usize {
        match f.read_at(&mut buf[start + done..], at + done as u64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_keeps_the_newest_manifests_and_every_pack_they_name() {
        let (old, kept) = kept_manifests(vec![5, 1, 4, 2, 3]);
        assert_eq!((old, kept.clone()), (vec![1, 2], vec![3, 4, 5]));
        let packs =
            vec![layout::pack_key(1, 0), layout::pack_key(2, 0), layout::pack_key(3, 0), layout::pack_key(6, 0)];
        let needed: BTreeSet<String> = [layout::pack_key(1, 0)].into();
        assert_eq!(unneeded_packs(packs, &kept, &needed), vec![layout::pack_key(2, 0)]);
        assert_eq!(kept_manifests(vec![1]), (vec![], vec![1]));
        assert!(
            unneeded_packs(vec![layout::pack_key(1, 0)], &[], &BTreeSet::new()).is_empty(),
            "no manifest: keep all"
        );
    }

    #[test]
    fn a_data_dir_missing_its_journal_is_never_described() {
        let j = [Journal { position: (3, 10), head: 3 }];
        let mut found: BTreeMap<String, ()> = BTreeMap::new();
        found.insert("shard-0/log-head".into(), ());
        assert!(whole(&found, &j).unwrap_err().to_string().contains("shard-0/0000000003.seg is missing"));
        found.insert("shard-0/0000000003.seg".into(), ());
        assert!(whole(&found, &j).is_ok());
        found.remove("shard-0/log-head");
        assert!(whole(&found, &j).unwrap_err().to_string().contains("log-head"));
    }
}
