//! The cold tier's mark on stream data files (issue 27): bytes of a data
//! file below its *tiered boundary* are held only in the object store (the
//! local copy was dropped, its pages punched, once a confirmed backup
//! manifest held them). The binary's `tier` module decides and drops; this
//! module is what the shards need of it:
//!
//! - the durable marks, one file per shard (`shard-N/tiered`, written by
//!   rename before any byte is punched, so a restart, `sluice check` and
//!   recovery know those zeros are remote bytes, not damage); each mark names
//!   the data file's inode, so a mark never applies to a later file;
//! - the process-wide boundaries the shards read ([`boundary`]; published
//!   before the punch, and never lowered for a file);
//! - the fetch hook ([`install`], [`fetch`]): a shard reads a tiered range by
//!   awaiting an answer from the tier's own thread, never the network;
//! - the cap on writes ([`CAP`]): with `--local-bytes`, a write that adds
//!   stream data is refused while the data files' bytes the object store has
//!   not confirmed (so that cannot be dropped) would pass it.

use std::collections::HashMap;
use std::future::Future;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{OnceLock, RwLock};

/// The marks file in each shard's directory.
pub const MARKS: &str = "tiered";

/// One data file's tiered boundary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mark {
    pub handle: u64,
    /// The data file's inode when its bytes were dropped.
    pub ino: u64,
    /// File positions below this are remote only (a multiple of a page).
    pub boundary: u64,
}

/// Reads `shard_dir`'s marks, keeping those whose data file (at
/// `data_file(handle)`) still exists with the marked inode (a missing marks
/// file makes an empty list).
pub fn load(shard_dir: &Path, data_file: impl Fn(u64) -> PathBuf) -> io::Result<Vec<Mark>> {
    let text = match std::fs::read_to_string(shard_dir.join(MARKS)) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let bad = |line: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{MARKS}: bad line {line:?}"));
    let mut marks = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let mut f = line.split(' ');
        let mut num = |radix| f.next().and_then(|x| u64::from_str_radix(x, radix).ok()).ok_or_else(|| bad(line));
        let m = Mark { handle: num(16)?, ino: num(10)?, boundary: num(10)? };
        match std::fs::metadata(data_file(m.handle)) {
            Ok(meta) if meta.ino() == m.ino => marks.push(m),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(marks)
}

/// Replaces `shard_dir`'s marks durably (temporary file, fsync, rename,
/// directory fsync): once it returns, a restart finds them.
pub fn store(shard_dir: &Path, marks: &[Mark]) -> io::Result<()> {
    let tmp = shard_dir.join(format!("{MARKS}.tmp"));
    let mut f = std::fs::File::create(&tmp)?;
    for m in marks {
        writeln!(f, "{:016x} {} {}", m.handle, m.ino, m.boundary)?;
    }
    f.sync_all()?;
    std::fs::rename(&tmp, shard_dir.join(MARKS))?;
    std::fs::File::open(shard_dir)?.sync_all()
}

fn boundaries() -> &'static RwLock<HashMap<(u32, u64), u64>> {
    static ALL: OnceLock<RwLock<HashMap<(u32, u64), u64>>> = OnceLock::new();
    ALL.get_or_init(Default::default)
}

/// Data file positions below this are remote only, for `handle` on `shard`.
pub fn boundary(shard: u32, handle: u64) -> u64 {
    boundaries().read().unwrap_or_else(|p| p.into_inner()).get(&(shard, handle)).copied().unwrap_or(0)
}

/// Makes `shard`'s marks the boundaries the shards read. A boundary never
/// goes down while its file lives (a reader relies on it: see
/// `StreamFiles::read_bytes`); marks of files gone are forgotten.
pub fn publish(shard: u32, marks: &[Mark]) {
    let mut all = boundaries().write().unwrap_or_else(|p| p.into_inner());
    all.retain(|(s, _), _| *s != shard);
    for m in marks {
        all.insert((shard, m.handle), m.boundary);
    }
}

/// A tiered read: `len` bytes at `pos` of `handle`'s data file on `shard`.
pub type Fetch = dyn Fn(u32, u64, u64, usize) -> Pin<Box<dyn Future<Output = io::Result<Vec<u8>>>>> + Send + Sync;

fn fetcher() -> &'static OnceLock<Box<Fetch>> {
    static FETCH: OnceLock<Box<Fetch>> = OnceLock::new();
    &FETCH
}

/// Installs the tier's reader (once, before the shards start).
pub fn install(f: Box<Fetch>) {
    assert!(fetcher().set(f).is_ok(), "the tier's reader is installed once");
}

/// Whether a tier is set: data file bytes may then be held only in the
/// object store (a placed append is not, `store::place`).
pub fn installed() -> bool {
    fetcher().get().is_some()
}

/// Reads `len` bytes at `pos` of a data file from the object store.
pub async fn fetch(shard: u32, handle: u64, pos: u64, len: usize) -> io::Result<Vec<u8>> {
    match fetcher().get() {
        Some(f) => f(shard, handle, pos, len).await,
        None => Err(io::Error::other("stream bytes are in the object store and no --tier-url is set")),
    }
}

/// The cap on writes while the object store is behind: the tier publishes a
/// ceiling on the journal bytes the shards appended (all shards together),
/// and a shard refuses a write that adds stream data once its count reaches
/// it. Atomics only: a shard never waits on it, nor on the tier.
pub struct Cap {
    /// Journal bytes the shards appended, as counted so far (a shard counts
    /// its own before each write that adds data: [`Cap::room`]).
    appended: AtomicU64,
    /// `appended` may grow to this (`u64::MAX`: no cap, nothing counted).
    ceiling: AtomicU64,
    /// A write was refused since the ceiling was last set.
    held: AtomicBool,
}

/// The process's cap (no ceiling until the tier sets one).
pub static CAP: Cap = Cap::new();

impl Cap {
    pub const fn new() -> Cap {
        Cap { appended: AtomicU64::new(0), ceiling: AtomicU64::new(u64::MAX), held: AtomicBool::new(false) }
    }

    /// Journal bytes counted so far: the tier reads it before measuring
    /// the data files, so bytes appended after count against the room it
    /// then sets.
    pub fn appended(&self) -> u64 {
        self.appended.load(SeqCst)
    }

    /// Lets the shards append up to `ceiling` (as [`Cap::appended`] counts).
    pub fn set_ceiling(&self, ceiling: u64) {
        self.ceiling.store(ceiling, SeqCst);
        self.held.store(false, SeqCst);
    }

    /// Whether a write was refused since the ceiling was last set.
    pub fn held(&self) -> bool {
        self.held.load(SeqCst)
    }

    /// On a shard, before a write of about `bytes` that adds stream data:
    /// counts the `new` journal bytes the shard appended since it last
    /// counted, and says whether `bytes` more stay within the ceiling.
    pub fn room(&self, new: u64, bytes: u64) -> bool {
        let ceiling = self.ceiling.load(SeqCst);
        if ceiling == u64::MAX {
            return true;
        }
        let appended = self.appended.fetch_add(new, SeqCst) + new;
        if appended.saturating_add(bytes) <= ceiling {
            return true;
        }
        if !self.held.load(SeqCst) {
            self.held.store(true, SeqCst);
        }
        false
    }
}

impl Default for Cap {
    fn default() -> Cap {
        Cap::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_stale_ones_are_dropped() {
        let dir = crate::test_dir::TestDir::new("tiered-marks");
        let shard: &Path = &dir;
        let data = |h: u64| shard.join(format!("{h}.data"));
        assert_eq!(load(shard, data).unwrap(), vec![], "no marks file: nothing tiered");
        std::fs::write(data(7), b"x").unwrap();
        let ino = std::fs::metadata(data(7)).unwrap().ino();
        let marks = [
            Mark { handle: 7, ino, boundary: 8192 },
            Mark { handle: 8, ino, boundary: 4096 },
            Mark { handle: 7, ino: ino + 1, boundary: 4096 },
        ];
        store(shard, &marks).unwrap();
        assert_eq!(load(shard, data).unwrap(), vec![marks[0]], "missing files and other inodes are stale");
        std::fs::write(shard.join(MARKS), "zz\n").unwrap();
        assert!(load(shard, data).unwrap_err().to_string().contains("bad line"));
    }

    #[test]
    fn the_cap_refuses_past_its_ceiling_until_raised() {
        let cap = Cap::new();
        assert!(cap.room(1 << 30, 1 << 30), "no ceiling: no cap");
        assert_eq!(cap.appended(), 0, "nothing counted without a ceiling");
        cap.set_ceiling(1000);
        assert!(cap.room(600, 400), "up to the ceiling");
        assert!(!cap.room(0, 401) && cap.held(), "past it: refused, and held shows");
        assert!(!cap.room(500, 0), "bytes appended since count");
        assert_eq!(cap.appended(), 1100);
        cap.set_ceiling(cap.appended() + 500);
        assert!(!cap.held() && cap.room(0, 500) && !cap.room(0, 501));
    }

    #[test]
    fn published_boundaries_replace_a_shards_own() {
        publish(90, &[Mark { handle: 1, ino: 1, boundary: 4096 }]);
        publish(91, &[Mark { handle: 1, ino: 1, boundary: 8192 }]);
        assert_eq!((boundary(90, 1), boundary(91, 1), boundary(90, 2)), (4096, 8192, 0));
        publish(90, &[]);
        assert_eq!((boundary(90, 1), boundary(91, 1)), (0, 8192));
    }
}
