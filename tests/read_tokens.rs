//! Signed read tokens for browsers through the real binary: a client with
//! read on a bucket mints a `?token=` for one stream or the bucket; it
//! reads (catch-up, long-poll, SSE) only there, only until it expires,
//! never writes, fails when tampered with, and never shows in the access log.

mod common;

use common::{write_tokens, Launch, Resp, Server, TempDir};
use std::time::Duration;

const READER: &str = "reader-cmVhZGVyLXRva2Vu";
const WRITER: &str = "writer-d3JpdGVyLXRva2Vu";
const OTHER: &str = "other-b3RoZXItdG9rZW4";

/// A logged 2-shard server with tokens and the access log on.
fn server(dir: &TempDir) -> Server {
    let file = dir.path().join("tokens");
    write_tokens(
        &file,
        &[(READER, "orders", "read"), (WRITER, "orders", "read,write,admin"), (OTHER, "billing", "read")],
    );
    let launch = Launch::logged(
        &dir.path().join("server.log"),
        &["--tokens", file.to_str().unwrap(), "--access-log", "--fsync", "never", "--segment-bytes", "1MiB"],
    );
    Server::launch(&dir.path().join("data"), launch)
}

fn as_(s: &Server, token: &str, method: &str, path: &str, body: &[u8]) -> Resp {
    let auth = format!("Bearer {token}");
    s.req(method, path, &[("Authorization", &auth), ("Content-Type", "text/plain")], body)
}

/// Mints a read token as `token` for `query` (`stream=...` or `bucket=...`).
fn mint(s: &Server, token: &str, query: &str) -> String {
    let r = as_(s, token, "POST", &format!("/v1/tokens?{query}"), b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("cache-control"), Some("no-store"));
    r.json()["token"].as_str().expect("a token").to_string()
}

#[test]
fn a_minted_token_reads_its_stream_over_every_read_mode_and_nothing_else() {
    let dir = TempDir::new("read-tokens");
    let s = server(&dir);
    as_(&s, WRITER, "PUT", "/orders", b"").expect(201);
    as_(&s, WRITER, "PUT", "/orders/s1", b"").expect(201);
    as_(&s, WRITER, "PUT", "/orders/s2", b"").expect(201);
    as_(&s, WRITER, "POST", "/orders/s1", b"hello").expect(204);

    let t = mint(&s, READER, "stream=/orders/s1&ttl=10m");
    assert!(t.starts_with("sr1."), "{t}");
    // Catch-up, long-poll and SSE, with no Authorization header.
    let r = s.get(&format!("/orders/s1?offset=-1&token={t}"));
    assert_eq!((r.status, r.text().as_str()), (200, "hello"));
    let tail = r.next_offset();
    assert_eq!(s.head(&format!("/orders/s1?token={t}")).status, 200);
    let mut poll = s.connect();
    poll.send(&common::build("GET", &format!("/orders/s1?offset={tail}&live=long-poll&token={t}"), &[], b"")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    as_(&s, WRITER, "POST", "/orders/s1", b" world").expect(204);
    let r = poll.read_response(false);
    assert_eq!((r.status, r.text().as_str()), (200, " world"));
    let mut sse = s.connect();
    sse.send(&common::build("GET", &format!("/orders/s1?offset=-1&live=sse&token={t}"), &[], b"")).unwrap();
    let head = String::from_utf8(sse.read_until(b"\r\n\r\n").unwrap()).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let events = String::from_utf8(sse.read_until(b"event: control").unwrap()).unwrap();
    assert!(events.contains("data:hello world"), "{events}");

    // Another stream of the bucket, another bucket, the listing: 403.
    for path in ["/orders/s2?offset=-1&", "/billing/s1?offset=-1&", "/orders/streams?"] {
        let r = s.get(&format!("{path}token={t}"));
        assert_eq!(r.status, 403, "{path}: {}", r.text());
    }
    // Never a write, whatever the method.
    for (method, body) in [("POST", &b"x"[..]), ("PUT", b""), ("DELETE", b"")] {
        let r = s.req(method, &format!("/orders/s1?token={t}"), &[("Content-Type", "text/plain")], body);
        assert_eq!(r.status, 403, "{method}: {}", r.text());
    }
    assert_eq!(s.get("/orders/s1?offset=-1").status, 401, "no token at all");
    assert_eq!(s.get(&format!("/orders/s1?offset=-1&token={t}")).text(), "hello world", "nothing was written");

    // A bucket token reads every stream of its bucket and lists it.
    let b = mint(&s, READER, "bucket=orders");
    assert_eq!(s.get(&format!("/orders/s2?offset=-1&token={b}")).status, 200);
    assert_eq!(s.get(&format!("/orders/streams?token={b}")).status, 200);
    assert_eq!(s.get(&format!("/billing/s1?offset=-1&token={b}")).status, 403);

    // Minting needs read on the scope, and a valid scope and lifetime.
    assert_eq!(as_(&s, OTHER, "POST", "/v1/tokens?stream=/orders/s1", b"").status, 404, "concealed bucket");
    assert_eq!(s.req("POST", "/v1/tokens?bucket=orders", &[], b"").status, 401);
    assert_eq!(s.req("POST", &format!("/v1/tokens?bucket=orders&token={t}"), &[], b"").status, 403);
    for bad in ["", "stream=/orders", "bucket=NO", "bucket=orders&ttl=2h", "bucket=orders&ttl=soon"] {
        assert_eq!(as_(&s, READER, "POST", &format!("/v1/tokens?{bad}"), b"").status, 400, "{bad}");
    }
    assert_eq!(as_(&s, READER, "GET", "/v1/tokens?bucket=orders", b"").status, 405);

    // Tampered: another signature, or claims rewritten to another stream.
    let (claims, _) = t.rsplit_once('.').unwrap();
    let (_, b_tag) = b.rsplit_once('.').unwrap();
    for forged in [format!("{claims}.{b_tag}"), format!("{t}A"), "sr1.e30.e30".to_string()] {
        let r = s.get(&format!("/orders/s1?offset=-1&token={forged}"));
        assert_eq!(r.status, 401, "{forged}: {}", r.text());
        assert!(r.h("www-authenticate").contains("invalid_token"), "{}", r.h("www-authenticate"));
    }

    // Expired.
    let short = mint(&s, READER, "stream=/orders/s1&ttl=2s");
    assert_eq!(s.get(&format!("/orders/s1?offset=-1&token={short}")).status, 200);
    std::thread::sleep(Duration::from_millis(2_100));
    let r = s.get(&format!("/orders/s1?offset=-1&token={short}"));
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.text().contains("expired"), "{}", r.text());

    // The key is 0600 in the data dir, and no token reached the log.
    use std::os::unix::fs::PermissionsExt;
    let key = std::fs::metadata(dir.path().join("data/read-tokens.key")).expect("key file");
    assert_eq!(key.permissions().mode() & 0o777, 0o600);
    let log = s.output();
    assert!(log.contains("token=REDACTED"), "the access log shows the redacted query: {log}");
    for secret in [&t, &b, &short] {
        let (_, mac) = secret.rsplit_once('.').unwrap();
        assert!(!log.contains(mac), "a read token is in the log");
    }
}

#[test]
fn tokens_survive_a_restart_and_die_with_the_key() {
    let dir = TempDir::new("read-tokens-restart");
    let mut s = server(&dir);
    as_(&s, WRITER, "PUT", "/orders", b"").expect(201);
    as_(&s, WRITER, "PUT", "/orders/s1", b"").expect(201);
    let t = mint(&s, READER, "stream=/orders/s1");
    s.restart_after_kill();
    assert_eq!(s.get(&format!("/orders/s1?offset=-1&token={t}")).status, 200, "same key after a restart");
    s.kill();
    std::fs::remove_file(dir.path().join("data/read-tokens.key")).unwrap();
    s.start_again();
    assert_eq!(s.get(&format!("/orders/s1?offset=-1&token={t}")).status, 401, "a new key revokes every token");
}
