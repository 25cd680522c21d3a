//! Append-batch frame decoding never panics, honours the frame limit, and
//! the frames it returns re-encode to exactly the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_shards::core::batch::decode_frames;

fuzz_target!(|data: &[u8]| {
    if let Ok(frames) = decode_frames(data, 8) {
        assert!(frames.len() <= 8);
        let mut again = Vec::with_capacity(data.len());
        for f in &frames {
            assert!(!f.is_empty());
            again.extend_from_slice(&(f.len() as u32).to_be_bytes());
            again.extend_from_slice(f);
        }
        assert_eq!(again, data);
    }
});
