//! What the seeded simulations and the single-shard tests share: a
//! reproducible random source with JSON generators, the stream key of the
//! built-in bucket, canonical JSON records, one real shard's settings, an
//! append's input and a crash, and the driver that runs seeds (`SLUICE_SIM_SEED=S` reruns one;
//! `SLUICE_SIM_SECONDS=N` runs seeds for N seconds from
//! `SLUICE_SIM_FIRST_SEED`; otherwise `SLUICE_SIM_SEEDS`, default 64, of
//! `SLUICE_SIM_STEPS` steps each).

#![allow(dead_code)]

use sluice_shards::core::append::AppendInput;
use sluice_shards::ids::BUILTIN_BUCKET;
use sluice_shards::log::{FsyncMode, LogConfig};
use sluice_shards::storage::Storage;
use sluice_shards::store::{FlushConfig, Shard, ShardConfig, StreamKey};
use sluice_shards::tuning::{CHECKPOINT_FREE_SPACING, SYNC_ONCE_STREAMS};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one seed may run. A seed takes well under a second; the limit
/// leaves room for a loaded machine and for debug builds.
pub const SEED_LIMIT: Duration = Duration::from_secs(120);

/// The operations a run went through, newest last; shared with the watchdog,
/// which reports them when the run stops making progress.
#[derive(Clone, Default)]
pub struct Trace(Arc<Mutex<Vec<String>>>);

impl Trace {
    pub fn push(&self, op: String) {
        self.0.lock().expect("trace lock").push(op);
    }

    /// The newest `n` operations, oldest first, one per line.
    pub fn tail(&self, n: usize) -> String {
        let ops = self.0.lock().expect("trace lock");
        ops[ops.len().saturating_sub(n)..].join("\n  ")
    }
}

/// splitmix64: small, seedable, identical everywhere.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// 1 to `max` random bytes.
    pub fn bytes(&mut self, max: u64) -> Vec<u8> {
        let n = 1 + self.below(max);
        (0..n).map(|_| self.next() as u8).collect()
    }

    /// Optional JSON whitespace, which normalization drops.
    pub fn space(&mut self) -> &'static str {
        [" ", "", "\n ", "\t", ""][self.below(5) as usize]
    }

    /// One JSON value as sent (with whitespace) and its canonical record;
    /// an array only if `arrays` (inside an array body, where it is one message).
    pub fn json_value(&mut self, arrays: bool) -> (String, String) {
        let n = self.below(1000);
        let (sp1, sp2) = (self.space(), self.space());
        match self.below(if arrays { 4 } else { 3 }) {
            0 => (n.to_string(), n.to_string()),
            1 => (format!("\"v {n}\""), format!("\"v {n}\"")),
            2 => (format!("{{{sp1}\"k\"{sp2}:{sp1}{n}}}"), format!("{{\"k\":{n}}}")),
            // A nested array is one message: only the top level is flattened.
            _ => (format!("[{sp1}{n},{sp2}true]"), format!("[{n},true]")),
        }
    }

    /// A JSON body (an array of `0..=max` values, or one bare value) and the
    /// canonical records the stream must store for it.
    pub fn json_body(&mut self, max: u64) -> (Vec<u8>, Vec<String>) {
        if self.chance(20) {
            // A bare array would be flattened: a bare value is never one.
            let (sent, record) = self.json_value(false);
            return (sent.into_bytes(), vec![record]);
        }
        let (mut sent, mut records) = (Vec::new(), Vec::new());
        for _ in 0..self.below(max + 1) {
            let (v, r) = self.json_value(true);
            sent.push(v);
            records.push(r);
        }
        let sep = format!(",{}", self.space());
        (format!("{}[{}]", self.space(), sent.join(&sep)).into_bytes(), records)
    }
}

/// A fresh scratch directory for one run, in memory where `/dev/shm`
/// exists; whatever an earlier run of the same name left is removed.
pub fn scratch_root(name: &str) -> std::path::PathBuf {
    let shm = std::path::Path::new("/dev/shm");
    let base = if shm.is_dir() { shm.to_path_buf() } else { std::env::temp_dir() };
    let root = base.join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    root
}

/// Runs `test` on the executor with a fresh scratch data dir (its `shard-0`
/// made), then removes the dir.
pub fn in_scratch<F>(name: &str, test: impl FnOnce(std::path::PathBuf) -> F + Send + 'static)
where
    F: std::future::Future<Output = ()> + 'static,
{
    let root = scratch_root(name);
    std::fs::create_dir_all(root.join("shard-0")).unwrap();
    let dir = root.clone();
    sluice_shards::tick::block_on(move || test(dir));
    std::fs::remove_dir_all(&root).unwrap();
}

/// Settings of shard 0 of a one-shard data dir at `root`: durable commits,
/// `segment`-byte journal segments, the fewest open files, real storage.
pub fn one_shard(root: &std::path::Path, segment: u64, flush: FlushConfig) -> ShardConfig {
    ShardConfig {
        log: LogConfig { dir: root.join("shard-0"), segment_size: segment, fsync: FsyncMode::Always },
        open_files: sluice_shards::store::files::MIN_OPEN_FILES,
        max_producers: 16,
        flush,
        storage: Storage::Real,
        shards: 1,
    }
}

/// A flush that never runs by itself (tests flush when they decide to).
pub const NO_BACKGROUND_FLUSH: FlushConfig = FlushConfig {
    bytes: 1 << 40,
    every: Duration::from_secs(1 << 20),
    free_spacing: CHECKPOINT_FREE_SPACING,
    sync_once: SYNC_ONCE_STREAMS,
    place_from: sluice_shards::tuning::PLACE_FROM,
    bundle_max: sluice_shards::tuning::BUNDLE_MAX,
    slice: 3,
};

/// An octet-stream append of `body`.
pub fn append_input(body: &[u8]) -> AppendInput<'_> {
    AppendInput {
        content_type: Some("application/octet-stream"),
        body,
        close: false,
        stream_seq: None,
        producer: None,
        record_match: None,
    }
}

/// Ends `shard` as a crash would: nothing more is written for it (its log's
/// tasks stay parked; what they buffered is lost), once the segment it was
/// preparing exists.
pub async fn crash(shard: Shard) {
    glommio::timer::sleep(Duration::from_millis(50)).await;
    std::mem::forget(shard);
}

pub fn key(name: &str) -> Box<StreamKey> {
    StreamKey::boxed(BUILTIN_BUCKET, name)
}

/// The stored bytes and message ends of canonical JSON records.
pub fn canonical(records: &[String]) -> (Vec<u8>, Vec<u64>) {
    let (mut data, mut ends) = (Vec::new(), Vec::new());
    for r in records {
        data.extend_from_slice(r.as_bytes());
        data.push(b'\n');
        ends.push(data.len() as u64);
    }
    (data, ends)
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name} must be a number")))
}

/// Runs `run(seed, steps, trace)` over the seeds the environment asks for,
/// each on its own thread under the watchdog.
pub fn seeds(default_steps: u64, run: impl Fn(u64, usize, Trace) + Send + Sync + 'static) {
    let run = Arc::new(run);
    let steps = env("SLUICE_SIM_STEPS").unwrap_or(default_steps) as usize;
    let one = |seed: u64| watched(seed, steps, run.clone());
    if let Some(seed) = env("SLUICE_SIM_SEED") {
        one(seed);
        return;
    }
    if let Some(secs) = env("SLUICE_SIM_SECONDS") {
        let until = std::time::Instant::now() + Duration::from_secs(secs);
        let mut seed = env("SLUICE_SIM_FIRST_SEED").unwrap_or(0);
        while std::time::Instant::now() < until {
            one(seed);
            seed += 1;
        }
        println!("simulated seeds up to {seed}");
        return;
    }
    for seed in 0..env("SLUICE_SIM_SEEDS").unwrap_or(64) {
        one(seed);
    }
}

/// Runs one seed on a thread of its own; fails with the seed and its last
/// operations if it does not finish within [`SEED_LIMIT`] (the stuck
/// thread is left behind: the test process ends with the failure).
fn watched(seed: u64, steps: usize, run: Arc<dyn Fn(u64, usize, Trace) + Send + Sync>) {
    let trace = Trace::default();
    let (done, finished) = mpsc::channel();
    let t = trace.clone();
    let thread = std::thread::spawn(move || {
        run(seed, steps, t);
        let _ = done.send(());
    });
    match finished.recv_timeout(SEED_LIMIT) {
        Err(RecvTimeoutError::Timeout) => panic!(
            "seed {seed} still running after {SEED_LIMIT:?}: a hang or a livelock\nlast operations:\n  {}\n\
             reproduce: SLUICE_SIM_SEED={seed}",
            trace.tail(30)
        ),
        // Finished, or panicked (the sender dropped): the join reports which.
        Ok(()) | Err(RecvTimeoutError::Disconnected) => {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}
