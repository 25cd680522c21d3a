//! Every fixed limit of the store and the protocol core, in one place, with
//! the relations between them checked at compile time. The limits an
//! operator sets are flags (`src/config.rs`); their ranges that the store
//! depends on are here too.

use std::time::Duration;

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
/// Stream-file reads go in pieces of this size (they stay in the CPU cache
/// between the kernel's copy and the copy into the response).
pub const READ_CHUNK: usize = 256 << 10;
/// Stream-file descriptors a shard keeps open before it closes them all.
pub const MAX_OPEN_FILES: usize = 512;
/// Streams whose files one flush writes and syncs at the same time (two
/// descriptors each).
pub const FLUSH_CONCURRENCY: usize = 8;
/// How often the flusher checks whether a flush is due.
pub const FLUSH_POLL: Duration = Duration::from_millis(50);
/// The longest an executor sleeps with a timer armed: the bound on a stall
/// of glommio's run loop (see `sluice_shards::tick`).
pub const REACTOR_TICK: Duration = Duration::from_millis(20);
/// Largest test-only time scale (`--test-time-scale`): periodic tasks run
/// at most this many times faster than in service.
pub const MAX_TIME_SCALE: u32 = 1000;
/// Flushes' worth of journal bytes writers may run ahead of the flusher
/// before they wait for it (one is being written while the next fills).
pub const FLUSH_BACKLOG: u64 = 4;
/// How long a reading of the disk's free bytes stands before the write path
/// reads it again (appends count it down meanwhile).
pub const DISK_FREE_REFRESH: Duration = Duration::from_millis(50);
/// `--flush-bytes` range.
pub const MIN_FLUSH_BYTES: u64 = 1 << 20;
pub const MAX_FLUSH_BYTES: u64 = 4 << 30;
/// `--flush-interval` range, in milliseconds.
pub const MIN_FLUSH_INTERVAL_MS: u64 = 100;
pub const MAX_FLUSH_INTERVAL_MS: u64 = 30_000;
/// `--segment-bytes` range.
pub const MIN_SEGMENT_BYTES: u64 = 4 << 10;
pub const MAX_SEGMENT_BYTES: u64 = 64 << 30;
/// Journal segments are zero-filled in pieces of this size.
pub const FILL_CHUNK: usize = 1 << 20;
/// The smallest unit a disk writes whole (a logical block): a power loss
/// during a write loses whole sectors of it, never part of one. Recovery
/// tells a torn journal tail from damage by it (`log::recovery`); a disk
/// with larger sectors loses whole 512-byte pieces too.
pub const SECTOR: usize = 512;

const _: () = {
    assert!(INDEX_PAGE.is_multiple_of(PAGE), "retention punches whole index pages");
    assert!(ENTRY_RECORDS > 0 && ENTRY_RECORDS <= u8::MAX as usize, "an entry's record count is one byte");
    assert!(FLUSH_CONCURRENCY * 2 <= MAX_OPEN_FILES, "one flush batch fits in the descriptor cache");
    assert!(FLUSH_POLL.as_millis() < MIN_FLUSH_INTERVAL_MS as u128, "the flusher looks more often than it flushes");
    assert!(REACTOR_TICK.as_millis() < FLUSH_POLL.as_millis(), "the tick, not the flusher, bounds a stall");
    assert!(FLUSH_BACKLOG >= 2, "writers may fill the next flush while one is written");
    assert!(MIN_FLUSH_BYTES <= MAX_FLUSH_BYTES && MIN_FLUSH_INTERVAL_MS <= MAX_FLUSH_INTERVAL_MS);
    assert!(MAX_FLUSH_BYTES.checked_mul(FLUSH_BACKLOG).is_some(), "the backlog bound does not overflow");
    assert!(MIN_SEGMENT_BYTES > crate::record::SEAL_FRAME as u64, "a segment holds its seal and more");
    assert!(PAGE.is_multiple_of(SECTOR as u64), "a page is whole sectors");
    assert!(MAX_OFFSET < u64::MAX / 2, "an offset plus any body size fits in a u64");
    assert!(MAX_TTL_SECS < u64::MAX / 1000 / 2, "a TTL in milliseconds, plus now, fits in a u64");
};
