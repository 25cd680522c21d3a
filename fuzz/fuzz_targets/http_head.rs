//! Request-head parsing never panics, respects its limits, and a head it
//! accepts lies entirely within the input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::http::{parse_head, HeadError};

fuzz_target!(|data: &[u8]| {
    match parse_head(data, 1024, 16) {
        Ok(h) => {
            assert!(h.len <= data.len() && h.len <= 1024);
            assert!(h.header_count() <= 16);
            assert!(h.target().len() < h.len);
        }
        Err(HeadError::Partial) => assert!(data.len() < 1024),
        Err(_) => {}
    }
});
