//! Recovery: the store from the checkpoint, checked against the stream
//! files, then the journal written since replayed on top.
//!
//! Decision table (every refusal names the file and what is wrong):
//!
//! | found                                                  | start (repair)         | `sluice check` |
//! |--------------------------------------------------------|------------------------|----------------|
//! | no checkpoint, journal starts at segment 1              | replay all             | clean          |
//! | no checkpoint, journal segments were deleted            | refuse                 | damaged        |
//! | checkpoint does not decode or its CRC fails             | refuse                 | damaged        |
//! | checkpoint resumes before the journal's first segment   | refuse (stale copy)    | damaged        |
//! | file the checkpoint dooms (deleted stream, old snapshot)| delete                 | clean          |
//! | stream file of a handle created after the checkpoint    | delete (rewritten)     | clean          |
//! | snapshot file newer than the checkpoint                 | delete (rewritten)     | clean          |
//! | stream file missing                                     | refuse                 | damaged        |
//! | stream file longer than the checkpoint records          | truncate (torn flush), not below placed bytes the journal since names | clean |
//! | placed append since the checkpoint (`store::place`)     | read back from its data file, replayed | read back |
//! | placed bytes missing, short or not matching their CRC   | refuse                 | damaged        |
//! | stream file shorter, or a bad last index entry          | refuse                 | damaged        |
//! | snapshot file whose bytes do not match its digest       | refuse                 | damaged        |
//! | after a crash, a stream the journal since the checkpoint does not name | files listed, not checked: damage found at first read | all checked |
//! | `clean-stop` names the checkpoint (see [`clean_stop`])  | files trusted, not listed: doomed ones removed by name, damage found at first read | all checked |
//! | any other file in a streams directory                   | refuse (extra file)    | damaged        |
//! | bundle a stream's extent is in, missing or shorter than its last extent | refuse | damaged |
//! | bundle longer than the checkpoint's extents reach       | keep (extents flushed since: dead) | clean |
//! | bundle no stream's extent is in                         | graveyard (deleted after the next checkpoint) | clean |
//! | own data or index file of a stream the checkpoint has in a bundle | keep (a move into files of its own the crash cut off; written again from the start) | clean |
//! | any other file in the bundles directory                  | refuse (extra file)    | damaged        |
//!
//! After a crash only the streams the journal since the checkpoint names
//! can hold stream-file writes the checkpoint does not record: every flush
//! after it wrote bytes of those records and nothing else (the checkpoint's
//! own flush stored every stream up to the tail it records). The others'
//! files are as after a clean stop, so their lengths, last index entries
//! and snapshot digests are left to the first read, as they are then; the
//! listing still refuses a missing or extra file.
//!
//! `sluice check` also verifies every retained index entry's CRC and that
//! the index pages follow on from each other and end at the stored tail.
//! Entries below a data file's tiered boundary (see [`crate::tiered`]) are
//! not checked: their local pages were dropped once the object store held
//! them, and reads check them against the index as they come back.

use super::checkpoint::{self, Checkpoint, CHECKPOINT};
use super::clean_stop::{self, CheckpointId};
use super::files::{bundle_file, data_name, index_name, parse_bundle_file, FileName, BUNDLES_DIR, STREAMS_DIR};
use super::{BucketInfo, Store};
use crate::core::index::{decode_page, page_of, Header, Page, INDEX_PAGE};
use crate::core::stream::{Blob, StreamState};
use crate::handles::{HandleMap, HandleSet};
use crate::log::marks::{self, LOG_START};
use crate::log::recovery::{self, Mode, RecoveryError, Tail};
use crate::log::{PlacedRecord, Record};
use crate::storage::Storage;
use crate::tuning::DENSE_HANDLES_PER_STREAM;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// A restored shard: its store, and where its journal resumes.
pub struct Restored {
    pub store: Store,
    pub tail: Tail,
    /// How many streams' files were checked (lengths, last records,
    /// snapshot digests); `None` when all were trusted after a clean stop.
    pub checked: Option<usize>,
}

/// Restores shard `shard` from `dir` through `io` (see the module
/// header). In [`Mode::Verify`] nothing is changed.
pub fn restore(
    io: &Storage,
    dir: &Path,
    shard: u32,
    max_producers: usize,
    mode: Mode,
) -> Result<Restored, RecoveryError> {
    let path = dir.join(CHECKPOINT);
    let mut store = Store::new(shard, max_producers);
    let (ck, id) = match io.read_file(&path) {
        Ok(b) => {
            let ck = store
                .adopt(|add| checkpoint::decode(&b, max_producers, add))
                .and_then(|decoded| decoded)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let id = CheckpointId::of(ck.generation, &b);
            (Some(ck), Some(id))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, None),
        Err(e) => return Err(format!("{}: {e}", path.display()).into()),
    };
    // After a clean stop the stream files are what the checkpoint records
    // (see `clean_stop`); `sluice check` trusts nothing.
    let trusted = mode == Mode::Repair && id.is_some() && clean_stop::read(io, dir) == id;
    let start = marks::read(dir, LOG_START)?.unwrap_or(1);
    let journal = match &ck {
        None if start > 1 => {
            return Err(format!(
                "{}: missing, but the journal before segment {start} was deleted after a checkpoint",
                path.display()
            )
            .into())
        }
        None => (0, 0),
        Some(c) if c.journal.0 < start => {
            return Err(format!(
                "{}: resumes in journal segment {}, before the journal's first segment {start}: a stale copy",
                path.display(),
                c.journal.0
            )
            .into())
        }
        Some(c) => c.journal,
    };
    let (generation, next_handle, doomed) = match ck {
        None => (0, 0, Vec::new()),
        Some(Checkpoint { generation, next_handle, home_buckets, doomed, subscriptions, .. }) => {
            store.next_handle = next_handle;
            store.generation = generation;
            store.home_buckets = home_buckets.into_iter().collect();
            store.subscriptions = subscriptions.into_iter().collect();
            (generation, next_handle, doomed)
        }
    };
    let streams = dir.join(STREAMS_DIR);
    let tiered: HashMap<u64, u64> = crate::tiered::load(dir, |h| streams.join(data_name(h)))
        .map_err(|e| format!("{}: {e}", dir.join(crate::tiered::MARKS).display()))?
        .into_iter()
        .map(|m| (m.handle, m.boundary))
        .collect();
    check_bundles(io, dir, &mut store, &doomed)?;
    let mut repairs = DataRepairs::new();
    let checked = if trusted {
        // The streams directory is not listed (two names per stream): a
        // missing or damaged file is found by the first read of its stream,
        // by `sluice check` and by any start after a crash.
        remove_doomed(io, &streams, &doomed)?;
        None
    } else {
        // After a crash, only what the journal since the checkpoint names.
        let named = match mode {
            Mode::Repair if !store.streams.is_empty() => Some(named_since(dir, journal)?),
            _ => None,
        };
        let check = Check { generation, next_handle, tiered: &tiered, mode, named: named.as_ref() };
        Some(check_files(io, &streams, &store, &doomed, &check, &mut repairs)?)
    };
    let mut placed = Placed { io, streams: &streams, ends: HashMap::new(), failed: None };
    let tail = recovery::scan(dir, mode, |r, at| {
        if (at.segment, at.frame) < journal {
            return;
        }
        match r {
            Record::Placed(p) => {
                let tail = store.state_of(p.append.handle).map(|s| s.tail() - s.body.base);
                if let Some(bytes) = placed.read(&p, tail) {
                    store.replay(Record::Append(p.with_data(&bytes)));
                }
            }
            r => store.replay(r),
        }
    })?;
    if let Some(e) = placed.failed.take() {
        return Err(e.into());
    }
    placed.repair(repairs)?;
    store.placed_since = placed.ends.into_iter().collect();
    store.journal_start = journal.0.max(start);
    for (b, at) in &store.home_buckets {
        store.buckets.insert(b.clone(), BucketInfo { created_ms: *at, deleting: false });
    }
    Ok(Restored { store, tail, checked })
}

/// The handles the journal's records from `journal` on name, read from
/// there without changing anything (the scan after the file checks reads
/// the whole journal, decides what a frame that does not read means, and
/// repairs what needs it: a start that goes on replays only records read
/// here).
fn named_since(dir: &Path, journal: (u32, u64)) -> Result<HandleSet, RecoveryError> {
    let mut named = HandleSet::default();
    recovery::records_from(dir, journal, |r| named.extend(r.handle()))?;
    Ok(named)
}

/// Removes the files the checkpoint dooms, by name (after a clean stop, its
/// clean-up may have removed them already).
fn remove_doomed(io: &Storage, dir: &Path, doomed: &[String]) -> Result<(), String> {
    for name in doomed {
        let path = dir.join(name);
        match io.unlink(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("{}: cannot remove: {e}", path.display()))
            }
            _ => {}
        }
    }
    Ok(())
}

fn remove(io: &Storage, path: &Path, mode: Mode) -> Result<(), String> {
    match mode {
        Mode::Verify => Ok(()),
        Mode::Repair => io.unlink(path).map_err(|e| format!("{}: cannot remove: {e}", path.display())),
    }
}

/// Lists the shard's bundles directory (a few files, whatever the
/// streams): every bundle a stream's extent is in must be there and reach
/// past its last extent (a longer one holds extents flushed after the
/// checkpoint: dead, never cut back); a bundle no stream is in goes to
/// the graveyard at the next capture ([`super::bundles::Bundles::found`]).
/// Extents' bytes are checked as the streams' files are (first read, a
/// start after a crash for the streams the journal names, `sluice check`).
fn check_bundles(io: &Storage, dir: &Path, store: &mut Store, doomed: &[String]) -> Result<(), String> {
    let bundles = dir.join(BUNDLES_DIR);
    let mut found = Vec::new();
    let listed = io.each_name(&bundles, |name| match parse_bundle_file(name) {
        Some(no) => {
            found.push(no);
            Ok(())
        }
        None => Err(format!("{}: not a bundle (an extra file)", bundles.join(name).display())),
    });
    match listed {
        Ok(listed) => listed?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", bundles.display())),
    }
    let in_use: Vec<(u32, u64)> = store.streams.bundles.in_use().collect();
    for &(no, end) in &in_use {
        let path = bundles.join(bundle_file(no));
        if !found.contains(&no) {
            return Err(format!("{}: missing (the checkpoint records extents in it)", path.display()));
        }
        check_len(io, &path, end)?;
    }
    let doomed: Vec<Option<FileName>> = doomed.iter().map(|d| FileName::parse(d)).collect();
    for no in found.into_iter().filter(|no| !in_use.iter().any(|(n, _)| n == no)) {
        if !doomed.contains(&Some(FileName::Bundle(no))) {
            store.streams.bundles.found(no);
        }
    }
    Ok(())
}

/// Checks one stream file's length against what the checkpoint records:
/// shorter is damage, longer is a flush the crash cut off. Returns whether
/// it is longer (the caller cuts it back).
fn check_len(io: &Storage, path: &Path, need: u64) -> Result<bool, String> {
    let len = io.len(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if len < need {
        return Err(format!("{}: holds {len} bytes, the checkpoint records {need}: truncated", path.display()));
    }
    Ok(len > need)
}

fn cut(io: &Storage, path: &Path, len: u64) -> Result<(), String> {
    io.cut(path, len).map_err(|e| format!("{}: cannot truncate: {e}", path.display()))
}

/// The data files recovery cuts back to what the checkpoint records (a
/// flush the crash cut off; `Some(len)`) or removes (of a stream created
/// after it; `None`), by handle: done once the journal is replayed, since a
/// placed append since the checkpoint is read back from its data file
/// ([`Placed`]), and kept there until a checkpoint records it: a second
/// crash before then replays it again.
type DataRepairs = Vec<(u64, Option<u64>)>;

/// Placed appends the journal since the checkpoint names, read back from
/// their data files during the replay; where their bytes end, by handle.
struct Placed<'a> {
    io: &'a Storage,
    streams: &'a Path,
    ends: HashMap<u64, u64>,
    /// The first placed append that did not read back whole and matching.
    failed: Option<String>,
}

impl Placed<'_> {
    /// The bytes `p` names, checked against its CRC, for a stream whose
    /// own data file ends at `tail` so far (None: no such stream: the
    /// record changes nothing, as replay skips it). None once one failed.
    fn read(&mut self, p: &PlacedRecord, tail: Option<u64>) -> Option<Vec<u8>> {
        if self.failed.is_some() {
            return None;
        }
        let path = self.streams.join(data_name(p.append.handle));
        let t = tail?;
        if t != p.at {
            self.failed = Some(format!(
                "{}: the journal places bytes at {}, where the stream's data ends at {t}: damaged",
                path.display(),
                p.at
            ));
            return None;
        }
        let read = Reader::open(self.io, &path, 0).and_then(|r| r.at(p.at, p.len));
        match read {
            Ok(b) if crc32c::crc32c(&b) == p.crc => {
                let end = self.ends.entry(p.append.handle).or_default();
                *end = (*end).max(p.at + p.len);
                Some(b)
            }
            Ok(_) => {
                self.failed = Some(format!(
                    "{}: bytes {}..{} placed by the journal do not match their checksum: damaged, zeroed or replaced",
                    path.display(),
                    p.at,
                    p.at + p.len
                ));
                None
            }
            Err(e) => {
                self.failed = Some(format!("{e} (placed by the journal)"));
                None
            }
        }
    }

    /// Cuts back or removes the data files `repairs` names, keeping the
    /// placed bytes read back.
    fn repair(&self, repairs: DataRepairs) -> Result<(), String> {
        for (handle, len) in repairs {
            let path = self.streams.join(data_name(handle));
            match (len, self.ends.get(&handle)) {
                (None, None) => self.io.unlink(&path).map_err(|e| format!("{}: cannot remove: {e}", path.display()))?,
                (len, end) => cut(self.io, &path, len.unwrap_or(0).max(end.copied().unwrap_or(0)))?,
            }
        }
        Ok(())
    }
}

/// How the stream files are checked.
struct Check<'a> {
    /// The checkpoint's generation and next handle.
    generation: u64,
    next_handle: u64,
    /// The data files' tiered boundaries, by handle.
    tiered: &'a HashMap<u64, u64>,
    mode: Mode,
    /// After a crash, the streams whose files are checked; every stream's
    /// when `None`.
    named: Option<&'a HandleSet>,
}

/// A stream's files found in its directory, one bit each, and whether the
/// checkpoint holds the stream.
const DATA: u8 = 1;
const INDEX: u8 = 2;
const SNAPSHOT: u8 = 4;
const KNOWN: u8 = 8;

/// The files found of every stream in the checkpoint, by handle. Handles
/// are given out in sequence, so while most are of streams the checkpoint
/// holds, a byte per handle is small and its lookups stay in the CPU cache,
/// where a hash table of a million streams missed on nearly every one of
/// the listing's two million names (a third of a start after a crash).
enum Found {
    /// Indexed by handle, up to the checkpoint's next handle.
    Dense(Vec<u8>),
    /// The checkpoint's streams only (most handles were deleted).
    Sparse(HandleMap<u8>),
}

impl Found {
    fn new(store: &Store, next_handle: u64) -> Found {
        let n = store.streams.len() as u64;
        let mut found = match next_handle <= n.saturating_mul(DENSE_HANDLES_PER_STREAM) {
            true => Found::Dense(vec![0; next_handle as usize]),
            false => Found::Sparse(HandleMap::with_capacity_and_hasher(n as usize, Default::default())),
        };
        for e in store.streams.values() {
            assert!(e.state.handle < next_handle, "handle {} at or past the next {next_handle}", e.state.handle);
            match &mut found {
                Found::Dense(v) => v[e.state.handle as usize] = KNOWN,
                Found::Sparse(m) => _ = m.insert(e.state.handle, KNOWN),
            }
        }
        found
    }

    /// The bits of a stream the checkpoint holds.
    fn get_mut(&mut self, handle: u64) -> Option<&mut u8> {
        let bits = match self {
            Found::Dense(v) => v.get_mut(handle as usize),
            Found::Sparse(m) => m.get_mut(&handle),
        };
        bits.filter(|b| **b & KNOWN != 0)
    }
}

/// Lists the streams directory and checks the files found against the
/// checkpoint (see the decision table); returns how many streams' files
/// were checked beyond being found.
fn check_files(
    io: &Storage,
    dir: &Path,
    store: &Store,
    doomed: &[String],
    check: &Check<'_>,
    repairs: &mut DataRepairs,
) -> Result<usize, String> {
    let &Check { generation, next_handle, tiered, mode, named } = check;
    let checks = |handle: u64| named.is_none_or(|n| n.contains(&handle));
    // Every stream of the checkpoint, and which of its files were found.
    let mut found = Found::new(store, next_handle);
    let doomed: HashSet<&str> = doomed.iter().map(String::as_str).collect();
    let listed = io.each_name(dir, |name| {
        let path = || dir.join(name);
        if !doomed.is_empty() && doomed.contains(name) {
            return remove(io, &path(), mode);
        }
        let Some((file, handle)) = FileName::parse(name).and_then(|f| Some((f, f.stream()?))) else {
            return Err(format!("{}: not a stream file (an extra file)", path().display()));
        };
        let Some(found) = found.get_mut(handle) else {
            if handle >= next_handle {
                if let (FileName::Data(h), Mode::Repair) = (file, mode) {
                    repairs.push((h, None));
                    return Ok(());
                }
                return remove(io, &path(), mode);
            }
            return Err(format!("{}: belongs to no stream in the checkpoint (an extra file)", path().display()));
        };
        // After a crash a stream the journal does not name is only found
        // (its snapshot's name is still compared with the checkpoint's).
        let checked = checks(handle);
        *found |= match file {
            FileName::Snapshot(_, g) if g > generation => return remove(io, &path(), mode),
            FileName::Data(_) | FileName::Index(_) if !checked => file_bit(file),
            _ => {
                let s = store.state_of(handle).expect("a stream the checkpoint holds");
                check_file(io, &path(), file, s, checked, mode, repairs)?
            }
        };
        Ok(())
    });
    match listed {
        Ok(checked) => checked?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    let mut verified = 0;
    for s in store.streams.values().map(|e| &e.state) {
        let found = *found.get_mut(s.handle).expect("every stream of the checkpoint is known");
        let b = &s.body;
        let own = [(DATA, FileName::Data(s.handle)), (INDEX, FileName::Index(s.handle))];
        let own = b.has_own_files().then_some(own);
        let snapshot = match s.snapshot.as_ref().map(|x| &x.blob) {
            Some(Blob::Stored(g)) => Some((SNAPSHOT, FileName::Snapshot(s.handle, *g))),
            _ => None,
        };
        let mut need = own.into_iter().flatten().chain(snapshot);
        if let Some((_, missing)) = need.find(|(bit, _)| found & bit == 0) {
            return Err(format!("{}: missing (the checkpoint records it)", dir.join(missing.to_string()).display()));
        }
        if checks(s.handle) {
            verified += 1;
            if b.stored > b.base {
                verify_records(io, dir, s, tiered.get(&s.handle).copied().unwrap_or(0), mode)?;
            }
        }
    }
    Ok(verified)
}

/// The bit of `file`'s kind.
fn file_bit(file: FileName) -> u8 {
    match file {
        FileName::Data(_) => DATA,
        FileName::Index(_) => INDEX,
        FileName::Snapshot(..) => SNAPSHOT,
        FileName::Bundle(_) => unreachable!("a bundle is not in a streams directory"),
    }
}

/// Checks one file of stream `s` found at `path` (see the decision table):
/// a data or index file's length (a data file to cut back goes to
/// `repairs`), a snapshot's name and, when `checked`, its digest. Returns
/// the file's bit.
fn check_file(
    io: &Storage,
    path: &Path,
    file: FileName,
    s: &StreamState,
    checked: bool,
    mode: Mode,
    repairs: &mut DataRepairs,
) -> Result<u8, String> {
    let b = &s.body;
    let repair = mode == Mode::Repair;
    match file {
        // Left by a flush that moved a bundled stream into files of its
        // own before a crash: written again from the start when it moves.
        FileName::Data(_) | FileName::Index(_) if b.bundle.is_some() => {}
        FileName::Bundle(_) => unreachable!("a bundle is not in a streams directory"),
        FileName::Data(h) => {
            if check_len(io, path, b.stored - b.base)? && repair {
                repairs.push((h, Some(b.stored - b.base)));
            }
        }
        FileName::Index(_) => {
            if check_len(io, path, b.index_len)? && repair {
                cut(io, path, b.index_len)?;
            }
        }
        FileName::Snapshot(_, g) => match &s.snapshot {
            Some(snap) if snap.blob == Blob::Stored(g) => {
                if checked {
                    let body = io.read_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
                    if !crate::core::snapshot::holds(snap, &body) {
                        return Err(format!(
                            "{}: does not match its digest: damaged, zeroed or replaced",
                            path.display()
                        ));
                    }
                }
            }
            _ => return Err(format!("{}: a snapshot the checkpoint does not name (an extra file)", path.display())),
        },
    }
    Ok(file_bit(file))
}

/// A stream file (or a stream's part of a bundle, from `origin` on), read
/// by position, errors naming it.
struct Reader<'a> {
    io: &'a Storage,
    path: &'a Path,
    f: std::fs::File,
    origin: u64,
}

impl<'a> Reader<'a> {
    fn open(io: &'a Storage, path: &'a Path, origin: u64) -> Result<Reader<'a>, String> {
        let f = io.open_blocking(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Reader { io, path, f, origin })
    }

    fn at(&self, pos: u64, len: u64) -> Result<Vec<u8>, String> {
        let mut buf = vec![0; len as usize];
        self.io
            .read_exact_at(&self.f, &mut buf, self.origin + pos)
            .map_err(|e| format!("{}: {len} bytes at {pos}: {e}", self.path.display()))?;
        Ok(buf)
    }

    /// Index page `p` of an index `len` bytes long, decoded.
    fn page(&self, p: u64, len: u64) -> Result<Page, String> {
        let pos = p * INDEX_PAGE;
        decode_page(&self.at(pos, (len - pos).min(INDEX_PAGE))?)
            .map_err(|why| format!("{}: index page {p}: {why}", self.path.display()))
    }
}

/// Checks a stream's stored records against its index: at start, the last
/// page and its last entry's CRC; when verifying, every page (each starts
/// where the one before ends) and every retained entry's CRC. Pages before
/// the one holding the first retained record may be hole-punched (zeros);
/// data file bytes below `tiered` are in the object store (not checked).
fn verify_records(io: &Storage, dir: &Path, s: &StreamState, tiered: u64, mode: Mode) -> Result<(), String> {
    let b = &s.body;
    let (data, index, origins) = match b.bundle {
        Some(at) => {
            let bundle = dir.join(FileName::Bundle(at.no.get()).to_string());
            (bundle.clone(), bundle, (at.data_pos(b.index_len), at.index_pos()))
        }
        None => (dir.join(data_name(s.handle)), dir.join(index_name(s.handle)), (0, 0)),
    };
    let (data, idx) = (Reader::open(io, &data, origins.0)?, Reader::open(io, &index, origins.1)?);
    let pages = page_of(b.index_len - 1) + 1;
    // Bytes before the retention may be hole-punched, and those below the
    // tiered boundary are remote: their CRCs are not checked.
    let retained = s.retained.max(b.base).max(b.base + tiered);
    let first = match mode {
        Mode::Repair => pages - 1,
        Mode::Verify => 0,
    };
    let mut expected = (first == 0).then_some(Header { offset: b.base, record: b.base_record });
    let mut punched = false;
    for p in first..pages {
        let page = idx.page(p, b.index_len)?;
        let here = format!("{}: index page {p}", index.display());
        let h = page.header;
        if page.entries.is_empty() {
            // Punched pages (zeros) come first, only after retention moved,
            // and never include the last page.
            let prefix = p == 0 || (punched && expected.is_none());
            if !prefix || h != Header::default() || p + 1 == pages || s.first_message <= b.base_record {
                return Err(format!("{here} holds no entries: damaged or zeroed"));
            }
            (punched, expected) = (true, None);
            continue;
        }
        match expected {
            Some(e) if e != h => {
                return Err(format!(
                    "{here} starts at record {} offset {}, not record {} offset {}: damaged",
                    h.record, h.offset, e.record, e.offset
                ))
            }
            None if h.record < b.base_record || h.offset < b.base || (punched && h.record > s.first_message) => {
                return Err(format!("{here} starts at record {} offset {}: damaged", h.record, h.offset))
            }
            _ => {}
        }
        if page.end() > b.stored {
            return Err(format!("{here} ends at {}, past the stored tail {}: damaged", page.end(), b.stored));
        }
        let checked = match mode {
            Mode::Repair => &page.entries[page.entries.len() - 1..],
            Mode::Verify => &page.entries[..],
        };
        for e in checked.iter().filter(|e| page.start_at(e.first) >= retained) {
            let (start, end) = (page.start_at(e.first), page.ends[e.first + e.count - 1]);
            if crc32c::crc32c(&data.at(start - b.base, end - start)?) != e.crc {
                return Err(format!(
                    "{}: bytes {start}..{end} do not match their index checksum: damaged, zeroed or replaced",
                    data.path.display()
                ));
            }
        }
        expected = Some(Header { offset: page.end(), record: page.end_record() });
    }
    let end = expected.expect("the last page holds entries");
    if (end.offset, end.record) != (b.stored, b.stored_records) {
        return Err(format!(
            "{}: records end at record {} offset {}, the checkpoint records {} {}",
            index.display(),
            end.record,
            end.offset,
            b.stored_records,
            b.stored
        ));
    }
    Ok(())
}
