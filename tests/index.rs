//! Record lookups through the on-disk ordinal index: a JSON stream of
//! thousands of records of uneven sizes, flushed to its stream files, then
//! read by record ordinal, by offset and in cut reads; a restart reads the
//! same through the checkpoint.

mod common;

use common::{offset, Server};
use std::time::Duration;

const JSON: &str = "application/json";
const RECORDS: usize = 20_000;

/// Record `i`'s stored NDJSON bytes: sizes vary from 8 to about 300 bytes,
/// in runs (lengths of one and two LEB128 bytes), over about eight index pages,
/// so the search over page headers must narrow several times.
fn record(i: usize) -> String {
    let pad = if (i / 700).is_multiple_of(2) { (i * 7) % 13 } else { 200 + i % 97 };
    format!("{{\"i\":{i},\"p\":\"{}\"}}\n", "x".repeat(pad))
}

#[test]
fn record_lookups_through_the_on_disk_index() {
    let mut s = Server::start_with(&["--flush-interval", "100ms"]);
    s.req("PUT", "/index", &[], b"").expect(201);
    let p = "/index/j";
    s.put(p, JSON, b"").expect(201);
    let mut starts = vec![0u64];
    for chunk in (0..RECORDS).collect::<Vec<_>>().chunks(250) {
        let body =
            format!("[{}]", chunk.iter().map(|&i| record(i).trim_end().to_string()).collect::<Vec<_>>().join(","));
        s.post(p, JSON, body.as_bytes()).expect(204);
        for &i in chunk {
            starts.push(starts.last().unwrap() + record(i).len() as u64);
        }
    }
    // Let the flush move everything into the stream files.
    std::thread::sleep(Duration::from_millis(500));
    for round in 0..2 {
        for r in [0usize, 1, 699, 700, 701, 2500, 4999, 9100, 13_999, 17_500, 19_998, 19_999] {
            let got = s.get(&format!("{p}?record={r}&max_records=2")).expect(200);
            let want = format!("{}{}", record(r), if r + 1 < RECORDS { record(r + 1) } else { String::new() });
            assert_eq!(got.text(), want, "round {round}: record {r}");
            assert_eq!(got.h("stream-record-start"), r.to_string());
            // By offset: the record starting there, read whole.
            let got = s.get(&format!("{p}?offset={}&max_bytes=1", offset(starts[r]))).expect(200);
            assert!(record(r).as_bytes().starts_with(&got.body), "round {round}: offset of record {r}");
        }
        // Everything reads back whole.
        let (all, tail) = s.read_all(p);
        assert_eq!(tail, starts[RECORDS]);
        assert_eq!(all.len() as u64, tail);
        s.restart_after_kill();
    }
}
