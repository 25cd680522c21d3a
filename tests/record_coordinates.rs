//! JSON record coordinates on the bucketed surface, through the real binary:
//! the HTTP cases of the extension's reference fixture (Ursula's
//! `record_coordinates_http_v1.json`, written here as Rust data, offsets as
//! byte positions of the canonical NDJSON), the `Stream-Extensions` token on
//! every response about a JSON stream (refusals included) and on no other,
//! and record bounds on snapshot, retention and bootstrap responses.

mod common;

use common::{build, offset, sse_events, Resp, Server};
use serde_json::Value;

const JSON: &str = "application/json";
const TOKEN: &str = "json-record-coordinates-v1";
const THREE: &[&str] = &[r#"[{"id":0},{"id":1},{"id":2}]"#];

/// What a case does after its setup.
enum Op {
    Head,
    Append { body: &'static str, record_match: Option<u64> },
    Read(Read),
}

/// A read: its query parameters.
#[derive(Default)]
struct Read {
    record: Option<u64>,
    max_records: Option<u64>,
    envelope: bool,
    /// `offset=-1` is sent too.
    offset_present: bool,
    live: Option<&'static str>,
}

/// Expected outcome; `None` fields are not checked.
#[derive(Default)]
struct Expected {
    status: u16,
    extension: bool,
    record_first: Option<u64>,
    record_start: Option<u64>,
    record_next: Option<u64>,
    /// Byte position of Stream-Next-Offset.
    next_offset: Option<u64>,
    body: Option<&'static str>,
    /// streamFirstRecord, streamNextRecord, streamNextOffset (byte position) of the SSE control event.
    sse_control: Option<(u64, u64, u64)>,
}

struct Case {
    name: &'static str,
    content_type: &'static str,
    setup_bodies: &'static [&'static str],
    retain_from: Option<u64>,
    op: Op,
    expected: Expected,
}

fn read(record: u64) -> Read {
    Read { record: Some(record), ..Read::default() }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "json-head-advertises-active-extension",
            content_type: JSON,
            setup_bodies: THREE,
            retain_from: None,
            op: Op::Head,
            expected: Expected {
                status: 200,
                extension: true,
                record_first: Some(0),
                record_next: Some(3),
                next_offset: Some(27),
                ..Expected::default()
            },
        },
        Case {
            name: "binary-head-does-not-advertise-json-extension",
            content_type: "application/octet-stream",
            setup_bodies: &[],
            retain_from: None,
            op: Op::Head,
            expected: Expected { status: 200, extension: false, next_offset: Some(0), ..Expected::default() },
        },
        Case {
            name: "append-acknowledges-contiguous-range",
            content_type: JSON,
            setup_bodies: THREE,
            retain_from: None,
            op: Op::Append { body: r#"[{"id":3},{"id":4}]"#, record_match: None },
            expected: Expected {
                status: 204,
                extension: true,
                record_start: Some(3),
                record_next: Some(5),
                next_offset: Some(45),
                ..Expected::default()
            },
        },
        Case {
            name: "record-match-failure-reports-current-tails",
            content_type: JSON,
            setup_bodies: THREE,
            retain_from: None,
            op: Op::Append { body: r#"{"id":3}"#, record_match: Some(2) },
            expected: Expected {
                status: 412,
                extension: true,
                record_next: Some(3),
                next_offset: Some(27),
                ..Expected::default()
            },
        },
        Case {
            name: "record-aligned-read",
            content_type: JSON,
            setup_bodies: THREE,
            retain_from: None,
            op: Op::Read(Read { max_records: Some(2), ..read(1) }),
            expected: Expected {
                status: 200,
                extension: true,
                record_first: Some(0),
                record_start: Some(1),
                record_next: Some(3),
                next_offset: Some(27),
                body: Some("{\"id\":1}\n{\"id\":2}\n"),
                ..Expected::default()
            },
        },
        Case {
            name: "envelope-view-does-not-change-continuation",
            content_type: JSON,
            setup_bodies: THREE,
            retain_from: None,
            op: Op::Read(Read { max_records: Some(2), envelope: true, ..read(1) }),
            expected: Expected {
                status: 200,
                extension: true,
                record_first: Some(0),
                record_start: Some(1),
                record_next: Some(3),
                next_offset: Some(27),
                body: Some("{\"record\":1,\"value\":{\"id\":1}}\n{\"record\":2,\"value\":{\"id\":2}}\n"),
                ..Expected::default()
            },
        },
        Case {
            name: "trimmed-record-is-gone",
            content_type: JSON,
            setup_bodies: THREE,
            retain_from: Some(2),
            op: Op::Read(read(1)),
            expected: Expected {
                status: 410,
                extension: true,
                record_first: Some(2),
                record_next: Some(3),
                ..Expected::default()
            },
        },
        Case {
            name: "record-beyond-tail-is-bad-request",
            content_type: JSON,
            setup_bodies: THREE,
            retain_from: None,
            op: Op::Read(read(4)),
            expected: Expected { status: 400, extension: true, record_next: Some(3), ..Expected::default() },
        },
        Case {
            name: "record-and-offset-are-mutually-exclusive",
            content_type: JSON,
            setup_bodies: &[r#"[{"id":0}]"#],
            retain_from: None,
            op: Op::Read(Read { offset_present: true, ..read(0) }),
            expected: Expected { status: 400, extension: true, ..Expected::default() },
        },
        Case {
            name: "ordinary-offset-read-remains-byte-oriented",
            content_type: JSON,
            setup_bodies: &[r#"[{"id":0},{"id":1}]"#],
            retain_from: None,
            op: Op::Read(Read { offset_present: true, ..Read::default() }),
            expected: Expected {
                status: 200,
                extension: true,
                next_offset: Some(18),
                body: Some("{\"id\":0}\n{\"id\":1}\n"),
                ..Expected::default()
            },
        },
        Case {
            name: "empty-long-poll-keeps-record-continuation",
            content_type: JSON,
            setup_bodies: THREE,
            retain_from: None,
            op: Op::Read(Read { live: Some("long-poll"), ..read(3) }),
            expected: Expected {
                status: 204,
                extension: true,
                record_first: Some(0),
                record_start: Some(3),
                record_next: Some(3),
                next_offset: Some(27),
                body: Some(""),
                ..Expected::default()
            },
        },
        Case {
            name: "sse-control-carries-matching-record-and-offset-tail",
            content_type: JSON,
            setup_bodies: THREE,
            retain_from: None,
            op: Op::Read(Read { live: Some("sse"), ..read(2) }),
            expected: Expected {
                status: 200,
                extension: true,
                body: Some("{\"id\":2}\n"),
                sse_control: Some((0, 3, 27)),
                ..Expected::default()
            },
        },
    ]
}

/// Creates the case's stream on the bucketed surface and applies its setup.
fn setup(s: &Server, path: &str, case: &Case) {
    s.put(path, case.content_type, b"").expect(201);
    for body in case.setup_bodies {
        s.post(path, case.content_type, body.as_bytes()).expect(204);
    }
    if let Some(r) = case.retain_from {
        s.req("PUT", &format!("{path}/snapshot?record={r}"), &[("Content-Type", JSON)], b"{}").expect(204);
        s.req("PUT", &format!("{path}/retention?record={r}"), &[], b"").expect(204);
    }
}

fn query(r: &Read) -> String {
    let mut q = Vec::new();
    if r.offset_present {
        q.push("offset=-1".to_string());
    }
    if let Some(n) = r.record {
        q.push(format!("record={n}"));
    }
    if let Some(n) = r.max_records {
        q.push(format!("max_records={n}"));
    }
    if r.envelope {
        q.push("record_view=envelope".to_string());
    }
    if let Some(live) = r.live {
        q.push(format!("live={live}"));
    }
    q.join("&")
}

/// Opens an SSE read; returns its head and the events through the first control event.
fn sse(s: &Server, target: &str) -> (Resp, Vec<(String, String)>) {
    let mut c = s.connect();
    c.send(&build("GET", target, &[], b"")).expect("send");
    let head = String::from_utf8(c.read_until(b"\r\n\r\n").expect("SSE head")).expect("UTF-8");
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).expect("status");
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut raw = c.read_until(b"event: control\n").expect("a control event");
    raw.extend_from_slice(&c.read_until(b"\n\n").expect("end of the control event"));
    (Resp { status, reason: String::new(), headers, body: Vec::new() }, sse_events(&raw))
}

#[track_caller]
fn check_header(name: &str, r: &Resp, header: &str, want: Option<u64>) {
    if let Some(v) = want {
        assert_eq!(r.header(header), Some(v.to_string().as_str()), "{name}: {header} in {r:?}");
    }
}

#[test]
fn reference_fixture_http_cases() {
    let s = Server::start();
    s.req("PUT", "/fixture", &[], b"").expect(201);
    for (i, case) in cases().iter().enumerate() {
        let path = format!("/fixture/case-{i}");
        setup(&s, &path, case);
        let (r, events) = match &case.op {
            Op::Head => (s.head(&path), Vec::new()),
            Op::Append { body, record_match } => {
                let m = record_match.map(|m| m.to_string());
                let mut headers = vec![("Content-Type", case.content_type)];
                if let Some(m) = &m {
                    headers.push(("Stream-Record-Match", m.as_str()));
                }
                (s.req("POST", &path, &headers, body.as_bytes()), Vec::new())
            }
            Op::Read(read) if read.live == Some("sse") => sse(&s, &format!("{path}?{}", query(read))),
            Op::Read(read) => (s.get(&format!("{path}?{}", query(read))), Vec::new()),
        };
        let e = &case.expected;
        let name = case.name;
        assert_eq!(r.status, e.status, "{name}: {r:?}");
        assert_eq!(r.header("stream-extensions") == Some(TOKEN), e.extension, "{name}: {r:?}");
        check_header(name, &r, "stream-record-first", e.record_first);
        check_header(name, &r, "stream-record-start", e.record_start);
        check_header(name, &r, "stream-record-next", e.record_next);
        if let Some(at) = e.next_offset {
            assert_eq!(r.header("stream-next-offset"), Some(offset(at).as_str()), "{name}: {r:?}");
        }
        match e.sse_control {
            None => {
                if let Some(body) = e.body {
                    assert_eq!(r.text(), body, "{name}");
                }
            }
            Some((first, next, at)) => {
                assert_eq!(r.header("stream-data-content-type"), Some("application/x-ndjson"), "{name}");
                assert_eq!(events.len(), 2, "{name}: {events:?}");
                assert_eq!(events[0], ("data".to_string(), e.body.expect("SSE data").to_string()), "{name}");
                assert_eq!(events[1].0, "control", "{name}");
                let ctl: Value = serde_json::from_str(&events[1].1).expect("control JSON");
                assert_eq!(ctl["streamFirstRecord"], first, "{name}: {ctl}");
                assert_eq!(ctl["streamNextRecord"], next, "{name}: {ctl}");
                assert_eq!(ctl["streamNextOffset"], offset(at), "{name}: {ctl}");
                assert_eq!(ctl["upToDate"], true, "{name}: {ctl}");
            }
        }
    }
}

#[test]
fn the_token_is_on_every_json_stream_response_and_on_no_other() {
    let s = Server::start_with(&["--long-poll-timeout", "200ms"]);
    s.req("PUT", "/toks", &[], b"").expect(201);
    let j = "/toks/j";
    let t = "/toks/t";
    let mut json_responses =
        vec![s.put(j, JSON, br#"[{"id":0},{"id":1}]"#).expect(201), s.put(j, JSON, b"").expect(200)];
    let mut other_responses = vec![s.put(t, "text/plain", b"abc").expect(201)];
    for p in [j, t] {
        let ct = if p == j { JSON } else { "text/plain" };
        let mut got = vec![
            s.head(p).expect(200),
            s.get(&format!("{p}?offset=-1")).expect(200),
            s.get(&format!("{p}?offset=now&live=long-poll")).expect(204),
            s.put(p, "text/csv", b"").expect(409),
            s.post(p, "text/csv", b"x").expect(409),
            s.req("POST", p, &[("Content-Type", ct), ("Stream-Seq", "b")], b"1").expect(204),
            s.req("POST", p, &[("Content-Type", ct), ("Stream-Seq", "a")], b"2").expect(409),
            s.get(&format!("{p}?offset={}", offset(999))).expect(400),
            s.get(&format!("{p}?offset=bogus")).expect(400),
            s.req("PATCH", p, &[], b"").expect(405),
            s.req("PUT", &format!("{p}/snapshot/{}", offset(999)), &[], b"x").expect(409),
            s.get(&format!("{p}/snapshot")).expect(404),
            s.delete(&format!("{p}/snapshot/{}", offset(0))).expect(404),
            s.req("PUT", &format!("{p}/retention/{}", offset(999)), &[], b"").expect(409),
            s.get(&format!("{p}/bootstrap")).expect(200),
            s.get(&format!("{p}/bootstrap?live=sse")).expect(400),
            s.get(&format!("{p}/attrs")).expect(200),
            s.post(&format!("{p}/append-batch"), ct, b"\0\0").expect(400),
            s.get(&format!("{p}/nope")).expect(404),
        ];
        if p == j {
            got.push(s.get(&format!("{p}?record=9")).expect(400));
            got.push(s.get(&format!("{p}?record=0&max_bytes=1")).expect(400));
            got.push(s.req("POST", p, &[("Content-Type", JSON), ("Stream-Record-Match", "0")], b"1").expect(412));
            got.push(s.req("PUT", &format!("{p}/snapshot?record=1"), &[("Content-Type", JSON)], b"{}").expect(204));
            got.push(s.req("PUT", &format!("{p}/retention?record=1"), &[], b"").expect(204));
            got.push(s.get(&format!("{p}?record=0")).expect(410));
            got.push(s.delete(&format!("{p}/snapshot/{}", offset(9))).expect(409));
            json_responses.append(&mut got);
            json_responses.push(s.post(j, JSON, b"[7]").expect(204));
            s.req("POST", j, &[("Content-Type", JSON), ("Stream-Closed", "true")], b"").expect(204);
            json_responses.push(s.post(j, JSON, b"[8]").expect(409));
        } else {
            got.push(s.get(&format!("{p}?record=0")).expect(400));
            other_responses.append(&mut got);
        }
    }
    for r in &json_responses {
        assert_eq!(r.header("stream-extensions"), Some(TOKEN), "JSON stream response without the token: {r:?}");
    }
    for r in &other_responses {
        assert!(!r.has("stream-extensions"), "non-JSON stream response with the token: {r:?}");
    }
}

#[test]
fn snapshot_retention_and_bootstrap_carry_record_bounds() {
    let s = Server::start();
    s.req("PUT", "/bounds", &[], b"").expect(201);
    let p = "/bounds/j";
    s.put(p, JSON, br#"[{"id":1},{"id":2}]"#).expect(201);
    // Snapshot publication at an intra-record offset is refused.
    s.req("PUT", &format!("{p}/snapshot/{}", offset(1)), &[("Content-Type", JSON)], b"{}").expect(400);
    let boundary = s.get(&format!("{p}?record=0&max_records=1")).expect(200).next_offset();
    let r = s.req("PUT", &format!("{p}/snapshot?record=1"), &[("Content-Type", JSON)], br#"{"n":1}"#).expect(204);
    assert_eq!(r.h("stream-snapshot-offset"), boundary);
    assert_eq!((r.h("stream-record-first"), r.h("stream-record-next")), ("0", "2"));
    let r = s.req("PUT", &format!("{p}/retention?record=1"), &[], b"").expect(204);
    assert_eq!(r.h("stream-retained-offset"), boundary);
    assert_eq!((r.h("stream-record-first"), r.h("stream-record-next")), ("1", "2"));
    for target in [format!("{p}/snapshot/{boundary}"), format!("{p}/bootstrap")] {
        let r = s.get(&target).expect(200);
        assert_eq!((r.h("stream-record-first"), r.h("stream-record-next")), ("1", "2"), "{target}");
    }
    // Non-JSON streams have no record bounds.
    s.put("/bounds/t", "text/plain", b"ab").expect(201);
    let r = s.req("PUT", &format!("/bounds/t/snapshot/{}", offset(2)), &[], b"x").expect(204);
    assert!(!r.has("stream-record-first"), "{r:?}");
    s.req("PUT", "/bounds/t/snapshot?record=0", &[], b"x").expect(400);
}

#[test]
fn offset_sse_sends_ndjson_on_the_bucketed_surface_and_arrays_on_the_base_surface() {
    let s = Server::start();
    s.req("PUT", "/ssej", &[], b"").expect(201);
    for (path, data_type, data) in [
        ("/ssej/s", "application/x-ndjson", "{\"id\":0}\n{\"id\":1}\n"),
        ("/v1/stream/ssej-s", JSON, "[{\"id\":0},{\"id\":1}]"),
    ] {
        s.put(path, JSON, br#"[{"id":0},{"id":1}]"#).expect(201);
        let (head, events) = sse(&s, &format!("{path}?offset=-1&live=sse"));
        assert_eq!(head.header("stream-data-content-type"), Some(data_type), "{path}: {head:?}");
        assert_eq!(head.header("stream-extensions"), Some(TOKEN), "{path}");
        assert!(!head.has("stream-sse-data-encoding"), "JSON travels as text: {head:?}");
        assert_eq!(events.len(), 2, "{path}: {events:?}");
        assert_eq!(events[0], ("data".to_string(), data.to_string()), "{path}");
        let ctl: Value = serde_json::from_str(&events[1].1).expect("control JSON");
        assert_eq!(ctl["streamNextOffset"], offset(18), "{path}: {ctl}");
        assert!(ctl.get("streamNextRecord").is_none(), "offset reads carry no record fields: {ctl}");
    }
}
