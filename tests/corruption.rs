//! Torn writes and damaged segments, against the real binary.
//!
//! Each test writes acknowledged data, stops the server with SIGKILL, damages
//! files under `DIR/shard-N/*.seg` by hand, and restarts it:
//!
//! - a torn record at the tail of the newest segment (a sector of it lost,
//!   as a power loss leaves it; the preallocated next segment is there, all
//!   zeros) is dropped and the server starts with every earlier acknowledged
//!   byte, and keeps writing correctly; a segment file cut short (no write
//!   does that to a preallocated file) is refused;
//! - a byte flipped inside the newest record (every sector of it written:
//!   acknowledged) is refused by start and by `sluice check`;
//! - a flipped bit, or a zeroed record, in the middle of a segment with valid
//!   records after it, damage at the tail of an older segment, and a missing
//!   segment (first or middle) make the server refuse to start with a
//!   non-zero exit and a message naming the file; restoring the file brings
//!   everything back.
//!
//! Starts and talks to the server through the shared helpers in `common`.

mod common;

use common::{offset_pos, Launch, Server, TempDir};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

// ------------------------------------------------------------------ helpers

/// Small segments (preallocation stays quick); no flush within a test, so
/// every journal segment stays.
const SMALL: &[&str] = &["--segment-bytes", "1048576", "--flush-interval", "30s"];
/// Several segments from a few hundred KiB of data, none reclaimed.
const TINY: &[&str] = &["--segment-bytes", "65536", "--flush-interval", "30s"];

/// Starts the server on `dir/data` (output in `dir/server.log`); `Err`
/// carries the exit status and output when it refuses to start.
fn try_start(dir: &Path, extra: &[&str]) -> Result<Server, (ExitStatus, String)> {
    let launch = Launch { io_timeout: Duration::from_secs(10), ..Launch::logged(&dir.join("server.log"), extra) };
    Server::try_launch(&dir.join("data"), launch)
}

fn start(dir: &Path, extra: &[&str]) -> Server {
    try_start(dir, extra).unwrap_or_else(|(status, out)| panic!("server refused to start ({status}): {out}"))
}

/// Appends and returns the acknowledged Stream-Next-Offset.
fn append(s: &Server, path: &str, body: &[u8]) -> u64 {
    let r = s.req("POST", path, &[("Content-Type", "text/plain")], body);
    assert_eq!(r.status, 204, "append: {}", r.text());
    offset_pos(&r.next_offset())
}

/// The whole stream (small streams: one response) and its tail.
fn read(s: &Server, path: &str) -> (Vec<u8>, u64) {
    let r = s.get(&format!("{path}?offset=-1"));
    assert_eq!(r.status, 200, "read: {}", r.text());
    assert_eq!(r.header("stream-up-to-date"), Some("true"));
    let tail = offset_pos(&r.next_offset());
    (r.body, tail)
}

/// Writes `n` acknowledged records of about `size` bytes to a new text
/// stream; returns the bodies and their acknowledged end offsets.
fn fill(s: &Server, path: &str, n: usize, size: usize) -> Vec<(Vec<u8>, u64)> {
    let r = s.req("PUT", path, &[("Content-Type", "text/plain")], b"");
    assert_eq!(r.status, 201);
    let mut out = Vec::new();
    let mut end = 0;
    for i in 0..n {
        let mut body = format!("rec-{i:05}-").into_bytes();
        while body.len() + 1 < size {
            body.push(b'a' + ((i * 7 + body.len()) % 26) as u8);
        }
        body.push(b'\n');
        let next = append(s, path, &body);
        end += body.len() as u64;
        assert_eq!(next, end, "acknowledged offset");
        out.push((body, next));
    }
    out
}

fn concat(recs: &[(Vec<u8>, u64)]) -> Vec<u8> {
    recs.iter().flat_map(|(b, _)| b.clone()).collect()
}

fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for shard in std::fs::read_dir(dir.join("data")).unwrap() {
        let shard = shard.unwrap().path();
        if shard.is_dir() {
            for f in std::fs::read_dir(&shard).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "seg") {
                    out.push(f);
                }
            }
        }
    }
    out.sort();
    out
}

/// The segment file holding `needle`, and where.
fn locate(dir: &Path, needle: &[u8]) -> (PathBuf, usize) {
    for seg in segments(dir) {
        let buf = std::fs::read(&seg).unwrap();
        if let Some(at) = buf.windows(needle.len()).position(|w| w == needle) {
            return (seg, at);
        }
    }
    panic!("{:?} is in no segment", String::from_utf8_lossy(needle));
}

/// Frame boundaries `(start, end)` of a segment's records.
fn frames(buf: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 8 <= buf.len() {
        let len = u32::from_le_bytes(buf[pos..pos + 4].try_into().unwrap()) as usize;
        if len == 0 {
            break;
        }
        out.push((pos, pos + 8 + len));
        pos += 8 + len;
    }
    out
}

fn segment_no(seg: &Path) -> u32 {
    seg.file_stem().unwrap().to_str().unwrap().parse().unwrap()
}

fn sibling(seg: &Path, no: u32) -> PathBuf {
    seg.with_file_name(format!("{no:010}.seg"))
}

fn refused(dir: &Path, extra: &[&str]) -> String {
    match try_start(dir, extra) {
        Ok(_) => panic!("server started on a damaged log"),
        Err((status, out)) => {
            assert_ne!(status.code(), Some(0), "refusal must exit non-zero: {out}");
            out
        }
    }
}

// ------------------------------------------------------------------ torn tails

/// The smallest unit a disk writes whole (`SECTOR` in the core limits): a
/// power loss during a commit loses whole sectors of it, which keep the
/// preallocated zeros.
const SECTOR: usize = 512;

/// Tears the last record (`body` at `at` in `seg`) as a power loss would
/// and checks the restart drops it and keeps everything acknowledged.
fn torn_tail(name: &str, lose: impl FnOnce(&mut Vec<u8>, (usize, usize))) {
    let tmp = TempDir::new(name);
    let dir = tmp.path();
    let mut s = start(dir, SMALL);
    let path = "/v1/stream/torn";
    // Records longer than a sector: each spans a sector boundary.
    let recs = fill(&s, path, 30, 700);
    s.kill();
    let (last_body, _) = recs.last().unwrap();
    let (seg, at) = locate(dir, last_body);
    // The newest segment with records is followed by the preallocated next one.
    let next = sibling(&seg, segment_no(&seg) + 1);
    assert!(next.exists(), "expected a preallocated {}", next.display());
    assert!(std::fs::read(&next).unwrap().iter().all(|b| *b == 0));
    let mut buf = std::fs::read(&seg).unwrap();
    let frame = frames(&buf).into_iter().find(|&(a, b)| a <= at && at < b).unwrap();
    lose(&mut buf, frame);
    std::fs::write(&seg, buf).unwrap();

    let mut s = start(dir, SMALL);
    let log = s.output();
    assert!(log.contains("recovery zeroed a torn tail"), "the repair is logged: {log}");
    assert!(!log.contains("torn_bytes_repaired=0"), "the start line counts the repair: {log}");
    let kept = &recs[..recs.len() - 1];
    let (data, tail) = read(&s, path);
    assert_eq!(tail, kept.last().unwrap().1, "the torn record is gone");
    assert_eq!(data, concat(kept), "every earlier acknowledged byte is intact");
    // The log resumes cleanly: new writes land at the tail and survive.
    let after = append(&s, path, b"after-repair\n");
    assert_eq!(after, tail + 13);
    s.kill();
    let s = start(dir, SMALL);
    let (data2, tail2) = read(&s, path);
    assert_eq!(tail2, after);
    let mut want = concat(kept);
    want.extend_from_slice(b"after-repair\n");
    assert_eq!(data2, want);
}

#[test]
fn half_written_tail_record_is_dropped() {
    // The sector holding the record's length landed, the next one did not.
    torn_tail("half-tail", |buf, (from, to)| {
        let lost = (from / SECTOR + 1) * SECTOR;
        assert!(lost < to, "the record spans a sector boundary");
        buf[lost..to.min(lost + SECTOR)].fill(0);
    });
}

#[test]
fn tail_record_whose_first_sector_was_lost_is_dropped() {
    // Sectors land in any order: the later part of the record made it,
    // the sector with its length did not.
    torn_tail("head-lost-tail", |buf, (from, _)| {
        let lost = (from / SECTOR + 1) * SECTOR;
        buf[from..lost].fill(0);
    });
}

/// Issue #5: a byte flipped inside the newest acknowledged record, whole
/// on disk with the preallocated zeros after it as after any last record,
/// is damage, not a torn tail (no sector of it was lost): the server
/// refuses to start and `sluice check` exits 1, both naming the segment and
/// the record's byte position, and nothing is truncated; restoring the
/// file brings every record back. Records within one sector and records
/// spanning two alike.
#[test]
fn flipped_byte_in_the_newest_record_refuses_to_start() {
    for size in [120, 700] {
        let tmp = TempDir::new("flip-newest");
        let dir = tmp.path();
        let mut s = start(dir, SMALL);
        let path = "/v1/stream/newest";
        let recs = fill(&s, path, 30, size);
        s.kill();
        let (seg, at) = locate(dir, &recs.last().unwrap().0);
        let original = std::fs::read(&seg).unwrap();
        let (from, _) = frames(&original).into_iter().find(|&(a, b)| a <= at && at < b).unwrap();
        let mut buf = original.clone();
        buf[at + size / 2] ^= 0x10;
        std::fs::write(&seg, &buf).unwrap();

        let named = format!("{}: damaged record at byte {from}", seg.display());
        let out = refused(dir, SMALL);
        assert!(out.contains(&named), "size {size}: {out}");
        let check = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["check", "--data-dir"])
            .arg(dir.join("data"))
            .output()
            .expect("run sluice check");
        let said = String::from_utf8_lossy(&check.stdout);
        assert_eq!(check.status.code(), Some(1), "size {size}: {said}");
        assert!(said.contains("DAMAGED") && said.contains(&named), "size {size}: {said}");
        assert_eq!(std::fs::read(&seg).unwrap(), buf, "size {size}: the damaged record was changed");

        std::fs::write(&seg, &original).unwrap();
        let s = start(dir, SMALL);
        assert_eq!(read(&s, path).0, concat(&recs), "size {size}");
    }
}

/// A write into a preallocated segment never shortens the file: a segment
/// cut short is a file fault, refused with the file named, even at the tail.
#[test]
fn truncated_newest_segment_refuses_to_start() {
    let tmp = TempDir::new("truncated-tail");
    let dir = tmp.path();
    let mut s = start(dir, SMALL);
    let recs = fill(&s, "/v1/stream/cut", 30, 120);
    s.kill();
    let (seg, at) = locate(dir, &recs.last().unwrap().0);
    std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(at as u64 + 30).unwrap();
    let out = refused(dir, SMALL);
    assert!(out.contains(&seg.display().to_string()) && out.contains("truncated"), "{out}");
}

// ------------------------------------------------------------------ holes

#[test]
fn bit_flip_before_valid_records_refuses_to_start() {
    let tmp = TempDir::new("bitflip");
    let dir = tmp.path();
    let mut s = start(dir, SMALL);
    let recs = fill(&s, "/v1/stream/flip", 30, 100);
    s.kill();
    let (seg, at) = locate(dir, &recs[10].0);
    let original = std::fs::read(&seg).unwrap();
    let mut buf = original.clone();
    buf[at + 50] ^= 0x01;
    std::fs::write(&seg, &buf).unwrap();

    let t = Instant::now();
    let out = refused(dir, SMALL);
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(out.contains(&seg.display().to_string()), "message names the file: {out}");
    assert!(out.contains("damaged record at byte"), "{out}");

    // The refusal changed nothing: with the file restored all data is back.
    std::fs::write(&seg, &original).unwrap();
    let s = start(dir, SMALL);
    assert_eq!(read(&s, "/v1/stream/flip").0, concat(&recs));
}

#[test]
fn zeroed_record_before_valid_records_refuses_to_start() {
    // A lost block reads as zeros, like the unwritten end of a segment.
    let tmp = TempDir::new("zeroed");
    let dir = tmp.path();
    let mut s = start(dir, SMALL);
    let recs = fill(&s, "/v1/stream/zeroed", 30, 100);
    s.kill();
    let (seg, at) = locate(dir, &recs[10].0);
    let mut buf = std::fs::read(&seg).unwrap();
    let (from, to) = frames(&buf).into_iter().find(|&(a, b)| a <= at && at < b).unwrap();
    buf[from..to].fill(0);
    std::fs::write(&seg, &buf).unwrap();
    let out = refused(dir, SMALL);
    assert!(out.contains(&seg.display().to_string()), "message names the file: {out}");
    assert!(out.contains(&format!("zeroed record at byte {from}")), "{out}");
}

#[test]
fn missing_or_damaged_older_segment_refuses_to_start() {
    const SMALL: &[&str] = TINY;
    let tmp = TempDir::new("missing");
    let dir = tmp.path();
    let mut s = start(dir, TINY);
    let path = "/v1/stream/many-segments";
    let recs = fill(&s, path, 48, 8000);
    s.kill();
    let (last_seg, _) = locate(dir, &recs.last().unwrap().0);
    assert!(segment_no(&last_seg) >= 4, "expected several segments, newest is {}", last_seg.display());

    // A segment in the middle.
    let seg2 = sibling(&last_seg, 2);
    let saved = std::fs::read(&seg2).unwrap();
    std::fs::remove_file(&seg2).unwrap();
    let out = refused(dir, SMALL);
    assert!(out.contains(&seg2.display().to_string()), "message names the missing file: {out}");
    assert!(out.contains("segment 2 is missing"), "{out}");
    std::fs::write(&seg2, &saved).unwrap();

    // The first segment.
    let seg1 = sibling(&last_seg, 1);
    let saved1 = std::fs::read(&seg1).unwrap();
    std::fs::remove_file(&seg1).unwrap();
    let out = refused(dir, SMALL);
    assert!(out.contains(&seg1.display().to_string()), "message names the missing file: {out}");
    assert!(out.contains("segment 1 is missing"), "{out}");
    std::fs::write(&seg1, &saved1).unwrap();

    // Damage at the very end of an older segment is not a torn tail: newer
    // segments hold acknowledged records.
    let mut buf = saved.clone();
    let (from, to) = *frames(&buf).last().unwrap();
    buf[(from + to) / 2] ^= 0x04;
    std::fs::write(&seg2, &buf).unwrap();
    let out = refused(dir, SMALL);
    assert!(out.contains(&seg2.display().to_string()), "message names the file: {out}");
    std::fs::write(&seg2, &saved).unwrap();

    // Restored: everything is there.
    let s = start(dir, SMALL);
    let (data, tail) = read(&s, path);
    assert_eq!(tail, recs.last().unwrap().1);
    assert_eq!(data, concat(&recs));
}
