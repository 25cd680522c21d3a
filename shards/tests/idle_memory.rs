//! What an idle stream costs in memory (issue 25: at most 512 B of RSS per
//! idle stream): the heap a shard holds per stream once streams of one
//! small message each are flushed, counted by a global allocator that
//! tallies live bytes and allocations, and the in-line sizes of the hot
//! types. A change that makes idle streams heavier fails here; the
//! numbers are printed (`--nocapture`) to see where the bytes go.

mod sim;

use sim::{key, one_shard};
use sluice_shards::core::body::{Body, Chunk};
use sluice_shards::core::create::CreateInput;
use sluice_shards::core::producer::Producers;
use sluice_shards::core::stream::StreamState;
use sluice_shards::store::{FlushConfig, Shard};
use sluice_shards::tuning::{CHECKPOINT_FREE_SPACING, SYNC_ONCE_STREAMS};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};
use std::time::Duration;

/// The system allocator, counting what is live.
struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);
static LIVE_ALLOCS: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call goes to the system allocator unchanged; only counters move.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(l.size() as isize, Relaxed);
        LIVE_ALLOCS.fetch_add(1, Relaxed);
        unsafe { System.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE_BYTES.fetch_sub(l.size() as isize, Relaxed);
        LIVE_ALLOCS.fetch_sub(1, Relaxed);
        unsafe { System.dealloc(p, l) }
    }

    unsafe fn realloc(&self, p: *mut u8, l: Layout, size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(size as isize - l.size() as isize, Relaxed);
        unsafe { System.realloc(p, l, size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Streams measured: enough that the maps' growth averages out.
const STREAMS: usize = 5000;
/// Heap per idle stream, measured: 413.5 B in 2.15 allocations (the boxed
/// entry, its name in one allocation, and the maps' slots), from 446 B
/// before retention's punch state was boxed (32 bytes inline) and the
/// shard and producer cap left the stream's state (8 bytes), 459 B in
/// 4.15 when the name was an `Rc` of two strings (each allocation also
/// costs the allocator 8-24 B this count does not see), and 587 B before
/// the rare parts and the unflushed tail were boxed.
const MAX_HEAP_PER_STREAM: f64 = 420.0;
const MAX_ALLOCS_PER_STREAM: f64 = 2.3;

/// The store's `Entry` is bounded at compile time (`tuning::STREAM_ENTRY_BYTES`).
#[test]
fn hot_types_stay_small() {
    let sizes = [
        ("StreamState", size_of::<StreamState>(), 248),
        ("Body", size_of::<Body>(), 80),
        ("Chunk", size_of::<Chunk>(), 64),
        ("Producers", size_of::<Producers>(), 8),
    ];
    for (name, size, most) in sizes {
        eprintln!("{name}: {size} B");
        assert!(size <= most, "{name} is {size} B, more than {most}");
    }
}

#[test]
fn an_idle_stream_holds_little_heap() {
    sim::in_scratch("sluice-idle-memory", |dir| async move {
        let flush = FlushConfig {
            bytes: 64 << 20,
            every: Duration::from_secs(3600),
            free_spacing: CHECKPOINT_FREE_SPACING,
            sync_once: SYNC_ONCE_STREAMS,
            place_from: sluice_shards::tuning::PLACE_FROM,
            bundle_max: sluice_shards::tuning::BUNDLE_MAX,
            slice: sluice_shards::tuning::FLUSH_SLICE,
        };
        let s = Shard::open(0, one_shard(&dir, 64 << 20, flush)).await.unwrap();
        let create = |name: String| {
            let s = &s;
            async move { s.create(&key(&name), &CreateInput::plain("text/plain"), b"0123456789", None, 0).await.unwrap() }
        };
        // Warm up what a shard allocates once (buffers, the first flush).
        for i in 0..100 {
            create(format!("warm{i}")).await;
        }
        s.flush().await.unwrap();
        let (bytes, allocs) = (LIVE_BYTES.load(Relaxed), LIVE_ALLOCS.load(Relaxed));
        for i in 0..STREAMS {
            create(format!("mi{i}")).await;
        }
        s.flush().await.unwrap();
        let per = |now: isize, then: isize| (now - then) as f64 / STREAMS as f64;
        let heap = per(LIVE_BYTES.load(Relaxed), bytes);
        let count = per(LIVE_ALLOCS.load(Relaxed), allocs);
        eprintln!("an idle stream of one 10 B message, flushed: {heap:.1} B of heap in {count:.2} allocations");
        assert!(heap <= MAX_HEAP_PER_STREAM, "{heap:.1} B of heap per idle stream");
        assert!(count <= MAX_ALLOCS_PER_STREAM, "{count:.2} allocations per idle stream");
    });
}
