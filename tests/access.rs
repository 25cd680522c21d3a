//! Access control through the real binary: every action by every scope on
//! both surfaces (forks included), concealed buckets, CORS origins, SIGHUP
//! reloads of the tokens file, hostile `Authorization` headers, and protected
//! mode against a client in a network namespace the test creates itself.

mod common;

use common::{
    eventually, offset, run_to_exit, set_mode, sha256_hex, write_tokens, Conn, Launch, Resp, Server, TempDir,
};
use std::path::PathBuf;
use std::time::Duration;

const TEXT: &str = "text/plain";

/// Every token the tests use, with the scopes the tokens file gives it.
const ROOT: &str = "root-Qm9vdC10b2tlbi12YWx1ZQ";
const READER: &str = "reader-cmVhZGVyLXRva2Vu";
const WRITER: &str = "writer-d3JpdGVyLXRva2Vu";
const ADMIN: &str = "admin-YWRtaW4tdG9rZW4";
const OPS: &str = "ops-b3BzLXRva2Vu";
const FORKER: &str = "forker-Zm9ya2VyLXRva2Vu";
/// Well-formed, not in the file.
const BOGUS: &str = "bogus-Ym9ndXMtdG9rZW4";

const SCOPES: &[(&str, &str, &str)] = &[
    (ROOT, "*", "read,write,admin,operator"),
    (READER, "orders*", "read"),
    (WRITER, "orders*", "read,write"),
    (WRITER, "v1-stream", "read,write"),
    (ADMIN, "*", "admin"),
    (OPS, "*", "operator"),
    (FORKER, "logs-*", "write"),
    (FORKER, "orders*", "read"),
];

/// A server with the test tokens (its directory holds data and tokens, and
/// outlives it: `let (s, _dir)` drops the directory's handle first).
fn tokens_server(extra: &[&str]) -> (Server, TempDir) {
    let dir = TempDir::new("access");
    let file = dir.path().join("tokens");
    write_tokens(&file, SCOPES);
    let mut args = vec!["--tokens", file.to_str().expect("utf-8 path"), "--fsync", "never"];
    args.extend_from_slice(extra);
    let mut s = Server::start_in(&dir.path().join("data"), 2, &args);
    s.hold(&dir);
    (s, dir)
}

fn bearer(token: &str) -> (&'static str, String) {
    ("Authorization", format!("Bearer {token}"))
}

/// One request as `token` (`None`: no Authorization header).
fn call(s: &Server, token: Option<&str>, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    let auth = token.map(bearer);
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    if let Some((n, v)) = &auth {
        all.push((n, v.as_str()));
    }
    s.req(method, path, &all, body)
}

fn root(s: &Server, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    call(s, Some(ROOT), method, path, headers, body)
}

// ---------------------------------------------------------------- the matrix

/// The scope a request needs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Act {
    Read,
    Write,
    Admin,
    Operator,
    Public,
}

/// What a token holds, per the tokens file: (bucket prefix, actions).
fn grants(token: &str) -> Vec<(&'static str, &'static str)> {
    let prefix = |p: &'static str| p.trim_end_matches('*');
    SCOPES.iter().filter(|(t, _, _)| *t == token).map(|(_, p, a)| (prefix(p), *a)).collect()
}

/// The status the model predicts for `token` doing `act` on `bucket`.
fn predicted(token: Option<&str>, act: Act, bucket: &str, ok: u16) -> u16 {
    if act == Act::Public {
        return ok;
    }
    let Some(token) = token.filter(|t| *t != BOGUS) else { return 401 };
    let g = grants(token);
    let has = |a: &str| g.iter().any(|(p, acts)| bucket.starts_with(p) && acts.split(',').any(|x| x == a));
    let name = match act {
        Act::Read => "read",
        Act::Write => "write",
        Act::Admin => "admin",
        Act::Operator => return if g.iter().any(|(_, a)| a.contains("operator")) { ok } else { 403 },
        Act::Public => unreachable!(),
    };
    let sees = ["read", "write", "admin"].iter().any(|a| has(a));
    if !sees {
        404
    } else if !has(name) {
        403
    } else {
        ok
    }
}

/// Where a case runs: a bucket with a stream `s` ("hello" then "world", a
/// snapshot after "hello") and an empty bucket `{bucket}-e`, or a
/// base-protocol stream.
struct Place {
    bucket: String,
    stream: String,
}

/// One request of the matrix: what it needs, its success status, and how
/// to build it for a place.
struct Case {
    name: &'static str,
    act: Act,
    builtin: bool,
    ok: u16,
    sse: bool,
    build: fn(&Place) -> Request,
}

/// Method, path, headers and body.
type Request = (&'static str, String, Vec<(&'static str, String)>, Vec<u8>);

fn case(name: &'static str, act: Act, ok: u16, build: fn(&Place) -> Request) -> Case {
    Case { name, act, builtin: false, ok, sse: false, build }
}

/// A base-protocol (`/v1/stream/`) case.
fn v1(mut c: Case) -> Case {
    c.builtin = true;
    c
}

/// A case answered as an SSE stream.
fn sse(mut c: Case) -> Case {
    c.sse = true;
    c
}

fn cases() -> Vec<Case> {
    vec![
        case("bucket get", Act::Read, 200, |p| ("GET", format!("/{}", p.bucket), vec![], vec![])),
        case("bucket head", Act::Read, 200, |p| ("HEAD", format!("/{}", p.bucket), vec![], vec![])),
        case("bucket listing", Act::Read, 200, |p| ("GET", format!("/{}/streams", p.bucket), vec![], vec![])),
        case("bucket create", Act::Admin, 201, |p| ("PUT", format!("/{}-new", p.bucket), vec![], vec![])),
        case("bucket delete", Act::Admin, 204, |p| ("DELETE", format!("/{}-e", p.bucket), vec![], vec![])),
        case("stream create", Act::Write, 201, |p| {
            ("PUT", format!("/{}/new", p.bucket), vec![("Content-Type", TEXT.to_string())], vec![])
        }),
        case("append", Act::Write, 204, |p| {
            ("POST", p.stream.clone(), vec![("Content-Type", TEXT.to_string())], b"x".to_vec())
        }),
        case("close", Act::Write, 204, |p| ("POST", p.stream.clone(), vec![("Stream-Closed", "true".into())], vec![])),
        case("read", Act::Read, 200, |p| ("GET", format!("{}?offset=-1", p.stream), vec![], vec![])),
        case("long-poll", Act::Read, 200, |p| {
            ("GET", format!("{}?offset=-1&live=long-poll", p.stream), vec![], vec![])
        }),
        case("metadata", Act::Read, 200, |p| ("HEAD", p.stream.clone(), vec![], vec![])),
        case("attrs get", Act::Read, 200, |p| ("GET", format!("{}/attrs", p.stream), vec![], vec![])),
        case("attrs put", Act::Write, 204, |p| {
            let json = vec![("Content-Type", "application/json".to_string())];
            ("PUT", format!("{}/attrs", p.stream), json, br#"{"title":"t"}"#.to_vec())
        }),
        case("snapshot get", Act::Read, 307, |p| ("GET", format!("{}/snapshot", p.stream), vec![], vec![])),
        case("snapshot read", Act::Read, 200, |p| {
            ("GET", format!("{}/snapshot/{}", p.stream, offset(5)), vec![], vec![])
        }),
        case("snapshot publish", Act::Write, 204, |p| {
            let path = format!("{}/snapshot/{}", p.stream, offset(10));
            ("PUT", path, vec![("Content-Type", TEXT.to_string())], b"state-2".to_vec())
        }),
        // Admitted, the latest snapshot is refused by the store: it backs /bootstrap.
        case("snapshot delete", Act::Write, 409, |p| {
            ("DELETE", format!("{}/snapshot/{}", p.stream, offset(5)), vec![], vec![])
        }),
        case("retention", Act::Write, 204, |p| {
            ("PUT", format!("{}/retention/{}", p.stream, offset(5)), vec![], vec![])
        }),
        case("bootstrap", Act::Read, 200, |p| ("GET", format!("{}/bootstrap", p.stream), vec![], vec![])),
        case("append-batch", Act::Write, 200, |p| {
            let body = [&2u32.to_be_bytes()[..], b"ab"].concat();
            ("POST", format!("{}/append-batch", p.stream), vec![("Content-Type", TEXT.to_string())], body)
        }),
        case("stream delete", Act::Admin, 204, |p| ("DELETE", p.stream.clone(), vec![], vec![])),
        case("metrics", Act::Operator, 200, |_| ("GET", "/v1/metrics".into(), vec![], vec![])),
        case("healthz", Act::Public, 200, |_| ("GET", "/v1/healthz".into(), vec![], vec![])),
        sse(case("sse", Act::Read, 200, |p| ("GET", format!("{}?offset=-1&live=sse", p.stream), vec![], vec![]))),
        v1(case("v1 create", Act::Write, 201, |p| ("PUT", format!("{}-new", p.stream), vec![], vec![]))),
        v1(case("v1 append", Act::Write, 204, |p| {
            ("POST", p.stream.clone(), vec![("Content-Type", TEXT.to_string())], b"x".to_vec())
        })),
        v1(case("v1 read", Act::Read, 200, |p| ("GET", format!("{}?offset=-1", p.stream), vec![], vec![]))),
        v1(case("v1 metadata", Act::Read, 200, |p| ("HEAD", p.stream.clone(), vec![], vec![]))),
        v1(case("v1 delete", Act::Admin, 204, |p| ("DELETE", p.stream.clone(), vec![], vec![]))),
        v1(sse(case("v1 sse", Act::Read, 200, |p| {
            ("GET", format!("{}?offset=-1&live=sse", p.stream), vec![], vec![])
        }))),
        // Subscriptions cover the base surface: managing them is admin there,
        // claiming a pull-wake a write; callbacks, acks and releases carry the
        // wake's own token (here none: 400 or 401 after admission), the JWK Set is public.
        v1(case("subscription create", Act::Admin, 201, |p| {
            let id = p.stream.trim_start_matches("/v1/stream/");
            let body = format!(r#"{{"type":"pull-wake","streams":["{id}"],"wake_stream":"w"}}"#);
            ("PUT", format!("/v1/stream/__ds/subscriptions/s-{id}"), vec![], body.into_bytes())
        })),
        v1(case("subscription delete", Act::Admin, 204, |_| {
            ("DELETE", "/v1/stream/__ds/subscriptions/none".into(), vec![], vec![])
        })),
        v1(case("subscription membership", Act::Admin, 400, |_| {
            ("POST", "/v1/stream/__ds/subscriptions/none/streams".into(), vec![], b"[]".to_vec())
        })),
        v1(case("pull-wake claim", Act::Write, 400, |_| {
            ("POST", "/v1/stream/__ds/subscriptions/none/claim".into(), vec![], b"{}".to_vec())
        })),
        v1(case("pull-wake ack", Act::Public, 400, |_| {
            ("POST", "/v1/stream/__ds/subscriptions/none/ack".into(), vec![], b"[]".to_vec())
        })),
        v1(case("webhook callback", Act::Public, 400, |_| {
            ("POST", "/v1/stream/__ds/subscriptions/none/callback".into(), vec![], b"[]".to_vec())
        })),
        v1(case("jwks", Act::Public, 200, |_| ("GET", "/v1/stream/__ds/jwks.json".into(), vec![], vec![]))),
    ]
}

/// Sets up a fresh place for case `n` (as root).
fn place(s: &Server, case: &Case, n: usize, visible: bool) -> Place {
    if case.builtin {
        let stream = format!("/v1/stream/m{n}");
        root(s, "PUT", &stream, &[("Content-Type", TEXT)], b"hello").expect(201);
        return Place { bucket: "v1-stream".into(), stream };
    }
    let bucket = format!("{}-{n}", if visible { "orders" } else { "secret" });
    root(s, "PUT", &format!("/{bucket}"), &[], b"").expect(201);
    root(s, "PUT", &format!("/{bucket}-e"), &[], b"").expect(201);
    let stream = format!("/{bucket}/s");
    root(s, "PUT", &stream, &[("Content-Type", TEXT)], b"hello").expect(201);
    root(s, "POST", &stream, &[("Content-Type", TEXT)], b"world").expect(204);
    root(s, "PUT", &format!("{stream}/snapshot/{}", offset(5)), &[("Content-Type", TEXT)], b"state").expect(204);
    Place { bucket, stream }
}

/// Everything a request could have changed at a place, as root sees it.
fn state(s: &Server, p: &Place) -> Vec<String> {
    let show = |r: Resp| {
        let keep = ["stream-next-offset", "stream-closed", "stream-snapshot-offset", "stream-snapshot-digest"];
        let headers: Vec<String> =
            r.headers.iter().filter(|(n, _)| keep.contains(&n.as_str())).map(|(n, v)| format!("{n}={v}")).collect();
        format!("{} {:?} {}", r.status, headers, r.text())
    };
    let mut out = vec![
        show(root(s, "HEAD", &p.stream, &[], b"")),
        show(root(s, "GET", &format!("{}?offset=-1", p.stream), &[], b"")),
        show(root(s, "HEAD", &format!("{}-new", p.stream), &[], b"")),
    ];
    if p.bucket != "v1-stream" {
        for path in [format!("/{}", p.bucket), format!("/{}-e", p.bucket), format!("/{}-new", p.bucket)] {
            out.push(show(root(s, "HEAD", &path, &[], b"")));
        }
        out.push(show(root(s, "GET", &format!("/{}/streams", p.bucket), &[], b"")));
        out.push(show(root(s, "GET", &format!("{}/attrs", p.stream), &[], b"")));
        out.push(show(root(s, "HEAD", &format!("/{}/new", p.bucket), &[], b"")));
    }
    out
}

/// Sends a case's request as `token`: the status, and the body unless the
/// response has none to compare (SSE, HEAD).
fn run_case(s: &Server, c: &Case, p: &Place, token: Option<&str>) -> (u16, Option<String>) {
    let (method, path, headers, body) = (c.build)(p);
    let mut hs: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
    let auth = token.map(bearer);
    if let Some((n, v)) = &auth {
        hs.push((n, v.as_str()));
    }
    if c.sse {
        // An SSE response stays open: read its status line only.
        let mut conn = s.connect();
        conn.send(&common::build(method, &path, &hs, &body)).expect("send");
        let head = conn.read_until(b"\r\n\r\n").expect("response head");
        let status = String::from_utf8_lossy(&head[9..12]).parse().expect("status");
        return (status, None);
    }
    let r = s.req(method, &path, &hs, &body);
    (r.status, Some(r.text()).filter(|_| method != "HEAD"))
}

#[test]
fn every_action_by_every_scope_on_both_surfaces() {
    let (s, _dir) = tokens_server(&[]);
    let tokens = [None, Some(BOGUS), Some(READER), Some(WRITER), Some(ADMIN), Some(OPS), Some(FORKER), Some(ROOT)];
    let mut n = 0;
    let mut checked = 0;
    for c in cases() {
        for visible in [true, false] {
            if c.builtin && !visible {
                continue;
            }
            for token in tokens {
                n += 1;
                let p = place(&s, &c, n, visible);
                let want = predicted(token, c.act, &p.bucket, c.ok);
                let before = state(&s, &p);
                let (status, body) = run_case(&s, &c, &p, token);
                let who = token.unwrap_or("(no token)");
                assert_eq!(status, want, "{} on {} as {who}: {body:?}", c.name, p.bucket);
                if status != c.ok {
                    assert_eq!(state(&s, &p), before, "refused {} as {who} changed something", c.name);
                }
                if let (404, Some(body)) = (want, body) {
                    let missing = if c.builtin { "stream not found\n" } else { "bucket not found\n" };
                    assert_eq!(body, missing, "{} as {who}: a concealed bucket reads as missing", c.name);
                }
                checked += 1;
            }
        }
    }
    assert!(checked > 300, "only {checked} combinations ran");
}

#[test]
fn concealed_buckets_answer_exactly_like_missing_ones() {
    let (s, _dir) = tokens_server(&[]);
    root(&s, "PUT", "/secret-real", &[], b"").expect(201);
    root(&s, "PUT", "/secret-real/s", &[("Content-Type", TEXT)], b"x").expect(201);
    root(&s, "PUT", "/v1/stream/hidden", &[("Content-Type", TEXT)], b"x").expect(201);
    for (method, real, missing) in [
        ("GET", "/secret-real", "/secret-none"),
        ("HEAD", "/secret-real", "/secret-none"),
        ("GET", "/secret-real/streams", "/secret-none/streams"),
        ("GET", "/secret-real/s", "/secret-none/s"),
        ("POST", "/secret-real/s", "/secret-none/s"),
        ("GET", "/secret-real/s/attrs", "/secret-none/s/attrs"),
        ("GET", "/secret-real/s/bootstrap", "/secret-none/s/bootstrap"),
        ("GET", "/v1/stream/hidden", "/v1/stream/none"),
        ("HEAD", "/v1/stream/hidden", "/v1/stream/none"),
    ] {
        let hidden = call(&s, Some(READER), method, real, &[("Content-Type", TEXT)], b"");
        let absent = root(&s, method, missing, &[("Content-Type", TEXT)], b"");
        assert_eq!(hidden.status, 404, "{method} {real}");
        assert_eq!((hidden.status, hidden.text()), (absent.status, absent.text()), "{method} {real}");
    }
}

// ---------------------------------------------------------------- forks

#[test]
fn forks_need_read_on_the_source_and_write_on_the_target() {
    let (s, _dir) = tokens_server(&[]);
    for b in ["orders-a", "logs-a", "secret-a"] {
        root(&s, "PUT", &format!("/{b}"), &[], b"").expect(201);
        root(&s, "PUT", &format!("/{b}/src"), &[("Content-Type", TEXT)], b"history").expect(201);
    }
    root(&s, "PUT", "/v1/stream/src", &[("Content-Type", TEXT)], b"history").expect(201);
    let fork = |token: &str, target: &str, source: &str| {
        call(&s, Some(token), "PUT", target, &[("Content-Type", TEXT), ("Stream-Forked-From", source)], b"")
    };
    // Write on the target and read on the source: forked, with the history.
    fork(FORKER, "/logs-a/f1", "/orders-a/src").expect(201);
    assert_eq!(root(&s, "GET", "/logs-a/f1?offset=-1", &[], b"").expect(200).body, b"history");
    fork(WRITER, "/v1/stream/f1", "/v1/stream/src").expect(201);
    fork(WRITER, "/orders-a/f2", "/v1/stream/src").expect(201);
    // A source bucket the token sees without read: 403.
    let r = fork(FORKER, "/logs-a/f2", "/logs-a/src").expect(403);
    assert!(r.h("www-authenticate").contains("insufficient_scope"), "{r:?}");
    // A source bucket the token cannot see: the answer for a missing source.
    let concealed = fork(FORKER, "/logs-a/f3", "/secret-a/src").expect(404).text();
    let missing =
        root(&s, "PUT", "/logs-a/f3", &[("Content-Type", TEXT), ("Stream-Forked-From", "/orders-a/none")], b"");
    assert_eq!((404, concealed), (missing.status, missing.text()));
    fork(FORKER, "/logs-a/f4", "/v1/stream/src").expect(404);
    // No write on the target: 403, or 404 when the target bucket is hidden.
    fork(READER, "/orders-a/f5", "/orders-a/src").expect(403);
    fork(FORKER, "/secret-a/f6", "/orders-a/src").expect(404);
    // None of the refused forks exists.
    for p in ["/logs-a/f2", "/logs-a/f3", "/logs-a/f4", "/orders-a/f5", "/secret-a/f6"] {
        root(&s, "HEAD", p, &[], b"").expect(404);
    }
}

// ---------------------------------------------------------------- CORS

#[test]
fn cors_with_tokens_is_closed_unless_origins_are_listed() {
    let (s, _dir) = tokens_server(&[]);
    let origin = ("Origin", "https://app.example");
    let r = call(&s, Some(ROOT), "GET", "/v1/healthz", &[origin], b"").expect(200);
    assert!(!r.has("access-control-allow-origin"), "{r:?}");
    let pre = s.req("OPTIONS", "/v1/stream/x", &[origin, ("Access-Control-Request-Method", "POST")], b"");
    assert_eq!(pre.status, 403, "{pre:?}");
    assert!(!pre.has("access-control-allow-origin"));
    drop(s);

    let (s, _dir) = tokens_server(&["--cors-origins", "https://app.example,http://localhost:3000"]);
    // A listed origin: echoed, even on a 401 (so the page can read why).
    let r = call(&s, None, "GET", "/v1/stream/x", &[origin], b"").expect(401);
    assert_eq!(r.h("access-control-allow-origin"), "https://app.example");
    assert_eq!(r.h("vary"), "origin");
    assert!(r.h("access-control-expose-headers").contains("stream-next-offset"));
    // Preflights carry no token and answer only for listed origins.
    let pre = s.req("OPTIONS", "/orders-x/s", &[origin, ("Access-Control-Request-Headers", "authorization")], b"");
    assert_eq!(pre.status, 204, "{pre:?}");
    assert_eq!(pre.h("access-control-allow-origin"), "https://app.example");
    assert!(pre.h("access-control-allow-headers").contains("authorization"));
    let other = ("Origin", "https://evil.example");
    let pre = s.req("OPTIONS", "/orders-x/s", &[other], b"");
    assert_eq!(pre.status, 403);
    assert!(!pre.has("access-control-allow-origin") && !pre.has("access-control-allow-headers"));
    let r = call(&s, Some(ROOT), "GET", "/v1/healthz", &[other], b"").expect(200);
    assert!(!r.has("access-control-allow-origin"));
    assert_eq!(r.h("vary"), "origin");
}

#[test]
fn cors_without_tokens_stays_open_to_any_origin() {
    let s = Server::start();
    let r = s.req("GET", "/v1/healthz", &[("Origin", "https://any.example")], b"").expect(200);
    assert_eq!(r.h("access-control-allow-origin"), "*");
    let pre = s.req("OPTIONS", "/v1/stream/x", &[("Origin", "https://any.example")], b"").expect(204);
    assert_eq!(pre.h("access-control-allow-origin"), "*");
    assert!(pre.h("access-control-allow-headers").contains("if-none-match"));
    drop(s);
    let s = Server::start_with(&["--cors-origins", "https://only.example"]);
    let r = s.req("GET", "/v1/healthz", &[("Origin", "https://any.example")], b"").expect(200);
    assert!(!r.has("access-control-allow-origin"));
}

/// A page on another origin cannot write through the user's browser: a
/// state-changing request carrying a foreign `Origin` (or `Sec-Fetch-Site:
/// cross-site`) is refused before it has any effect, whatever its content
/// type, unless the origin is listed, `--cors-origins '*'` was given, or it
/// carries a valid token. Reads stay open as CORS says.
#[test]
fn cross_origin_writes_are_refused_unless_allowed() {
    let s = Server::start();
    // The test client sends `Host: 127.0.0.1`: a page of that origin is sluice's own.
    let host = "http://127.0.0.1";
    let evil = ("Origin", "http://localhost:5280");
    s.put("/v1/stream/csrf", TEXT, b"mine;").expect(201);
    for (method, path) in [("POST", "/v1/stream/csrf"), ("PUT", "/v1/stream/csrf2"), ("DELETE", "/v1/stream/csrf")] {
        let r = s.req(method, path, &[evil, ("Content-Type", TEXT)], b"theirs;").expect(403);
        assert!(r.text().contains("cross-origin write refused"), "{}", r.text());
        let r = s.req(method, path, &[("Sec-Fetch-Site", "cross-site"), ("Content-Type", TEXT)], b"theirs;");
        assert_eq!(r.status, 403, "{method} {path} with Sec-Fetch-Site: cross-site");
    }
    s.head("/v1/stream/csrf2").expect(404);
    // A no-cors form post (text/plain) changes nothing either; reads stay open.
    s.req("POST", "/v1/stream/csrf", &[evil, ("Content-Type", "text/plain")], b"x").expect(403);
    let r = s.req("GET", "/v1/stream/csrf?offset=-1", &[evil], b"").expect(200);
    assert_eq!((r.body.as_slice(), r.h("access-control-allow-origin")), (&b"mine;"[..], "*"));
    // Its own origin, or no browser marks at all: served.
    s.req("POST", "/v1/stream/csrf", &[("Origin", host), ("Content-Type", TEXT)], b"a;").expect(204);
    s.post("/v1/stream/csrf", TEXT, b"b;").expect(204);
    assert_eq!(s.get("/v1/stream/csrf?offset=-1").expect(200).body, b"mine;a;b;");
    drop(s);

    let s = Server::start_with(&["--cors-origins", "http://127.0.0.1:5280"]);
    s.put("/v1/stream/csrf", TEXT, b"").expect(201);
    s.req("POST", "/v1/stream/csrf", &[evil, ("Content-Type", TEXT)], b"no;").expect(403);
    let listed = ("Origin", "http://127.0.0.1:5280");
    s.req("POST", "/v1/stream/csrf", &[listed, ("Content-Type", TEXT)], b"yes;").expect(204);
    assert_eq!(s.get("/v1/stream/csrf?offset=-1").expect(200).body, b"yes;");
    drop(s);

    let s = Server::start_with(&["--cors-origins", "*"]);
    s.put("/v1/stream/csrf", TEXT, b"").expect(201);
    s.req("POST", "/v1/stream/csrf", &[evil, ("Content-Type", TEXT)], b"opted in;").expect(204);
    drop(s);

    // With tokens and no --cors-origins: a valid token lets a write
    // through, none or a bad one does not.
    let (s, _dir) = tokens_server(&[]);
    root(&s, "PUT", "/v1/stream/csrf", &[("Content-Type", TEXT)], b"").expect(201);
    call(&s, None, "POST", "/v1/stream/csrf", &[evil, ("Content-Type", TEXT)], b"x").expect(403);
    call(&s, Some("wrong-token"), "POST", "/v1/stream/csrf", &[evil, ("Content-Type", TEXT)], b"x").expect(403);
    root(&s, "POST", "/v1/stream/csrf", &[evil, ("Content-Type", TEXT)], b"tok;").expect(204);
    assert_eq!(root(&s, "GET", "/v1/stream/csrf?offset=-1", &[], b"").expect(200).body, b"tok;");
}

#[test]
fn unauthorized_has_its_reason_phrase() {
    let (s, _dir) = tokens_server(&[]);
    let r = s.get("/v1/stream/x");
    assert_eq!((r.status, r.reason.as_str()), (401, "Unauthorized"));
}

// ---------------------------------------------------------------- hostile Authorization

#[test]
fn hostile_authorization_headers() {
    let (s, _dir) = tokens_server(&["--max-head-bytes", "16KiB"]);
    root(&s, "PUT", "/v1/stream/h", &[("Content-Type", TEXT)], b"x").expect(201);
    let get = |headers: &[(&str, &str)]| s.req("GET", "/v1/stream/h?offset=-1", headers, b"");
    let challenge = |r: &Resp| r.h("www-authenticate").to_string();
    // Not Bearer.
    let r = get(&[("Authorization", "Basic cm9vdDpyb290")]).expect(401);
    assert!(challenge(&r).starts_with("Bearer realm=\"sluice\""));
    // Repeated, even with the same good token.
    let (n, v) = bearer(ROOT);
    let r = get(&[(n, &v), (n, &v)]).expect(400);
    assert!(r.text().contains("more than one Authorization"));
    // Non-ASCII (valid UTF-8), and bytes that are not UTF-8 at all.
    get(&[("Authorization", "Bearer tökén")]).expect(401);
    let mut raw = b"GET /v1/stream/h HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \xff\xfe\r\n\r\n".to_vec();
    let mut c = s.connect();
    c.send(&raw).expect("send");
    assert_eq!(c.read_response(false).status, 400);
    // Oversized: past the token limit, then past the head limit.
    let long = format!("Bearer {}", "a".repeat(5000));
    let r = get(&[("Authorization", &long)]).expect(401);
    assert!(challenge(&r).contains("invalid_token"));
    assert!(!r.text().contains("aaaa"));
    let huge = format!("Bearer {}", "a".repeat(20_000));
    get(&[("Authorization", &huge)]).expect(431);
    // Empty, and a scheme with no token.
    get(&[("Authorization", "")]).expect(401);
    get(&[("Authorization", "Bearer")]).expect(401);
    // A refused request's body is never read as the next request.
    raw = common::build("PUT", "/v1/stream/smuggled", &[("Content-Type", TEXT), (n, &v)], b"");
    let mut c = s.connect();
    c.send(&common::build("POST", "/v1/stream/h", &[("Content-Type", TEXT)], &raw)).expect("send");
    assert_eq!(c.read_response(false).status, 401);
    assert!(c.read_to_eof().is_ok_and(|rest| rest.is_empty()), "the connection closes after a refused body");
    root(&s, "HEAD", "/v1/stream/smuggled", &[], b"").expect(404);
    // A refusal without a body keeps the connection.
    let mut c = s.connect();
    assert_eq!(c.request("GET", "/v1/stream/h", &[], b"").status, 401);
    assert_eq!(c.request("GET", "/v1/stream/h?offset=-1", &[(n, &v)], b"").status, 200);
    // Still serving, the stream untouched.
    assert_eq!(root(&s, "GET", "/v1/stream/h?offset=-1", &[], b"").expect(200).body, b"x");
}

// ---------------------------------------------------------------- SIGHUP reload

#[test]
fn sighup_reloads_tokens_and_a_bad_file_keeps_the_old_ones() {
    let dir = TempDir::new("reload");
    let file = dir.path().join("tokens");
    let (first, second) = ("first-Zmlyc3QtdG9rZW4", "second-c2Vjb25kLXRva2Vu");
    write_tokens(&file, &[(first, "*", "read,write")]);
    let launch = Launch::logged(&dir.path().join("log"), &["--tokens", file.to_str().expect("utf-8"), "--access-log"]);
    let s = Server::launch(&dir.path().join("data"), launch);
    let status = |token| call(&s, Some(token), "HEAD", "/v1/stream/none", &[], b"").status;
    assert_eq!(status(first), 404);
    assert_eq!(status(second), 401);

    // Rotation: the new token in, the old one out.
    write_tokens(&file, &[(second, "*", "read")]);
    s.signal(libc::SIGHUP);
    eventually("the second token works", || status(second) == 404);
    assert_eq!(status(first), 401);
    assert!(s.output().contains("tokens file reloaded"), "{}", s.output());

    // A bad file, then a missing one: refused with one line each; the
    // second token stays in force.
    std::fs::write(&file, format!("{}  *  read\nnot-a-hash * read\n", sha256_hex(first))).expect("write");
    s.signal(libc::SIGHUP);
    eventually("the bad file is refused", || s.output().matches("tokens file refused").count() == 1);
    let log = s.output();
    assert!(log.contains("line 2"), "{log}");
    std::fs::remove_file(&file).expect("remove");
    s.signal(libc::SIGHUP);
    eventually("the missing file is refused", || s.output().matches("tokens file refused").count() == 2);
    assert_eq!(status(second), 404);
    assert_eq!(status(first), 401);
    // Tokens never reach the log.
    let log = s.output();
    for secret in [first, second] {
        assert!(!log.contains(secret), "token in the log: {log}");
    }
    assert!(log.contains("mode=\"tokens\"") || log.contains("mode=tokens"), "{log}");
}

#[test]
fn bad_access_configuration_refuses_to_start() {
    let dir = TempDir::new("badcfg");
    let file = dir.path().join("tokens");
    std::fs::write(&file, "0123 * read\n").expect("write");
    set_mode(&file, 0o600);
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf-8");
    let tokens = file.to_str().expect("utf-8");
    let (status, err) =
        common::run_to_exit(&["serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--tokens", tokens]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("refused to start") && err.contains("line 1"), "{err}");
    let missing = dir.path().join("none");
    let (status, err) =
        common::run_to_exit(&["serve", "--data-dir", data, "--tokens", missing.to_str().expect("utf-8")]);
    assert_eq!(status.code(), Some(1), "{err}");
    let (status, err) = common::run_to_exit(&["serve", "--data-dir", data, "--tokens", tokens, "--open"]);
    assert_eq!(status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// A tokens file others could write is refused (whoever writes it grants
/// themselves access); one others can read, or an empty one, starts with a
/// warning.
#[test]
fn tokens_file_permissions_and_emptiness() {
    let dir = TempDir::new("tokperm");
    let file = dir.path().join("tokens");
    write_tokens(&file, SCOPES);
    let data = dir.path().join("data");
    let (data, tokens) = (data.to_str().expect("utf-8"), file.to_str().expect("utf-8"));
    for mode in [0o620, 0o602, 0o666] {
        set_mode(&file, mode);
        let (status, err) = common::run_to_exit(&["serve", "--data-dir", data, "--tokens", tokens]);
        assert_eq!(status.code(), Some(1), "{mode:o}: {err}");
        assert!(err.contains("writable by group or others") && err.contains("chmod 600"), "{err}");
    }
    set_mode(&file, 0o644);
    let s = Server::start_logged(&["--tokens", tokens]);
    assert!(s.output().contains("tokens file is readable by group or others"), "{}", s.output());
    drop(s);
    std::fs::write(&file, "# nobody yet\n").expect("write");
    set_mode(&file, 0o600);
    let s = Server::start_logged(&["--tokens", tokens]);
    assert!(s.output().contains("tokens file holds no tokens"), "{}", s.output());
    assert!(!s.output().contains("readable by group"), "{}", s.output());
}

// ---------------------------------------------------------------- protected mode

#[test]
fn protected_mode_serves_loopback_and_says_so() {
    let s = Server::start_logged(&[]);
    s.put("/v1/stream/p", TEXT, b"x").expect(201);
    assert!(s.output().contains("mode=\"protected\"") || s.output().contains("mode=protected"), "{}", s.output());
}

#[test]
fn listening_off_loopback_needs_tokens_or_open() {
    // As the container image would start without SLUICE_TOKENS or SLUICE_OPEN.
    let dir = TempDir::new("exposed");
    let data = dir.path().join("data");
    let (status, err) = run_to_exit(&["serve", "--listen", "0.0.0.0:4437", "--data-dir", data.to_str().unwrap()]);
    assert_eq!((status.code(), err.lines().count()), (Some(2), 1), "{err}");
    assert!(
        err.starts_with("sluice: --listen 0.0.0.0:4437 is not loopback, but without --tokens only loopback clients are served: start with --tokens FILE (or --open"),
        "{err}"
    );
    assert!(!data.exists(), "nothing was created");
    let (_, err) =
        run_to_exit(&["serve", "--listen", "[::]:4437", "--open=false", "--data-dir", data.to_str().unwrap()]);
    assert!(err.contains("is not loopback"), "{err}");
}

/// A network namespace joined to the host by a veth pair, on a /30 from
/// the benchmark range 198.18.0.0/15 (never a real network). Removed on drop.
struct Netns {
    name: String,
    host_if: String,
    host_ip: std::net::Ipv4Addr,
}

fn ip(args: &[&str]) {
    let out = std::process::Command::new("ip").args(args).output().expect("run ip");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

impl Netns {
    fn create() -> Netns {
        let pid = std::process::id();
        let name = format!("sluice-it-{pid}");
        let (host_if, ns_if) = (format!("slh{}", pid % 1_000_000), format!("sln{}", pid % 1_000_000));
        // 198.18.0.0/15 holds 32768 /30s; pick one by pid.
        let base = u32::from(std::net::Ipv4Addr::new(198, 18, 0, 0)) + (pid % 32768) * 4;
        let (host_ip, ns_ip) = (std::net::Ipv4Addr::from(base + 1), std::net::Ipv4Addr::from(base + 2));
        ip(&["netns", "add", &name]);
        let ns = Netns { name, host_if, host_ip };
        ip(&["link", "add", &ns.host_if, "type", "veth", "peer", "name", &ns_if]);
        ip(&["link", "set", &ns_if, "netns", &ns.name]);
        ip(&["addr", "add", &format!("{host_ip}/30"), "dev", &ns.host_if]);
        ip(&["link", "set", &ns.host_if, "up"]);
        ip(&["-n", &ns.name, "addr", "add", &format!("{ns_ip}/30"), "dev", &ns_if]);
        ip(&["-n", &ns.name, "link", "set", &ns_if, "up"]);
        ns
    }

    /// Runs `f` on a thread that has joined the namespace.
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = PathBuf::from("/run/netns").join(&self.name);
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let ns = std::fs::File::open(&path).expect("open the netns");
                    // SAFETY: setns(2) on a file we hold open; it moves only this thread.
                    let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&ns), libc::CLONE_NEWNET) };
                    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                    f()
                })
                .join()
                .expect("netns thread")
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["link", "del", &self.host_if]).output();
        let _ = std::process::Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

/// A request from inside the namespace to `host:port`.
fn from_netns(ns: &Netns, port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Resp {
    let addr = std::net::SocketAddr::from((ns.host_ip, port));
    ns.run(|| {
        let sock = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect from netns");
        sock.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        Conn::from_stream(sock).request(method, path, headers, b"")
    })
}

fn launch_on(ip: std::net::IpAddr, extra: &[&str]) -> (Server, TempDir) {
    let dir = TempDir::new("netns");
    let mut launch = Launch::quick(2, extra);
    launch.listen_ip = ip;
    let mut s = Server::launch(&dir.path().join("data"), launch);
    s.hold(&dir);
    (s, dir)
}

#[test]
#[ignore = "needs root and iproute2 (creates a network namespace); scripts/test runs it as root"]
fn protected_mode_refuses_a_client_off_loopback() {
    let ns = Netns::create();
    let any = std::net::IpAddr::from([0, 0, 0, 0]);

    // Protected (the default) serves loopback only: listening elsewhere is refused at start.
    let dir = TempDir::new("netns-protected");
    let mut launch = Launch::quick(2, &[]);
    launch.listen_ip = any;
    let (status, out) = Server::try_launch(&dir.path().join("data"), launch).err().expect("refused");
    assert_eq!(status.code(), Some(2), "{out}");
    assert!(out.contains("is not loopback, but without --tokens only loopback clients are served"), "{out}");

    // Tokens: the namespace needs a token like anyone else.
    let dir = TempDir::new("netns-tokens");
    let file = dir.path().join("tokens");
    write_tokens(&file, SCOPES);
    let (s, _d) = launch_on(any, &["--tokens", file.to_str().expect("utf-8")]);
    root(&s, "PUT", "/v1/stream/p", &[("Content-Type", TEXT)], b"x").expect(201);
    let path = "/v1/stream/p?offset=-1";
    assert_eq!(from_netns(&ns, s.addr.port(), "GET", path, &[]).status, 401);
    let (n, v) = bearer(WRITER);
    let r = from_netns(&ns, s.addr.port(), "GET", path, &[(n, &v)]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"x"[..]));
    drop(s);

    // --open, listening on the veth address only: the namespace is served.
    let (s, _d) = launch_on(ns.host_ip.into(), &["--open"]);
    let r = s.put("/v1/stream/o", TEXT, b"y");
    assert_eq!(r.status, 201, "{r:?}");
    let r = from_netns(&ns, s.addr.port(), "GET", "/v1/stream/o?offset=-1", &[]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"y"[..]));
}
