//! A data dir an earlier release wrote starts under this one and reads
//! back as it was: `tests/fixtures/data-v4` was written by sluice at
//! 9ac100c (checkpoint format 4, one shard, 64 KiB segments) with the
//! README's examples (a bucket, a text stream with a producer, attributes,
//! a snapshot and retention, a JSON stream with a TTL of 100 years, so
//! that it outlives the fixture, its fork, a closed
//! stream of an uncommon content type), then stopped cleanly (its webhook
//! keys left out: a start makes them when missing). After a
//! clean stop under this release the checkpoint is rewritten in the
//! current format, and the next start reads the same.

mod common;
use common::*;

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/data-v4");

/// Copies directory `from` into `to`, recursively.
fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create dir");
    for e in std::fs::read_dir(from).expect("read fixture dir") {
        let e = e.expect("entry");
        let target = to.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy fixture file");
        }
    }
}

/// The checkpoint's format version (the u32 after its 8-byte magic).
fn checkpoint_version(data: &std::path::Path) -> u32 {
    let b = std::fs::read(data.join("shard-0/checkpoint")).expect("a checkpoint");
    assert_eq!(&b[..8], b"SLUICECK");
    u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"))
}

/// Everything the fixture's writer left, as this server serves it.
#[track_caller]
fn assert_as_written(s: &Server) {
    let run = s.get("/agents/run-1?offset=-1");
    assert_eq!((run.status, run.text().as_str()), (200, "once"), "retained from the snapshot at 5");
    assert_eq!(run.h("content-type"), "text/plain");
    assert_eq!(run.next_offset(), "0000000000000000_0000000000000009");
    let below = s.get("/agents/run-1?offset=0000000000000000_0000000000000000");
    assert_eq!(below.status, 410, "below retention");
    let snap = s.get("/agents/run-1/snapshot");
    assert_eq!(snap.status, 307);
    assert_eq!(snap.h("location"), "/agents/run-1/snapshot/0000000000000000_0000000000000005");
    let blob = s.get("/agents/run-1/snapshot/0000000000000000_0000000000000005");
    assert_eq!((blob.status, blob.text().as_str()), (200, "state after hello"));
    assert_eq!(s.get("/agents/run-1/attrs").text(), r#"{"title":"Run 1"}"#);

    for path in ["/v1/stream/chat/42", "/v1/stream/chat/42-alt"] {
        let r = s.get(&format!("{path}?offset=-1"));
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.text(), r#"[{"step":1},{"step":2},{"step":3}]"#, "{path}");
        assert_eq!(r.h("content-type"), "application/json", "{path}");
    }
    assert_eq!(s.head("/v1/stream/chat/42").h("stream-ttl"), "3153600000");

    let closed = s.get("/agents/closed-one?offset=-1");
    assert_eq!((closed.status, closed.text().as_str()), (200, "last"));
    assert_eq!(closed.h("content-type"), "application/x-custom-type", "a type with no code keeps its text");
    assert_eq!(closed.h("stream-closed"), "true");

    let bucket = s.get("/agents").text();
    assert!(bucket.contains(r#""streams":2"#), "{bucket}");
}

#[test]
fn a_data_dir_of_checkpoint_format_4_starts_and_reads_back() {
    let dir = TempDir::new("upgrade");
    let data = dir.path().join("data");
    copy_dir(std::path::Path::new(FIXTURE), &data);
    assert_eq!(checkpoint_version(&data), 4, "the fixture is what the earlier release wrote");
    let mut s = Server::start_in(&data, 1, &["--segment-bytes", "64KiB"]);
    s.hold(&dir);
    assert_as_written(&s);
    // The producer's sequence 0 is remembered: a retry is a duplicate.
    let hs = [("Content-Type", "text/plain"), ("Producer-Id", "w1"), ("Producer-Epoch", "0"), ("Producer-Seq", "0")];
    assert_eq!(s.req("POST", "/agents/run-1", &hs, b"once").status, 204);

    assert!(s.terminate().success());
    assert_eq!(checkpoint_version(&data), 5, "a clean stop writes the current format");
    s.start_again();
    assert_as_written(&s);
    assert_eq!(s.req("POST", "/agents/run-1", &hs, b"once").status, 204, "still a duplicate");
    let next = [("Content-Type", "text/plain"), ("Producer-Id", "w1"), ("Producer-Epoch", "0"), ("Producer-Seq", "1")];
    assert_eq!(s.req("POST", "/agents/run-1", &next, b"!").status, 200, "the next sequence is new");
    assert_eq!(s.get("/agents/run-1?offset=-1").text(), "once!");
}
