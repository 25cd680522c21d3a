//! The cap on a shard thread's io_uring worker threads holds (issue 24,
//! item 7): on an executor capped at [`CAP`] workers, [`FILES`] concurrent
//! buffered writes of 1 MiB, each to its own file and followed by
//! `fdatasync` (what a many-stream flush does), never run on more than
//! [`CAP`] `iou-wrk-*` threads, sampled every millisecond. Without the cap
//! the kernel starts min(ring entries, 4 x CPUs) of them: checked on a
//! 2-CPU host by taking out the test's `iowq::cap` call (fails: 8 workers,
//! `block_on`'s cap) and also `block_on`'s (fails: 8, the kernel's
//! default). It also checks that the work really ran on workers (else it
//! would prove nothing) and that `tick::block_on` had capped the executor
//! at the tuned limits first. It needs Linux 5.15
//! (`IORING_REGISTER_IOWQ_MAX_WORKERS`) and fails on an older kernel,
//! saying so. One test in its own binary: the thread count is the process's.

use glommio::io::OpenOptions;
use sluice_shards::iowq;
use sluice_shards::tick::block_on;
use sluice_shards::tuning::{IOWQ_BOUNDED_WORKERS, IOWQ_UNBOUNDED_WORKERS};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Workers of each kind the test allows: below the kernel's default of
/// 4 per CPU on any host.
const CAP: u32 = 2;
/// Files written and synced at the same time.
const FILES: usize = 64;
/// Bytes written to each.
const BYTES: usize = 1 << 20;

/// This process's io_uring worker threads, by name.
fn workers() -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.starts_with("iou-wrk"))
        .count()
}

/// A scratch directory under `target/`, on a disk file system (a tmpfs
/// write never blocks), removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn io_uring_workers_stay_within_the_cap() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(4 * cpus > CAP as usize, "the kernel's default, 4 x {cpus} CPUs, exceeds the test's cap");
    let dir = Scratch(Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../target/iowq-cap-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir_all(&dir.0).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let sampling = stop.clone();
    let sampler = std::thread::spawn(move || {
        let mut most = 0;
        while !sampling.load(Ordering::Relaxed) {
            most = most.max(workers());
            std::thread::sleep(Duration::from_millis(1));
        }
        most.max(workers())
    });

    // glommio probes the kernel with a ring of 2 entries on the first
    // executor's thread, and the kernel sizes that thread's pool by it (see
    // `iowq`): an executor made first would be held to 2 workers even
    // without a cap, and the test would prove nothing.
    block_on(|| async {});
    let root = dir.0.clone();
    let tuned = block_on(move || async move {
        let tuned = iowq::cap(CAP, CAP)
            .unwrap_or_else(|e| panic!("IORING_REGISTER_IOWQ_MAX_WORKERS (Linux 5.15+) failed: {e}"));
        let writes: Vec<_> = (0..FILES)
            .map(|i| {
                let path = root.join(format!("{i}.data"));
                glommio::spawn_local(async move {
                    let f = OpenOptions::new().write(true).create(true).buffered_open(&path).await.unwrap();
                    assert_eq!(f.write_at(vec![i as u8; BYTES], 0).await.unwrap(), BYTES);
                    f.fdatasync().await.unwrap();
                    f.close().await.unwrap();
                })
            })
            .collect();
        for w in writes {
            w.await;
        }
        tuned
    });
    stop.store(true, Ordering::Relaxed);
    let most = sampler.join().unwrap();

    assert!(most >= 1, "the writes and syncs ran on io_uring workers");
    assert!(most <= CAP as usize, "{most} io_uring workers ran at once, over the cap of {CAP}");
    let tuned_limits = [IOWQ_BOUNDED_WORKERS, IOWQ_UNBOUNDED_WORKERS];
    assert_eq!(tuned, tuned_limits, "block_on capped the executor at the tuned limits");
    println!("at most {most} io_uring workers at once (cap {CAP}, {FILES} files of {BYTES} bytes)");
}
