//! Deterministic simulation of a shard's store (issue 13.7).
//!
//! A seeded random mix of creates (byte or JSON streams, with initial bodies,
//! closed, Expires-At or a sliding Stream-TTL), appends (plain, closing,
//! JSON arrays and values, Stream-Record-Match, with an idempotent producer:
//! next seq, retries, gaps, new epochs), reads (which renew a sliding TTL
//! and resolve JSON record ordinals), deletes, snapshots, retention,
//! attribute changes, subscription records (PROTOCOL.md sections 6-7: whole
//! states and tombstones, opaque to the store) and clock advances is
//! decided by the real store code ([`Store::decide_create`] and friends,
//! through the protocol core) into an in-memory journal that frames records,
//! seals segments and rolls exactly like the log. Group commits persist the
//! journal to a simulated disk; faults cut them short at a sector boundary
//! (a short write, a failed fsync that persisted an unknown prefix, a power
//! loss leaving a torn tail with garbage in a later sector), and crashes
//! lose everything not persisted. Recovery is
//! the real scan ([`scan_files`]) over the disk image and the real
//! [`Store::replay`].
//!
//! A simple model (bytes and message ends, closure, producer state,
//! attributes, lifetime per stream) predicts every outcome independently:
//! JSON values are generated with random whitespace and the model keeps
//! their canonical records; expiry follows the fake clock, renewed by every
//! access in memory and, after a crash, only by the logged ones. After every
//! step the store's decided state, its record ordinals and the bytes its
//! index points at must equal the model;
//! after every crash the recovered state must equal the model at the
//! persisted prefix, which must hold every acknowledged operation.
//!
//! Runs `SLUICE_SIM_SEEDS` seeds (default 64) of `SLUICE_SIM_STEPS` steps
//! (default 600) in `cargo test`; `SLUICE_SIM_SECONDS=N` runs seeds for N
//! seconds instead (see `sim`). A failure names its seed;
//! `SLUICE_SIM_SEED=S` reruns exactly that one.
//!
//! Forks run on real shards in `fork_simulation.rs`: a fork's grant reads
//! and flushes the source through the shard's stream files.

mod sim;

use sim::{canonical, key, Rng, Trace};
use sluice_shards::core::append::AppendInput;
use sluice_shards::core::body::Point;
use sluice_shards::core::coordinates::{self, RecordStart};
use sluice_shards::core::create::CreateInput;
use sluice_shards::core::stream::Blob;
use sluice_shards::ids::BUILTIN_BUCKET;
use sluice_shards::log::record::{Seal, SEAL_FRAME};
use sluice_shards::log::recovery::{scan_files, LogFiles, Mode, RecoveryError};
use sluice_shards::log::{Appended, ProducerStamp, Record};
use sluice_shards::store::decide::Journal;
use sluice_shards::store::{Store, StoreError};
use sluice_shards::tuning::SECTOR;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// Producers per stream: more than the simulation ever creates, so the model needs no eviction.
const MAX_PRODUCERS: usize = 1000;

/// Segment size of the simulated log: small, so rolls are frequent.
const SEGMENT: usize = 2048;
const STREAMS: usize = 5;
const CONTENT_TYPE: &str = "application/octet-stream";
const JSON: &str = "application/json";
/// Longest sliding Stream-TTL a create picks, in seconds (clock steps move up to 3 s).
const MAX_TTL_SECS: u64 = 5;

// ------------------------------------------------------------------ journal

/// The simulated disk: what survives a crash.
#[derive(Clone, Default)]
struct Disk {
    segments: BTreeMap<u32, Vec<u8>>,
    head: Option<u32>,
}

/// The in-memory journal: frames, seals and rolls like the log; `image`
/// is the volatile view (page cache + write buffer), `disk` what is durable.
struct Inner {
    disk: Disk,
    image: BTreeMap<u32, Vec<u8>>,
    active: u32,
    write_pos: usize,
    crc: u32,
    /// Durable up to here (segment, position).
    synced: (u32, usize),
    assigned: u64,
    durable: u64,
}

struct SimJournal(RefCell<Inner>);

impl Inner {
    fn push(&mut self, frame: &[u8]) -> usize {
        let pos = self.write_pos;
        let seg = self.image.get_mut(&self.active).expect("active segment");
        assert!(pos + frame.len() <= seg.len(), "record does not fit the active segment");
        seg[pos..pos + frame.len()].copy_from_slice(frame);
        self.crc = crc32c::crc32c_append(self.crc, frame);
        self.write_pos += frame.len();
        pos
    }

    /// Starts segment `no` of `size` (preallocated durably, as the log does).
    fn open_segment(&mut self, no: u32, size: usize, seal: Seal) {
        self.image.insert(no, vec![0; size]);
        self.disk.segments.insert(no, vec![0; size]);
        self.active = no;
        self.write_pos = 0;
        self.crc = 0;
        let mut frame = Vec::new();
        Record::Seal(seal).encode(&mut frame);
        self.push(&frame);
    }

    /// Unsynced bytes in log order: (segment, from, to).
    fn unsynced(&self) -> Vec<(u32, usize, usize)> {
        let mut out = Vec::new();
        for (&no, seg) in self.image.range(self.synced.0..=self.active) {
            let from = if no == self.synced.0 { self.synced.1 } else { 0 };
            let to = if no == self.active { self.write_pos } else { seg.len() };
            if to > from {
                out.push((no, from, to));
            }
        }
        out
    }

    /// Persists the unsynced bytes up to the sector boundary at or before
    /// the first `keep` of them (all of them on a clean sync): a disk writes
    /// whole sectors. A torn write adds garbage in the sector after the
    /// first one lost (a later sector of the commit landed without it).
    fn persist(&mut self, keep: usize, torn: Option<Vec<u8>>) {
        let mut left = keep;
        let mut last = None;
        for (no, from, to) in self.unsynced() {
            let mut n = left.min(to - from);
            if n < to - from {
                n = ((from + n) / SECTOR * SECTOR).max(from) - from;
                left = n;
            }
            let src = self.image[&no][from..from + n].to_vec();
            self.disk.segments.get_mut(&no).expect("preallocated")[from..from + n].copy_from_slice(&src);
            left -= n;
            last = Some((no, from + n));
            if left == 0 {
                break;
            }
        }
        if let (Some(garbage), Some((no, at))) = (torn, last) {
            let seg = self.disk.segments.get_mut(&no).expect("preallocated");
            let at = (at / SECTOR + 1) * SECTOR;
            if at < seg.len() {
                let end = (at + garbage.len()).min(seg.len());
                seg[at..end].copy_from_slice(&garbage[..end - at]);
            }
        }
    }
}

impl Journal for SimJournal {
    fn append(&self, record: &Record<'_>) -> Appended {
        let mut s = self.0.borrow_mut();
        let mut frame = Vec::new();
        let enc = record.encode(&mut frame);
        if s.write_pos + frame.len() > s.image[&s.active].len() {
            let seal = Seal {
                previous: s.active,
                len: s.write_pos as u64,
                crc: s.crc,
                size: SEGMENT.max(frame.len() + SEAL_FRAME) as u64,
            };
            let no = s.active + 1;
            s.open_segment(no, seal.size as usize, seal);
        }
        let pos = s.push(&frame);
        s.assigned += 1;
        let _ = (pos, enc);
        Appended { lsn: s.assigned }
    }

    fn assigned(&self) -> u64 {
        self.0.borrow().assigned
    }
}

impl SimJournal {
    fn fresh() -> SimJournal {
        let mut inner = Inner {
            // log-head is created naming segment 0 before the first record.
            disk: Disk { segments: BTreeMap::new(), head: Some(0) },
            image: BTreeMap::new(),
            active: 0,
            write_pos: 0,
            crc: 0,
            synced: (1, 0),
            assigned: 0,
            durable: 0,
        };
        inner.open_segment(1, SEGMENT, Seal { previous: 0, len: 0, crc: 0, size: SEGMENT as u64 });
        SimJournal(RefCell::new(inner))
    }

    /// A group commit: everything appended so far becomes durable, and
    /// log-head moves to the newest segment after the data.
    fn sync(&self) {
        let mut s = self.0.borrow_mut();
        let all = s.unsynced().iter().map(|(_, f, t)| t - f).sum();
        s.persist(all, None);
        s.synced = (s.active, s.write_pos);
        s.durable = s.assigned;
        s.disk.head = Some(s.active);
    }
}

/// The disk image as the recovery scan sees it.
struct MemFiles<'a>(&'a mut Disk);

impl LogFiles for MemFiles<'_> {
    fn marks(&self) -> Result<(Option<u32>, Option<u32>), RecoveryError> {
        Ok((None, self.0.head))
    }

    fn list(&self) -> Result<Vec<u32>, RecoveryError> {
        Ok(self.0.segments.keys().copied().collect())
    }

    fn read(&self, no: u32) -> Result<Vec<u8>, RecoveryError> {
        self.0.segments.get(&no).cloned().ok_or_else(|| format!("segment {no} missing").into())
    }

    fn name(&self, segment: Option<u32>, mark: &str) -> String {
        segment.map_or_else(|| mark.to_string(), |n| format!("segment {n}"))
    }

    fn remove(&mut self, no: u32) -> Result<(), RecoveryError> {
        self.0.segments.remove(&no);
        Ok(())
    }

    fn zero(&mut self, no: u32, at: u64, len: usize) -> Result<(), RecoveryError> {
        let seg = self.0.segments.get_mut(&no).ok_or_else(|| RecoveryError::from("no such segment".to_string()))?;
        seg[at as usize..at as usize + len].fill(0);
        Ok(())
    }
}

// ------------------------------------------------------------------ model

#[derive(Clone, Debug, PartialEq, Eq)]
struct MStream {
    data: Vec<u8>,
    /// End offset of each message.
    ends: Vec<u64>,
    /// The tail readers see (moved at each commit).
    visible: u64,
    /// Latest snapshot: offset and body.
    snapshot: Option<(u64, Vec<u8>)>,
    retained: u64,
    closed: bool,
    /// Producer "p": (epoch, last seq, ack offset).
    producer: Option<(u64, u64, u64)>,
    /// The producer stamp of the append that closed the stream.
    closed_by: Option<(u64, u64)>,
    attrs: Vec<u8>,
    json: bool,
    expires_at: Option<u64>,
    /// Sliding Stream-TTL in seconds, from the last access.
    ttl: Option<u64>,
    /// Last access (any read or append attempt): renews the TTL in memory.
    last_access: u64,
    /// Last logged access (create, or an append that logged a record): what
    /// a restart knows.
    logged_access: u64,
}

impl MStream {
    fn live(&self, now: u64) -> bool {
        self.expires_at.is_none_or(|at| now < at) && self.ttl.is_none_or(|t| now < self.last_access + t * 1000)
    }

    /// Record ordinals readers see: (first retained, record tail).
    fn ordinals(&self) -> (u64, u64) {
        let visible = self.ends.iter().filter(|&&e| e <= self.visible).count();
        let first = self.ends.iter().filter(|&&e| e <= self.retained).count();
        (first as u64, visible as u64)
    }

    /// Offset where record ordinal `r` starts (the tail for the record tail).
    fn record_start(&self, r: u64) -> u64 {
        (r as usize).checked_sub(1).map_or(0, |i| self.ends[i])
    }
}

type Model = BTreeMap<String, MStream>;

/// Subscription states by id, as the latest records left them.
type Subs = BTreeMap<String, Vec<u8>>;

fn live_in(model: &Model, name: &str, now: u64) -> bool {
    model.get(name).is_some_and(|m| m.live(now))
}

/// What the model expects an operation to answer.
#[derive(Debug, PartialEq, Eq)]
enum Expect {
    Ok,
    /// A producer retry: no new bytes, the original ack offset.
    Duplicate(u64),
    NoStream,
    Closed,
    Gap,
    StaleEpoch,
    EpochNeedsSeqZero,
    /// Stream-Record-Match named another record tail.
    RecordMismatch,
    /// A JSON append of `[]`.
    EmptyArray,
}

// ------------------------------------------------------------------ world

struct World {
    rng: Rng,
    journal: SimJournal,
    store: Store,
    model: Model,
    now: u64,
    /// Subscriptions the journal holds.
    subs: Subs,
    /// Model and subscriptions after each decided operation, by the commit number after it.
    history: Vec<(u64, Model, Subs)>,
    trace: Trace,
}

impl World {
    fn new(seed: u64, trace: Trace) -> World {
        let mut store = Store::new(0, MAX_PRODUCERS);
        store.shard = 0;
        World {
            rng: Rng(seed),
            journal: SimJournal::fresh(),
            store,
            model: Model::new(),
            now: 1_000,
            subs: Subs::new(),
            history: vec![(0, Model::new(), Subs::new())],
            trace,
        }
    }

    fn fail(&self, seed: u64, why: String) -> ! {
        panic!(
            "simulation seed {seed} failed: {why}\nlast steps:\n  {}\n\
             reproduce: SLUICE_SIM_SEED={seed} cargo test -p sluice-shards --test simulation",
            self.trace.tail(12)
        );
    }

    /// Remembers the model at the current commit number, if it moved.
    fn record(&mut self) {
        let lsn = self.journal.assigned();
        if self.history.last().is_none_or(|(l, _, _)| *l != lsn) {
            self.history.push((lsn, self.model.clone(), self.subs.clone()));
        }
    }

    fn step(&mut self, seed: u64) {
        let name = format!("s{}", self.rng.below(STREAMS as u64));
        // Expiry is logged as its own step (as the shard's sweep does), so
        // each operation below logs only its own records. Now and then the
        // sweep's way: every stream the census finds expired, one record each.
        if self.rng.chance(10) {
            for k in self.store.expired(self.now) {
                assert!(
                    !live_in(&self.model, k.stream(), self.now),
                    "seed {seed}: the sweep found live {} expired",
                    k.stream()
                );
                self.store.expire(&self.journal, &k, self.now);
                self.record();
            }
        }
        self.store.expire(&self.journal, &key(&name), self.now);
        self.record();
        let roll = self.rng.below(100);
        match roll {
            0..=14 => self.create(seed, &name),
            15..=44 => self.append(seed, &name, false),
            45..=64 => self.append(seed, &name, true),
            65..=69 => self.read(seed, &name),
            70..=74 => self.delete(seed, &name),
            75..=76 => self.attrs(seed, &name),
            77..=78 => self.snapshot(seed, &name),
            79 => self.retention(seed, &name),
            80..=84 => {
                self.now += self.rng.below(3_000);
                self.trace.push(format!("clock -> {}", self.now));
            }
            85..=94 => self.sync(),
            95..=96 => self.subscription(),
            _ => self.crash(seed),
        }
        self.record();
        self.check_live(seed);
    }

    fn create(&mut self, seed: u64, name: &str) {
        if live_in(&self.model, name, self.now) {
            return; // Re-creating with another configuration is the core's unit tests' job.
        }
        let json = self.rng.chance(30);
        let (body, (data, ends)) = if json {
            let (body, records) = if self.rng.chance(50) { self.rng.json_body(3) } else { (vec![], vec![]) };
            (body, canonical(&records))
        } else {
            let body = if self.rng.chance(50) { self.rng.bytes(200) } else { vec![] };
            let ends = if body.is_empty() { vec![] } else { vec![body.len() as u64] };
            (body.clone(), (body, ends))
        };
        let closed = self.rng.chance(10);
        let (expires_at, ttl) = match self.rng.below(5) {
            0 => (Some(self.now + self.rng.below(6_000)), None),
            1 => (None, Some(1 + self.rng.below(MAX_TTL_SECS))),
            _ => (None, None),
        };
        let input = CreateInput {
            content_type: if json { JSON } else { CONTENT_TYPE }.into(),
            ttl_secs: ttl,
            expires_at_ms: expires_at,
            closed,
            attrs: vec![],
        };
        self.trace.push(format!(
            "create {name} json {json} body {} closed {closed} expires {expires_at:?} ttl {ttl:?}",
            body.len()
        ));
        let got = self.store.decide_create(&self.journal, &key(name), &input, &body, None, self.now);
        if let Err(e) = got {
            self.fail(seed, format!("create {name}: {e:?}"));
        }
        let visible = data.len() as u64;
        self.model.insert(
            name.to_string(),
            MStream {
                data,
                ends,
                visible,
                snapshot: None,
                retained: 0,
                closed,
                producer: None,
                closed_by: None,
                attrs: vec![],
                json,
                expires_at,
                ttl,
                last_access: self.now,
                logged_access: self.now,
            },
        );
    }

    fn append(&mut self, seed: u64, name: &str, producer: bool) {
        let close = self.rng.chance(5);
        let live = live_in(&self.model, name, self.now);
        let m = self.model.get(name).filter(|_| live).cloned();
        let json = m.as_ref().is_some_and(|m| m.json);
        let (body, (data, new_ends)) = if close && self.rng.chance(50) {
            (vec![], (vec![], vec![]))
        } else if json {
            let (body, records) = self.rng.json_body(4);
            (body, canonical(&records))
        } else {
            let body = self.rng.bytes(300);
            (body.clone(), (body.clone(), vec![body.len() as u64]))
        };
        // Stream-Record-Match on some JSON appends: the record tail, or one past it.
        let record_match = m.as_ref().filter(|_| json && self.rng.chance(20)).map(|m| {
            let tail = m.ends.len() as u64;
            tail + self.rng.below(2)
        });
        let stamp = producer.then(|| {
            let (epoch, seq) = match m.as_ref().and_then(|m| m.producer) {
                None => (0, if self.rng.chance(90) { 0 } else { 1 + self.rng.below(3) }),
                Some((e, s, _)) => match self.rng.below(10) {
                    0 => (e, s),                         // retry of the last
                    1 => (e, s + 2 + self.rng.below(3)), // gap
                    2 => (e + 1, 0),                     // new epoch
                    3 => (e + 1, 1),                     // new epoch, not at 0
                    4 if e > 0 => (e - 1, s + 1),        // stale epoch
                    _ => (e, s + 1),
                },
            };
            ProducerStamp { id: "p".into(), epoch, seq }
        });
        // The model's verdict.
        let expect = match &m {
            None => Expect::NoStream,
            Some(m) if m.closed => {
                let same_closer = stamp.as_ref().is_some_and(|p| m.closed_by == Some((p.epoch, p.seq)));
                if same_closer {
                    Expect::Duplicate(m.producer.map_or(0, |p| p.2))
                } else if body.is_empty() && close && stamp.is_none() {
                    Expect::Duplicate(m.data.len() as u64)
                } else {
                    Expect::Closed
                }
            }
            Some(m) => match (&stamp, m.producer) {
                (None, _) => Expect::Ok,
                (Some(p), None) => {
                    if p.seq == 0 {
                        Expect::Ok
                    } else {
                        Expect::Gap
                    }
                }
                (Some(p), Some((e, s, ack))) => {
                    if p.epoch < e {
                        Expect::StaleEpoch
                    } else if p.epoch > e {
                        if p.seq == 0 {
                            Expect::Ok
                        } else {
                            Expect::EpochNeedsSeqZero
                        }
                    } else if p.seq <= s {
                        Expect::Duplicate(ack)
                    } else if p.seq == s + 1 {
                        Expect::Ok
                    } else {
                        Expect::Gap
                    }
                }
            },
        };
        // After the producer checks: the record tail match, then the JSON body.
        let expect = match (&m, expect) {
            (Some(m), Expect::Ok) if record_match.is_some_and(|r| r != m.ends.len() as u64) => Expect::RecordMismatch,
            (Some(_), Expect::Ok) if !body.is_empty() && data.is_empty() => Expect::EmptyArray,
            (_, e) => e,
        };
        self.trace.push(format!(
            "append {name} body {:?} close {close} stamp {stamp:?} match {record_match:?} expect {expect:?}",
            String::from_utf8_lossy(&body[..body.len().min(40)])
        ));
        let input = AppendInput {
            content_type: Some(if json { JSON } else { CONTENT_TYPE }),
            body: &body,
            close,
            stream_seq: None,
            producer: stamp.clone(),
            record_match,
        };
        let got = self.store.decide_append(&self.journal, &key(name), &input, self.now, None);
        let verdict = match &got {
            Ok((_, (_, out))) if out.wrote || (body.is_empty() && close && expect == Expect::Ok) => Expect::Ok,
            Ok((_, (_, out))) => Expect::Duplicate(out.next_offset),
            Err(StoreError::NoStream) => Expect::NoStream,
            Err(StoreError::Closed) => Expect::Closed,
            Err(StoreError::ProducerGap { .. }) => Expect::Gap,
            Err(StoreError::StaleEpoch { .. }) => Expect::StaleEpoch,
            Err(StoreError::RecordMismatch) => Expect::RecordMismatch,
            Err(StoreError::Invalid(_)) if expect == Expect::EmptyArray => Expect::EmptyArray,
            Err(StoreError::Invalid(_)) if stamp.as_ref().is_some_and(|p| p.seq > 0) => Expect::EpochNeedsSeqZero,
            Err(e) => self.fail(seed, format!("append {name}: unexpected {e:?}")),
        };
        if verdict != expect {
            self.fail(seed, format!("append {name}: store answered {verdict:?} ({got:?}), model expects {expect:?}"));
        }
        if let Some(m) = self.model.get_mut(name).filter(|_| live) {
            // Every attempt on a live stream renews its TTL, refused or not.
            m.last_access = self.now;
        }
        if expect == Expect::Ok {
            let m = self.model.get_mut(name).expect("live");
            m.logged_access = self.now;
            let at = m.data.len() as u64;
            m.data.extend_from_slice(&data);
            m.ends.extend(new_ends.iter().map(|e| at + e));
            m.closed |= close;
            if let Some(p) = &stamp {
                m.producer = Some((p.epoch, p.seq, m.data.len() as u64));
                if close {
                    m.closed_by = Some((p.epoch, p.seq));
                }
            }
        }
    }

    /// A reader's access, as `handlers::read::resolve` makes it: the live
    /// stream (expired ones are dropped), its TTL renewed; on a JSON stream
    /// a record-aware start (`record=`, `record=now`, `tail_records=`)
    /// resolved to a record ordinal, which must start at the model's offset.
    fn read(&mut self, seed: u64, name: &str) {
        let live = live_in(&self.model, name, self.now);
        let start = match self.rng.below(3) {
            0 => RecordStart::At(self.rng.below(12)),
            1 => RecordStart::Now,
            _ => RecordStart::Tail(self.rng.below(6)),
        };
        self.trace.push(format!("read {name} (live {live}) from {start:?}"));
        let Some(e) = self.store.live(&key(name), self.now) else {
            if live {
                self.fail(seed, format!("read {name}: missing from the store"));
            }
            return;
        };
        e.state.lifetime.touch(self.now);
        let Some(m) = self.model.get_mut(name).filter(|_| live) else {
            self.fail(seed, format!("read {name}: present in the store, absent in the model"));
        };
        m.last_access = self.now;
        if !m.json {
            return;
        }
        let (first, tail) = m.ordinals();
        let expect = match start {
            RecordStart::Now | RecordStart::Tail(0) => Ok(tail),
            RecordStart::Tail(n) => Ok(tail.saturating_sub(n).max(first)),
            RecordStart::At(r) if r < first => Err(coordinates::TRIMMED),
            RecordStart::At(r) if r > tail => Err(StoreError::RecordBeyondTail),
            RecordStart::At(r) => Ok(r),
        };
        let got = coordinates::resolve(&e.state, start);
        // The record the store finds at the model's offset for it.
        let found = got.clone().map(|r| e.state.point_in_memory(m.record_start(r)).and_then(|p| p.record));
        if got != expect || found.as_ref().is_ok_and(|f| *f != got.clone().ok()) {
            self.fail(seed, format!("read {name} from {start:?}: store {got:?} (found {found:?}), model {expect:?}"));
        }
    }

    fn delete(&mut self, seed: u64, name: &str) {
        let live = live_in(&self.model, name, self.now);
        self.trace.push(format!("delete {name} (live {live})"));
        match (self.store.decide_delete(&self.journal, &key(name), self.now), live) {
            (Ok(_), true) => {
                self.model.remove(name);
            }
            (Err(StoreError::NoStream), false) => {}
            (got, _) => self.fail(seed, format!("delete {name}: {got:?}, model says live {live}")),
        }
    }

    /// A subscription changes (its whole state) or is deleted, as the
    /// server's persister logs it: one record, applied when appended.
    fn subscription(&mut self) {
        let id = format!("sub{}", self.rng.below(3));
        let record = if self.rng.below(4) == 0 {
            self.subs.remove(&id);
            Record::SubscriptionDelete { id: id.clone() }
        } else {
            let state = self.rng.bytes(40);
            self.subs.insert(id.clone(), state.clone());
            Record::SubscriptionPut { id: id.clone(), state }
        };
        self.trace.push(format!("subscription {id}"));
        self.journal.append(&record);
        self.store.replay(record);
    }

    /// A group commit: every decided change becomes durable and visible.
    fn sync(&mut self) {
        self.journal.sync();
        for e in self.store.streams.values_mut() {
            let (tail, records, closed) = (e.state.tail(), e.state.records(), e.state.closed);
            e.state.publish(tail, records, closed);
        }
        for m in self.model.values_mut() {
            m.visible = m.data.len() as u64;
        }
        self.trace.push("sync".into());
    }

    /// An offset to publish a snapshot or retain at: mostly a boundary.
    fn pick_offset(&mut self, m: &MStream) -> u64 {
        let mut boundaries: Vec<u64> = vec![0, m.visible];
        boundaries.extend(m.ends.iter().filter(|&&e| e < m.visible));
        match self.rng.below(10) {
            0 => m.visible + 1,
            1 => self.rng.below(m.visible + 1),
            _ => boundaries[self.rng.below(boundaries.len() as u64) as usize],
        }
    }

    /// The model's refusal of `offset` as a snapshot or retention position.
    fn boundary_refusal(m: &MStream, offset: u64) -> Option<u16> {
        let boundary = offset == 0 || offset == m.visible || m.ends.iter().any(|&e| e == offset && e < m.visible);
        if offset > m.visible {
            Some(409)
        } else if offset < m.retained {
            Some(410)
        } else if !boundary {
            Some(400)
        } else {
            None
        }
    }

    fn snapshot(&mut self, seed: u64, name: &str) {
        let live = live_in(&self.model, name, self.now);
        let m = self.model.get(name).filter(|_| live).cloned();
        let offset = m.as_ref().map_or(0, |m| self.pick_offset(m));
        let body = if self.rng.chance(30) {
            m.as_ref().and_then(|m| m.snapshot.clone()).map_or_else(|| self.rng.bytes(100), |s| s.1)
        } else {
            self.rng.bytes(100)
        };
        let expect: Result<bool, u16> = match &m {
            None => Err(404),
            Some(m) => match Self::boundary_refusal(m, offset) {
                Some(code) => Err(code),
                None => match &m.snapshot {
                    Some((o, b)) if *o == offset && *b == body => Ok(false),
                    Some((o, _)) if *o == offset => Err(409),
                    _ => Ok(true),
                },
            },
        };
        self.trace.push(format!("snapshot {name} at {offset} body {} expect {expect:?}", body.len()));
        let at = self.point(name, offset);
        let got = self.store.decide_snapshot(&self.journal, &key(name), at, "application/x-s", &body, None, self.now);
        let verdict = match &got {
            Ok(_) => Ok(expect == Ok(true)),
            Err(StoreError::NoStream) => Err(404),
            Err(e) if status(e).is_some() => Err(status(e).expect("checked")),
            Err(e) => self.fail(seed, format!("snapshot {name}: unexpected {e:?}")),
        };
        if verdict != expect {
            self.fail(seed, format!("snapshot {name}: store answered {got:?}, model expects {expect:?}"));
        }
        if expect == Ok(true) {
            self.model.get_mut(name).expect("live").snapshot = Some((offset, body));
        }
    }

    /// The index's view of `offset` in stream `name` (all in memory here).
    fn point(&self, name: &str, offset: u64) -> Point {
        let e = self.store.streams.get(&*key(name));
        e.and_then(|e| e.state.point_in_memory(offset)).unwrap_or(Point { offset, record: None })
    }

    fn retention(&mut self, seed: u64, name: &str) {
        let live = live_in(&self.model, name, self.now);
        let m = self.model.get(name).filter(|_| live).cloned();
        let offset = m.as_ref().map_or(0, |m| self.pick_offset(m));
        let expect: Result<bool, u16> = match &m {
            None => Err(404),
            Some(m) => match Self::boundary_refusal(m, offset) {
                Some(code) => Err(code),
                None if offset > 0 && m.snapshot.as_ref().is_none_or(|s| offset > s.0) => Err(409),
                None => Ok(offset > m.retained),
            },
        };
        self.trace.push(format!("retention {name} at {offset} expect {expect:?}"));
        let at = self.point(name, offset);
        let got = self.store.decide_retention(&self.journal, &key(name), at, self.now);
        let verdict = match &got {
            Ok(_) => expect.map(|_| ()),
            Err(StoreError::NoStream) => Err(404),
            Err(e) if status(e).is_some() => Err(status(e).expect("checked")),
            Err(e) => self.fail(seed, format!("retention {name}: unexpected {e:?}")),
        };
        if verdict != expect.map(|_| ()) {
            self.fail(seed, format!("retention {name}: store answered {got:?}, model expects {expect:?}"));
        }
        if expect == Ok(true) {
            self.model.get_mut(name).expect("live").retained = offset;
        }
    }

    fn attrs(&mut self, seed: u64, name: &str) {
        let live = live_in(&self.model, name, self.now);
        let attrs = format!("{{\"title\":\"t{}\"}}", self.rng.below(4)).into_bytes();
        self.trace.push(format!("attrs {name} (live {live})"));
        match (self.store.decide_attrs(&self.journal, &key(name), attrs.clone(), self.now), live) {
            (Ok(_), true) => {
                self.model.get_mut(name).expect("live").attrs = attrs;
            }
            (Err(StoreError::NoStream), false) => {}
            (got, _) => self.fail(seed, format!("attrs {name}: {got:?}, model says live {live}")),
        }
    }

    /// Compares `store` with `model` at `now`.
    fn compare(store: &mut Store, model: &Model, now: u64) -> Result<(), String> {
        // Counted before `live` below drops what it finds expired: the
        // census's count must leave out expired streams nobody swept.
        let live = model.keys().filter(|name| live_in(model, name, now)).count() as u64;
        let counted = store.count_in_bucket(BUILTIN_BUCKET, now);
        if counted != live {
            return Err(format!("the bucket counts {counted} streams, the model {live}"));
        }
        for i in 0..STREAMS {
            let name = format!("s{i}");
            let want = model.get(&name).filter(|_| live_in(model, &name, now));
            let got = store.live(&key(&name), now);
            match (want, got) {
                (None, None) => {}
                (Some(_), None) => return Err(format!("{name}: missing from the store")),
                (None, Some(_)) => return Err(format!("{name}: present in the store, absent in the model")),
                (Some(m), Some(e)) => {
                    let s = &e.state;
                    let ends = s.body.unflushed().map_or(&[][..], |c| &c.ends[..]);
                    if s.tail() != m.data.len() as u64 || s.closed != m.closed || ends != m.ends {
                        return Err(format!(
                            "{name}: store tail {} closed {} messages {}, model {} {} {}",
                            s.tail(),
                            s.closed,
                            ends.len(),
                            m.data.len(),
                            m.closed,
                            m.ends.len()
                        ));
                    }
                    if s.visible.tail != m.visible || s.retained != m.retained {
                        return Err(format!(
                            "{name}: visible {} retained {}, model {} {}",
                            s.visible.tail, s.retained, m.visible, m.retained
                        ));
                    }
                    let snapshot = s.snapshot.as_ref().map(|x| match &x.blob {
                        Blob::Pending(b) => (x.offset, b.as_ref().clone()),
                        Blob::Stored(_) => unreachable!("the simulation never flushes"),
                    });
                    if snapshot != m.snapshot {
                        return Err(format!("{name}: snapshot differs from the model"));
                    }
                    if s.attrs() != m.attrs {
                        return Err(format!("{name}: attributes differ"));
                    }
                    let (first, tail) = m.ordinals();
                    if (s.first_message, s.visible.messages) != (first, tail) {
                        return Err(format!(
                            "{name}: records {}..{}, model {first}..{tail}",
                            s.first_message, s.visible.messages
                        ));
                    }
                    // Every visible record starts where the model says (a
                    // message boundary names its record, a byte inside none).
                    for r in first..=tail {
                        let start = m.record_start(r);
                        let inside = (r < tail && m.record_start(r + 1) > start + 1).then_some(start + 1);
                        let at = |o: u64| s.point_in_memory(o).map(|p| p.record);
                        if at(start) != Some(Some(r)) || inside.is_some_and(|o| at(o) != Some(None)) {
                            return Err(format!(
                                "{name}: record {r} at {start}: store {:?}, inside {:?}",
                                at(start),
                                inside.map(at)
                            ));
                        }
                    }
                    if s.json != m.json || s.lifetime.ttl_secs != m.ttl || s.lifetime.last_access_ms != m.last_access {
                        return Err(format!(
                            "{name}: json {} ttl {:?} last access {}, model {} {:?} {}",
                            s.json, s.lifetime.ttl_secs, s.lifetime.last_access_ms, m.json, m.ttl, m.last_access
                        ));
                    }
                    let producer = s.producers.get("p").map(|p| (p.epoch, p.last_seq, p.ack.0));
                    if producer != m.producer {
                        return Err(format!("{name}: producer {producer:?}, model {:?}", m.producer));
                    }
                    let mut bytes = Vec::new();
                    s.body.copy_ram(0, s.tail(), &mut bytes);
                    if bytes != m.data {
                        return Err(format!("{name}: the bytes the index points at differ from the model"));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_live(&mut self, seed: u64) {
        if let Err(why) = Self::compare(&mut self.store, &self.model, self.now) {
            self.fail(seed, format!("live state: {why}"));
        }
        if self.store.subscriptions != self.subs {
            self.fail(seed, "live subscriptions differ from the model".into());
        }
    }

    /// Loses everything not durable, maybe through a fault in the commit
    /// in flight, then recovers and checks.
    fn crash(&mut self, seed: u64) {
        let fault = self.rng.below(4);
        {
            let mut s = self.journal.0.borrow_mut();
            let pending: usize = s.unsynced().iter().map(|(_, f, t)| t - f).sum();
            let keep = if pending == 0 { 0 } else { self.rng.below(pending as u64 + 1) as usize };
            match fault {
                // A clean crash between commits.
                0 => {}
                // A short write, or a failed fsync that persisted an unknown prefix.
                1 | 2 => s.persist(keep, None),
                // Power loss during the write: a torn tail, garbage in a later sector.
                _ => {
                    let garbage = self.rng.bytes(64);
                    s.persist(keep, Some(garbage));
                }
            }
        }
        self.trace.push(format!("crash (fault {fault})"));
        self.recover(seed);
    }

    fn recover(&mut self, seed: u64) {
        let (acked, mut disk) = {
            let s = self.journal.0.borrow();
            (s.durable, s.disk.clone())
        };
        // `sluice check` (Verify) sees what start (Repair) sees, and changes nothing.
        let mut untouched = disk.clone();
        let verified = scan_files(&mut MemFiles(&mut untouched), Mode::Verify, |_, _| {});
        if untouched.segments != disk.segments {
            self.fail(seed, "verifying changed the disk".into());
        }
        let mut store = Store::new(0, MAX_PRODUCERS);
        let scanned = scan_files(&mut MemFiles(&mut disk), Mode::Repair, |r, _| store.replay(r));
        let same = match (&verified, &scanned) {
            (Ok(v), Ok(r)) => (v.records, v.torn_bytes, &v.ends) == (r.records, r.torn_bytes, &r.ends),
            (Err(v), Err(r)) => v == r,
            _ => false,
        };
        if !same {
            self.fail(seed, format!("verify and repair disagree: {verified:?} vs {scanned:?}"));
        }
        let tail = match scanned {
            Ok(t) => t,
            Err(e) => self.fail(seed, format!("recovery refused: {e}")),
        };
        // The recovered log is a prefix of the decided records holding every acknowledged one.
        let recovered = tail.records;
        if recovered < acked {
            self.fail(seed, format!("{recovered} records recovered, {acked} were acknowledged"));
        }
        let Some((model, subs)) =
            self.history.iter().find(|(lsn, _, _)| *lsn == recovered).map(|(_, m, s)| (m.clone(), s.clone()))
        else {
            self.fail(
                seed,
                format!("{recovered} records recovered: not the end of any operation (an operation was split)"),
            );
        };
        let mut model = model;
        for m in model.values_mut() {
            m.visible = m.data.len() as u64;
            // Reads and refused appends renewed the TTL in memory only.
            m.last_access = m.logged_access;
        }
        if let Err(why) = Self::compare(&mut store, &model, self.now) {
            self.fail(seed, format!("recovered state: {why}"));
        }
        if store.subscriptions != subs {
            self.fail(seed, "recovered subscriptions differ from the model at the recovered prefix".into());
        }
        // Resume on the recovered log, as the shard does: segments after the
        // newest one with records were never written and are removed.
        let last = tail.ends.iter().rposition(|&e| e > 0).unwrap_or(0);
        let mut disk = disk.clone();
        for no in &tail.segments[last + 1..] {
            disk.segments.remove(no);
        }
        let (active, write_pos) = (tail.segments[last], tail.ends[last] as usize);
        let mut inner = Inner {
            image: disk.segments.clone(),
            disk,
            active,
            write_pos,
            crc: tail.crcs[last],
            synced: (active, write_pos),
            assigned: recovered,
            durable: recovered,
        };
        if write_pos == 0 {
            let before = last.checked_sub(1).map_or((0, 0), |i| (tail.ends[i], tail.crcs[i]));
            let size = inner.image[&active].len() as u64;
            inner.crc = 0;
            let mut frame = Vec::new();
            Record::Seal(Seal { previous: active - 1, len: before.0, crc: before.1, size }).encode(&mut frame);
            inner.push(&frame);
        }
        self.journal = SimJournal(RefCell::new(inner));
        self.store = store;
        self.model = model.clone();
        self.subs = subs.clone();
        self.history = vec![(recovered, model, subs)];
    }
}

fn run(seed: u64, steps: usize, trace: Trace) {
    let mut w = World::new(seed, trace);
    for _ in 0..steps {
        w.step(seed);
    }
    // A final crash after a clean sync loses nothing.
    w.sync();
    let mut before = w.model.clone();
    for m in before.values_mut() {
        // Only logged accesses survive a restart (see `recover`).
        m.last_access = m.logged_access;
    }
    w.recover(seed);
    assert_eq!(w.model, before, "seed {seed}: a clean restart changed the state");
}

#[test]
fn seeded_operations_crashes_and_faults_match_the_model() {
    sim::seeds(600, run);
}

/// The status the edge answers for a refusal the model predicts.
fn status(e: &StoreError) -> Option<u16> {
    match e {
        StoreError::Invalid(_) => Some(400),
        StoreError::Conflict(_) => Some(409),
        StoreError::Trimmed(_) => Some(410),
        StoreError::NotFound(_) => Some(404),
        _ => None,
    }
}
