//! Memory bounds under hostile clients, against the real binary: Producer-Id
//! length and producers remembered per stream, readers that stop reading,
//! and connections handed between shards under --max-connections.

mod common;

use common::{sse_events, Server};
use std::time::Duration;

fn producer(s: &Server, id: &str, seq: u64, body: &[u8]) -> u16 {
    let seq = seq.to_string();
    let h = [("Content-Type", "text/plain"), ("Producer-Id", id), ("Producer-Epoch", "0"), ("Producer-Seq", &seq)];
    s.req("POST", "/v1/stream/p", &h, body).status
}

#[test]
fn producer_id_longer_than_the_limit_is_refused() {
    let s = Server::start_with(&["--max-producer-id-bytes", "16"]);
    s.create("/v1/stream/p", "text/plain");
    assert_eq!(producer(&s, &"x".repeat(17), 0, b"a"), 400);
    assert_eq!(s.read_all("/v1/stream/p").0, b"");
    assert_eq!(producer(&s, &"x".repeat(16), 0, b"a"), 200);
}

#[test]
fn least_recently_written_producer_is_forgotten_live_and_after_restart() {
    let mut s = Server::start_with(&["--max-producers", "2"]);
    s.create("/v1/stream/p", "text/plain");
    assert_eq!(producer(&s, "a", 0, b"a0"), 200);
    assert_eq!(producer(&s, "b", 0, b"b0"), 200);
    assert_eq!(producer(&s, "c", 0, b"c0"), 200); // forgets a
                                                  // b is remembered: a retry is deduplicated; a is forgotten: seq 1 is a gap.
    assert_eq!(producer(&s, "b", 0, b"b0"), 204);
    assert_eq!(producer(&s, "a", 1, b"a1"), 409);
    s.restart_after_kill();
    // Replay forgets the same producer.
    assert_eq!(producer(&s, "b", 0, b"b0"), 204);
    assert_eq!(producer(&s, "c", 0, b"c0"), 204);
    assert_eq!(producer(&s, "a", 1, b"a1"), 409);
    // A forgotten producer starting over is new again (and forgets b).
    assert_eq!(producer(&s, "a", 0, b"a0"), 200);
    assert_eq!(producer(&s, "b", 1, b"b1"), 409);
    assert_eq!(producer(&s, "c", 1, b"c1"), 200);
    assert_eq!(s.read_all("/v1/stream/p").0, b"a0b0c0a0c1");
}

/// Writes `total` bytes to a new text stream in 64 KiB appends.
fn fill(s: &Server, path: &str, total: usize) {
    s.create(path, "text/plain");
    let chunk = vec![b'z'; 64 * 1024];
    for _ in 0..total / chunk.len() {
        s.post(path, "text/plain", &chunk).expect(204);
    }
}

/// Each read builds at most --max-read-bytes; a response holds at most
/// --max-response-bytes (set equal here, so one response is one read).
#[test]
fn one_read_builds_at_most_max_read_bytes() {
    let s = Server::start_with(&["--max-read-bytes", "131072", "--max-response-bytes", "131072"]);
    fill(&s, "/v1/stream/big", 1024 * 1024);
    let r = s.get("/v1/stream/big?offset=-1").expect(200);
    assert_eq!(r.body.len(), 131072);
    assert_eq!(r.header("stream-up-to-date"), None);
    assert_eq!(s.read_all("/v1/stream/big").0.len(), 1024 * 1024);
    // SSE: each data event carries at most the bound.
    let mut c = s.connect();
    c.send(&common::build("GET", "/v1/stream/big?offset=-1&live=sse", &[], b"")).unwrap();
    let mut raw = Vec::new();
    let mut seen = 0;
    while seen < 1024 * 1024 {
        raw.extend(c.read_until(b"event: control").unwrap());
        raw.extend(c.read_until(b"\n\n").unwrap());
        let data: usize = sse_events(&raw).iter().filter(|(e, _)| e == "data").map(|(_, d)| d.len()).sum();
        seen = data;
    }
    let events = sse_events(&raw[raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4..]);
    for (e, d) in &events {
        assert!(e != "data" || d.len() <= 131072, "SSE data event of {} bytes", d.len());
    }
    assert!(events.iter().filter(|(e, _)| e == "data").count() >= 8);
}

#[test]
fn one_message_larger_than_max_read_bytes_is_cut_at_a_character_boundary() {
    let s = Server::start_with(&["--max-read-bytes", "131071", "--max-response-bytes", "131071"]);
    let text = "é".repeat(150_000);
    s.put("/v1/stream/wide", "text/plain; charset=utf-8", text.as_bytes()).expect(201);
    let r = s.get("/v1/stream/wide?offset=-1").expect(200);
    assert_eq!(r.body.len(), 131070);
    assert!(std::str::from_utf8(&r.body).is_ok());
    assert_eq!(s.read_all("/v1/stream/wide").0, text.as_bytes());
    s.put("/v1/stream/bin", "application/octet-stream", &vec![7u8; 300_000]).expect(201);
    assert_eq!(s.get("/v1/stream/bin?offset=-1").expect(200).body.len(), 131071);
    assert_eq!(s.read_all("/v1/stream/bin").0.len(), 300_000);
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS value")
}

#[test]
fn readers_that_stop_reading_hold_a_bounded_amount() {
    // 20 readers of a 16 MiB stream that never read. Unbounded, each would
    // hold up to a full 8 MiB read (plus its SSE encoding) in the server.
    let s = Server::start_with(&["--max-read-bytes", "262144", "--idle-timeout", "60s"]);
    fill(&s, "/v1/stream/stall", 16 * 1024 * 1024);
    let before = rss_kib(s.pid());
    let mut readers = Vec::new();
    for i in 0..20 {
        let mut c = s.connect();
        let path = if i % 2 == 0 { "/v1/stream/stall?offset=-1&live=sse" } else { "/v1/stream/stall?offset=-1" };
        // Pipelined catch-up requests: the server answers one after another.
        let req = common::build("GET", path, &[], b"");
        for _ in 0..if i % 2 == 0 { 1 } else { 64 } {
            c.send(&req).unwrap();
        }
        readers.push(c);
    }
    std::thread::sleep(Duration::from_secs(2));
    let grown_mib = rss_kib(s.pid()).saturating_sub(before) / 1024;
    assert!(grown_mib < 48, "20 stalled readers grew the server by {grown_mib} MiB");
    assert_eq!(s.get("/v1/healthz").status, 200);
    drop(readers);
}

#[test]
fn handed_off_connections_count_against_max_connections() {
    let s = Server::start_with(&["--max-connections", "1"]);
    // One idle connection fills the shard it landed on (call it X).
    // (The start-up health probe's connection may still be closing.)
    let mut p = (0..50)
        .find_map(|_| {
            let mut c = s.connect();
            let ok = c.try_request("GET", "/v1/healthz", &[], b"").is_ok_and(|r| r.status == 200);
            std::thread::sleep(Duration::from_millis(20));
            ok.then_some(c)
        })
        .expect("a first connection");
    // Streams in both shards, each with data, created through p (forwarded
    // as needed: forwarding keeps the connection where it is).
    let paths: Vec<String> = (0..16).map(|i| format!("/v1/stream/h{i}")).collect();
    for path in &paths {
        assert_eq!(p.request("PUT", path, &[("Content-Type", "text/plain")], b"x").status, 201);
    }
    // A catch-up SSE read the owner cannot relay moves its connection to the
    // owner. A connection accepted by the other shard (Y) asking for a stream
    // X owns is handed to X, which is full: 503. One for a stream Y owns is
    // served (200); so across the streams of both shards exactly the ones X
    // owns are refused.
    let (mut refused, mut served) = (0, 0);
    for path in &paths {
        let mut c = (0..50)
            .map(|_| s.connect())
            .find_map(|mut c| (c.try_request("GET", "/v1/healthz", &[], b"").ok()?.status == 200).then_some(c))
            .expect("a connection on the other shard");
        c.send(&common::build("GET", &format!("{path}?offset=-1&live=sse"), &[], b"")).expect("write");
        let head = c.read_until(b"\r\n").expect("a status line");
        match String::from_utf8_lossy(&head).split(' ').nth(1) {
            Some("503") => refused += 1,
            Some("200") => served += 1,
            other => panic!("unexpected answer {other:?}"),
        }
    }
    assert!(refused > 0 && served > 0, "refused {refused}, served {served}: both shards own some of the streams");
    // The full shard still serves the connection it holds.
    assert_eq!(p.request("GET", "/v1/healthz", &[], b"").status, 200);
}
