//! `sluice check --data-dir DIR`: verifies a stopped data directory offline
//! and changes nothing: the shard count file, and in every shard the
//! checkpoint, every stream file against it (lengths, index pages that
//! follow on from each other to the stored tail, every retained index
//! entry's CRC32C against the data), the journal marks, each
//! segment's seal (length, CRC32C, size of its predecessor and itself) and
//! every journal record's CRC. Exit 0 when clean, 1 when damaged.

use crate::server::read_shard_count;
use sluice_shards::log::recovery::Mode;
use sluice_shards::storage::Storage;
use sluice_shards::store::restore::{self, Restored};
use std::path::Path;

/// Exit status of a clean check.
pub const CLEAN: i32 = 0;
/// Exit status when anything is damaged or missing.
pub const DAMAGED: i32 = 1;

/// Checks `dir`, printing one line per shard; returns the exit status.
pub fn run(dir: &Path) -> i32 {
    let shards = match read_shard_count(dir) {
        Ok(Some(n)) => n,
        Ok(None) => {
            println!("{}: no sluice.meta: not a sluice data dir, or its shard count was lost", dir.display());
            return DAMAGED;
        }
        Err(e) => {
            println!("{e}");
            return DAMAGED;
        }
    };
    let mut status = CLEAN;
    for i in 0..shards {
        let shard = dir.join(format!("shard-{i}"));
        // Remember every producer the checkpoint holds: the check drops nothing.
        match restore::restore(&Storage::Real, &shard, i as u32, usize::MAX, Mode::Verify) {
            Ok(Restored { store, tail: t, .. }) => {
                let torn = if t.torn_bytes > 0 {
                    format!("; a torn tail of {} bytes (never acknowledged) is trimmed at start", t.torn_bytes)
                } else {
                    String::new()
                };
                let range = match (t.segments.first(), t.segments.last()) {
                    (Some(a), Some(b)) => format!("segments {a}-{b}"),
                    _ => "no segments".to_string(),
                };
                println!(
                    "shard-{i}: ok: {} streams, checkpoint generation {}; journal {range}, {} records since the checkpoint, log-head {}{torn}",
                    store.streams.len(),
                    store.generation,
                    t.records,
                    t.head
                );
            }
            Err(e) => {
                println!("shard-{i}: DAMAGED: {e}");
                status = DAMAGED;
            }
        }
    }
    // A shard directory beyond the recorded count holds streams no server serves.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.strip_prefix("shard-").and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n >= shards) {
                println!("{}: DAMAGED: sluice.meta records {shards} shards", e.path().display());
                status = DAMAGED;
            }
        }
    }
    status
}
