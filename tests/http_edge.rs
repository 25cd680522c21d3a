//! The hand-written HTTP/1.1 edge: body framing, Expect: 100-continue,
//! limits (431, 413), malformed requests, percent-decoding, timeouts,
//! keep-alive and HEAD framing.

mod common;

use common::{build, offset, Server};
use std::io::{ErrorKind, Read};
use std::time::{Duration, Instant};

const TEXT: &str = "text/plain";

#[test]
fn chunked_request_bodies() {
    let s = Server::start();
    // Chunked initial body on create, with an extension and a trailer.
    let r = s
        .req(
            "PUT",
            "/v1/stream/chunky",
            &[("Content-Type", TEXT), ("Transfer-Encoding", "chunked")],
            b"4;name=value\r\nfirs\r\n1\r\nt\r\n0\r\nX-Trailer: yes\r\n\r\n",
        )
        .expect(201);
    assert_eq!(r.next_offset(), offset(5));
    // Chunked append with a multi-digit hex size, then a sized append on the
    // same connection.
    let big: Vec<u8> = (0..300u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut body = format!("{:X}\r\n", big.len()).into_bytes();
    body.extend_from_slice(&big);
    body.extend_from_slice(b"\r\n0\r\n\r\n");
    let mut c = s.connect();
    let r = c
        .request("POST", "/v1/stream/chunky", &[("Content-Type", TEXT), ("Transfer-Encoding", "chunked")], &body)
        .expect(204);
    assert_eq!(r.next_offset(), offset(305));
    c.request("POST", "/v1/stream/chunky", &[("Content-Type", TEXT)], b"!").expect(204);
    let r = c.request("GET", "/v1/stream/chunky?offset=-1", &[], b"");
    let mut want = b"first".to_vec();
    want.extend_from_slice(&big);
    want.push(b'!');
    assert_eq!(r.expect(200).body, want);

    // An empty chunked body is an empty append.
    s.req("POST", "/v1/stream/chunky", &[("Content-Type", TEXT), ("Transfer-Encoding", "chunked")], b"0\r\n\r\n")
        .expect(400);
    // Malformed chunk framing.
    s.req(
        "POST",
        "/v1/stream/chunky",
        &[("Content-Type", TEXT), ("Transfer-Encoding", "chunked")],
        b"zz\r\nabc\r\n0\r\n\r\n",
    )
    .expect(400);
    s.req(
        "POST",
        "/v1/stream/chunky",
        &[("Content-Type", TEXT), ("Transfer-Encoding", "chunked")],
        b"2\r\nabc\r\n0\r\n\r\n",
    )
    .expect(400);
    // Nothing from the refused requests was written.
    assert_eq!(s.get("/v1/stream/chunky").expect(200).body, want);
}

#[test]
fn body_framing_errors() {
    let s = Server::start();
    s.put("/v1/stream/framing", TEXT, b"").expect(201);
    let cases: [(&[u8], u16); 4] = [
        // Both Content-Length and chunked.
        (
            b"POST /v1/stream/framing HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n\
          Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
            400,
        ),
        // An unsupported transfer coding.
        (
            b"POST /v1/stream/framing HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n\
          Transfer-Encoding: gzip\r\n\r\n",
            501,
        ),
        // A bad Content-Length.
        (
            b"POST /v1/stream/framing HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n\
          Content-Length: nope\r\n\r\n",
            400,
        ),
        // Two different Content-Lengths.
        (
            b"POST /v1/stream/framing HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n\
          Content-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            400,
        ),
    ];
    for (raw, status) in cases {
        let mut c = s.connect();
        c.send(raw).unwrap();
        c.read_response(false).expect(status);
    }
    // Content-Length follows the one integer grammar: digits only.
    for length in ["+5", "-5", " 5 5", "5.0", "0x5", "18446744073709551616"] {
        let raw = format!(
            "POST /v1/stream/framing HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {length}\r\n\r\nhello"
        );
        let mut c = s.connect();
        c.send(raw.as_bytes()).unwrap();
        let r = c.read_response(false).expect(400);
        assert_eq!(r.text(), "invalid Content-Length\n", "{length:?}");
    }
    assert!(s.get("/v1/stream/framing").expect(200).body.is_empty());
}

#[test]
fn expect_100_continue() {
    let s = Server::start_with(&["--max-body-bytes", "1024"]);
    s.put("/v1/stream/cont", TEXT, b"").expect(201);
    let mut c = s.connect();
    c.send(&build(
        "POST",
        "/v1/stream/cont",
        &[("Content-Type", TEXT), ("Content-Length", "5"), ("Expect", "100-continue")],
        b"",
    ))
    .unwrap();
    let interim = c.read_response(false);
    assert_eq!(interim.status, 100, "{interim:?}");
    assert_eq!(interim.reason, "Continue");
    c.send(b"hello").unwrap();
    let r = c.read_response(false).expect(204);
    assert_eq!(r.next_offset(), offset(5));

    // Chunked with Expect on the same connection.
    c.send(&build(
        "POST",
        "/v1/stream/cont",
        &[("Content-Type", TEXT), ("Transfer-Encoding", "chunked"), ("Expect", "100-continue")],
        b"",
    ))
    .unwrap();
    assert_eq!(c.read_response(false).status, 100);
    c.send(b"3\r\n!!!\r\n0\r\n\r\n").unwrap();
    c.read_response(false).expect(204);

    // Too large: the final status comes at once, without 100 Continue.
    let mut c2 = s.connect();
    c2.send(&build(
        "POST",
        "/v1/stream/cont",
        &[("Content-Type", TEXT), ("Content-Length", "5000"), ("Expect", "100-continue")],
        b"",
    ))
    .unwrap();
    c2.read_response(false).expect(413);

    let r = c.request("GET", "/v1/stream/cont", &[], b"");
    assert_eq!(r.expect(200).body, b"hello!!!");
}

#[test]
fn oversized_head_is_431() {
    let s = Server::start_with(&["--max-head-bytes", "1024"]);
    // Just under the limit is fine.
    let ok = "v".repeat(700);
    s.req("GET", "/v1/healthz", &[("X-Filler", &ok)], b"").expect(200);
    let big = "v".repeat(1500);
    let r = s.req("GET", "/v1/healthz", &[("X-Filler", &big)], b"");
    assert_eq!(r.status, 431, "{r:?}");
    // A long request target counts too.
    let long = format!("/v1/stream/{}", "x".repeat(1100));
    assert_eq!(s.get(&long).status, 431);
    // A head that never ends is cut off at the limit, not buffered forever.
    let mut c = s.connect();
    c.send(b"GET /v1/healthz HTTP/1.1\r\n").unwrap();
    for _ in 0..20 {
        if c.send(b"X-Endless: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n").is_err() {
            break;
        }
    }
    assert_eq!(c.read_response(false).status, 431);
}

#[test]
fn too_many_headers_is_431() {
    let s = Server::start_with(&["--max-headers", "8"]);
    // Host plus five more: within the limit.
    let few: Vec<(String, String)> = (0..5).map(|i| (format!("X-H{i}"), "1".into())).collect();
    let few: Vec<(&str, &str)> = few.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    s.req("GET", "/v1/healthz", &few, b"").expect(200);
    let many: Vec<(String, String)> = (0..12).map(|i| (format!("X-H{i}"), "1".into())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let r = s.req("GET", "/v1/healthz", &many, b"");
    assert_eq!(r.status, 431, "{r:?}");
}

#[test]
fn body_over_the_limit_is_413() {
    let s = Server::start_with(&["--max-body-bytes", "1024"]);
    s.put("/v1/stream/limited", TEXT, b"").expect(201);
    // Exactly the limit is accepted.
    s.post("/v1/stream/limited", TEXT, &[b'a'; 1024]).expect(204);
    // Over it: refused from the Content-Length alone (the body is never sent).
    let mut c = s.connect();
    c.send(&build("POST", "/v1/stream/limited", &[("Content-Type", TEXT), ("Content-Length", "1025")], b"")).unwrap();
    c.read_response(false).expect(413);
    // Also when the whole body came with its head, read where it lies.
    let mut c = s.connect();
    c.send(&build("POST", "/v1/stream/limited", &[("Content-Type", TEXT)], &[b'z'; 1025])).unwrap();
    c.read_response(false).expect(413);
    // On create too.
    let mut c = s.connect();
    c.send(&build("PUT", "/v1/stream/limited-2", &[("Content-Type", TEXT), ("Content-Length", "4096")], b"")).unwrap();
    c.read_response(false).expect(413);
    // A chunked body is counted as it arrives.
    let mut chunked = b"400\r\n".to_vec();
    chunked.extend_from_slice(&[b'b'; 1024]);
    chunked.extend_from_slice(b"\r\n1\r\nc\r\n0\r\n\r\n");
    let r = s.req("POST", "/v1/stream/limited", &[("Content-Type", TEXT), ("Transfer-Encoding", "chunked")], &chunked);
    assert_eq!(r.status, 413);
    let r = s.get("/v1/stream/limited").expect(200);
    assert_eq!(r.body, vec![b'a'; 1024]);
    s.get("/v1/stream/limited-2").expect(404);
}

#[test]
fn malformed_requests_are_400() {
    let s = Server::start();
    for raw in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET\r\n\r\n",
        b"GET /v1/healthz HTTP/1.1 extra\r\n\r\n",
        b"GET /v1/healthz HTTP/2.0\r\n\r\n",
        b"GET /v1/healthz HTTP/1.1\r\nBad Header Name: x\r\n\r\n",
        b"\x00\x01\x02\r\n\r\n",
    ] {
        let mut c = s.connect();
        c.send(raw).unwrap();
        let r = c.read_response(false);
        assert_eq!(r.status, 400, "{:?}: {r:?}", String::from_utf8_lossy(raw));
        // The server closes the connection after a framing error.
        assert_eq!(c.read_to_eof().unwrap(), b"");
    }
    // A target that is not absolute.
    let mut c = s.connect();
    c.send(b"GET v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    c.read_response(false).expect(400);
    // The server is still healthy.
    s.get("/v1/healthz").expect(200);
    // Unknown routes and methods.
    s.get("/").expect(404);
    s.get("/v1/unknown").expect(404);
    s.req("POST", "/v1/healthz", &[], b"").expect(405);
    s.put("/v1/stream/m", TEXT, b"").expect(201);
    s.req("PATCH", "/v1/stream/m", &[], b"").expect(405);
}

#[test]
fn percent_encoded_stream_ids_are_decoded() {
    let s = Server::start();
    let r = s.put("/v1/stream/a%20b", TEXT, b"spaced").expect(201);
    assert_eq!(r.h("location"), "http://127.0.0.1/v1/stream/a%20b");
    assert_eq!(s.get("/v1/stream/a%20b").expect(200).body, b"spaced");
    s.post("/v1/stream/a%20b", TEXT, b"!").expect(204);
    assert_eq!(s.get("/v1/stream/a%20b").expect(200).body, b"spaced!");
    // Encoded and literal forms of one id name the same stream.
    s.put("/v1/stream/%61bc", TEXT, b"").expect(201);
    s.post("/v1/stream/abc", TEXT, b"same").expect(204);
    assert_eq!(s.get("/v1/stream/%61%62%63").expect(200).body, b"same");
    // %2F inside a segment stays in the id: chat%2F42 is chat/42.
    s.put("/v1/stream/chat/42", TEXT, b"path id").expect(201);
    assert_eq!(s.get("/v1/stream/chat%2F42").expect(200).body, b"path id");
    // UTF-8.
    s.put("/v1/stream/%E2%9C%93", TEXT, b"check").expect(201);
    let v = s.get("/v1-stream/streams").expect(200).json();
    let ids: Vec<&str> = v["streams"].as_array().unwrap().iter().map(|s| s["stream_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a b", "abc", "chat/42", "\u{2713}"]);
    // In a bucket: decoded ids work, an encoded '/' is refused.
    s.req("PUT", "/encbkt", &[], b"").expect(201);
    s.put("/encbkt/x%20y", TEXT, b"in bucket").expect(201);
    assert_eq!(s.get("/encbkt/x%20y").expect(200).body, b"in bucket");
    s.put("/encbkt/x%2Fy", TEXT, b"").expect(400);
    // Percent-encoded query values.
    let r = s.get("/v1/stream/a%20b?offset=%2D1").expect(200);
    assert_eq!(r.body, b"spaced!");
}

#[test]
fn invalid_percent_encoding_is_400() {
    let s = Server::start();
    s.put("/v1/stream/ok", TEXT, b"x").expect(201);
    for bad in ["/v1/stream/a%zz", "/v1/stream/a%2", "/v1/stream/a%", "/v1/stream/%ff%fe", "/v1/stream/ok?offset=%zz"] {
        let r = s.get(bad);
        assert_eq!(r.status, 400, "{bad}: {r:?}");
    }
    s.get("/v1/stream/ok").expect(200);
}

/// Reads from a connection the server should cut off; returns how long it
/// took and the status if a response came first.
fn wait_cut_off(c: &mut common::Conn) -> (Duration, Option<u16>) {
    let started = Instant::now();
    let status = match c.try_read_response(false) {
        Ok(r) => {
            // Whatever answered, the server must close the connection next.
            match c.read_to_eof() {
                Ok(rest) => assert!(rest.is_empty(), "bytes after {r:?}"),
                Err(e) => assert_ne!(e.kind(), ErrorKind::WouldBlock, "still open"),
            }
            Some(r.status)
        }
        Err(e) => {
            assert!(
                !matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
                "the stalled connection was never cut off"
            );
            None
        }
    };
    (started.elapsed(), status)
}

#[test]
fn stalled_partial_head_is_cut_off() {
    let s = Server::start_with(&["--request-timeout", "1s"]);
    let mut c = s.connect();
    c.send(b"GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Part").unwrap();
    let (took, status) = wait_cut_off(&mut c);
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(5),
        "cut off after {took:?} with --request-timeout 1s"
    );
    assert!(matches!(status, None | Some(408)), "{status:?}");
    // A stalled body is cut off the same way.
    s.put("/v1/stream/slow", TEXT, b"").expect(201);
    let mut c = s.connect();
    c.send(&build("POST", "/v1/stream/slow", &[("Content-Type", TEXT), ("Content-Length", "10")], b"abc")).unwrap();
    let (took, status) = wait_cut_off(&mut c);
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(matches!(status, None | Some(408)), "{status:?}");
    // Nothing partial was appended, and the server is fine.
    assert!(s.get("/v1/stream/slow").expect(200).body.is_empty());
}

#[test]
fn idle_keep_alive_connection_is_not_a_stalled_request() {
    let s = Server::start_with(&["--request-timeout", "1s"]);
    let mut c = s.connect();
    c.request("GET", "/v1/healthz", &[], b"").expect(200);
    // Idle (no partial request) for longer than the request timeout.
    std::thread::sleep(Duration::from_millis(1300));
    c.request("GET", "/v1/healthz", &[], b"").expect(200);
}

#[test]
fn connection_close_and_http_1_0() {
    let s = Server::start();
    let mut c = s.connect();
    let r = c.request("GET", "/v1/healthz", &[("Connection", "close")], b"").expect(200);
    assert_eq!(r.h("connection"), "close");
    assert_eq!(c.read_to_eof().unwrap(), b"");
    // HTTP/1.0 without keep-alive closes; with keep-alive it stays open.
    let mut c = s.connect();
    c.send(b"GET /v1/healthz HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(c.read_response(false).expect(200).body, b"ok\n");
    assert_eq!(c.read_to_eof().unwrap(), b"");
    let mut c = s.connect();
    c.send(b"GET /v1/healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap();
    c.read_response(false).expect(200);
    c.request("GET", "/v1/healthz", &[], b"").expect(200);
}

#[test]
fn head_success_has_no_body_on_keep_alive() {
    let s = Server::start();
    s.put("/v1/stream/h", TEXT, b"0123456789").expect(201);
    s.req("PUT", "/hbucket", &[], b"").expect(201);
    let mut c = s.connect();
    for path in ["/v1/stream/h", "/hbucket"] {
        c.request("HEAD", path, &[], b"").expect(200);
        // The next response must start right after the HEAD response's head.
        let r = c.request("GET", "/v1/stream/h", &[], b"").expect(200);
        assert_eq!(r.body, b"0123456789");
    }
}

// RFC 9112 section 6.3: a response to HEAD ends at its header section. Error
// responses to HEAD (and HEAD /v1/healthz) currently carry a body, which a
// keep-alive client then reads as the start of the next response.
#[test]
fn head_responses_never_carry_a_body() {
    let s = Server::start();
    let mut broken = Vec::new();
    for (path, status) in [
        ("/v1/healthz", 200),
        ("/v1/stream/missing", 404),
        ("/nobucket/s", 404),
        ("/v1/stream/bad..id", 400),
        ("/v1-stream/streams", 405),
    ] {
        let mut c = s.connect();
        c.request("HEAD", path, &[], b"").expect(status);
        // Probe with a real request: its response must parse cleanly.
        c.send(&build("GET", "/v1/healthz", &[], b"")).unwrap();
        match c.try_read_response(false) {
            Ok(r) if r.status == 200 && r.body == b"ok\n" => {}
            Ok(r) => broken.push(format!("after HEAD {path}: {r:?}")),
            Err(e) => broken.push(format!("after HEAD {path}: {e}")),
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}

#[test]
fn connections_over_the_limit_are_refused_with_503() {
    let s = Server::start_with(&["--max-connections", "1"]);
    // Two shards with one connection each: of three held connections at
    // least one lands on a full shard (SO_REUSEPORT spreads them).
    let mut held = Vec::new();
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let mut c = s.connect();
        let r = c.request("GET", "/v1/healthz", &[], b"");
        statuses.push(r.status);
        held.push(c);
    }
    assert!(statuses.contains(&503), "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 200 || *s == 503), "{statuses:?}");
    // Once they are gone, connections are accepted again.
    drop(held);
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        if s.get("/v1/healthz").status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the limit never freed up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn every_integer_header_and_query_value_takes_digits_only() {
    let s = Server::start();
    s.req("PUT", "/ints", &[], b"").expect(201);
    let j = "/ints/j";
    s.put(j, "application/json", b"[1, 2, 3]").expect(201);
    let tail = s.head(j).expect(200).next_offset();
    let json = ("Content-Type", "application/json");
    // Header values lose surrounding whitespace (HTTP's OWS); query values
    // are percent-decoded first (`+` is a space there, `%2B` a plus).
    for (bad, in_query) in [
        ("+1", "%2B1"),
        ("-1", "-1"),
        ("1 1", "%201"),
        ("1.0", "1%20"),
        ("1e0", "+1"),
        ("0x1", "0x1"),
        ("99999999999999999999", "99999999999999999999"),
    ] {
        let refused = [
            s.req("POST", j, &[json, ("Stream-Record-Match", bad)], b"4"),
            s.req("POST", j, &[json, ("Producer-Id", "p"), ("Producer-Epoch", bad), ("Producer-Seq", "0")], b"4"),
            s.req("POST", j, &[json, ("Producer-Id", "p"), ("Producer-Epoch", "0"), ("Producer-Seq", bad)], b"4"),
            s.req("PUT", "/ints/ttl", &[("Content-Type", TEXT), ("Stream-TTL", bad)], b""),
            s.req(
                "PUT",
                "/ints/fork",
                &[("Stream-Forked-From", j), ("Stream-Fork-Offset", &offset(2)), ("Stream-Fork-Sub-Offset", bad)],
                b"",
            ),
            s.get(&format!("{j}?offset=-1&max_bytes={in_query}")),
            s.get(&format!("{j}?record={in_query}")),
            s.get(&format!("{j}?tail_records={in_query}")),
            s.get(&format!("{j}?record=0&max_records={in_query}")),
            s.get(&format!("/ints/streams?limit={in_query}")),
            s.req("PUT", &format!("{j}/snapshot?record={in_query}"), &[json], b"{}"),
            s.req("PUT", &format!("{j}/retention?record={in_query}"), &[], b""),
        ];
        for (i, r) in refused.iter().enumerate() {
            assert_eq!(r.status, 400, "case {i} with {bad:?}: {}", r.text());
        }
    }
    // Nothing was written or created by the refusals.
    assert_eq!(s.head(j).expect(200).next_offset(), tail);
    s.head("/ints/ttl").expect(404);
    s.head("/ints/fork").expect(404);
    assert!(!s.head(j).expect(200).has("stream-snapshot-offset"));
}

/// Found by the `request` fuzz target: a refusal that ends the connection
/// (a bad request target, an oversized body) carried its text body even
/// when the request was a HEAD.
#[test]
fn head_refusals_that_end_the_connection_carry_no_body() {
    let s = Server::start_with(&["--max-body-bytes", "1024"]);
    for (request, status) in [
        ("HEAD /v1/stream/a%zz HTTP/1.1\r\n\r\n", 400),
        ("HEAD /v1/stream/x HTTP/1.1\r\nContent-Length: 4096\r\n\r\n", 413),
    ] {
        let mut c = s.connect();
        c.send(request.as_bytes()).unwrap();
        let mut all = Vec::new();
        c.sock.read_to_end(&mut all).unwrap();
        let text = String::from_utf8_lossy(&all);
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no response head: {text:?}"));
        assert!(head.starts_with(&format!("HTTP/1.1 {status} ")), "{text:?}");
        assert!(head.contains("connection: close"), "{text:?}");
        assert_eq!(rest, "", "a body after the head of a HEAD {status}");
    }
}
