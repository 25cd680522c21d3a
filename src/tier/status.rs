//! The backup's state for `/v1/metrics` and `/v1/healthz`: process-wide
//! atomics the backup thread writes and a scrape reads (no shard involved).

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

#[derive(Default)]
pub struct Status {
    pub enabled: AtomicBool,
    pub upload_bytes: AtomicU64,
    pub uploads: AtomicU64,
    pub upload_errors: AtomicU64,
    /// Sum of upload request seconds, in microseconds.
    pub upload_micros: AtomicU64,
    pub cycles: AtomicU64,
    /// Bytes the last scan found changed and not yet confirmed remotely.
    pub backlog_bytes: AtomicU64,
    /// When the positions of the newest confirmed manifest were taken
    /// (Unix ms; 0 before the first).
    pub confirmed_unix_ms: AtomicU64,
    /// Since when (Unix ms) the store has been failing; 0 when healthy.
    pub failing_since_ms: AtomicU64,
    pub last_error: Mutex<String>,
    /// The cold tier: bytes and blocks read back from the object store,
    /// their request time (microseconds) and failures.
    pub download_bytes: AtomicU64,
    pub downloads: AtomicU64,
    pub download_micros: AtomicU64,
    pub download_errors: AtomicU64,
    /// Blocks a tiered read found in the cache, and did not.
    pub cache_hits: AtomicU64,
    pub cache_misses: AtomicU64,
    /// Bytes the cache holds.
    pub cache_bytes: AtomicU64,
    /// Stream data bytes on local disk, and bytes held only remotely.
    pub local_bytes: AtomicU64,
    pub tiered_bytes: AtomicU64,
    /// Pack compaction: live bytes rewritten into new packs, old packs
    /// emptied, and bytes range-read for it.
    pub compacted_bytes: AtomicU64,
    pub compacted_packs: AtomicU64,
    pub compaction_read_bytes: AtomicU64,
}

pub fn get() -> &'static Status {
    static STATUS: std::sync::OnceLock<Status> = std::sync::OnceLock::new();
    STATUS.get_or_init(Status::default)
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Status {
    pub fn failed(&self, why: &str) {
        self.upload_errors.fetch_add(1, Relaxed);
        let _ = self.failing_since_ms.compare_exchange(0, now_ms(), Relaxed, Relaxed);
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = why.to_string();
    }

    pub fn confirmed(&self, taken_unix_ms: u64) {
        self.confirmed_unix_ms.store(taken_unix_ms, Relaxed);
        self.failing_since_ms.store(0, Relaxed);
        self.cycles.fetch_add(1, Relaxed);
    }

    /// Age of the oldest acknowledged data not yet confirmed remotely: the
    /// live RPO (seconds).
    pub fn unshipped_age(&self) -> f64 {
        let confirmed = self.confirmed_unix_ms.load(Relaxed);
        if confirmed == 0 {
            return 0.0;
        }
        now_ms().saturating_sub(confirmed) as f64 / 1000.0
    }

    /// `None` when healthy (or off); else why the object store is failing.
    pub fn failing(&self) -> Option<String> {
        let since = self.failing_since_ms.load(Relaxed);
        if !self.enabled.load(Relaxed) || since == 0 {
            return None;
        }
        let secs = now_ms().saturating_sub(since) / 1000;
        let why = self.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Some(format!("object store failing for {secs} s: {why}"))
    }

    /// `None` when healthy (or off); else why the backup is degraded: the
    /// store failing, writes held by the cold tier's cap, or both.
    pub fn degraded(&self) -> Option<String> {
        let held = sluice_shards::tiered::CAP.held().then_some(WRITES_HELD);
        match (self.failing(), held) {
            (Some(f), Some(h)) => Some(format!("{f}; {h}")),
            (f, h) => f.or(h.map(str::to_string)),
        }
    }
}

/// What `/v1/healthz` adds while the cold tier refuses writes that add data.
const WRITES_HELD: &str = "writes held: local data the object store has not confirmed is at --local-bytes";

/// The `/v1/healthz` body: `ok`, or `degraded: ...` (still 200: the
/// server serves, only its backup is behind).
pub fn health_body() -> Vec<u8> {
    match get().degraded() {
        None => b"ok\n".to_vec(),
        Some(why) => format!("degraded: {why}\n").into_bytes(),
    }
}

/// Appends the backup's metric families (nothing when it is off).
pub fn render(out: &mut String) {
    let s = get();
    if !s.enabled.load(Relaxed) {
        return;
    }
    let (l, b) = (|a: &AtomicU64| a.load(Relaxed) as f64, u8::from(s.failing().is_some()));
    let held = u8::from(sluice_shards::tiered::CAP.held());
    let families: [(&str, &str, &str, f64); 21] = [
        ("sluice_tier_upload_bytes_total", "counter", "Bytes uploaded to the object store.", l(&s.upload_bytes)),
        ("sluice_tier_uploads_total", "counter", "Objects uploaded to the object store.", l(&s.uploads)),
        (
            "sluice_tier_upload_seconds_total",
            "counter",
            "Time spent in uploads to the object store (divide by uploads for the mean latency).",
            l(&s.upload_micros) / 1e6,
        ),
        (
            "sluice_tier_errors_total",
            "counter",
            "Failed object-store steps (each retried with backoff).",
            l(&s.upload_errors),
        ),
        ("sluice_tier_cycles_total", "counter", "Backup cycles confirmed (manifests written).", l(&s.cycles)),
        (
            "sluice_tier_backlog_bytes",
            "gauge",
            "Changed local bytes not yet confirmed in the object store.",
            l(&s.backlog_bytes),
        ),
        (
            "sluice_tier_unshipped_age_seconds",
            "gauge",
            "Age of the oldest acknowledged write not yet confirmed remotely (the live RPO).",
            s.unshipped_age(),
        ),
        (
            "sluice_tier_degraded",
            "gauge",
            "1 while the object store is failing (the server still serves and keeps every local copy).",
            f64::from(b),
        ),
        (
            "sluice_tier_writes_held",
            "gauge",
            "1 while writes that add stream data are refused (507): local data the object store has not confirmed is at --local-bytes.",
            f64::from(held),
        ),
        (
            "sluice_tier_download_bytes_total",
            "counter",
            "Tiered bytes read back from the object store.",
            l(&s.download_bytes),
        ),
        (
            "sluice_tier_downloads_total",
            "counter",
            "Range GETs of tiered bytes (one block each; read-ahead included).",
            l(&s.downloads),
        ),
        (
            "sluice_tier_download_seconds_total",
            "counter",
            "Time spent in range GETs of tiered bytes (divide by downloads for the mean latency).",
            l(&s.download_micros) / 1e6,
        ),
        (
            "sluice_tier_download_errors_total",
            "counter",
            "Failed range GETs of tiered bytes (the read is answered 503).",
            l(&s.download_errors),
        ),
        (
            "sluice_tier_cache_hits_total",
            "counter",
            "Blocks of tiered reads found in the cache (read ahead or read before).",
            l(&s.cache_hits),
        ),
        (
            "sluice_tier_cache_misses_total",
            "counter",
            "Blocks of tiered reads not in the cache (fetched, or awaited while in flight).",
            l(&s.cache_misses),
        ),
        ("sluice_tier_cache_bytes", "gauge", "Tiered bytes the cache holds (--cache-bytes).", l(&s.cache_bytes)),
        (
            "sluice_tier_local_bytes",
            "gauge",
            "Stream data bytes on local disk (the cold tier keeps them within --local-bytes).",
            l(&s.local_bytes),
        ),
        (
            "sluice_tier_tiered_bytes",
            "gauge",
            "Stream data bytes held only in the object store (local copies dropped).",
            l(&s.tiered_bytes),
        ),
        (
            "sluice_tier_compacted_bytes_total",
            "counter",
            "Live bytes pack compaction copied out of mostly-dead packs into new ones.",
            l(&s.compacted_bytes),
        ),
        (
            "sluice_tier_compacted_packs_total",
            "counter",
            "Packs compaction emptied (deleted once no kept manifest or read names them).",
            l(&s.compacted_packs),
        ),
        (
            "sluice_tier_compaction_read_bytes_total",
            "counter",
            "Bytes compaction range-read from old packs (live bytes and the small gaps between them).",
            l(&s.compaction_read_bytes),
        ),
    ];
    for (name, kind, help, v) in families {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
    }
}
