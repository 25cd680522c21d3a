//! Protocol extensions through the real binary: snapshots, retention,
//! bootstrap, append-batch, stream attributes, JSON record coordinates (with
//! SSE), `max_bytes` on ordinary reads, and their durability across a kill.

mod common;

use common::{build, find, offset, sse_events, Conn, Resp, Server};
use serde_json::{json, Value};

const TEXT: &str = "text/plain";
const OCTET: &str = "application/octet-stream";
const JSON: &str = "application/json";
const RECORDS_TOKEN: &str = "json-record-coordinates-v1";

/// Starts a server and creates `bucket` on it.
fn server_with_bucket(bucket: &str) -> Server {
    let s = Server::start();
    s.req("PUT", &format!("/{bucket}"), &[], b"").expect(201);
    s
}

/// Creates a stream whose messages are `msgs`: the first as the PUT body,
/// each later one by its own POST (so every message boundary is known).
fn stream_of(s: &Server, path: &str, content_type: &str, msgs: &[&[u8]]) {
    let first = msgs.first().copied().unwrap_or(b"");
    s.put(path, content_type, first).expect(201);
    for m in msgs.iter().skip(1) {
        s.post(path, content_type, m).expect(204);
    }
}

/// An offset token with its `_` percent-encoded, as a client that encodes
/// every reserved character would send it in a path segment.
fn encoded(n: u64) -> String {
    offset(n).replace('_', "%5F")
}

/// An append-batch body: `u32_be length` + payload per frame.
fn frames(payloads: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in payloads {
        out.extend_from_slice(&u32::try_from(p.len()).expect("frame fits").to_be_bytes());
        out.extend_from_slice(p);
    }
    out
}

/// One MIME part of a bootstrap body.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    content_type: String,
    body: Vec<u8>,
}

/// Parses a `multipart/mixed` response by the boundary in its Content-Type.
#[track_caller]
fn multipart(r: &Resp) -> Vec<Part> {
    let ct = r.h("content-type");
    let mut params = ct.split(';');
    assert_eq!(params.next().map(str::trim), Some("multipart/mixed"), "{ct}");
    let boundary = params
        .filter_map(|p| p.trim().strip_prefix("boundary="))
        .next()
        .unwrap_or_else(|| panic!("no boundary in {ct}"))
        .trim_matches('"')
        .to_string();
    assert!(!boundary.is_empty() && boundary.len() <= 70, "RFC 2046 boundary length: {boundary:?}");
    let open = format!("--{boundary}");
    let delimiter = format!("\r\n--{boundary}");
    let body = &r.body;
    assert!(body.starts_with(open.as_bytes()), "body must open with the boundary: {:?}", r.text());
    let mut rest = &body[open.len()..];
    let mut parts = Vec::new();
    loop {
        if let Some(after) = rest.strip_prefix(b"--") {
            assert!(after.is_empty() || after == b"\r\n", "junk after the close delimiter: {after:?}");
            return parts;
        }
        rest = rest.strip_prefix(b"\r\n").unwrap_or_else(|| panic!("no CRLF after a delimiter: {:?}", r.text()));
        let (head, after_head) = if let Some(r) = rest.strip_prefix(b"\r\n") {
            (&b""[..], r)
        } else {
            let end = find(rest, b"\r\n\r\n").expect("part headers end");
            (&rest[..end], &rest[end + 4..])
        };
        let head = std::str::from_utf8(head).expect("part headers are UTF-8");
        let content_type = head
            .split("\r\n")
            .filter_map(|l| l.split_once(':'))
            .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-type"))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let end = find(after_head, delimiter.as_bytes()).expect("part ends with a delimiter");
        parts.push(Part { content_type, body: after_head[..end].to_vec() });
        rest = &after_head[end + delimiter.len()..];
    }
}

fn part(content_type: &str, body: &[u8]) -> Part {
    Part { content_type: content_type.to_string(), body: body.to_vec() }
}

/// Opens an SSE read and returns the connection and its lower-cased head.
fn open_sse(s: &Server, target: &str) -> (Conn, String) {
    let mut c = s.connect();
    c.send(&build("GET", target, &[], b"")).expect("send SSE request");
    let head = c.read_until(b"\r\n\r\n").expect("SSE head");
    let head = String::from_utf8(head).expect("head is UTF-8").to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    (c, head)
}

/// Reads SSE events up to and including the next control event.
fn events_through_control(c: &mut Conn) -> Vec<(String, String)> {
    let mut raw = c.read_until(b"event: control\n").expect("a control event");
    raw.extend_from_slice(&c.read_until(b"\n\n").expect("end of the control event"));
    sse_events(&raw)
}

/// NDJSON lines of a record read, parsed.
fn ndjson(r: &Resp) -> Vec<Value> {
    r.text().lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {l:?}: {e}"))).collect()
}

// ---------------------------------------------------------------------------
// 1. Snapshots
// ---------------------------------------------------------------------------

#[test]
fn snapshot_publish_is_idempotent_and_validated() {
    let s = server_with_bucket("snap");
    let p = "/snap/s";
    // Messages "abc" [0,3) and "de" [3,5): boundaries 0, 3, 5.
    stream_of(&s, p, TEXT, &[b"abc", b"de"]);

    let snap3 = format!("{p}/snapshot/{}", offset(3));
    let r = s.req("PUT", &snap3, &[("Content-Type", "application/x-state")], b"STATE-3").expect(204);
    let d1 = r.h("stream-snapshot-digest").to_string();
    assert!(d1.starts_with("sha256:") && d1.len() == 71, "{d1}");
    assert_eq!(r.h("stream-snapshot-offset"), offset(3));

    // The same publish again: 204 with the same digest.
    let r = s.req("PUT", &snap3, &[("Content-Type", "application/x-state")], b"STATE-3").expect(204);
    assert_eq!(r.h("stream-snapshot-digest"), d1);

    // Different body, or same body with another content type, at that offset: 409.
    s.req("PUT", &snap3, &[("Content-Type", "application/x-state")], b"OTHER").expect(409);
    s.req("PUT", &snap3, &[("Content-Type", "application/x-other")], b"STATE-3").expect(409);

    // Beyond the tail: 409. Inside a message: 400. Malformed tokens: 400.
    s.req("PUT", &format!("{p}/snapshot/{}", offset(6)), &[("Content-Type", TEXT)], b"x").expect(409);
    s.req("PUT", &format!("{p}/snapshot/{}", offset(1)), &[("Content-Type", TEXT)], b"x").expect(400);
    s.req("PUT", &format!("{p}/snapshot/{}", offset(4)), &[("Content-Type", TEXT)], b"x").expect(400);
    for bad in ["garbage", "-1", "now", "3", "0000000000000000-0000000000000003", "0000000000000001_0000000000000003"] {
        let r = s.req("PUT", &format!("{p}/snapshot/{bad}"), &[("Content-Type", TEXT)], b"x");
        assert_eq!(r.status, 400, "offset {bad:?}: {}", r.text());
    }
    // None of the refusals replaced the visible snapshot.
    assert_eq!(s.head(p).expect(200).h("stream-snapshot-digest"), d1);

    // Stream-Snapshot-Match: a wrong digest is refused, the current one accepted.
    let snap5 = format!("{p}/snapshot/{}", offset(5));
    s.req("PUT", &snap5, &[("Content-Type", "application/x-state"), ("Stream-Snapshot-Match", "sha256:nope")], b"S5")
        .expect(409);
    let r = s
        .req("PUT", &snap5, &[("Content-Type", "application/x-state"), ("Stream-Snapshot-Match", d1.as_str())], b"S5")
        .expect(204);
    let d2 = r.h("stream-snapshot-digest").to_string();
    assert_ne!(d1, d2);

    // GET /snapshot redirects to the latest.
    let r = s.get(&format!("{p}/snapshot")).expect(307);
    let location = r.h("location").to_string();
    assert_eq!(location, format!("{p}/snapshot/{}", offset(5)));
    let r = s.get(&location).expect(200);
    assert_eq!(r.body, b"S5");
    assert_eq!(r.h("content-type"), "application/x-state");
    assert_eq!(r.h("stream-snapshot-offset"), offset(5));
    assert_eq!(r.h("stream-snapshot-digest"), d2);
    assert_eq!(r.h("stream-next-offset"), offset(5));
    assert_eq!(r.h("stream-up-to-date"), "true");
    assert!(!r.has("stream-extensions"), "not a JSON stream: {r:?}");

    // The superseded snapshot is gone.
    s.get(&snap3).expect(404);

    // HEAD names the latest snapshot.
    let r = s.head(p).expect(200);
    assert_eq!(r.h("stream-snapshot-offset"), offset(5));
    assert_eq!(r.h("stream-snapshot-digest"), d2);

    // Ordinary reads never carry snapshot bytes.
    assert_eq!(s.get(&format!("{p}?offset=-1")).expect(200).body, b"abcde");

    // After more data the snapshot is no longer up to date.
    s.post(p, TEXT, b"f").expect(204);
    assert_eq!(s.get(&location).expect(200).h("stream-up-to-date"), "false");

    // Percent-encoded offsets in the path decode to the same snapshot.
    let r = s.get(&format!("{p}/snapshot/{}", encoded(5))).expect(200);
    assert_eq!(r.body, b"S5");

    // DELETE (section 2.6): a superseded or unknown offset is 404; the latest
    // visible snapshot backs /bootstrap, so deleting it is 409 and it stays.
    s.delete(&snap3).expect(404);
    s.delete(&format!("{p}/snapshot/{}", offset(4))).expect(404);
    s.delete(&format!("{p}/snapshot/garbage")).expect(400);
    let r = s.delete(&format!("{p}/snapshot/{}", encoded(5))).expect(409);
    assert!(r.text().contains("bootstrap"), "{}", r.text());
    s.delete(&snap5).expect(409);
    assert_eq!(s.get(&snap5).expect(200).body, b"S5");
    assert_eq!(s.get(&format!("{p}/snapshot")).expect(307).h("location"), snap5);
    let r = s.head(p).expect(200);
    assert_eq!(r.h("stream-snapshot-offset"), offset(5));
    assert_eq!(r.h("stream-snapshot-digest"), d2);
    let parts = multipart(&s.get(&format!("{p}/bootstrap")).expect(200));
    assert_eq!(parts[0], part("application/x-state", b"S5"));
}

#[test]
fn snapshot_defaults_missing_streams_and_encoded_publish() {
    let s = server_with_bucket("snap");
    let url = "/snap/with%20space";
    stream_of(&s, url, OCTET, &[b"\x00\x01", b"\x02"]);

    // No snapshot yet.
    s.get(&format!("{url}/snapshot")).expect(404);
    assert!(!s.head(url).expect(200).has("stream-snapshot-offset"));

    // Publish through a percent-encoded offset, without a Content-Type.
    let r = s.req("PUT", &format!("{url}/snapshot/{}", encoded(2)), &[], b"\xffblob").expect(204);
    let digest = r.h("stream-snapshot-digest").to_string();
    let r = s.get(&format!("{url}/snapshot")).expect(307);
    // The Location carries the stream id encoded, and resolves.
    let location = r.h("location").to_string();
    assert_eq!(location, format!("{url}/snapshot/{}", offset(2)));
    assert!(!location.contains(' '), "{location}");
    let r = s.get(&location).expect(200);
    assert_eq!(r.h("content-type"), OCTET, "the default snapshot type");
    assert_eq!(r.body, b"\xffblob");
    assert_eq!(r.h("stream-snapshot-digest"), digest);

    // A snapshot at offset 0 of an empty stream is allowed.
    s.put("/snap/empty", TEXT, b"").expect(201);
    s.req("PUT", &format!("/snap/empty/snapshot/{}", offset(0)), &[("Content-Type", TEXT)], b"").expect(204);
    let r = s.get(&format!("/snap/empty/snapshot/{}", offset(0))).expect(200);
    assert!(r.body.is_empty());
    assert_eq!(r.h("content-type"), TEXT);

    // Missing stream and missing bucket: 404 everywhere.
    for path in [format!("/snap/nope/snapshot/{}", offset(0)), format!("/nobucket/s/snapshot/{}", offset(0))] {
        s.req("PUT", &path, &[("Content-Type", TEXT)], b"x").expect(404);
        s.get(&path).expect(404);
        s.delete(&path).expect(404);
    }
    s.get("/snap/nope/snapshot").expect(404);
    // Unknown sub-resources are 404; POST is no snapshot method.
    s.get("/snap/empty/snapshots").expect(404);
    s.req("POST", &format!("/snap/empty/snapshot/{}", offset(0)), &[], b"").expect(405);
}

// ---------------------------------------------------------------------------
// 2. Retention
// ---------------------------------------------------------------------------

#[test]
fn retention_needs_a_snapshot_and_hides_older_data() {
    let s = server_with_bucket("keep");
    let p = "/keep/s";
    // "aaa" [0,3), "bbb" [3,6), "cc" [6,8).
    stream_of(&s, p, TEXT, &[b"aaa", b"bbb", b"cc"]);

    // No snapshot covers it.
    s.req("PUT", &format!("{p}/retention/{}", offset(3)), &[], b"").expect(409);
    assert_eq!(s.get(&format!("{p}?offset=-1")).expect(200).body, b"aaabbbcc");

    s.req("PUT", &format!("{p}/snapshot/{}", offset(6)), &[("Content-Type", "application/x-s")], b"AAABBB").expect(204);
    // Past the snapshot, beyond the tail, inside a message, malformed.
    s.req("PUT", &format!("{p}/retention/{}", offset(8)), &[], b"").expect(409);
    s.req("PUT", &format!("{p}/retention/{}", offset(9)), &[], b"").expect(409);
    s.req("PUT", &format!("{p}/retention/{}", offset(4)), &[], b"").expect(400);
    s.req("PUT", &format!("{p}/retention/nope"), &[], b"").expect(400);
    s.req("PUT", &format!("{p}/retention"), &[], b"").expect(400);
    s.get(&format!("{p}/retention/{}", offset(3))).expect(405);

    // Retention to a covered boundary.
    let r = s.req("PUT", &format!("{p}/retention/{}", offset(3)), &[], b"").expect(204);
    assert_eq!(r.h("stream-retained-offset"), offset(3));
    let r = s.get(&format!("{p}?offset=-1")).expect(200);
    assert_eq!(r.body, b"bbbcc");
    assert_eq!(r.next_offset(), offset(8));
    s.get(&format!("{p}?offset={}", offset(0))).expect(410);
    assert_eq!(s.get(&format!("{p}?offset={}", offset(3))).expect(200).body, b"bbbcc");
    assert_eq!(s.get(&format!("{p}?offset={}", offset(6))).expect(200).body, b"cc");
    // Live reads below the boundary are gone too.
    s.get(&format!("{p}?offset={}&live=long-poll", offset(0))).expect(410);
    s.get(&format!("{p}?offset={}&live=sse", offset(0))).expect(410);

    // Up to the snapshot itself (percent-encoded this time).
    s.req("PUT", &format!("{p}/retention/{}", encoded(6)), &[], b"").expect(204);
    assert_eq!(s.get(&format!("{p}?offset=-1")).expect(200).body, b"cc");
    s.get(&format!("{p}?offset={}", offset(3))).expect(410);
    // The same boundary again is a no-op success.
    s.req("PUT", &format!("{p}/retention/{}", offset(6)), &[], b"").expect(204);

    // Backwards: below the earliest retained offset, so 410.
    s.req("PUT", &format!("{p}/retention/{}", offset(3)), &[], b"").expect(410);
    s.req("PUT", &format!("{p}/retention/{}", offset(0)), &[], b"").expect(410);
    // A fork point below it: 410, and nothing is created; above it the fork
    // inherits the retention.
    let fork_at = |name: &str, at: u64| {
        let at = offset(at);
        s.req("PUT", &format!("/keep/{name}"), &[("Stream-Forked-From", p), ("Stream-Fork-Offset", &at)], b"")
    };
    fork_at("old-fork", 3).expect(410);
    s.head("/keep/old-fork").expect(404);
    fork_at("new-fork", 7).expect(201);
    assert_eq!(s.get("/keep/new-fork?offset=-1").expect(200).body, b"c");
    s.get(&format!("/keep/new-fork?offset={}", offset(3))).expect(410);
    // A snapshot older than retention: 410.
    s.req("PUT", &format!("{p}/snapshot/{}", offset(3)), &[("Content-Type", TEXT)], b"x").expect(410);

    // The latest snapshot backs /bootstrap now: it cannot be deleted.
    s.delete(&format!("{p}/snapshot/{}", offset(6))).expect(409);
    assert_eq!(s.get(&format!("{p}/snapshot")).expect(307).h("location"), format!("{p}/snapshot/{}", offset(6)));

    // A newer snapshot does not move retention by itself.
    s.req("PUT", &format!("{p}/snapshot/{}", offset(8)), &[("Content-Type", "application/x-s")], b"ALL").expect(204);
    assert_eq!(s.get(&format!("{p}?offset=-1")).expect(200).body, b"cc");
    s.get(&format!("{p}/snapshot/{}", offset(6))).expect(404);
    s.delete(&format!("{p}/snapshot/{}", offset(8))).expect(409);

    // Missing streams.
    s.req("PUT", &format!("/keep/nope/retention/{}", offset(0)), &[], b"").expect(404);
}

// ---------------------------------------------------------------------------
// 3. Bootstrap
// ---------------------------------------------------------------------------

#[test]
fn bootstrap_without_snapshot_has_an_empty_first_part() {
    let s = server_with_bucket("boot");
    let p = "/boot/bin";
    // Messages with CRLFs and dashes, so only the boundary separates parts.
    let msgs: [&[u8]; 3] = [b"\x00\x01", b"\r\n--not-a-boundary\r\n", b"\xff"];
    stream_of(&s, p, OCTET, &msgs);

    let r = s.get(&format!("{p}/bootstrap")).expect(200);
    assert_eq!(r.h("stream-snapshot-offset"), "-1");
    let total: usize = msgs.iter().map(|m| m.len()).sum();
    assert_eq!(r.next_offset(), offset(total as u64));
    assert_eq!(r.h("stream-up-to-date"), "true");
    assert_eq!(r.h("cache-control"), "no-store");
    assert!(!r.has("stream-extensions"), "{r:?}");
    let parts = multipart(&r);
    let mut want = vec![part(OCTET, b"")];
    want.extend(msgs.iter().map(|m| part(OCTET, m)));
    assert_eq!(parts, want);

    // A text stream: the empty first part is still octet-stream.
    stream_of(&s, "/boot/txt", TEXT, &[b"one", b"two"]);
    let parts = multipart(&s.get("/boot/txt/bootstrap").expect(200));
    assert_eq!(parts, vec![part(OCTET, b""), part(TEXT, b"one"), part(TEXT, b"two")]);

    // An empty stream: only the (empty) snapshot part.
    s.put("/boot/empty", TEXT, b"").expect(201);
    let r = s.get("/boot/empty/bootstrap").expect(200);
    assert_eq!(r.next_offset(), offset(0));
    assert_eq!(multipart(&r), vec![part(OCTET, b"")]);

    // Query parameters (live or otherwise) are refused; only GET is allowed.
    for q in ["live=sse", "live=long-poll", "offset=-1", "x=1"] {
        let r = s.get(&format!("{p}/bootstrap?{q}"));
        assert_eq!(r.status, 400, "?{q}: {}", r.text());
    }
    s.req("POST", &format!("{p}/bootstrap"), &[("Content-Type", OCTET)], b"x").expect(405);
    s.get("/boot/nope/bootstrap").expect(404);
    s.get("/nobucket/nope/bootstrap").expect(404);
}

#[test]
fn bootstrap_with_snapshot_and_retention() {
    let s = server_with_bucket("boot");
    let p = "/boot/s";
    // "a1" [0,2), "b22" [2,5), "c333" [5,9), "d" [9,10).
    stream_of(&s, p, TEXT, &[b"a1", b"b22", b"c333", b"d"]);

    // A snapshot without retention: parts after the snapshot only.
    let d = s
        .req("PUT", &format!("{p}/snapshot/{}", offset(5)), &[("Content-Type", "application/x-doc")], b"STATE@5")
        .expect(204)
        .h("stream-snapshot-digest")
        .to_string();
    let r = s.get(&format!("{p}/bootstrap")).expect(200);
    assert_eq!(r.h("stream-snapshot-offset"), offset(5));
    assert_eq!(r.next_offset(), offset(10));
    assert_eq!(multipart(&r), vec![part("application/x-doc", b"STATE@5"), part(TEXT, b"c333"), part(TEXT, b"d")]);
    assert_eq!(s.head(p).expect(200).h("stream-snapshot-digest"), d);

    // With retention at the snapshot the result is the same, and older reads are gone.
    s.req("PUT", &format!("{p}/retention/{}", offset(5)), &[], b"").expect(204);
    let r = s.get(&format!("{p}/bootstrap")).expect(200);
    assert_eq!(r.h("stream-snapshot-offset"), offset(5));
    assert_eq!(multipart(&r), vec![part("application/x-doc", b"STATE@5"), part(TEXT, b"c333"), part(TEXT, b"d")]);
    s.get(&format!("{p}?offset={}", offset(2))).expect(410);

    // Appends after bootstrap: tail from its Stream-Next-Offset.
    let next = r.next_offset();
    s.post(p, TEXT, b"e").expect(204);
    assert_eq!(s.get(&format!("{p}?offset={next}")).expect(200).body, b"e");

    // A snapshot at the tail: only the snapshot part.
    s.req("PUT", &format!("{p}/snapshot/{}", offset(11)), &[("Content-Type", "application/x-doc")], b"ALL").expect(204);
    let r = s.get(&format!("{p}/bootstrap")).expect(200);
    assert_eq!(r.h("stream-snapshot-offset"), offset(11));
    assert_eq!(r.next_offset(), offset(11));
    assert_eq!(multipart(&r), vec![part("application/x-doc", b"ALL")]);
}

#[test]
fn bootstrap_of_a_json_stream_has_one_part_per_record() {
    let s = server_with_bucket("boot");
    let p = "/boot/j";
    s.put(p, JSON, br#"[1, {"a": [2, 3]}]"#).expect(201);
    s.post(p, JSON, br#""x""#).expect(204);
    s.post(p, JSON, br#"[true, null]"#).expect(204);

    let r = s.get(&format!("{p}/bootstrap")).expect(200);
    assert_eq!(r.h("stream-snapshot-offset"), "-1");
    assert_eq!(r.h("stream-extensions"), RECORDS_TOKEN);
    assert_eq!(r.h("stream-record-first"), "0");
    assert_eq!(r.h("stream-record-next"), "5");
    let parts = multipart(&r);
    // Each part is one stored record: the canonical NDJSON line.
    let want = [part(OCTET, b""), part(JSON, b"1\n"), part(JSON, b"{\"a\":[2,3]}\n"), part(JSON, b"\"x\"\n")];
    assert_eq!(parts[..4], want);
    assert_eq!(parts[4..], [part(JSON, b"true\n"), part(JSON, b"null\n")]);

    // Snapshot + retention at record 2: parts for records 2.. only.
    let r = s.req("PUT", &format!("{p}/snapshot?record=2"), &[("Content-Type", JSON)], br#"{"sum":"1,a"}"#).expect(204);
    let snap_at = r.h("stream-snapshot-offset").to_string();
    s.req("PUT", &format!("{p}/retention?record=2"), &[], b"").expect(204);
    let r = s.get(&format!("{p}/bootstrap")).expect(200);
    assert_eq!(r.h("stream-snapshot-offset"), snap_at);
    assert_eq!(r.h("stream-record-first"), "2");
    assert_eq!(r.h("stream-record-next"), "5");
    let parts = multipart(&r);
    assert_eq!(
        parts,
        vec![part(JSON, br#"{"sum":"1,a"}"#), part(JSON, b"\"x\"\n"), part(JSON, b"true\n"), part(JSON, b"null\n")]
    );
}

// ---------------------------------------------------------------------------
// 4. Append-batch
// ---------------------------------------------------------------------------

#[test]
fn append_batch_acknowledges_each_frame() {
    let s = server_with_bucket("batch");
    let p = "/batch/s";
    s.put(p, TEXT, b"").expect(201);

    let r = s.post(&format!("{p}/append-batch"), TEXT, &frames(&[b"ab", b"cde", b"f"])).expect(200);
    assert_eq!(r.h("content-type"), "application/json");
    assert_eq!(
        r.json(),
        json!([
            {"status": 204, "stream_next_offset": offset(2)},
            {"status": 204, "stream_next_offset": offset(5)},
            {"status": 204, "stream_next_offset": offset(6)},
        ])
    );
    let r = s.get(&format!("{p}?offset=-1")).expect(200);
    assert_eq!(r.body, b"abcdef");
    assert_eq!(r.next_offset(), offset(6));

    // Each frame is its own message: bootstrap shows three parts, and the
    // frame boundaries are snapshot boundaries.
    let parts = multipart(&s.get(&format!("{p}/bootstrap")).expect(200));
    assert_eq!(parts, vec![part(OCTET, b""), part(TEXT, b"ab"), part(TEXT, b"cde"), part(TEXT, b"f")]);
    s.req("PUT", &format!("{p}/snapshot/{}", offset(3)), &[], b"x").expect(400);
    s.req("PUT", &format!("{p}/snapshot/{}", offset(2)), &[], b"x").expect(204);

    // A second batch continues the offsets; a parameterized type still matches.
    let r = s.post(&format!("{p}/append-batch"), "text/plain; charset=utf-8", &frames(&[b"g"])).expect(200);
    assert_eq!(r.json(), json!([{"status": 204, "stream_next_offset": offset(7)}]));

    // Content-Type mismatch: every frame fails on its own, nothing is written.
    let r = s.post(&format!("{p}/append-batch"), JSON, &frames(&[b"1", b"2"])).expect(200);
    let acks = r.json();
    let acks = acks.as_array().expect("an array");
    assert_eq!(acks.len(), 2);
    for ack in acks {
        assert_eq!(ack["status"], 409, "{ack}");
        assert_eq!(ack["error_code"], "content_type_mismatch", "{ack}");
        assert!(ack["error"].is_string(), "{ack}");
        assert_eq!(ack["stream_next_offset"], offset(7), "{ack}");
    }
    assert_eq!(s.get(&format!("{p}?offset=-1")).expect(200).body, b"abcdefg");

    // Malformed bodies fail the whole request.
    let mut truncated_payload = frames(&[b"hello"]);
    truncated_payload.pop();
    let mut zero_in_middle = frames(&[b"ok"]);
    zero_in_middle.extend_from_slice(&[0, 0, 0, 0]);
    let bad: [(&str, Vec<u8>); 5] = [
        ("zero-length frame", vec![0, 0, 0, 0]),
        ("zero-length frame after a good one", zero_in_middle),
        ("truncated length", vec![0, 0, 1]),
        ("truncated payload", truncated_payload),
        ("empty body", Vec::new()),
    ];
    for (what, body) in bad {
        let r = s.post(&format!("{p}/append-batch"), TEXT, &body);
        assert_eq!(r.status, 400, "{what}: {}", r.text());
    }
    // No Content-Type.
    s.req("POST", &format!("{p}/append-batch"), &[], &frames(&[b"x"])).expect(400);
    // Per-append controls are not supported.
    for h in [
        ("Producer-Id", "p"),
        ("Producer-Epoch", "0"),
        ("Producer-Seq", "0"),
        ("Stream-Closed", "true"),
        ("Stream-Closed", "false"),
        ("Stream-Seq", "a"),
        ("Stream-Record-Match", "0"),
    ] {
        let r = s.req("POST", &format!("{p}/append-batch"), &[("Content-Type", TEXT), h], &frames(&[b"x"]));
        assert_eq!(r.status, 400, "{h:?}: {}", r.text());
    }
    assert_eq!(s.get(&format!("{p}?offset=-1")).expect(200).body, b"abcdefg");

    // Missing stream or bucket; wrong method.
    s.post("/batch/nope/append-batch", TEXT, &frames(&[b"x"])).expect(404);
    s.post("/nobucket/nope/append-batch", TEXT, &frames(&[b"x"])).expect(404);
    s.get(&format!("{p}/append-batch")).expect(405);

    // A closed stream: every frame reports the closure.
    s.req("POST", p, &[("Stream-Closed", "true")], b"").expect(204);
    let r = s.post(&format!("{p}/append-batch"), TEXT, &frames(&[b"late"])).expect(200);
    let ack = &r.json()[0];
    assert_eq!(ack["status"], 409, "{ack}");
    assert_eq!(ack["error_code"], "stream_closed", "{ack}");
    assert_eq!(ack["stream_closed"], true, "{ack}");
    assert_eq!(ack["stream_next_offset"], offset(7), "{ack}");
}

#[test]
fn append_batch_frame_limit_is_413() {
    let s = Server::start_with(&["--max-batch-frames", "4"]);
    s.req("PUT", "/limit", &[], b"").expect(201);
    let p = "/limit/s";
    s.put(p, OCTET, b"").expect(201);
    let r = s.post(&format!("{p}/append-batch"), OCTET, &frames(&[b"1", b"2", b"3", b"4"])).expect(200);
    assert_eq!(r.json().as_array().map(Vec::len), Some(4));
    s.post(&format!("{p}/append-batch"), OCTET, &frames(&[b"5", b"6", b"7", b"8", b"9"])).expect(413);
    // Nothing of the refused batch was written.
    assert_eq!(s.get(&format!("{p}?offset=-1")).expect(200).body, b"1234");
}

#[test]
fn append_batch_on_a_json_stream_reports_record_ranges() {
    let s = server_with_bucket("batch");
    let p = "/batch/j";
    let r = s.put(p, JSON, b"[1]").expect(201);
    assert_eq!(r.h("stream-record-next"), "1");

    let r = s.post(&format!("{p}/append-batch"), JSON, &frames(&[b"[2, 3]", b"{bad", b"[]", b"4"])).expect(200);
    let acks = r.json();
    assert_eq!(acks.as_array().map(Vec::len), Some(4), "{acks}");
    // "1\n" "2\n" "3\n" "4\n" are two bytes each.
    assert_eq!(
        acks[0],
        json!({"status": 204, "stream_next_offset": offset(6), "stream_record_start": 1, "stream_record_next": 3})
    );
    for bad in [&acks[1], &acks[2]] {
        assert_eq!(bad["status"], 400, "{bad}");
        assert_eq!(bad["error_code"], "bad_request", "{bad}");
        assert!(bad.get("stream_record_start").is_none(), "a failed frame gets no ordinal: {bad}");
    }
    // The failed frames assigned no ordinal: the next success continues at 3.
    assert_eq!(
        acks[3],
        json!({"status": 204, "stream_next_offset": offset(8), "stream_record_start": 3, "stream_record_next": 4})
    );
    let r = s.head(p).expect(200);
    assert_eq!(r.h("stream-record-first"), "0");
    assert_eq!(r.h("stream-record-next"), "4");
    let r = s.get(&format!("{p}?record=0")).expect(200);
    assert_eq!(r.text(), "1\n2\n3\n4\n");
    assert_eq!(s.get(&format!("{p}?offset=-1")).expect(200).text(), "1\n2\n3\n4\n");
}

// ---------------------------------------------------------------------------
// 5. Attributes
// ---------------------------------------------------------------------------

#[test]
fn attributes_create_read_replace_and_clear() {
    let s = server_with_bucket("attr");
    let p = "/attr/s";
    let attrs = r#"{"title":"Support session","metadata":{"purpose":"support","n":[1,2]},"color":"red"}"#;
    s.req("PUT", p, &[("Content-Type", TEXT), ("Stream-Attrs", attrs)], b"data").expect(201);
    let r = s.get(&format!("{p}/attrs")).expect(200);
    assert_eq!(r.h("content-type"), "application/json");
    assert_eq!(r.json(), json!({"title": "Support session", "metadata": {"purpose": "support", "n": [1, 2]}}));

    // Idempotent create: the same attributes (unknown fields aside) match...
    let same = r#"{"metadata":{"n":[1,2],"purpose":"support"},"title":"Support session"}"#;
    s.req("PUT", p, &[("Content-Type", TEXT), ("Stream-Attrs", same)], b"").expect(200);
    s.req("PUT", p, &[("Content-Type", TEXT), ("Stream-Attrs", attrs)], b"").expect(200);
    // ...different ones (or none) conflict.
    s.req("PUT", p, &[("Content-Type", TEXT), ("Stream-Attrs", r#"{"title":"Other"}"#)], b"").expect(409);
    s.req("PUT", p, &[("Content-Type", TEXT)], b"").expect(409);
    s.req("PUT", p, &[("Content-Type", TEXT), ("Stream-Attrs", "{}")], b"").expect(409);

    // Replace (not merge).
    let before = s.head(p).expect(200);
    s.req("PUT", &format!("{p}/attrs"), &[("Content-Type", JSON)], br#"{"title":"Renamed","x":1}"#).expect(204);
    assert_eq!(s.get(&format!("{p}/attrs")).expect(200).json(), json!({"title": "Renamed"}));
    // The same object again is fine.
    s.req(
        "PUT",
        &format!("{p}/attrs"),
        &[("Content-Type", "application/json; charset=utf-8")],
        br#"{"title":"Renamed"}"#,
    )
    .expect(204);
    // Attributes do not touch the byte stream.
    let after = s.head(p).expect(200);
    assert_eq!(after.next_offset(), before.next_offset());
    assert_eq!(s.get(&format!("{p}?offset=-1")).expect(200).body, b"data");

    // {} clears; a stream created with {} has no attributes.
    s.req("PUT", &format!("{p}/attrs"), &[("Content-Type", JSON)], b"{}").expect(204);
    let r = s.get(&format!("{p}/attrs")).expect(200);
    assert_eq!(r.json(), json!({}));
    s.req("PUT", p, &[("Content-Type", TEXT)], b"").expect(200);
    s.req("PUT", "/attr/e", &[("Content-Type", TEXT), ("Stream-Attrs", "{}")], b"").expect(201);
    s.req("PUT", "/attr/e", &[("Content-Type", TEXT)], b"").expect(200);
    assert_eq!(s.get("/attr/e/attrs").expect(200).json(), json!({}));
    // Only unknown fields: also no attributes.
    s.req("PUT", &format!("{p}/attrs"), &[("Content-Type", JSON)], br#"{"other":1}"#).expect(204);
    assert_eq!(s.get(&format!("{p}/attrs")).expect(200).json(), json!({}));
}

#[test]
fn attributes_are_validated() {
    let s = server_with_bucket("attr");
    let p = "/attr/v";
    s.put(p, TEXT, b"").expect(201);
    let url = format!("{p}/attrs");
    s.req("PUT", &url, &[("Content-Type", JSON)], br#"{"title":"ok"}"#).expect(204);
    let bad: [(&str, &[u8]); 8] = [
        (JSON, b"[1]"),
        (JSON, b"\"s\""),
        (JSON, b"null"),
        (JSON, b"{bad"),
        (JSON, b""),
        (JSON, br#"{"title":5}"#),
        (JSON, br#"{"metadata":[1]}"#),
        (TEXT, br#"{"title":"t"}"#),
    ];
    for (ct, body) in bad {
        let r = s.req("PUT", &url, &[("Content-Type", ct)], body);
        assert_eq!(r.status, 400, "{ct} {:?}: {}", String::from_utf8_lossy(body), r.text());
    }
    s.req("PUT", &url, &[], br#"{"title":"t"}"#).expect(400);

    // The 16 KiB limit: just under is accepted, just over refused.
    let doc = |len: usize| {
        let skeleton = r#"{"metadata":{"k":""}}"#.len();
        format!(r#"{{"metadata":{{"k":"{}"}}}}"#, "x".repeat(len - skeleton))
    };
    assert_eq!(doc(16 * 1024).len(), 16 * 1024);
    s.req("PUT", &url, &[("Content-Type", JSON)], doc(16 * 1024).as_bytes()).expect(204);
    assert_eq!(s.get(&url).expect(200).body.len(), 16 * 1024);
    s.req("PUT", &url, &[("Content-Type", JSON)], doc(16 * 1024 + 1).as_bytes()).expect(400);
    s.req("PUT", &url, &[("Content-Type", JSON)], doc(64 * 1024).as_bytes()).expect(400);
    // Refusals left the stored object alone.
    assert_eq!(s.get(&url).expect(200).body.len(), 16 * 1024);

    // Invalid Stream-Attrs on create.
    for bad in ["[1]", "{bad", r#"{"title":1}"#] {
        let r = s.req("PUT", "/attr/new", &[("Content-Type", TEXT), ("Stream-Attrs", bad)], b"");
        assert_eq!(r.status, 400, "{bad}: {}", r.text());
    }
    s.head("/attr/new").expect(404);

    // Missing stream or bucket; wrong method.
    s.get("/attr/nope/attrs").expect(404);
    s.req("PUT", "/attr/nope/attrs", &[("Content-Type", JSON)], b"{}").expect(404);
    s.get("/nobucket/nope/attrs").expect(404);
    s.req("PUT", "/nobucket/nope/attrs", &[("Content-Type", JSON)], b"{}").expect(404);
    s.delete(&url).expect(405);
}

#[test]
fn attributes_of_a_closed_stream_stay_mutable() {
    let s = server_with_bucket("attr");
    let p = "/attr/closed";
    s.req("PUT", p, &[("Content-Type", TEXT), ("Stream-Closed", "true")], b"final").expect(201);
    s.req("PUT", &format!("{p}/attrs"), &[("Content-Type", JSON)], br#"{"title":"archived"}"#).expect(204);
    assert_eq!(s.get(&format!("{p}/attrs")).expect(200).json(), json!({"title": "archived"}));
    let r = s.head(p).expect(200);
    assert_eq!(r.h("stream-closed"), "true");
    assert_eq!(r.next_offset(), offset(5));
    s.post(p, TEXT, b"more").expect(409);
}

// ---------------------------------------------------------------------------
// 6. JSON record coordinates
// ---------------------------------------------------------------------------

#[test]
fn json_records_acknowledgements_and_preconditions() {
    let s = server_with_bucket("recs");
    let p = "/recs/j";
    let r = s.put(p, JSON, br#"["a", "b"]"#).expect(201);
    assert_eq!(r.h("stream-extensions"), RECORDS_TOKEN);
    assert_eq!(r.h("stream-record-start"), "0");
    assert_eq!(r.h("stream-record-next"), "2");
    // Idempotent create: no records, both at the tail.
    let r = s.put(p, JSON, b"").expect(200);
    assert_eq!(r.h("stream-record-start"), "2");
    assert_eq!(r.h("stream-record-next"), "2");

    let r = s.post(p, JSON, br#"["c", "d"]"#).expect(204);
    assert_eq!(r.h("stream-extensions"), RECORDS_TOKEN);
    assert_eq!(r.h("stream-record-start"), "2");
    assert_eq!(r.h("stream-record-next"), "4");
    let tail = r.next_offset();

    let r = s.head(p).expect(200);
    assert_eq!(r.h("stream-extensions"), RECORDS_TOKEN);
    assert_eq!(r.h("stream-record-first"), "0");
    assert_eq!(r.h("stream-record-next"), "4");

    // Stream-Record-Match.
    let r = s.req("POST", p, &[("Content-Type", JSON), ("Stream-Record-Match", "3")], b"\"e\"").expect(412);
    assert_eq!(r.h("stream-record-next"), "4");
    assert_eq!(r.next_offset(), tail);
    s.req("POST", p, &[("Content-Type", JSON), ("Stream-Record-Match", "x")], b"\"e\"").expect(400);
    let r = s.req("POST", p, &[("Content-Type", JSON), ("Stream-Record-Match", "4")], b"\"e\"").expect(204);
    assert_eq!(r.h("stream-record-start"), "4");
    assert_eq!(r.h("stream-record-next"), "5");

    // An empty PUT-created JSON stream starts at F = N = 0.
    let r = s.put("/recs/empty", JSON, b"[]").expect(201);
    assert_eq!(r.h("stream-record-start"), "0");
    assert_eq!(r.h("stream-record-next"), "0");
    s.post("/recs/empty", JSON, b"[]").expect(400);
    assert_eq!(s.head("/recs/empty").expect(200).h("stream-record-next"), "0");

    // Non-JSON streams never advertise the extension.
    let r = s.put("/recs/t", TEXT, b"x").expect(201);
    assert!(!r.has("stream-extensions") && !r.has("stream-record-start"), "{r:?}");
    let r = s.post("/recs/t", TEXT, b"y").expect(204);
    assert!(!r.has("stream-extensions") && !r.has("stream-record-next"), "{r:?}");
    let r = s.head("/recs/t").expect(200);
    assert!(!r.has("stream-extensions") && !r.has("stream-record-first"), "{r:?}");
    let r = s.get("/recs/t?offset=-1").expect(200);
    assert!(!r.has("stream-extensions"), "{r:?}");
    s.get("/recs/t?record=0").expect(400);
}

#[test]
fn json_records_producer_retry_returns_the_original_range() {
    let s = server_with_bucket("recs");
    let p = "/recs/prod";
    s.put(p, JSON, b"[1]").expect(201);
    let stamp = [("Content-Type", JSON), ("Producer-Id", "w1"), ("Producer-Epoch", "0"), ("Producer-Seq", "0")];
    let first = s.req("POST", p, &stamp, b"[2, 3]").expect(200);
    assert_eq!(first.h("stream-record-start"), "1");
    assert_eq!(first.h("stream-record-next"), "3");
    // Someone else appends in between.
    s.post(p, JSON, b"4").expect(204);
    let retry = s.req("POST", p, &stamp, b"[2, 3]").expect(204);
    assert_eq!(retry.h("stream-record-start"), "1");
    assert_eq!(retry.h("stream-record-next"), "3");
    assert_eq!(retry.next_offset(), first.next_offset());
    assert_eq!(retry.h("producer-seq"), "0");
    assert_eq!(s.head(p).expect(200).h("stream-record-next"), "4");
    assert_eq!(ndjson(&s.get(&format!("{p}?offset=-1")).expect(200)), [json!(1), json!(2), json!(3), json!(4)]);
}

#[test]
fn json_record_reads() {
    let s = server_with_bucket("recs");
    let p = "/recs/r";
    s.put(p, JSON, br#"["a", {"b": 1}]"#).expect(201);
    let tail = s.post(p, JSON, br#"["c", ["d"]]"#).expect(204).next_offset();

    // Ordinary offset reads return the canonical NDJSON bytes.
    let r = s.get(&format!("{p}?offset=-1")).expect(200);
    assert_eq!(r.h("content-type"), "application/x-ndjson");
    assert_eq!(r.h("stream-extensions"), RECORDS_TOKEN);
    assert_eq!(r.text(), "\"a\"\n{\"b\":1}\n\"c\"\n[\"d\"]\n");
    assert!(!r.has("stream-record-start"), "offset reads carry no record range: {r:?}");

    let r = s.get(&format!("{p}?record=1&max_records=2")).expect(200);
    assert_eq!(r.h("content-type"), "application/x-ndjson");
    assert_eq!(r.h("stream-extensions"), RECORDS_TOKEN);
    assert_eq!(r.h("stream-record-first"), "0");
    assert_eq!(r.h("stream-record-start"), "1");
    assert_eq!(r.h("stream-record-next"), "3");
    assert_eq!(r.text(), "{\"b\":1}\n\"c\"\n");
    // Its Stream-Next-Offset is the boundary of record 3.
    let resume = r.next_offset();
    assert_eq!(s.get(&format!("{p}?offset={resume}")).expect(200).text(), "[\"d\"]\n");
    assert!(!r.has("stream-up-to-date"));

    // Whole stream from record 0.
    let r = s.get(&format!("{p}?record=0")).expect(200);
    assert_eq!(ndjson(&r), vec![json!("a"), json!({"b": 1}), json!("c"), json!(["d"])]);
    assert_eq!(r.next_offset(), tail);
    assert_eq!(r.h("stream-up-to-date"), "true");

    // record=now and record=N are empty reads at the tail.
    for q in ["record=now", "record=4", "tail_records=0"] {
        let r = s.get(&format!("{p}?{q}")).expect(200);
        assert!(r.body.is_empty(), "?{q}: {:?}", r.text());
        assert_eq!(r.h("stream-record-start"), "4", "?{q}");
        assert_eq!(r.h("stream-record-next"), "4", "?{q}");
        assert_eq!(r.next_offset(), tail, "?{q}");
    }
    let r = s.get(&format!("{p}?tail_records=1")).expect(200);
    assert_eq!(r.text(), "[\"d\"]\n");
    assert_eq!(r.h("stream-record-start"), "3");
    let r = s.get(&format!("{p}?tail_records=99")).expect(200);
    assert_eq!(r.h("stream-record-start"), "0");
    assert_eq!(ndjson(&r).len(), 4);

    // Envelopes.
    let r = s.get(&format!("{p}?record=2&record_view=envelope")).expect(200);
    assert_eq!(r.h("content-type"), "application/vnd.durable-stream-records+ndjson");
    assert_eq!(ndjson(&r), vec![json!({"record": 2, "value": "c"}), json!({"record": 3, "value": ["d"]})]);

    // Refusals.
    let r = s.get(&format!("{p}?record=5")).expect(400);
    assert_eq!(r.h("stream-record-next"), "4");
    for q in [
        format!("record=1&offset={}", offset(0)),
        "record=1&offset=-1".to_string(),
        "max_records=2".to_string(),
        "record=1&max_bytes=10".to_string(),
        "record=1&max_records=0".to_string(),
        "record=-1".to_string(),
        "record=x".to_string(),
        "tail_records=-1".to_string(),
        "record=1&tail_records=1".to_string(),
        "record_view=envelope".to_string(),
        "record=1&record_view=raw".to_string(),
        "offset=-1&max_records=1".to_string(),
    ] {
        let r = s.get(&format!("{p}?{q}"));
        assert_eq!(r.status, 400, "?{q}: {}", r.text());
    }
}

#[test]
fn json_records_after_snapshot_and_retention() {
    let s = server_with_bucket("recs");
    let p = "/recs/ret";
    s.put(p, JSON, br#"["a", "b"]"#).expect(201);
    s.post(p, JSON, br#"["c", "d"]"#).expect(204);

    // Intra-record offsets are not boundaries: "a"\n is 4 bytes.
    s.req("PUT", &format!("{p}/snapshot/{}", offset(2)), &[("Content-Type", JSON)], b"{}").expect(400);
    // Out of range ordinals.
    s.req("PUT", &format!("{p}/snapshot?record=9"), &[("Content-Type", JSON)], b"{}").expect(409);
    s.req("PUT", &format!("{p}/snapshot?record=x"), &[("Content-Type", JSON)], b"{}").expect(400);
    s.req("PUT", &format!("{p}/snapshot/{}?record=2", offset(8)), &[("Content-Type", JSON)], b"{}").expect(400);

    let r = s.req("PUT", &format!("{p}/snapshot?record=2"), &[("Content-Type", JSON)], br#"["a","b"]"#).expect(204);
    assert_eq!(r.h("stream-snapshot-offset"), offset(8));
    let r = s.get(&format!("{p}/snapshot/{}", offset(8))).expect(200);
    assert_eq!(r.h("stream-extensions"), RECORDS_TOKEN);
    s.req("PUT", &format!("{p}/retention?record=2"), &[], b"").expect(204);

    let r = s.get(&format!("{p}?record=0")).expect(410);
    assert_eq!(r.h("stream-record-first"), "2");
    assert_eq!(r.h("stream-record-next"), "4");
    let r = s.get(&format!("{p}?record=2")).expect(200);
    assert_eq!(r.text(), "\"c\"\n\"d\"\n");
    assert_eq!(r.h("stream-record-first"), "2");
    assert_eq!(r.h("stream-record-start"), "2");
    let r = s.head(p).expect(200);
    assert_eq!(r.h("stream-record-first"), "2");
    assert_eq!(r.h("stream-record-next"), "4");
    // tail_records never goes below F.
    assert_eq!(s.get(&format!("{p}?tail_records=10")).expect(200).h("stream-record-start"), "2");
    // Offset reads agree, and surviving ordinals are unchanged by new appends.
    assert_eq!(s.get(&format!("{p}?offset=-1")).expect(200).text(), "\"c\"\n\"d\"\n");
    let r = s.post(p, JSON, b"\"e\"").expect(204);
    assert_eq!(r.h("stream-record-start"), "4");
    let r = s.get(&format!("{p}?record=3&record_view=envelope")).expect(200);
    assert_eq!(ndjson(&r), vec![json!({"record": 3, "value": "d"}), json!({"record": 4, "value": "e"})]);
    // Retention by an ordinal that is already trimmed.
    s.req("PUT", &format!("{p}/retention?record=1"), &[], b"").expect(410);
    s.req("PUT", &format!("{p}/snapshot?record=1"), &[("Content-Type", JSON)], b"{}").expect(410);
}

#[test]
fn json_records_long_poll_and_concurrent_appends() {
    let s = server_with_bucket("recs");
    let p = "/recs/lp";
    s.put(p, JSON, b"[0]").expect(201);

    // Long-poll with data available answers at once, record-aligned.
    let r = s.get(&format!("{p}?record=0&live=long-poll")).expect(200);
    assert_eq!(r.h("content-type"), "application/x-ndjson");
    assert_eq!(r.text(), "0\n");
    assert_eq!(r.h("stream-record-next"), "1");
    // At the tail it times out with 204 and the tail coordinates.
    let r = s.get(&format!("{p}?record=now&live=long-poll")).expect(204);
    assert_eq!(r.h("stream-extensions"), RECORDS_TOKEN);
    assert_eq!(r.h("stream-record-start"), "1");
    assert_eq!(r.h("stream-record-next"), "1");

    // Concurrent appenders get disjoint, contiguous ranges in stream order.
    let server = &s;
    let acks: Vec<(u64, u64, Vec<Value>)> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..4u64)
            .map(|w| {
                sc.spawn(move || {
                    let mut out = Vec::new();
                    for i in 0..8u64 {
                        let n = 1 + (i + w) % 3;
                        let values: Vec<Value> = (0..n).map(|k| json!({"w": w, "i": i, "k": k})).collect();
                        let body = serde_json::to_vec(&values).expect("JSON");
                        let r = server.post(p, JSON, &body).expect(204);
                        let start: u64 = r.h("stream-record-start").parse().expect("start");
                        let next: u64 = r.h("stream-record-next").parse().expect("next");
                        out.push((start, next, values));
                    }
                    out
                })
            })
            .collect();
        workers.into_iter().flat_map(|h| h.join().expect("worker")).collect()
    });
    let mut acks = acks;
    acks.sort_by_key(|a| a.0);
    let mut expected_start = 1;
    let mut all = vec![json!(0)];
    for (start, next, values) in &acks {
        assert_eq!(*start, expected_start, "ranges must be contiguous: {acks:?}");
        assert_eq!(next - start, values.len() as u64);
        expected_start = *next;
        all.extend(values.iter().cloned());
    }
    let r = s.get(&format!("{p}?record=0")).expect(200);
    assert_eq!(ndjson(&r), all);
    assert_eq!(r.h("stream-record-next"), expected_start.to_string());
    assert_eq!(ndjson(&s.get(&format!("{p}?offset=-1")).expect(200)), all);
}

// ---------------------------------------------------------------------------
// 7. SSE with records
// ---------------------------------------------------------------------------

#[test]
fn sse_record_reads_report_record_coordinates() {
    let s = server_with_bucket("ssej");
    let p = "/ssej/j";
    s.put(p, JSON, b"[1, 2, 3]").expect(201);

    let (mut c, head) = open_sse(&s, &format!("{p}?record=1&live=sse"));
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    assert!(head.contains(&format!("stream-extensions: {RECORDS_TOKEN}")), "{head}");
    assert!(head.contains("stream-data-content-type: application/x-ndjson"), "{head}");
    let events = events_through_control(&mut c);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0], ("data".to_string(), "2\n3\n".to_string()));
    assert_eq!(events[1].0, "control");
    let ctl: Value = serde_json::from_str(&events[1].1).unwrap();
    assert_eq!(ctl["streamFirstRecord"], 0, "{ctl}");
    assert_eq!(ctl["streamNextRecord"], 3, "{ctl}");
    assert_eq!(ctl["streamNextOffset"], offset(6), "{ctl}");
    assert_eq!(ctl["upToDate"], true, "{ctl}");

    // Live: an append arrives with the next record coordinates.
    s.post(p, JSON, b"[4, 5]").expect(204);
    let events = events_through_control(&mut c);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].1, "4\n5\n");
    let ctl: Value = serde_json::from_str(&events[1].1).unwrap();
    assert_eq!(ctl["streamFirstRecord"], 0, "{ctl}");
    assert_eq!(ctl["streamNextRecord"], 5, "{ctl}");
    assert_eq!(ctl["streamNextOffset"], offset(10), "{ctl}");
    drop(c);

    // record=now: only a control event at the tail.
    let (mut c, _) = open_sse(&s, &format!("{p}?record=now&live=sse"));
    let events = events_through_control(&mut c);
    assert_eq!(events.len(), 1, "{events:?}");
    let ctl: Value = serde_json::from_str(&events[0].1).unwrap();
    assert_eq!(ctl["streamNextRecord"], 5, "{ctl}");
    assert_eq!(ctl["streamNextOffset"], offset(10), "{ctl}");

    // Ordinary (offset) SSE on the same stream has no record fields.
    let (mut c, _) = open_sse(&s, &format!("{p}?offset=-1&live=sse"));
    let events = events_through_control(&mut c);
    let ctl: Value = serde_json::from_str(&events.last().unwrap().1).unwrap();
    assert!(ctl.get("streamNextRecord").is_none(), "{ctl}");
}

#[test]
fn sse_envelope_view_sends_one_record_per_event() {
    let s = server_with_bucket("ssej");
    let p = "/ssej/env";
    s.put(p, JSON, br#"[1, {"two": 2}, "three"]"#).expect(201);

    let (mut c, head) = open_sse(&s, &format!("{p}?record=0&record_view=envelope&live=sse"));
    assert!(head.contains("stream-data-content-type: application/vnd.durable-stream-record+json"), "{head}");
    assert_eq!(head.matches("stream-data-content-type:").count(), 1, "{head}");
    let events = events_through_control(&mut c);
    assert_eq!(events.len(), 4, "{events:?}");
    let data: Vec<Value> = events[..3]
        .iter()
        .map(|(e, d)| {
            assert_eq!(e, "data");
            serde_json::from_str(d).unwrap_or_else(|err| panic!("{d:?}: {err}"))
        })
        .collect();
    assert_eq!(
        data,
        vec![
            json!({"record": 0, "value": 1}),
            json!({"record": 1, "value": {"two": 2}}),
            json!({"record": 2, "value": "three"}),
        ]
    );
    let ctl: Value = serde_json::from_str(&events[3].1).unwrap();
    assert_eq!(events[3].0, "control");
    assert_eq!(ctl["streamFirstRecord"], 0, "{ctl}");
    assert_eq!(ctl["streamNextRecord"], 3, "{ctl}");

    s.post(p, JSON, b"[4, 5]").expect(204);
    let events = events_through_control(&mut c);
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(serde_json::from_str::<Value>(&events[0].1).unwrap(), json!({"record": 3, "value": 4}));
    assert_eq!(serde_json::from_str::<Value>(&events[1].1).unwrap(), json!({"record": 4, "value": 5}));
    let ctl: Value = serde_json::from_str(&events[2].1).unwrap();
    assert_eq!(ctl["streamNextRecord"], 5, "{ctl}");
}

// ---------------------------------------------------------------------------
// 8. max_bytes on ordinary reads
// ---------------------------------------------------------------------------

/// Reads `path` from the start in `max_bytes` chunks; returns the chunks.
fn chunked(s: &Server, path: &str, max_bytes: u64) -> Vec<Vec<u8>> {
    let mut at = "-1".to_string();
    let mut chunks = Vec::new();
    for _ in 0..64 {
        let r = s.get(&format!("{path}?offset={at}&max_bytes={max_bytes}")).expect(200);
        let done = r.header("stream-up-to-date") == Some("true");
        at = r.next_offset();
        chunks.push(r.body);
        if done {
            return chunks;
        }
    }
    panic!("no end after 64 chunks: {chunks:?}");
}

#[test]
fn max_bytes_cuts_text_at_character_boundaries() {
    let s = server_with_bucket("maxb");
    let p = "/maxb/t";
    let text = "héllo wörld";
    s.put(p, TEXT, text.as_bytes()).expect(201);

    let r = s.get(&format!("{p}?offset=-1&max_bytes=2")).expect(200);
    assert_eq!(r.text(), "h", "é must not be split");
    assert_eq!(r.next_offset(), offset(1));
    assert!(!r.has("stream-up-to-date"), "{r:?}");
    let r = s.get(&format!("{p}?offset={}&max_bytes=2", offset(1))).expect(200);
    assert_eq!(r.text(), "é");
    assert_eq!(r.next_offset(), offset(3));
    let r = s.get(&format!("{p}?offset={}&max_bytes=3", offset(1))).expect(200);
    assert_eq!(r.text(), "él");
    assert_eq!(r.next_offset(), offset(4));

    for max in 2..=8 {
        let chunks = chunked(&s, p, max);
        for c in &chunks {
            assert!(std::str::from_utf8(c).is_ok(), "max_bytes={max}: chunk {c:?} splits a character");
            assert!(!c.is_empty() && c.len() as u64 <= max, "max_bytes={max}: chunk {c:?}");
        }
        assert_eq!(chunks.concat(), text.as_bytes(), "max_bytes={max}");
    }

    // Across message boundaries too.
    s.post(p, TEXT, "ü!".as_bytes()).expect(204);
    let chunks = chunked(&s, p, 4);
    assert!(chunks.iter().all(|c| std::str::from_utf8(c).is_ok()), "{chunks:?}");
    assert_eq!(chunks.concat(), format!("{text}ü!").as_bytes());

    // Bad values.
    for q in ["max_bytes=0", "max_bytes=-1", "max_bytes=x"] {
        let r = s.get(&format!("{p}?offset=-1&{q}"));
        assert_eq!(r.status, 400, "?{q}: {}", r.text());
    }
}

#[test]
fn max_bytes_below_one_character_never_splits_it() {
    let s = server_with_bucket("maxb");
    let p = "/maxb/one";
    s.put(p, TEXT, "hé✓".as_bytes()).expect(201);
    // The only way to make progress without splitting a character is to
    // return it whole (the reader's own doc: "keeping at least one whole
    // character").
    let r = s.get(&format!("{p}?offset={}&max_bytes=1", offset(1))).expect(200);
    assert_eq!(r.text(), "é", "got {:?}", r.body);
    assert_eq!(r.next_offset(), offset(3));
    let r = s.get(&format!("{p}?offset={}&max_bytes=2", offset(3))).expect(200);
    assert_eq!(r.text(), "✓", "got {:?}", r.body);
    assert_eq!(r.next_offset(), offset(6));
}

#[test]
fn max_bytes_on_binary_streams_is_exact() {
    let s = server_with_bucket("maxb");
    let p = "/maxb/b";
    stream_of(&s, p, OCTET, &[b"\x00\x01", b"\xc3\xa9", b"\xff\xfe\xfd"]);
    let r = s.get(&format!("{p}?offset=-1&max_bytes=3")).expect(200);
    assert_eq!(r.body, b"\x00\x01\xc3");
    assert_eq!(r.next_offset(), offset(3));
    let r = s.get(&format!("{p}?offset={}&max_bytes=3", offset(3))).expect(200);
    assert_eq!(r.body, b"\xa9\xff\xfe");
    assert_eq!(r.next_offset(), offset(6));
    let r = s.get(&format!("{p}?offset={}&max_bytes=3", offset(6))).expect(200);
    assert_eq!(r.body, b"\xfd");
    assert_eq!(r.h("stream-up-to-date"), "true");
    // Chunked reads reproduce the stream.
    for max in 1..=4 {
        assert_eq!(chunked(&s, p, max).concat(), b"\x00\x01\xc3\xa9\xff\xfe\xfd", "max_bytes={max}");
    }
}

#[test]
fn max_bytes_is_never_exceeded_at_a_message_boundary() {
    let s = server_with_bucket("maxb");
    for (p, ct) in [("/maxb/bin", OCTET), ("/maxb/txt", TEXT)] {
        stream_of(&s, p, ct, &[b"ab", b"cd", b"ef"]);
        // "ab" fills max_bytes=2 exactly: nothing of "cd" may follow.
        let r = s.get(&format!("{p}?offset=-1&max_bytes=2")).expect(200);
        assert_eq!(r.text(), "ab", "{ct}");
        assert_eq!(r.next_offset(), offset(2), "{ct}");
        // From inside a message: its rest fills the limit.
        let r = s.get(&format!("{p}?offset={}&max_bytes=1", offset(1))).expect(200);
        assert_eq!(r.text(), "b", "{ct}");
        let chunks = chunked(&s, p, 1);
        assert_eq!(chunks.len(), 6, "{ct}: {chunks:?}");
        assert_eq!(chunks.concat(), b"abcdef", "{ct}");
    }
}

// ---------------------------------------------------------------------------
// 9. Durability
// ---------------------------------------------------------------------------

#[test]
fn extensions_survive_a_kill() {
    let mut s = server_with_bucket("dura");
    // A text stream with snapshot, retention, attributes and batch appends.
    let t = "/dura/t";
    s.req("PUT", t, &[("Content-Type", TEXT), ("Stream-Attrs", r#"{"title":"T","metadata":{"v":1}}"#)], b"aaa")
        .expect(201);
    s.post(t, TEXT, b"bbb").expect(204);
    let digest = s
        .req("PUT", &format!("{t}/snapshot/{}", offset(3)), &[("Content-Type", "application/x-snap")], b"SNAP")
        .expect(204)
        .h("stream-snapshot-digest")
        .to_string();
    s.req("PUT", &format!("{t}/retention/{}", offset(3)), &[], b"").expect(204);
    s.req("PUT", &format!("{t}/attrs"), &[("Content-Type", JSON)], br#"{"title":"T2"}"#).expect(204);
    s.post(&format!("{t}/append-batch"), TEXT, &frames(&[b"cc", b"dd"])).expect(200);

    // A JSON stream with a producer, a batch, snapshot and retention by record.
    let j = "/dura/j";
    s.put(j, JSON, b"[1, 2]").expect(201);
    let stamp = [("Content-Type", JSON), ("Producer-Id", "p"), ("Producer-Epoch", "0"), ("Producer-Seq", "0")];
    s.req("POST", j, &stamp, b"3").expect(200);
    s.post(&format!("{j}/append-batch"), JSON, &frames(&[b"[4, 5]", b"6"])).expect(200);
    s.req("PUT", &format!("{j}/snapshot?record=2"), &[("Content-Type", JSON)], b"[1,2]").expect(204);
    s.req("PUT", &format!("{j}/retention?record=2"), &[], b"").expect(204);

    let boot_t = multipart(&s.get(&format!("{t}/bootstrap")).expect(200));
    let boot_j = multipart(&s.get(&format!("{j}/bootstrap")).expect(200));

    s.restart_after_kill();

    // Text stream.
    let r = s.get(&format!("{t}?offset=-1")).expect(200);
    assert_eq!(r.body, b"bbbccdd");
    assert_eq!(r.next_offset(), offset(10));
    s.get(&format!("{t}?offset={}", offset(0))).expect(410);
    let r = s.head(t).expect(200);
    assert_eq!(r.h("stream-snapshot-offset"), offset(3));
    assert_eq!(r.h("stream-snapshot-digest"), digest);
    let location = s.get(&format!("{t}/snapshot")).expect(307).h("location").to_string();
    let r = s.get(&location).expect(200);
    assert_eq!(r.body, b"SNAP");
    assert_eq!(r.h("content-type"), "application/x-snap");
    assert_eq!(r.h("stream-snapshot-digest"), digest);
    s.delete(&location).expect(409);
    s.req("PUT", &format!("{t}/retention/{}", offset(0)), &[], b"").expect(410);
    assert_eq!(s.get(&format!("{t}/attrs")).expect(200).json(), json!({"title": "T2"}));
    assert_eq!(multipart(&s.get(&format!("{t}/bootstrap")).expect(200)), boot_t);
    assert_eq!(
        boot_t,
        vec![part("application/x-snap", b"SNAP"), part(TEXT, b"bbb"), part(TEXT, b"cc"), part(TEXT, b"dd")]
    );

    // JSON stream.
    let r = s.head(j).expect(200);
    assert_eq!(r.h("stream-record-first"), "2");
    assert_eq!(r.h("stream-record-next"), "6");
    s.get(&format!("{j}?record=1")).expect(410);
    assert_eq!(s.get(&format!("{j}?record=2")).expect(200).text(), "3\n4\n5\n6\n");
    assert_eq!(multipart(&s.get(&format!("{j}/bootstrap")).expect(200)), boot_j);
    // The producer's retry still answers with its original range.
    let r = s.req("POST", j, &stamp, b"3").expect(204);
    assert_eq!(r.h("stream-record-start"), "2");
    assert_eq!(r.h("stream-record-next"), "3");
    // New appends continue where the log left off.
    let r = s.post(&format!("{j}/append-batch"), JSON, &frames(&[b"7"])).expect(200);
    assert_eq!(r.json()[0]["stream_record_start"], 6);
    assert_eq!(r.json()[0]["stream_record_next"], 7);
    let r = s.post(&format!("{t}/append-batch"), TEXT, &frames(&[b"e"])).expect(200);
    assert_eq!(r.json()[0]["stream_next_offset"], offset(11));
}

// ---------------------------------------------------------------------------
// Soft-deleted streams (deleted while a fork still reads them)
// ---------------------------------------------------------------------------

/// A parent stream deleted while its fork lives: every operation on it
/// answers 410 Gone.
fn soft_deleted(s: &Server) -> &'static str {
    let parent = "/gone/parent";
    s.put(parent, TEXT, b"abc").expect(201);
    s.req("PUT", "/gone/child", &[("Content-Type", TEXT), ("Stream-Forked-From", parent)], b"").expect(201);
    s.delete(parent).expect(204);
    s.head(parent).expect(410);
    parent
}

#[test]
fn soft_deleted_streams_refuse_read_extensions() {
    let s = server_with_bucket("gone");
    let p = soft_deleted(&s);
    s.get(&format!("{p}/attrs")).expect(410);
    s.get(&format!("{p}/bootstrap")).expect(410);
    s.get(&format!("{p}/snapshot")).expect(410);
    s.req("PUT", &format!("{p}/snapshot/{}", offset(3)), &[("Content-Type", TEXT)], b"x").expect(410);
    s.post(p, TEXT, b"x").expect(410);
    assert_eq!(s.get("/gone/child?offset=-1").expect(200).body, b"abc");
}

#[test]
fn append_batch_to_a_soft_deleted_stream_is_gone() {
    let s = server_with_bucket("gone");
    let p = soft_deleted(&s);
    let r = s.post(&format!("{p}/append-batch"), TEXT, &frames(&[b"zombie"]));
    assert_eq!(r.status, 410, "{}", r.text());
    // The fork still sees exactly the parent's bytes at fork time.
    assert_eq!(s.get("/gone/child?offset=-1").expect(200).body, b"abc");
}

#[test]
fn attrs_of_a_soft_deleted_stream_are_gone() {
    let s = server_with_bucket("gone");
    let p = soft_deleted(&s);
    let r = s.req("PUT", &format!("{p}/attrs"), &[("Content-Type", JSON)], br#"{"title":"zombie"}"#);
    assert_eq!(r.status, 410, "{}", r.text());
}
