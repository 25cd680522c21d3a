//! Large appends through the real binary: an append of 256 KiB or more to
//! a stream that has stream files is placed in them before its journal
//! record (`sluice_placed_appends_total` counts it), reads back at once,
//! and survives SIGKILL; a stream's first bytes and smaller appends go
//! through the journal.

mod common;

use common::Server;

const CT: &str = "application/octet-stream";

fn body(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| tag.wrapping_mul(29).wrapping_add((i % 253) as u8)).collect()
}

fn placed(s: &Server) -> f64 {
    let r = s.get("/v1/metrics");
    assert_eq!(r.status, 200);
    r.text()
        .lines()
        .filter(|l| l.starts_with("sluice_placed_appends_total{"))
        .map(|l| l.rsplit_once(' ').expect("a sample").1.parse::<f64>().expect("a number"))
        .sum()
}

#[test]
fn large_appends_are_placed_and_survive_sigkill() {
    let mut s = Server::start();
    let path = "/v1/stream/large";
    s.create(path, CT);
    let mut want = Vec::new();
    // The first bytes go to the journal (the stream has no files yet); the
    // next large append has a flush store them, then is placed, as is the
    // one after; the small one between goes to the journal.
    for (tag, len) in [(1, 300 << 10), (2, 300 << 10), (3, 1 << 20), (4, 100), (5, 256 << 10)] {
        let b = body(tag, len);
        want.extend_from_slice(&b);
        let r = s.post(path, CT, &b);
        assert_eq!(r.status, 204, "{}", r.text());
    }
    assert_eq!(placed(&s), 3.0);
    assert_eq!(s.read_all(path).0, want);
    s.restart_after_kill();
    assert_eq!(s.read_all(path).0, want, "after SIGKILL");
    let more = body(6, 512 << 10);
    want.extend_from_slice(&more);
    assert_eq!(s.post(path, CT, &more).status, 204);
    s.restart_after_kill();
    assert_eq!(s.read_all(path).0, want, "after a second SIGKILL");
}
