//! Durability: everything acknowledged survives SIGKILL and a restart on the
//! same data directory; start-up refuses a changed shard count and a busy port.

mod common;

use common::{all_bytes, offset, run_to_exit, Server, TempDir};
use sluice_shards::ids::stream_shard;
use std::net::TcpListener;

const TEXT: &str = "text/plain";
const OCTET: &str = "application/octet-stream";
const JSON: &str = "application/json";
const NDJSON: &str = "application/x-ndjson";

/// A producer append on `path`.
fn produce(s: &Server, path: &str, epoch: &str, seq: &str, body: &[u8]) -> common::Resp {
    s.req(
        "POST",
        path,
        &[("Content-Type", TEXT), ("Producer-Id", "writer-1"), ("Producer-Epoch", epoch), ("Producer-Seq", seq)],
        body,
    )
}

/// What the test wrote and expects back: (path, content type, bytes).
struct Expected {
    streams: Vec<(String, &'static str, Vec<u8>)>,
}

impl Expected {
    fn check(&self, s: &Server) {
        for (path, ct, bytes) in &self.streams {
            let r = s.get(&format!("{path}?offset=-1"));
            assert_eq!(r.status, 200, "{path}: {}", r.text());
            assert_eq!(r.h("content-type"), *ct, "{path}");
            assert_eq!(&r.body, bytes, "{path}: bytes differ after restart");
            if *ct != JSON {
                assert_eq!(r.next_offset(), offset(bytes.len() as u64), "{path}");
            }
        }
    }
}

#[test]
fn acknowledged_writes_survive_sigkill_and_restart() {
    let mut s = Server::start();
    s.req("PUT", "/durable", &[], b"").expect(201);
    s.req("PUT", "/gone-bucket", &[], b"").expect(201);
    s.delete("/gone-bucket").expect(204);
    let mut exp = Expected { streams: Vec::new() };
    let bytes = all_bytes();

    // Binary streams on both surfaces: an initial body and several appends.
    for path in ["/v1/stream/bin", "/durable/bin"] {
        s.put(path, OCTET, &bytes[..10]).expect(201);
        s.post(path, OCTET, &bytes[10..128]).expect(204);
        s.post(path, OCTET, &bytes[128..]).expect(204);
        s.post(path, OCTET, &bytes).expect(204);
        let mut all = bytes.clone();
        all.extend_from_slice(&bytes);
        exp.streams.push((path.to_string(), OCTET, all));
    }
    // Enough streams that both shards own several, on both surfaces.
    let mut owners = std::collections::HashSet::new();
    for i in 0..12 {
        for (bucket, prefix) in [("v1-stream", "/v1/stream/"), ("durable", "/durable/")] {
            let name = format!("many-{i}");
            owners.insert(stream_shard(bucket, &name, 2));
            let path = format!("{prefix}{name}");
            s.put(&path, TEXT, b"").expect(201);
            let mut data = Vec::new();
            for j in 0..=i % 4 {
                let chunk = format!("{name}:{j}\n");
                s.post(&path, TEXT, chunk.as_bytes()).expect(204);
                data.extend_from_slice(chunk.as_bytes());
            }
            exp.streams.push((path, TEXT, data));
        }
    }
    assert_eq!(owners.len(), 2);
    // JSON streams.
    // The base surface reads them as a JSON array, the bucketed surface as
    // the stored NDJSON (whose length is the tail offset).
    for (path, read_as, bytes) in [
        ("/v1/stream/doc", JSON, &br#"[{"n":1},2,"three",{"four":[4]}]"#[..]),
        ("/durable/doc", NDJSON, b"{\"n\":1}\n2\n\"three\"\n{\"four\":[4]}\n"),
    ] {
        s.put(path, JSON, br#"[{"n":1}]"#).expect(201);
        s.post(path, JSON, br#"[2, "three", {"four": [4]}]"#).expect(204);
        exp.streams.push((path.to_string(), read_as, bytes.to_vec()));
    }
    // A closed stream.
    s.put("/durable/closed", TEXT, b"").expect(201);
    s.req("POST", "/durable/closed", &[("Content-Type", TEXT), ("Stream-Closed", "true")], b"final words").expect(204);
    exp.streams.push(("/durable/closed".into(), TEXT, b"final words".to_vec()));
    // A producer, and a sequenced writer.
    for path in ["/v1/stream/prod", "/durable/prod"] {
        s.put(path, TEXT, b"").expect(201);
        produce(&s, path, "3", "0", b"p0").expect(200);
        produce(&s, path, "3", "1", b"p1").expect(200);
        produce(&s, path, "3", "2", b"p2").expect(200);
        exp.streams.push((path.to_string(), TEXT, b"p0p1p2".to_vec()));
    }
    s.put("/v1/stream/seq", TEXT, b"").expect(201);
    s.req("POST", "/v1/stream/seq", &[("Content-Type", TEXT), ("Stream-Seq", "0005")], b"s5").expect(204);
    exp.streams.push(("/v1/stream/seq".into(), TEXT, b"s5".to_vec()));
    // A deleted stream, and a stream deleted then re-created.
    s.put("/durable/deleted", TEXT, b"bye").expect(201);
    s.delete("/durable/deleted").expect(204);
    s.put("/v1/stream/reborn", TEXT, b"old").expect(201);
    s.delete("/v1/stream/reborn").expect(204);
    s.put("/v1/stream/reborn", OCTET, b"new").expect(201);
    exp.streams.push(("/v1/stream/reborn".into(), OCTET, b"new".to_vec()));

    exp.check(&s);
    s.restart_after_kill();
    exp.check(&s);

    // Closure persisted.
    let r = s.head("/durable/closed").expect(200);
    assert_eq!(r.h("stream-closed"), "true");
    assert_eq!(r.next_offset(), offset(11));
    s.post("/durable/closed", TEXT, b"more").expect(409);
    assert!(!s.head("/durable/bin").expect(200).has("stream-closed"));
    // Producer state persisted: the last (epoch, seq) is a duplicate, the
    // next seq is accepted, an older epoch is fenced.
    for path in ["/v1/stream/prod", "/durable/prod"] {
        let r = produce(&s, path, "3", "2", b"p2").expect(204);
        assert_eq!(r.next_offset(), offset(6));
        produce(&s, path, "3", "4", b"gap").expect(409);
        produce(&s, path, "2", "0", b"old").expect(403);
        produce(&s, path, "3", "3", b"p3").expect(200);
    }
    // Stream-Seq persisted.
    s.req("POST", "/v1/stream/seq", &[("Content-Type", TEXT), ("Stream-Seq", "0005")], b"again").expect(409);
    // Deletes persisted.
    s.get("/durable/deleted").expect(404);
    s.get("/gone-bucket").expect(404);
    // The bucket and its listing survived.
    let v = s.get("/durable/streams").expect(200).json();
    let listed: Vec<&str> = v["streams"].as_array().unwrap().iter().map(|s| s["stream_id"].as_str().unwrap()).collect();
    let mut want: Vec<String> =
        exp.streams.iter().filter_map(|(p, _, _)| p.strip_prefix("/durable/").map(String::from)).collect();
    want.sort();
    assert_eq!(want.len(), 16);
    assert_eq!(listed, want);
    let meta = s.get("/durable").expect(200).json();
    assert_eq!(meta["bucket_id"], "durable");
    assert_eq!(meta["streams"], 16);
    let closed = v["streams"].as_array().unwrap().iter().find(|s| s["stream_id"] == "closed").unwrap();
    assert_eq!(closed["status"], "Closed");

    // Writing after recovery continues at the recovered tails, and those
    // writes survive a second crash too.
    for (path, ct, data) in exp.streams.iter_mut() {
        if *ct == TEXT && !path.ends_with("closed") && !path.ends_with("prod") {
            let r = s.post(path, TEXT, b"+after").expect(204);
            data.extend_from_slice(b"+after");
            assert_eq!(r.next_offset(), offset(data.len() as u64), "{path}");
        }
        if path.ends_with("prod") {
            data.extend_from_slice(b"p3");
        }
    }
    s.put("/durable/new-after-restart", TEXT, b"fresh").expect(201);
    exp.streams.push(("/durable/new-after-restart".into(), TEXT, b"fresh".to_vec()));
    s.restart_after_kill();
    exp.check(&s);
    assert_eq!(s.get("/durable").expect(200).json()["streams"], 17);
    for path in ["/v1/stream/prod", "/durable/prod"] {
        produce(&s, path, "3", "3", b"p3").expect(204);
    }
}

#[test]
fn sigterm_shuts_down_cleanly_and_keeps_data() {
    let mut s = Server::start();
    s.put("/v1/stream/term", TEXT, b"kept").expect(201);
    // An idle keep-alive connection must not hold up shutdown.
    let _idle = s.connect();
    let status = s.terminate();
    assert!(status.success(), "exit status after SIGTERM: {status}");
    s.start_again();
    assert_eq!(s.get("/v1/stream/term").expect(200).body, b"kept");
}

#[test]
fn a_relative_data_dir_works() {
    // The same directory, named relative to the test's working directory.
    let dir = TempDir::new("relative");
    let cwd = std::env::current_dir().expect("cwd");
    let up: std::path::PathBuf = cwd.components().skip(1).map(|_| "..").collect();
    let relative = up.join(dir.path().strip_prefix("/").expect("temp dirs are absolute"));
    assert!(relative.is_relative(), "{}", relative.display());
    let mut s = Server::start_in(&relative, 2, &[]);
    s.put("/v1/stream/rel", TEXT, b"kept").expect(201);
    s.post("/v1/stream/rel", TEXT, b" here").expect(204);
    assert!(s.terminate().success());
    assert!(dir.path().join("shard-0").is_dir() && dir.path().join("shard-1").is_dir());
    s.start_again();
    assert_eq!(s.get("/v1/stream/rel").expect(200).body, b"kept here");
}

#[test]
fn restart_with_a_different_shard_count_is_refused() {
    let dir = TempDir::new("shards");
    {
        let s = Server::start_in(dir.path(), 2, &[]);
        s.put("/v1/stream/x", TEXT, b"data").expect(201);
    }
    let port = common::free_port().to_string();
    let listen = format!("127.0.0.1:{port}");
    let data = dir.path().to_str().unwrap();
    for n in ["1", "3"] {
        let (status, err) = run_to_exit(&["serve", "--listen", &listen, "--data-dir", data, "--shards", n]);
        assert!(!status.success(), "--shards {n} on a 2-shard dir started");
        assert!(err.contains("shards"), "stderr: {err}");
    }
    // The data dir is untouched and still opens with the right count.
    let s = Server::start_in(dir.path(), 2, &[]);
    assert_eq!(s.get("/v1/stream/x").expect(200).body, b"data");
}

#[test]
fn a_port_in_use_is_refused() {
    let dir = TempDir::new("port");
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = holder.local_addr().unwrap().to_string();
    let (status, err) =
        run_to_exit(&["serve", "--listen", &listen, "--data-dir", dir.path().to_str().unwrap(), "--shards", "2"]);
    assert!(!status.success());
    assert!(err.contains("in use"), "stderr: {err}");
    drop(holder);

    // Another sluice holding the port is refused the same way (SO_REUSEPORT
    // must not let two servers share it).
    let s = Server::start();
    let dir2 = TempDir::new("port2");
    let (status, err) = run_to_exit(&[
        "serve",
        "--listen",
        &s.addr.to_string(),
        "--data-dir",
        dir2.path().to_str().unwrap(),
        "--shards",
        "2",
    ]);
    assert!(!status.success());
    assert!(err.contains("in use"), "stderr: {err}");
    s.get("/v1/healthz").expect(200);
}

#[test]
fn recovery_across_many_small_segments_and_an_oversized_record() {
    // No flush within the test: the journal keeps every segment.
    let mut s = Server::start_with(&["--segment-bytes", "4096", "--flush-interval", "30s"]);
    let names: Vec<String> = (0..6).map(|i| format!("seg-{i}")).collect();
    let mut want: Vec<Vec<u8>> = vec![Vec::new(); names.len()];
    for n in &names {
        s.put(&format!("/v1/stream/{n}"), OCTET, b"").expect(201);
    }
    // ~60 KiB spread over the streams: many segment roll-overs per shard.
    let mut c = s.connect();
    for round in 0..100u32 {
        for (i, n) in names.iter().enumerate() {
            let chunk: Vec<u8> = (0..100u32).map(|k| (round * 7 + k * 13 + i as u32) as u8).collect();
            c.request("POST", &format!("/v1/stream/{n}"), &[("Content-Type", OCTET)], &chunk).expect(204);
            want[i].extend_from_slice(&chunk);
        }
    }
    // One record larger than a whole segment, then more small ones.
    let big: Vec<u8> = (0..20_000u32).map(|k| (k % 251) as u8).collect();
    c.request("POST", "/v1/stream/seg-0", &[("Content-Type", OCTET)], &big).expect(204);
    want[0].extend_from_slice(&big);
    for (i, n) in names.iter().enumerate() {
        c.request("POST", &format!("/v1/stream/{n}"), &[("Content-Type", OCTET)], b"tail").expect(204);
        want[i].extend_from_slice(b"tail");
    }
    drop(c);
    // The small segment size really made the log roll over many times.
    let segments: usize = (0..2)
        .map(|i| {
            std::fs::read_dir(s.data_dir.join(format!("shard-{i}")))
                .unwrap()
                .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".seg"))
                .count()
        })
        .sum();
    assert!(segments >= 10, "only {segments} segment files");
    let check = |s: &Server, want: &[Vec<u8>]| {
        for (i, n) in names.iter().enumerate() {
            let r = s.get(&format!("/v1/stream/{n}?offset=-1")).expect(200);
            assert_eq!(r.body.len(), want[i].len(), "{n}");
            assert!(r.body == want[i], "{n}: bytes differ");
        }
    };
    check(&s, &want);
    s.restart_after_kill();
    check(&s, &want);
    // Appends after recovery land after the recovered tail and survive too.
    for (i, n) in names.iter().enumerate() {
        let r = s.post(&format!("/v1/stream/{n}"), OCTET, b"after").expect(204);
        want[i].extend_from_slice(b"after");
        assert_eq!(r.next_offset(), offset(want[i].len() as u64));
    }
    s.restart_after_kill();
    check(&s, &want);
}

#[test]
fn fsync_never_still_survives_a_process_crash() {
    let mut s = Server::start_with(&["--fsync", "never"]);
    s.req("PUT", "/lazy", &[], b"").expect(201);
    s.put("/lazy/a", TEXT, b"one ").expect(201);
    s.post("/lazy/a", TEXT, b"two").expect(204);
    s.put("/v1/stream/b", OCTET, &all_bytes()).expect(201);
    s.restart_after_kill();
    assert_eq!(s.get("/lazy/a").expect(200).body, b"one two");
    assert_eq!(s.get("/v1/stream/b").expect(200).body, all_bytes());
    assert_eq!(s.get("/lazy").expect(200).json()["streams"], 1);
}

#[test]
fn bucket_deleted_and_recreated_survives_restart() {
    let mut s = Server::start();
    s.req("PUT", "/phoenix", &[], b"").expect(201);
    s.put("/phoenix/first", TEXT, b"1").expect(201);
    s.delete("/phoenix/first").expect(204);
    s.delete("/phoenix").expect(204);
    s.req("PUT", "/phoenix", &[], b"").expect(201);
    s.put("/phoenix/second", TEXT, b"2").expect(201);
    s.restart_after_kill();
    let v = s.get("/phoenix/streams").expect(200).json();
    assert_eq!(v["streams"].as_array().unwrap().len(), 1);
    assert_eq!(v["streams"][0]["stream_id"], "second");
    s.get("/phoenix/first").expect(404);
    assert_eq!(s.get("/phoenix/second").expect(200).body, b"2");
    s.req("PUT", "/phoenix", &[], b"").expect(409);
}
