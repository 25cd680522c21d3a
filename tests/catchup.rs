//! Long catch-up reads of byte streams are streamed: one response up to
//! `--max-response-bytes`, read from the store in pieces of
//! `--max-read-bytes`, over a connection on either shard.

mod common;

use common::{offset, offset_pos, Server};
use std::io::Read;
use std::time::Duration;

/// Appends `total` bytes of `piece` repeated to `path`, in appends of `each`.
fn fill(s: &Server, path: &str, content_type: &str, piece: &[u8], each: usize, total: usize) -> Vec<u8> {
    let data: Vec<u8> = piece.iter().copied().cycle().take(total).collect();
    s.create(path, content_type);
    for part in data.chunks(each) {
        s.post(path, content_type, part).expect(204);
    }
    data
}

/// A read of more than one piece comes whole, in one response, with the
/// headers a whole response has, over new connections (which land on
/// either shard: a remote one moves to the owner); its ETag answers 304.
#[test]
fn a_long_read_is_one_response_on_either_shard() {
    let s = Server::start_with(&["--max-read-bytes", "64KiB"]);
    let data = fill(&s, "/v1/stream/long", "application/octet-stream", b"0123456789abcdefghij", 100_000, 3_000_000);
    for _ in 0..6 {
        let r = s.get("/v1/stream/long?offset=-1").expect(200);
        assert_eq!(r.body.len(), data.len());
        assert!(r.body == data, "the streamed body is the stream");
        assert_eq!(offset_pos(&r.next_offset()), data.len() as u64);
        assert_eq!(r.header("stream-up-to-date"), Some("true"));
        assert_eq!(r.h("content-type"), "application/octet-stream");
        let etag = r.h("etag").to_string();
        let again = s.req("GET", "/v1/stream/long?offset=-1", &[("if-none-match", &etag)], b"");
        assert_eq!(again.status, 304);
    }
    // From the middle, and a read that fits one piece is a whole response as before.
    let r = s.get(&format!("/v1/stream/long?offset={}", offset(1_000_000))).expect(200);
    assert!(r.body == data[1_000_000..]);
    let r = s.get(&format!("/v1/stream/long?offset={}", offset(2_990_000))).expect(200);
    assert!(r.body == data[2_990_000..]);
    // max_bytes keeps its exact meaning.
    let r = s.get("/v1/stream/long?offset=-1&max_bytes=1000").expect(200);
    assert!(r.body == data[..1000]);
}

/// Responses stop at --max-response-bytes; on a text stream the cut never
/// splits a character, and following Stream-Next-Offset reads it all.
#[test]
fn responses_stop_at_the_limit_on_a_character_boundary() {
    let s = Server::start_with(&["--max-read-bytes", "4KiB", "--max-response-bytes", "64KiB"]);
    let data = fill(&s, "/v1/stream/text", "text/plain; charset=utf-8", "aé€😀".as_bytes(), 9_999, 300_000);
    let (mut at, mut out, mut responses) = (0u64, Vec::new(), 0);
    loop {
        let r = s.get(&format!("/v1/stream/text?offset={}", offset(at))).expect(200);
        assert!(r.body.len() <= 64 << 10);
        std::str::from_utf8(&r.body).expect("every response is whole characters");
        out.extend_from_slice(&r.body);
        at = offset_pos(&r.next_offset());
        responses += 1;
        if r.header("stream-up-to-date") == Some("true") {
            break;
        }
        assert!(r.h("cache-control").starts_with("public"), "bytes below the tail are cacheable");
    }
    assert!(out == data);
    assert!(responses >= 5, "{responses} responses for {} bytes", data.len());
}

/// A stream deleted under a streamed read: the promised length cannot be
/// met, so the connection is cut, never padded or hung.
#[test]
fn a_stream_deleted_mid_response_cuts_the_connection() {
    let dir = common::TempDir::new("catchup-gone");
    let s = Server::start_in(dir.path(), 1, &["--max-read-bytes", "4KiB"]);
    let data = fill(&s, "/v1/stream/gone", "application/octet-stream", b"x", 1 << 20, 16 << 20);
    let mut c = s.connect();
    c.set_read_timeout(Duration::from_secs(10));
    c.send(&common::build("GET", "/v1/stream/gone?offset=-1", &[], b"")).unwrap();
    let mut first = [0u8; 1024];
    let n = c.sock.read(&mut first).unwrap();
    let head = String::from_utf8_lossy(&first[..n]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains(&format!("content-length: {}", data.len())), "{head}");
    s.delete("/v1/stream/gone").expect(204);
    let body_start = head.find("\r\n\r\n").expect("a whole head in the first read") + 4;
    let mut got = n - body_start;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match c.sock.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => got += k,
        }
    }
    assert!(got < data.len(), "the connection was cut: {got} of {} bytes", data.len());
}
