//! Space: the flusher moves stream bytes into stream files and deletes the
//! journal behind them, so an old long-lived stream pins nothing; deleted and
//! expired streams' files go, retained-away bytes are hole-punched, and a
//! restart afterwards finds every live stream and bucket intact.

mod common;

use common::{eventually, offset, Server, TempDir};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

const TEXT: &str = "text/plain";
const FLAGS: [&str; 4] = ["--segment-bytes", "65536", "--flush-interval", "100ms"];

/// Journal segment numbers of shard 0, ascending.
fn segments(data: &Path) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir(data.join("shard-0"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".seg")?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// Bytes the file system really holds for shard 0's stream files (holes excluded).
fn stream_file_blocks(data: &Path) -> u64 {
    std::fs::read_dir(data.join("shard-0/streams"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().blocks() * 512)
        .sum()
}

fn fill(s: &Server, path: &str, appends: usize) {
    s.put(path, TEXT, b"").expect(201);
    let chunk = vec![b'x'; 20_000];
    for _ in 0..appends {
        s.post(path, TEXT, &chunk).expect(204);
    }
}

#[test]
fn an_old_live_stream_pins_nothing_and_deletes_give_space_back() {
    let dir = TempDir::new("space-delete");
    let mut s = Server::start_in(dir.path(), 1, &FLAGS);
    // A bucket and a stream created first: their records sit in the oldest segment.
    s.req("PUT", "/keepers", &[], b"").expect(201);
    s.put("/keepers/old", TEXT, b"old").expect(201);
    fill(&s, "/v1/stream/big", 12);
    let first = segments(dir.path())[0];
    eventually("the journal before the flush is deleted", || segments(dir.path())[0] > first);
    eventually("the big stream is in its stream file", || stream_file_blocks(dir.path()) >= 240_000);
    s.delete("/v1/stream/big").expect(204);
    eventually("the deleted stream's files are gone", || stream_file_blocks(dir.path()) < 64 << 10);
    s.restart_after_kill();
    assert_eq!(s.get("/keepers/old").expect(200).text(), "old");
    s.get("/v1/stream/big").expect(404);
    let v = s.get("/keepers").expect(200).json();
    assert_eq!(v["streams"], 1, "the bucket survives in the checkpoint: {v}");
}

#[test]
fn retained_away_bytes_are_given_back() {
    let dir = TempDir::new("space-retention");
    let s = Server::start_in(dir.path(), 1, &FLAGS);
    s.req("PUT", "/keep", &[], b"").expect(201);
    fill(&s, "/keep/r", 20);
    eventually("the stream is in its stream file", || stream_file_blocks(dir.path()) >= 400_000);
    let at = offset(18 * 20_000);
    s.req("PUT", &format!("/keep/r/snapshot/{at}"), &[("Content-Type", TEXT)], b"state").expect(204);
    s.req("PUT", &format!("/keep/r/retention/{at}"), &[], b"").expect(204);
    eventually("90% of the stream is hole-punched", || stream_file_blocks(dir.path()) < 100_000);
    let tail = s.get(&format!("/keep/r?offset={at}")).expect(200);
    assert_eq!(tail.body.len(), 40_000, "the retained bytes are still served");
    s.get(&format!("/keep/r?offset={}", offset(0))).expect(410);
}

#[test]
fn expired_streams_free_space_too() {
    let dir = TempDir::new("space-ttl");
    let s = Server::start_in(dir.path(), 1, &FLAGS);
    s.req("PUT", "/v1/stream/short", &[("content-type", TEXT), ("stream-ttl", "1")], b"").expect(201);
    let chunk = vec![b'y'; 20_000];
    for _ in 0..8 {
        s.post("/v1/stream/short", TEXT, &chunk).expect(204);
    }
    eventually("the stream is in its stream file", || stream_file_blocks(dir.path()) >= 160_000);
    std::thread::sleep(Duration::from_millis(1100));
    // Touching the expired stream deletes it; the next flushes free its files.
    s.get("/v1/stream/short").expect(404);
    eventually("the expired stream's files are gone", || stream_file_blocks(dir.path()) < 16 << 10);
}
