//! Subscriptions (PROTOCOL.md sections 6-7) through the real binary: the
//! reserved `__ds` prefix, create/confirm/conflict, membership and glob
//! backfill, Ed25519-signed webhooks verified against the served JWK Set
//! by a real HTTP receiver in this process (answering, answering 500,
//! slow, down), the retry schedule across a kill -9, and pull-wake leases
//! and fencing across a kill -9.

mod common;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use common::{eventually, Server};
use ed25519_dalek::{Signature, Verifier, VerifyingKey};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const JSON: &str = "application/json";

/// How the receiver answers.
#[derive(Clone)]
enum Answer {
    /// 200 with this JSON body.
    Ok(Value),
    /// This status, `n` more times, then `then`.
    Fail(u16, usize, Box<Answer>),
    /// Waits, then answers.
    Slow(Duration, Box<Answer>),
}

/// One notification received.
#[derive(Clone, Debug)]
struct Hit {
    at: Instant,
    signature: String,
    body: Vec<u8>,
}

impl Hit {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// A real HTTP/1.1 webhook receiver on a std TcpListener thread.
struct Receiver {
    url: String,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Receiver {
    fn start(answer: Answer) -> Receiver {
        Receiver::on(TcpListener::bind("127.0.0.1:0").unwrap(), answer)
    }

    fn on(listener: TcpListener, answer: Answer) -> Receiver {
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let hits = Arc::new(Mutex::new(Vec::new()));
        let (seen, answer) = (hits.clone(), Arc::new(Mutex::new(answer)));
        std::thread::spawn(move || {
            for sock in listener.incoming() {
                let Ok(sock) = sock else { continue };
                let (seen, answer) = (seen.clone(), answer.clone());
                std::thread::spawn(move || serve(sock, &seen, &answer));
            }
        });
        Receiver { url, hits }
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    fn wait_for(&self, n: usize) -> Vec<Hit> {
        eventually(&format!("{n} webhook requests"), || self.hits().len() >= n);
        self.hits()
    }
}

fn serve(sock: std::net::TcpStream, seen: &Mutex<Vec<Hit>>, answer: &Mutex<Answer>) {
    let mut r = BufReader::new(sock.try_clone().unwrap());
    let (mut len, mut signature) = (0, String::new());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("POST /hook "), "{line}");
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (name, value) = l.split_once(':').unwrap();
        match name.to_ascii_lowercase().as_str() {
            "content-length" => len = value.trim().parse().unwrap(),
            "webhook-signature" => signature = value.trim().to_string(),
            _ => {}
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    seen.lock().unwrap().push(Hit { at: Instant::now(), signature, body });
    let mut current = answer.lock().unwrap().clone();
    let (status, reply) = loop {
        match current {
            Answer::Ok(v) => break (200, v),
            Answer::Fail(status, n, then) => {
                *answer.lock().unwrap() = if n > 1 { Answer::Fail(status, n - 1, then) } else { *then };
                break (status, json!({}));
            }
            Answer::Slow(d, then) => {
                std::thread::sleep(d);
                current = *then;
            }
        }
    };
    let body = reply.to_string();
    let mut w = sock;
    let _ = write!(w, "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
}

fn sub_path(id: &str) -> String {
    format!("/v1/stream/__ds/subscriptions/{id}")
}

fn put_json(s: &Server, path: &str, v: Value) -> common::Resp {
    s.req("PUT", path, &[("content-type", JSON)], v.to_string().as_bytes())
}

fn post_json(s: &Server, path: &str, v: Value, token: Option<&str>) -> common::Resp {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", JSON)];
    if let Some(a) = &auth {
        headers.push(("authorization", a));
    }
    s.req("POST", path, &headers, v.to_string().as_bytes())
}

fn webhook(pattern: &str, url: &str) -> Value {
    json!({ "type": "webhook", "pattern": pattern, "webhook": { "url": url }, "lease_ttl_ms": 5000 })
}

fn stream_info<'a>(v: &'a Value, path: &str) -> &'a Value {
    v["streams"].as_array().unwrap().iter().find(|s| s["path"] == path).unwrap_or_else(|| panic!("{path} in {v}"))
}

/// Verifies a `Webhook-Signature` against the server's JWK Set.
fn verify(s: &Server, hit: &Hit) {
    let jwks = s.get("/v1/stream/__ds/jwks.json").expect(200);
    assert!(jwks.h("content-type").starts_with("application/jwk-set+json"));
    let jwks = jwks.json();
    let parts: Vec<&str> = hit.signature.split(',').collect();
    let t = parts[0].strip_prefix("t=").unwrap();
    let kid = parts[1].strip_prefix("kid=").unwrap();
    let sig = parts[2].strip_prefix("ed25519=").unwrap();
    let key = jwks["keys"].as_array().unwrap().iter().find(|k| k["kid"] == kid).expect("the kid is published");
    assert_eq!(
        (key["kty"].as_str(), key["crv"].as_str(), key["alg"].as_str()),
        (Some("OKP"), Some("Ed25519"), Some("EdDSA"))
    );
    let x: [u8; 32] = B64.decode(key["x"].as_str().unwrap()).unwrap().try_into().unwrap();
    let vk = VerifyingKey::from_bytes(&x).unwrap();
    let sig = Signature::from_slice(&B64.decode(sig).unwrap()).unwrap();
    let mut signed = format!("{t}.").into_bytes();
    signed.extend_from_slice(&hit.body);
    vk.verify(&signed, &sig).expect("the signature verifies against the JWK Set");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert!(now.abs_diff(t.parse().unwrap()) < 60);
}

#[test]
fn the_reserved_prefix_is_not_a_stream() {
    let s = Server::start();
    for path in ["/v1/stream/__ds/x", "/v1/stream/__ds", "/v1/stream/__ds/subscriptions/a/b/c"] {
        let r = s.put(path, "text/plain", b"x").expect(400);
        assert_eq!(r.json()["error"]["code"], "INVALID_REQUEST", "{path}");
    }
    // A stream named like it elsewhere in the path is fine.
    s.put("/v1/stream/a/__ds", "text/plain", b"x").expect(201);
}

#[test]
fn create_confirm_conflict_membership_and_backfill() {
    let s = Server::start();
    s.put("/v1/stream/events/old", JSON, b"{\"a\":1}").expect(201);
    s.put("/v1/stream/events/deep/x", JSON, b"{\"a\":1}").expect(201);
    let tail = s.head("/v1/stream/events/old").next_offset();
    let config =
        json!({ "type": "pull-wake", "pattern": "events/*", "wake_stream": "wake/w", "streams": ["manual/a"] });
    // Bad input changes nothing.
    for bad in [json!({ "type": "pull-wake", "pattern": "events/*" }), json!({ "type": "x" }), json!([])] {
        assert_eq!(put_json(&s, &sub_path("s1"), bad).expect(400).json()["error"]["code"], "INVALID_REQUEST");
    }
    s.get(&sub_path("s1")).expect(404);
    let created = put_json(&s, &sub_path("s1"), config.clone()).expect(201).json();
    assert_eq!(created["id"], "s1");
    // Backfilled at the current tail; `*` is one segment.
    assert_eq!(stream_info(&created, "events/old")["acked_offset"], tail.as_str());
    assert_eq!(stream_info(&created, "events/old")["link_type"], "glob");
    assert_eq!(stream_info(&created, "manual/a")["link_type"], "explicit");
    assert!(created["streams"].as_array().unwrap().iter().all(|x| x["path"] != "events/deep/x"));
    put_json(&s, &sub_path("s1"), config.clone()).expect(200);
    let mut other = config.clone();
    other["pattern"] = "events/**".into();
    assert_eq!(
        put_json(&s, &sub_path("s1"), other.clone()).expect(409).json()["error"]["code"],
        "SUBSCRIPTION_ALREADY_EXISTS"
    );
    // `**` takes any depth.
    let deep = put_json(&s, &sub_path("s2"), other).expect(201).json();
    stream_info(&deep, "events/deep/x");
    // Membership.
    s.req("POST", &format!("{}/streams", sub_path("s1")), &[("content-type", JSON)], br#"{"streams":["manual/b"]}"#)
        .expect(204);
    stream_info(&s.get(&sub_path("s1")).expect(200).json(), "manual/b");
    s.delete(&format!("{}/streams/manual%2Fb", sub_path("s1"))).expect(204);
    let got = s.get(&sub_path("s1")).expect(200).json();
    assert!(got["streams"].as_array().unwrap().iter().all(|x| x["path"] != "manual/b"));
    // A stream created later under the pattern is linked with everything pending.
    s.put("/v1/stream/events/new", JSON, b"{\"a\":2}").expect(201);
    eventually("events/new linked", || {
        let v = s.get(&sub_path("s1")).json();
        v["streams"].as_array().unwrap().iter().any(|x| x["path"] == "events/new" && x["acked_offset"] == "-1")
    });
    // A deleted stream leaves the subscription.
    s.delete("/v1/stream/events/old").expect(204);
    eventually("events/old unlinked", || {
        let v = s.get(&sub_path("s1")).json();
        v["streams"].as_array().unwrap().iter().all(|x| x["path"] != "events/old")
    });
    s.delete(&sub_path("s1")).expect(204);
    s.get(&sub_path("s1")).expect(404);
}

#[test]
fn webhook_is_signed_and_callbacks_ack_and_fence() {
    let s = Server::start_with(&["--allow-local-webhooks"]);
    let rx = Receiver::start(Answer::Ok(json!({})));
    // Several subscriptions so owners land on both shards.
    for i in 0..4 {
        put_json(&s, &sub_path(&format!("hook-{i}")), webhook("orders/*", &rx.url)).expect(201);
    }
    s.put("/v1/stream/orders/1", JSON, b"{\"n\":1}").expect(201);
    let hits = rx.wait_for(4);
    let mut ids = Vec::new();
    for hit in &hits {
        verify(&s, hit);
        let n = hit.json();
        ids.push(n["subscription_id"].as_str().unwrap().to_string());
        let info = stream_info(&n, "orders/1");
        assert_eq!(info["has_pending"], true);
        let ack = json!({ "wake_id": n["wake_id"], "generation": n["generation"],
            "acks": [{ "stream": "orders/1", "offset": info["tail_offset"] }], "done": true });
        let callback = n["callback_url"].as_str().unwrap().split_once("/v1/").map(|(_, p)| format!("/v1/{p}")).unwrap();
        let token = n["callback_token"].as_str().unwrap();
        assert_eq!(
            post_json(&s, &callback, ack.clone(), Some(token)).expect(200).json(),
            json!({"ok": true, "next_wake": false})
        );
        assert_eq!(post_json(&s, &callback, ack.clone(), Some(token)).expect(409).json()["error"]["code"], "FENCED");
        assert_eq!(
            post_json(&s, &callback, ack, Some("1.forged")).expect(401).json()["error"]["code"],
            "TOKEN_INVALID"
        );
        let got = s.get(&sub_path(n["subscription_id"].as_str().unwrap())).json();
        assert_eq!(stream_info(&got, "orders/1")["acked_offset"], info["tail_offset"]);
    }
    ids.sort();
    assert_eq!(ids, ["hook-0", "hook-1", "hook-2", "hook-3"]);
    // Unsafe targets are refused even with the development flag.
    let bad = put_json(&s, &sub_path("bad"), webhook("orders/*", "http://10.0.0.1/hook")).expect(400);
    assert_eq!(bad.json()["error"]["code"], "WEBHOOK_URL_REJECTED");
}

#[test]
fn without_the_flag_only_public_https_targets() {
    let s = Server::start();
    for url in ["http://127.0.0.1:9/hook", "https://127.0.0.1/hook", "https://192.168.1.1/h", "https://[::1]/h"] {
        let r = put_json(&s, &sub_path("x"), webhook("a/*", url)).expect(400);
        assert_eq!(r.json()["error"]["code"], "WEBHOOK_URL_REJECTED", "{url}");
    }
    put_json(&s, &sub_path("x"), webhook("a/*", "https://hooks.example.com/x")).expect(201);
}

#[test]
fn a_failing_receiver_is_retried_on_the_backoff_schedule_then_done_acks() {
    let s = Server::start_with(&["--allow-local-webhooks"]);
    let rx = Receiver::start(Answer::Fail(500, 2, Box::new(Answer::Ok(json!({ "done": true })))));
    put_json(&s, &sub_path("r"), webhook("jobs/*", &rx.url)).expect(201);
    s.put("/v1/stream/jobs/1", JSON, b"{\"n\":1}").expect(201);
    rx.wait_for(1);
    eventually("the failure shows", || s.get(&sub_path("r")).json()["status"] == "failed");
    let hits = rx.wait_for(3);
    let (first, second) = (hits[1].at - hits[0].at, hits[2].at - hits[1].at);
    assert!(first >= Duration::from_millis(800) && first < Duration::from_millis(1_700), "first retry after {first:?}");
    assert!(
        second >= Duration::from_millis(1_600) && second < Duration::from_millis(2_900),
        "second retry after {second:?}"
    );
    // The same wake each time; done acks its snapshot.
    assert!(hits.iter().all(|h| h.json()["wake_id"] == hits[0].json()["wake_id"]));
    let tail = s.head("/v1/stream/jobs/1").next_offset();
    eventually("acked", || {
        let v = s.get(&sub_path("r")).json();
        v["status"] == "active" && stream_info(&v, "jobs/1")["acked_offset"] == tail.as_str()
    });
}

#[test]
fn a_slow_receiver_never_slows_appends() {
    let s = Server::start_with(&["--allow-local-webhooks"]);
    let rx = Receiver::start(Answer::Slow(Duration::from_secs(6), Box::new(Answer::Ok(json!({})))));
    for i in 0..8 {
        put_json(&s, &sub_path(&format!("slow-{i}")), webhook("hot/*", &rx.url)).expect(201);
    }
    s.put("/v1/stream/hot/1", JSON, b"{\"n\":0}").expect(201);
    rx.wait_for(4);
    let started = Instant::now();
    let mut c = s.connect();
    for i in 0..200 {
        c.request("POST", "/v1/stream/hot/1", &[("content-type", JSON)], format!("{{\"n\":{i}}}").as_bytes())
            .expect(204);
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "200 appends took {took:?} while every delivery thread was stuck");
}

#[test]
fn the_retry_schedule_survives_kill_9_and_a_down_receiver_gets_it_later() {
    let mut s = Server::start_with(&["--allow-local-webhooks"]);
    // Nothing listens on this port yet: the receiver is down.
    let port = common::free_port();
    let url = format!("http://127.0.0.1:{port}/hook");
    put_json(&s, &sub_path("down"), webhook("logs/*", &url)).expect(201);
    s.put("/v1/stream/logs/1", JSON, b"{\"n\":1}").expect(201);
    eventually("two failed attempts", || s.get(&sub_path("down")).json()["status"] == "failed");
    let before = s.get(&sub_path("down")).json();
    assert!(before["next_attempt_at"].is_string(), "{before}");
    // A delivery outcome is written in the background (persist::soon): the
    // persister is kicked at once and commits within milliseconds; a kill
    // before that would lose only this outcome, and the retry would run
    // again from the state before it.
    std::thread::sleep(std::time::Duration::from_millis(300));
    s.restart_after_kill();
    let after = s.get(&sub_path("down")).expect(200).json();
    assert_eq!(after["status"], "failed", "the retry state survives: {after}");
    assert_eq!(after["generation"], before["generation"]);
    // The receiver comes up; the next retry reaches it.
    let rx = Receiver::on(TcpListener::bind(("127.0.0.1", port)).unwrap(), Answer::Ok(json!({ "done": true })));
    let hit = rx.wait_for(1).remove(0);
    verify(&s, &hit);
    assert_eq!(hit.json()["generation"], before["generation"]);
    let tail = s.head("/v1/stream/logs/1").next_offset();
    eventually("acked", || stream_info(&s.get(&sub_path("down")).json(), "logs/1")["acked_offset"] == tail.as_str());
}

#[test]
fn pull_wake_claims_fence_and_survive_kill_9() {
    let mut s = Server::start();
    s.put("/v1/stream/wake/pool", JSON, b"[]").expect(201);
    let config = json!({ "type": "pull-wake", "pattern": "tasks/*", "wake_stream": "wake/pool", "lease_ttl_ms": 1000 });
    put_json(&s, &sub_path("pull"), config).expect(201);
    post_json(&s, &format!("{}/claim", sub_path("pull")), json!({ "worker": "w1" }), None).expect(409);
    s.put("/v1/stream/tasks/1", JSON, b"{\"n\":1}").expect(201);
    eventually("a wake event", || {
        s.get("/v1/stream/wake/pool?offset=-1").json().as_array().is_some_and(|a| !a.is_empty())
    });
    let claim =
        post_json(&s, &format!("{}/claim", sub_path("pull")), json!({ "worker": "w1" }), None).expect(200).json();
    let busy =
        post_json(&s, &format!("{}/claim", sub_path("pull")), json!({ "worker": "w2" }), None).expect(409).json();
    assert_eq!(
        (busy["error"]["code"].as_str(), busy["error"]["current_holder"].as_str()),
        (Some("ALREADY_CLAIMED"), Some("w1"))
    );
    let tail = stream_info(&claim, "tasks/1")["tail_offset"].clone();
    let token = claim["token"].as_str().unwrap().to_string();
    let ack = json!({ "wake_id": claim["wake_id"], "generation": claim["generation"], "acks": [{ "stream": "tasks/1", "offset": tail }], "done": true });
    post_json(&s, &format!("{}/ack", sub_path("pull")), ack.clone(), Some(&token)).expect(200);
    s.restart_after_kill();
    // The ack was durable: nothing is pending after the restart.
    let got = s.get(&sub_path("pull")).expect(200).json();
    assert_eq!(stream_info(&got, "tasks/1")["acked_offset"], tail);
    post_json(&s, &format!("{}/claim", sub_path("pull")), json!({ "worker": "w1" }), None).expect(409);
    // The old wake stays fenced after the restart.
    assert_eq!(
        post_json(&s, &format!("{}/ack", sub_path("pull")), ack, Some(&token)).expect(409).json()["error"]["code"],
        "FENCED"
    );
    // New data: a new wake with a later generation; an expired lease frees it for another worker.
    s.post("/v1/stream/tasks/1", JSON, b"{\"n\":2}").expect(204);
    eventually("a second wake", || {
        let r = post_json(&s, &format!("{}/claim", sub_path("pull")), json!({ "worker": "w2" }), None);
        r.status == 200 && r.json()["generation"].as_u64() > claim["generation"].as_u64()
    });
    std::thread::sleep(Duration::from_millis(1_300));
    let again =
        post_json(&s, &format!("{}/claim", sub_path("pull")), json!({ "worker": "w3" }), None).expect(200).json();
    let release = json!({ "wake_id": again["wake_id"], "generation": again["generation"] });
    s.req(
        "POST",
        &format!("{}/release", sub_path("pull")),
        &[("content-type", JSON), ("authorization", &format!("Bearer {}", again["token"].as_str().unwrap()))],
        release.to_string().as_bytes(),
    )
    .expect(204);
    // Work remains after the release: a new wake, claimable at once.
    post_json(&s, &format!("{}/claim", sub_path("pull")), json!({ "worker": "w4" }), None).expect(200);
}

#[test]
fn an_expired_webhook_lease_wakes_again_with_the_next_generation() {
    let s = Server::start_with(&["--allow-local-webhooks"]);
    // The receiver takes the wake but never calls back.
    let rx = Receiver::start(Answer::Ok(json!({})));
    let mut config = webhook("leases/*", &rx.url);
    config["lease_ttl_ms"] = 1000.into();
    put_json(&s, &sub_path("lease"), config).expect(201);
    s.put("/v1/stream/leases/1", JSON, b"{\"n\":1}").expect(201);
    let hits = rx.wait_for(2);
    let (first, second) = (hits[0].json(), hits[1].json());
    assert!(hits[1].at - hits[0].at >= Duration::from_millis(900), "the lease ran its 1 s");
    assert_eq!(second["generation"].as_u64(), first["generation"].as_u64().map(|g| g + 1));
    assert_ne!(second["wake_id"], first["wake_id"]);
    // The first wake is fenced; the second settles.
    let callback = format!("{}/callback", sub_path("lease"));
    let stale = json!({ "wake_id": first["wake_id"], "generation": first["generation"], "done": true });
    let token = first["callback_token"].as_str().unwrap();
    assert_eq!(post_json(&s, &callback, stale, Some(token)).expect(409).json()["error"]["code"], "FENCED");
    let tail = stream_info(&second, "leases/1")["tail_offset"].clone();
    let done = json!({ "wake_id": second["wake_id"], "generation": second["generation"],
        "acks": [{ "stream": "leases/1", "offset": tail }], "done": true });
    post_json(&s, &callback, done, second["callback_token"].as_str()).expect(200);
}

#[test]
fn bad_requests_get_a_reason_and_change_nothing() {
    let s = Server::start_with(&["--allow-local-webhooks"]);
    let rx = Receiver::start(Answer::Ok(json!({})));
    put_json(&s, &sub_path("h"), webhook("a/*", &rx.url)).expect(201);
    let before = s.get(&sub_path("h")).expect(200).text();
    let long = "x/".repeat(200) + "x";
    for (method, path, body) in [
        ("PUT", sub_path("p"), json!({ "type": "pull-wake", "pattern": long, "wake_stream": "w" }).to_string()),
        ("PUT", sub_path("p"), "{not json".to_string()),
        (
            "PUT",
            sub_path(&"i".repeat(200)),
            json!({ "type": "pull-wake", "pattern": "a", "wake_stream": "w" }).to_string(),
        ),
        ("POST", format!("{}/claim", sub_path("h")), json!({ "worker": "w" }).to_string()),
        ("POST", format!("{}/streams", sub_path("h")), json!({ "streams": [""] }).to_string()),
        ("POST", format!("{}/streams", sub_path("h")), json!({ "streams": ["__ds/x"] }).to_string()),
        ("POST", format!("{}/callback", sub_path("h")), "[]".to_string()),
        ("PATCH", sub_path("h"), "{}".to_string()),
    ] {
        let r = s.req(method, &path, &[("content-type", JSON)], body.as_bytes());
        assert!((400..500).contains(&r.status), "{method} {path}: {} {}", r.status, r.text());
        assert!(r.json()["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{method} {path}: {}", r.text());
    }
    // Unknown subscriptions.
    assert_eq!(s.get(&sub_path("nope")).expect(404).json()["error"]["code"], "SUBSCRIPTION_NOT_FOUND");
    post_json(&s, &format!("{}/callback", sub_path("nope")), json!({}), Some("1.x")).expect(404);
    s.get(&sub_path("p")).expect(404);
    assert_eq!(s.get(&sub_path("h")).expect(200).text(), before);
}
