//! Group commit: records are encoded into a pending buffer as they are
//! decided; one flusher task writes everything pending durably (segments are
//! `O_DIRECT`, and `O_DSYNC` with `--fsync always`: the write is the sync;
//! [`super::blocks`] pads each commit to whole blocks), then acknowledges
//! every record in that batch. Records that arrive while a flush
//! is in flight ride the next one, so the sync cost is shared by all of them.
//!
//! A failed write or sync is fail-stop: the page cache state after an fsync
//! error is unknown, so the log refuses every later write until restart, and
//! recovery decides from what is really on disk.

use super::blocks::{Blocks, Chunk};
use super::marks::{self, Head, LOG_START};
use super::record::{Encoded, Record, Seal, SEAL_FRAME};
use super::segment::{create_segment, whole_blocks, Segment};
use crate::signal::Signal;
use crate::stats::{DiskUsage, LogStats};
use crate::tuning::{JOURNAL_BLOCK, SPARE_COMMIT_BUFFER};
use glommio::io::DmaFile;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;

/// When a commit is acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncMode {
    /// After a durable write (`O_DSYNC`, as write + fdatasync): survives power loss. The default.
    Always,
    /// After write only: survives a process crash, not a kernel crash or power loss.
    Never,
}

#[derive(Clone, Debug)]
pub struct LogConfig {
    pub dir: PathBuf,
    pub segment_size: u64,
    pub fsync: FsyncMode,
}

impl LogConfig {
    /// Whether segments are opened for durable (`O_DSYNC`) writes.
    pub fn dsync(&self) -> bool {
        self.fsync == FsyncMode::Always
    }
}

pub use sluice_core::error::LogError;

/// What appending a record assigned it.
#[derive(Clone, Copy, Debug)]
pub struct Appended {
    /// Commit sequence number to wait for with [`Log::durable`].
    pub lsn: u64,
}

struct Inner {
    cfg: LogConfig,
    active: Segment,
    /// Next free position in `active`.
    write_pos: u64,
    /// Where the newest appended record ends (segment, position); where
    /// the log started when none was appended yet. A seal a roll wrote
    /// after it is not counted: with no record behind it, nothing makes it
    /// durable, and a restart resumes writing at the end of the records.
    records_end: (u32, u64),
    /// CRC32C of `active`'s bytes before `write_pos`, for its seal.
    crc: u32,
    /// The segment `log-head` durably names.
    head: u32,
    head_file: Rc<Head>,
    /// Bytes not yet handed to the flusher, starting at `buf_pos` in `active`.
    buf: Vec<u8>,
    buf_pos: u64,
    /// A written commit's buffer, emptied, for the next one (no fresh
    /// memory to fault in per commit).
    spare: Vec<u8>,
    /// Chunks of segments already rolled away from.
    sealed: Vec<Chunk>,
    segments: BTreeMap<u32, Rc<DmaFile>>,
    next: Option<Segment>,
    preparing: bool,
    assigned: u64,
    durable: u64,
    /// Bytes of records appended since start.
    appended_bytes: u64,
    failed: Option<String>,
    /// Why the last preallocation failed, reported to the next writer.
    prepare_error: Option<LogError>,
    /// [`Log::stop`] was called: the flusher exits once everything appended is written.
    stopped: bool,
    /// The flusher task has not returned.
    flushing: bool,
}

/// A shard's log handle (cheap to clone).
#[derive(Clone)]
pub struct Log {
    inner: Rc<RefCell<Inner>>,
    /// Notified when there is something to flush.
    work: Rc<Signal>,
    /// Notified when the durable mark moves or the log fails.
    done: Rc<Signal>,
    /// Notified when a segment's preallocation ends (ready or failed), and
    /// when the flusher exits.
    ready: Rc<Signal>,
    /// Appends, commit sizes and sync latency, for the metrics endpoint.
    pub stats: Rc<LogStats>,
}

/// Where a log resumes: what recovery found.
pub struct Resume {
    pub active: Segment,
    /// Where the records in `active` end.
    pub write_pos: u64,
    /// CRC32C of `active`'s records.
    pub crc: u32,
    /// Earlier segments still readable.
    pub older: Vec<Segment>,
    /// A preallocated next segment.
    pub next: Option<Segment>,
    /// The segment `log-head` names (0 when none was written yet).
    pub head: u32,
    pub head_file: Head,
    /// The seal to write first when `active` holds no record yet.
    pub seal: Option<Seal>,
}

impl Log {
    /// Starts the log where `r` says, with earlier segments readable.
    pub fn start(mut cfg: LogConfig, r: Resume) -> Log {
        cfg.segment_size = whole_blocks(cfg.segment_size);
        let mut segments = BTreeMap::new();
        for s in r.older.iter().chain(std::iter::once(&r.active)) {
            segments.insert(s.no, s.file.clone());
        }
        let records_end = (r.active.no, r.write_pos);
        let mut inner = Inner {
            cfg,
            active: r.active,
            write_pos: r.write_pos,
            records_end,
            crc: r.crc,
            head: r.head,
            head_file: Rc::new(r.head_file),
            buf: Vec::with_capacity(1 << 16),
            buf_pos: r.write_pos,
            spare: Vec::new(),
            sealed: Vec::new(),
            segments,
            next: r.next,
            preparing: false,
            assigned: 0,
            durable: 0,
            appended_bytes: 0,
            failed: None,
            stopped: false,
            flushing: true,
            prepare_error: None,
        };
        if let Some(seal) = r.seal {
            assert_eq!(inner.write_pos, 0, "a seal goes first in its segment");
            inner.push(&Record::Seal(seal));
        }
        let log = Log {
            inner: Rc::new(RefCell::new(inner)),
            work: Rc::new(Signal::default()),
            done: Rc::new(Signal::default()),
            ready: Rc::new(Signal::default()),
            stats: Rc::new(LogStats::default()),
        };
        crate::tasks::spawn(log.clone().flusher()).detach();
        log.prepare_next();
        log
    }

    /// Waits until `len` more bytes fit in the active segment.
    /// Call right before [`Log::append`], with no await in between.
    pub async fn reserve(&self, len: usize) -> Result<(), LogError> {
        enum Step {
            Fail(LogError),
            Big(PathBuf, u32),
            Prepare,
            Wait,
        }
        loop {
            let seen = self.ready.generation();
            let step = {
                let mut s = self.inner.borrow_mut();
                if let Some(f) = &s.failed {
                    return Err(LogError::Failed(f.clone()));
                }
                if s.write_pos + len as u64 <= s.room_end() {
                    return Ok(());
                }
                if s.preparing {
                    Step::Wait
                } else if let Some(e) = s.prepare_error.take() {
                    // Report it once; the next reserve tries to preallocate again.
                    Step::Fail(e)
                } else if (len + SEAL_FRAME) as u64 > s.cfg.segment_size {
                    // Bigger than a standard segment: replace the prepared one
                    // with a segment that fits, keeping numbers in order.
                    // `preparing` stays set until it is active, so no other
                    // reserve prepares (or rolls into) the same segment number
                    // meanwhile: two files with one number overwrite each other.
                    s.next = None;
                    s.preparing = true;
                    Step::Big(s.cfg.dir.clone(), s.active.no + 1)
                } else {
                    if let Some(next) = s.next.take() {
                        s.roll(next);
                    }
                    Step::Prepare
                }
            };
            match step {
                Step::Fail(e) => {
                    self.prepare_next();
                    return Err(e);
                }
                Step::Big(dir, no) => {
                    let dsync = self.inner.borrow().cfg.dsync();
                    let r = create_segment(&dir, no, whole_blocks((len + SEAL_FRAME) as u64), dsync).await;
                    let mut s = self.inner.borrow_mut();
                    s.preparing = false;
                    match r {
                        Ok(seg) => s.roll(seg),
                        Err(e) => {
                            drop(s);
                            self.ready.notify();
                            self.prepare_next();
                            return Err(io_to_log(e));
                        }
                    }
                    drop(s);
                    self.ready.notify();
                    self.prepare_next();
                }
                Step::Prepare => self.prepare_next(),
                Step::Wait => self.ready.changed(seen).await,
            }
        }
    }

    /// Encodes `record` at the tail. Panics if [`Log::reserve`] was not called.
    pub fn append(&self, record: &Record<'_>) -> Appended {
        let mut s = self.inner.borrow_mut();
        assert!(!s.stopped, "log append after stop");
        let written = s.push(record);
        s.records_end = (s.active.no, s.write_pos);
        s.assigned += 1;
        // A placed append's bytes count as if the journal held them: the
        // flush and checkpoint cadence, the disk room and the memory a
        // replay after a crash reads them back into follow them.
        let (data, placed) = match record {
            Record::Append(a) => (Some(a.data.len() as u64), 0),
            Record::Placed(p) => (Some(p.len), p.len),
            _ => (None, 0),
        };
        s.appended_bytes += written as u64 + placed;
        let out = Appended { lsn: s.assigned };
        drop(s);
        if let Some(len) = data {
            self.stats.appends.set(self.stats.appends.get() + 1);
            self.stats.append_bytes.set(self.stats.append_bytes.get() + len);
        }
        if placed > 0 {
            self.stats.placed.set(self.stats.placed.get() + 1);
        }
        self.work.notify();
        out
    }

    /// The commit number of the newest appended record.
    pub fn assigned(&self) -> u64 {
        self.inner.borrow().assigned
    }

    /// Where the appended records end: (segment, byte position). Everything
    /// appended so far lies before it, and every record appended later
    /// after it, even across a restart (which resumes writing at the end of
    /// the records: a segment the log rolled into but wrote no record to
    /// may be gone).
    pub fn position(&self) -> (u32, u64) {
        self.inner.borrow().records_end
    }

    /// Whether a commit is acknowledged once durable (`--fsync always`).
    pub fn dsync(&self) -> bool {
        self.inner.borrow().cfg.dsync()
    }

    /// Bytes of records appended since start (seals not counted), and the
    /// bytes placed appends name.
    pub fn appended_bytes(&self) -> u64 {
        self.inner.borrow().appended_bytes
    }

    /// The configured segment size.
    pub fn segment_size(&self) -> u64 {
        self.inner.borrow().cfg.segment_size
    }

    /// Whether the log stopped taking writes (a write or sync failed).
    pub fn is_failed(&self) -> bool {
        self.inner.borrow().failed.is_some()
    }

    /// The commit number of the newest durable record.
    pub fn durable_mark(&self) -> u64 {
        self.inner.borrow().durable
    }

    /// Number of the segment being written.
    pub fn active_segment(&self) -> u32 {
        self.inner.borrow().active.no
    }

    /// Deletes sealed segments numbered below `no`; returns how many.
    /// Idempotent: a segment leaves the log only once its file is gone, so
    /// a call that failed part-way is finished by the next.
    pub async fn reclaim_below(&self, no: u32) -> std::io::Result<usize> {
        let (dir, old) = {
            let s = self.inner.borrow();
            let active = s.active.no;
            // Never past log-head: the start must not name a segment the head does not cover.
            let old: Vec<u32> = s.segments.range(..no.min(active).min(s.head)).map(|(n, _)| *n).collect();
            (s.cfg.dir.clone(), old)
        };
        let Some(&newest) = old.last() else { return Ok(0) };
        // Record the new start first: recovery then treats leftovers as reclaimed.
        marks::write(&dir, LOG_START, newest + 1).await?;
        for n in &old {
            match std::fs::remove_file(super::segment::segment_path(&dir, *n)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => self.inner.borrow_mut().segments.remove(n),
            };
        }
        crate::storage::Storage::Real.sync_dir(&dir).await?;
        Ok(old.len())
    }

    /// Segment space by use; segments numbered below `keep_from` count as
    /// reclaimable. Sizes of sealed segments come from the file system.
    pub fn disk_usage(&self, keep_from: u32) -> DiskUsage {
        let s = self.inner.borrow();
        let mut u = DiskUsage::default();
        for &no in s.segments.keys().filter(|&&no| no < s.active.no) {
            let size = std::fs::metadata(super::segment::segment_path(&s.cfg.dir, no)).map_or(0, |m| m.len());
            if no < keep_from {
                u.reclaimable += size;
            } else {
                u.live += size;
            }
        }
        u.live += s.write_pos;
        u.preallocated = s.active.size - s.write_pos + s.next.as_ref().map_or(0, |n| n.size);
        u
    }

    /// Waits until commit `lsn` is durable (per the fsync mode).
    pub async fn durable(&self, lsn: u64) -> Result<(), LogError> {
        loop {
            let seen = self.done.generation();
            {
                let s = self.inner.borrow();
                assert!(lsn <= s.assigned, "waiting for commit {lsn}, never assigned (newest {})", s.assigned);
                if s.durable >= lsn {
                    return Ok(());
                }
                if let Some(f) = &s.failed {
                    return Err(LogError::Failed(f.clone()));
                }
            }
            self.done.changed(seen).await;
        }
    }

    fn prepare_next(&self) {
        let mut s = self.inner.borrow_mut();
        if s.preparing || s.next.is_some() || s.failed.is_some() || s.stopped {
            return;
        }
        s.preparing = true;
        let (dir, no, size, dsync) = (s.cfg.dir.clone(), s.active.no + 1, s.cfg.segment_size, s.cfg.dsync());
        drop(s);
        let log = self.clone();
        crate::tasks::spawn(async move {
            let r = create_segment(&dir, no, size, dsync).await;
            let mut s = log.inner.borrow_mut();
            s.preparing = false;
            match r {
                Ok(seg) => s.next = Some(seg),
                Err(e) => s.prepare_error = Some(io_to_log(e)),
            }
            drop(s);
            log.ready.notify();
        })
        .detach();
    }

    /// Ends the log's tasks once everything appended is written and synced,
    /// so its files close when the last handle is dropped and nothing more
    /// is written to its directory (a shard closed and reopened in one
    /// process). Nothing may be appended after.
    pub async fn stop(&self) {
        self.inner.borrow_mut().stopped = true;
        self.work.notify();
        loop {
            let seen = self.ready.generation();
            let busy = {
                let s = self.inner.borrow();
                s.flushing || s.preparing
            };
            if !busy {
                return;
            }
            self.ready.changed(seen).await;
        }
    }

    async fn flusher(self) {
        self.commit().await;
        self.inner.borrow_mut().flushing = false;
        self.ready.notify();
    }

    /// Writes, syncs and acknowledges group commits until the log fails or stops.
    async fn commit(&self) {
        let mut blocks = Blocks::default();
        loop {
            let seen = self.work.generation();
            let (chunks, lsn, mode) = {
                let mut s = self.inner.borrow_mut();
                if s.failed.is_some() {
                    return;
                }
                let mut chunks = std::mem::take(&mut s.sealed);
                if !s.buf.is_empty() {
                    let fresh = std::mem::take(&mut s.spare);
                    let bytes = std::mem::replace(&mut s.buf, fresh);
                    let pos = s.buf_pos;
                    s.buf_pos += bytes.len() as u64;
                    chunks.push(Chunk { no: s.active.no, file: s.active.file.clone(), pos, bytes });
                }
                (chunks, s.assigned, s.cfg.fsync)
            };
            let records = lsn - self.inner.borrow().durable;
            let Some(newest) = chunks.last().map(|c| c.no) else {
                if self.inner.borrow().stopped {
                    // Its clone of the log, and so the segments' descriptors, go with it.
                    return;
                }
                self.work.changed(seen).await;
                continue;
            };
            let (head_file, head) = {
                let s = self.inner.borrow();
                (s.head_file.clone(), s.head)
            };
            let mut written = write_and_sync(&mut blocks, &chunks, mode).await;
            self.keep_spare(chunks);
            if let Ok(Some(took)) = written {
                self.stats.fsync_seconds.observe(took.as_secs_f64());
            }
            if written.is_ok() && newest > head {
                // The first commit into a segment moves log-head before it is acknowledged.
                written = head_file.write(newest).await.map(|()| None);
                if written.is_ok() {
                    self.inner.borrow_mut().head = newest;
                }
            }
            if let Err(e) = written {
                let dir = self.inner.borrow().cfg.dir.clone();
                tracing::error!(log = %dir.display(), error = %e, "fail-stop: the log takes no more writes until restart");
                self.inner.borrow_mut().failed = Some(format!("log write failed: {e}"));
                self.done.notify();
                self.ready.notify();
                return;
            }
            self.stats.group_commit_records.observe(records as f64);
            let mut s = self.inner.borrow_mut();
            assert!(s.durable <= lsn && lsn <= s.assigned, "durable mark must move forward, within assigned");
            s.durable = lsn;
            drop(s);
            self.done.notify();
        }
    }

    /// Keeps the largest written buffer (up to [`SPARE_COMMIT_BUFFER`]) for the next commit.
    fn keep_spare(&self, chunks: Vec<Chunk>) {
        let Some(mut bytes) = chunks.into_iter().map(|c| c.bytes).max_by_key(Vec::capacity) else { return };
        let mut s = self.inner.borrow_mut();
        if bytes.capacity() <= SPARE_COMMIT_BUFFER && bytes.capacity() > s.spare.capacity() {
            bytes.clear();
            s.spare = bytes;
        }
    }
}

impl Inner {
    /// Where records may end in the active segment: its last whole block
    /// (a segment an older binary sized otherwise keeps its odd end unused).
    fn room_end(&self) -> u64 {
        self.active.size - self.active.size % JOURNAL_BLOCK
    }

    /// Encodes `record` at the tail; returns its position and where its
    /// bulk bytes sit in the frame.
    /// Encodes `record` at the tail; returns its frame length.
    fn push(&mut self, record: &Record<'_>) -> usize {
        let at = self.buf.len();
        let Encoded { frame_len, .. } = record.encode(&mut self.buf);
        let pos = self.write_pos;
        assert!(pos + frame_len as u64 <= self.room_end(), "log append without reserve");
        debug_assert_eq!(self.buf_pos + at as u64, pos);
        self.crc = crc32c::crc32c_append(self.crc, &self.buf[at..]);
        self.write_pos += frame_len as u64;
        frame_len
    }

    /// Moves to `next`, opening it with the seal of the segment left behind.
    fn roll(&mut self, next: Segment) {
        if !self.buf.is_empty() {
            let bytes = std::mem::take(&mut self.buf);
            self.sealed.push(Chunk { no: self.active.no, file: self.active.file.clone(), pos: self.buf_pos, bytes });
        }
        let seal = Seal { previous: self.active.no, len: self.write_pos, crc: self.crc, size: next.size };
        self.segments.insert(next.no, next.file.clone());
        self.active = next;
        self.write_pos = 0;
        self.buf_pos = 0;
        self.crc = 0;
        self.push(&Record::Seal(seal));
    }
}

/// Writes each chunk as whole blocks. In [`FsyncMode::Always`] the
/// segments are open `O_DSYNC`, so each write returns once its bytes are
/// durable: the write is the sync. A short write into preallocated space
/// is treated as an I/O failure: the log fails stop and recovery trims the
/// torn tail. Returns how long the durable writes took (`None` when the
/// mode does not sync).
async fn write_and_sync(
    blocks: &mut Blocks,
    chunks: &[Chunk],
    mode: FsyncMode,
) -> std::io::Result<Option<std::time::Duration>> {
    let started = std::time::Instant::now();
    for c in chunks {
        blocks.write(c).await?;
    }
    Ok((mode == FsyncMode::Always).then(|| started.elapsed()))
}

fn is_no_space(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ENOSPC) || e.to_string().contains("No space left")
}

/// A failed write as the log reports it: no space (507, retry later), or failed.
pub fn io_to_log(e: std::io::Error) -> LogError {
    if is_no_space(&e) {
        LogError::NoSpace
    } else {
        LogError::Failed(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::record::AppendRecord;
    use crate::log::recovery;
    use crate::test_dir::TestDir;

    fn dir(name: &str) -> TestDir {
        TestDir::new(&format!("writer-{name}"))
    }

    fn append(handle: u64, data: &[u8]) -> Record<'_> {
        Record::Append(AppendRecord {
            handle,
            at_ms: 0,
            stream_seq: None,
            producer: None,
            close: false,
            messages: vec![data.len() as u32],
            data,
        })
    }

    /// A record bigger than a segment gets a segment of its own while small
    /// writers keep rolling: they must never prepare or roll into the same
    /// segment number (which overwrote the big record).
    #[test]
    fn big_records_racing_small_ones_keep_every_byte() {
        let d = dir("big");
        let d2 = d.to_path_buf();
        crate::tick::block_on(move || async move {
            let cfg = LogConfig { dir: d2.clone(), segment_size: 4096, fsync: FsyncMode::Never };
            let active = create_segment(&d2, 1, 4096, false).await.unwrap();
            let seal = Some(Seal { previous: 0, len: 0, crc: 0, size: 4096 });
            let head_file = Head::open(&d2).await.unwrap();
            let resume =
                Resume { active, write_pos: 0, crc: 0, older: Vec::new(), next: None, head: 0, head_file, seal };
            let log = Log::start(cfg, resume);
            let mut tasks = Vec::new();
            for w in 0..8u64 {
                let log = log.clone();
                tasks.push(crate::tasks::spawn(async move {
                    for i in 0..150u64 {
                        let data = if w == 0 && i % 10 == 0 {
                            vec![b'A' + (i / 10) as u8; 10_000 + i as usize]
                        } else {
                            format!("w{w}i{i};").into_bytes()
                        };
                        log.reserve(data.len() + 256).await.unwrap();
                        let lsn = log.append(&append(w, &data)).lsn;
                        log.durable(lsn).await.unwrap();
                    }
                }));
            }
            for t in tasks {
                t.await;
            }
        });
        let mut seen: Vec<Vec<u8>> = Vec::new();
        recovery::scan(&d, recovery::Mode::Verify, |r, _| {
            if let Record::Append(a) = r {
                seen.push(a.data.to_vec());
            }
        })
        .unwrap();
        assert_eq!(seen.len(), 8 * 150);
        for i in (0..150u64).step_by(10) {
            let want = vec![b'A' + (i / 10) as u8; 10_000 + i as usize];
            assert!(seen.contains(&want), "big record {i} lost");
        }
    }
}
