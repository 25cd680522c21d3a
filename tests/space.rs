//! Space reclamation: deleting and expiring streams gives whole log segments
//! back, oldest first, and a restart afterwards finds every live stream and
//! bucket intact.

mod common;

use common::{Server, TempDir};
use std::path::Path;
use std::time::{Duration, Instant};

const TEXT: &str = "text/plain";

/// Segment files of shard 0, ascending.
fn segments(data: &Path) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir(data.join("shard-0"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".seg")?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// Waits (the reclaimer runs every 2 s) until the oldest segment is past `past`.
fn wait_for_oldest_above(data: &Path, past: u32) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(8);
    loop {
        let segs = segments(data);
        if segs.first().is_some_and(|s| *s > past) || Instant::now() > deadline {
            return segs;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn fill(s: &Server, path: &str, appends: usize) {
    s.put(path, TEXT, b"").expect(201);
    let chunk = vec![b'x'; 20_000];
    for _ in 0..appends {
        s.post(path, TEXT, &chunk).expect(204);
    }
}

#[test]
fn deleted_streams_free_old_segments_and_live_ones_survive_restart() {
    let dir = TempDir::new("space-delete");
    let flags = ["--segment-bytes", "65536"];
    let mut s = Server::start_in(dir.path(), 1, &flags);
    // A bucket created first: its record sits in the oldest segment.
    s.req("PUT", "/keepers", &[], b"").expect(201);
    fill(&s, "/v1/stream/big", 12);
    s.put("/keepers/small", TEXT, b"still here").expect(201);
    let before = segments(dir.path());
    assert!(before.len() >= 4, "12 x 20 KB over 64 KiB segments: {before:?}");
    s.delete("/v1/stream/big").expect(204);
    let after = wait_for_oldest_above(dir.path(), before[0]);
    assert!(after[0] > before[0], "old segments reclaimed: {before:?} -> {after:?}");
    assert!(after.len() < before.len());
    s.restart_after_kill();
    assert_eq!(s.get("/keepers/small").expect(200).text(), "still here");
    s.get("/v1/stream/big").expect(404);
    let v = s.get("/keepers").expect(200).json();
    assert_eq!(v["streams"], 1, "the bucket record was copied forward: {v}");
}

#[test]
fn a_live_stream_in_the_oldest_segment_keeps_it() {
    let dir = TempDir::new("space-pinned");
    let s = Server::start_in(dir.path(), 1, &["--segment-bytes", "65536"]);
    s.put("/v1/stream/old", TEXT, b"old").expect(201);
    fill(&s, "/v1/stream/big", 8);
    let before = segments(dir.path());
    s.delete("/v1/stream/big").expect(204);
    std::thread::sleep(Duration::from_millis(2600));
    assert_eq!(segments(dir.path())[0], before[0], "the oldest live stream pins its segment");
    assert_eq!(s.get("/v1/stream/old").expect(200).text(), "old");
}

#[test]
fn expired_streams_free_space_too() {
    let dir = TempDir::new("space-ttl");
    let s = Server::start_in(dir.path(), 1, &["--segment-bytes", "65536"]);
    s.req("PUT", "/v1/stream/short", &[("content-type", TEXT), ("stream-ttl", "1")], b"").expect(201);
    let chunk = vec![b'y'; 20_000];
    for _ in 0..8 {
        s.post("/v1/stream/short", TEXT, &chunk).expect(204);
    }
    let before = segments(dir.path());
    std::thread::sleep(Duration::from_millis(1100));
    // Touching the expired stream deletes it; the reclaimer then frees its segments.
    s.get("/v1/stream/short").expect(404);
    let after = wait_for_oldest_above(dir.path(), before[0]);
    assert!(after[0] > before[0], "{before:?} -> {after:?}");
}
