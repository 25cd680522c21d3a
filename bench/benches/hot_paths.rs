//! Micro-benchmarks of the per-request hot paths: log record encoding (with
//! CRC32C), recovery frame decoding, JSON normalization, offset token
//! rendering/parsing, the message index lookup, and the HTTP edge (request-head
//! and target parsing, an append's answer, chunked decoding, SSE event
//! encoding).
//!
//! Run: `cargo bench -p sluice-bench --bench hot_paths`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use sluice::http::chunked::ChunkedDecoder;
use sluice::http::headers as h;
use sluice::http::parse_head;
use sluice::http::response::{Rendered, Response};
use sluice::http::url::parse_target;
use sluice::sse_wire::{encode_control, encode_data_event, Control};
use sluice_shards::core::json::normalize;
use sluice_shards::core::StreamState;
use sluice_shards::log::record::{read_frame, Frame};
use sluice_shards::log::{AppendRecord, CreateRecord, ProducerStamp, Record};
use sluice_shards::offset::{Offset, OffsetQuery};
use std::hint::black_box;

fn append_record(data: &[u8], producer: bool) -> Record<'_> {
    Record::Append(AppendRecord {
        handle: 42,
        at_ms: 1_700_000_000_000,
        stream_seq: None,
        producer: producer.then(|| ProducerStamp { id: "writer-1".into(), epoch: 3, seq: 99 }),
        close: false,
        messages: vec![],
        data,
    })
}

fn record_encode(c: &mut Criterion) {
    let mut g = c.benchmark_group("record_encode");
    for size in [256usize, 4096, 65536] {
        let data = vec![b'x'; size];
        let rec = append_record(&data, false);
        let mut out = Vec::with_capacity(size + 128);
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(format!("append_{size}B"), |b| {
            b.iter(|| {
                out.clear();
                black_box(black_box(&rec).encode(&mut out))
            })
        });
    }
    let data = vec![b'x'; 256];
    let rec = append_record(&data, true);
    let mut out = Vec::with_capacity(512);
    g.throughput(Throughput::Bytes(256));
    g.bench_function("append_256B_with_producer", |b| {
        b.iter(|| {
            out.clear();
            black_box(black_box(&rec).encode(&mut out))
        })
    });
    g.finish();
}

fn frame_decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("read_frame");
    for size in [256usize, 4096, 65536] {
        let data = vec![b'x'; size];
        let mut buf = Vec::new();
        append_record(&data, true).encode(&mut buf);
        // Recovery scans frames followed by more bytes (the next frame or zeros).
        buf.extend_from_slice(&[0; 64]);
        assert!(matches!(read_frame(&buf), Frame::Record { .. }));
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(format!("append_{size}B"), |b| b.iter(|| black_box(read_frame(black_box(&buf)))));
    }
    g.finish();
}

fn json_normalize(c: &mut Criterion) {
    let mut g = c.benchmark_group("json_normalize");
    let one = br#"{"type":"message","user":"alice","text":"hello, world","n":12,"tags":["a","b"],"ok":true}"#.to_vec();
    let mut arr = b"[".to_vec();
    for i in 0..20 {
        if i > 0 {
            arr.extend_from_slice(b", ");
        }
        arr.extend_from_slice(
            format!(r#"{{ "i": {i}, "text": "line {i} with \"quotes\"", "v": [1, 2, 3] }}"#).as_bytes(),
        );
    }
    arr.push(b']');
    for (name, body) in [("object_90B", &one), ("array_20_objects", &arr)] {
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_function(name, |b| b.iter(|| black_box(normalize(black_box(body), false).expect("valid"))));
    }
    g.finish();
}

fn offsets(c: &mut Criterion) {
    let mut g = c.benchmark_group("offset");
    g.bench_function("render", |b| b.iter(|| black_box(black_box(Offset(123_456_789_012)).render())));
    let token = Offset(123_456_789_012).to_string();
    g.bench_function("parse", |b| b.iter(|| black_box(Offset::parse(black_box(&token)))));
    g.bench_function("query_parse", |b| b.iter(|| black_box(OffsetQuery::parse(black_box(&token)))));
    g.finish();
}

/// A stream with `n` visible 256 B messages.
fn stream_with(n: usize) -> StreamState {
    let create = CreateRecord::bare(1, "v1-stream", "s", "text/plain", 1);
    let mut s = StreamState::from_create(&create);
    let data = [b'x'; 256];
    for _ in 0..n {
        s.apply_append(&plain_append(&data), 1);
    }
    let (tail, records) = (s.tail(), s.records());
    s.publish(tail, records, false);
    s
}

fn index(c: &mut Criterion) {
    // The lookup in the unflushed tail (memory); flushed records are found
    // through the on-disk index (bench/store.sh measures reads end to end).
    let mut g = c.benchmark_group("point_in_memory");
    for n in [1_000usize, 1_000_000] {
        let s = stream_with(n);
        let tail = s.tail();
        // Pseudo-random offsets (an LCG), precomputed so the loop measures lookups only.
        let mut x = 12345u64;
        let probes: Vec<u64> = (0..4096)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 11) % tail
            })
            .collect();
        let mut i = 0;
        g.bench_function(format!("{n}_messages"), |b| {
            b.iter(|| {
                i = (i + 1) & 4095;
                black_box(s.point_in_memory(black_box(probes[i])))
            })
        });
    }
    g.bench_function("apply_append_256B_x1000", |b| {
        b.iter_batched_ref(
            || stream_with(0),
            |s| {
                let data = [b'x'; 256];
                for _ in 0..1000 {
                    black_box(s.apply_append(&plain_append(&data), 1));
                }
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// An append of `data` to stream handle 1 with no producer, seq or close.
fn plain_append(data: &[u8]) -> AppendRecord<'_> {
    AppendRecord { handle: 1, at_ms: 2, stream_seq: None, producer: None, close: false, messages: vec![], data }
}

/// The HTTP edge: request-head parsing, chunked decoding, SSE encoding.
fn edge(c: &mut Criterion) {
    let mut g = c.benchmark_group("edge");
    let head = b"POST /v1/stream/run-42 HTTP/1.1\r\nHost: 127.0.0.1:4437\r\nContent-Type: text/plain\r\n\
Content-Length: 256\r\nProducer-Id: w1\r\nProducer-Epoch: 0\r\nProducer-Seq: 17\r\n\r\n";
    g.throughput(Throughput::Bytes(head.len() as u64));
    g.bench_function("parse_head_post", |b| b.iter(|| parse_head(black_box(head), 16 * 1024, 64).map(|h| h.len)));
    let target = "/v1/stream/chat/run-42?offset=0000000000000000_0000000000001024&live=long-poll";
    g.throughput(Throughput::Bytes(target.len() as u64));
    g.bench_function("parse_target", |b| b.iter(|| parse_target(black_box(target)).map(|t| t.segments.len())));
    g.throughput(Throughput::Elements(1));
    g.bench_function("append_answer", |b| {
        b.iter(|| {
            let r = Response::new(200)
                .header(h::STREAM_NEXT_OFFSET, Offset(black_box(123_456)))
                .header(h::PRODUCER_EPOCH, black_box(0u64))
                .header(h::PRODUCER_SEQ, black_box(17u64));
            Rendered::new(r, false).head.len()
        })
    });
    let mut chunked = Vec::new();
    for _ in 0..16 {
        chunked.extend_from_slice(b"100\r\n");
        chunked.extend_from_slice(&[b'x'; 256]);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    g.throughput(Throughput::Bytes(chunked.len() as u64));
    g.bench_function("chunked_decode_16x256B", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(4096);
            ChunkedDecoder::new(1 << 20).feed(black_box(&chunked), &mut out).map(|n| (n, out.len()))
        })
    });
    let payload = [b'a'; 256];
    g.throughput(Throughput::Bytes(payload.len() as u64));
    g.bench_function("sse_event_256B", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(512);
            encode_data_event(black_box(&payload), &mut out);
            encode_control(
                Control { next: 1 << 20, cursor: Some(4242), up_to_date: true, ..Control::default() },
                &mut out,
            );
            out.len()
        })
    });
    g.finish();
}

criterion_group!(benches, record_encode, frame_decode, json_normalize, offsets, index, edge);
criterion_main!(benches);
