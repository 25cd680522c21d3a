//! `heap::configure` (issue 24): the large transient buffers of a busy
//! shard (1 MiB request bodies and stream-file write pieces, several in
//! flight at once) reuse the pages their arena already holds when freed
//! and taken again, instead of faulting in and zeroing fresh ones each
//! time; and `heap::trim_top` returns those pages once the shard is idle.
//! Its own test binary: the thresholds are the process's.

#![cfg(target_env = "gnu")]

use sluice_shards::tuning::{HEAP_KEEP_FREE, WRITE_PIECE};

/// Buffers in flight at once: four writers' bodies and write pieces.
const IN_FLIGHT: usize = 8;
/// Rounds of taking and freeing them after the first.
const ROUNDS: usize = 50;
const PAGE: usize = 4096;

/// Minor page faults of the calling thread so far.
fn faults() -> i64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut u) }, 0);
    u.ru_minflt
}

/// Resident bytes of the process (`/proc/self/statm`).
fn resident() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: usize = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).expect("resident pages");
    pages * PAGE
}

/// Takes `IN_FLIGHT` buffers of a write piece each, writes every page of
/// them, and frees them all.
fn round() {
    let held: Vec<Vec<u8>> = (0..IN_FLIGHT).map(|i| vec![i as u8 + 1; WRITE_PIECE]).collect();
    std::hint::black_box(&held);
}

const _: () = assert!(IN_FLIGHT * WRITE_PIECE <= HEAP_KEEP_FREE, "the buffers in flight fit in what an arena keeps");

#[test]
fn large_buffers_reuse_their_pages_and_go_back_when_idle() {
    sluice_shards::heap::configure();
    // A thread of its own has an arena of its own, as a shard does.
    std::thread::spawn(|| {
        round();
        let before = faults();
        for _ in 0..ROUNDS {
            round();
        }
        let fresh = faults() - before;
        let every_time = (ROUNDS * IN_FLIGHT * WRITE_PIECE / PAGE) as i64;
        // With glibc's own thresholds the arena's top is trimmed at each
        // free, and every round faults its pages in again (measured:
        // about 100,000 faults here, every page of every round).
        assert!(
            fresh < every_time / 100,
            "{fresh} page faults in {ROUNDS} rounds: the pages were returned and taken again"
        );
        let busy = resident();
        sluice_shards::heap::trim_top();
        let returned = busy.saturating_sub(resident());
        assert!(
            returned >= IN_FLIGHT * WRITE_PIECE / 2,
            "trim_top returned {returned} of {} bytes the arena kept free",
            IN_FLIGHT * WRITE_PIECE
        );
    })
    .join()
    .expect("the test thread");
}
