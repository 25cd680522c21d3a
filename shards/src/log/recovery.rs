//! Start-up scan of a shard's segments.
//!
//! Every valid record is handed to the caller in log order with its position.
//! The scan stops at the zero-filled end of the newest segment. Damage there
//! that a torn write can explain was never acknowledged: it is zeroed and the
//! log resumes at that point. Damage anywhere else, or a missing segment,
//! means acknowledged data is gone: the scan fails loudly rather than serve a
//! log with a hole in it.
//!
//! Torn tail or damage. A group commit is one write (`O_DSYNC`) of whole
//! records into zero-filled space that nothing wrote before, padded to
//! whole blocks (`log::blocks`): the block it starts in is written again
//! with the same bytes before the commit's own, which a power loss leaves
//! reading alike, and its padding is zeros over zeros. So bytes at and
//! after the log's end are zeros (recovery zeroes a torn tail before the log
//! resumes there). Until the write returns nothing in it is acknowledged;
//! a power loss during it leaves each of its sectors ([`SECTOR`], 512 bytes
//! at file offsets that are multiples of it) either written or still zero,
//! in any combination, and never changes a byte to anything but what was
//! written. So, where the valid records end at byte `p` of the newest
//! segment with records (later segments all zeros):
//!
//! - `p` reads as an end (a zero length and CRC): a torn write lost the
//!   sector holding `p`, so the rest of that sector is zero too, and
//!   whatever non-zero bytes follow are sectors of the torn commit that
//!   landed without its start. Torn if the rest of `p`'s sector is zero and
//!   no valid record follows; damage otherwise.
//! - the record at `p` fails its CRC (or its length runs past the segment):
//!   a torn write must have lost a sector of it, whose part at or after `p`
//!   is still zero. Torn if some sector's part of the record (its declared
//!   extent, or only its length field when that runs past the segment,
//!   since only a lost sector under the field can make it wrong) is all
//!   zeros and no valid record follows; damage otherwise. A byte flipped in
//!   the newest acknowledged record leaves every sector of it non-zero: it
//!   is refused, never truncated.
//!
//! What stays ambiguous: damage that zeroes a whole sector's part of the
//! newest record, or a flip in a newest record whose payload holds a
//! sector's worth of zeros of its own, reads as a torn write and is
//! dropped; and a torn commit whose later sector holding a whole record
//! landed while an earlier one did not is refused as a hole (never
//! acknowledged, but recovery cannot tell it from a lost acknowledged block).
//!
//! File-level faults are caught by the seals and marks: every segment from
//! `log-start` to `log-head` must exist; each segment begins with the seal of
//! the one before it (its length and CRC32C) and its own file size, so a
//! sealed segment that is truncated, halved, zeroed or replaced by an older
//! copy, and a written segment that is cut short or emptied, are named.

use super::marks::{self, LOG_HEAD, LOG_START};
use super::record::{read_frame, Frame, Record, FRAME_HEADER, MAX_KIND};
use super::segment::{list_segments, segment_path};
use crate::tuning::SECTOR;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

sluice_core::line_error! {
    /// Why a shard's files cannot be recovered (opened, scanned, repaired),
    /// naming the file and what is wrong with it.
    pub struct RecoveryError;
}

/// A shard's log files as the scan sees them: real files in a directory
/// ([`Dir`]), or bytes in memory for the deterministic simulation.
pub trait LogFiles {
    /// The `log-start` and `log-head` marks (`None` when absent).
    fn marks(&self) -> Result<(Option<u32>, Option<u32>), RecoveryError>;
    /// Segment numbers present, ascending.
    fn list(&self) -> Result<Vec<u32>, RecoveryError>;
    fn read(&self, no: u32) -> Result<Vec<u8>, RecoveryError>;
    /// How a file is named in errors (`name` is a segment, or a mark when `None`).
    fn name(&self, segment: Option<u32>, mark: &str) -> String;
    fn remove(&mut self, no: u32) -> Result<(), RecoveryError>;
    /// Durably zeroes `len` bytes at `at` of segment `no`.
    fn zero(&mut self, no: u32, at: u64, len: usize) -> Result<(), RecoveryError>;
}

/// A shard's log directory.
pub struct Dir(pub PathBuf);

impl LogFiles for Dir {
    fn marks(&self) -> Result<(Option<u32>, Option<u32>), RecoveryError> {
        Ok((marks::read(&self.0, LOG_START)?, marks::read_head(&self.0)?))
    }

    fn list(&self) -> Result<Vec<u32>, RecoveryError> {
        Ok(list_segments(&self.0).map_err(|e| format!("cannot list {}: {e}", self.0.display()))?)
    }

    fn read(&self, no: u32) -> Result<Vec<u8>, RecoveryError> {
        let path = segment_path(&self.0, no);
        Ok(std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?)
    }

    fn name(&self, segment: Option<u32>, mark: &str) -> String {
        match segment {
            Some(no) => segment_path(&self.0, no).display().to_string(),
            None => self.0.join(mark).display().to_string(),
        }
    }

    fn remove(&mut self, no: u32) -> Result<(), RecoveryError> {
        Ok(std::fs::remove_file(segment_path(&self.0, no))
            .map_err(|e| format!("cannot remove reclaimed segment {no}: {e}"))?)
    }

    fn zero(&mut self, no: u32, at: u64, len: usize) -> Result<(), RecoveryError> {
        let path = segment_path(&self.0, no);
        Ok(zero_range(&path, at, len).map_err(|e| format!("cannot repair torn tail of {}: {e}", path.display()))?)
    }
}

/// Where a recovered record lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub segment: u32,
    /// File position of the record's frame.
    pub frame: u64,
}

/// The resumed tail.
#[derive(Debug, PartialEq, Eq)]
pub struct Tail {
    /// Segments in order (the last one is where writing resumes).
    pub segments: Vec<u32>,
    /// Where the records of each segment end.
    pub ends: Vec<u64>,
    /// CRC32C of each segment's records.
    pub crcs: Vec<u32>,
    pub write_pos: u64,
    /// Bytes of torn tail that were zeroed (or, verifying, would be).
    pub torn_bytes: u64,
    /// The segment `log-head` names (0 when none was written yet).
    pub head: u32,
    /// Records replayed (seals not counted).
    pub records: u64,
}

/// Whether the scan may repair what a crash legitimately leaves behind
/// (a torn tail, reclaimed segments not yet unlinked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Server start: repair and resume.
    Repair,
    /// `sluice check`: change nothing.
    Verify,
}

/// Replays every record under `dir` (seals are checked, not replayed).
pub fn scan(dir: &Path, mode: Mode, apply: impl FnMut(Record<'_>, Position)) -> Result<Tail, RecoveryError> {
    scan_files(&mut Dir(dir.to_path_buf()), mode, apply)
}

/// The records from journal position `from` (a frame's, as a checkpoint
/// names it) on, seals skipped as [`scan`] skips them, up to the first
/// frame that does not read whole, each
/// segment from `from`'s on read from there: a quick look ahead of
/// [`scan`], which reads the whole journal and decides what a frame that
/// does not read means (it runs after this, on the same files).
pub fn records_from(dir: &Path, from: (u32, u64), mut each: impl FnMut(Record<'_>)) -> Result<(), RecoveryError> {
    let mut segments = list_segments(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    segments.retain(|&n| n >= from.0);
    let mut buf = Vec::new();
    for no in segments {
        let path = segment_path(dir, no);
        let at = if no == from.0 { from.1 } else { 0 };
        buf.clear();
        std::fs::File::open(&path)
            .and_then(|mut f| f.seek(SeekFrom::Start(at)).and_then(|_| std::io::Read::read_to_end(&mut f, &mut buf)))
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut pos = 0;
        while let Frame::Record { record, len, .. } = read_frame(&buf[pos..]) {
            if !matches!(record, Record::Seal(_)) {
                each(record);
            }
            pos += len;
        }
    }
    Ok(())
}

/// [`scan`] over any [`LogFiles`].
pub fn scan_files<F: LogFiles>(
    files: &mut F,
    mode: Mode,
    mut apply: impl FnMut(Record<'_>, Position),
) -> Result<Tail, RecoveryError> {
    let (start, head) = files.marks()?;
    let start = start.unwrap_or(1);
    let mut segments = files.list()?;
    // Segments below the log start were reclaimed; a crash between recording
    // the new start and unlinking them leaves them behind.
    if mode == Mode::Repair {
        for &n in segments.iter().filter(|&&n| n < start) {
            files.remove(n)?;
        }
    }
    segments.retain(|&n| n >= start);
    // Numbering starts at the log start and has no gaps: the first one
    // missing is as much a hole as one in the middle.
    if let Some(&first) = segments.first().filter(|&&n| n != start) {
        return Err(format!(
            "{}: segment {start} is missing (the oldest is {first}): acknowledged data is gone",
            files.name(Some(start), "")
        )
        .into());
    }
    for pair in segments.windows(2) {
        if pair[1] != pair[0] + 1 {
            return Err(format!(
                "{}: segment {} is missing (found {} then {}): acknowledged data is gone",
                files.name(Some(pair[0] + 1), ""),
                pair[0] + 1,
                pair[0],
                pair[1]
            )
            .into());
        }
    }
    // A head of 0 was written when the log was created: no segment is
    // known to hold a durable record yet.
    if let Some(h) = head.filter(|&h| h > 0) {
        if h < start {
            return Err(format!(
                "{}: names segment {h}, below {LOG_START} {start}: one of the two marks is stale or damaged",
                files.name(None, LOG_HEAD)
            )
            .into());
        }
        let newest = segments.last().copied().unwrap_or(start - 1);
        if newest < h {
            return Err(format!(
                "{}: segment {} is missing ({LOG_HEAD} says segments up to {h} hold records): acknowledged data is gone",
                files.name(Some(newest + 1), ""),
                newest + 1
            ).into());
        }
    }
    let head_mark = head;
    let head = head.unwrap_or(0);
    let mut tail = Tail {
        segments: segments.clone(),
        ends: Vec::with_capacity(segments.len()),
        crcs: Vec::with_capacity(segments.len()),
        write_pos: 0,
        torn_bytes: 0,
        head,
        records: 0,
    };
    for (i, &no) in segments.iter().enumerate() {
        let path = files.name(Some(no), "");
        let buf = files.read(no)?;
        let last = i + 1 == segments.len();
        let mut pos = 0usize;
        loop {
            match read_frame(&buf[pos..]) {
                Frame::Record { record: Record::Seal(seal), len, .. } if pos == 0 => {
                    if seal.previous + 1 != no {
                        return Err(
                            format!("{}: its seal names segment {}: not this log's", path, seal.previous).into()
                        );
                    }
                    if seal.size != buf.len() as u64 {
                        return Err(format!(
                            "{}: {} bytes, but its seal says {}: truncated or replaced",
                            path,
                            buf.len(),
                            seal.size
                        )
                        .into());
                    }
                    // The log-start segment's predecessor was reclaimed.
                    if i > 0 && (seal.len, seal.crc) != (tail.ends[i - 1], tail.crcs[i - 1]) {
                        return Err(format!(
                            "{}: holds {} bytes of records (CRC32C {:08x}), but segment {no} sealed it at {} \
                             bytes (CRC32C {:08x}): truncated, zeroed or replaced by an older copy",
                            files.name(Some(seal.previous), ""),
                            tail.ends[i - 1],
                            tail.crcs[i - 1],
                            seal.len,
                            seal.crc
                        )
                        .into());
                    }
                    pos += len;
                }
                Frame::Record { record: Record::Seal(_), .. } => {
                    return Err(format!("{}: a seal at byte {pos}, not at the start: damaged", path).into());
                }
                Frame::Record { .. } if pos == 0 => {
                    return Err(format!("{}: does not begin with its seal: damaged or not this log's", path).into());
                }
                Frame::Record { record, len, .. } => {
                    apply(record, Position { segment: no, frame: pos as u64 });
                    tail.records += 1;
                    pos += len;
                }
                Frame::End => {
                    // Zeros followed by valid records: a lost block, not the end.
                    if valid_frame_after(&buf, pos + 1) {
                        return Err(hole(&path, pos, "zeroed"));
                    }
                    if !zero(&buf[pos..sector_end(pos).min(buf.len())]) {
                        return Err(not_torn(&path, pos, "zeroed"));
                    }
                    // Sectors of a torn write can land out of order: bytes
                    // after the end with no valid record among them were
                    // never acknowledged. Zero them, or the log would resume
                    // here and later find them in front of newer records.
                    let end = last_nonzero(&buf).map_or(pos, |p| (p + 1).max(pos));
                    if end > pos {
                        if mode == Mode::Repair {
                            files.zero(no, pos as u64, end - pos)?;
                        }
                        tail.torn_bytes += (end - pos) as u64;
                    }
                    break;
                }
                Frame::Damaged => {
                    // The newest segment with records is usually followed by
                    // the preallocated (all-zero) next one: its tail is still
                    // the log's tail.
                    if valid_frame_after(&buf, pos + 1) || !blank_after(files, &segments[i + 1..])? {
                        return Err(hole(&path, pos, "damaged"));
                    }
                    if !lost_a_sector(&buf, pos) {
                        return Err(not_torn(&path, pos, "damaged"));
                    }
                    let end = last_nonzero(&buf).map_or(pos, |p| p + 1);
                    if mode == Mode::Repair {
                        files.zero(no, pos as u64, end - pos)?;
                    }
                    tail.torn_bytes = (end - pos) as u64;
                    break;
                }
            }
        }
        // A segment log-head covers had its seal durable before the head moved.
        if pos == 0 && no <= head {
            return Err(
                format!("{}: holds no records, but {LOG_HEAD} says it was written: truncated or zeroed", path).into()
            );
        }
        tail.ends.push(pos as u64);
        tail.crcs.push(crc32c::crc32c(&buf[..pos]));
        if last {
            tail.write_pos = pos as u64;
        }
    }
    if head_mark.is_none() && tail.ends.iter().any(|&e| e > 0) {
        return Err(format!("{}: missing, but the segments hold records", files.name(None, LOG_HEAD)).into());
    }
    Ok(tail)
}

fn hole(path: &str, pos: usize, what: &str) -> RecoveryError {
    RecoveryError(format!(
        "{}: {what} record at byte {pos} with acknowledged records after it; \
         refusing to serve a log with a hole (restore the file or remove the shard's data)",
        path
    ))
}

fn not_torn(path: &str, pos: usize, what: &str) -> RecoveryError {
    RecoveryError(format!(
        "{}: {what} record at byte {pos}, the newest, with every sector of it written: damage to an \
         acknowledged record, not a torn write; refusing to drop it (restore the file or remove the shard's data)",
        path
    ))
}

/// Where the sector holding byte `pos` ends.
fn sector_end(pos: usize) -> usize {
    (pos / SECTOR + 1) * SECTOR
}

fn zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|b| *b == 0)
}

/// Whether the record at `pos` that fails its CRC can be a torn write: some
/// sector's part of it still reads as the preallocated zeros (see the
/// module header). Its extent is what its length field declares, or only
/// the field itself when that runs past the segment.
fn lost_a_sector(buf: &[u8], pos: usize) -> bool {
    let declared = buf.get(pos..pos + 4).map(|b| u32::from_le_bytes(b.try_into().expect("4")) as usize);
    let end = match declared {
        Some(len) if pos + FRAME_HEADER + len <= buf.len() => pos + FRAME_HEADER + len,
        _ => (pos + 4).min(buf.len()),
    };
    let mut at = pos;
    while at < end {
        let to = sector_end(at).min(end);
        if zero(&buf[at..to]) {
            return true;
        }
        at = to;
    }
    false
}

/// Whether every segment in `later` is all zeros (preallocated, never written).
fn blank_after<F: LogFiles>(files: &F, later: &[u32]) -> Result<bool, RecoveryError> {
    for &no in later {
        let buf = files.read(no)?;
        if first_nonzero(&buf).is_some() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether any valid frame starts at or after `from`. A frame's length field
/// is non-zero, so a frame can only start in the 3 bytes before a non-zero
/// byte or on it: runs of zeros (a segment's preallocated tail, tens of
/// MiB) are skipped whole.
fn valid_frame_after(buf: &[u8], from: usize) -> bool {
    let mut at = from;
    while let Some(nonzero) = buf.get(at..).and_then(first_nonzero).map(|p| at + p) {
        if (nonzero.saturating_sub(3).max(at)..=nonzero).any(|p| frame_at(&buf[p..])) {
            return true;
        }
        at = nonzero + 1;
    }
    false
}

/// Whether a valid record frame starts at `b[0]`.
fn frame_at(b: &[u8]) -> bool {
    b.len() >= 9
        && b[0..4] != [0, 0, 0, 0]
        && (1..=MAX_KIND).contains(&b[8])
        && matches!(read_frame(b), Frame::Record { .. })
}

/// Bytes tested at once when looking for a non-zero one.
const SCAN_BLOCK: usize = 64;

/// Where the first non-zero byte of `buf` is: whole blocks of zeros are
/// passed over with one test each.
fn first_nonzero(buf: &[u8]) -> Option<usize> {
    let blank = buf.chunks_exact(SCAN_BLOCK).take_while(|b| b.iter().fold(0, |a, x| a | x) == 0).count();
    let at = blank * SCAN_BLOCK;
    buf[at..].iter().position(|x| *x != 0).map(|p| at + p)
}

/// Where the last non-zero byte of `buf` is (as [`first_nonzero`], from the end).
fn last_nonzero(buf: &[u8]) -> Option<usize> {
    let blank = buf.rchunks_exact(SCAN_BLOCK).take_while(|b| b.iter().fold(0, |a, x| a | x) == 0).count();
    buf[..buf.len() - blank * SCAN_BLOCK].iter().rposition(|x| *x != 0)
}

fn zero_range(path: &Path, at: u64, len: usize) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).open(path)?;
    f.seek(SeekFrom::Start(at))?;
    f.write_all(&vec![0u8; len])?;
    f.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::record::{Record, Seal, SEAL_FRAME};
    use crate::test_dir::TestDir;

    /// The block-wise scans find the same byte as a byte-by-byte one, for
    /// every length around the block size and every position of a lone
    /// non-zero byte (or none).
    #[test]
    fn nonzero_scans_match_a_byte_by_byte_scan() {
        for len in [0, 1, 63, 64, 65, 127, 128, 129, 200] {
            for at in (0..len).map(Some).chain([None]) {
                let mut buf = vec![0u8; len];
                if let Some(at) = at {
                    buf[at] = 0x80;
                }
                assert_eq!(first_nonzero(&buf), buf.iter().position(|x| *x != 0), "{len} {at:?}");
                assert_eq!(last_nonzero(&buf), buf.iter().rposition(|x| *x != 0), "{len} {at:?}");
            }
        }
        let mut buf = vec![0u8; 300];
        (buf[5], buf[250]) = (1, 2);
        assert_eq!((first_nonzero(&buf), last_nonzero(&buf)), (Some(5), Some(250)));
    }

    /// One Delete frame.
    const DEL: usize = 17;
    /// Where the first record after the seal starts.
    const S: usize = SEAL_FRAME;

    fn dir(name: &str) -> TestDir {
        TestDir::new(&format!("recovery-{name}"))
    }

    /// Writes a log of `segments` (each its records; empty = preallocated,
    /// no seal) of `size` bytes each, numbered from `first`, sealed in
    /// order, with log-head at the newest segment holding records.
    fn write_log(d: &Path, first: u32, segments: &[&[Record<'_>]], size: usize) -> Vec<Vec<u8>> {
        let mut prev = (0u64, 0u32);
        let mut out = Vec::new();
        for (i, records) in segments.iter().enumerate() {
            let no = first + i as u32;
            let mut buf = Vec::new();
            if !records.is_empty() {
                Record::Seal(Seal { previous: no - 1, len: prev.0, crc: prev.1, size: size as u64 }).encode(&mut buf);
                for r in *records {
                    r.encode(&mut buf);
                }
                std::fs::write(d.join(LOG_HEAD), marks::head_file(no)).unwrap();
            }
            prev = (buf.len() as u64, crc32c::crc32c(&buf));
            buf.resize(size, 0);
            std::fs::write(segment_path(d, no), &buf).unwrap();
            out.push(buf);
        }
        out
    }

    fn del(h: u64) -> Record<'static> {
        Record::Delete { handle: h }
    }

    fn replay_in(d: &Path, mode: Mode) -> Result<(Vec<u64>, Tail), RecoveryError> {
        let mut seen = Vec::new();
        let tail = scan(d, mode, |r, _| {
            if let Record::Delete { handle } = r {
                seen.push(handle)
            }
        })?;
        Ok((seen, tail))
    }

    fn replay(d: &Path) -> Result<(Vec<u64>, Tail), RecoveryError> {
        replay_in(d, Mode::Repair)
    }

    #[test]
    fn clean_log_replays_in_order() {
        let d = dir("clean");
        write_log(&d, 1, &[&[del(1), del(2)], &[del(3)]], 256);
        let (seen, tail) = replay(&d).unwrap();
        assert_eq!(seen, vec![1, 2, 3]);
        assert_eq!(tail.segments, vec![1, 2]);
        assert_eq!(tail.write_pos, (S + DEL) as u64);
        assert_eq!((tail.torn_bytes, tail.head, tail.records), (0, 2, 3));
    }

    /// From any record's position, `records_from` reads exactly the records
    /// `scan` replays from there (within a segment and across seals), and
    /// stops at the first frame that does not read (here the newest one,
    /// its last byte flipped).
    #[test]
    fn records_from_reads_what_scan_replays_from_a_position() {
        let d = dir("records-from");
        let segs = write_log(&d, 1, &[&dels(3), &[del(4), del(5)], &[del(6)], &[]], 256);
        let mut frames = Vec::new();
        scan(&d, Mode::Verify, |r, at| frames.push(((at.segment, at.frame), r.handle()))).unwrap();
        for &(from, _) in &frames {
            let from_scan: Vec<Option<u64>> = frames.iter().filter(|(at, _)| *at >= from).map(|f| f.1).collect();
            let mut read = Vec::new();
            records_from(&d, from, |r| read.push(r.handle())).unwrap();
            assert_eq!(read, from_scan, "from {from:?}");
        }
        // A torn last record: neither reads it.
        let mut newest = segs[2].clone();
        newest[S + DEL - 1] ^= 0xff;
        std::fs::write(segment_path(&d, 3), &newest).unwrap();
        let mut read = Vec::new();
        records_from(&d, (2, 0), |r| read.push(r.handle())).unwrap();
        assert_eq!(read, [Some(4), Some(5)], "not 6");
    }

    /// Segment size for the torn-tail tests: several sectors.
    const BIG: usize = 2048;
    /// Delete records after the seal up to and including the first that
    /// spans the boundary at byte `SECTOR`.
    const SPAN: usize = (SECTOR - S) / DEL + 1;

    fn dels(n: usize) -> Vec<Record<'static>> {
        (1..=n as u64).map(del).collect()
    }

    /// A power loss in the last commit: the sector after `SECTOR` never
    /// landed, so the record spanning it lost its end. Never acknowledged:
    /// zeroed (except when verifying).
    #[test]
    fn torn_tail_is_zeroed_unless_verifying() {
        let d = dir("torn");
        let mut buf = write_log(&d, 1, &[&dels(SPAN)], BIG).remove(0);
        let last = S + (SPAN - 1) * DEL;
        assert!(last < SECTOR && SECTOR < last + DEL);
        buf[SECTOR..last + DEL].fill(0);
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        let (seen, tail) = replay_in(&d, Mode::Verify).unwrap();
        assert!(seen.len() == SPAN - 1 && tail.torn_bytes > 0);
        assert_eq!(std::fs::read(segment_path(&d, 1)).unwrap(), buf, "verifying changed the file");
        let (seen, tail) = replay(&d).unwrap();
        assert_eq!(seen, (1..SPAN as u64).collect::<Vec<_>>());
        assert_eq!(tail.write_pos, last as u64);
        assert!(tail.torn_bytes > 0);
        let after = std::fs::read(segment_path(&d, 1)).unwrap();
        assert!(after[last..].iter().all(|b| *b == 0));
        // A second start finds a clean log.
        assert_eq!(replay(&d).unwrap().1.torn_bytes, 0);
    }

    /// Issue #5: a byte flipped in the newest record, every sector of it
    /// written, is damage to an acknowledged record: refused by start and
    /// by the check, and never zeroed; whether the record spans a sector
    /// boundary or not.
    #[test]
    fn flipped_byte_in_the_newest_record_is_refused() {
        for (name, n) in [("flip-small", 2), ("flip-span", SPAN)] {
            let d = dir(name);
            let mut buf = write_log(&d, 1, &[&dels(n)], BIG).remove(0);
            let last = S + (n - 1) * DEL;
            buf[last + DEL - 2] ^= 0x40;
            std::fs::write(segment_path(&d, 1), &buf).unwrap();
            for mode in [Mode::Verify, Mode::Repair] {
                let err = replay_in(&d, mode).expect_err(name).to_string();
                assert!(err.contains(&format!("damaged record at byte {last}, the newest")), "{name}: {err}");
                assert!(err.contains("0000000001.seg") && err.contains("not a torn write"), "{name}: {err}");
            }
            assert_eq!(std::fs::read(segment_path(&d, 1)).unwrap(), buf, "{name}: the record was changed");
        }
    }

    /// A torn write whose later sector landed but whose first did not:
    /// zeros at the end of the records to the end of their sector, then
    /// garbage. The garbage is zeroed so that records written after the
    /// restart never sit behind it. Non-zero bytes within the sector where
    /// the records end cannot come from a torn write: refused.
    #[test]
    fn garbage_after_the_end_is_zeroed() {
        let d = dir("garbage");
        let mut buf = write_log(&d, 1, &[&[del(1)]], BIG).remove(0);
        buf[1000..1010].copy_from_slice(b"not-a-frm!");
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        let (seen, tail) = replay(&d).unwrap();
        assert_eq!((seen, tail.write_pos, tail.torn_bytes), (vec![1], (S + DEL) as u64, 1010 - (S + DEL) as u64));
        assert!(std::fs::read(segment_path(&d, 1)).unwrap()[S + DEL..].iter().all(|b| *b == 0));
        buf[200..210].copy_from_slice(b"not-a-frm!");
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        for mode in [Mode::Verify, Mode::Repair] {
            let err = replay_in(&d, mode).unwrap_err().to_string();
            assert!(err.contains(&format!("zeroed record at byte {}, the newest", S + DEL)), "{err}");
        }
    }

    #[test]
    fn damage_before_valid_records_is_fatal() {
        let d = dir("hole");
        let mut buf = write_log(&d, 1, &[&[del(1), del(2), del(3)]], 256).remove(0);
        buf[S + DEL + 3] ^= 0xff;
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        assert!(replay(&d).unwrap_err().to_string().contains(&format!("damaged record at byte {}", S + DEL)));
    }

    #[test]
    fn damage_in_an_older_segment_or_a_gap_is_fatal() {
        let d = dir("older");
        let mut buf = write_log(&d, 1, &[&[del(1)], &[del(2)]], 64).remove(0);
        buf[S + 10] ^= 1;
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        assert!(replay(&d).is_err());
        let d = dir("gap");
        write_log(&d, 1, &[&[del(1)], &[del(2)], &[del(3)]], 64);
        std::fs::remove_file(segment_path(&d, 2)).unwrap();
        assert!(replay(&d).unwrap_err().to_string().contains("segment 2 is missing"));
    }

    #[test]
    fn torn_tail_before_a_preallocated_segment_is_zeroed() {
        let d = dir("torn-prealloc");
        let mut buf = write_log(&d, 1, &[&dels(SPAN), &[]], BIG).remove(0);
        let last = S + (SPAN - 1) * DEL;
        buf[SECTOR..last + DEL].fill(0);
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        let (seen, tail) = replay(&d).unwrap();
        assert_eq!(seen.len(), SPAN - 1);
        assert_eq!(tail.segments, vec![1, 2]);
        assert_eq!(tail.write_pos, 0);
        assert!(tail.torn_bytes > 0);
        assert!(std::fs::read(segment_path(&d, 1)).unwrap()[last..].iter().all(|b| *b == 0));
    }

    #[test]
    fn zeroed_record_before_valid_records_is_fatal() {
        let d = dir("zeroed");
        let mut buf = write_log(&d, 1, &[&[del(1), del(2), del(3)]], 256).remove(0);
        buf[S + DEL..S + 2 * DEL].fill(0);
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        assert!(replay(&d).unwrap_err().to_string().contains(&format!("zeroed record at byte {}", S + DEL)));
    }

    #[test]
    fn a_missing_first_segment_is_fatal() {
        let d = dir("first");
        write_log(&d, 1, &[&[del(1)], &[del(2)], &[del(3)]], 64);
        std::fs::remove_file(segment_path(&d, 1)).unwrap();
        assert!(replay(&d).unwrap_err().to_string().contains("segment 1 is missing"));
    }

    /// Every file-level fault of a sealed segment, the newest segment and
    /// the marks is refused with the file named.
    #[test]
    fn file_faults_are_named() {
        type Fault = fn(&Path, &[Vec<u8>]);
        let faults: [(&str, Fault, &str); 9] = [
            ("sealed-truncated", |d, _| std::fs::write(segment_path(d, 1), b"").unwrap(), "0000000001.seg"),
            (
                "sealed-halved",
                |d, b| std::fs::write(segment_path(d, 1), &b[0][..b[0].len() / 2]).unwrap(),
                "0000000001.seg",
            ),
            (
                "sealed-zeroed",
                |d, b| std::fs::write(segment_path(d, 1), vec![0; b[0].len()]).unwrap(),
                "0000000001.seg",
            ),
            (
                "sealed-older-copy",
                |d, b| {
                    // The same segment as it was before its last record.
                    let mut old = b[0].clone();
                    old[S + DEL..S + 2 * DEL].fill(0);
                    std::fs::write(segment_path(d, 1), old).unwrap()
                },
                "0000000001.seg",
            ),
            ("newest-deleted", |d, _| std::fs::remove_file(segment_path(d, 2)).unwrap(), "0000000002.seg"),
            ("newest-truncated", |d, _| std::fs::write(segment_path(d, 2), b"").unwrap(), "0000000002.seg"),
            (
                "newest-halved",
                |d, b| std::fs::write(segment_path(d, 2), &b[1][..b[1].len() / 2]).unwrap(),
                "0000000002.seg",
            ),
            ("head-deleted", |d, _| std::fs::remove_file(d.join(LOG_HEAD)).unwrap(), "log-head"),
            ("start-garbage", |d, _| std::fs::write(d.join(LOG_START), "999\n").unwrap(), "log-start"),
        ];
        for (name, fault, named) in faults {
            let d = dir(name);
            let bufs = write_log(&d, 1, &[&[del(1), del(2)], &[del(3)]], 128);
            fault(&d, &bufs);
            for mode in [Mode::Verify, Mode::Repair] {
                let err = replay_in(&d, mode).expect_err(name).to_string();
                assert!(err.contains(named), "{name}: {err}");
            }
        }
    }

    #[test]
    fn a_stale_head_below_the_start_is_fatal() {
        let d = dir("stale-head");
        write_log(&d, 3, &[&[del(1)], &[del(2)]], 64);
        std::fs::write(d.join(LOG_START), marks::encode(LOG_START, 3)).unwrap();
        std::fs::write(d.join(LOG_HEAD), marks::head_file(2)).unwrap();
        assert!(replay(&d).unwrap_err().to_string().contains("below log-start 3"));
        std::fs::write(d.join(LOG_HEAD), marks::head_file(4)).unwrap();
        assert_eq!(replay(&d).unwrap().0, vec![1, 2]);
    }
}
