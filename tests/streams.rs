//! Stream operations on both URL surfaces: `/v1/stream/{id}` (the built-in
//! bucket) and `/{bucket}/{id}` (an explicitly created bucket).

mod common;

use common::{all_bytes, offset, offset_pos, sse_events, Server};
use std::time::{Duration, Instant};

const BUCKET: &str = "tbucket";

/// Starts a server, creates the test bucket, and runs `f` once per surface
/// with the path prefix streams live under.
fn on_both_surfaces(f: impl Fn(&Server, &str)) {
    on_both_surfaces_with(&[], f);
}

/// As `on_both_surfaces`, with extra server flags.
fn on_both_surfaces_with(flags: &[&str], f: impl Fn(&Server, &str)) {
    let s = Server::start_with(flags);
    s.req("PUT", &format!("/{BUCKET}"), &[], b"").expect(201);
    for prefix in ["/v1/stream/", "/tbucket/"] {
        f(&s, prefix);
    }
}

const TEXT: &str = "text/plain";
const OCTET: &str = "application/octet-stream";
const JSON: &str = "application/json";

#[test]
fn create_is_idempotent_and_conflicts_are_refused() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}created");
        let r = s.put(&path, TEXT, b"").expect(201);
        assert_eq!(r.h("location"), format!("http://127.0.0.1{path}"));
        assert_eq!(r.h("content-type"), TEXT);
        assert_eq!(r.next_offset(), offset(0));

        // Same configuration again: 200, same tail, no Location.
        let r = s.put(&path, TEXT, b"").expect(200);
        assert_eq!(r.next_offset(), offset(0));
        assert_eq!(r.h("content-type"), TEXT);
        assert!(!r.has("location"), "{r:?}");
        // Media type comparison ignores case and parameters.
        s.put(&path, "TEXT/PLAIN; charset=utf-8", b"").expect(200);

        // A different configuration: 409.
        s.put(&path, OCTET, b"").expect(409);
        s.req("PUT", &path, &[("Content-Type", TEXT), ("Stream-TTL", "60")], b"").expect(409);
        s.req("PUT", &path, &[("Content-Type", TEXT), ("Stream-Closed", "true")], b"").expect(409);
        // The failed attempts changed nothing.
        let r = s.head(&path).expect(200);
        assert_eq!(r.h("content-type"), TEXT);
        assert!(!r.has("stream-ttl"));
        assert!(!r.has("stream-closed"));

        // Create with an initial body: the tail is the body length.
        let path2 = format!("{p}with-body");
        let r = s.put(&path2, OCTET, b"initial").expect(201);
        assert_eq!(r.next_offset(), offset(7));
        let r = s.get(&format!("{path2}?offset=-1")).expect(200);
        assert_eq!(r.body, b"initial");

        // No Content-Type: application/octet-stream.
        let path3 = format!("{p}no-ctype");
        let r = s.req("PUT", &path3, &[], b"").expect(201);
        assert_eq!(r.h("content-type"), OCTET);
    });
}

#[test]
fn append_and_read_back_byte_exact() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}appends");
        s.put(&path, TEXT, b"").expect(201);
        let r = s.post(&path, TEXT, b"hello ").expect(204);
        let after_first = r.next_offset();
        assert_eq!(offset_pos(&after_first), 6);
        let r = s.post(&path, "text/plain; charset=utf-8", b"world").expect(204);
        assert_eq!(r.next_offset(), offset(11));

        let r = s.get(&format!("{path}?offset=-1")).expect(200);
        assert_eq!(r.body, b"hello world");
        assert_eq!(r.h("content-type"), TEXT);
        assert_eq!(r.next_offset(), offset(11));
        assert_eq!(r.h("stream-up-to-date"), "true");
        assert!(!r.has("stream-closed"));

        // No offset at all reads from the start too.
        assert_eq!(s.get(&path).expect(200).body, b"hello world");

        // From an offset the server handed out: only what follows it.
        let r = s.get(&format!("{path}?offset={after_first}")).expect(200);
        assert_eq!(r.body, b"world");
        assert_eq!(r.next_offset(), offset(11));

        // From the tail itself: empty and up to date.
        let r = s.get(&format!("{path}?offset={}", offset(11))).expect(200);
        assert!(r.body.is_empty());
        assert_eq!(r.h("stream-up-to-date"), "true");

        // offset=now: nothing, positioned at the tail, never cached.
        let r = s.get(&format!("{path}?offset=now")).expect(200);
        assert!(r.body.is_empty(), "{:?}", r.text());
        assert_eq!(r.next_offset(), offset(11));
        assert_eq!(r.h("stream-up-to-date"), "true");
        assert_eq!(r.h("cache-control"), "no-store");

        // Binary: every byte value round-trips, from the start and mid-way.
        let bin = format!("{p}binary");
        s.put(&bin, OCTET, b"").expect(201);
        let bytes = all_bytes();
        let r = s.post(&bin, OCTET, &bytes[..100]).expect(204);
        let mid = r.next_offset();
        s.post(&bin, OCTET, &bytes[100..]).expect(204);
        let r = s.get(&format!("{bin}?offset=-1")).expect(200);
        assert_eq!(r.body, bytes);
        assert_eq!(r.next_offset(), offset(256));
        let r = s.get(&format!("{bin}?offset={mid}")).expect(200);
        assert_eq!(r.body, &bytes[100..]);
    });
}

#[test]
fn append_errors_and_missing_streams() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}errs");
        s.put(&path, TEXT, b"").expect(201);
        s.post(&path, OCTET, b"x").expect(409);
        s.post(&path, JSON, b"1").expect(409);
        s.post(&path, TEXT, b"").expect(400);
        // A body without a Content-Type is refused.
        s.req("POST", &path, &[], b"abc").expect(400);
        // Nothing was written by any of those.
        let r = s.get(&format!("{path}?offset=-1")).expect(200);
        assert!(r.body.is_empty());
        assert_eq!(r.next_offset(), offset(0));

        let missing = format!("{p}missing");
        s.post(&missing, TEXT, b"x").expect(404);
        s.get(&format!("{missing}?offset=-1")).expect(404);
        s.get(&missing).expect(404);
        s.head(&missing).expect(404);
        s.delete(&missing).expect(404);
        // None of those created it.
        s.get(&missing).expect(404);
    });
}

#[test]
fn invalid_offsets_and_read_parameters() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}offsets");
        s.put(&path, TEXT, b"abc").expect(201);
        for bad in [
            "abc",
            "-2",
            "5",
            "0000000000000000_000000000000000x",
            "0000000000000001_0000000000000000",
            "0000000000000000-0000000000000001",
        ] {
            let r = s.get(&format!("{path}?offset={bad}"));
            assert_eq!(r.status, 400, "offset={bad}: {}", r.text());
        }
        // One past the tail.
        s.get(&format!("{path}?offset={}", offset(4))).expect(400);
        s.get(&format!("{path}?offset={}&live=long-poll", offset(4))).expect(400);
        // Exactly the tail is fine.
        s.get(&format!("{path}?offset={}", offset(3))).expect(200);
        // offset twice, live without offset, unknown live mode.
        s.get(&format!("{path}?offset=-1&offset=-1")).expect(400);
        s.get(&format!("{path}?live=long-poll")).expect(400);
        s.get(&format!("{path}?offset=-1&live=websocket")).expect(400);
    });
}

#[test]
fn head_reports_metadata_without_a_body() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}meta");
        s.put(&path, TEXT, b"12345").expect(201);
        let mut c = s.connect();
        let r = c.request("HEAD", &path, &[], b"").expect(200);
        assert_eq!(r.h("cache-control"), "no-store");
        assert_eq!(r.h("content-type"), TEXT);
        assert_eq!(r.next_offset(), offset(5));
        assert!(!r.has("stream-closed"), "open stream: {r:?}");
        assert!(!r.has("stream-ttl"));
        // No body followed the head: the next response parses cleanly.
        let r = c.request("GET", &format!("{path}?offset=-1"), &[], b"");
        assert_eq!(r.expect(200).body, b"12345");

        s.req("POST", &path, &[("Stream-Closed", "true")], b"").expect(204);
        let r = s.head(&path).expect(200);
        assert_eq!(r.h("stream-closed"), "true");
        assert_eq!(r.h("cache-control"), "no-store");
        assert_eq!(r.next_offset(), offset(5));

        // TTL and Expires-At are reported back.
        let ttl = format!("{p}meta-ttl");
        s.req("PUT", &ttl, &[("Content-Type", TEXT), ("Stream-TTL", "3600")], b"").expect(201);
        assert_eq!(s.head(&ttl).expect(200).h("stream-ttl"), "3600");
        let exp = format!("{p}meta-exp");
        s.req("PUT", &exp, &[("Content-Type", TEXT), ("Stream-Expires-At", "2099-01-02T03:04:05Z")], b"").expect(201);
        assert_eq!(s.head(&exp).expect(200).h("stream-expires-at"), "2099-01-02T03:04:05.000Z");
    });
}

#[test]
fn delete_then_not_found_then_recreate_fresh() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}doomed");
        s.put(&path, TEXT, b"old data").expect(201);
        s.delete(&path).expect(204);
        s.get(&path).expect(404);
        s.head(&path).expect(404);
        s.post(&path, TEXT, b"x").expect(404);
        s.delete(&path).expect(404);
        // A new stream under the same name starts empty.
        let r = s.put(&path, OCTET, b"").expect(201);
        assert_eq!(r.next_offset(), offset(0));
        let r = s.get(&format!("{path}?offset=-1")).expect(200);
        assert!(r.body.is_empty(), "old data leaked: {:?}", r.text());
        assert_eq!(r.h("content-type"), OCTET);
    });
}

#[test]
fn close_only_post_then_appends_are_refused() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}closing");
        s.put(&path, TEXT, b"").expect(201);
        s.post(&path, TEXT, b"data").expect(204);
        let r = s.req("POST", &path, &[("Stream-Closed", "true")], b"").expect(204);
        assert_eq!(r.h("stream-closed"), "true");
        assert_eq!(r.next_offset(), offset(4));

        let r = s.post(&path, TEXT, b"more").expect(409);
        assert_eq!(r.h("stream-closed"), "true");
        assert_eq!(r.next_offset(), offset(4));

        // Closing again is idempotent.
        let r = s.req("POST", &path, &[("Stream-Closed", "true")], b"").expect(204);
        assert_eq!(r.h("stream-closed"), "true");

        let r = s.get(&format!("{path}?offset=-1")).expect(200);
        assert_eq!(r.body, b"data");
        assert_eq!(r.h("stream-closed"), "true");
        assert_eq!(r.h("stream-up-to-date"), "true");
        assert_eq!(s.head(&path).expect(200).h("stream-closed"), "true");

        // Final data and close in one request.
        let path2 = format!("{p}closing2");
        s.put(&path2, TEXT, b"").expect(201);
        let r = s.req("POST", &path2, &[("Content-Type", TEXT), ("Stream-Closed", "true")], b"last").expect(204);
        assert_eq!(r.h("stream-closed"), "true");
        assert_eq!(r.next_offset(), offset(4));
        s.post(&path2, TEXT, b"x").expect(409);
        assert_eq!(s.get(&path2).expect(200).body, b"last");

        // Created closed.
        let path3 = format!("{p}closing3");
        let r = s.req("PUT", &path3, &[("Content-Type", TEXT), ("Stream-Closed", "true")], b"").expect(201);
        assert_eq!(r.h("stream-closed"), "true");
        s.post(&path3, TEXT, b"x").expect(409);

        // Stream-Closed must be true or false.
        let path4 = format!("{p}closing4");
        s.put(&path4, TEXT, b"").expect(201);
        s.req("POST", &path4, &[("Stream-Closed", "yes")], b"").expect(400);
        assert!(!s.head(&path4).expect(200).has("stream-closed"));
    });
}

#[test]
fn stream_seq_must_increase() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}seq");
        s.put(&path, TEXT, b"").expect(201);
        let post = |seq: &str, body: &[u8]| s.req("POST", &path, &[("Content-Type", TEXT), ("Stream-Seq", seq)], body);
        post("0002", b"a").expect(204);
        post("0001", b"b").expect(409);
        post("0002", b"c").expect(409);
        post("0003", b"d").expect(204);
        // Unsequenced appends are still accepted.
        s.post(&path, TEXT, b"e").expect(204);
        post("0003", b"f").expect(409);
        assert_eq!(s.get(&path).expect(200).body, b"ade");
    });
}

#[test]
fn idempotent_producer_statuses() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}producer");
        s.put(&path, TEXT, b"").expect(201);
        let send = |id: &str, epoch: &str, seq: &str, body: &[u8]| {
            s.req(
                "POST",
                &path,
                &[("Content-Type", TEXT), ("Producer-Id", id), ("Producer-Epoch", epoch), ("Producer-Seq", seq)],
                body,
            )
        };
        let r = send("w1", "0", "0", b"a").expect(200);
        assert_eq!(r.h("producer-epoch"), "0");
        assert_eq!(r.h("producer-seq"), "0");
        assert_eq!(r.next_offset(), offset(1));
        // Retry of the same (epoch, seq): deduplicated.
        let r = send("w1", "0", "0", b"a").expect(204);
        assert_eq!(r.next_offset(), offset(1));
        send("w1", "0", "1", b"b").expect(200);
        // Gap.
        let r = send("w1", "0", "3", b"x").expect(409);
        assert_eq!(r.h("producer-expected-seq"), "2");
        assert_eq!(r.h("producer-received-seq"), "3");
        // A new epoch starts at 0; then the old epoch is fenced.
        send("w1", "1", "0", b"c").expect(200);
        let r = send("w1", "0", "2", b"x").expect(403);
        assert_eq!(r.h("producer-epoch"), "1");
        // A new epoch not starting at 0.
        send("w1", "2", "5", b"x").expect(400);
        // A fresh producer must start at seq 0.
        let r = send("w2", "0", "1", b"x").expect(409);
        assert_eq!(r.h("producer-expected-seq"), "0");
        send("w2", "0", "0", b"d").expect(200);
        // Malformed or partial producer headers.
        send("w1", "abc", "1", b"x").expect(400);
        send("w1", "1", "-1", b"x").expect(400);
        send("w1", "1", "9007199254740992", b"x").expect(400);
        send("", "1", "1", b"x").expect(400);
        s.req("POST", &path, &[("Content-Type", TEXT), ("Producer-Id", "w1")], b"x").expect(400);
        s.req("POST", &path, &[("Content-Type", TEXT), ("Producer-Epoch", "1"), ("Producer-Seq", "1")], b"x")
            .expect(400);
        // Only accepted, non-duplicate appends are in the stream.
        let r = s.get(&path).expect(200);
        assert_eq!(r.body, b"abcd");
        assert_eq!(r.next_offset(), offset(4));
    });
}

/// The messages of a JSON stream's offset read: a JSON array on the base
/// surface, the canonical NDJSON records on the bucketed one.
#[track_caller]
fn json_messages(r: &common::Resp, base: bool) -> Vec<serde_json::Value> {
    if base {
        assert_eq!(r.h("content-type"), JSON);
        let serde_json::Value::Array(items) = r.json() else { panic!("not an array: {}", r.text()) };
        items
    } else {
        assert_eq!(r.h("content-type"), "application/x-ndjson");
        let text = r.text();
        assert!(text.is_empty() || text.ends_with('\n'), "whole records end in a newline: {text:?}");
        text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}"))).collect()
    }
}

#[test]
fn json_mode_flattens_and_reads_back_arrays() {
    use serde_json::json;
    on_both_surfaces(|s, p| {
        let base = p.starts_with("/v1/");
        let path = format!("{p}json");
        s.put(&path, JSON, b"").expect(201);
        // An empty JSON stream reads back as [] (base) or nothing (bucketed).
        let r = s.get(&format!("{path}?offset=-1")).expect(200);
        assert_eq!(json_messages(&r, base), Vec::<serde_json::Value>::new());
        assert_eq!(r.body, if base { &b"[]"[..] } else { b"" });

        let r = s.post(&path, JSON, br#"[1, {"a": [2, 3]}]"#).expect(204);
        assert_eq!(r.h("stream-record-start"), "0");
        assert_eq!(r.h("stream-record-next"), "2");
        let boundary = r.next_offset();
        // Offsets count the canonical NDJSON bytes: "1\n" + "{"a":[2,3]}\n".
        assert_eq!(boundary, offset(2 + 12));
        s.post(&path, JSON, br#" "x y" "#).expect(204);
        s.post(&path, "application/json; charset=utf-8", br#"[[4, 5]]"#).expect(204);

        let all = vec![json!(1), json!({"a": [2, 3]}), json!("x y"), json!([4, 5])];
        let r = s.get(&format!("{path}?offset=-1")).expect(200);
        assert_eq!(json_messages(&r, base), all);
        assert_eq!(r.next_offset(), offset(2 + 12 + 6 + 6));
        // From a message boundary: only later messages.
        let r = s.get(&format!("{path}?offset={boundary}")).expect(200);
        assert_eq!(json_messages(&r, base), all[2..]);
        // Inside a message: refused on the base surface; on the bucketed one
        // offsets are byte positions of the NDJSON, so the read starts there.
        let r = s.get(&format!("{path}?offset={}", offset(3)));
        if base {
            r.expect(400);
        } else {
            assert_eq!(r.expect(200).text(), "\"a\":[2,3]}\n\"x y\"\n[4,5]\n");
        }

        // Refusals write nothing.
        s.post(&path, JSON, b"[]").expect(400);
        s.post(&path, JSON, b"{bad").expect(400);
        s.post(&path, JSON, b"[1,]").expect(400);
        s.post(&path, JSON, b"\xff").expect(400);
        s.post(&path, TEXT, b"1").expect(409);
        let r = s.get(&format!("{path}?offset=-1")).expect(200);
        assert_eq!(json_messages(&r, base), all);

        // Initial body on create is flattened too; invalid JSON is refused.
        let init = format!("{p}json-init");
        s.put(&init, JSON, br#"[{"k":1},{"k":2}]"#).expect(201);
        let r = s.get(&init).expect(200);
        assert_eq!(json_messages(&r, base), [json!({"k": 1}), json!({"k": 2})]);
        s.put(&format!("{p}json-bad"), JSON, b"{nope").expect(400);
        s.get(&format!("{p}json-bad")).expect(404);
    });
}

#[test]
fn json_max_bytes_reads_whole_messages_on_the_base_surface_and_bytes_on_the_bucketed_one() {
    on_both_surfaces(|s, p| {
        let base = p.starts_with("/v1/");
        let path = format!("{p}json-cut");
        s.put(&path, JSON, br#"[{"id":0},{"id":1},{"id":2}]"#).expect(201);
        let r = s.get(&format!("{path}?offset=-1&max_bytes=12")).expect(200);
        if base {
            // At least one whole message, never a partial one.
            assert_eq!(r.json(), serde_json::json!([{"id": 0}]));
            assert_eq!(r.next_offset(), offset(9));
        } else {
            // The base protocol's partial-byte read: it may end inside a record,
            // and the next read continues from exactly there.
            assert_eq!(r.text(), "{\"id\":0}\n{\"i");
            assert_eq!(r.next_offset(), offset(12));
            let rest = s.get(&format!("{path}?offset={}", offset(12))).expect(200);
            assert_eq!(rest.text(), "d\":1}\n{\"id\":2}\n");
            assert_eq!(rest.next_offset(), offset(27));
        }
    });
}

#[test]
fn ttl_and_expires_at_are_validated() {
    on_both_surfaces(|s, p| {
        let put = |name: &str, headers: &[(&str, &str)]| {
            let mut h = vec![("Content-Type", TEXT)];
            h.extend_from_slice(headers);
            s.req("PUT", &format!("{p}{name}"), &h, b"")
        };
        for bad in ["abc", "-1", "01", "1.5", "+5", ""] {
            let r = put("ttl-bad", &[("Stream-TTL", bad)]);
            assert_eq!(r.status, 400, "Stream-TTL {bad:?}: {}", r.text());
        }
        for bad in ["tomorrow", "2099-01-01", "2099-13-01T00:00:00Z", "2099-01-01T00:00:00"] {
            let r = put("exp-bad", &[("Stream-Expires-At", bad)]);
            assert_eq!(r.status, 400, "Stream-Expires-At {bad:?}: {}", r.text());
        }
        put("both", &[("Stream-TTL", "60"), ("Stream-Expires-At", "2099-01-01T00:00:00Z")]).expect(400);
        // None of the refused creates made a stream.
        for name in ["ttl-bad", "exp-bad", "both"] {
            s.head(&format!("{p}{name}")).expect(404);
        }
        put("ttl-ok", &[("Stream-TTL", "0")]).expect(201);
        put("ttl-ok2", &[("Stream-TTL", "86400")]).expect(201);
        put("ttl-ok2", &[("Stream-TTL", "86400")]).expect(200);
        put("ttl-ok2", &[("Stream-TTL", "86401")]).expect(409);
        put("exp-ok", &[("Stream-Expires-At", "2099-01-01T00:00:00+02:00")]).expect(201);
    });
}

#[test]
fn stream_ttl_expires_an_idle_stream() {
    let s = Server::start();
    s.req("PUT", "/v1/stream/short", &[("Content-Type", TEXT), ("Stream-TTL", "1")], b"x").expect(201);
    s.req("PUT", "/v1/stream/long", &[("Content-Type", TEXT), ("Stream-TTL", "60")], b"y").expect(201);
    assert_eq!(s.get("/v1/stream/short").expect(200).body, b"x");
    std::thread::sleep(Duration::from_millis(1300));
    s.get("/v1/stream/short").expect(404);
    s.head("/v1/stream/short").expect(404);
    s.post("/v1/stream/short", TEXT, b"z").expect(404);
    assert_eq!(s.get("/v1/stream/long").expect(200).body, b"y");
    // The name is free again.
    s.put("/v1/stream/short", TEXT, b"").expect(201);
}

#[test]
fn long_poll_times_out_with_204() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}lp-timeout");
        let tail = s.put(&path, TEXT, b"abc").expect(201).next_offset();
        let started = Instant::now();
        let r = s.get(&format!("{path}?offset={tail}&live=long-poll")).expect(204);
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(900) && waited < Duration::from_secs(5),
            "waited {waited:?} with --long-poll-timeout 1s"
        );
        assert_eq!(r.h("stream-up-to-date"), "true");
        assert!(!r.h("stream-cursor").is_empty());
        assert_eq!(r.next_offset(), tail);
        assert!(!r.has("stream-closed"));
    });
}

/// Long-poll waits in these tests are 5 s, so answering "at once" (well
/// under 2.5 s) cannot be confused with answering at the timeout.
const LONG_WAIT: &[&str] = &["--long-poll-timeout", "5s"];
const AT_ONCE: Duration = Duration::from_millis(2500);

#[test]
fn long_poll_answers_at_once_with_data_or_when_closed() {
    on_both_surfaces_with(LONG_WAIT, |s, p| {
        let path = format!("{p}lp-now");
        let tail = s.put(&path, TEXT, b"abc").expect(201).next_offset();
        // With data already past the offset it answers at once.
        let started = Instant::now();
        let r = s.get(&format!("{path}?offset=-1&live=long-poll")).expect(200);
        assert!(started.elapsed() < AT_ONCE);
        assert_eq!(r.body, b"abc");
        assert!(r.has("stream-cursor"));

        // At the tail of a closed stream it answers at once, closed.
        s.req("POST", &path, &[("Stream-Closed", "true")], b"").expect(204);
        let started = Instant::now();
        let r = s.get(&format!("{path}?offset={tail}&live=long-poll")).expect(204);
        assert!(started.elapsed() < AT_ONCE);
        assert_eq!(r.h("stream-closed"), "true");
        assert_eq!(r.h("stream-up-to-date"), "true");
    });
}

#[test]
fn long_poll_is_woken_by_an_append_on_another_connection() {
    on_both_surfaces_with(LONG_WAIT, |s, p| {
        let path = format!("{p}lp-wake");
        let tail = s.put(&path, OCTET, b"before").expect(201).next_offset();
        let mut waiter = s.connect();
        waiter.send(&common::build("GET", &format!("{path}?offset={tail}&live=long-poll"), &[], b"")).unwrap();
        // Let the reader park before the append arrives.
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        let appended = s.post(&path, OCTET, b"\x00new\xff").expect(204);
        let r = waiter.read_response(false).expect(200);
        assert!(started.elapsed() < AT_ONCE, "the parked reader was not woken by the append");
        assert_eq!(r.body, b"\x00new\xff");
        assert_eq!(r.next_offset(), appended.next_offset());
        assert!(r.has("stream-cursor"));
        assert_eq!(r.h("stream-up-to-date"), "true");
        // The connection is still usable afterwards.
        let r = waiter.request("GET", &format!("{path}?offset=-1"), &[], b"");
        assert_eq!(r.expect(200).body, b"before\x00new\xff");
    });
}

#[test]
fn sse_sends_data_then_control_and_follows_the_tail() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}sse");
        s.put(&path, TEXT, b"hello\nworld").expect(201);
        let mut c = s.connect();
        c.send(&common::build("GET", &format!("{path}?offset=-1&live=sse"), &[], b"")).unwrap();
        let head = c.read_until(b"\r\n\r\n").unwrap();
        let head = String::from_utf8(head).unwrap().to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(head.contains("content-type: text/event-stream"), "{head}");
        assert!(head.contains("stream-data-content-type: text/plain"), "{head}");

        let raw = c.read_until(b"event: control\n").unwrap();
        let rest = c.read_until(b"\n\n").unwrap();
        let mut all = raw.clone();
        all.extend_from_slice(&rest);
        let events = sse_events(&all);
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0].0, "data");
        assert_eq!(events[0].1, "hello\nworld");
        assert_eq!(events[1].0, "control");
        let ctl: serde_json::Value = serde_json::from_str(&events[1].1).unwrap();
        assert_eq!(ctl["streamNextOffset"], offset(11));
        assert_eq!(ctl["upToDate"], true);
        assert!(ctl["streamCursor"].is_string(), "{ctl}");

        // Live tail: an append shows up as only the new data.
        s.post(&path, TEXT, b"more").expect(204);
        let mut raw = c.read_until(b"event: control\n").unwrap();
        raw.extend_from_slice(&c.read_until(b"\n\n").unwrap());
        let events = sse_events(&raw);
        assert_eq!(events[0], ("data".to_string(), "more".to_string()));
        let ctl: serde_json::Value = serde_json::from_str(&events[1].1).unwrap();
        assert_eq!(ctl["streamNextOffset"], offset(15));

        // Closing the stream ends the event stream with a closed control event.
        s.req("POST", &path, &[("Stream-Closed", "true")], b"").expect(204);
        let rest = c.read_to_eof().unwrap();
        let events = sse_events(&rest);
        let (name, data) = events.last().expect("a final event");
        assert_eq!(name, "control");
        let ctl: serde_json::Value = serde_json::from_str(data).unwrap();
        assert_eq!(ctl["streamClosed"], true);
        assert_eq!(ctl["streamNextOffset"], offset(15));
    });
}

#[test]
fn sse_on_a_binary_stream_is_base64() {
    use base64::Engine;
    let s = Server::start();
    let bytes = all_bytes();
    s.put("/v1/stream/sse-bin", OCTET, &bytes).expect(201);
    s.req("POST", "/v1/stream/sse-bin", &[("Stream-Closed", "true")], b"").expect(204);
    let mut c = s.connect();
    c.send(&common::build("GET", "/v1/stream/sse-bin?offset=-1&live=sse", &[], b"")).unwrap();
    let raw = c.read_to_eof().unwrap();
    let split = common::find(&raw, b"\r\n\r\n").expect("a response head") + 4;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    assert!(head.contains("stream-sse-data-encoding: base64"), "{head}");
    let events = sse_events(&raw[split..]);
    assert_eq!(events[0].0, "data");
    let decoded = base64::engine::general_purpose::STANDARD.decode(events[0].1.replace('\n', "")).expect("base64 data");
    assert_eq!(decoded, bytes);
    let ctl: serde_json::Value = serde_json::from_str(&events[1].1).unwrap();
    assert_eq!(ctl["streamClosed"], true);
    assert_eq!(ctl["streamNextOffset"], offset(256));
}

#[test]
fn etag_and_if_none_match() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}etag");
        s.put(&path, TEXT, b"abc").expect(201);
        let url = format!("{path}?offset=-1");
        let r = s.get(&url).expect(200);
        let etag = r.h("etag").to_string();
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
        let r = s.req("GET", &url, &[("If-None-Match", &etag)], b"").expect(304);
        assert_eq!(r.h("etag"), etag);
        assert!(r.body.is_empty());
        // A different tag gets the full response.
        s.req("GET", &url, &[("If-None-Match", "\"nope\"")], b"").expect(200);
        // New data changes the tag.
        s.post(&path, TEXT, b"d").expect(204);
        let r = s.req("GET", &url, &[("If-None-Match", &etag)], b"").expect(200);
        assert_eq!(r.body, b"abcd");
        assert_ne!(r.h("etag"), etag);
    });
}

#[test]
fn options_preflight_and_cors_headers() {
    on_both_surfaces(|s, p| {
        let path = format!("{p}cors");
        let r = s
            .req("OPTIONS", &path, &[("Origin", "http://example.com"), ("Access-Control-Request-Method", "POST")], b"")
            .expect(204);
        let allow = r.h("access-control-allow-headers").to_ascii_lowercase();
        for h in ["content-type", "producer-id", "stream-seq", "if-none-match"] {
            assert!(allow.contains(h), "{h} not in {allow}");
        }
        let methods = r.h("access-control-allow-methods");
        assert!(methods.contains("POST") && methods.contains("DELETE"), "{methods}");
        assert_eq!(r.h("access-control-allow-origin"), "*");
        // Ordinary responses carry CORS headers too.
        let r = s.put(&path, TEXT, b"").expect(201);
        assert_eq!(r.h("access-control-allow-origin"), "*");
        assert!(r.h("access-control-expose-headers").contains("stream-next-offset"));
    });
}

/// Headers a browser may read without being listed in
/// `access-control-expose-headers` (CORS-safelisted), or that describe the
/// HTTP exchange itself.
const NOT_EXPOSED: [&str; 9] = [
    "content-type",
    "content-length",
    "cache-control",
    "connection",
    "date",
    "x-content-type-options",
    "cross-origin-resource-policy",
    "access-control-allow-origin",
    "access-control-expose-headers",
];

#[test]
fn every_response_header_is_exposed_to_browsers_and_every_response_has_a_date() {
    let s = Server::start();
    s.req("PUT", "/corsb", &[], b"").expect(201);
    let p = "/corsb/s";
    let mut seen = Vec::new();
    seen.push(s.put(p, TEXT, b"abc").expect(201));
    seen.push(
        s.req(
            "POST",
            p,
            &[("Content-Type", TEXT), ("Producer-Id", "w"), ("Producer-Epoch", "0"), ("Producer-Seq", "0")],
            b"d",
        )
        .expect(200),
    );
    let snap = format!("{p}/snapshot/{}", offset(3));
    seen.push(s.req("PUT", &snap, &[("Content-Type", TEXT)], b"S").expect(204));
    seen.push(s.req("PUT", &format!("{p}/retention/{}", offset(3)), &[], b"").expect(204));
    seen.push(s.head(p).expect(200));
    seen.push(s.get(&snap).expect(200));
    seen.push(s.get(&format!("{p}/snapshot")).expect(307));
    seen.push(s.get(&format!("{p}?offset=-1")).expect(200));
    seen.push(s.get(&format!("{p}?offset=now&live=long-poll")).expect(204));
    seen.push(s.get(&format!("{p}?offset={}", offset(0))).expect(410));
    seen.push(
        s.req(
            "POST",
            p,
            &[("Content-Type", TEXT), ("Producer-Id", "w"), ("Producer-Epoch", "0"), ("Producer-Seq", "5")],
            b"x",
        )
        .expect(409),
    );
    seen.push(s.put("/corsb/j", "application/json", b"[1]").expect(201));
    seen.push(s.get("/corsb/nope").expect(404));
    seen.push(s.get("/").expect(404));
    seen.push(s.req("PATCH", p, &[], b"").expect(405));
    let mut c = s.connect();
    c.send(b"GARBAGE\r\n\r\n").unwrap();
    seen.push(c.read_response(false).expect(400));
    // An SSE response head.
    let mut c = s.connect();
    c.send(&common::build("GET", "/corsb/j?offset=-1&live=sse", &[], b"")).unwrap();
    let head = String::from_utf8(c.read_until(b"\r\n\r\n").unwrap()).unwrap();
    let sse_headers: Vec<(String, String)> = head
        .lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    seen.push(common::Resp { status: 200, reason: String::new(), headers: sse_headers, body: Vec::new() });

    for r in &seen {
        let date = r.h("date");
        assert!(date.ends_with(" GMT") && date.len() == 29 && date.as_bytes()[3] == b',', "IMF-fixdate: {date:?}");
        let exposed: Vec<&str> = r.h("access-control-expose-headers").split(", ").collect();
        for (name, _) in &r.headers {
            assert!(
                NOT_EXPOSED.contains(&name.as_str()) || exposed.contains(&name.as_str()),
                "{name} is sent but hidden from browsers (status {})",
                r.status
            );
        }
    }
    let names: Vec<&str> = seen.iter().flat_map(|r| r.headers.iter().map(|(n, _)| n.as_str())).collect();
    for h in ["stream-snapshot-offset", "stream-snapshot-digest", "stream-retained-offset", "stream-data-content-type"]
    {
        assert!(names.contains(&h), "the test should have seen {h}");
    }
}

#[test]
fn long_poll_from_now_and_woken_by_delete() {
    let s = Server::start_with(LONG_WAIT);
    s.put("/v1/stream/lp-now", TEXT, b"old").expect(201);
    let mut waiter = s.connect();
    waiter.send(&common::build("GET", "/v1/stream/lp-now?offset=now&live=long-poll", &[], b"")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    s.post("/v1/stream/lp-now", TEXT, b"fresh").expect(204);
    let r = waiter.read_response(false).expect(200);
    assert_eq!(r.body, b"fresh");
    assert_eq!(r.next_offset(), offset(8));

    // A parked reader of a stream that is deleted is released at once.
    let mut waiter = s.connect();
    waiter
        .send(&common::build("GET", &format!("/v1/stream/lp-now?offset={}&live=long-poll", offset(8)), &[], b""))
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    s.delete("/v1/stream/lp-now").expect(204);
    let r = waiter.read_response(false);
    assert!(started.elapsed() < AT_ONCE, "the parked reader was not released by the delete");
    assert_eq!(r.status, 404, "{r:?}");
}

#[test]
fn parked_readers_are_limited_by_max_waiters() {
    let s = Server::start_with(&["--max-waiters", "1", "--long-poll-timeout", "5s"]);
    let tail = s.put("/v1/stream/crowded", TEXT, b"x").expect(201).next_offset();
    let url = format!("/v1/stream/crowded?offset={tail}&live=long-poll");
    let mut first = s.connect();
    first.send(&common::build("GET", &url, &[], b"")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // Same stream, so same owner shard: over the limit.
    let started = Instant::now();
    let r = s.get(&url).expect(503);
    assert!(started.elapsed() < AT_ONCE);
    assert!(r.has("retry-after"), "{r:?}");
    // Non-parking reads are unaffected.
    assert_eq!(s.get("/v1/stream/crowded").expect(200).body, b"x");
    // The first reader still gets its data.
    s.post("/v1/stream/crowded", TEXT, b"y").expect(204);
    assert_eq!(first.read_response(false).expect(200).body, b"y");
}

#[test]
fn large_reads_come_in_resumable_chunks() {
    let s = Server::start_with(&["--max-response-bytes", "8MiB"]);
    let path = "/v1/stream/big";
    s.put(path, OCTET, b"").expect(201);
    // Two 5 MiB appends: one catch-up response carries at most 8 MiB but
    // always whole appends, so the first read stops after the first one.
    let a: Vec<u8> = (0..5u32 << 20).map(|i| (i % 253) as u8).collect();
    let b: Vec<u8> = (0..5u32 << 20).map(|i| (i % 239) as u8).collect();
    s.post(path, OCTET, &a).expect(204);
    s.post(path, OCTET, &b).expect(204);
    let r = s.get(&format!("{path}?offset=-1")).expect(200);
    assert!(r.body == a, "first chunk is the first append");
    assert_eq!(r.next_offset(), offset(a.len() as u64));
    assert!(!r.has("stream-up-to-date"), "{:?}", r.headers);
    assert!(r.h("cache-control").contains("max-age"));
    let r = s.get(&format!("{path}?offset={}", r.next_offset())).expect(200);
    assert!(r.body == b, "second chunk is the second append");
    assert_eq!(r.h("stream-up-to-date"), "true");
    assert_eq!(r.next_offset(), offset((a.len() + b.len()) as u64));
}

#[test]
fn concurrent_appends_are_all_kept_exactly_once() {
    let s = Server::start();
    s.put("/v1/stream/busy", OCTET, b"").expect(201);
    let addr = s.addr;
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = common::Conn::open(addr);
                let mut ends = Vec::new();
                for i in 0..40u8 {
                    let rec = [b'<', t, i, b'>'];
                    let r = c.request("POST", "/v1/stream/busy", &[("Content-Type", OCTET)], &rec).expect(204);
                    ends.push((offset_pos(&r.next_offset()), rec));
                }
                ends
            })
        })
        .collect();
    let mut ends: Vec<(u64, [u8; 4])> = threads.into_iter().flat_map(|t| t.join().expect("writer thread")).collect();
    ends.sort();
    let body = s.get("/v1/stream/busy").expect(200).body;
    assert_eq!(body.len(), 4 * 40 * 4);
    // Every acknowledged record sits right before the offset it was given.
    for (k, (end, rec)) in ends.iter().enumerate() {
        assert_eq!(*end, (k as u64 + 1) * 4, "offsets are distinct and dense");
        assert_eq!(&body[*end as usize - 4..*end as usize], rec);
    }
}

// Racing PUTs of one stream with an initial body: the losers answer 200
// after the winner's log write is durable but can read the stream's
// *published* tail before the winner publishes it, so they report
// Stream-Next-Offset 0 (and would omit Stream-Closed for a stream created
// closed) although the stream already holds the body.
#[test]
fn concurrent_creates_agree_on_the_stream() {
    let s = Server::start();
    let addr = s.addr;
    let mut wrong = Vec::new();
    for round in 0..10 {
        let path = format!("/v1/stream/contended-{round}");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    common::Conn::open(addr).request("PUT", &path, &[("Content-Type", TEXT)], b"hello")
                })
            })
            .collect();
        let resps: Vec<common::Resp> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let created = resps.iter().filter(|r| r.status == 201).count();
        assert_eq!(created, 1, "{path}: {resps:?}");
        for r in &resps {
            assert!(r.status == 201 || r.status == 200, "{r:?}");
            if r.next_offset() != offset(5) {
                wrong.push(format!("{path}: {} with {}", r.status, r.next_offset()));
            }
        }
        assert_eq!(s.get(&path).expect(200).body, b"hello");
    }
    assert!(wrong.is_empty(), "wrong Stream-Next-Offset (want {}): {wrong:#?}", offset(5));
}
