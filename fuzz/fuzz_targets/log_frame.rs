//! Log frame decoding never panics, whatever is on disk.
//!
//! The input is tried twice: as raw segment bytes, and as a frame body behind
//! a correct length and CRC (so the fuzzer reaches the record decoder instead
//! of stopping at the checksum). Every record that decodes must re-encode to a
//! frame that decodes to the same record, with its bulk bytes at `data_at`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_shards::log::record::{read_frame, Frame, Record, FRAME_HEADER};

fn check(buf: &[u8]) {
    if let Frame::Record { record, len, data_at } = read_frame(buf) {
        assert!(len > FRAME_HEADER && len <= buf.len());
        bulk_at(&record, buf, data_at);
        let mut again = Vec::new();
        let enc = record.encode(&mut again);
        assert_eq!(enc.frame_len, again.len());
        match read_frame(&again) {
            Frame::Record { record: r2, len: l2, data_at: d2 } => {
                assert_eq!(r2, record);
                assert_eq!(l2, again.len());
                assert_eq!(d2, enc.data_at);
                bulk_at(&r2, &again, d2);
            }
            other => panic!("re-encoded record does not decode: {other:?}"),
        }
    }
}

fn bulk_at(record: &Record<'_>, frame: &[u8], data_at: usize) {
    let bulk: Option<&[u8]> = match record {
        Record::Append(a) => Some(a.data),
        Record::Snapshot(s) => Some(s.body),
        _ => None,
    };
    if let Some(bulk) = bulk {
        assert_eq!(&frame[data_at..data_at + bulk.len()], bulk);
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut framed = Vec::with_capacity(data.len() + FRAME_HEADER);
    framed.extend_from_slice(&(data.len() as u32).to_le_bytes());
    framed.extend_from_slice(&crc32c(data).to_le_bytes());
    framed.extend_from_slice(data);
    check(&framed);
});

/// CRC32C (Castagnoli), bitwise: independent of the crate under test.
fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}
