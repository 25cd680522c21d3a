//! The chunked decoder never panics, never exceeds its limit, and decodes
//! the same body however the input is split into reads.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::http::chunked::ChunkedDecoder;

const LIMIT: u64 = 4096;

fn decode(input: &[u8], step: usize) -> Option<(Vec<u8>, usize)> {
    let mut d = ChunkedDecoder::new(LIMIT);
    let mut out = Vec::new();
    let mut used = 0;
    while used < input.len() && !d.is_done() {
        let end = (used + step).min(input.len());
        used += d.feed(&input[used..end], &mut out).ok()?;
    }
    assert!(out.len() as u64 <= LIMIT);
    d.is_done().then_some((out, used))
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, input)) = data.split_first() else { return };
    let whole = decode(input, input.len().max(1));
    let split = decode(input, usize::from(step).max(1));
    assert_eq!(whole, split);
});
