//! `GET /v1/metrics`: Prometheus text format (0.0.4). Each shard counts in
//! its own `Cell`s (no locks, no atomics); a scrape asks every shard for a
//! snapshot over the cross-shard mesh, then merges and renders here.

use sluice_shards::stats::{DiskUsage, Histogram, HistogramSnapshot, SECONDS};
use sluice_shards::store::Shard;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What one shard counts at the HTTP edge.
#[derive(Default)]
pub struct ShardMetrics {
    requests: RefCell<BTreeMap<(&'static str, u16), u64>>,
    request_seconds: RefCell<BTreeMap<&'static str, Histogram>>,
    /// Requests this shard passed to another shard (connection handoffs and
    /// bucket-level messages).
    pub cross_shard: Cell<u64>,
    /// Long-polls parked here now.
    pub long_polls: Cell<u64>,
    /// SSE connections open here now.
    pub sse: Cell<u64>,
    /// How long this shard's recovery took at start.
    pub recovery: Cell<Duration>,
}

impl ShardMetrics {
    /// Counts one answered request on `route` (a fixed label).
    pub fn request(&self, route: &'static str, status: u16, took: Duration) {
        *self.requests.borrow_mut().entry((route, status)).or_default() += 1;
        self.request_seconds
            .borrow_mut()
            .entry(route)
            .or_insert_with(|| Histogram::new(SECONDS))
            .observe(took.as_secs_f64());
    }
}

/// One shard's values at scrape time; sent between shards.
#[derive(Debug)]
pub struct ShardSnapshot {
    shard: usize,
    requests: Vec<((&'static str, u16), u64)>,
    request_seconds: Vec<(&'static str, HistogramSnapshot)>,
    appends: u64,
    append_bytes: u64,
    placed: u64,
    fsync_seconds: HistogramSnapshot,
    group_commit_records: HistogramSnapshot,
    connections: u64,
    tasks: u64,
    long_polls: u64,
    sse: u64,
    streams: u64,
    buckets: u64,
    disk: DiskUsage,
    cross_shard: u64,
    recovery_seconds: f64,
    torn_bytes: u64,
    reloads: u64,
    flushes_ok: u64,
    flushes_failed: u64,
    flush_seconds: HistogramSnapshot,
    checkpoint_bytes: u64,
    unflushed_bytes: u64,
    log_failed: bool,
}

/// Takes shard `id`'s snapshot: its edge counters `m`, its store, its open
/// connections and the SIGHUPs it has seen.
pub fn snapshot(id: usize, m: &ShardMetrics, shard: &Shard, connections: usize, reloads: u64) -> ShardSnapshot {
    let log = &shard.log.stats;
    // Before the store's borrow below: the sum of the streams' files takes it mutably.
    let disk = shard.disk_usage();
    let store = shard.store.borrow();
    ShardSnapshot {
        shard: id,
        requests: m.requests.borrow().iter().map(|(k, v)| (*k, *v)).collect(),
        request_seconds: m.request_seconds.borrow().iter().map(|(k, h)| (*k, h.snapshot())).collect(),
        appends: log.appends.get(),
        append_bytes: log.append_bytes.get(),
        placed: log.placed.get(),
        fsync_seconds: log.fsync_seconds.snapshot(),
        group_commit_records: log.group_commit_records.snapshot(),
        connections: connections as u64,
        tasks: sluice_shards::tasks::live(),
        long_polls: m.long_polls.get(),
        sse: m.sse.get(),
        streams: store.streams.len() as u64,
        buckets: store.buckets.len() as u64,
        disk,
        cross_shard: m.cross_shard.get(),
        recovery_seconds: m.recovery.get().as_secs_f64(),
        torn_bytes: log.torn_bytes.get(),
        reloads,
        flushes_ok: shard.flush_stats.ok.get(),
        flushes_failed: shard.flush_stats.failed.get(),
        flush_seconds: shard.flush_stats.seconds.snapshot(),
        checkpoint_bytes: shard.flush_stats.checkpoint_bytes.get(),
        unflushed_bytes: shard.log.appended_bytes() - shard.flush_stats.stored_through.get(),
        log_failed: shard.log.is_failed(),
    }
}

/// Renders every shard's snapshot (in shard order) as one exposition.
pub fn render(shards: &[ShardSnapshot]) -> String {
    let mut out = String::with_capacity(8 << 10);
    let mut requests: BTreeMap<(&str, u16), u64> = BTreeMap::new();
    let mut seconds: BTreeMap<&str, HistogramSnapshot> = BTreeMap::new();
    for s in shards {
        for (k, v) in &s.requests {
            *requests.entry(*k).or_default() += v;
        }
        for (route, h) in &s.request_seconds {
            match seconds.get_mut(route) {
                Some(sum) => sum.merge(h),
                None => drop(seconds.insert(route, h.clone())),
            }
        }
    }
    family(&mut out, "sluice_http_requests_total", "counter", "HTTP requests answered, by route and status.");
    for ((route, status), v) in &requests {
        let _ = writeln!(out, "sluice_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {v}");
    }
    family(&mut out, "sluice_http_request_seconds", "histogram", "Time from a request's head to its answer.");
    for (route, h) in &seconds {
        histogram(&mut out, "sluice_http_request_seconds", &format!("route=\"{route}\""), h);
    }
    let per_shard = |out: &mut String, name: &str, kind: &str, help: &str, value: &dyn Fn(&ShardSnapshot) -> f64| {
        family(out, name, kind, help);
        for s in shards {
            let _ = writeln!(out, "{name}{{shard=\"{}\"}} {}", s.shard, value(s));
        }
    };
    per_shard(&mut out, "sluice_appends_total", "counter", "Append records made durable or pending.", &|s| {
        s.appends as f64
    });
    per_shard(&mut out, "sluice_append_bytes_total", "counter", "Payload bytes appended.", &|s| s.append_bytes as f64);
    per_shard(
        &mut out,
        "sluice_placed_appends_total",
        "counter",
        "Appends written into their stream file before their journal record (large appends written once).",
        &|s| s.placed as f64,
    );
    let per_shard_histogram = |out: &mut String, name: &str, pick: &dyn Fn(&ShardSnapshot) -> &HistogramSnapshot| {
        for s in shards {
            histogram(out, name, &format!("shard=\"{}\"", s.shard), pick(s));
        }
    };
    family(
        &mut out,
        "sluice_fsync_seconds",
        "histogram",
        "Time of each group commit's durable writes (O_DSYNC, sync included).",
    );
    per_shard_histogram(&mut out, "sluice_fsync_seconds", &|s| &s.fsync_seconds);
    family(&mut out, "sluice_group_commit_records", "histogram", "Log records made durable by each group commit.");
    per_shard_histogram(&mut out, "sluice_group_commit_records", &|s| &s.group_commit_records);
    family(&mut out, "sluice_flushes_total", "counter", "Flushes of journal bytes into stream files, by result.");
    for s in shards {
        for (result, v) in [("ok", s.flushes_ok), ("failed", s.flushes_failed)] {
            let _ = writeln!(out, "sluice_flushes_total{{shard=\"{}\",result=\"{result}\"}} {v}", s.shard);
        }
    }
    family(&mut out, "sluice_flush_seconds", "histogram", "Time of each flush, from capture to journal reclamation.");
    per_shard_histogram(&mut out, "sluice_flush_seconds", &|s| &s.flush_seconds);
    let help = "1 while the shard's log is stopped after a failed write or sync (writes get 503 until restart).";
    per_shard(&mut out, "sluice_log_failed", "gauge", help, &|s| f64::from(u8::from(s.log_failed)));
    let help = "Bytes of checkpoints written (a flush writes one only when due: first after a start, space given back, or the journal since the last as long as it).";
    per_shard(&mut out, "sluice_checkpoint_bytes_total", "counter", help, &|s| s.checkpoint_bytes as f64);
    let help = "Journal bytes appended since start and not yet in stream files.";
    per_shard(&mut out, "sluice_unflushed_bytes", "gauge", help, &|s| s.unflushed_bytes as f64);
    per_shard(&mut out, "sluice_connections", "gauge", "Open client connections.", &|s| s.connections as f64);
    per_shard(&mut out, "sluice_tasks", "gauge", "Tasks running on the shard's executor.", &|s| s.tasks as f64);
    family(&mut out, "sluice_live_readers", "gauge", "Parked long-poll requests and open SSE connections.");
    for s in shards {
        let _ = writeln!(out, "sluice_live_readers{{shard=\"{}\",kind=\"long_poll\"}} {}", s.shard, s.long_polls);
        let _ = writeln!(out, "sluice_live_readers{{shard=\"{}\",kind=\"sse\"}} {}", s.shard, s.sse);
    }
    per_shard(&mut out, "sluice_streams", "gauge", "Streams held (including tombstones kept for forks).", &|s| {
        s.streams as f64
    });
    family(&mut out, "sluice_buckets", "gauge", "Buckets (every shard knows every bucket).");
    let _ = writeln!(out, "sluice_buckets {}", shards.first().map_or(0, |s| s.buckets));
    let help = "Disk bytes of the shard's directory by use: live (journal in use, stream files), \
                reclaimable (journal segments the next flush deletes, bundle bytes no stream is in), \
                preallocated (journal space not yet written).";
    family(&mut out, "sluice_disk_bytes", "gauge", help);
    for s in shards {
        for (kind, v) in
            [("live", s.disk.live), ("reclaimable", s.disk.reclaimable), ("preallocated", s.disk.preallocated)]
        {
            let _ = writeln!(out, "sluice_disk_bytes{{shard=\"{}\",kind=\"{kind}\"}} {v}", s.shard);
        }
    }
    per_shard(&mut out, "sluice_cross_shard_requests_total", "counter", "Requests passed to another shard.", &|s| {
        s.cross_shard as f64
    });
    per_shard(&mut out, "sluice_recovery_seconds", "gauge", "Log replay time at the last start.", &|s| {
        s.recovery_seconds
    });
    per_shard(&mut out, "sluice_recovery_torn_bytes", "gauge", "Torn-tail bytes zeroed by the last recovery.", &|s| {
        s.torn_bytes as f64
    });
    per_shard(&mut out, "sluice_reloads_total", "counter", "SIGHUP reload requests this shard has seen.", &|s| {
        s.reloads as f64
    });
    family(&mut out, "sluice_build_info", "gauge", "Always 1; the version is the label.");
    let _ = writeln!(out, "sluice_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
    crate::tier::status::render(&mut out);
    process(&mut out);
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Writes `_bucket` (cumulative), `_sum` and `_count` lines; `labels` may be empty.
fn histogram(out: &mut String, name: &str, labels: &str, h: &HistogramSnapshot) {
    let sep = if labels.is_empty() { "" } else { "," };
    let mut cumulative = 0;
    for (i, count) in h.counts.iter().enumerate() {
        cumulative += count;
        let le = h.bounds.get(i).map_or_else(|| "+Inf".to_string(), |b| b.to_string());
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}");
    }
    let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
    let _ = writeln!(out, "{name}_sum{braces} {}\n{name}_count{braces} {cumulative}", h.sum);
}

/// When the process started, as seconds since the Unix epoch (set once, at start).
static STARTED: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

/// Records the process start time for `process_start_time_seconds`.
pub fn mark_start() {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    STARTED.get_or_init(|| now);
}

/// The standard `process_*` metrics: CPU time and memory from /proc/self,
/// descriptors open and allowed, and the start time.
fn process(out: &mut String) {
    // SAFETY: sysconf(3) has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let mut fields = statm.split_whitespace().map(|f| f.parse::<u64>().unwrap_or(0));
    let (virt, resident) = (fields.next().unwrap_or(0), fields.next().unwrap_or(0));
    family(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    let _ = writeln!(out, "process_resident_memory_bytes {}", resident * page);
    family(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
    let _ = writeln!(out, "process_virtual_memory_bytes {}", virt * page);
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    family(out, "process_open_fds", "gauge", "Open file descriptors.");
    let _ = writeln!(out, "process_open_fds {fds}");
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit(2) fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 {
        family(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
        let _ = writeln!(out, "process_max_fds {}", limit.rlim_cur);
    }
    // utime and stime, fields 14 and 15 of /proc/self/stat, in clock ticks
    // (counted after the command name, which may hold spaces).
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after_name.split_whitespace().skip(11).take(2).filter_map(|f| f.parse::<u64>().ok()).sum();
    // SAFETY: sysconf(3) has no preconditions.
    let hz = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) }).unwrap_or(100).max(1);
    family(out, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
    let _ = writeln!(out, "process_cpu_seconds_total {}", ticks as f64 / hz as f64);
    if let Some(started) = STARTED.get() {
        family(out, "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
        let _ = writeln!(out, "process_start_time_seconds {started}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_lines_are_cumulative_with_inf_sum_and_count() {
        let h = Histogram::new(&[0.5, 2.0]);
        for v in [0.1, 1.0, 1.5, 9.0] {
            h.observe(v);
        }
        let mut out = String::new();
        histogram(&mut out, "x_seconds", "route=\"stream\"", &h.snapshot());
        assert_eq!(
            out,
            "x_seconds_bucket{route=\"stream\",le=\"0.5\"} 1\n\
             x_seconds_bucket{route=\"stream\",le=\"2\"} 3\n\
             x_seconds_bucket{route=\"stream\",le=\"+Inf\"} 4\n\
             x_seconds_sum{route=\"stream\"} 11.6\n\
             x_seconds_count{route=\"stream\"} 4\n"
        );
        let mut bare = String::new();
        histogram(&mut bare, "y", "", &Histogram::new(&[1.0]).snapshot());
        assert_eq!(bare, "y_bucket{le=\"1\"} 0\ny_bucket{le=\"+Inf\"} 0\ny_sum 0\ny_count 0\n");
    }
}
