//! A low open-files limit: the server shares it out among shards (cached
//! stream files and connections), closes cached descriptors when the
//! process runs out instead of failing, keeps flushing and serving every
//! stream, keeps its log short, and stops on SIGTERM.

mod common;

use common::{Launch, Server, TempDir};
use std::time::Duration;

/// Far below what 2 shards x --max-connections 10000 want.
const LIMIT: u64 = 256;
/// Two files each: several times the descriptors the limit allows.
const STREAMS: usize = 600;

#[test]
fn a_low_open_files_limit_keeps_serving_and_flushing() {
    let dir = TempDir::new("nofile");
    let log = dir.path().join("server.log");
    let launch = Launch { open_files: Some(LIMIT), ..Launch::logged(&log, &["--flush-interval", "100ms"]) };
    let mut s = Server::launch(&dir.path().join("data"), launch);
    let out = std::fs::read_to_string(&log).unwrap();
    assert!(out.contains(&format!("the open-files limit {LIMIT} leaves each of the 2 shards")), "{out}");
    let mut c = s.connect();
    for i in 0..STREAMS {
        let path = format!("/v1/stream/many/{i}");
        c.request("PUT", &path, &[("Content-Type", "text/plain")], format!("s{i};").as_bytes()).expect(201);
    }
    s.wait_flushed();
    for i in 0..STREAMS {
        let r = c.request("GET", &format!("/v1/stream/many/{i}?offset=-1"), &[], b"");
        assert_eq!(r.expect(200).body, format!("s{i};").as_bytes(), "stream {i}");
    }
    for i in (0..STREAMS).step_by(7) {
        c.request("POST", &format!("/v1/stream/many/{i}"), &[("Content-Type", "text/plain")], b"more;").expect(204);
    }
    s.wait_flushed();
    for i in (0..STREAMS).step_by(7) {
        let r = c.request("GET", &format!("/v1/stream/many/{i}?offset=-1"), &[], b"");
        assert_eq!(r.expect(200).body, format!("s{i};more;").as_bytes(), "stream {i}");
    }
    drop(c);
    s.get("/v1/healthz").expect(200);
    let (status, took) = s.sigterm(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(5), "SIGTERM took {took:?}");
    let size = std::fs::metadata(&log).unwrap().len();
    assert!(size < 64 << 10, "the log grew to {size} bytes:\n{}", std::fs::read_to_string(&log).unwrap());
}
