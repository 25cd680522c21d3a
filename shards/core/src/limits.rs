//! The protocol core's fixed limits, in one place, with the relations
//! between them checked at compile time: what an offset, a TTL and a
//! producer number can carry, and the shape of a stream's record index.
//! The shard runtime's tuning is `sluice_shards::tuning`; the HTTP edge's
//! is `sluice::edge_limits`.

/// Largest byte position an offset token can carry (16 decimal digits).
pub const MAX_OFFSET: u64 = 9_999_999_999_999_999;
/// Largest `Stream-TTL`: the seconds from the Unix epoch to
/// 9999-12-31T23:59:59Z, the end of what `Stream-Expires-At` can express.
pub const MAX_TTL_SECS: u64 = 253_402_300_799;
/// Largest producer epoch or sequence number (exact in a JSON number).
pub const MAX_PRODUCER_INT: u64 = (1 << 53) - 1;

/// A file-system page: hole punching gives back whole pages only.
pub const PAGE: u64 = 4096;
/// Bytes per page of a stream's record index ([`crate::index`]): one
/// header (where the page starts in the stream) per page.
pub const INDEX_PAGE: u64 = PAGE;
/// Records per index entry, each entry with one CRC32C over their bytes.
pub const ENTRY_RECORDS: usize = 127;
/// An index entry takes no more records once its bytes reach this (a
/// longer record is an entry alone): a read checks the CRC of every entry
/// it touches, so this bounds what a short read reads beyond its range.
pub const ENTRY_BYTES: u64 = 256 << 10;
const _: () = {
    assert!(INDEX_PAGE.is_multiple_of(PAGE), "retention punches whole index pages");
    assert!(ENTRY_RECORDS > 0 && ENTRY_RECORDS <= u8::MAX as usize, "an entry's record count is one byte");
    assert!(MAX_OFFSET < u64::MAX / 2, "an offset plus any body size fits in a u64");
    assert!(MAX_TTL_SECS < u64::MAX / 1000 / 2, "a TTL in milliseconds, plus now, fits in a u64");
};
