//! Start-up scan of a shard's segments.
//!
//! Every valid record is handed to the caller in log order with its position.
//! The scan stops at the zero-filled end of the newest segment. Damage there
//! with nothing valid after it is a torn write that was never acknowledged: it
//! is zeroed and the log resumes at that point. Damage anywhere else, or a
//! missing segment, means acknowledged data is gone: the scan fails loudly
//! rather than serve a log with a hole in it.

use super::record::{read_frame, Frame, Record};
use super::segment::{list_segments, read_log_start, segment_path};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// Where a recovered record lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Position {
    pub segment: u32,
    /// File position of the record's bulk bytes.
    pub data_pos: u64,
}

/// The resumed tail.
#[derive(Debug, PartialEq, Eq)]
pub struct Tail {
    /// Segments in order (the last one is where writing resumes).
    pub segments: Vec<u32>,
    /// Where the records of each segment end.
    pub ends: Vec<u64>,
    pub write_pos: u64,
    /// Bytes of torn tail that were zeroed.
    pub torn_bytes: u64,
}

/// Replays every record under `dir`, repairing a torn tail.
pub fn scan(dir: &Path, mut apply: impl FnMut(Record<'_>, Position)) -> Result<Tail, String> {
    let start = read_log_start(dir).map_err(|e| format!("cannot read the log start of {}: {e}", dir.display()))?;
    let mut segments = list_segments(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    // Segments below the log start were reclaimed; a crash between recording
    // the new start and unlinking them leaves them behind.
    for n in segments.iter().filter(|&&n| n < start) {
        std::fs::remove_file(segment_path(dir, *n)).map_err(|e| format!("cannot remove reclaimed segment {n}: {e}"))?;
    }
    segments.retain(|&n| n >= start);
    // Numbering starts at the log start and has no gaps: the first one
    // missing is as much a hole as one in the middle.
    if let Some(&first) = segments.first().filter(|&&n| n != start) {
        return Err(format!(
            "{}: segment {start} is missing (the oldest is {first}): acknowledged data is gone",
            segment_path(dir, start).display()
        ));
    }
    for pair in segments.windows(2) {
        if pair[1] != pair[0] + 1 {
            return Err(format!(
                "{}: segment {} is missing (found {} then {}): acknowledged data is gone",
                segment_path(dir, pair[0] + 1).display(),
                pair[0] + 1,
                pair[0],
                pair[1]
            ));
        }
    }
    let mut tail =
        Tail { segments: segments.clone(), ends: Vec::with_capacity(segments.len()), write_pos: 0, torn_bytes: 0 };
    for (i, &no) in segments.iter().enumerate() {
        let path = segment_path(dir, no);
        let buf = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let last = i + 1 == segments.len();
        let mut pos = 0usize;
        loop {
            match read_frame(&buf[pos..]) {
                Frame::Record { record, len, data_at } => {
                    apply(record, Position { segment: no, data_pos: (pos + data_at) as u64 });
                    pos += len;
                }
                Frame::End => {
                    // Zeros followed by valid records: a lost block, not the end.
                    if valid_frame_after(&buf, pos + 1) {
                        return Err(hole(&path, pos, "zeroed"));
                    }
                    break;
                }
                Frame::Damaged => {
                    // The newest segment with records is usually followed by
                    // the preallocated (all-zero) next one: its tail is still
                    // the log's tail.
                    if valid_frame_after(&buf, pos + 1) || !blank_after(dir, &segments[i + 1..])? {
                        return Err(hole(&path, pos, "damaged"));
                    }
                    let end = buf.iter().rposition(|b| *b != 0).map_or(pos, |p| p + 1);
                    zero_range(&path, pos as u64, end - pos)
                        .map_err(|e| format!("cannot repair torn tail of {}: {e}", path.display()))?;
                    tail.torn_bytes = (end - pos) as u64;
                    break;
                }
            }
        }
        tail.ends.push(pos as u64);
        if last {
            tail.write_pos = pos as u64;
        }
    }
    Ok(tail)
}

fn hole(path: &Path, pos: usize, what: &str) -> String {
    format!(
        "{}: {what} record at byte {pos} with acknowledged records after it; \
         refusing to serve a log with a hole (restore the file or remove the shard's data)",
        path.display()
    )
}

/// Whether every segment in `later` is all zeros (preallocated, never written).
fn blank_after(dir: &Path, later: &[u32]) -> Result<bool, String> {
    for &no in later {
        let path = segment_path(dir, no);
        let buf = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if buf.iter().any(|b| *b != 0) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether any valid frame starts at or after `from`. A frame's length field
/// is non-zero, so the search starts just before the first non-zero byte.
fn valid_frame_after(buf: &[u8], from: usize) -> bool {
    let Some(first) = buf.get(from..).and_then(|b| b.iter().position(|x| *x != 0)) else {
        return false;
    };
    let start = (from + first).saturating_sub(3).max(from);
    (start..buf.len()).any(|p| {
        let b = &buf[p..];
        if b.len() < 9 || b[0..4] == [0, 0, 0, 0] || !(1..=10).contains(&b[8]) {
            return false;
        }
        matches!(read_frame(b), Frame::Record { .. })
    })
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
    use crate::log::record::Record;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-recovery-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn write_segment(d: &Path, no: u32, records: &[Record<'_>], size: usize) -> Vec<u8> {
        let mut buf = Vec::new();
        for r in records {
            r.encode(&mut buf);
        }
        buf.resize(size, 0);
        std::fs::write(segment_path(d, no), &buf).unwrap();
        buf
    }

    fn del(h: u64) -> Record<'static> {
        Record::Delete { handle: h }
    }

    fn replay(d: &Path) -> Result<(Vec<u64>, Tail), String> {
        let mut seen = Vec::new();
        let tail = scan(d, |r, _| {
            if let Record::Delete { handle } = r {
                seen.push(handle)
            }
        })?;
        Ok((seen, tail))
    }

    #[test]
    fn clean_log_replays_in_order() {
        let d = dir("clean");
        write_segment(&d, 1, &[del(1), del(2)], 256);
        write_segment(&d, 2, &[del(3)], 256);
        let (seen, tail) = replay(&d).unwrap();
        assert_eq!(seen, vec![1, 2, 3]);
        assert_eq!(tail.segments, vec![1, 2]);
        assert_eq!(tail.write_pos, 17);
        assert_eq!(tail.torn_bytes, 0);
    }

    #[test]
    fn torn_tail_is_zeroed() {
        let d = dir("torn");
        let mut buf = write_segment(&d, 1, &[del(1), del(2)], 256);
        buf[20] ^= 0xff; // inside the second record, nothing valid after it
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        let (seen, tail) = replay(&d).unwrap();
        assert_eq!(seen, vec![1]);
        assert_eq!(tail.write_pos, 17);
        assert!(tail.torn_bytes > 0);
        let after = std::fs::read(segment_path(&d, 1)).unwrap();
        assert!(after[17..].iter().all(|b| *b == 0));
        // A second start finds a clean log.
        assert_eq!(replay(&d).unwrap().1.torn_bytes, 0);
    }

    #[test]
    fn damage_before_valid_records_is_fatal() {
        let d = dir("hole");
        let mut buf = write_segment(&d, 1, &[del(1), del(2), del(3)], 256);
        buf[20] ^= 0xff;
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        assert!(replay(&d).unwrap_err().contains("damaged record at byte 17"));
    }

    #[test]
    fn damage_in_an_older_segment_or_a_gap_is_fatal() {
        let d = dir("older");
        let mut buf = write_segment(&d, 1, &[del(1)], 64);
        write_segment(&d, 2, &[del(2)], 64);
        buf[10] ^= 1;
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        assert!(replay(&d).is_err());
        let d = dir("gap");
        write_segment(&d, 1, &[del(1)], 64);
        write_segment(&d, 3, &[del(2)], 64);
        assert!(replay(&d).unwrap_err().contains("segment 2 is missing"));
    }

    #[test]
    fn torn_tail_before_a_preallocated_segment_is_zeroed() {
        let d = dir("torn-prealloc");
        let mut buf = write_segment(&d, 1, &[del(1), del(2)], 256);
        write_segment(&d, 2, &[], 256);
        buf[20] ^= 0xff;
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        let (seen, tail) = replay(&d).unwrap();
        assert_eq!(seen, vec![1]);
        assert_eq!(tail.segments, vec![1, 2]);
        assert_eq!(tail.write_pos, 0);
        assert!(tail.torn_bytes > 0);
        assert!(std::fs::read(segment_path(&d, 1)).unwrap()[17..].iter().all(|b| *b == 0));
    }

    #[test]
    fn zeroed_record_before_valid_records_is_fatal() {
        let d = dir("zeroed");
        let mut buf = write_segment(&d, 1, &[del(1), del(2), del(3)], 256);
        buf[17..34].fill(0);
        std::fs::write(segment_path(&d, 1), &buf).unwrap();
        assert!(replay(&d).unwrap_err().contains("zeroed record at byte 17"));
    }

    #[test]
    fn a_missing_first_segment_is_fatal() {
        let d = dir("first");
        write_segment(&d, 2, &[del(1)], 64);
        write_segment(&d, 3, &[del(2)], 64);
        assert!(replay(&d).unwrap_err().contains("segment 1 is missing"));
    }
}
