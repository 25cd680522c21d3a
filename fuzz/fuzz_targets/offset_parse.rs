//! Offset parsing never panics, and every offset it accepts renders back to
//! exactly the token it came from.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_shards::offset::{Offset, OffsetQuery};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    match OffsetQuery::parse(s) {
        Some(OffsetQuery::At(o)) => {
            assert_eq!(o.to_string(), s);
            assert_eq!(Offset::parse(&o.to_string()), Some(o));
        }
        Some(OffsetQuery::Start) => assert_eq!(s, "-1"),
        Some(OffsetQuery::Now) => assert_eq!(s, "now"),
        None => assert!(Offset::parse(s).is_none()),
    }
});
