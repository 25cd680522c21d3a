//! Damage inside stream files is never served: a flipped byte in a
//! stream's data file, or a flipped record length in its index, makes every
//! read that touches the damaged index entry answer 500 naming the stream
//! and the damage, while reads of undamaged entries, and other streams,
//! still get their exact bytes. Against the real binary.

mod common;

use common::{offset, Resp, Server, TempDir};
use std::path::{Path, PathBuf};

/// One stream flushed into its files, and the server holding it.
fn flushed(dir: &TempDir) -> Server {
    let s = Server::start_in(dir.path(), 1, &["--flush-interval", "100ms"]);
    s.req("PUT", "/damage", &[], b"").expect(201);
    s
}

/// The stream file of `ext` whose data file is `len` bytes long (each test
/// stream has its own length).
fn stream_file(dir: &Path, len: u64, ext: &str) -> PathBuf {
    let streams = dir.join("shard-0/streams");
    for e in std::fs::read_dir(&streams).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "data") && p.metadata().unwrap().len() == len {
            return p.with_extension(ext);
        }
    }
    panic!("no data file of {len} bytes in {}", streams.display());
}

/// Index page 0 of `idx`: each entry's byte range, and where each of its
/// record lengths sits in the file (see `shards/core/src/index.rs`).
fn entries(idx: &[u8]) -> Vec<((u64, u64), Vec<usize>)> {
    let mut at = 16;
    let mut end = u64::from_le_bytes(idx[..8].try_into().unwrap());
    let mut out = Vec::new();
    while at < 4096.min(idx.len()) && idx[at] != 0 {
        let (count, start) = (idx[at] as usize, end);
        at += 5;
        let mut lengths = Vec::new();
        for _ in 0..count {
            lengths.push(at);
            let (mut v, mut shift) = (0u64, 0);
            loop {
                let b = idx[at];
                at += 1;
                v |= u64::from(b & 0x7f) << shift;
                shift += 7;
                if b & 0x80 == 0 {
                    break;
                }
            }
            end += v;
        }
        out.push(((start, end), lengths));
    }
    out
}

fn flip(path: &Path, pos: usize, mask: u8) {
    let mut b = std::fs::read(path).unwrap();
    b[pos] ^= mask;
    std::fs::write(path, b).unwrap();
}

/// A 500 naming the stream and the damage.
fn refused(r: Resp, stream: &str, what: &str) {
    let text = r.text();
    assert_eq!(r.status, 500, "{what}: got {} ({} bytes)", r.status, r.body.len());
    assert!(text.starts_with(&format!("stream damage/{stream} is damaged: ")), "{what}: {text}");
    assert!(!r.has("retry-after"), "{what}: retrying does not mend damage");
}

#[test]
fn a_flipped_data_byte_fails_its_entry_and_nothing_else() {
    let dir = TempDir::new("damage-data");
    let s = flushed(&dir);
    let p = "/damage/bytes";
    s.put(p, "application/octet-stream", b"").expect(201);
    let mut all = Vec::new();
    for i in 0..300u32 {
        let rec: Vec<u8> = (0..100u32).map(|j| (i * 7 + j * 13) as u8).collect();
        s.post(p, "application/octet-stream", &rec).expect(204);
        all.extend_from_slice(&rec);
    }
    // A control stream on the same shard.
    s.put("/damage/other", "application/octet-stream", &all[..777]).expect(201);
    s.wait_flushed();
    let data = stream_file(dir.path(), all.len() as u64, "data");
    let es = entries(&std::fs::read(data.with_extension("idx")).unwrap());
    assert!(es.len() >= 3, "several entries: {es:?}");
    let ((a, b), _) = es[1];
    let (a, b) = (a as usize, b as usize);
    let flipped = a + (b - a) / 3;
    flip(&data, flipped, 0x20);

    refused(s.get(&format!("{p}?offset=-1")), "bytes", "the whole stream");
    let range = |from: usize, n: usize| s.get(&format!("{p}?offset={}&max_bytes={n}", offset(from as u64)));
    refused(range(flipped - 5, 10), "bytes", "a range holding the flipped byte");
    refused(range(flipped + 10, 20), "bytes", "a range inside the damaged entry, beside the byte");
    refused(range(a - 10, 20), "bytes", "a range ending inside the damaged entry");
    // Undamaged entries, before and after, and ranges inside them.
    for (from, n) in [(0, a), (3, 50), (b, all.len() - b), (b + 17, 40), (a - 30, 30)] {
        let r = range(from, n).expect(200);
        assert!(r.body == all[from..from + n], "[{from}, {})", from + n);
    }
    assert_eq!(s.get("/damage/other?offset=-1").expect(200).body, &all[..777]);
    s.get("/v1/healthz").expect(200);
}

#[test]
fn a_flipped_index_length_never_serves_a_misaligned_record() {
    let dir = TempDir::new("damage-index");
    let s = flushed(&dir);
    let p = "/damage/json";
    s.put(p, "application/json", b"").expect(201);
    // Several index pages of one-byte lengths.
    for batch in 0..10 {
        let recs: Vec<String> = (0..1000).map(|i| format!("{{\"n\":{}}}", batch * 1000 + i)).collect();
        s.post(p, "application/json", format!("[{}]", recs.join(",")).as_bytes()).expect(204);
    }
    s.wait_flushed();
    let reads: Vec<String> = [0, 3, 10, 120, 126, 127, 130, 500, 4000, 4100, 9000, 9990]
        .iter()
        .map(|r| format!("{p}?record={r}&max_records=7"))
        .chain([format!("{p}?offset=-1")])
        .collect();
    let good: Vec<Vec<u8>> = reads.iter().map(|t| s.get(t).expect(200).body).collect();
    let (_, len) = s.read_all(p);
    let idx = stream_file(dir.path(), len, "idx");
    let es = entries(&std::fs::read(&idx).unwrap());
    flip(&idx, es[0].1[3], 0x01);

    let mut refusals = 0;
    for (t, want) in reads.iter().zip(&good) {
        let r = s.get(t);
        if r.status == 200 {
            assert!(&r.body == want, "{t}: a misaligned read was served: {}", r.text());
        } else {
            refused(r, "json", t);
            refusals += 1;
        }
    }
    assert!(refusals >= 2, "reads through the damaged page are refused");
    s.get(&format!("{p}?record=9000&max_records=7")).expect(200);
}
