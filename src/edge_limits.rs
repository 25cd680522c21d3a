//! The HTTP edge's fixed limits and periods, in one place, with the
//! relations between them checked at compile time (the shard runtime's are
//! `sluice_shards::tuning`, the protocol core's `sluice_shards::core::limits`;
//! the limits an operator sets are flags, `config`).

use std::time::Duration;

/// Read sizes: small for request heads (most requests are a few hundred
/// bytes), larger while a body is arriving. The buffer space is zeroed before
/// each read, so a read never asks for much more than it expects.
pub const HEAD_READ: usize = 8 * 1024;
pub const BODY_READ: usize = 256 * 1024;
/// A client must take each piece of a response this long within
/// `--idle-timeout`, or its connection is reset (the HTTP edge's progress
/// deadline; at the shortest timeout, 1 s, a peer slower than this per
/// second is dropped).
pub const SEND_PIECE: usize = 256 << 10;
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

const _: () = {
    assert!(HEAD_READ <= BODY_READ, "a head is read in smaller pieces than a body");
    assert!(LARGE_BODY <= SEND_PIECE, "a body written apart from its head is sent in whole pieces");
    assert!(WATCHDOG_CHECK.as_millis() >= 2 * BEAT.as_millis(), "a live shard beats at least twice between checks");
    assert!(SHUTDOWN_POLL.as_millis() < STOP_MARGIN.as_millis(), "a stopping accept loop notices within the margin");
};
