//! Per-shard measurements for the metrics endpoint: plain `Cell` counters
//! and fixed-bucket histograms owned by one shard's thread (no atomics, no
//! locks), copied into `Send` snapshots when a scrape asks for them.

use std::cell::Cell;

/// A histogram with fixed upper bounds (Prometheus `le`), plus +Inf.
pub struct Histogram {
    bounds: &'static [f64],
    /// One count per bound, and a last one for +Inf (not cumulative).
    counts: Vec<Cell<u64>>,
    sum: Cell<f64>,
}

impl Histogram {
    /// `bounds` must be strictly increasing.
    pub fn new(bounds: &'static [f64]) -> Histogram {
        assert!(bounds.windows(2).all(|w| w[0] < w[1]), "histogram bounds must increase");
        Histogram { bounds, counts: (0..=bounds.len()).map(|_| Cell::new(0)).collect(), sum: Cell::new(0.0) }
    }

    pub fn observe(&self, v: f64) {
        let i = self.bounds.iter().position(|b| v <= *b).unwrap_or(self.bounds.len());
        self.counts[i].set(self.counts[i].get() + 1);
        self.sum.set(self.sum.get() + v);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot {
            bounds: self.bounds,
            counts: self.counts.iter().map(Cell::get).collect(),
            sum: self.sum.get(),
        }
    }
}

/// A histogram's values at one moment; mergeable across shards.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramSnapshot {
    pub bounds: &'static [f64],
    /// Per bucket, +Inf last; not cumulative.
    pub counts: Vec<u64>,
    pub sum: f64,
}

impl HistogramSnapshot {
    /// Adds `other` (same bounds) into `self`.
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        assert_eq!(self.bounds, other.bounds, "merging histograms with different buckets");
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.sum += other.sum;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Latency buckets in seconds: 50 us to 10 s.
pub const SECONDS: &[f64] =
    &[0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];
/// Records per group commit: 1 to 4096.
pub const RECORDS: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0];

/// What a shard's log measures.
pub struct LogStats {
    /// Append records written (one per appended message group).
    pub appends: Cell<u64>,
    /// Payload bytes of those appends.
    pub append_bytes: Cell<u64>,
    /// Of those appends, the ones placed in their stream files before
    /// their record (large appends written once, `store::place`).
    pub placed: Cell<u64>,
    /// Duration of each commit's durable writes, sync included (none with `--fsync never`).
    pub fsync_seconds: Histogram,
    /// Records made durable by each commit.
    pub group_commit_records: Histogram,
    /// Torn-tail bytes zeroed by the last recovery.
    pub torn_bytes: Cell<u64>,
}

impl Default for LogStats {
    fn default() -> Self {
        LogStats {
            appends: Cell::new(0),
            append_bytes: Cell::new(0),
            placed: Cell::new(0),
            fsync_seconds: Histogram::new(SECONDS),
            group_commit_records: Histogram::new(RECORDS),
            torn_bytes: Cell::new(0),
        }
    }
}

/// What a shard's flusher measures.
pub struct FlushStats {
    /// Flushes that reached their checkpoint and finished.
    pub ok: Cell<u64>,
    /// Flushes that failed (their work is redone by the next).
    pub failed: Cell<u64>,
    /// Duration of each flush, failed ones included.
    pub seconds: Histogram,
    /// `Log::appended_bytes` covered by the last successful flush: the
    /// journal bytes up to here are in stream files.
    pub stored_through: Cell<u64>,
    /// Bytes of the checkpoints written.
    pub checkpoint_bytes: Cell<u64>,
}

impl FlushStats {
    /// Stats of a shard whose journal holds `appended` bytes at start.
    pub fn new(appended: u64) -> FlushStats {
        FlushStats {
            ok: Cell::new(0),
            failed: Cell::new(0),
            seconds: Histogram::new(SECONDS),
            stored_through: Cell::new(appended),
            checkpoint_bytes: Cell::new(0),
        }
    }
}

/// A shard's disk space by use, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskUsage {
    /// Segment bytes written that a live stream, bucket or fork may still need.
    pub live: u64,
    /// Segment bytes the next reclamation deletes (nothing live needs
    /// them), and bundle bytes no stream's extent is in (`store::bundles`).
    pub reclaimable: u64,
    /// Zero-filled segment space not yet written (the active segment's
    /// tail and the segment prepared ahead).
    pub preallocated: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_sum_and_merge() {
        let h = Histogram::new(&[1.0, 10.0]);
        for v in [0.5, 1.0, 3.0, 10.0, 11.0] {
            h.observe(v);
        }
        let mut s = h.snapshot();
        assert_eq!(s.counts, vec![2, 2, 1]);
        assert_eq!(s.sum, 25.5);
        s.merge(&h.snapshot());
        assert_eq!(s.counts, vec![4, 4, 2]);
        assert_eq!(s.count(), 10);
    }

    #[test]
    #[should_panic(expected = "bounds must increase")]
    fn unsorted_bounds_are_a_bug() {
        Histogram::new(&[2.0, 1.0]);
    }
}
