//! Cross-shard forwarding: pooled keep-alive connections rotating over
//! streams of every shard (the accepting shard forwards each request to the
//! stream's owner and writes back its answer), with large bodies, HEAD,
//! 100-continue, long-polls woken from elsewhere and SSE on a remote stream.

mod common;

use common::{build, find, offset, Server, TempDir};
use sluice_shards::ids::stream_shard;
use std::time::Duration;

const TEXT: &str = "text/plain";
const SHARDS: usize = 4;

/// One stream name per shard, so every connection has three remote streams.
fn one_per_shard(tag: &str) -> Vec<String> {
    (0..SHARDS)
        .map(|shard| {
            (0..).map(|i| format!("{tag}{i}")).find(|n| stream_shard("v1-stream", n, SHARDS) == shard).unwrap()
        })
        .collect()
}

fn four_shards() -> (TempDir, Server) {
    let dir = TempDir::new("fwd");
    let s = Server::start_in(dir.path(), SHARDS, &[]);
    (dir, s)
}

/// A four-shard server with one text stream per shard.
fn four_shards_with_streams(tag: &str) -> (TempDir, Server, Vec<String>) {
    let (dir, s) = four_shards();
    let streams = one_per_shard(tag);
    for n in &streams {
        s.create(&format!("/v1/stream/{n}"), TEXT);
    }
    (dir, s, streams)
}

#[test]
fn pooled_connections_rotating_over_every_shard_keep_each_writers_order() {
    let (_dir, s, streams) = four_shards_with_streams("pool");
    const WRITERS: usize = 8;
    const ROUNDS: usize = 40;
    let addr = s.addr;
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let streams = streams.clone();
            std::thread::spawn(move || {
                let mut c = common::Conn::open(addr);
                for round in 0..ROUNDS {
                    // Each round pipelines one append to every stream.
                    let mut batch = Vec::new();
                    for n in &streams {
                        batch.extend(build(
                            "POST",
                            &format!("/v1/stream/{n}"),
                            &[("Content-Type", TEXT)],
                            format!("w{w}r{round};").as_bytes(),
                        ));
                    }
                    c.send(&batch).unwrap();
                    for _ in &streams {
                        let r = c.read_response(false).expect(204);
                        assert!(r.has("stream-next-offset"));
                    }
                }
                assert!(c.buffered().is_empty());
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for n in &streams {
        let r = s.get(&format!("/v1/stream/{n}?offset=-1")).expect(200);
        let text = r.text();
        let entries: Vec<&str> = text.split_terminator(';').collect();
        assert_eq!(entries.len(), WRITERS * ROUNDS, "stream {n}");
        for w in 0..WRITERS {
            let mine: Vec<String> =
                entries.iter().filter(|e| e.starts_with(&format!("w{w}r"))).map(|e| e.to_string()).collect();
            let want: Vec<String> = (0..ROUNDS).map(|r| format!("w{w}r{r}")).collect();
            assert_eq!(mine, want, "writer {w} on stream {n}");
        }
        assert_eq!(r.next_offset(), offset(text.len() as u64));
    }
}

#[test]
fn forwarded_large_reads_head_and_continue_arrive_whole() {
    let (_dir, s) = four_shards();
    let streams = one_per_shard("big");
    // 300 KiB per stream: read answers beyond the inline-render size.
    let data: Vec<u8> = (0..300 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    let mut c = s.connect();
    for n in &streams {
        let path = format!("/v1/stream/{n}");
        c.request("PUT", &path, &[("Content-Type", TEXT)], b"").expect(201);
        // Expect: 100-continue is answered by the accepting shard before the body.
        let len = data.len().to_string();
        let head =
            build("POST", &path, &[("Content-Type", TEXT), ("Expect", "100-continue"), ("Content-Length", &len)], b"");
        c.send(&head).unwrap();
        let cont = c.read_until(b"\r\n\r\n").unwrap();
        assert!(cont.starts_with(b"HTTP/1.1 100 Continue"), "{:?}", String::from_utf8_lossy(&cont));
        c.send(&data).unwrap();
        assert_eq!(c.read_response(false).expect(204).next_offset(), offset(data.len() as u64));
    }
    for n in &streams {
        let path = format!("/v1/stream/{n}?offset=-1");
        let r = c.request("GET", &path, &[], b"").expect(200);
        assert_eq!(r.body, data, "stream {n}");
        let h = c.request("HEAD", &path, &[], b"");
        assert_eq!(h.status, 200);
        assert!(h.body.is_empty());
    }
    // The connection is still in step after all of it.
    assert_eq!(c.request("GET", "/v1/healthz", &[], b"").expect(200).body, b"ok\n");
}

#[test]
fn forwarded_long_polls_are_woken_by_appends_from_other_connections() {
    let (_dir, s, streams) = four_shards_with_streams("lp");
    let addr = s.addr;
    let pollers: Vec<_> = streams
        .iter()
        .map(|n| {
            let path = format!("/v1/stream/{n}?offset={}&live=long-poll", offset(0));
            std::thread::spawn(move || common::Conn::open(addr).request("GET", &path, &[], b""))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    for n in &streams {
        s.post(&format!("/v1/stream/{n}"), TEXT, n.as_bytes()).expect(204);
    }
    for (p, n) in pollers.into_iter().zip(&streams) {
        let r = p.join().unwrap().expect(200);
        assert_eq!(r.body, n.as_bytes());
    }
}

#[test]
fn sse_on_a_remote_stream_moves_its_connection_and_streams_live() {
    let (_dir, s) = four_shards();
    let streams = one_per_shard("sse");
    for n in &streams {
        s.create(&format!("/v1/stream/{n}"), TEXT);
        s.post(&format!("/v1/stream/{n}"), TEXT, b"first").expect(204);
    }
    // A keep-alive connection serves a plain request, then turns into an SSE
    // response for a stream that is (for three of the four) on another shard.
    for n in &streams {
        let mut c = s.connect();
        c.request("GET", "/v1/healthz", &[], b"").expect(200);
        c.send(&build("GET", &format!("/v1/stream/{n}?offset=-1&live=sse"), &[], b"")).unwrap();
        let got = c.read_until(b"first").unwrap();
        assert!(got.starts_with(b"HTTP/1.1 200 OK"));
        s.post(&format!("/v1/stream/{n}"), TEXT, b"second").expect(204);
        let more = c.read_until(b"second").unwrap();
        assert!(find(&more, b"event: data").is_some(), "{:?}", String::from_utf8_lossy(&more));
    }
}

/// Opens an SSE read from the tail and waits for its first event (so the
/// subscription exists); returns the connection and that event's bytes.
fn subscribe_at_tail(s: &Server, path: &str) -> (common::Conn, Vec<u8>) {
    let mut c = s.connect();
    c.send(&build("GET", &format!("{path}?offset=now&live=sse"), &[], b"")).unwrap();
    let head = c.read_until(b"\r\n\r\n").unwrap();
    assert!(head.starts_with(b"HTTP/1.1 200 OK"), "{:?}", String::from_utf8_lossy(&head));
    let first = c.read_until(b"\n\n").unwrap();
    (c, first)
}

/// Reads the SSE response to its end: the data of every `data` event and the
/// offset of the final control event, which must close the stream.
fn read_to_close((mut c, first): (common::Conn, Vec<u8>)) -> (String, u64) {
    let mut raw = first;
    raw.extend(c.read_to_eof().unwrap());
    let events = common::sse_events(&raw);
    let last = events.last().expect("events");
    assert_eq!(last.0, "control");
    let v: serde_json::Value = serde_json::from_str(&last.1).unwrap();
    assert_eq!(v["streamClosed"], true, "{last:?}");
    let data = events.iter().filter(|(name, _)| name == "data").map(|(_, d)| d.as_str()).collect();
    (data, common::offset_pos(v["streamNextOffset"].as_str().unwrap()))
}

#[test]
fn sse_subscribers_on_every_shard_receive_each_event_once_in_order() {
    let (_dir, s) = four_shards();
    for n in one_per_shard("fan") {
        let path = format!("/v1/stream/{n}");
        s.create(&path, TEXT);
        s.post(&path, TEXT, b"history;").expect(204);
        // Twelve connections: whatever shards they land on, most are remote.
        let subs: Vec<_> = (0..12).map(|_| subscribe_at_tail(&s, &path)).collect();
        let mut sent = String::new();
        for i in 0..20 {
            let body = format!("e{i};");
            s.post(&path, TEXT, body.as_bytes()).expect(204);
            sent.push_str(&body);
        }
        s.req("POST", &path, &[("Stream-Closed", "true")], b"").expect(204);
        for sub in subs {
            assert_eq!(read_to_close(sub), (sent.clone(), 8 + sent.len() as u64), "stream {n}");
        }
    }
}

#[test]
fn sse_subscribers_joining_during_appends_see_a_gapless_suffix() {
    let (_dir, s, streams) = four_shards_with_streams("join");
    let addr = s.addr;
    let writers: Vec<_> = streams
        .iter()
        .map(|n| {
            let path = format!("/v1/stream/{n}");
            std::thread::spawn(move || {
                let mut c = common::Conn::open(addr);
                for i in 0..300 {
                    c.request("POST", &path, &[("Content-Type", TEXT)], format!("{i:03};").as_bytes()).expect(204);
                }
            })
        })
        .collect();
    // Subscribers join while the writers run.
    let mut subs = Vec::new();
    for round in 0..6 {
        for n in &streams {
            subs.push((n.clone(), subscribe_at_tail(&s, &format!("/v1/stream/{n}"))));
        }
        std::thread::sleep(Duration::from_millis(5 * round));
    }
    for w in writers {
        w.join().unwrap();
    }
    for n in &streams {
        s.req("POST", &format!("/v1/stream/{n}"), &[("Stream-Closed", "true")], b"").expect(204);
    }
    let contents: std::collections::HashMap<&String, String> =
        streams.iter().map(|n| (n, s.get(&format!("/v1/stream/{n}?offset=-1")).expect(200).text())).collect();
    for (n, sub) in subs {
        let all = &contents[&n];
        assert_eq!(all.len(), 300 * 4);
        let (data, end) = read_to_close(sub);
        assert_eq!(end as usize, all.len(), "stream {n}");
        assert_eq!(data, all[all.len() - data.len()..], "stream {n}: not a gapless suffix");
    }
}

#[test]
fn a_subscriber_that_stops_reading_never_sees_a_gap() {
    let (_dir, s, streams) = four_shards_with_streams("slow");
    let path = format!("/v1/stream/{}", streams[0]);
    // Subscribers that read nothing while far more than their socket buffers
    // (and the relay's recent events) is appended.
    let subs: Vec<_> = (0..8).map(|_| subscribe_at_tail(&s, &path)).collect();
    let chunk: Vec<u8> = (0..64 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    let mut c = s.connect();
    for _ in 0..200 {
        c.request("POST", &path, &[("Content-Type", TEXT)], &chunk).expect(204);
    }
    c.request("POST", &path, &[("Stream-Closed", "true")], b"").expect(204);
    let all = chunk.repeat(200);
    for (mut conn, first) in subs {
        let mut raw = first;
        raw.extend(conn.read_to_eof().unwrap());
        let events = common::sse_events(&raw);
        let data: usize = events.iter().filter(|(n, _)| n == "data").map(|(_, d)| d.len()).sum();
        // Whatever a subscriber got is the stream from its start, in order:
        // all of it (then the final control event), or a prefix cut at an
        // event boundary when it fell too far behind.
        let mut at = 0;
        for (name, d) in &events {
            if name == "data" {
                assert!(d.as_bytes() == &all[at..at + d.len()], "gap or reorder at {at}");
                at += d.len();
            }
        }
        let last = events.last().unwrap();
        let total = all.len();
        if data == total {
            assert!(last.1.contains("\"streamClosed\":true"), "{last:?}");
        } else {
            assert!(data < total && !last.1.contains("streamClosed"), "{data} of {total}, {last:?}");
        }
    }
}

/// The sum of `name`'s samples over every shard.
fn metric_total(s: &Server, name: &str) -> f64 {
    let text = s.get("/v1/metrics").expect(200).text();
    let prefix = format!("{name}{{");
    text.lines().filter(|l| l.starts_with(&prefix)).map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap()).sum()
}

/// A connection that keeps writing one stream of another shard moves to
/// that shard after a few forwarded requests (`edge_limits::MOVE_AFTER`, 8):
/// runs of 40 pipelined appends to each shard's stream are forwarded at
/// most 7 times per run (120 times if the connection stayed), and every
/// append lands once, in order.
#[test]
fn a_connection_writing_one_remote_stream_moves_to_its_owner() {
    let (_dir, s, streams) = four_shards_with_streams("aff");
    const RUN: usize = 40;
    let before = metric_total(&s, "sluice_cross_shard_requests_total");
    let mut c = common::Conn::open(s.addr);
    for n in &streams {
        let mut batch = Vec::new();
        for i in 0..RUN {
            batch.extend(build(
                "POST",
                &format!("/v1/stream/{n}"),
                &[("Content-Type", TEXT)],
                format!("{i};").as_bytes(),
            ));
        }
        c.send(&batch).unwrap();
        for _ in 0..RUN {
            c.read_response(false).expect(204);
        }
    }
    assert!(c.buffered().is_empty());
    // Each stream's appends are forwarded at most 7 times before the
    // connection moves (160 appends, 3 in 4 remote, would forward ~120).
    // A scrape gathers the other shards' counters over the mesh and counts
    // up to 2 per other shard, landing in the count on either side of it.
    let forwarded = metric_total(&s, "sluice_cross_shard_requests_total") - before;
    let scrapes = 2 * 2 * 3;
    assert!(forwarded <= (streams.len() * 7 + scrapes) as f64, "{forwarded} forwarded requests");
    let want: String = (0..RUN).map(|i| format!("{i};")).collect();
    for n in &streams {
        assert_eq!(s.get(&format!("/v1/stream/{n}?offset=-1")).expect(200).text(), want, "stream {n}");
    }
}
