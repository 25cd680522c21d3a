//! The HTTP edge's fixed limits and periods, in one place, with the
//! relations between them checked at compile time (the shard runtime's are
//! `sluice_shards::tuning`, the protocol core's `sluice_shards::core::limits`;
//! the limits an operator sets are flags, `config`).

use std::ops::RangeInclusive;
use std::time::Duration;

/// Read sizes: small for request heads (most requests are a few hundred
/// bytes), larger while a body is arriving. A connection's buffer zeroes
/// room when it grows (`InBuf`), so a read never asks for much more than it
/// expects.
pub const HEAD_READ: usize = 8 * 1024;
pub const BODY_READ: usize = 256 * 1024;
/// Room a connection's input buffer keeps between requests; more (a
/// chunked body's reads) is let go once its request is done.
pub const KEPT_READ_ROOM: usize = 2 * HEAD_READ;
/// Buffers of finished request heads' fields a shard keeps for its next
/// heads (`http::shelf`), at most this many and each of at most this room;
/// a larger one is freed. A head lives until its request is answered, so a
/// group commit's worth of appends (hundreds) hold one each at once.
pub const KEPT_HEADS: usize = 1024;
pub const KEPT_HEAD_ROOM: usize = 2 * 1024;
/// Buffers of sent responses (head and small body) a shard keeps for its
/// next responses and forwarded requests, at most this many and each of at
/// most this room.
pub const KEPT_RESPONSES: usize = 256;
pub const KEPT_RESPONSE_ROOM: usize = 4 * 1024;
/// Room a forwarded request's head is copied into: the owner renders a
/// whole answer into the same buffer (an append's is about 250 bytes), so
/// it goes back to the shard that allocated it, to be freed there.
pub const FORWARDED_ROOM: usize = 512;
/// Header fields a response's list has room for: a typical response's
/// own and `finish`'s.
pub const FIELDS_ROOM: usize = 8;
/// Emptied header lists of rendered responses a shard keeps for its next
/// responses (about 450 bytes each).
pub const KEPT_FIELD_LISTS: usize = 256;
const _: () = assert!(FORWARDED_ROOM <= KEPT_RESPONSE_ROOM, "a forwarded request's buffer is kept once answered");
/// A client must take each piece of a response this long within
/// `--idle-timeout`, or its connection is reset (the HTTP edge's progress
/// deadline; at the shortest timeout, 1 s, a peer slower than this per
/// second is dropped).
pub const SEND_PIECE: usize = 256 << 10;
/// The most envelopes an emptied batch may hold room for and still be
/// kept as the queue back to its sender (`Outbox::recycle`): batches then
/// travel between two shards without an allocation, and no queue keeps
/// more than this room (about 80 KiB) after a burst.
pub const KEPT_BATCH_ROOM: usize = 1024;
/// Answerers of forwarded requests a shard keeps parked between them
/// (`mesh::answerers`), each holding its future (about 2.5 KiB): more are
/// started when all are busy, and the ones above this end when idle.
pub const KEPT_ANSWERERS: usize = 256;
/// Bodies at least this large are written without copying them behind the head.
pub const LARGE_BODY: usize = 64 * 1024;
/// Encoded bytes of recent events a subscriber shard keeps per stream (the
/// newest event always stays): a subscriber further behind ends its response
/// at an event boundary, and its client resumes from the last offset it got.
pub const RECENT_BYTES: usize = 1 << 20;
/// How often a shard deletes expired streams that nobody accessed (the
/// sweep looks only at the streams due by then: see `store::census`).
pub const SWEEP_EVERY: Duration = Duration::from_secs(5);
/// How often the accept loop looks whether the server is stopping.
pub const SHUTDOWN_POLL: Duration = Duration::from_millis(50);
/// How often a recovered shard looks whether every shard has recovered.
pub const SYNC_POLL: Duration = Duration::from_millis(1);
/// How long the accept loop waits after a failed accept.
pub const ACCEPT_RETRY: Duration = Duration::from_millis(10);
/// How long after start an injected serving panic (`SLUICE_FAULT`) fires.
pub const INJECTED_PANIC_AFTER: Duration = Duration::from_millis(200);
/// How often a draining shard looks at its in-flight requests and its peers.
pub const DRAIN_POLL: Duration = Duration::from_millis(5);
/// How often a shard looks for a new SIGHUP.
pub const RELOAD_POLL: Duration = Duration::from_millis(100);
/// Locked memory glommio needs per executor for its rings; below it the
/// executor fails to start.
pub const MIN_LOCKED_MEMORY: u64 = 512 << 10;
/// How often a shard proves it is awake.
pub const BEAT: Duration = Duration::from_millis(50);
/// How often the watchdog looks.
pub const WATCHDOG_CHECK: Duration = Duration::from_millis(250);
/// How long the shards may take beyond `--drain-timeout` to sync the log
/// and stop after SIGTERM.
pub const STOP_MARGIN: Duration = Duration::from_secs(20);
/// How often a start that waits for its shards looks for SIGTERM/SIGINT.
pub const START_POLL: Duration = Duration::from_millis(50);
/// How long a port in use is retried at start (`server::bind_exclusive`),
/// and how often meanwhile.
pub const BIND_WAIT: Duration = Duration::from_secs(2);
pub const BIND_RETRY: Duration = Duration::from_millis(10);
/// Shards allowed per usable CPU. Beyond it nothing gets faster, while
/// start-up time, memory and threads grow with every shard (256 shards on 2
/// cores never finished starting).
pub const MAX_SHARDS_PER_CORE: usize = 4;
/// `--max-body-memory` unless set (raised to one largest body per shard).
pub const DEFAULT_BODY_MEMORY: u64 = 1 << 30;
/// Consecutive requests for one other shard after which a connection moves
/// there (`affinity`).
pub const MOVE_AFTER: u32 = 8;
/// Largest config file read (`--config`).
pub const MAX_CONFIG_FILE_BYTES: u64 = 1 << 20;
/// Largest tokens file accepted (it is read whole at start and on SIGHUP),
/// and most scope lines in one.
pub const MAX_TOKENS_FILE_BYTES: u64 = 1 << 20;
pub const MAX_SCOPES: usize = 10_000;
/// Longest bearer token accepted (JWT-sized tokens fit; longer ones are
/// refused before hashing).
pub const MAX_TOKEN_BYTES: usize = 4096;
/// Shortest and longest lifetime a signed read token may be minted with,
/// and the lifetime of one minted without `ttl`.
pub const MIN_READ_TOKEN_TTL: Duration = Duration::from_secs(1);
pub const MAX_READ_TOKEN_TTL: Duration = Duration::from_secs(3600);
pub const DEFAULT_READ_TOKEN_TTL: Duration = Duration::from_secs(300);
/// Longest origin accepted in `--cors-origins`, and most origins in it.
pub const MAX_ORIGIN_BYTES: usize = 256;
pub const MAX_ORIGINS: usize = 64;
/// Largest encoded attribute object (spec section 5.1).
pub const MAX_ATTRS_BYTES: usize = 16 * 1024;
/// Streams one bucket listing page holds at most (and by default).
pub const MAX_LISTED_STREAMS: usize = 1000;
/// Buckets the console lists (each with up to [`MAX_LISTED_STREAMS`]
/// streams); more are counted, not listed.
pub const MAX_CONSOLE_BUCKETS: usize = 100;

/// What each flag accepts (its default is in its declaration, `config`);
/// the flags whose ranges the store depends on take them from
/// `sluice_shards::tuning`.
pub const SHARDS_RANGE: RangeInclusive<u64> = 1..=256;
pub const LONG_POLL_TIMEOUT_RANGE: RangeInclusive<Duration> = Duration::from_millis(10)..=Duration::from_secs(3600);
pub const SSE_RECONNECT_RANGE: RangeInclusive<Duration> = Duration::from_secs(1)..=Duration::from_secs(24 * 3600);
pub const MAX_HEAD_BYTES_RANGE: RangeInclusive<u64> = 1 << 10..=1 << 20;
pub const MAX_HEADERS_RANGE: RangeInclusive<u64> = 8..=1024;
pub const MAX_BODY_BYTES_RANGE: RangeInclusive<u64> = 1 << 10..=1 << 30;
pub const MAX_BODY_MEMORY_RANGE: RangeInclusive<u64> = 1 << 10..=1 << 44;
pub const MAX_CONNECTIONS_RANGE: RangeInclusive<u64> = 1..=1_000_000;
pub const MAX_WAITERS_RANGE: RangeInclusive<u64> = 1..=10_000_000;
pub const MAX_BATCH_FRAMES_RANGE: RangeInclusive<u64> = 1..=65_536;
pub const MAX_PRODUCERS_RANGE: RangeInclusive<u64> = 1..=1_000_000;
pub const MAX_PRODUCER_ID_BYTES_RANGE: RangeInclusive<u64> = 1..=64 << 10;
pub const MAX_READ_BYTES_RANGE: RangeInclusive<u64> = 4 << 10..=1 << 30;
pub const MAX_RESPONSE_BYTES_RANGE: RangeInclusive<u64> = 4 << 10..=1 << 40;
pub const IDLE_TIMEOUT_RANGE: RangeInclusive<Duration> = Duration::from_secs(1)..=Duration::from_secs(24 * 3600);
pub const REQUEST_TIMEOUT_RANGE: RangeInclusive<Duration> = Duration::from_millis(100)..=Duration::from_secs(3600);
pub const IO_MEMORY_RANGE: RangeInclusive<u64> = 64 << 10..=4 << 30;
pub const DRAIN_TIMEOUT_RANGE: RangeInclusive<Duration> = Duration::from_millis(100)..=Duration::from_secs(5 * 60);

const _: () = {
    assert!(HEAD_READ <= BODY_READ, "a head is read in smaller pieces than a body");
    assert!(HEAD_READ < KEPT_READ_ROOM && KEPT_READ_ROOM < BODY_READ, "heads reuse the room, bodies' room goes");
    assert!(LARGE_BODY <= SEND_PIECE, "a body written apart from its head is sent in whole pieces");
    assert!(WATCHDOG_CHECK.as_millis() >= 2 * BEAT.as_millis(), "a live shard beats at least twice between checks");
    assert!(SHUTDOWN_POLL.as_millis() < STOP_MARGIN.as_millis(), "a stopping accept loop notices within the margin");
    assert!(BIND_RETRY.as_millis() < BIND_WAIT.as_millis(), "a port in use is tried more than once");
    assert!(MAX_SHARDS_PER_CORE >= 1, "a core runs a shard");
    assert!(MIN_READ_TOKEN_TTL.as_secs() <= DEFAULT_READ_TOKEN_TTL.as_secs());
    assert!(DEFAULT_READ_TOKEN_TTL.as_secs() <= MAX_READ_TOKEN_TTL.as_secs());
    assert!(MAX_SCOPES as u64 <= MAX_TOKENS_FILE_BYTES, "every scope line fits in a tokens file");
    assert!(
        *MAX_BODY_MEMORY_RANGE.start() <= DEFAULT_BODY_MEMORY && DEFAULT_BODY_MEMORY <= *MAX_BODY_MEMORY_RANGE.end()
    );
    assert!(*MAX_BODY_BYTES_RANGE.end() <= DEFAULT_BODY_MEMORY, "the default body memory holds the largest body");
    assert!(*MAX_READ_BYTES_RANGE.end() <= *MAX_RESPONSE_BYTES_RANGE.end(), "a read fits in a response");
    assert!(
        *SHARDS_RANGE.start() >= 1 && *MAX_HEADERS_RANGE.start() >= 1,
        "a server runs a shard, and a request has a header"
    );
    assert!(MIN_LOCKED_MEMORY <= *IO_MEMORY_RANGE.end(), "--io-memory can ask for what glommio needs at least");
};

#[cfg(test)]
mod tests {
    /// `tuning/check` (a shell script) names the locked-memory floor as
    /// `MIN_LOCKED_KIB`: it is this one.
    #[test]
    fn the_tuning_check_script_names_the_locked_memory_floor() {
        let script = include_str!("../tuning/check");
        let line = format!("MIN_LOCKED_KIB={}\n", super::MIN_LOCKED_MEMORY >> 10);
        assert!(script.contains(&line), "tuning/check sets {line:?}");
    }
}
