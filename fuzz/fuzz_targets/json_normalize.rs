//! JSON normalization never panics; what it accepts renders as a well-formed
//! JSON array with one element per message, its message lengths add up, each
//! stored record is one NDJSON line, and
//! normalizing a stored message again changes nothing.
//!
//! (Well-formed, not "parses into serde_json::Value": JSON allows numbers
//! like 1e99999 that do not fit an f64, and the server stores them as sent.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::value::RawValue;
use sluice_shards::core::json::{normalize, record_value, render_array, RECORD_END};

fuzz_target!(|data: &[u8]| {
    for allow_empty in [false, true] {
        let Ok(n) = normalize(data, allow_empty) else { continue };
        assert_eq!(n.lengths.iter().map(|l| *l as usize).sum::<usize>(), n.bytes.len());
        let mut out = Vec::new();
        render_array(&n.bytes, &mut out);
        let items: Vec<&RawValue> = serde_json::from_slice(&out).expect("rendered array is JSON");
        assert_eq!(items.len(), n.lengths.len());
        // Each stored message is already normal.
        let mut at = 0;
        for &len in &n.lengths {
            let msg = &n.bytes[at..at + len as usize - 1];
            assert_eq!(n.bytes[at + len as usize - 1], RECORD_END);
            assert!(!msg.contains(&RECORD_END), "a record holds no raw newline");
            if !msg.starts_with(b"[") {
                let again = normalize(msg, false).expect("a stored message normalizes");
                assert_eq!(record_value(&again.bytes), msg);
            }
            at += len as usize;
        }
    }
});
