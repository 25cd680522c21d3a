//! Time- and connection-dependent behaviour: TTL renewal, long-poll cursors
//! and closed streams, SSE framing and its end, and idempotent producers
//! closing a stream.

mod common;

use common::{offset, Conn, Resp, Server};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const TEXT: &str = "text/plain";
const JSON: &str = "application/json";

fn path(name: &str) -> String {
    format!("/v1/stream/{name}")
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

/// Polls HEAD until it answers `want`; returns false if `deadline` passes first.
fn head_becomes(s: &Server, p: &str, want: u16, deadline: Instant) -> bool {
    loop {
        if s.head(p).status == want {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_millis() as u64
}

#[track_caller]
fn cursor(r: &Resp) -> u64 {
    let c = r.h("stream-cursor");
    assert!(!c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()), "Stream-Cursor {c:?} is not digits");
    c.parse().expect("cursor fits u64")
}

// ---------------------------------------------------------------------------
// TTL

#[test]
fn ttl_is_renewed_by_reads_but_not_by_head() {
    let s = Server::start();
    let (read, headed) = (path("renewed"), path("headed"));
    s.req("PUT", &read, &[("Content-Type", TEXT), ("Stream-TTL", "2")], b"x").expect(201);
    s.req("PUT", &headed, &[("Content-Type", TEXT), ("Stream-TTL", "2")], b"y").expect(201);
    // Both were created (and last touched) no later than this.
    let created = Instant::now();

    sleep_until(created + Duration::from_millis(1000));
    s.head(&headed).expect(200);
    sleep_until(created + Duration::from_millis(1200));
    assert_eq!(s.get(&read).expect(200).body, b"x");

    // Past the unrenewed expiry (created + 2 s), well before the renewed one
    // (at least created + 3.2 s).
    sleep_until(created + Duration::from_millis(2100));
    s.head(&read).expect(200);

    // The stream only HEADed expired on time. Were HEAD renewing, the polls
    // themselves would keep it alive past the deadline.
    assert!(
        head_becomes(&s, &headed, 404, created + Duration::from_millis(4000)),
        "HEAD renewed the TTL: the stream outlived its 2 s window"
    );
    s.get(&headed).expect(404);
}

#[test]
fn expires_at_is_not_renewed_by_reads() {
    let s = Server::start();
    let p = path("absolute");
    let expires_ms = unix_ms() + 2500;
    let at = sluice_shards::core::ttl::format_rfc3339(expires_ms);
    s.req("PUT", &p, &[("Content-Type", TEXT), ("Stream-Expires-At", &at)], b"data").expect(201);
    let r = s.head(&p).expect(200);
    let shown = r.h("stream-expires-at").to_string();
    assert!(!r.has("stream-ttl"), "{r:?}");

    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(s.get(&p).expect(200).body, b"data");
    s.get(&format!("{p}?offset=now")).expect(200);
    s.post(&p, TEXT, b"!").expect(204);
    assert_eq!(s.head(&p).expect(200).h("stream-expires-at"), shown, "reads or writes moved Stream-Expires-At");

    // Gone at the absolute time (give it 1.5 s of slack), not a window after the reads.
    let deadline = Instant::now() + Duration::from_millis(expires_ms.saturating_sub(unix_ms()) + 1500);
    assert!(head_becomes(&s, &p, 404, deadline), "the stream outlived its Stream-Expires-At");
    assert!(unix_ms() + 5 >= expires_ms, "the stream expired before its Stream-Expires-At");
    s.get(&p).expect(404);
}

// ---------------------------------------------------------------------------
// Long-poll

#[test]
fn long_poll_cursor_is_digits_and_moves_forward() {
    let s = Server::start();
    let p = path("cursor");
    let tail = s.put(&p, TEXT, b"existing data").expect(201).next_offset();

    let r = s.get(&format!("{p}?offset=-1&live=long-poll")).expect(200);
    assert_eq!(r.body, b"existing data");
    assert_eq!(r.h("stream-up-to-date"), "true");
    let c1 = cursor(&r);

    let r = s.get(&format!("{p}?offset=-1&live=long-poll&cursor={c1}")).expect(200);
    let c2 = cursor(&r);
    assert!(c2 > c1, "cursor did not move forward: {c1} then {c2}");

    // Also on a timed-out poll (204).
    let r = s.get(&format!("{p}?offset={tail}&live=long-poll&cursor={c2}")).expect(204);
    assert_eq!(r.next_offset(), tail);
    assert_eq!(r.h("stream-up-to-date"), "true");
    let c3 = cursor(&r);
    assert!(c3 > c2, "cursor did not move forward: {c2} then {c3}");

    // A stale or junk cursor gets the current interval, still digits.
    let r = s.get(&format!("{p}?offset=-1&live=long-poll&cursor=1")).expect(200);
    assert!(cursor(&r) <= c1 + 1, "{r:?}");
    let r = s.get(&format!("{p}?offset=-1&live=long-poll&cursor=junk")).expect(200);
    cursor(&r);
}

/// Long-polls wait 10 s here, so "at once" (under 3 s) is unambiguous.
const LONG_WAIT: &[&str] = &["--long-poll-timeout", "10s"];
const AT_ONCE: Duration = Duration::from_secs(3);

#[test]
fn long_poll_on_a_closed_stream_at_its_tail_answers_at_once() {
    let s = Server::start_with(LONG_WAIT);
    // Closed at creation, empty.
    let empty = path("closed-empty");
    let t0 = s.req("PUT", &empty, &[("Content-Type", TEXT), ("Stream-Closed", "true")], b"").expect(201).next_offset();
    // Closed later, with data.
    let full = path("closed-full");
    s.put(&full, TEXT, b"data").expect(201);
    let t1 = s.req("POST", &full, &[("Stream-Closed", "true")], b"").expect(204).next_offset();
    assert_eq!(t1, offset(4));

    for (p, tail) in [(&empty, &t0), (&full, &t1)] {
        for q in [format!("offset={tail}"), "offset=now".to_string()] {
            let started = Instant::now();
            let r = s.get(&format!("{p}?{q}&live=long-poll")).expect(204);
            assert!(started.elapsed() < AT_ONCE, "{p}?{q}: waited {:?}", started.elapsed());
            assert_eq!(r.h("stream-closed"), "true");
            assert_eq!(r.h("stream-up-to-date"), "true");
            assert_eq!(&r.next_offset(), tail);
            cursor(&r);
        }
    }
    // From before the tail: the data, marked closed since it reaches the end.
    let r = s.get(&format!("{full}?offset=-1&live=long-poll")).expect(200);
    assert_eq!(r.body, b"data");
    assert_eq!(r.h("stream-closed"), "true");
}

#[test]
fn a_parked_long_poll_is_answered_by_a_close() {
    let s = Server::start_with(LONG_WAIT);
    for (name, body, status) in [("close-only", &b""[..], 204), ("close-with-data", &b"last"[..], 200)] {
        let p = path(name);
        let tail = s.put(&p, TEXT, b"first").expect(201).next_offset();
        let mut waiter = s.connect();
        waiter.send(&common::build("GET", &format!("{p}?offset={tail}&live=long-poll"), &[], b"")).unwrap();
        // Let the reader park first.
        std::thread::sleep(Duration::from_millis(200));
        let started = Instant::now();
        let closed = s.req("POST", &p, &[("Content-Type", TEXT), ("Stream-Closed", "true")], body).expect(204);
        let r = waiter.read_response(false).expect(status);
        assert!(started.elapsed() < AT_ONCE, "{name}: the close did not wake the reader");
        assert_eq!(r.body, body);
        assert_eq!(r.h("stream-closed"), "true");
        assert_eq!(r.h("stream-up-to-date"), "true");
        assert_eq!(r.next_offset(), closed.next_offset());
    }
}

// ---------------------------------------------------------------------------
// SSE

/// Opens an SSE request; returns the connection and the lower-cased head.
fn sse_open(s: &Server, target: &str) -> (Conn, String) {
    let mut c = s.connect();
    c.send(&common::build("GET", target, &[], b"")).expect("send SSE request");
    let head = c.read_until(b"\r\n\r\n").expect("SSE response head");
    let head = String::from_utf8(head).expect("head is UTF-8").to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert_eq!(head_value(&head, "content-type"), Some("text/event-stream"), "{head}");
    assert_eq!(head_value(&head, "content-length"), None, "{head}");
    (c, head)
}

/// A header's value in a lower-cased response head.
fn head_value<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.split("\r\n").skip(1).find_map(|l| l.split_once(':').filter(|(n, _)| *n == name).map(|(_, v)| v.trim()))
}

/// One SSE event block: (event name, raw `data:` line contents).
#[derive(Debug, Clone, PartialEq)]
struct Event {
    name: String,
    lines: Vec<String>,
}

impl Event {
    /// The data as an SSE parser delivers it: lines joined with '\n', one
    /// leading space stripped from each.
    fn data(&self) -> String {
        self.lines.iter().map(|l| l.strip_prefix(' ').unwrap_or(l)).collect::<Vec<_>>().join("\n")
    }

    fn control(&self) -> serde_json::Value {
        assert_eq!(self.name, "control", "{self:?}");
        assert_eq!(self.lines.len(), 1, "a control event is one data line: {self:?}");
        serde_json::from_str(&self.lines[0]).unwrap_or_else(|e| panic!("control is not JSON ({e}): {self:?}"))
    }
}

/// Parses a run of complete event blocks. Every line must be `event:` or `data:`.
fn parse_events(raw: &[u8]) -> Vec<Event> {
    let text = std::str::from_utf8(raw).expect("SSE body is UTF-8");
    assert!(!text.contains('\r'), "a raw CR in the event stream: {text:?}");
    let mut out = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.is_empty()) {
        let mut name = None;
        let mut lines = Vec::new();
        for line in block.split('\n') {
            if let Some(e) = line.strip_prefix("event: ") {
                assert!(name.is_none(), "two event lines in one block: {block:?}");
                name = Some(e.to_string());
            } else if let Some(d) = line.strip_prefix("data:") {
                lines.push(d.to_string());
            } else {
                panic!("unexpected SSE line {line:?} in {text:?}");
            }
        }
        out.push(Event { name: name.unwrap_or_else(|| panic!("no event line in {block:?}")), lines });
    }
    out
}

/// Reads exactly one event.
fn next_event(c: &mut Conn) -> Event {
    let raw = c.read_until(b"\n\n").expect("an SSE event");
    let mut v = parse_events(&raw);
    assert_eq!(v.len(), 1, "{v:?}");
    v.remove(0)
}

#[track_caller]
fn assert_final_control(e: &Event, next: &str) {
    let ctl = e.control();
    assert_eq!(ctl["streamClosed"], true, "{ctl}");
    assert!(ctl.get("streamCursor").is_none(), "the final control carries a cursor: {ctl}");
    assert_eq!(ctl["streamNextOffset"], next, "{ctl}");
}

#[test]
fn sse_on_a_closed_stream_sends_data_then_the_closed_control_then_ends() {
    let s = Server::start();
    let p = path("closed");
    s.put(&p, TEXT, b"hello\nworld").expect(201);
    let tail = s.req("POST", &p, &[("Stream-Closed", "true")], b"").expect(204).next_offset();

    let started = Instant::now();
    let (mut c, head) = sse_open(&s, &format!("{p}?offset=-1&live=sse"));
    assert!(head_value(&head, "cache-control").is_some_and(|v| v.contains("no-cache")), "{head}");
    let raw = c.read_to_eof().expect("the server ends the response");
    assert!(started.elapsed() < Duration::from_secs(4), "closed SSE lingered {:?}", started.elapsed());
    let events = parse_events(&raw);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0].name, "data");
    assert_eq!(events[0].data(), "hello\nworld");
    assert_final_control(&events[1], &tail);
    assert_eq!(events[1].control()["upToDate"], true);

    // At the tail of the closed stream: only the closed control, then the end.
    let (mut c, _) = sse_open(&s, &format!("{p}?offset={tail}&live=sse"));
    let events = parse_events(&c.read_to_eof().unwrap());
    assert_eq!(events.len(), 1, "{events:?}");
    assert_final_control(&events[0], &tail);

    // The same for a JSON stream created closed.
    let j = path("closed-json");
    let jt = s
        .req("PUT", &j, &[("Content-Type", JSON), ("Stream-Closed", "true")], br#"[{"n":1},{"n":2}]"#)
        .expect(201)
        .next_offset();
    let (mut c, head) = sse_open(&s, &format!("{j}?offset=-1&live=sse"));
    assert_eq!(head_value(&head, "stream-sse-data-encoding"), None, "{head}");
    let events = parse_events(&c.read_to_eof().unwrap());
    assert_eq!(events.len(), 2, "{events:?}");
    let data: serde_json::Value = serde_json::from_str(&events[0].data()).unwrap();
    assert_eq!(data, serde_json::json!([{"n": 1}, {"n": 2}]));
    assert_final_control(&events[1], &jt);
}

#[test]
fn sse_offset_now_starts_with_an_up_to_date_control_and_no_data() {
    let s = Server::start();
    for (name, initial) in [("now-full", &b"historical"[..]), ("now-empty", &b""[..])] {
        let p = path(name);
        let tail = s.put(&p, TEXT, initial).expect(201).next_offset();
        let (mut c, _) = sse_open(&s, &format!("{p}?offset=now&live=sse"));
        let first = next_event(&mut c);
        let ctl = first.control();
        assert_eq!(ctl["upToDate"], true, "{ctl}");
        assert_eq!(ctl["streamNextOffset"], tail.as_str(), "{ctl}");
        assert!(ctl["streamCursor"].as_str().is_some_and(|v| v.bytes().all(|b| b.is_ascii_digit())), "{ctl}");
        assert!(ctl.get("streamClosed").is_none(), "{ctl}");
        assert!(c.buffered().is_empty(), "more than one event up front: {:?}", String::from_utf8_lossy(c.buffered()));

        // Only what is appended later arrives.
        let next = s.post(&p, TEXT, b"new data").expect(204).next_offset();
        let data = next_event(&mut c);
        assert_eq!(data.name, "data");
        assert_eq!(data.data(), "new data");
        let ctl = next_event(&mut c).control();
        assert_eq!(ctl["streamNextOffset"], next.as_str());
        assert_eq!(ctl["upToDate"], true);
    }
}

#[test]
fn sse_reader_at_the_tail_gets_the_closing_append_before_the_closed_control() {
    let s = Server::start();
    for i in 0..6 {
        let p = path(&format!("closing-{i}"));
        let tail = s.put(&p, TEXT, b"initial").expect(201).next_offset();
        let (mut c, _) = sse_open(&s, &format!("{p}?offset={tail}&live=sse"));
        let parked = i % 2 == 0;
        if parked {
            // Wait until the reader announced itself up to date (it is live).
            let ctl = next_event(&mut c).control();
            assert_eq!(ctl["upToDate"], true);
            assert!(ctl.get("streamClosed").is_none());
        } else {
            // Race the close against the reader's start.
            std::thread::sleep(Duration::from_millis(10 * i));
        }
        let closed = s.req("POST", &p, &[("Content-Type", TEXT), ("Stream-Closed", "true")], b"sse-data").expect(204);
        assert_eq!(closed.h("stream-closed"), "true");
        let final_offset = closed.next_offset();
        assert_eq!(final_offset, offset(15));

        let started = Instant::now();
        let events = parse_events(&c.read_to_eof().expect("the server ends the response"));
        assert!(started.elapsed() < Duration::from_secs(4));
        let data: String = events.iter().filter(|e| e.name == "data").map(Event::data).collect();
        assert_eq!(data, "sse-data", "iteration {i}: {events:?}");
        let last = events.last().expect("events");
        assert_final_control(last, &final_offset);
        // Nothing claims closure before the data was sent.
        for e in &events[..events.len() - 1] {
            if e.name == "control" {
                assert!(e.control().get("streamClosed").is_none(), "iteration {i}: {events:?}");
            }
        }
        let data_at = events.iter().position(|e| e.name == "data").unwrap();
        assert_eq!(events[data_at + 1].name, "control", "a data event must be followed by its control");
    }
}

#[test]
fn sse_connection_ends_after_the_reconnect_interval() {
    let s = Server::start_with(&["--sse-reconnect", "1s"]);
    let p = path("idle");
    let tail = s.put(&p, TEXT, b"x").expect(201).next_offset();
    let (mut c, _) = sse_open(&s, &format!("{p}?offset=-1&live=sse"));
    let opened = Instant::now();
    assert_eq!(next_event(&mut c).data(), "x");
    let ctl = next_event(&mut c).control();
    assert_eq!(ctl["streamNextOffset"], tail.as_str());
    let rest = c.read_to_eof().expect("the server ends an idle SSE response");
    let lived = opened.elapsed();
    assert!(lived >= Duration::from_millis(800), "ended after {lived:?}, before --sse-reconnect 1s");
    assert!(lived < Duration::from_secs(5), "ended after {lived:?} with --sse-reconnect 1s");
    assert!(parse_events(&rest).iter().all(|e| e.name == "control"), "{:?}", String::from_utf8_lossy(&rest));

    // The stream itself is fine: a reconnect from the last offset goes on.
    s.post(&p, TEXT, b"y").expect(204);
    let (mut c, _) = sse_open(&s, &format!("{p}?offset={tail}&live=sse"));
    assert_eq!(next_event(&mut c).data(), "y");
}

#[test]
fn sse_data_lines_split_on_cr_and_lf_so_payloads_cannot_inject_events() {
    let s = Server::start();
    let cases: &[(&str, &[&str])] = &[
        (
            "safe content\r\n\r\nevent: control\r\ndata: {\"injected\":true}\r\n\r\nmore safe content",
            &["safe content", "", "event: control", "data: {\"injected\":true}", "", "more safe content"],
        ),
        ("a\revent: control\rdata: {\"x\":1}\r\rb", &["a", "event: control", "data: {\"x\":1}", "", "b"]),
        ("line1\nline2\n\nevent: control\ndata: {}", &["line1", "line2", "", "event: control", "data: {}"]),
        ("mixed\r\n\n\r\rend\n", &["mixed", "", "", "", "end", ""]),
        (" leading space", &["  leading space"]),
    ];
    for (i, (payload, lines)) in cases.iter().enumerate() {
        let p = path(&format!("inject-{i}"));
        let tail = s
            .req("PUT", &p, &[("Content-Type", TEXT), ("Stream-Closed", "true")], payload.as_bytes())
            .expect(201)
            .next_offset();
        let (mut c, _) = sse_open(&s, &format!("{p}?offset=-1&live=sse"));
        let events = parse_events(&c.read_to_eof().unwrap());
        assert_eq!(events.len(), 2, "case {i}: exactly one data and one control event: {events:?}");
        assert_eq!(events[0].name, "data");
        assert_eq!(events[0].lines, *lines, "case {i}");
        assert_final_control(&events[1], &tail);
        assert!(events[1].control().get("injected").is_none());
    }

    // JSON whose text spans lines still decodes as one event.
    let j = path("inject-json");
    let body = "{\r\n  \"message\": \"line1\\nline2\",\r\n  \"attack\": \"try\\r\\n\\r\\nevent: control\"\n}";
    s.req("PUT", &j, &[("Content-Type", JSON), ("Stream-Closed", "true")], body.as_bytes()).expect(201);
    let (mut c, _) = sse_open(&s, &format!("{j}?offset=-1&live=sse"));
    let events = parse_events(&c.read_to_eof().unwrap());
    assert_eq!(events.len(), 2, "{events:?}");
    let data: serde_json::Value = serde_json::from_str(&events[0].data()).expect("data is JSON");
    assert_eq!(data, serde_json::json!([{"message": "line1\nline2", "attack": "try\r\n\r\nevent: control"}]));
    assert!(events[1].control().get("streamClosed").is_some());
}

// ---------------------------------------------------------------------------
// Idempotent producers and closure

fn produce(s: &Server, p: &str, id: &str, epoch: &str, seq: &str, close: bool, body: &[u8]) -> Resp {
    let mut headers = vec![("Producer-Id", id), ("Producer-Epoch", epoch), ("Producer-Seq", seq)];
    if !body.is_empty() {
        headers.push(("Content-Type", TEXT));
    }
    if close {
        headers.push(("Stream-Closed", "true"));
    }
    s.req("POST", p, &headers, body)
}

#[test]
fn producer_close_is_idempotent_and_fences_everyone_else() {
    let s = Server::start();
    let p = path("prod-close");
    s.put(&p, TEXT, b"").expect(201);

    let r = produce(&s, &p, "writer", "0", "0", true, b"final message").expect(200);
    assert_eq!(r.h("stream-closed"), "true");
    assert_eq!(r.h("producer-epoch"), "0");
    assert_eq!(r.h("producer-seq"), "0");
    let final_offset = r.next_offset();
    assert_eq!(final_offset, offset(13));

    // The exact retry is a duplicate; so is one with another body.
    for body in [&b"final message"[..], b"different body"] {
        let r = produce(&s, &p, "writer", "0", "0", true, body).expect(204);
        assert_eq!(r.h("stream-closed"), "true");
        assert_eq!(r.next_offset(), final_offset);
    }

    // Another producer, or the same one going on: 409, closed, at the final offset.
    for (id, epoch, seq) in [("other", "0", "0"), ("writer", "0", "1"), ("writer", "1", "0")] {
        let r = produce(&s, &p, id, epoch, seq, true, b"should fail").expect(409);
        assert_eq!(r.h("stream-closed"), "true", "{id} {epoch} {seq}");
        assert_eq!(r.next_offset(), final_offset, "{id} {epoch} {seq}");
    }
    let r = produce(&s, &p, "other", "0", "0", false, b"plain").expect(409);
    assert_eq!(r.h("stream-closed"), "true");
    assert_eq!(r.next_offset(), final_offset);
    // Close-only by another producer: also refused.
    let r = produce(&s, &p, "other", "0", "0", true, b"").expect(409);
    assert_eq!(r.next_offset(), final_offset);
    // Close-only without a producer: idempotent.
    let r = s.req("POST", &p, &[("Stream-Closed", "true")], b"").expect(204);
    assert_eq!(r.h("stream-closed"), "true");
    assert_eq!(r.next_offset(), final_offset);

    let r = s.get(&p).expect(200);
    assert_eq!(r.body, b"final message");
    assert_eq!(r.h("stream-closed"), "true");
    assert_eq!(r.next_offset(), final_offset);
}

#[test]
fn producer_close_only_commits_its_sequence_number() {
    let s = Server::start();
    let p = path("prod-close-only");
    s.put(&p, TEXT, b"").expect(201);
    produce(&s, &p, "writer", "0", "0", false, b"message").expect(200);
    let r = produce(&s, &p, "writer", "0", "1", true, b"").expect(204);
    assert_eq!(r.h("stream-closed"), "true");
    assert_eq!(r.h("producer-epoch"), "0");
    assert_eq!(r.h("producer-seq"), "1");
    assert_eq!(r.next_offset(), offset(7));
    // Retrying the closing tuple: 204 and closed.
    let r = produce(&s, &p, "writer", "0", "1", true, b"").expect(204);
    assert_eq!(r.h("stream-closed"), "true");
    assert_eq!(r.next_offset(), offset(7));
    // The next seq is refused: the stream is closed.
    let r = produce(&s, &p, "writer", "0", "2", false, b"late").expect(409);
    assert_eq!(r.h("stream-closed"), "true");
    assert_eq!(s.get(&p).expect(200).body, b"message");
}
