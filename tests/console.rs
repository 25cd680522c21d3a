//! The console's server side through the real binary: `/v1/ui` is one
//! self-contained page for anyone the mode admits, with a strict content
//! security policy; `/v1/ui/streams` lists every bucket's streams and needs
//! the operator scope. (The page itself runs in headless Chromium in
//! `scripts/console-test`.)

mod common;

use common::{write_tokens, Server, TempDir};

const OPS: &str = "ops-b3BzLXRva2Vu";
const READER: &str = "reader-cmVhZGVyLXRva2Vu";

#[test]
fn the_page_is_public_and_self_contained_and_its_data_is_the_operators() {
    let dir = TempDir::new("console");
    let file = dir.path().join("tokens");
    write_tokens(&file, &[(OPS, "*", "read,write,admin,operator"), (READER, "*", "read")]);
    let s = Server::start_in(&dir.path().join("data"), 2, &["--tokens", file.to_str().unwrap()]);
    let ops = format!("Bearer {OPS}");
    let as_ops = |method: &str, path: &str, body: &[u8]| {
        s.req(method, path, &[("Authorization", &ops), ("Content-Type", "text/plain")], body)
    };

    let page = s.get("/v1/ui");
    assert_eq!(page.status, 200, "no token needed for the page");
    assert_eq!(page.h("content-type"), "text/html; charset=utf-8");
    let csp = page.h("content-security-policy");
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"), "{csp}");
    let html = page.text();
    assert!(html.contains("<title>sluice console</title>") && html.contains("live=sse"), "the built-in page");
    for external in ["src=\"http", "href=\"http", "src=\"//", "@import"] {
        assert!(!html.contains(external), "an external asset: {external}");
    }
    assert_eq!(s.req("POST", "/v1/ui", &[("Authorization", &ops)], b"").status, 405);
    assert_eq!(s.get("/v1/ui/nothing").status, 401, "unknown paths need a token, as elsewhere");

    as_ops("PUT", "/orders", b"").expect(201);
    as_ops("PUT", "/orders/s1", b"").expect(201);
    as_ops("POST", "/orders/s1", b"12345").expect(204);
    as_ops("PUT", "/v1/stream/a/b", b"").expect(201);
    assert_eq!(s.get("/v1/ui/streams").status, 401);
    let reader = format!("Bearer {READER}");
    assert_eq!(s.req("GET", "/v1/ui/streams", &[("Authorization", &reader)], b"").status, 403);
    let listing = as_ops("GET", "/v1/ui/streams", b"").expect(200).json();
    assert_eq!(listing["bucket_count"], 2);
    let buckets = listing["buckets"].as_array().unwrap();
    assert_eq!(buckets[0]["bucket_id"], "v1-stream", "the built-in bucket first");
    assert_eq!(buckets[0]["streams"][0]["stream_id"], "a/b");
    assert_eq!(buckets[1]["bucket_id"], "orders");
    assert_eq!(buckets[1]["streams"][0]["stream_id"], "s1");
    assert_eq!(buckets[1]["streams"][0]["tail_offset"], 5);
}
