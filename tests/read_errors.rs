//! A stream file or bundle cut short under the server (it ends before
//! bytes the flush recorded) gets one answer on every read path: 500
//! naming the stream and the file (never 404, never a hang, never a retry
//! that cannot help), and an SSE stream ends after its last complete
//! event. The server stays up.

mod common;

use common::{build, offset, Server, TempDir};

#[test]
fn shortened_stream_files_answer_500_naming_them_on_every_read_path() {
    let dir = TempDir::new("read-errors");
    let s = Server::start_in(dir.path(), 1, &["--flush-interval", "100ms"]);
    s.req("PUT", "/reads", &[], b"").expect(201);
    let p = "/reads/s";
    s.put(p, "text/plain", b"hello").expect(201);
    s.req("PUT", &format!("{p}/snapshot/{}", offset(5)), &[("Content-Type", "text/plain")], b"SNAP").expect(204);
    s.post(p, "text/plain", b" world").expect(204);
    // Once flushed, every byte in the shard's stream files is gone from
    // under it: the stream's bytes in a bundle (it is small), its snapshot.
    s.wait_flushed();
    let shard = dir.path().join("shard-0");
    let files = |d: &str| std::fs::read_dir(shard.join(d)).unwrap().map(|e| e.unwrap().path()).collect::<Vec<_>>();
    let (streams, bundles) = (files("streams"), files("bundles"));
    assert_eq!((streams.len(), bundles.len()), (1, 1), "the snapshot file, and one bundle");
    for path in streams.iter().chain(&bundles) {
        std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(0).unwrap();
    }
    for (target, file) in [
        (format!("{p}?offset=-1"), "bundles/00000001.bundle"),
        (format!("{p}?offset=-1&live=long-poll"), "bundles/00000001.bundle"),
        (format!("{p}/bootstrap"), "streams/0000000000000000.0000000000000001.snap"),
        (format!("{p}/snapshot/{}", offset(5)), "streams/0000000000000000.0000000000000001.snap"),
    ] {
        let r = s.get(&target).expect(500);
        let text = r.text();
        assert!(text.starts_with("stream reads/s is damaged: short read: 0 of "), "{target}: {text}");
        assert!(text.contains(&format!(" of shard-0/{file}")), "{target}: {text}");
        assert!(!r.has("retry-after"), "{target}");
    }
    // SSE: the head was sent before the read; the stream ends without a
    // partial or empty data event.
    let mut c = s.connect();
    c.send(&build("GET", &format!("{p}?offset=-1&live=sse"), &[], b"")).unwrap();
    let raw = c.read_to_eof().expect("the server ends the event stream");
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(!text.contains("event:"), "no event after a failed read: {text}");
    // Metadata does not read stream files, and the server keeps serving.
    assert_eq!(s.head(p).expect(200).next_offset(), offset(11));
    s.get("/v1/healthz").expect(200);
}

/// A stream file that cannot be read at all (here a directory where the
/// file was, put there while the server was stopped cleanly, so the next
/// start trusts the files without opening them) answers 503 with a short
/// reason and Retry-After on every read path; the server stays up.
#[test]
fn unreadable_stream_files_answer_503_on_every_read_path() {
    let dir = TempDir::new("unreadable");
    let mut s = Server::start_in(dir.path(), 1, &["--flush-interval", "100ms"]);
    s.req("PUT", "/reads", &[], b"").expect(201);
    let p = "/reads/s";
    s.put(p, "text/plain", b"hello").expect(201);
    s.wait_flushed();
    assert!(s.terminate().success(), "a clean stop");
    for d in ["shard-0/streams", "shard-0/bundles"] {
        for entry in std::fs::read_dir(dir.path().join(d)).unwrap() {
            let path = entry.unwrap().path();
            std::fs::remove_file(&path).unwrap();
            std::fs::create_dir(&path).unwrap();
        }
    }
    s.start_again();
    for target in [format!("{p}?offset=-1"), format!("{p}?offset=-1&live=long-poll"), format!("{p}/bootstrap")] {
        let r = s.get(&target).expect(503);
        assert_eq!(r.text(), "stored data could not be read; retry later\n", "{target}");
        assert_eq!(r.h("retry-after"), "1", "{target}");
    }
    assert_eq!(s.head(p).expect(200).next_offset(), offset(5));
    s.get("/v1/healthz").expect(200);
}
