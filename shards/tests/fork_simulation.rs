//! Deterministic simulation of forks on two real shards (issue 13.7).
//!
//! `simulation.rs` drives the store's decisions against a simulated journal
//! with injected faults; a fork cannot run there, because its grant reads
//! and flushes the source through the shard's stream files. Here two real
//! [`Shard`]s (ids 0 and 1, one glommio executor with the reactor tick a
//! server's shard runs, a data dir in /dev/shm where it exists) take a seeded random mix of creates (byte and JSON
//! streams), appends, forks (of either shard's streams and of forks, at
//! message boundaries, inside a message, with sub-offsets, below the
//! retained offset, and refused ones), snapshots with retention, deletes
//! (soft while forks read the stream, hard once the last fork is gone, down
//! the whole chain), flushes of either shard, and restarts: both shards
//! dropped without a flush and reopened, fork references recounted and
//! unread tombstones purged as the server does at start. The harness plays
//! the server's mesh: a fork's grant runs on the source's shard and its
//! create on the fork's; a failed create gives the reference back; releases
//! that deletes queue go to the parent's shard.
//!
//! A model (bytes, message ends, retention, fork references per stream)
//! predicts every outcome. After every step each stream's tail, record
//! count, retention, bytes and record ends must equal it, wherever they are
//! served from: memory, the stream's own files, or its ancestors' files on
//! either shard. Seeds are chosen as in `simulation.rs` (see `sim`); a
//! failure names its seed and the operations that led to it.

mod sim;

use sim::{canonical, key, Rng, Trace};
use sluice_shards::core::append::AppendInput;
use sluice_shards::core::create::CreateInput;
use sluice_shards::ids::{stream_shard, BUILTIN_BUCKET};
use sluice_shards::log::{FsyncMode, LogConfig};
use sluice_shards::storage::Storage;
use sluice_shards::store::{FlushConfig, Shard, ShardConfig, SnapshotAt, StoreError};
use sluice_shards::tuning::{CHECKPOINT_FREE_SPACING, SYNC_ONCE_STREAMS};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const SHARDS: usize = 2;
/// Stream names in play: few, so forks, deletes and re-creates meet.
const NAMES: u64 = 8;
/// Small segments: the journal rolls and is reclaimed behind flushes.
const SEGMENT: u64 = 8 << 10;
const NOW_MS: u64 = 1_000_000;
const OCTET: &str = "application/octet-stream";
const JSON: &str = "application/json";

/// What a stream must hold.
#[derive(Clone, Debug, Default)]
struct Model {
    json: bool,
    data: Vec<u8>,
    /// End offset of every message (record).
    ends: Vec<u64>,
    retained: u64,
    first_record: u64,
    /// The stream this one was forked from.
    parent: Option<String>,
    /// Forks (live or soft-deleted) reading this stream.
    forks: usize,
    /// Soft-deleted: gone for clients, kept for its forks.
    deleted: bool,
}

impl Model {
    /// Where record `r` starts.
    fn start(&self, r: usize) -> u64 {
        if r == 0 {
            0
        } else {
            self.ends[r - 1]
        }
    }

    /// Appends messages of `data` ending at `ends` (relative to `data`).
    fn extend(&mut self, data: &[u8], ends: &[u64]) {
        let base = self.data.len() as u64;
        self.data.extend_from_slice(data);
        self.ends.extend(ends.iter().map(|e| base + e));
    }
}

/// A fork the model expects: the inherited bytes and message ends, and the
/// retention it takes over.
struct Inherited {
    data: Vec<u8>,
    ends: Vec<u64>,
    retained: u64,
    first_record: u64,
}

fn owner(name: &str) -> usize {
    stream_shard(BUILTIN_BUCKET, name, SHARDS)
}

fn config(root: &Path, id: usize) -> ShardConfig {
    ShardConfig {
        log: LogConfig { dir: root.join(format!("shard-{id}")), segment_size: SEGMENT, fsync: FsyncMode::Always },
        open_files: sluice_shards::store::files::MAX_OPEN_FILES,
        max_producers: 16,
        // The simulation flushes when it decides to, never in the background.
        flush: FlushConfig {
            bytes: 1 << 40,
            every: Duration::from_secs(1 << 20),
            free_spacing: CHECKPOINT_FREE_SPACING,
            sync_once: SYNC_ONCE_STREAMS,
            place_from: sluice_shards::tuning::PLACE_FROM,
            bundle_max: sluice_shards::tuning::BUNDLE_MAX,
            slice: 2,
        },
        shards: SHARDS,
        storage: Storage::Real,
    }
}

struct World {
    seed: u64,
    rng: Rng,
    root: PathBuf,
    shards: Vec<Shard>,
    model: BTreeMap<String, Model>,
    trace: Trace,
}

impl World {
    fn fail(&self, what: String) -> ! {
        panic!(
            "seed {}: {what}\nlast operations:\n  {}\nreproduce: SLUICE_SIM_SEED={} cargo test -p sluice-shards --test fork_simulation",
            self.seed,
            self.trace.tail(30),
            self.seed
        );
    }

    /// Opens both shards as the server starts them.
    async fn open(&mut self) {
        assert!(self.shards.is_empty());
        for id in 0..SHARDS {
            std::fs::create_dir_all(self.root.join(format!("shard-{id}"))).unwrap();
            match Shard::open(id, config(&self.root, id)).await {
                Ok(s) => self.shards.push(s),
                Err(e) => self.fail(format!("shard {id} does not open: {e}")),
            }
        }
        let parents: Vec<(usize, u64)> = self
            .shards
            .iter()
            .flat_map(|s| {
                s.store
                    .borrow()
                    .streams
                    .values()
                    .filter_map(|e| e.state.fork().map(|f| (f.parent_shard as usize, f.parent_handle)))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (shard, handle) in parents {
            self.shards[shard].add_fork_ref(handle);
        }
        for s in &self.shards {
            s.purge_tombstones().await;
        }
        self.deliver_releases().await;
    }

    /// Files of the data dir this process holds open that `pick` selects,
    /// once pending closes ran (glommio closes a dropped file in the
    /// background): empty, or what is still open after a second.
    async fn open_files(&self, pick: impl Fn(&str) -> bool) -> Vec<String> {
        let mut open = Vec::new();
        for _ in 0..1000 {
            glommio::timer::sleep(Duration::from_millis(1)).await;
            open = std::fs::read_dir("/proc/self/fd")
                .into_iter()
                .flatten()
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|p| p.starts_with(&self.root))
                .map(|p| p.display().to_string())
                .filter(|p| pick(p))
                .collect();
            if open.is_empty() {
                break;
            }
        }
        open
    }

    /// Closes both shards without a flush, as a stop would leave them; no
    /// file of the data dir stays open.
    async fn close(&mut self) {
        for s in self.shards.drain(..) {
            s.log.stop().await;
        }
        let open = self.open_files(|_| true).await;
        if !open.is_empty() {
            self.fail(format!("closed shards left files open: {open:?}"));
        }
    }

    /// Delivers the fork releases deletes queued to the parents' shards,
    /// until none is left (a release can delete a tombstone, which releases
    /// its own parent).
    async fn deliver_releases(&self) {
        loop {
            let mut any = false;
            for s in &self.shards {
                let batch = std::mem::take(&mut s.store.borrow_mut().releases);
                for (shard, handle) in batch {
                    any = true;
                    self.shards[shard as usize].release_fork(handle).await;
                }
            }
            if !any {
                return;
            }
        }
    }

    fn live(&self, name: &str) -> Option<&Model> {
        self.model.get(name).filter(|m| !m.deleted)
    }

    /// Random message bodies: the bytes sent, the bytes stored, and their ends.
    fn body(&mut self, json: bool) -> (Vec<u8>, Vec<u8>, Vec<u64>) {
        if json {
            let (sent, records) = self.rng.json_body(3);
            let (stored, ends) = canonical(&records);
            (sent, stored, ends)
        } else {
            let b = self.rng.bytes(40);
            let n = b.len() as u64;
            (b.clone(), b, vec![n])
        }
    }

    async fn step(&mut self) {
        let name = format!("s{}", self.rng.below(NAMES));
        match self.rng.below(100) {
            0..=14 => self.create(&name).await,
            15..=44 => self.append(&name).await,
            45..=66 => self.fork(&name).await,
            67..=74 => self.retain(&name).await,
            75..=84 => self.delete(&name).await,
            85..=95 => {
                let id = self.rng.below(SHARDS as u64) as usize;
                self.trace.push(format!("flush shard {id}"));
                if let Err(e) = self.shards[id].flush().await {
                    self.fail(format!("flush of shard {id}: {e:?}"));
                }
            }
            _ => {
                self.trace.push("restart".into());
                self.close().await;
                self.open().await;
            }
        }
        self.check().await;
    }

    async fn create(&mut self, name: &str) {
        if self.live(name).is_some() {
            return;
        }
        let json = self.rng.chance(40);
        let (mut sent, mut stored, mut ends) = if self.rng.chance(50) { self.body(json) } else { Default::default() };
        if ends.is_empty() {
            (sent, stored, ends) = Default::default();
        }
        let input = CreateInput::plain(if json { JSON } else { OCTET });
        self.trace.push(format!("create {name} json {json} body {}", sent.len()));
        let got = self.shards[owner(name)].create(&key(name), &input, &sent, None, NOW_MS).await;
        match (self.model.contains_key(name), got) {
            (false, Ok(out)) if out.created => {
                let mut m = Model { json, ..Model::default() };
                m.extend(&stored, &ends);
                self.model.insert(name.to_string(), m);
            }
            (true, Err(StoreError::Conflict(_))) => {}
            (exists, got) => self.fail(format!("create {name} (tombstone: {exists}): {got:?}")),
        }
    }

    async fn append(&mut self, name: &str) {
        let json = self.model.get(name).is_some_and(|m| m.json);
        let (sent, stored, ends) = self.body(json);
        if ends.is_empty() {
            return;
        }
        let input = AppendInput {
            content_type: Some(if json { JSON } else { OCTET }),
            body: &sent,
            close: false,
            stream_seq: None,
            producer: None,
            record_match: None,
        };
        self.trace.push(format!("append {name} {} bytes", sent.len()));
        let got = self.shards[owner(name)].append(&key(name), &input, NOW_MS).await;
        match (self.model.get(name).map(|m| m.deleted), got) {
            (Some(false), Ok(out)) if out.wrote => self.model.get_mut(name).expect("live").extend(&stored, &ends),
            (None, Err(StoreError::NoStream)) | (Some(true), Err(StoreError::Gone)) => {}
            (deleted, got) => self.fail(format!("append to {name} (soft-deleted: {deleted:?}): {got:?}")),
        }
    }

    /// What forking `source` at `offset` + `sub` must give, or the refusal.
    fn expect_fork(&self, source: &str, offset: Option<u64>, sub: u64) -> Result<Inherited, &'static str> {
        let m = match self.model.get(source) {
            None => return Err("not found"),
            Some(m) if m.deleted => return Err("conflict"),
            Some(m) => m,
        };
        let tail = m.data.len() as u64;
        let at = offset.unwrap_or(tail);
        if at > tail {
            return Err("invalid");
        }
        if at < m.retained {
            return Err("trimmed");
        }
        let (cut_record, end) = if m.json {
            let Some(r) = (0..=m.ends.len()).find(|&r| m.start(r) == at) else { return Err("invalid") };
            if r as u64 + sub > m.ends.len() as u64 {
                return Err("invalid");
            }
            let cut = r + sub as usize;
            (cut, m.start(cut))
        } else {
            if at + sub > tail {
                return Err("invalid");
            }
            // The record holding byte at + sub (all of them at the tail).
            (m.ends.iter().take_while(|&&e| e <= at + sub).count(), at + sub)
        };
        let cut = m.start(cut_record);
        let mut ends = m.ends[..cut_record].to_vec();
        if end > cut {
            ends.push(end);
        }
        Ok(Inherited {
            data: m.data[..end as usize].to_vec(),
            ends,
            retained: m.retained.min(cut),
            first_record: m.first_record.min(cut_record as u64),
        })
    }

    /// One of the names the model holds, or any name if it holds none.
    fn held_name(&mut self) -> String {
        let n = self.model.len() as u64;
        match n {
            0 => format!("s{}", self.rng.below(NAMES)),
            _ => self.model.keys().nth(self.rng.below(n) as usize).expect("in range").clone(),
        }
    }

    async fn fork(&mut self, name: &str) {
        // Mostly from a stream that exists to a name that does not.
        let source = if self.rng.chance(85) { self.held_name() } else { format!("s{}", self.rng.below(NAMES)) };
        let free: Vec<String> = (0..NAMES).map(|n| format!("s{n}")).filter(|n| !self.model.contains_key(n)).collect();
        let target = match free.len() as u64 {
            n if n > 0 && self.rng.chance(80) => free[self.rng.below(n) as usize].clone(),
            _ => name.to_string(),
        };
        let target = target.as_str();
        let tail = self.model.get(&source).map_or(0, |m| m.data.len() as u64);
        let (offset, sub) = match self.rng.below(10) {
            0..=1 => (None, 0),
            2..=5 => {
                // A message boundary, sometimes one below the retained offset.
                let m = self.model.get(&source);
                let records = m.map_or(0, |m| m.ends.len() as u64);
                let r = self.rng.below(records + 1) as usize;
                let at = m.map_or(0, |m| m.start(r));
                let sub = if self.rng.chance(50) { 0 } else { self.rng.below(4) };
                (Some(at), sub)
            }
            _ => (Some(self.rng.below(tail + 3)), self.rng.below(tail / 2 + 2)),
        };
        let result = self.expect_fork(&source, offset, sub);
        let src = owner(&source);
        self.trace.push(format!("fork {target} from {source} at {offset:?} sub {sub}"));
        let grant = match (self.shards[src].grant_fork(&key(&source), offset, sub, NOW_MS).await, &result) {
            (Ok(g), Ok(_)) => g,
            (Err(StoreError::NotFound(_)), Err("not found"))
            | (Err(StoreError::Conflict(_)), Err("conflict"))
            | (Err(StoreError::Invalid(_)), Err("invalid"))
            | (Err(StoreError::Trimmed(_)), Err("trimmed")) => return,
            (got, _) => self.fail(format!("fork grant: {got:?}, expected {:?}", result.as_ref().err())),
        };
        let inherited = result.expect("granted");
        let json = self.model[&source].json;
        let (sent, stored, ends) = if self.rng.chance(30) { self.body(json) } else { Default::default() };
        let sent = if ends.is_empty() { Vec::new() } else { sent };
        let parent_handle = grant.parent_handle;
        let input = CreateInput {
            content_type: grant.content_type.clone(),
            ttl_secs: grant.ttl_secs,
            expires_at_ms: grant.expires_at_ms,
            closed: false,
            attrs: vec![],
        };
        let plan = grant.plan(src as u32, format!("/v1/stream/{source}"), offset, sub);
        let got = self.shards[owner(target)].create(&key(target), &input, &sent, Some(plan), NOW_MS).await;
        let created = matches!(got, Ok(out) if out.created);
        if !created {
            // As the fork handler does: the reference goes back.
            self.shards[src].release_fork(parent_handle).await;
        }
        match (self.model.contains_key(target), created) {
            (false, true) => {
                let mut m = Model {
                    json,
                    data: inherited.data,
                    ends: inherited.ends,
                    retained: inherited.retained,
                    first_record: inherited.first_record,
                    parent: Some(source.clone()),
                    ..Model::default()
                };
                m.extend(&stored, &ends);
                self.model.insert(target.to_string(), m);
                self.model.get_mut(&source).expect("granted").forks += 1;
            }
            (true, false) if matches!(got, Err(StoreError::Conflict(_)) | Ok(_)) => {}
            (exists, _) => self.fail(format!("fork create {target} (exists: {exists}): {got:?}")),
        }
    }

    /// A snapshot at a message boundary of a byte stream, then retention there.
    async fn retain(&mut self, name: &str) {
        let Some(m) = self.live(name).filter(|m| !m.json).cloned() else { return };
        let r = m.first_record + self.rng.below(m.ends.len() as u64 - m.first_record + 1);
        let offset = m.start(r as usize);
        self.trace.push(format!("retain {name} from record {r} (offset {offset})"));
        let s = &self.shards[owner(name)];
        let snap = s.publish_snapshot(&key(name), SnapshotAt::Record(r), OCTET, b"state", None, NOW_MS).await;
        if let Err(e) = snap {
            self.fail(format!("snapshot of {name} at record {r}: {e:?}"));
        }
        match s.set_retention(&key(name), SnapshotAt::Record(r), NOW_MS).await {
            Ok(at) if at == offset => {}
            got => self.fail(format!("retention of {name} at record {r}: {got:?}")),
        }
        let m = self.model.get_mut(name).expect("live");
        (m.retained, m.first_record) = (offset, r);
    }

    async fn delete(&mut self, name: &str) {
        self.trace.push(format!("delete {name}"));
        let got = self.shards[owner(name)].delete(&key(name), NOW_MS).await;
        self.deliver_releases().await;
        let forks = match self.live(name) {
            None if got.is_err() => return,
            None => self.fail(format!("delete of {name}, which the model does not hold live: {got:?}")),
            Some(_) if got.is_err() => self.fail(format!("delete of {name}: {got:?}")),
            Some(m) => m.forks,
        };
        if forks > 0 {
            self.model.get_mut(name).expect("live").deleted = true;
            return;
        }
        // Gone for good; each parent left with no reader after a soft delete goes too.
        let mut gone = self.model.remove(name).expect("live");
        while let Some(parent) = gone.parent.take() {
            let p = self.model.get_mut(&parent).expect("a fork's parent stays while the fork exists");
            p.forks -= 1;
            if !(p.deleted && p.forks == 0) {
                break;
            }
            gone = self.model.remove(&parent).expect("held");
        }
    }

    /// Every stream, on the shard that owns it, against the model.
    async fn check(&self) {
        for n in 0..NAMES {
            let name = format!("s{n}");
            let s = &self.shards[owner(&name)];
            let k = key(&name);
            let held = s.store.borrow().streams.get(&*k).map(|e| {
                let st = &e.state;
                (st.deleted, st.visible.tail, st.visible.messages, st.retained, st.first_message, st.forks as u64)
            });
            let m = match (self.model.get(&name), held) {
                (None, None) => continue,
                (Some(m), Some((deleted, ..))) if m.deleted && deleted => continue,
                (Some(m), Some(h)) if !m.deleted => (m, h),
                (m, h) => self
                    .fail(format!("{name}: model {m:?}, store (deleted, tail, records, retained, first, forks) {h:?}")),
            };
            let (m, (_, tail, records, retained, first, forks)) = m;
            let want = (m.data.len() as u64, m.ends.len() as u64, m.retained, m.first_record, m.forks as u64);
            if (tail, records, retained, first, forks) != want {
                self.fail(format!(
                    "{name}: (tail, records, retained, first record, forks) {:?}, model {want:?}",
                    (tail, records, retained, first, forks)
                ));
            }
            match s.bytes(&k, m.retained, tail).await {
                Ok(b) if b == m.data[m.retained as usize..] => {}
                Ok(b) => self.fail(format!(
                    "{name}: bytes from {} differ: {b:?} vs {:?}",
                    m.retained,
                    &m.data[m.retained as usize..]
                )),
                Err(e) => self.fail(format!("{name}: read failed: {e}")),
            }
            for r in m.first_record..records {
                match s.end_of(&k, r).await {
                    Ok(end) if end == m.ends[r as usize] => {}
                    got => self.fail(format!("{name}: end of record {r}: {got:?}, model {}", m.ends[r as usize])),
                }
            }
        }
    }
}

fn run(seed: u64, steps: usize, trace: Trace) {
    let root = sim::scratch_root(&format!("sluice-fork-sim-{seed}"));
    let dir = root.clone();
    sluice_shards::tick::block_on(move || async move {
        let mut w = World { seed, rng: Rng(seed), root: dir, shards: Vec::new(), model: BTreeMap::new(), trace };
        w.open().await;
        for _ in 0..steps {
            w.step().await;
        }
        // Once both shards flushed, no deleted file is held open (its
        // space would not come back), and a restart changes nothing.
        for s in &w.shards {
            s.flush().await.expect("final flush");
        }
        let deleted = w.open_files(|f| f.ends_with(" (deleted)")).await;
        if !deleted.is_empty() {
            w.fail(format!("deleted files held open after a flush of every shard: {deleted:?}"));
        }
        w.close().await;
        w.open().await;
        w.check().await;
        w.close().await;
    });
    std::fs::remove_dir_all(&root).expect("remove the data dir");
}

#[test]
fn seeded_forks_flushes_and_restarts_match_the_model() {
    sim::seeds(300, run);
}

/// A seed whose last flushes wrote no checkpoint on the shard that had
/// read another shard's files as a fork's ancestor: it kept their
/// descriptors, and so the deleted files' space, until its next
/// checkpoint (7 runs in 8 failed the end's check before every flush
/// closed them).
#[test]
fn a_shard_without_a_checkpoint_still_closes_files_it_no_longer_reads() {
    run(1101, 300, sim::Trace::default());
}
