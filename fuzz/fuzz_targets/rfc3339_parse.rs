//! TTL and RFC 3339 parsing never panic; a parsed timestamp formats to a
//! canonical one that parses to the same instant.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_shards::core::ttl::{format_rfc3339, parse_rfc3339, parse_ttl};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Some(ttl) = parse_ttl(s) {
        assert_eq!(ttl.to_string(), s);
    }
    if let Ok(ms) = parse_rfc3339(s) {
        // Nothing beyond year 9999 is accepted, so every value renders back.
        let f = format_rfc3339(ms);
        assert_eq!(parse_rfc3339(&f), Ok(ms), "{s} -> {f}");
    }
});
