//! The server-wide request-body budget (`--max-body-memory`): bodies that
//! would take a shard past its part get 503 with Retry-After before any of
//! their bytes are buffered, and change nothing; once bodies in progress
//! finish, their memory is given back and new bodies are accepted. Against
//! the real binary.

mod common;

use common::{build, offset, Conn, Launch, Server, TempDir};
use std::time::Duration;

const BODY: usize = 8 << 20;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS value")
}

/// An append's head announcing a body of `len` bytes.
fn post_head(len: usize) -> Vec<u8> {
    let len = len.to_string();
    build("POST", "/v1/stream/budget", &[("Content-Type", "application/octet-stream"), ("Content-Length", &len)], b"")
}

#[test]
fn bodies_beyond_the_budget_get_503_and_memory_comes_back() {
    let dir = TempDir::new("body-memory");
    // One shard, so its part is the whole budget: two 8 MiB bodies.
    let mut launch = Launch::quick(1, &["--max-body-bytes", "8MiB", "--request-timeout", "30s"]);
    // Set as an operator's environment file would (every flag has its variable).
    launch.env.push(("SLUICE_MAX_BODY_MEMORY".into(), "16MiB".into()));
    let s = Server::launch(dir.path(), launch);
    s.create("/v1/stream/budget", "application/octet-stream");
    let before = rss_kib(s.pid());
    let body = vec![b'b'; BODY];
    // Two bodies in progress, all but their last byte sent.
    let mut slow: Vec<Conn> = (0..2)
        .map(|_| {
            let mut c = s.connect();
            c.send(&post_head(BODY)).unwrap();
            c.send(&body[..BODY - 1]).unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // Eight more: each is refused before its body is read.
    for i in 0..8 {
        let mut c = Conn::open_with_timeout(s.addr, Duration::from_secs(3));
        c.send(&post_head(BODY)).unwrap();
        c.send(&body[..4096]).unwrap();
        let r = c.try_read_response(false).unwrap_or_else(|e| panic!("body {i} over the budget got no answer: {e}"));
        assert_eq!(r.status, 503, "body {i}: {}", r.text());
        assert_eq!(r.h("retry-after"), "1");
        assert!(r.text().contains("--max-body-memory"), "a short reason: {}", r.text());
    }
    // A chunked body is refused as it grows past what is free.
    let mut c = Conn::open_with_timeout(s.addr, Duration::from_secs(3));
    let chunked = [("Content-Type", "application/octet-stream"), ("Transfer-Encoding", "chunked")];
    c.send(&build("POST", "/v1/stream/budget", &chunked, b"")).unwrap();
    c.send(format!("{:x}\r\n", 64 << 10).as_bytes()).unwrap();
    c.send(&body[..64 << 10]).unwrap();
    let r = c.try_read_response(false).unwrap_or_else(|e| panic!("a chunked body over the budget got no answer: {e}"));
    assert_eq!((r.status, r.h("retry-after")), (503, "1"), "{}", r.text());
    assert_eq!(s.head("/v1/stream/budget").expect(200).next_offset(), offset(0), "nothing appended");
    let grown_mib = rss_kib(s.pid()).saturating_sub(before) / 1024;
    assert!(grown_mib < 2 * 8 + 24, "two budgeted bodies and eight refused grew the server by {grown_mib} MiB");
    // The bodies in progress finish; their memory comes back.
    for c in &mut slow {
        c.send(&body[BODY - 1..]).unwrap();
        assert_eq!(c.read_response(false).status, 204);
    }
    for _ in 0..2 {
        s.post("/v1/stream/budget", "application/octet-stream", &body).expect(204);
    }
    assert_eq!(s.head("/v1/stream/budget").expect(200).next_offset(), offset(4 * BODY as u64));
}
