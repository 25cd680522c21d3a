//! Reads of tiered bytes (the cold tier): a thread of its own runs an
//! object-store client on its own runtime; a shard reading bytes below a data
//! file's tiered boundary sends a request over a channel and awaits the
//! answer, never the network (see `sluice_shards::tiered`).
//!
//! A request's file range is mapped through the newest confirmed manifest's
//! extents (see [`super::extents`]) onto blocks of [`BLOCK_BYTES`] of the
//! packs, each fetched with one range GET into the bounded cache (see
//! [`super::cache`]), concurrently, a block in flight fetched once. Each read
//! also fetches the next [`READ_AHEAD_BYTES`] of the file, so a catch-up
//! finds its next blocks in the cache. A failed or timed-out GET fails the
//! read (answered 503), and the next read tries again.
//!
//! A read maps its range once, under the mapping's read lock, and holds a
//! lease on that mapping (see [`super::leases`]) until it and its fetches
//! are done: compaction may move the bytes to another pack meanwhile, and
//! the old pack is deleted only once no lease on the old mapping is held.

use super::args::{BLOCK_BYTES, READ_AHEAD_BYTES};
use super::cache::Lru;
use super::client::Remote;
use super::extents::Resolved;
use super::layout::Extent;
use super::leases::{Lease, Leases};
use super::status;
use crate::tier::error::TierError;
use bytes::Bytes;
use sluice_shards::store::files::{data_name, STREAMS_DIR};
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
use tokio::sync::{mpsc, oneshot, OnceCell};
use tokio::task::JoinHandle;

/// Where the tiered data files' bytes are.
pub type Map = Arc<Mapping>;

#[derive(Default)]
pub struct Mapping {
    /// By path relative to the data dir.
    pub files: RwLock<HashMap<String, Resolved>>,
    /// The reads using each epoch of `files`.
    pub leases: Arc<Leases>,
}

impl Mapping {
    /// The pieces of `path` overlapping `[from, to)` (cut to it; `whole`:
    /// `None` unless they cover all of it), with a lease on this mapping.
    fn pieces(&self, path: &str, from: u64, to: u64, whole: bool) -> (Option<Vec<Extent>>, Lease) {
        let files = self.files.read().unwrap_or_else(|p| p.into_inner());
        let pieces =
            files.get(path).and_then(|f| if whole { f.range(from, to) } else { Some(f.overlapping(from, to)) });
        (pieces, self.leases.take())
    }

    /// Maps the files of `moved` that are mapped (tiered) anew; returns the
    /// epoch from which no read uses their old mapping.
    pub fn remap<'a>(&self, moved: impl IntoIterator<Item = (&'a String, Resolved)>) -> u64 {
        let mut files = self.files.write().unwrap_or_else(|p| p.into_inner());
        for (path, now) in moved {
            if let Some(f) = files.get_mut(path) {
                *f = now;
            }
        }
        self.leases.advance()
    }
}

/// One block of a pack.
type Block = (String, u64);

/// A data file's path relative to the data dir.
pub fn data_path(shard: u32, handle: u64) -> String {
    format!("shard-{shard}/{STREAMS_DIR}/{}", data_name(handle))
}

struct Request {
    shard: u32,
    handle: u64,
    pos: u64,
    len: usize,
    reply: oneshot::Sender<Result<Vec<u8>, TierError>>,
}

struct Reader {
    remote: Remote,
    map: Map,
    cache: Mutex<Lru<Block, Bytes>>,
    inflight: Mutex<HashMap<Block, Arc<OnceCell<Bytes>>>>,
}

/// Starts the reading thread on `remote` with a cache of `cache_bytes` and
/// installs it as the shards' reader; returns the map the backup keeps up to date.
pub fn start(remote: Remote, cache_bytes: u64) -> Map {
    let map = Map::default();
    let reader = Arc::new(Reader {
        remote,
        map: map.clone(),
        cache: Mutex::new(Lru::new(cache_bytes)),
        inflight: Mutex::default(),
    });
    let (tx, rx) = mpsc::unbounded_channel::<Request>();
    std::thread::Builder::new()
        .name("sluice-tier-read".into())
        .spawn(move || reader.remote.block_on(serve(reader.clone(), rx)))
        .expect("the tier's reading thread starts");
    sluice_shards::tiered::install(Box::new(move |shard, handle, pos, len| {
        let (reply, answer) = oneshot::channel();
        let sent = tx.send(Request { shard, handle, pos, len, reply });
        Box::pin(async move {
            sent.map_err(|_| std::io::Error::other("the tier's reading thread is gone"))?;
            match answer.await {
                Ok(r) => r.map_err(|e| std::io::Error::other(format!("stream bytes in the object store: {e}"))),
                Err(_) => Err(std::io::Error::other("the tier's reading thread dropped a read")),
            }
        })
    }));
    map
}

async fn serve(reader: Arc<Reader>, mut rx: mpsc::UnboundedReceiver<Request>) {
    while let Some(r) = rx.recv().await {
        tokio::spawn(answer(reader.clone(), r));
    }
}

async fn answer(reader: Arc<Reader>, r: Request) {
    let path = data_path(r.shard, r.handle);
    let end = r.pos + r.len as u64;
    let got = read(&reader, &path, r.pos, end).await;
    if got.is_ok() {
        let ahead = sluice_shards::tiered::boundary(r.shard, r.handle).min(end + READ_AHEAD_BYTES);
        let (pieces, lease) = reader.map.pieces(&path, end, ahead, false);
        let lease = Arc::new(lease);
        for b in blocks(&pieces.unwrap_or_default()) {
            fetch(&reader, b, false, &lease);
        }
    }
    let _ = r.reply.send(got);
}

/// The blocks holding `pieces`, in their order.
fn blocks(pieces: &[Extent]) -> Vec<Block> {
    let mut out: Vec<Block> = Vec::new();
    for e in pieces {
        for n in e.pack_offset / BLOCK_BYTES..(e.pack_offset + e.len).div_ceil(BLOCK_BYTES) {
            if out.last() != Some(&(e.pack.clone(), n)) {
                out.push((e.pack.clone(), n));
            }
        }
    }
    out
}

/// Bytes `[from, to)` of `path`: every block fetched at once, copied in order.
async fn read(reader: &Arc<Reader>, path: &str, from: u64, to: u64) -> Result<Vec<u8>, TierError> {
    let (pieces, lease) = reader.map.pieces(path, from, to, true);
    let lease = Arc::new(lease);
    let pieces = pieces.ok_or_else(|| format!("{path}: no backup holds bytes {from}..{to}"))?;
    let fetches: HashMap<Block, _> =
        blocks(&pieces).into_iter().map(|b| (b.clone(), fetch(reader, b, true, &lease))).collect();
    let mut got = HashMap::new();
    for (b, f) in fetches {
        got.insert(b, f.await.map_err(|e| format!("a block fetch failed: {e}"))??);
    }
    let mut out = Vec::with_capacity((to - from) as usize);
    for e in pieces {
        let mut at = e.pack_offset;
        while at < e.pack_offset + e.len {
            let n = at / BLOCK_BYTES;
            let bytes = &got[&(e.pack.clone(), n)];
            let (lo, hi) = ((at - n * BLOCK_BYTES) as usize, (e.pack_offset + e.len).min((n + 1) * BLOCK_BYTES));
            let hi = (hi - n * BLOCK_BYTES) as usize;
            if bytes.len() < hi {
                return Err(format!("{}: ends at {} in block {n}, before {hi}", e.pack, bytes.len()).into());
            }
            out.extend_from_slice(&bytes[lo..hi]);
            at = n * BLOCK_BYTES + hi as u64;
        }
    }
    assert_eq!(out.len() as u64, to - from, "the pieces cover the range");
    Ok(out)
}

/// [`block`] on a task of its own, holding `lease` until it is done (a
/// read that fails early leaves its other fetches running).
fn fetch(reader: &Arc<Reader>, b: Block, read: bool, lease: &Arc<Lease>) -> JoinHandle<Result<Bytes, TierError>> {
    let (reader, lease) = (reader.clone(), lease.clone());
    tokio::spawn(async move {
        let got = block(reader, b, read).await;
        drop(lease);
        got
    })
}

/// Block `b`, from the cache or one range GET (shared by every read that
/// wants it meanwhile); `read` counts a cache hit or miss (read-ahead does not).
async fn block(reader: Arc<Reader>, b: Block, read: bool) -> Result<Bytes, TierError> {
    let s = status::get();
    if let Some(bytes) = reader.cache.lock().unwrap_or_else(|p| p.into_inner()).get(&b) {
        if read {
            s.cache_hits.fetch_add(1, Relaxed);
        }
        return Ok(bytes);
    }
    if read {
        s.cache_misses.fetch_add(1, Relaxed);
    }
    let cell = reader.inflight.lock().unwrap_or_else(|p| p.into_inner()).entry(b.clone()).or_default().clone();
    let got = cell
        .get_or_try_init(|| async {
            let t = Instant::now();
            let range = b.1 * BLOCK_BYTES..(b.1 + 1) * BLOCK_BYTES;
            match reader.remote.read_range(&b.0, range).await {
                Ok(bytes) => {
                    s.download_bytes.fetch_add(bytes.len() as u64, Relaxed);
                    s.downloads.fetch_add(1, Relaxed);
                    s.download_micros.fetch_add(t.elapsed().as_micros() as u64, Relaxed);
                    let mut cache = reader.cache.lock().unwrap_or_else(|p| p.into_inner());
                    cache.insert(b.clone(), bytes.clone(), bytes.len() as u64);
                    s.cache_bytes.store(cache.held(), Relaxed);
                    Ok(bytes)
                }
                Err(e) => {
                    s.download_errors.fetch_add(1, Relaxed);
                    Err(e)
                }
            }
        })
        .await
        .cloned();
    let mut inflight = reader.inflight.lock().unwrap_or_else(|p| p.into_inner());
    if inflight.get(&b).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
        inflight.remove(&b);
    }
    got
}
