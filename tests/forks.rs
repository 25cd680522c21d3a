//! Forks (`Stream-Forked-From`) on `/v1/stream/...`: creation, fork offsets
//! and sub-offsets, isolation between a fork and its source, chains of forks,
//! forks across shards, soft deletes with cascading removal, TTL inheritance
//! and recovery after a crash.

mod common;

use common::{offset, Resp, Server};
use sluice_shards::ids::stream_shard;
use std::time::{Duration, Instant};

const TEXT: &str = "text/plain";
const JSON: &str = "application/json";
const ZERO: &str = "0000000000000000_0000000000000000";

fn path(name: &str) -> String {
    format!("/v1/stream/{name}")
}

/// PUT `name` as a fork of `from`, with extra headers.
fn fork(s: &Server, name: &str, from: &str, extra: &[(&str, &str)]) -> Resp {
    let from = path(from);
    let mut headers = vec![("Stream-Forked-From", from.as_str())];
    headers.extend_from_slice(extra);
    s.req("PUT", &path(name), &headers, b"")
}

/// As `fork`, with an initial body.
fn fork_with_body(s: &Server, name: &str, from: &str, extra: &[(&str, &str)], body: &[u8]) -> Resp {
    let from = path(from);
    let mut headers = vec![("Stream-Forked-From", from.as_str())];
    headers.extend_from_slice(extra);
    s.req("PUT", &path(name), &headers, body)
}

/// A whole read from the start: 200, up to date.
#[track_caller]
fn read(s: &Server, name: &str) -> Resp {
    let r = s.get(&format!("{}?offset=-1", path(name))).expect(200);
    assert_eq!(r.header("stream-up-to-date"), Some("true"), "{name}: {r:?}");
    r
}

#[track_caller]
fn read_text(s: &Server, name: &str) -> String {
    read(s, name).text()
}

/// Polls HEAD until it answers `want`, for at most `within`.
#[track_caller]
fn wait_for_status(s: &Server, name: &str, want: u16, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let st = s.head(&path(name)).status;
        if st == want {
            return;
        }
        assert!(Instant::now() < deadline, "{name}: HEAD still answers {st}, wanted {want} within {within:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A stream name starting with `prefix` that lives on shard `shard` of 2.
fn name_on(prefix: &str, shard: usize) -> String {
    (0..1000)
        .map(|i| format!("{prefix}-{i}"))
        .find(|n| stream_shard("v1-stream", n, 2) == shard)
        .expect("a name on each shard")
}

/// Forks are transparent: no response names its source.
#[track_caller]
fn no_fork_headers(r: &Resp) {
    for h in ["stream-forked-from", "stream-fork-offset", "stream-fork-sub-offset"] {
        assert!(!r.has(h), "unexpected {h} in {r:?}");
    }
}

#[test]
fn fork_defaults_to_the_source_tail_and_appends_after_it() {
    let s = Server::start();
    let tail = s.put(&path("src"), TEXT, b"source data").expect(201).next_offset();
    assert_eq!(tail, offset(11));

    let r = fork(&s, "f", "src", &[("Content-Type", TEXT)]).expect(201);
    assert_eq!(r.next_offset(), tail, "a fork starts at the source tail");
    assert_eq!(r.h("content-type"), TEXT);
    assert!(!r.has("stream-closed"));
    no_fork_headers(&r);
    let r = s.head(&path("f")).expect(200);
    assert_eq!(r.next_offset(), tail);
    no_fork_headers(&r);

    // Inherited data alone.
    let r = read(&s, "f");
    assert_eq!(r.body, b"source data");
    assert_eq!(r.next_offset(), tail);
    assert_eq!(r.h("content-type"), TEXT);
    no_fork_headers(&r);

    // The fork's own appends come after the inherited bytes, in the same offset space.
    let r = s.post(&path("f"), TEXT, b" fork").expect(204);
    assert_eq!(r.next_offset(), offset(16));
    assert_eq!(read_text(&s, "f"), "source data fork");
    let r = s.get(&format!("{}?offset={tail}", path("f"))).expect(200);
    assert_eq!(r.text(), " fork");
    // Offsets below the fork point mean the same bytes as in the source.
    let r = s.get(&format!("{}?offset={}", path("f"), offset(7))).expect(200);
    assert_eq!(r.text(), "data fork");
    // Reading at the fork tail: empty and up to date.
    let r = s.get(&format!("{}?offset={}", path("f"), offset(16))).expect(200);
    assert!(r.body.is_empty());
    assert_eq!(r.h("stream-up-to-date"), "true");

    // The source is untouched.
    assert_eq!(read_text(&s, "src"), "source data");
    assert_eq!(s.head(&path("src")).expect(200).next_offset(), tail);
}

#[test]
fn fork_offsets_mid_zero_head_and_out_of_range() {
    let s = Server::start();
    let mid = s.put(&path("src"), TEXT, b"first").expect(201).next_offset();
    assert_eq!(mid, offset(5));
    let head = s.post(&path("src"), TEXT, b"second").expect(204).next_offset();

    // At a mid offset: only the bytes before it.
    let r = fork(&s, "at-mid", "src", &[("Content-Type", TEXT), ("Stream-Fork-Offset", &mid)]).expect(201);
    assert_eq!(r.next_offset(), mid);
    no_fork_headers(&r);
    let r = read(&s, "at-mid");
    assert_eq!(r.text(), "first");
    assert_eq!(r.next_offset(), mid);

    // Inside an append: text streams fork at any byte.
    fork(&s, "at-byte", "src", &[("Content-Type", TEXT), ("Stream-Fork-Offset", &offset(8))]).expect(201);
    assert_eq!(read_text(&s, "at-byte"), "firstsec");
    s.post(&path("at-byte"), TEXT, b"!").expect(204);
    assert_eq!(read_text(&s, "at-byte"), "firstsec!");

    // At offset zero: nothing inherited.
    let r = fork(&s, "at-zero", "src", &[("Content-Type", TEXT), ("Stream-Fork-Offset", ZERO)]).expect(201);
    assert_eq!(r.next_offset(), ZERO);
    let r = read(&s, "at-zero");
    assert!(r.body.is_empty(), "{r:?}");
    assert_eq!(r.next_offset(), ZERO);
    s.post(&path("at-zero"), TEXT, b"own").expect(204);
    assert_eq!(read_text(&s, "at-zero"), "own");

    // At the head, given explicitly.
    fork(&s, "at-head", "src", &[("Content-Type", TEXT), ("Stream-Fork-Offset", &head)]).expect(201);
    assert_eq!(read_text(&s, "at-head"), "firstsecond");

    // Beyond the tail: 400, and nothing is created.
    let beyond = "9999999999999999_9999999999999999";
    fork(&s, "too-far", "src", &[("Content-Type", TEXT), ("Stream-Fork-Offset", beyond)]).expect(400);
    fork(&s, "too-far", "src", &[("Content-Type", TEXT), ("Stream-Fork-Offset", &offset(12))]).expect(400);
    // Malformed offsets: 400.
    for bad in ["abc", "", "0000000000000000_000000000000000x", "1_2"] {
        fork(&s, "too-far", "src", &[("Content-Type", TEXT), ("Stream-Fork-Offset", bad)]).expect(400);
    }
    s.head(&path("too-far")).expect(404);
    assert_eq!(read_text(&s, "src"), "firstsecond");
}

#[test]
fn fork_of_a_missing_source_or_with_another_content_type_is_refused() {
    let s = Server::start();
    fork(&s, "f", "nowhere", &[("Content-Type", TEXT)]).expect(404);
    fork(&s, "f", "nowhere", &[]).expect(404);
    s.head(&path("f")).expect(404);

    s.put(&path("src"), TEXT, b"data").expect(201);
    fork(&s, "f", "src", &[("Content-Type", JSON)]).expect(409);
    s.head(&path("f")).expect(404);
    // The target exists already with a different content type: 409.
    s.put(&path("taken"), JSON, b"").expect(201);
    fork(&s, "taken", "src", &[("Content-Type", TEXT)]).expect(409);
    // ... or as a plain stream with the same one: also 409, it is no fork.
    s.put(&path("plain"), TEXT, b"").expect(201);
    fork(&s, "plain", "src", &[("Content-Type", TEXT)]).expect(409);
    assert!(s.get(&path("plain")).expect(200).body.is_empty());

    // None of the refused forks left a reference on the source: deleting it
    // is a hard delete (404 afterwards, not 410).
    s.delete(&path("src")).expect(204);
    s.head(&path("src")).expect(404);
    s.get(&path("src")).expect(404);
    s.put(&path("src"), TEXT, b"").expect(201);
}

#[test]
fn fork_without_content_type_inherits_the_source_type() {
    let s = Server::start();
    s.put(&path("src"), JSON, br#"[{"from":"source"}]"#).expect(201);

    let r = fork(&s, "f", "src", &[]).expect(201);
    assert_eq!(r.h("content-type"), JSON);
    assert_eq!(s.head(&path("f")).expect(200).h("content-type"), JSON);
    s.post(&path("f"), JSON, br#"[{"from":"fork"}]"#).expect(204);
    let r = read(&s, "f");
    assert_eq!(r.h("content-type"), JSON);
    assert_eq!(r.json(), serde_json::json!([{"from": "source"}, {"from": "fork"}]));
    // Another type on the inherited stream is refused like on any stream.
    s.post(&path("f"), TEXT, b"x").expect(409);

    // An explicit, equal type (any case, with parameters) is accepted.
    let r = fork(&s, "f2", "src", &[("Content-Type", "Application/JSON; charset=utf-8")]).expect(201);
    assert!(r.h("content-type").to_ascii_lowercase().starts_with(JSON), "{r:?}");
    assert_eq!(read(&s, "f2").json(), serde_json::json!([{"from": "source"}]));
    // An empty Content-Type counts as absent.
    fork(&s, "f3", "src", &[("Content-Type", "")]).expect(201);
    assert_eq!(s.head(&path("f3")).expect(200).h("content-type"), JSON);

    // A JSON fork at a message boundary.
    let mid = s.head(&path("src")).expect(200).next_offset();
    s.post(&path("src"), JSON, br#"{"later":true}"#).expect(204);
    fork(&s, "f4", "src", &[("Stream-Fork-Offset", &mid)]).expect(201);
    assert_eq!(read(&s, "f4").json(), serde_json::json!([{"from": "source"}]));
}

#[test]
fn json_fork_offset_inside_a_message_is_refused() {
    let s = Server::start();
    s.put(&path("src"), JSON, br#"[{"a":1},{"b":2}]"#).expect(201);
    // Reads refuse offsets that are not message boundaries; so must forks.
    s.get(&format!("{}?offset={}", path("src"), offset(3))).expect(400);
    fork(&s, "f", "src", &[("Stream-Fork-Offset", &offset(3))]).expect(400);
    s.head(&path("f")).expect(404);
}

#[test]
fn source_and_fork_appends_are_invisible_to_each_other() {
    let s = Server::start();
    s.put(&path("src"), TEXT, b"before").expect(201);
    fork(&s, "f", "src", &[("Content-Type", TEXT)]).expect(201);

    s.post(&path("src"), TEXT, b" after").expect(204);
    assert_eq!(read_text(&s, "src"), "before after");
    assert_eq!(read_text(&s, "f"), "before", "a later source append leaked into the fork");

    s.post(&path("f"), TEXT, b" forked").expect(204);
    assert_eq!(read_text(&s, "f"), "before forked");
    assert_eq!(read_text(&s, "src"), "before after", "a fork append leaked into the source");

    // Both continue in the same offset space from the fork point, independently.
    assert_eq!(s.head(&path("src")).expect(200).next_offset(), offset(12));
    assert_eq!(s.head(&path("f")).expect(200).next_offset(), offset(13));

    // Closing one does not close the other.
    s.req("POST", &path("src"), &[("Stream-Closed", "true")], b"").expect(204);
    assert!(!s.head(&path("f")).expect(200).has("stream-closed"));
    s.post(&path("f"), TEXT, b"!").expect(204);
    s.req("POST", &path("f"), &[("Stream-Closed", "true")], b"").expect(204);
    assert_eq!(s.head(&path("f")).expect(200).h("stream-closed"), "true");

    // A fork of a closed source starts open.
    let r = fork(&s, "f2", "src", &[("Content-Type", TEXT)]).expect(201);
    assert!(!r.has("stream-closed"), "{r:?}");
    s.post(&path("f2"), TEXT, b" more").expect(204);
    assert_eq!(read_text(&s, "f2"), "before after more");
}

#[test]
fn live_reads_on_a_fork_follow_the_fork_only() {
    let s = Server::start_with(&["--long-poll-timeout", "10s"]);
    s.put(&path("src"), TEXT, b"inherited").expect(201);
    let tail = fork(&s, "f", "src", &[]).expect(201).next_offset();

    // From the start: the inherited data at once.
    let started = Instant::now();
    let r = s.get(&format!("{}?offset=-1&live=long-poll", path("f"))).expect(200);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(r.text(), "inherited");
    assert_eq!(r.next_offset(), tail);

    // At the fork tail: a source append does not answer it, a fork append does.
    let mut waiter = s.connect();
    waiter.send(&common::build("GET", &format!("{}?offset={tail}&live=long-poll", path("f")), &[], b"")).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    s.post(&path("src"), TEXT, b" source extra").expect(204);
    std::thread::sleep(Duration::from_millis(100));
    s.post(&path("f"), TEXT, b" fork new").expect(204);
    let r = waiter.read_response(false).expect(200);
    assert_eq!(r.text(), " fork new");

    // SSE from the start: inherited and own data, nothing of the source's later bytes.
    s.req("POST", &path("f"), &[("Stream-Closed", "true")], b"").expect(204);
    let mut c = s.connect();
    c.send(&common::build("GET", &format!("{}?offset=-1&live=sse", path("f")), &[], b"")).unwrap();
    let head = String::from_utf8(c.read_until(b"\r\n\r\n").unwrap()).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let raw = String::from_utf8(c.read_to_eof().unwrap()).unwrap();
    let data: String = raw
        .split("\n\n")
        .filter(|b| b.starts_with("event: data\n"))
        .flat_map(|b| b.lines().filter_map(|l| l.strip_prefix("data:")))
        .collect();
    assert_eq!(data, "inherited fork new", "{raw}");
    assert!(raw.contains("\"streamClosed\":true"), "{raw}");
}

#[test]
fn sub_offset_counts_bytes_on_text_streams() {
    let s = Server::start();
    s.put(&path("src"), TEXT, b"hello").expect(201);

    let r = fork(&s, "f3", "src", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "3")]).expect(201);
    assert_eq!(r.next_offset(), offset(3));
    assert_eq!(r.h("content-type"), TEXT);
    let r = read(&s, "f3");
    assert_eq!(r.text(), "hel");
    assert_eq!(r.next_offset(), offset(3));
    // The creation offset is a valid read position at the tail.
    let r = s.get(&format!("{}?offset={}", path("f3"), offset(3))).expect(200);
    assert!(r.body.is_empty());
    assert_eq!(r.h("stream-up-to-date"), "true");
    s.post(&path("f3"), TEXT, b"LO").expect(204);
    assert_eq!(read_text(&s, "f3"), "helLO");

    // Exactly the remaining length is fine.
    fork(&s, "f5", "src", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "5")]).expect(201);
    assert_eq!(read_text(&s, "f5"), "hello");

    // An initial body follows the materialized prefix.
    let r = fork_with_body(
        &s,
        "fxy",
        "src",
        &[("Content-Type", TEXT), ("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "3")],
        b"XY",
    )
    .expect(201);
    assert_eq!(r.next_offset(), offset(5));
    assert_eq!(read_text(&s, "fxy"), "helXY");

    // Counting starts at the fork offset and may run into later appends.
    let anchor = s.put(&path("src2"), TEXT, b"first").expect(201).next_offset();
    s.post(&path("src2"), TEXT, b"second").expect(204);
    fork(&s, "mid", "src2", &[("Stream-Fork-Offset", &anchor), ("Stream-Fork-Sub-Offset", "3")]).expect(201);
    assert_eq!(read_text(&s, "mid"), "firstsec");
    assert_eq!(s.head(&path("mid")).expect(200).next_offset(), offset(8));

    // Sub-offset 0 is the same as none.
    fork(&s, "zero", "src", &[("Stream-Fork-Offset", ZERO)]).expect(201);
    fork(&s, "zero", "src", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "0")]).expect(200);
    assert!(read(&s, "zero").body.is_empty());

    // A closed source can be forked with a sub-offset too.
    s.req("PUT", &path("closed"), &[("Content-Type", TEXT), ("Stream-Closed", "true")], b"hello").expect(201);
    let r =
        fork(&s, "of-closed", "closed", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "3")]).expect(201);
    assert!(!r.has("stream-closed"));
    assert_eq!(read_text(&s, "of-closed"), "hel");
}

#[test]
fn sub_offset_counts_records_on_json_streams() {
    let s = Server::start();
    s.put(&path("src"), JSON, br#"[{"a":1},{"b":2},{"c":3},{"d":4}]"#).expect(201);

    let r = fork(&s, "f2", "src", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "2")]).expect(201);
    assert_eq!(r.h("content-type"), JSON);
    assert_eq!(read(&s, "f2").json(), serde_json::json!([{"a": 1}, {"b": 2}]));
    s.post(&path("f2"), JSON, br#"[{"own":true}]"#).expect(204);
    assert_eq!(read(&s, "f2").json(), serde_json::json!([{"a": 1}, {"b": 2}, {"own": true}]));

    // All records.
    fork(&s, "f4", "src", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "4")]).expect(201);
    assert_eq!(read(&s, "f4").json(), serde_json::json!([{"a": 1}, {"b": 2}, {"c": 3}, {"d": 4}]));
    // One more than there are: 400.
    fork(&s, "f5", "src", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "5")]).expect(400);
    s.head(&path("f5")).expect(404);

    // Counted from a mid offset, across appends.
    let mid = s.put(&path("src2"), JSON, br#"[{"n":1}]"#).expect(201).next_offset();
    s.post(&path("src2"), JSON, br#"[{"n":2},{"n":3}]"#).expect(204);
    s.post(&path("src2"), JSON, br#"{"n":4}"#).expect(204);
    fork(&s, "m", "src2", &[("Stream-Fork-Offset", &mid), ("Stream-Fork-Sub-Offset", "3")]).expect(201);
    assert_eq!(read(&s, "m").json(), serde_json::json!([{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}]));
    fork(&s, "m1", "src2", &[("Stream-Fork-Offset", &mid), ("Stream-Fork-Sub-Offset", "1")]).expect(201);
    assert_eq!(read(&s, "m1").json(), serde_json::json!([{"n": 1}, {"n": 2}]));
    fork(&s, "m4", "src2", &[("Stream-Fork-Offset", &mid), ("Stream-Fork-Sub-Offset", "4")]).expect(400);
}

#[test]
fn sub_offset_values_and_combinations_are_validated() {
    let s = Server::start();
    s.put(&path("src"), TEXT, b"hi").expect(201);
    for bad in ["05", "00", "-1", "+1", "abc", "1.5", "", "1e2", "0x1", "99999999999999999999999"] {
        let r = fork(&s, "f", "src", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", bad)]);
        assert_eq!(r.status, 400, "Stream-Fork-Sub-Offset {bad:?}: {r:?}");
    }
    // Without Stream-Forked-From, even 0 is refused and nothing is created.
    for sub in ["0", "1"] {
        s.req("PUT", &path("plain"), &[("Content-Type", TEXT), ("Stream-Fork-Sub-Offset", sub)], b"").expect(400);
    }
    s.head(&path("plain")).expect(404);
    // A positive sub-offset needs an explicit fork offset.
    fork(&s, "f", "src", &[("Stream-Fork-Sub-Offset", "1")]).expect(400);
    // Past the end of the source.
    fork(&s, "f", "src", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "3")]).expect(400);
    fork(&s, "f", "src", &[("Stream-Fork-Offset", &offset(2)), ("Stream-Fork-Sub-Offset", "1")]).expect(400);
    s.put(&path("empty"), TEXT, b"").expect(201);
    fork(&s, "f", "empty", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "1")]).expect(400);
    s.head(&path("f")).expect(404);

    // None of this left references behind.
    for src in ["src", "empty"] {
        s.delete(&path(src)).expect(204);
        s.head(&path(src)).expect(404);
    }
}

#[test]
fn fork_recreate_is_idempotent_and_a_different_sub_offset_conflicts() {
    let s = Server::start();
    s.put(&path("src"), TEXT, b"hello").expect(201);
    fork(&s, "plain", "src", &[("Content-Type", TEXT)]).expect(201);
    let r = fork(&s, "plain", "src", &[("Content-Type", TEXT)]).expect(200);
    assert_eq!(r.next_offset(), offset(5));
    no_fork_headers(&r);

    let sub2 = [("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "2")];
    fork(&s, "sub", "src", &sub2).expect(201);
    let r = fork(&s, "sub", "src", &sub2).expect(200);
    assert_eq!(r.next_offset(), offset(2));
    fork(&s, "sub", "src", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "3")]).expect(409);
    fork(&s, "sub", "src", &[("Stream-Fork-Offset", ZERO)]).expect(409);
    fork(&s, "sub", "src", &[("Stream-Fork-Offset", &offset(1)), ("Stream-Fork-Sub-Offset", "2")]).expect(409);
    s.put(&path("other"), TEXT, b"hello").expect(201);
    fork(&s, "sub", "other", &sub2).expect(409);
    assert_eq!(read_text(&s, "sub"), "he");

    // JSON: same rules, in records.
    s.put(&path("jsrc"), JSON, br#"[{"a":1},{"b":2},{"c":3}]"#).expect(201);
    let jsub2 = [("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "2")];
    fork(&s, "jsub", "jsrc", &jsub2).expect(201);
    fork(&s, "jsub", "jsrc", &jsub2).expect(200);
    fork(&s, "jsub", "jsrc", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "3")]).expect(409);
    assert_eq!(read(&s, "jsub").json(), serde_json::json!([{"a": 1}, {"b": 2}]));

    // The repeats and conflicts took no lasting reference on the sources:
    // once the forks are gone, deleting a source ends in 404, not 410.
    for (forks, src) in [(&["plain", "sub"][..], "src"), (&["jsub"][..], "jsrc"), (&[][..], "other")] {
        for f in forks {
            s.delete(&path(f)).expect(204);
            s.head(&path(f)).expect(404);
        }
        s.delete(&path(src)).expect(204);
        wait_for_status(&s, src, 404, Duration::from_secs(3));
    }
}

#[test]
fn forks_of_forks_read_through_three_levels() {
    let s = Server::start();
    s.put(&path("l0"), TEXT, b"A").expect(201);
    fork(&s, "l1", "l0", &[("Content-Type", TEXT)]).expect(201);
    s.post(&path("l1"), TEXT, b"B").expect(204);
    fork(&s, "l2", "l1", &[("Content-Type", TEXT)]).expect(201);
    s.post(&path("l2"), TEXT, b"C").expect(204);
    assert_eq!(read_text(&s, "l0"), "A");
    assert_eq!(read_text(&s, "l1"), "AB");
    assert_eq!(read_text(&s, "l2"), "ABC");

    s.post(&path("l0"), TEXT, b"0").expect(204);
    s.post(&path("l1"), TEXT, b"1").expect(204);
    assert_eq!(read_text(&s, "l0"), "A0");
    assert_eq!(read_text(&s, "l1"), "AB1");
    assert_eq!(read_text(&s, "l2"), "ABC");
    // A mid offset inside the chain reads across the fork points.
    let r = s.get(&format!("{}?offset={}", path("l2"), offset(1))).expect(200);
    assert_eq!(r.text(), "BC");

    // A third-level fork at an offset inside the first level's bytes.
    fork(&s, "l2b", "l1", &[("Stream-Fork-Offset", ZERO)]).expect(201);
    assert!(read(&s, "l2b").body.is_empty());
    fork(&s, "l3", "l2", &[("Stream-Fork-Offset", &offset(2))]).expect(201);
    assert_eq!(read_text(&s, "l3"), "AB");

    // Sub-offsets compose along a chain.
    s.put(&path("s0"), TEXT, b"abcdef").expect(201);
    fork(&s, "s1", "s0", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "4")]).expect(201);
    assert_eq!(read_text(&s, "s1"), "abcd");
    fork(&s, "s2", "s1", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "2")]).expect(201);
    assert_eq!(read_text(&s, "s2"), "ab");
    s.post(&path("s2"), TEXT, b"Z").expect(204);
    assert_eq!(read_text(&s, "s2"), "abZ");
    fork(&s, "s3", "s1", &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "5")]).expect(400);

    // JSON across three levels.
    s.put(&path("j0"), JSON, br#"[{"l":0}]"#).expect(201);
    fork(&s, "j1", "j0", &[]).expect(201);
    s.post(&path("j1"), JSON, br#"{"l":1}"#).expect(204);
    fork(&s, "j2", "j1", &[]).expect(201);
    s.post(&path("j2"), JSON, br#"{"l":2}"#).expect(204);
    assert_eq!(read(&s, "j2").json(), serde_json::json!([{"l": 0}, {"l": 1}, {"l": 2}]));
    assert_eq!(read(&s, "j1").json(), serde_json::json!([{"l": 0}, {"l": 1}]));
}

#[test]
fn forks_across_shards_and_on_the_same_shard() {
    let s = Server::start();
    for src_shard in 0..2 {
        let src = name_on(&format!("src{src_shard}"), src_shard);
        s.put(&path(&src), TEXT, b"shared ").expect(201);
        for fork_shard in 0..2 {
            let f = name_on(&format!("fork{src_shard}{fork_shard}"), fork_shard);
            fork(&s, &f, &src, &[("Content-Type", TEXT)]).expect(201);
            s.post(&path(&f), TEXT, format!("own-{fork_shard}").as_bytes()).expect(204);
            assert_eq!(read_text(&s, &f), format!("shared own-{fork_shard}"));
            // A sub-offset prefix materialized from the other shard's bytes.
            let p = name_on(&format!("pre{src_shard}{fork_shard}"), fork_shard);
            fork(&s, &p, &src, &[("Stream-Fork-Offset", ZERO), ("Stream-Fork-Sub-Offset", "3")]).expect(201);
            assert_eq!(read_text(&s, &p), "sha");
            // Long-poll from the start on a fork answers at once with the inherited data.
            let r = s.get(&format!("{}?offset=-1&live=long-poll", path(&p))).expect(200);
            assert_eq!(r.text(), "sha");
        }
        assert_eq!(read_text(&s, &src), "shared ");
    }

    // A chain that alternates shards: 0 -> 1 -> 0 -> 1.
    let names: Vec<String> = (0..4).map(|i| name_on(&format!("chain{i}"), i % 2)).collect();
    s.put(&path(&names[0]), TEXT, b"0").expect(201);
    for i in 1..4 {
        fork(&s, &names[i], &names[i - 1], &[]).expect(201);
        s.post(&path(&names[i]), TEXT, i.to_string().as_bytes()).expect(204);
    }
    assert_eq!(read_text(&s, &names[3]), "0123");
    assert_eq!(read_text(&s, &names[2]), "012");

    // Deleting across shards: soft while the fork lives, gone after it goes.
    let src = name_on("xdel-src", 0);
    let f = name_on("xdel-fork", 1);
    s.put(&path(&src), TEXT, b"kept").expect(201);
    fork(&s, &f, &src, &[]).expect(201);
    s.delete(&path(&src)).expect(204);
    s.head(&path(&src)).expect(410);
    assert_eq!(read_text(&s, &f), "kept");
    s.delete(&path(&f)).expect(204);
    s.head(&path(&f)).expect(404);
    wait_for_status(&s, &src, 404, Duration::from_secs(3));
}

#[test]
fn deleting_a_forked_source_soft_deletes_it_until_the_last_fork_goes() {
    let s = Server::start();
    s.put(&path("src"), TEXT, b"preserved data").expect(201);
    fork(&s, "f1", "src", &[("Content-Type", TEXT)]).expect(201);
    fork(&s, "f2", "src", &[("Content-Type", TEXT)]).expect(201);
    s.post(&path("f2"), TEXT, b"!").expect(204);

    s.delete(&path("src")).expect(204);
    // Every method on the soft-deleted path: 410, except PUT (409).
    s.head(&path("src")).expect(410);
    s.get(&format!("{}?offset=-1", path("src"))).expect(410);
    s.get(&path("src")).expect(410);
    s.get(&format!("{}?offset=-1&live=long-poll", path("src"))).expect(410);
    s.post(&path("src"), TEXT, b"more").expect(410);
    s.req("POST", &path("src"), &[("Stream-Closed", "true")], b"").expect(410);
    s.delete(&path("src")).expect(410);
    s.put(&path("src"), TEXT, b"").expect(409);
    s.put(&path("src"), JSON, b"").expect(409);
    fork(&s, "f3", "src", &[]).expect(409);
    s.head(&path("f3")).expect(404);
    // Nor can a fork take the soft-deleted name.
    fork(&s, "src", "f2", &[]).expect(409);
    s.head(&path("src")).expect(410);

    // The forks still read the source's bytes and take appends.
    assert_eq!(read_text(&s, "f1"), "preserved data");
    assert_eq!(read_text(&s, "f2"), "preserved data!");
    s.post(&path("f1"), TEXT, b"?").expect(204);
    assert_eq!(read_text(&s, "f1"), "preserved data?");

    // Deleting one fork leaves the source soft-deleted.
    s.delete(&path("f1")).expect(204);
    s.head(&path("f1")).expect(404);
    s.get(&path("f1")).expect(404);
    // Give a (wrong) early removal the chance to happen.
    std::thread::sleep(Duration::from_millis(200));
    s.head(&path("src")).expect(410);
    assert_eq!(read_text(&s, "f2"), "preserved data!");

    // Deleting the last fork removes the source for good.
    s.delete(&path("f2")).expect(204);
    s.head(&path("f2")).expect(404);
    wait_for_status(&s, "src", 404, Duration::from_secs(3));
    s.get(&path("src")).expect(404);
    s.delete(&path("src")).expect(404);
    // The name is free again, with no old data.
    s.put(&path("src"), JSON, b"").expect(201);
    assert_eq!(read(&s, "src").json(), serde_json::json!([]));
}

#[test]
fn deleting_forks_while_the_source_lives_keeps_the_source() {
    let s = Server::start();
    s.put(&path("src"), TEXT, b"alive").expect(201);
    fork(&s, "a", "src", &[]).expect(201);
    fork(&s, "b", "src", &[]).expect(201);
    s.delete(&path("a")).expect(204);
    s.delete(&path("b")).expect(204);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(read_text(&s, "src"), "alive");
    // And it is then deleted outright.
    s.delete(&path("src")).expect(204);
    wait_for_status(&s, "src", 404, Duration::from_secs(3));
}

#[test]
fn three_level_cascade_and_deleting_the_middle_of_a_chain() {
    let s = Server::start();
    s.put(&path("l0"), TEXT, b"A").expect(201);
    fork(&s, "l1", "l0", &[]).expect(201);
    s.post(&path("l1"), TEXT, b"B").expect(204);
    fork(&s, "l2", "l1", &[]).expect(201);
    s.post(&path("l2"), TEXT, b"C").expect(204);

    // The middle goes first: the ends are unaffected.
    s.delete(&path("l1")).expect(204);
    s.head(&path("l1")).expect(410);
    assert_eq!(read_text(&s, "l2"), "ABC");
    assert_eq!(read_text(&s, "l0"), "A");

    // Then the root: soft, since l1 still references it.
    s.delete(&path("l0")).expect(204);
    s.head(&path("l0")).expect(410);
    s.head(&path("l1")).expect(410);
    assert_eq!(read_text(&s, "l2"), "ABC");

    // Deleting the leaf removes it at once and the chain after it.
    s.delete(&path("l2")).expect(204);
    s.head(&path("l2")).expect(404);
    wait_for_status(&s, "l1", 404, Duration::from_secs(3));
    wait_for_status(&s, "l0", 404, Duration::from_secs(3));
    for n in ["l0", "l1", "l2"] {
        s.put(&path(n), TEXT, b"").expect(201);
    }
}

#[test]
fn fork_ttl_and_expiry_are_inherited_unless_given() {
    let s = Server::start();
    s.req("PUT", &path("ttl-src"), &[("Content-Type", TEXT), ("Stream-TTL", "3600")], b"x").expect(201);
    let r = fork(&s, "inherit", "ttl-src", &[]).expect(201);
    no_fork_headers(&r);
    let r = s.head(&path("inherit")).expect(200);
    assert_eq!(r.h("stream-ttl"), "3600");
    assert!(!r.has("stream-expires-at"), "{r:?}");
    // A repeat without TTL matches the inherited one.
    fork(&s, "inherit", "ttl-src", &[]).expect(200);

    fork(&s, "own", "ttl-src", &[("Stream-TTL", "7200")]).expect(201);
    assert_eq!(s.head(&path("own")).expect(200).h("stream-ttl"), "7200");
    fork(&s, "shorter", "ttl-src", &[("Stream-TTL", "1800")]).expect(201);
    assert_eq!(s.head(&path("shorter")).expect(200).h("stream-ttl"), "1800");
    // Not capped by the source.
    fork(&s, "longer", "ttl-src", &[("Stream-TTL", "99999")]).expect(201);
    assert_eq!(s.head(&path("longer")).expect(200).h("stream-ttl"), "99999");
    // Own Expires-At instead of the source's TTL.
    let at = "2099-01-01T00:00:00.000Z";
    fork(&s, "own-at", "ttl-src", &[("Stream-Expires-At", at)]).expect(201);
    let r = s.head(&path("own-at")).expect(200);
    assert!(!r.has("stream-ttl"), "{r:?}");
    assert!(r.h("stream-expires-at").starts_with("2099-01-01T00:00:00"), "{r:?}");

    // Expires-At is inherited too.
    s.req("PUT", &path("at-src"), &[("Content-Type", TEXT), ("Stream-Expires-At", at)], b"y").expect(201);
    let src_at = s.head(&path("at-src")).expect(200).h("stream-expires-at").to_string();
    fork(&s, "at-inherit", "at-src", &[]).expect(201);
    let r = s.head(&path("at-inherit")).expect(200);
    assert_eq!(r.h("stream-expires-at"), src_at);
    assert!(!r.has("stream-ttl"));
    fork(&s, "at-own-ttl", "at-src", &[("Stream-TTL", "60")]).expect(201);
    let r = s.head(&path("at-own-ttl")).expect(200);
    assert_eq!(r.h("stream-ttl"), "60");
    assert!(!r.has("stream-expires-at"), "{r:?}");

    // No lifetime on the source: none on the fork.
    s.put(&path("forever"), TEXT, b"z").expect(201);
    fork(&s, "forever-fork", "forever", &[]).expect(201);
    let r = s.head(&path("forever-fork")).expect(200);
    assert!(!r.has("stream-ttl") && !r.has("stream-expires-at"), "{r:?}");
}

#[test]
fn expiry_of_a_fork_and_of_a_forked_source() {
    let s = Server::start();
    // A fork with a short TTL of its own expires as not found.
    s.req("PUT", &path("src"), &[("Content-Type", TEXT), ("Stream-TTL", "60")], b"data").expect(201);
    fork(&s, "f", "src", &[("Stream-TTL", "1")]).expect(201);
    // A source with a short TTL and a fork that outlives it.
    s.req("PUT", &path("brief"), &[("Content-Type", TEXT), ("Stream-TTL", "1")], b"brief data").expect(201);
    fork(&s, "outlives", "brief", &[("Stream-TTL", "60")]).expect(201);
    s.head(&path("f")).expect(200);
    s.head(&path("brief")).expect(200);

    std::thread::sleep(Duration::from_millis(1000));
    wait_for_status(&s, "f", 404, Duration::from_secs(3));
    s.get(&path("f")).expect(404);
    // The expired fork's reference is gone: deleting the source is final.
    assert_eq!(read_text(&s, "src"), "data");
    s.delete(&path("src")).expect(204);
    wait_for_status(&s, "src", 404, Duration::from_secs(3));

    // The expired source is kept as a tombstone while its fork reads it.
    wait_for_status(&s, "brief", 410, Duration::from_secs(3));
    s.get(&path("brief")).expect(410);
    s.put(&path("brief"), TEXT, b"").expect(409);
    assert_eq!(read_text(&s, "outlives"), "brief data");
    s.delete(&path("outlives")).expect(204);
    wait_for_status(&s, "brief", 404, Duration::from_secs(3));
    s.put(&path("brief"), TEXT, b"").expect(201);
}

/// Deterministic filler bytes for chunk `i`.
fn chunk(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| ((i * 131 + j * 7) % 251) as u8).collect()
}

#[test]
fn forks_inherit_bytes_spread_over_many_segments_of_another_shard() {
    const OCTET: &str = "application/octet-stream";
    let mut s = Server::start_with(&["--segment-bytes", "65536"]);
    let src = name_on("seg-src", 0);
    let f = name_on("seg-fork", 1);
    s.put(&path(&src), OCTET, b"").expect(201);
    let mut want = Vec::new();
    for i in 0..12 {
        let c = chunk(i, 20_000);
        s.post(&path(&src), OCTET, &c).expect(204);
        want.extend_from_slice(&c);
    }
    // Fork in the middle of a chunk, with a sub-offset reaching into the next.
    let at = 5 * 20_000 + 1234;
    let sub = 30_000;
    fork(&s, &f, &src, &[("Stream-Fork-Offset", &offset(at)), ("Stream-Fork-Sub-Offset", &sub.to_string())])
        .expect(201);
    let mut fork_want = want[..(at + sub) as usize].to_vec();
    for i in 100..106 {
        let c = chunk(i, 20_000);
        s.post(&path(&f), OCTET, &c).expect(204);
        fork_want.extend_from_slice(&c);
    }
    // More source data after the fork, then the source goes (soft).
    s.post(&path(&src), OCTET, &chunk(50, 20_000)).expect(204);
    s.delete(&path(&src)).expect(204);

    let check = |s: &Server| {
        let r = read(s, &f);
        assert_eq!(r.body.len(), fork_want.len());
        assert!(r.body == fork_want, "fork bytes differ");
        let r = s.get(&format!("{}?offset={}", path(&f), offset(at - 10))).expect(200);
        assert!(r.body == fork_want[(at - 10) as usize..], "fork bytes from a mid offset differ");
    };
    check(&s);
    s.restart_after_kill();
    check(&s);
    s.head(&path(&src)).expect(410);
}

#[test]
fn forks_survive_a_restart_and_a_soft_deleted_source_stays_gone() {
    let mut s = Server::start();
    let src = name_on("rs-src", 0);
    let near = name_on("rs-near", 0);
    let far = name_on("rs-far", 1);
    let deep = name_on("rs-deep", 0);
    s.put(&path(&src), TEXT, b"source bytes").expect(201);
    fork(&s, &near, &src, &[]).expect(201);
    fork(&s, &far, &src, &[("Stream-Fork-Offset", &offset(6)), ("Stream-Fork-Sub-Offset", "3")]).expect(201);
    s.post(&path(&near), TEXT, b" near").expect(204);
    s.post(&path(&far), TEXT, b" far").expect(204);
    fork(&s, &deep, &far, &[]).expect(201);
    s.post(&path(&deep), TEXT, b" deep").expect(204);
    s.post(&path(&src), TEXT, b" later").expect(204);
    s.delete(&path(&src)).expect(204);
    s.head(&path(&src)).expect(410);

    s.restart_after_kill();

    s.head(&path(&src)).expect(410);
    s.put(&path(&src), TEXT, b"").expect(409);
    assert_eq!(read_text(&s, &near), "source bytes near");
    assert_eq!(read_text(&s, &far), "source by far");
    assert_eq!(read_text(&s, &deep), "source by far deep");
    // Appends continue from the recovered tails.
    let r = s.post(&path(&near), TEXT, b"!").expect(204);
    assert_eq!(r.next_offset(), offset(18));
    assert_eq!(read_text(&s, &near), "source bytes near!");

    // One fork gone: the source is still soft-deleted.
    s.delete(&path(&near)).expect(204);
    std::thread::sleep(Duration::from_millis(200));
    s.head(&path(&src)).expect(410);
    // A restart with the remaining chain keeps it that way.
    s.restart_after_kill();
    s.head(&path(&src)).expect(410);
    s.head(&path(&near)).expect(404);
    assert_eq!(read_text(&s, &deep), "source by far deep");

    // The middle fork is deleted (soft: `deep` reads it), then the leaf.
    s.delete(&path(&far)).expect(204);
    s.head(&path(&far)).expect(410);
    s.delete(&path(&deep)).expect(204);
    wait_for_status(&s, &far, 404, Duration::from_secs(3));
    wait_for_status(&s, &src, 404, Duration::from_secs(3));
    for n in [&near, &deep] {
        s.head(&path(n)).expect(404);
    }
    s.put(&path(&src), TEXT, b"again").expect(201);
    assert_eq!(read_text(&s, &src), "again");
}

/// A fork on one shard reads its source's files on the other through its
/// own cached descriptors; once the fork and the source are gone and the
/// source's files deleted, the fork's shard closes those descriptors at its
/// next checkpoint, so the deleted files' space goes back to the file system.
#[test]
fn descriptors_of_a_gone_source_on_another_shard_are_closed() {
    let s = Server::start_with(&["--flush-interval", "100ms"]);
    let (src, f) = (name_on("gone-src", 0), name_on("gone-fork", 1));
    s.put(&path(&src), TEXT, &[b'x'; 10_000]).expect(201);
    fork(&s, &f, &src, &[]).expect(201);
    s.post(&path(&f), TEXT, b"own bytes").expect(204);
    s.wait_flushed();
    assert_eq!(read(&s, &f).body.len(), 10_009, "the fork reads the source's file");
    // Shard 0 holds only the source's files.
    let streams = s.data_dir.join("shard-0/streams");
    let src_files: Vec<String> = std::fs::read_dir(&streams)
        .expect("shard 0's streams")
        .map(|e| e.unwrap().path().to_string_lossy().into_owned())
        .collect();
    assert!(!src_files.is_empty(), "the source's bytes are in its files");
    let held = || -> Vec<String> {
        let fds = std::fs::read_dir(format!("/proc/{}/fd", s.pid())).expect("fd dir");
        fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .map(|p| p.to_string_lossy().into_owned())
            .filter(|p| src_files.iter().any(|f| p.starts_with(f.as_str())))
            .collect()
    };
    assert!(!held().is_empty(), "the fork's shard holds the source's files open");
    s.delete(&path(&src)).expect(204);
    s.delete(&path(&f)).expect(204);
    wait_for_status(&s, &src, 404, Duration::from_secs(5));
    let tick = name_on("tick", 1);
    common::eventually("the source's files deleted and none held open", || {
        // A create and delete on the fork's shard: it checkpoints again.
        s.put(&path(&tick), TEXT, b"").expect(201);
        s.delete(&path(&tick)).expect(204);
        src_files.iter().all(|f| !std::path::Path::new(f).exists()) && held().is_empty()
    });
}
