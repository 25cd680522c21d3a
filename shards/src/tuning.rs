//! The shard runtime's fixed limits and tuning, in one place, with the
//! relations between them (and to the protocol core's limits and the
//! journal's frames) checked at compile time. The limits an operator sets
//! are flags (`src/config.rs`); their ranges that the store depends on are
//! here too.

use crate::core::limits::{ENTRY_BYTES, PAGE};
use crate::core::record::SEAL_FRAME;
use std::time::Duration;

/// Stream-file writes go in pieces of this size, made durable by one
/// fdatasync after the last.
pub const WRITE_PIECE: usize = 1 << 20;
/// Stream-file reads go in pieces of this size (they stay in the CPU cache
/// between the kernel's copy and the copy into the response).
pub const READ_CHUNK: usize = 256 << 10;
/// Stream-file descriptors a shard keeps open at most before it closes
/// them all; fewer when the open-files limit is low (`src/config.rs`
/// shares it out), never fewer than [`MIN_OPEN_FILES`].
pub const MAX_OPEN_FILES: usize = 512;
pub const MIN_OPEN_FILES: usize = 2 * FLUSH_CONCURRENCY;
/// Descriptors a shard needs besides connections and stream files (the
/// listener, journal segments, io_uring rings, eventfds, directories).
pub const FIXED_FDS_PER_SHARD: usize = 32;
/// The fewest connections per shard the open-files limit must leave room for.
pub const MIN_CONNECTIONS: usize = 16;
/// Streams whose files one flush writes and syncs at the same time (two
/// descriptors each).
pub const FLUSH_CONCURRENCY: usize = 8;
/// io_uring worker threads a shard thread may have for file work that blocks
/// (`iowq`; the kernel's default is min(ring entries, 4 x CPUs): 256 on 64
/// CPUs). A flush has at most [`FLUSH_CONCURRENCY`] streams' files in
/// flight, each an open, a size, a write and an fdatasync after the other,
/// all of which the kernel runs on workers; nothing else blocks in numbers.
/// Traced (50,000 streams of 10 B created and flushed): about 229k of each
/// of those four on workers, and 4 of the journal's 17,836 `O_DIRECT` writes.
/// One worker per flushed stream, so a flush batch never waits for one; on
/// a 2-CPU host this is the kernel's default too (see `iowq` for the first
/// shard, which had 2).
pub const IOWQ_BOUNDED_WORKERS: u32 = FLUSH_CONCURRENCY as u32;
/// io_uring worker threads a shard thread may have for work that may wait
/// forever (the kernel's default: `RLIMIT_NPROC`). Socket operations wait
/// on polls, not workers (none went to one in the run above); the only
/// such work traced is glommio's preemption timer's linked write to an
/// eventfd, which the kernel cannot do without a worker and which returns
/// at once: 885 writes, one worker per shard. A few stay allowed so a
/// surprise waits rather than stalls, and cannot become a thread per
/// connection.
pub const IOWQ_UNBOUNDED_WORKERS: u32 = 4;
/// How often the flusher checks whether a flush is due.
pub const FLUSH_POLL: Duration = Duration::from_millis(50);
/// The longest an executor sleeps with a timer armed: the bound on a stall
/// of glommio's run loop (see `sluice_shards::tick`).
pub const REACTOR_TICK: Duration = Duration::from_millis(20);
/// Largest test-only time scale (`--test-time-scale`): periodic tasks run
/// at most this many times faster than in service.
pub const MAX_TIME_SCALE: u32 = 1000;
/// Journal segments of free disk a write that adds data leaves beyond the
/// unflushed bytes: the active segment (its flushed bytes stay until it
/// rolls) and the next. Records that give space back (deletes, retention,
/// bucket deletes, expiry) may use this room, so a full disk still takes a
/// DELETE.
pub const JOURNAL_ROOM_SEGMENTS: u64 = 2;
/// Flushes' worth of journal bytes writers may run ahead of the flusher
/// before they wait for it (one is being written while the next fills).
pub const FLUSH_BACKLOG: u64 = 4;
/// How long a reading of the disk's free bytes stands before the write path
/// reads it again (appends count it down meanwhile); a write is refused for
/// space only on a reading taken then.
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
/// The unit of every journal write: segments are `O_DIRECT` files, so a
/// commit is padded to whole blocks at whole-block positions (the block a
/// commit ends in is written again, whole, by the next). Segment sizes are
/// rounded up to it.
pub const JOURNAL_BLOCK: u64 = PAGE;
/// The largest commit buffer the journal keeps for the next commit (a
/// bigger one, left by an unusually large commit, is given back).
pub const SPARE_COMMIT_BUFFER: usize = 8 << 20;
/// A flush writes a checkpoint once the journal since the last one is
/// 1/this of its size (or when it gives space back; `store::flush`):
/// replaying a journal byte at start costs several times loading a
/// checkpoint byte, and a trickle of appends to many streams then rewrites
/// their state at most this many times per journal byte.
pub const CHECKPOINT_LAG: u64 = 4;
/// A checkpoint written only to give space back (files of deleted streams,
/// retained-away ranges) follows the last checkpoint after at least this
/// many times as long as that one's flush took: with a million streams a
/// checkpoint takes a second or more, and a stream of deletes would
/// otherwise rewrite every stream's state every flush interval.
pub const CHECKPOINT_FREE_SPACING: u32 = 10;
/// Bytes a checkpoint's encoding is expected to take per stream (a small
/// stream takes about 50 in format 5), to size its buffer once.
pub const CHECKPOINT_STREAM_BYTES: usize = 64;
/// A buffer larger than this is its own mapping under glibc whatever its
/// dynamic mmap threshold rose to (`DEFAULT_MMAP_THRESHOLD_MAX` on 64-bit),
/// and goes back to the kernel whole when freed.
pub const OWN_MAPPING: usize = 32 << 20;
/// A transient buffer (a checkpoint being encoded, a whole file read) of
/// more than this gets a capacity of at least [`OWN_MAPPING`] bytes
/// (`heap::buffer`): from the heap, a 27 MB checkpoint buffer left its
/// pages held among the streams after it was freed (RSS 15-25 B a stream
/// more at 1M streams); the pages of a mapping never written cost nothing.
pub const MAPPED_FROM: usize = 1 << 20;
/// glibc's thresholds, fixed once at start (`heap::configure`): its own
/// move with what was freed, and a 1 MiB request body or stream-file write
/// piece, freed at the top of a shard's arena, went back to the kernel at
/// once, so the next one faulted in and zeroed 256 fresh pages (page
/// faults traced to `conn::read_body` and `Storage::write_all_at`). A
/// buffer above this is a mapping of its own (glibc's mmap threshold): a
/// stream's growing tail buffer and a response's read buffer keep growing
/// by `mremap` and going back whole when freed.
pub const HEAP_MAPPED_ABOVE: usize = 2 << 20;
/// Free memory at the top of an arena that stays there when a buffer is
/// freed (glibc's trim threshold), for the next large transient buffer;
/// a shard idle for a flush interval gives all of it back
/// (`heap::trim_top`). With both fixed, 1 MiB appends filled 1.12-1.19x
/// as fast on 15-23% less server CPU per GB, 64 KiB ones and pooled small
/// appends alike (bench/results/append-ceiling.md). Four writers' 1 MiB
/// bodies and pieces in flight are 8 MiB and their chunk headers: at 8 MiB
/// exactly, the top was trimmed at every free
/// (`shards/tests/heap_thresholds.rs`).
pub const HEAP_KEEP_FREE: usize = 12 << 20;
/// The free with which `heap::trim_top` trims its thread's arena: glibc
/// looks at an arena's top after a free of at least
/// [`GLIBC_TOP_CHECKED_FROM`], from the heap, not a mapping.
pub const TRIM_NUDGE: usize = GLIBC_TOP_CHECKED_FROM;
/// glibc's `FASTBIN_CONSOLIDATION_THRESHOLD`: a free of this many bytes or
/// more makes it look at the arena's top (and trim it past the threshold).
pub const GLIBC_TOP_CHECKED_FROM: usize = 64 << 10;
/// The most an idle stream's in-memory entry may take, inline (its name,
/// content type and the map's slot come on top): checked at compile time.
/// 296 bytes are one 304-byte glibc chunk (the request plus 8, in 16s):
/// retention's punch state, which few streams have, is boxed (inline it
/// took 32 bytes), and the shard and producer cap, the store's for every
/// stream, are not copied into each (328 bytes before, one 336-byte chunk).
pub const STREAM_ENTRY_BYTES: usize = 296;
/// Streams changed since they were last flushed or asked for the metrics
/// whose files' bytes a shard sums again at the next ask
/// (`store::file_sum`); past
/// this many (a burst of creates, a server nobody asks), it forgets the
/// sum and the next request walks every stream once: the set stays under
/// a megabyte, where one entry per stream of a million took 18 MB.
pub const UNSUMMED_MAX: usize = 1 << 16;
/// The largest own index and data a stream keeps in a bundle, a file
/// small streams share (`store::bundles`), instead of files of its own:
/// a stream of a few messages takes tens of bytes there, where two files
/// took at least two 4 KiB blocks and two inodes. A flush that adds to a
/// bundled stream rewrites its extent whole, so this also bounds what a
/// small append costs the flush.
pub const BUNDLE_MAX: u32 = 8 << 10;
/// A bundle grows to this size at most; the next one is started then.
pub const BUNDLE_FILE_BYTES: u64 = 16 << 20;
/// A bundle at most half live is compacted once it has this many dead bytes.
pub const BUNDLE_DEAD_FROM: u64 = 1 << 20;
const _: () = assert!(BUNDLE_MAX as u64 <= BUNDLE_FILE_BYTES && BUNDLE_DEAD_FROM < BUNDLE_FILE_BYTES);
/// Distinct content types a shard's streams share one copy of (most nodes
/// use a few); streams of further types keep their own.
pub const MAX_SHARED_CONTENT_TYPES: usize = 1024;
/// Unlinks a flush's clean-up makes before it lets the shard's other tasks
/// run (each is a metadata change of tens of microseconds on the executor:
/// a mass delete must not hold requests for the whole batch).
pub const UNLINKS_PER_YIELD: usize = 32;
/// The smallest stream tail buffer a flush keeps for the next capture
/// (`store::spares`; smaller ones cost the allocator little). All kept
/// buffers together stay within [`FLUSH_BACKLOG`] x `--flush-bytes` per shard.
pub const MIN_SPARE_TAIL: usize = 64 << 10;
/// A start lists a shard's streams directory into a table indexed by
/// handle (a byte each, for every handle below the checkpoint's next one)
/// while there are at most this many handles per stream in the checkpoint;
/// a shard whose handles are mostly of deleted streams uses a hash table
/// (`store::restore`).
pub const DENSE_HANDLES_PER_STREAM: u64 = 8;
/// How often a repeated warning is logged at most (`every`).
pub const WARN_EVERY: Duration = Duration::from_secs(10);
/// How often the backup, holding a shard, looks whether its clean-ups
/// have ended (`hold`; off the shard threads).
pub const HOLD_POLL: Duration = Duration::from_millis(1);
/// An append of at least this many bytes to a stream with stream files is
/// written into them before its journal record (`store::place`): the
/// bytes reach the disk once, not three times (journal, the journal's
/// zero-filled next segment, the flush). Below it the journal's group
/// commit is cheaper: four writers filling one stream on the test box,
/// placed against journaled, 64 KiB 221-228 against 350-381 MB/s, 256 KiB
/// 588-608 against 570-587, 1 MiB 741-780 against 292-295 (1 GiB fill);
/// one writer, one append at a time: 256 KiB 310-319 against 381-404 MB/s
/// (p99 1.3-1.5 against 4.6-6.9 ms), 512 KiB 471-511 against 457-533,
/// 1 MiB 681-691 against 283-475. At 256 KiB and up a placement also
/// writes a third of the bytes to the disk, which a sustained fill is
/// bound by.
pub const PLACE_FROM: usize = 256 * 1024;
/// Streams a flush handles between two pauses (`FlushConfig::slice`): its
/// pass over the streams it captured, the checkpoint's encoding, the
/// frozen chunks it hands back to the files or to memory. A checkpoint
/// slice of 4096 streams took 3.5-3.7 ms of a shard's time at 500k streams
/// (the streams' entries are cold in the CPU cache), a visit about a
/// microsecond, so about 1 ms is what a request waits behind a flush of any
/// size.
pub const FLUSH_SLICE: usize = 1024;
/// The allocation `heap::settle` makes: beyond glibc's per-thread cache
/// (requests of at most [`GLIBC_TCACHE_MAX`] bytes, which would be served
/// from it without sorting anything) and far below its mmap threshold.
pub const SETTLE_BYTES: usize = 4096;
/// The largest request glibc's per-thread cache serves (64 bins of 16 bytes).
pub const GLIBC_TCACHE_MAX: usize = 1032;
/// The pause between two slices: the executor polls its I/O (requests
/// arriving, completions) and runs what is ready before the next slice.
pub const FLUSH_PAUSE: Duration = Duration::from_micros(50);
/// A flush writing at least this many streams syncs the file system once
/// (`syncfs`) instead of each of their files (`store::flush`): a sync per
/// small file writes that file's inode and directory blocks on its own.
pub const SYNC_ONCE_STREAMS: usize = 64;
/// The smallest unit a disk writes whole (a logical block): a power loss
/// during a write loses whole sectors of it, never part of one. Recovery
/// tells a torn journal tail from damage by it (`log::recovery`); a disk
/// with larger sectors loses whole 512-byte pieces too.
pub const SECTOR: usize = 512;

const _: () = {
    assert!(ENTRY_BYTES > 0 && ENTRY_BYTES <= READ_CHUNK as u64, "a checked entry is read in few pieces");
    assert!(FLUSH_CONCURRENCY * 2 <= MIN_OPEN_FILES, "one flush batch fits in the descriptor cache");
    assert!(MIN_OPEN_FILES <= MAX_OPEN_FILES);
    assert!(FLUSH_POLL.as_millis() < MIN_FLUSH_INTERVAL_MS as u128, "the flusher looks more often than it flushes");
    assert!(REACTOR_TICK.as_millis() < FLUSH_POLL.as_millis(), "the tick, not the flusher, bounds a stall");
    assert!(FLUSH_BACKLOG >= 2, "writers may fill the next flush while one is written");
    assert!(CHECKPOINT_LAG >= 1, "a checkpoint is due by the time the journal since it is as long as it");
    assert!(CHECKPOINT_FREE_SPACING >= 1, "space is given back at most as often as checkpoints can be written");
    assert!(MIN_SPARE_TAIL as u64 <= MIN_FLUSH_BYTES, "a kept tail buffer fits within any flush's bound");
    assert!(MIN_FLUSH_BYTES <= MAX_FLUSH_BYTES && MIN_FLUSH_INTERVAL_MS <= MAX_FLUSH_INTERVAL_MS);
    assert!(MAX_FLUSH_BYTES.checked_mul(FLUSH_BACKLOG).is_some(), "the backlog bound does not overflow");
    assert!(PAGE.is_multiple_of(SECTOR as u64), "a page is whole sectors");
    assert!(JOURNAL_BLOCK.is_multiple_of(SECTOR as u64), "a journal block is whole sectors");
    assert!(MIN_SEGMENT_BYTES.is_multiple_of(JOURNAL_BLOCK) && (FILL_CHUNK as u64).is_multiple_of(JOURNAL_BLOCK));
    assert!(MIN_SEGMENT_BYTES > SEAL_FRAME as u64, "a segment holds its seal and more");
    assert!(SETTLE_BYTES > GLIBC_TCACHE_MAX && SETTLE_BYTES < 128 << 10, "settle allocates from the bins");
    assert!(HEAP_KEEP_FREE > 8 * WRITE_PIECE, "four writers' bodies and write pieces stay mapped");
    assert!(HEAP_MAPPED_ABOVE >= 2 * WRITE_PIECE, "a write piece and a body of its size come from the heap");
    assert!(TRIM_NUDGE >= GLIBC_TOP_CHECKED_FROM && TRIM_NUDGE < HEAP_MAPPED_ABOVE, "the nudge is freed into the heap");
    assert!(HEAP_MAPPED_ABOVE <= OWN_MAPPING && OWN_MAPPING <= 32 << 20, "glibc's mmap threshold is 32 MiB at most");
    assert!(DENSE_HANDLES_PER_STREAM >= 1, "a table of every handle holds one per stream at least");
    assert!(HOLD_POLL.as_millis() < FLUSH_POLL.as_millis(), "a hold is taken well within a flush poll");
    assert!(IOWQ_BOUNDED_WORKERS as usize >= FLUSH_CONCURRENCY, "a flush batch's writes and syncs each get a worker");
    assert!(IOWQ_UNBOUNDED_WORKERS >= 1, "0 would leave the kernel's limit, RLIMIT_NPROC");
};
