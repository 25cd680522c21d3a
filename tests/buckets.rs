//! Buckets: create, metadata, listing with paging, delete; and sharding
//! (streams spread over both shards, pipelined requests that hop shards).

mod common;

use common::{build, offset, Server};
use serde_json::json;
use sluice_shards::ids::stream_shard;

const TEXT: &str = "text/plain";

#[test]
fn bucket_create_conflict_and_invalid_ids() {
    let s = Server::start();
    let r = s.req("PUT", "/agents", &[], b"").expect(201);
    assert_eq!(r.h("location"), "/agents");
    s.req("PUT", "/agents", &[], b"").expect(409);
    for bad in ["/abc", "/Agents", "/ab.cd", "/has%20space", &format!("/{}", "a".repeat(65))] {
        let r = s.req("PUT", bad, &[], b"");
        assert_eq!(r.status, 400, "PUT {bad}: {}", r.text());
    }
    // The longest and shortest legal ids.
    s.req("PUT", &format!("/{}", "a".repeat(64)), &[], b"").expect(201);
    s.req("PUT", "/a_-9", &[], b"").expect(201);
    // The built-in bucket exists already.
    s.req("PUT", "/v1-stream", &[], b"").expect(409);
    // HEAD on a bucket.
    s.head("/agents").expect(200);
    s.head("/nobody").expect(404);
}

#[test]
fn bucket_metadata_counts_streams() {
    let s = Server::start();
    s.req("PUT", "/meta-b", &[], b"").expect(201);
    let v = s.get("/meta-b").expect(200).json();
    assert_eq!(v["bucket_id"], "meta-b");
    assert_eq!(v["streams"], 0);
    for i in 0..7 {
        s.put(&format!("/meta-b/s{i}"), TEXT, b"").expect(201);
    }
    let r = s.get("/meta-b").expect(200);
    assert_eq!(r.h("content-type"), "application/json");
    let v = r.json();
    assert_eq!(v["bucket_id"], "meta-b");
    assert_eq!(v["streams"], 7);
    s.delete("/meta-b/s3").expect(204);
    assert_eq!(s.get("/meta-b").expect(200).json()["streams"], 6);
    s.get("/nobody").expect(404);
}

#[test]
fn streams_in_a_missing_bucket_are_not_found() {
    let s = Server::start();
    s.put("/ghost/s1", TEXT, b"").expect(404);
    s.put("/ghost/s1", TEXT, b"with body").expect(404);
    // The PUT did not create the bucket.
    s.get("/ghost").expect(404);
    s.head("/ghost").expect(404);
    s.get("/ghost/streams").expect(404);
    s.post("/ghost/s1", TEXT, b"x").expect(404);
    s.get("/ghost/s1?offset=-1").expect(404);
    s.head("/ghost/s1").expect(404);
    s.delete("/ghost/s1").expect(404);
    s.delete("/ghost").expect(404);
    // Creating it afterwards works and it is empty.
    s.req("PUT", "/ghost", &[], b"").expect(201);
    assert_eq!(s.get("/ghost").expect(200).json()["streams"], 0);
    s.get("/ghost/s1").expect(404);
    // Bucket stream ids are single path segments, and "streams" is reserved.
    s.put("/ghost/a/b", TEXT, b"").expect(404);
    s.put("/ghost/streams", TEXT, b"").expect(405);
    s.put("/ghost/a..b", TEXT, b"").expect(400);
}

fn ids(v: &serde_json::Value) -> Vec<String> {
    v["streams"]
        .as_array()
        .expect("streams array")
        .iter()
        .map(|s| s["stream_id"].as_str().expect("stream_id").to_string())
        .collect()
}

#[test]
fn listing_pages_sorted_with_prefix_and_after() {
    let s = Server::start();
    s.req("PUT", "/lister", &[], b"").expect(201);
    let mut names: Vec<String> = (0..25).map(|i| format!("run-{i:02}")).collect();
    names.extend(["job-a", "job-b", "zeta"].map(String::from));
    // Create in a scrambled order; listings must come back sorted.
    for n in names.iter().rev() {
        let ct = if n.starts_with("job-") { "application/json" } else { TEXT };
        s.put(&format!("/lister/{n}"), ct, b"").expect(201);
    }
    s.post("/lister/run-03", TEXT, b"12345").expect(204);
    s.req("POST", "/lister/run-04", &[("Stream-Closed", "true")], b"").expect(204);
    let mut sorted = names.clone();
    sorted.sort();

    // Everything in one page.
    let v = s.get("/lister/streams").expect(200).json();
    assert_eq!(v["bucket_id"], "lister");
    assert_eq!(ids(&v), sorted);
    assert_eq!(v["stream_count"], 28);
    assert_eq!(v["has_more"], false);
    assert!(v["next_cursor"].is_null());
    let run03 = &v["streams"][sorted.iter().position(|n| n == "run-03").unwrap()];
    assert_eq!(run03["tail_offset"], 5);
    assert_eq!(run03["status"], "Open");
    assert_eq!(run03["content_type"], TEXT);
    let run04 = &v["streams"][sorted.iter().position(|n| n == "run-04").unwrap()];
    assert_eq!(run04["status"], "Closed");
    assert_eq!(v["streams"][0]["stream_id"], "job-a");
    assert_eq!(v["streams"][0]["content_type"], "application/json");

    // Paging with limit and the returned cursor.
    let mut seen = Vec::new();
    let mut after = String::new();
    let mut pages = 0;
    loop {
        let v = s.get(&format!("/lister/streams?limit=10&after={after}")).expect(200).json();
        pages += 1;
        let page = ids(&v);
        assert!(page.len() <= 10);
        seen.extend(page.clone());
        if v["has_more"] == json!(true) {
            assert_eq!(v["next_cursor"], json!(page.last().unwrap()));
            after = page.last().unwrap().clone();
        } else {
            assert!(v["next_cursor"].is_null());
            break;
        }
        assert!(pages < 10, "paging does not terminate");
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, sorted);

    // Prefix, alone and with paging.
    let v = s.get("/lister/streams?prefix=job-").expect(200).json();
    assert_eq!(ids(&v), ["job-a", "job-b"]);
    assert_eq!(v["prefix"], "job-");
    let v = s.get("/lister/streams?prefix=run-&limit=5").expect(200).json();
    assert_eq!(ids(&v), ["run-00", "run-01", "run-02", "run-03", "run-04"]);
    assert_eq!(v["has_more"], true);
    let v = s.get("/lister/streams?prefix=run-&limit=5&after=run-22").expect(200).json();
    assert_eq!(ids(&v), ["run-23", "run-24"]);
    assert_eq!(v["has_more"], false);
    let v = s.get("/lister/streams?prefix=nothing").expect(200).json();
    assert_eq!(ids(&v), Vec::<String>::new());
    // The page starts at the later of the prefix and `after`: an `after`
    // before the prefix's range, inside it without naming a stream, past it.
    let v = s.get("/lister/streams?prefix=run-2&after=job-b").expect(200).json();
    assert_eq!(ids(&v), ["run-20", "run-21", "run-22", "run-23", "run-24"]);
    let v = s.get("/lister/streams?prefix=run-&after=run-215&limit=2").expect(200).json();
    assert_eq!(ids(&v), ["run-22", "run-23"]);
    let v = s.get("/lister/streams?prefix=job-&after=run-00").expect(200).json();
    assert_eq!(ids(&v), Vec::<String>::new());
    // `after` is exclusive, and may name a stream that does not exist.
    let v = s.get("/lister/streams?after=run-24").expect(200).json();
    assert_eq!(ids(&v), ["zeta"]);
    let v = s.get("/lister/streams?after=run-245&limit=1").expect(200).json();
    assert_eq!(ids(&v), ["zeta"]);
    assert_eq!(v["has_more"], false);

    // Limit bounds.
    for bad in ["0", "1001", "-1", "abc"] {
        let r = s.get(&format!("/lister/streams?limit={bad}"));
        assert_eq!(r.status, 400, "limit={bad}: {}", r.text());
    }
    s.get("/lister/streams?limit=1000").expect(200);
    assert_eq!(ids(&s.get("/lister/streams?limit=1").expect(200).json()), ["job-a"]);
    // Only GET lists.
    s.req("POST", "/lister/streams", &[("Content-Type", TEXT)], b"x").expect(405);
}

#[test]
fn builtin_bucket_is_listable() {
    let s = Server::start();
    s.put("/v1/stream/b-one", TEXT, b"").expect(201);
    s.put("/v1/stream/a-two", TEXT, b"").expect(201);
    let v = s.get("/v1-stream/streams").expect(200).json();
    assert_eq!(ids(&v), ["a-two", "b-one"]);
    // And its streams are reachable under the bucket surface too.
    s.post("/v1-stream/a-two", TEXT, b"same store").expect(204);
    assert_eq!(s.get("/v1/stream/a-two").expect(200).body, b"same store");
    s.delete("/v1-stream").expect(409);
}

#[test]
fn delete_bucket_only_when_empty() {
    let s = Server::start();
    s.req("PUT", "/doomed", &[], b"").expect(201);
    s.put("/doomed/one", TEXT, b"x").expect(201);
    s.put("/doomed/two", TEXT, b"y").expect(201);
    s.delete("/doomed").expect(409);
    // A refused delete leaves the bucket fully usable.
    s.post("/doomed/one", TEXT, b"z").expect(204);
    s.put("/doomed/three", TEXT, b"").expect(201);
    assert_eq!(s.get("/doomed").expect(200).json()["streams"], 3);
    for n in ["one", "two", "three"] {
        s.delete(&format!("/doomed/{n}")).expect(204);
    }
    s.delete("/doomed").expect(204);
    s.get("/doomed").expect(404);
    s.head("/doomed").expect(404);
    s.get("/doomed/streams").expect(404);
    s.put("/doomed/one", TEXT, b"").expect(404);
    s.delete("/doomed").expect(404);
    // The name can be reused, and old streams do not come back.
    s.req("PUT", "/doomed", &[], b"").expect(201);
    assert_eq!(s.get("/doomed").expect(200).json()["streams"], 0);
    s.get("/doomed/one").expect(404);
}

#[test]
fn streams_spread_over_both_shards_and_pipelined_requests_hop_shards() {
    let s = Server::start();
    s.req("PUT", "/pipes", &[], b"").expect(201);
    let names: Vec<String> = (0..40).map(|i| format!("s{i}")).collect();
    let owners: Vec<usize> = names.iter().map(|n| stream_shard("v1-stream", n, 2)).collect();
    assert!(owners.contains(&0) && owners.contains(&1), "{owners:?}");
    let bucket_owners: Vec<usize> = names.iter().map(|n| stream_shard("pipes", n, 2)).collect();
    assert!(bucket_owners.contains(&0) && bucket_owners.contains(&1));

    // Create all 40 (both surfaces) on one keep-alive connection, one at a time.
    let mut c = s.connect();
    for n in &names {
        c.request("PUT", &format!("/v1/stream/{n}"), &[("Content-Type", TEXT)], b"").expect(201);
        c.request("PUT", &format!("/pipes/{n}"), &[("Content-Type", TEXT)], b"").expect(201);
    }

    // One write carrying many requests, alternating shards: appends, reads,
    // a non-stream request, a bucket request, and a miss.
    let mut batch = Vec::new();
    let mut expected: Vec<(u16, Option<Vec<u8>>)> = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let body = format!("payload-{i}");
        batch.extend(build("POST", &format!("/v1/stream/{n}"), &[("Content-Type", TEXT)], body.as_bytes()));
        expected.push((204, None));
        batch.extend(build("POST", &format!("/pipes/{n}"), &[("Content-Type", TEXT)], format!("b-{body}").as_bytes()));
        expected.push((204, None));
        batch.extend(build("GET", &format!("/v1/stream/{n}?offset=-1"), &[], b""));
        expected.push((200, Some(body.clone().into_bytes())));
        if i % 10 == 5 {
            batch.extend(build("GET", "/v1/healthz", &[], b""));
            expected.push((200, Some(b"ok\n".to_vec())));
            batch.extend(build("GET", "/v1/stream/not-there", &[], b""));
            expected.push((404, None));
        }
    }
    batch.extend(build("GET", "/pipes", &[], b""));
    expected.push((200, None));
    c.send(&batch).unwrap();
    for (i, (status, body)) in expected.iter().enumerate() {
        let r = c.read_response(false);
        assert_eq!(r.status, *status, "response {i}: {r:?}");
        if let Some(b) = body {
            assert_eq!(&r.body, b, "response {i}");
        }
    }
    assert!(c.buffered().is_empty(), "stray bytes after the last response");

    // Pipelined reads of the bucket streams in reverse order, in one write.
    let mut batch = Vec::new();
    for n in names.iter().rev() {
        batch.extend(build("GET", &format!("/pipes/{n}?offset=-1"), &[], b""));
    }
    c.send(&batch).unwrap();
    for (i, n) in names.iter().enumerate().rev() {
        let r = c.read_response(false).expect(200);
        assert_eq!(r.text(), format!("b-payload-{i}"), "stream {n}");
        assert_eq!(r.next_offset(), offset(r.body.len() as u64));
    }

    // Everything is visible from fresh connections too.
    let v = s.get("/pipes/streams").expect(200).json();
    assert_eq!(v["stream_count"], 40);
    assert_eq!(s.get("/pipes").expect(200).json()["streams"], 40);
    let v = s.get("/v1-stream/streams").expect(200).json();
    assert_eq!(v["stream_count"], 40);
}

#[test]
fn pipelined_chunked_and_sized_bodies_across_shards() {
    let s = Server::start();
    // Two streams on different shards.
    let a = (0..).map(|i| format!("x{i}")).find(|n| stream_shard("v1-stream", n, 2) == 0).unwrap();
    let b = (0..).map(|i| format!("y{i}")).find(|n| stream_shard("v1-stream", n, 2) == 1).unwrap();
    s.put(&format!("/v1/stream/{a}"), TEXT, b"").expect(201);
    s.put(&format!("/v1/stream/{b}"), TEXT, b"").expect(201);
    let mut batch = Vec::new();
    batch.extend(build(
        "POST",
        &format!("/v1/stream/{a}"),
        &[("Content-Type", TEXT), ("Transfer-Encoding", "chunked")],
        b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
    ));
    batch.extend(build("POST", &format!("/v1/stream/{b}"), &[("Content-Type", TEXT)], b"fghij"));
    batch.extend(build("POST", &format!("/v1/stream/{a}"), &[("Content-Type", TEXT)], b"kl"));
    batch.extend(build("GET", &format!("/v1/stream/{a}"), &[], b""));
    batch.extend(build("GET", &format!("/v1/stream/{b}"), &[], b""));
    let mut c = s.connect();
    // Dribble the batch in small pieces so heads and bodies straddle reads.
    for piece in batch.chunks(7) {
        c.send(piece).unwrap();
    }
    assert_eq!(c.read_response(false).expect(204).next_offset(), offset(5));
    assert_eq!(c.read_response(false).expect(204).next_offset(), offset(5));
    assert_eq!(c.read_response(false).expect(204).next_offset(), offset(7));
    assert_eq!(c.read_response(false).expect(200).body, b"abcdekl");
    assert_eq!(c.read_response(false).expect(200).body, b"fghij");
}

/// A batch written at once: each sized body lies whole in the read buffer
/// behind its head, with the next request after it. Bodies served here
/// are read where they lie, forwarded ones are copied out; each request
/// gets its own bytes, in order.
#[test]
fn a_pipelined_batch_in_one_write_serves_each_body_once() {
    let s = Server::start();
    let a = (0..).map(|i| format!("p{i}")).find(|n| stream_shard("v1-stream", n, 2) == 0).unwrap();
    let b = (0..).map(|i| format!("q{i}")).find(|n| stream_shard("v1-stream", n, 2) == 1).unwrap();
    let mut batch = Vec::new();
    batch.extend(build("PUT", &format!("/v1/stream/{a}"), &[("Content-Type", TEXT)], b"12"));
    batch.extend(build("PUT", &format!("/v1/stream/{b}"), &[("Content-Type", TEXT)], b"345"));
    for (i, stream) in [&a, &b, &a, &a, &b].into_iter().enumerate() {
        batch.extend(build(
            "POST",
            &format!("/v1/stream/{stream}"),
            &[("Content-Type", TEXT)],
            format!("<{i}>").as_bytes(),
        ));
    }
    batch.extend(build("GET", &format!("/v1/stream/{a}"), &[], b""));
    batch.extend(build("GET", &format!("/v1/stream/{b}"), &[], b""));
    // Once with its last byte held back, then whole in one write.
    for round in 0..2 {
        let mut c = s.connect();
        if round == 1 {
            c.send(&batch).unwrap();
        } else {
            c.send(&batch[..batch.len() - 1]).unwrap();
            c.send(&batch[batch.len() - 1..]).unwrap();
        }
        let created = if round == 0 { 201 } else { 200 };
        c.read_response(false).expect(created);
        c.read_response(false).expect(created);
        for _ in 0..5 {
            c.read_response(false).expect(204);
        }
        let (got_a, got_b) = (c.read_response(false).expect(200).body, c.read_response(false).expect(200).body);
        let (want_a, want_b) =
            if round == 0 { ("12<0><2><3>", "345<1><4>") } else { ("12<0><2><3><0><2><3>", "345<1><4><1><4>") };
        assert_eq!((got_a.as_slice(), got_b.as_slice()), (want_a.as_bytes(), want_b.as_bytes()), "round {round}");
    }
}

#[test]
fn concurrent_bucket_creates_have_one_winner() {
    let s = Server::start();
    let addr = s.addr;
    let threads: Vec<_> = (0..8)
        .map(|_| std::thread::spawn(move || common::Conn::open(addr).request("PUT", "/contest", &[], b"").status))
        .collect();
    let statuses: Vec<u16> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 201 || *s == 409), "{statuses:?}");
    // Usable from streams on both shards right away.
    for i in 0..8 {
        s.put(&format!("/contest/s{i}"), TEXT, b"").expect(201);
    }
    assert_eq!(s.get("/contest").expect(200).json()["streams"], 8);
}
