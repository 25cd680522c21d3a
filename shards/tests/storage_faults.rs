//! Deterministic simulation of a real shard whose storage fails (issue 23).
//!
//! One real [`Shard`] (a glommio executor with the reactor tick, a data dir
//! in /dev/shm where it exists) opened with [`Storage::Faulty`] takes a
//! seeded random mix of creates, appends, snapshots with retention (hole
//! punches), deletes, flushes and restarts. Faults come in periods: for a
//! few steps, one kind of file operation fails often, or every kind
//! sometimes, or exactly the Nth operation of one kind fails with a chosen
//! errno (EIO, ENOSPC, EMFILE, EACCES, short and torn writes; opens, reads,
//! writes, sizes, truncates, punches, syncs, unlinks, renames, listings,
//! statvfs). Flushes in a period may fail anywhere: in a stream write, an
//! index write, a snapshot, a directory sync, the checkpoint's install or
//! rename, or any step of the clean-up after it. Restarts (a stop, or a
//! crash: the shard's log abandoned with whatever it buffered) in a period
//! may fail in recovery; the shard is then reopened with faults off.
//!
//! After every step: every acknowledged byte of every stream reads back
//! exactly, from memory or from the stream files (under faults a read may
//! fail, never return other bytes), deleted streams stay deleted. When a
//! period ends, the next flush (faults off) must succeed, and then nothing
//! is left behind: no file of a deleted stream, no replaced snapshot, no
//! temporary checkpoint, no reclaimable journal segment. Every restart,
//! faulty or not, loses nothing acknowledged. Seeds are chosen as in
//! `simulation.rs` (see `sim`); a failure names its seed and the
//! operations that led to it.

mod sim;

use sim::{key, Rng, Trace};
use sluice_shards::core::append::AppendInput;
use sluice_shards::core::create::CreateInput;
use sluice_shards::core::stream::Blob;
use sluice_shards::log::recovery::{Dir, LogFiles};
use sluice_shards::log::segment::list_segments;
use sluice_shards::log::{FsyncMode, LogConfig};
use sluice_shards::storage::faults::{Faults, Op};
use sluice_shards::storage::Storage;
use sluice_shards::store::files::{FileName, STREAMS_DIR};
use sluice_shards::store::{FlushConfig, Shard, ShardConfig, SnapshotAt, StoreError};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Stream names in play: few, so deletes and re-creates meet.
const NAMES: u64 = 6;
/// Small segments: the journal rolls and is reclaimed behind flushes.
const SEGMENT: u64 = 8 << 10;
const NOW_MS: u64 = 1_000_000;
const OCTET: &str = "application/octet-stream";
/// The errnos an explicit ("the Nth operation") fault picks from.
const ERRNOS: [i32; 4] = [libc::EIO, libc::ENOSPC, libc::EMFILE, libc::EACCES];

/// What a stream must hold.
#[derive(Clone, Debug, Default)]
struct Model {
    data: Vec<u8>,
    /// End offset of every message.
    ends: Vec<u64>,
    retained: u64,
    first_record: u64,
}

impl Model {
    fn start(&self, r: u64) -> u64 {
        r.checked_sub(1).map_or(0, |i| self.ends[i as usize])
    }
}

struct World {
    seed: u64,
    rng: Rng,
    root: PathBuf,
    shard: Option<Shard>,
    /// Shards ended by a crash: nothing may write for them any more.
    crashed: Vec<Shard>,
    faults: Arc<Faults>,
    /// Steps left in the current fault period (0: faults off).
    period: u64,
    model: BTreeMap<String, Model>,
    trace: Trace,
}

impl World {
    fn fail(&self, what: String) -> ! {
        panic!(
            "seed {}: {what}\nfaults injected: {:?}\nlast operations:\n  {}\n\
             reproduce: SLUICE_SIM_SEED={} cargo test --release -p sluice-shards --test storage_faults",
            self.seed,
            self.faults.injected(),
            self.trace.tail(30),
            self.seed
        );
    }

    fn shard(&self) -> &Shard {
        self.shard.as_ref().expect("the shard is open")
    }

    fn config(&self) -> ShardConfig {
        ShardConfig {
            log: LogConfig { dir: self.root.join("shard-0"), segment_size: SEGMENT, fsync: FsyncMode::Always },
            open_files: sluice_shards::store::files::MIN_OPEN_FILES,
            max_producers: 16,
            // The simulation flushes when it decides to, never in the
            // background, and a clean flush gives back everything (the
            // spacing of checkpoints that free is `checkpoint_due`'s).
            // Odd seeds sync the file system once whenever a flush writes
            // two streams or more, even seeds always sync each file. Every
            // third seed places appends of 1 KiB or more in their stream
            // files before their journal record. Even seeds encode a
            // checkpoint one stream at a time, the simulation's operations
            // running between the slices.
            flush: FlushConfig {
                bytes: 1 << 40,
                every: Duration::from_secs(1 << 20),
                free_spacing: 0,
                sync_once: if self.seed % 2 == 1 { 2 } else { usize::MAX },
                place_from: if self.seed.is_multiple_of(3) { 1024 } else { sluice_shards::tuning::PLACE_FROM },
                bundle_max: if self.seed.is_multiple_of(2) { sluice_shards::tuning::BUNDLE_MAX } else { 0 },
                slice: if self.seed.is_multiple_of(2) { 1 } else { sluice_shards::tuning::FLUSH_SLICE },
            },
            storage: Storage::Faulty(self.faults.clone()),
            shards: 1,
        }
    }

    /// Opens the shard; under faults recovery may fail (it is then retried
    /// with faults off), without them it must not.
    async fn open(&mut self) {
        assert!(self.shard.is_none());
        std::fs::create_dir_all(self.root.join("shard-0")).unwrap();
        match Shard::open(0, self.config()).await {
            Ok(s) => self.shard = Some(s),
            Err(e) if self.period > 0 => {
                self.trace.push(format!("recovery failed under faults: {e}"));
                self.end_period();
                Box::pin(self.open()).await;
            }
            Err(e) => self.fail(format!("the shard does not open: {e}")),
        }
    }

    /// Stops the shard without a flush, as a crash or a stop leaves it.
    async fn close(&mut self) {
        if let Some(s) = self.shard.take() {
            s.log.stop().await;
        }
    }

    /// Ends the shard as a crash would: its log writes nothing more (what it
    /// buffered, such as the seal of a segment it rolled into, is lost)
    /// once the segment it was preparing exists. It is kept, untouched,
    /// until the run ends ([`World::bury`]).
    async fn crash(&mut self) {
        glommio::timer::sleep(Duration::from_millis(2)).await;
        self.crashed.extend(self.shard.take());
    }

    /// Stops the crashed shards once the run is over, so their tasks end
    /// and their descriptors close (seeds share the process's limit).
    async fn bury(&mut self) {
        for s in self.crashed.drain(..) {
            s.log.stop().await;
        }
        // glommio closes a dropped file in the background.
        let mut open = Vec::new();
        for _ in 0..1000 {
            glommio::timer::sleep(Duration::from_millis(1)).await;
            open = std::fs::read_dir("/proc/self/fd")
                .into_iter()
                .flatten()
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|p| p.starts_with(&self.root))
                .collect::<Vec<_>>();
            if open.is_empty() {
                return;
            }
        }
        self.fail(format!("files left open after every shard stopped: {open:?}"));
    }

    /// Starts a fault period of a few steps: one kind of operation fails
    /// often, or every kind sometimes, or one chosen operation fails.
    fn start_period(&mut self) {
        self.period = 2 + self.rng.below(9);
        let op = Op::ALL[self.rng.below(Op::ALL.len() as u64) as usize];
        match self.rng.below(3) {
            0 => {
                let per_mille = 100 + self.rng.below(400);
                self.trace.push(format!("faults: {op:?} at {per_mille}/1000 for {} steps", self.period));
                self.faults.set(op, per_mille);
            }
            1 => {
                let per_mille = 10 + self.rng.below(60);
                self.trace.push(format!("faults: every kind at {per_mille}/1000 for {} steps", self.period));
                for op in Op::ALL {
                    self.faults.set(op, per_mille);
                }
            }
            _ => {
                let (nth, errno) = (self.rng.below(12), ERRNOS[self.rng.below(ERRNOS.len() as u64) as usize]);
                self.trace.push(format!("faults: {op:?} number {nth} fails with errno {errno}"));
                self.faults.fail_nth(op, nth, errno);
            }
        }
    }

    /// Ends the fault period: the next flush must succeed and leave
    /// nothing behind.
    fn end_period(&mut self) {
        self.period = 0;
        self.faults.off();
    }

    async fn step(&mut self) {
        if self.period == 0 && self.rng.chance(25) {
            self.start_period();
        }
        let name = format!("s{}", self.rng.below(NAMES));
        match self.rng.below(100) {
            0..=11 => self.create(&name).await,
            12..=41 => self.append(&name).await,
            42..=53 => self.retain(&name).await,
            54..=63 => self.delete(&name).await,
            64..=91 => self.flush().await,
            _ => {
                let crash = self.rng.chance(50);
                self.trace.push(format!("{} (faults: {})", if crash { "crash" } else { "restart" }, self.period > 0));
                if crash {
                    self.crash().await;
                } else {
                    self.close().await;
                }
                self.open().await;
            }
        }
        self.check().await;
        if self.period > 0 {
            self.period -= 1;
            if self.period == 0 {
                self.end_period();
                self.clean_flush().await;
            }
        }
    }

    async fn flush(&mut self) {
        self.trace.push("flush".into());
        match self.shard().flush().await {
            Ok(()) if self.period == 0 => self.check_clean().await,
            Ok(()) => {}
            Err(e) if self.period > 0 => self.trace.push(format!("flush failed under faults: {e:?}")),
            Err(e) => self.fail(format!("flush without faults: {e:?}")),
        }
    }

    /// A flush with faults off: it must succeed (retrying whatever failed
    /// before) and leave nothing behind.
    async fn clean_flush(&mut self) {
        self.trace.push("flush (faults off)".into());
        if let Err(e) = self.shard().flush().await {
            self.fail(format!("flush after the faults stopped: {e:?}"));
        }
        self.check_clean().await;
    }

    /// After a successful flush without faults: the streams directory holds
    /// only the files of live streams and their current snapshots, the
    /// checkpoint's temporary file is gone, and so is every journal segment
    /// the checkpoint no longer needs (up to the one log-head names).
    async fn check_clean(&self) {
        let s = self.shard();
        let st = s.store.borrow();
        if !st.graveyard.is_empty() {
            self.fail(format!("files left to delete after a clean flush: {:?}", st.graveyard));
        }
        let shard_dir = self.root.join("shard-0");
        for entry in std::fs::read_dir(shard_dir.join(STREAMS_DIR)).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            let wanted = FileName::parse(&name).is_some_and(|f| {
                st.streams.values().any(|e| {
                    Some(e.state.handle) == f.stream()
                        && match f {
                            FileName::Data(_) | FileName::Index(_) => e.state.body.has_own_files(),
                            FileName::Snapshot(_, g) => {
                                e.state.snapshot.as_ref().is_some_and(|x| x.blob == Blob::Stored(g))
                            }
                            FileName::Bundle(_) => false,
                        }
                })
            });
            if !wanted {
                self.fail(format!("{name} left in the streams directory after a clean flush"));
            }
        }
        if shard_dir.join("checkpoint.tmp").exists() {
            self.fail("checkpoint.tmp left after a clean flush".into());
        }
        // The journal is reclaimed up to the segment log-head names, which
        // moves with the first commit into a segment: a roll with nothing
        // committed after it leaves the segments from the head on.
        let head = Dir(shard_dir.clone()).marks().unwrap().1.unwrap_or(0);
        let segments = list_segments(&shard_dir).unwrap();
        let old: Vec<u32> = segments.into_iter().filter(|&no| no < st.journal_start.min(head)).collect();
        if !old.is_empty() {
            self.fail(format!("journal segments {old:?} left after a clean flush resuming in {}", st.journal_start));
        }
    }

    /// Random message bytes.
    fn body(&mut self) -> Vec<u8> {
        let max = if self.rng.chance(30) { 9000 } else { 200 };
        self.rng.bytes(max)
    }

    async fn create(&mut self, name: &str) {
        if self.model.contains_key(name) {
            return;
        }
        let body = if self.rng.chance(50) { self.body() } else { Vec::new() };
        let input = CreateInput::plain(OCTET);
        self.trace.push(format!("create {name} body {}", body.len()));
        let got = self.shard().create(&key(name), &input, &body, None, NOW_MS).await;
        match got {
            Ok(out) if out.created => {
                let ends = if body.is_empty() { vec![] } else { vec![body.len() as u64] };
                self.model.insert(name.to_string(), Model { data: body, ends, ..Model::default() });
            }
            got => self.fail(format!("create {name}: {got:?}")),
        }
    }

    async fn append(&mut self, name: &str) {
        let body = self.body();
        let input = AppendInput {
            content_type: Some(OCTET),
            body: &body,
            close: false,
            stream_seq: None,
            producer: None,
            record_match: None,
        };
        self.trace.push(format!("append {name} {} bytes", body.len()));
        let got = self.shard().append(&key(name), &input, NOW_MS).await;
        match (self.model.contains_key(name), got) {
            (true, Ok(out)) if out.wrote => {
                let m = self.model.get_mut(name).expect("held");
                m.data.extend_from_slice(&body);
                m.ends.push(m.data.len() as u64);
            }
            (false, Err(StoreError::NoStream)) => {}
            (exists, got) => self.fail(format!("append to {name} (exists: {exists}): {got:?}")),
        }
    }

    /// A snapshot at a message boundary, then retention there (the next
    /// flushes punch the bytes before it). Under faults, resolving the
    /// position may fail (it reads the index); nothing changes then.
    async fn retain(&mut self, name: &str) {
        let Some(m) = self.model.get(name).cloned() else { return };
        let r = m.first_record + self.rng.below(m.ends.len() as u64 - m.first_record + 1);
        let offset = m.start(r);
        self.trace.push(format!("retain {name} from record {r} (offset {offset})"));
        let s = self.shard();
        let state = format!("state {r}");
        match s.publish_snapshot(&key(name), SnapshotAt::Record(r), OCTET, state.as_bytes(), None, NOW_MS).await {
            Ok(_) => {}
            Err(StoreError::ReadFailed) if self.period > 0 => return,
            Err(e) => self.fail(format!("snapshot of {name} at record {r}: {e:?}")),
        }
        match s.set_retention(&key(name), SnapshotAt::Record(r), NOW_MS).await {
            Ok(at) if at == offset => {}
            Err(StoreError::ReadFailed) if self.period > 0 => return,
            got => self.fail(format!("retention of {name} at record {r}: {got:?}")),
        }
        let m = self.model.get_mut(name).expect("held");
        (m.retained, m.first_record) = (offset, r);
    }

    async fn delete(&mut self, name: &str) {
        self.trace.push(format!("delete {name}"));
        let got = self.shard().delete(&key(name), NOW_MS).await;
        match (self.model.remove(name), got) {
            (Some(_), Ok(())) | (None, Err(StoreError::NoStream)) => {}
            (m, got) => self.fail(format!("delete of {name} (exists: {}): {got:?}", m.is_some())),
        }
    }

    /// Every stream against the model: its state, its bytes and its record
    /// ends. Under faults a read may fail; it may never return other bytes.
    async fn check(&self) {
        let s = self.shard();
        for n in 0..NAMES {
            let name = format!("s{n}");
            let k = key(&name);
            let held = s.store.borrow().streams.get(&*k).map(|e| {
                let st = &e.state;
                (st.deleted, st.visible.tail, st.visible.messages, st.retained, st.first_message)
            });
            let (m, (_, tail, records, retained, first)) = match (self.model.get(&name), held) {
                (None, None) => continue,
                (Some(m), Some(h)) if !h.0 => (m, h),
                (m, h) => {
                    self.fail(format!("{name}: model {m:?}, store (deleted, tail, records, retained, first) {h:?}"))
                }
            };
            let want = (m.data.len() as u64, m.ends.len() as u64, m.retained, m.first_record);
            if (tail, records, retained, first) != want {
                self.fail(format!(
                    "{name}: (tail, records, retained, first record) {:?}, model {want:?}",
                    (tail, records, retained, first)
                ));
            }
            match s.bytes(&k, m.retained, tail).await {
                Ok(b) if b == m.data[m.retained as usize..] => {}
                Ok(b) => self.fail(format!(
                    "{name}: {} bytes from {} differ from the {} acknowledged",
                    b.len(),
                    m.retained,
                    m.data.len() as u64 - m.retained
                )),
                Err(e) if self.period > 0 => self.trace.push(format!("read of {name} failed under faults: {e}")),
                Err(e) => self.fail(format!("{name}: read failed without faults: {e}")),
            }
            for r in m.first_record..records {
                match s.end_of(&k, r).await {
                    Ok(end) if end == m.ends[r as usize] => {}
                    Err(e) if self.period > 0 => {
                        self.trace.push(format!("end of {name} record {r} failed under faults: {e}"));
                        break;
                    }
                    got => self.fail(format!("{name}: end of record {r}: {got:?}, model {}", m.ends[r as usize])),
                }
            }
        }
    }
}

fn run(seed: u64, steps: usize, trace: Trace) {
    let root = sim::scratch_root(&format!("sluice-storage-faults-{seed}"));
    let dir = root.clone();
    sluice_shards::tick::block_on(move || async move {
        let mut w = World {
            seed,
            rng: Rng(seed),
            root: dir,
            shard: None,
            crashed: Vec::new(),
            faults: Arc::new(Faults::new(seed)),
            period: 0,
            model: BTreeMap::new(),
            trace,
        };
        w.open().await;
        for _ in 0..steps {
            w.step().await;
        }
        // Faults stop: a flush succeeds and leaves nothing behind, and a
        // restart finds everything acknowledged.
        w.end_period();
        w.clean_flush().await;
        w.close().await;
        w.open().await;
        w.check().await;
        w.close().await;
        w.bury().await;
    });
    std::fs::remove_dir_all(&root).expect("remove the data dir");
}

#[test]
fn seeded_flushes_checkpoints_and_restarts_under_storage_faults() {
    sim::seeds(300, run);
}
