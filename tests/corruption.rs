//! Torn writes and damaged segments, against the real binary.
//!
//! Each test writes acknowledged data, stops the server with SIGKILL, damages
//! files under `DIR/shard-N/*.seg` by hand, and restarts it:
//!
//! - a torn or truncated record at the tail of the newest segment (the
//!   preallocated next segment is there, all zeros) is dropped and the server
//!   starts with every earlier acknowledged byte, and keeps writing correctly;
//! - a flipped bit, or a zeroed record, in the middle of a segment with valid
//!   records after it, damage at the tail of an older segment, and a missing
//!   segment (first or middle) make the server refuse to start with a
//!   non-zero exit and a message naming the file; restoring the file brings
//!   everything back.
//!
//! Self-contained: a tiny std::net HTTP client, no shared test helpers.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// ------------------------------------------------------------------ helpers

/// Small segments keep preallocation quick.
const SMALL: &[&str] = &["--segment-bytes", "1048576"];
/// Several segments from a few hundred KiB of data.
const TINY: &[&str] = &["--segment-bytes", "65536"];

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    fn next_offset(&self) -> u64 {
        let v = self.header("stream-next-offset").expect("Stream-Next-Offset");
        v.rsplit('_').next().unwrap().parse().unwrap()
    }
}

/// One request on its own connection (`Connection: close`).
fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> std::io::Result<Resp> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(req.as_bytes())?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no response head in {:?}", String::from_utf8_lossy(&raw))))?;
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[end + 4..].to_vec();
    if let Some(n) = headers.iter().find(|(k, _)| k == "content-length").map(|(_, v)| v.parse::<usize>().unwrap()) {
        body.truncate(n);
    }
    Ok(Resp { status, headers, body })
}

struct Server {
    child: Child,
    port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-corruption-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Starts the server on `dir/data`; `Err` carries the exit status and output
/// when it refuses to start.
fn try_start(dir: &Path, extra: &[&str]) -> Result<Server, (Option<i32>, String)> {
    let log_path = dir.join("server.log");
    for _ in 0..5 {
        let port = free_port();
        let log = std::fs::File::create(&log_path).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--shards", "2", "--data-dir"])
            .arg(dir.join("data"))
            .args(extra)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait().unwrap() {
                let out = std::fs::read_to_string(&log_path).unwrap_or_default();
                if out.contains("address already in use") {
                    break;
                }
                return Err((status.code(), out));
            }
            if http(port, "GET", "/v1/healthz", &[], b"").is_ok_and(|r| r.status == 200) {
                return Ok(Server { child, port });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if child.try_wait().unwrap().is_none() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("server did not start within 15 s");
        }
    }
    panic!("no free port");
}

fn start(dir: &Path, extra: &[&str]) -> Server {
    try_start(dir, extra).unwrap_or_else(|(code, out)| panic!("server refused to start ({code:?}): {out}"))
}

impl Server {
    fn kill9(mut self) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
    }

    fn req(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        http(self.port, method, path, headers, body).unwrap()
    }

    /// Appends and returns the acknowledged Stream-Next-Offset.
    fn append(&self, path: &str, body: &[u8]) -> u64 {
        let r = self.req("POST", path, &[("Content-Type", "text/plain")], body);
        assert_eq!(r.status, 204, "append: {}", String::from_utf8_lossy(&r.body));
        r.next_offset()
    }

    /// The whole stream (small streams: one response) and its tail.
    fn read(&self, path: &str) -> (Vec<u8>, u64) {
        let r = self.req("GET", &format!("{path}?offset=-1"), &[], b"");
        assert_eq!(r.status, 200, "read: {}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.header("stream-up-to-date"), Some("true"));
        let tail = r.next_offset();
        (r.body, tail)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
        let next = s.append(path, &body);
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
        Err((code, out)) => {
            assert_ne!(code, Some(0), "refusal must exit non-zero: {out}");
            out
        }
    }
}

// ------------------------------------------------------------------ torn tails

/// Damages the last record (`body` at `at` in `seg`) and checks the restart.
fn torn_tail(name: &str, damage: impl FnOnce(&Path, usize)) {
    let dir = temp_dir(name);
    let s = start(&dir, SMALL);
    let path = "/v1/stream/torn";
    let recs = fill(&s, path, 30, 120);
    s.kill9();
    let (last_body, _) = recs.last().unwrap();
    let (seg, at) = locate(&dir, last_body);
    // The newest segment with records is followed by the preallocated next one.
    let next = sibling(&seg, segment_no(&seg) + 1);
    assert!(next.exists(), "expected a preallocated {}", next.display());
    assert!(std::fs::read(&next).unwrap().iter().all(|b| *b == 0));
    damage(&seg, at);

    let s = start(&dir, SMALL);
    let kept = &recs[..recs.len() - 1];
    let (data, tail) = s.read(path);
    assert_eq!(tail, kept.last().unwrap().1, "the torn record is gone");
    assert_eq!(data, concat(kept), "every earlier acknowledged byte is intact");
    // The log resumes cleanly: new writes land at the tail and survive.
    let after = s.append(path, b"after-repair\n");
    assert_eq!(after, tail + 13);
    s.kill9();
    let s = start(&dir, SMALL);
    let (data2, tail2) = s.read(path);
    assert_eq!(tail2, after);
    let mut want = concat(kept);
    want.extend_from_slice(b"after-repair\n");
    assert_eq!(data2, want);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn corrupt_tail_record_is_dropped() {
    torn_tail("corrupt-tail", |seg, at| {
        let mut buf = std::fs::read(seg).unwrap();
        buf[at + 40] ^= 0x10;
        std::fs::write(seg, buf).unwrap();
    });
}

#[test]
fn half_written_tail_record_is_dropped() {
    // The second half of the record never reached the disk.
    torn_tail("half-tail", |seg, at| {
        let mut buf = std::fs::read(seg).unwrap();
        buf[at + 60..at + 120].fill(0);
        std::fs::write(seg, buf).unwrap();
    });
}

#[test]
fn truncated_tail_record_is_dropped() {
    torn_tail("truncated-tail", |seg, at| {
        let f = std::fs::OpenOptions::new().write(true).open(seg).unwrap();
        f.set_len(at as u64 + 30).unwrap();
    });
}

// ------------------------------------------------------------------ holes

#[test]
fn bit_flip_before_valid_records_refuses_to_start() {
    let dir = temp_dir("bitflip");
    let s = start(&dir, SMALL);
    let recs = fill(&s, "/v1/stream/flip", 30, 100);
    s.kill9();
    let (seg, at) = locate(&dir, &recs[10].0);
    let original = std::fs::read(&seg).unwrap();
    let mut buf = original.clone();
    buf[at + 50] ^= 0x01;
    std::fs::write(&seg, &buf).unwrap();

    let t = Instant::now();
    let out = refused(&dir, SMALL);
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(out.contains(&seg.display().to_string()), "message names the file: {out}");
    assert!(out.contains("damaged record at byte"), "{out}");

    // The refusal changed nothing: with the file restored all data is back.
    std::fs::write(&seg, &original).unwrap();
    let s = start(&dir, SMALL);
    assert_eq!(s.read("/v1/stream/flip").0, concat(&recs));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn zeroed_record_before_valid_records_refuses_to_start() {
    // A lost block reads as zeros, like the unwritten end of a segment.
    let dir = temp_dir("zeroed");
    let s = start(&dir, SMALL);
    let recs = fill(&s, "/v1/stream/zeroed", 30, 100);
    s.kill9();
    let (seg, at) = locate(&dir, &recs[10].0);
    let mut buf = std::fs::read(&seg).unwrap();
    let (from, to) = frames(&buf).into_iter().find(|&(a, b)| a <= at && at < b).unwrap();
    buf[from..to].fill(0);
    std::fs::write(&seg, &buf).unwrap();
    let out = refused(&dir, SMALL);
    assert!(out.contains(&seg.display().to_string()), "message names the file: {out}");
    assert!(out.contains(&format!("zeroed record at byte {from}")), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_or_damaged_older_segment_refuses_to_start() {
    const SMALL: &[&str] = TINY;
    let dir = temp_dir("missing");
    let s = start(&dir, TINY);
    let path = "/v1/stream/many-segments";
    let recs = fill(&s, path, 48, 8000);
    s.kill9();
    let (last_seg, _) = locate(&dir, &recs.last().unwrap().0);
    assert!(segment_no(&last_seg) >= 4, "expected several segments, newest is {}", last_seg.display());

    // A segment in the middle.
    let seg2 = sibling(&last_seg, 2);
    let saved = std::fs::read(&seg2).unwrap();
    std::fs::remove_file(&seg2).unwrap();
    let out = refused(&dir, SMALL);
    assert!(out.contains(&seg2.display().to_string()), "message names the missing file: {out}");
    assert!(out.contains("segment 2 is missing"), "{out}");
    std::fs::write(&seg2, &saved).unwrap();

    // The first segment.
    let seg1 = sibling(&last_seg, 1);
    let saved1 = std::fs::read(&seg1).unwrap();
    std::fs::remove_file(&seg1).unwrap();
    let out = refused(&dir, SMALL);
    assert!(out.contains(&seg1.display().to_string()), "message names the missing file: {out}");
    assert!(out.contains("segment 1 is missing"), "{out}");
    std::fs::write(&seg1, &saved1).unwrap();

    // Damage at the very end of an older segment is not a torn tail: newer
    // segments hold acknowledged records.
    let mut buf = saved.clone();
    let (from, to) = *frames(&buf).last().unwrap();
    buf[(from + to) / 2] ^= 0x04;
    std::fs::write(&seg2, &buf).unwrap();
    let out = refused(&dir, SMALL);
    assert!(out.contains(&seg2.display().to_string()), "message names the file: {out}");
    std::fs::write(&seg2, &saved).unwrap();

    // Restored: everything is there.
    let s = start(&dir, SMALL);
    let (data, tail) = s.read(path);
    assert_eq!(tail, recs.last().unwrap().1);
    assert_eq!(data, concat(&recs));
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}
