//! Stream files: each stream's own bytes, contiguous (`<handle>.data`,
//! file position = offset - the stream's base), its record index
//! (`<handle>.idx`, sparse pages of record lengths and CRC32Cs, laid out by
//! [`crate::core::index`]), and its latest snapshot (`<handle>.<gen>.snap`,
//! named by the flush generation that wrote it). They live under
//! `shard-N/streams/`; forks read their ancestors' files on any shard.
//!
//! Files below a stream's stored mark never change (except retention's
//! hole punches), so any shard may read them through its own descriptors.

use crate::core::body::FileLayer;
use crate::core::index::{decode_page, Header, Page, INDEX_PAGE, PAGE_HEADER};
use crate::storage::{Access, Storage};
use glommio::io::BufferedFile;
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// What a stream file is opened for: a write creates it, a read must find it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    Read,
    /// To write, creating the file when missing.
    Write,
    /// To write into a file that exists.
    Extend,
}

/// The directory under a shard's directory that holds its stream files.
pub const STREAMS_DIR: &str = "streams";
pub use crate::core::limits::PAGE;
pub use crate::tuning::{MAX_OPEN_FILES, MIN_OPEN_FILES, READ_CHUNK, WRITE_PIECE};

pub fn data_name(handle: u64) -> String {
    FileName::Data(handle).to_string()
}

pub fn index_name(handle: u64) -> String {
    FileName::Index(handle).to_string()
}

pub fn snapshot_name(handle: u64, generation: u64) -> String {
    FileName::Snapshot(handle, generation).to_string()
}

/// A stream's own data and index files.
pub fn stream_names(handle: u64) -> [String; 2] {
    [data_name(handle), index_name(handle)]
}

/// The directory beside a shard's streams directory that holds its bundles.
pub const BUNDLES_DIR: &str = "bundles";

/// A bundle's name as a bundles directory lists it.
pub fn bundle_file(no: u32) -> String {
    format!("{no:08x}.bundle")
}

/// The bundle number a bundles directory's entry `name` is of.
pub fn parse_bundle_file(name: &str) -> Option<u32> {
    let no = name.strip_suffix(".bundle").filter(|n| n.len() == 8)?;
    u32::from_str_radix(no, 16).ok().filter(|&n| n > 0)
}

/// What a file name in a streams directory says it is (and, rendered, the
/// name). A bundle ([`super::bundles`]) lives in the bundles directory
/// beside it, and its name is relative to the streams directory too, so
/// every path made from a name (descriptors, the graveyard, a
/// checkpoint's doomed files) reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileName {
    Data(u64),
    Index(u64),
    Snapshot(u64, u64),
    Bundle(u32),
}

/// Where a file layer's index and data are: the file, and the position
/// that holds offset `origin` of the data (`record` 0 of the index).
fn index_of(layer: FileLayer) -> (FileName, u64) {
    match layer.bundle {
        Some(b) => (FileName::Bundle(b.no.get()), b.index_pos()),
        None => (FileName::Index(layer.handle), 0),
    }
}

fn data_of(layer: FileLayer) -> (FileName, u64) {
    match layer.bundle {
        Some(b) => {
            let index = layer.index_len.expect("a bundled stream is this shard's own");
            (FileName::Bundle(b.no.get()), b.data_pos(index))
        }
        None => (FileName::Data(layer.handle), 0),
    }
}

/// The file holding `layer`'s index (in messages about it).
pub fn index_file_name(layer: FileLayer) -> FileName {
    index_of(layer).0
}

/// The file holding `layer`'s data (in messages about it).
pub fn data_file_name(layer: FileLayer) -> FileName {
    data_of(layer).0
}

impl std::fmt::Display for FileName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileName::Data(h) => write!(f, "{h:016x}.data"),
            FileName::Index(h) => write!(f, "{h:016x}.idx"),
            FileName::Snapshot(h, g) => write!(f, "{h:016x}.{g:016x}.snap"),
            FileName::Bundle(no) => write!(f, "../{BUNDLES_DIR}/{}", bundle_file(*no)),
        }
    }
}

impl FileName {
    pub fn parse(name: &str) -> Option<FileName> {
        if let Some(b) = name.strip_prefix("../").and_then(|n| n.strip_prefix(BUNDLES_DIR)) {
            return b.strip_prefix('/').and_then(parse_bundle_file).map(FileName::Bundle);
        }
        let hex = |s: &str| (s.len() == 16).then(|| u64::from_str_radix(s, 16).ok()).flatten();
        if let Some(h) = name.strip_suffix(".data") {
            return hex(h).map(FileName::Data);
        }
        if let Some(h) = name.strip_suffix(".idx") {
            return hex(h).map(FileName::Index);
        }
        let (h, g) = name.strip_suffix(".snap")?.split_once('.')?;
        Some(FileName::Snapshot(hex(h)?, hex(g)?))
    }

    /// Where the file is under the data directory, for messages.
    pub fn shown(self, shard: u32) -> String {
        match self {
            FileName::Bundle(no) => format!("shard-{shard}/{BUNDLES_DIR}/{}", bundle_file(no)),
            name => format!("shard-{shard}/{STREAMS_DIR}/{name}"),
        }
    }

    /// The stream whose file this is (None for a bundle: many streams').
    pub fn stream(self) -> Option<u64> {
        match self {
            FileName::Data(h) | FileName::Index(h) | FileName::Snapshot(h, _) => Some(h),
            FileName::Bundle(_) => None,
        }
    }
}

/// `f`'s files do not hold what its index says: damage, named by file.
pub fn damaged(f: FileLayer, name: FileName, what: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, format!("{}: {what}", name.shown(f.shard)))
}

/// How a stream-file write is made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sync {
    /// By an fdatasync of the file, before the write returns.
    File,
    /// By the caller, later, with one `syncfs` for every file it wrote.
    Later,
}

/// A shard's view of every shard's stream files, with cached descriptors.
pub struct StreamFiles {
    /// The data directory (parent of every `shard-N`).
    root: PathBuf,
    shard: u32,
    /// Keyed by what the file is, so a lookup builds no path.
    open: RefCell<HashMap<(u32, FileName), Rc<BufferedFile>>>,
    /// Descriptors `open` may hold.
    capacity: usize,
    storage: Storage,
    /// The streams directory, open for `syncfs` ([`StreamFiles::file_system`]).
    file_system: std::cell::OnceCell<std::sync::Arc<std::fs::File>>,
}

impl StreamFiles {
    pub fn new(root: &Path, shard: u32, capacity: usize, storage: Storage) -> StreamFiles {
        assert!((MIN_OPEN_FILES..=MAX_OPEN_FILES).contains(&capacity), "descriptor cache of {capacity}");
        let open = RefCell::new(HashMap::new());
        StreamFiles { root: root.to_path_buf(), shard, open, capacity, storage, file_system: Default::default() }
    }

    /// This shard's streams directory, open to sync the file system it is
    /// on ([`Storage::sync_fs`]): opened once, before the first writes it
    /// makes durable, and kept, so a write-back error since is reported.
    pub fn file_system(&self) -> std::io::Result<std::sync::Arc<std::fs::File>> {
        if let Some(fs) = self.file_system.get() {
            return Ok(fs.clone());
        }
        let fs = std::sync::Arc::new(self.storage.open_file_system(&self.dir(self.shard))?);
        Ok(self.file_system.get_or_init(|| fs).clone())
    }

    /// Where every file operation of the store goes.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// `shard`'s streams directory.
    pub fn dir(&self, shard: u32) -> PathBuf {
        self.root.join(format!("shard-{shard}")).join(STREAMS_DIR)
    }

    /// This shard's bundles directory.
    pub fn bundles_dir(&self) -> PathBuf {
        self.root.join(format!("shard-{}", self.shard)).join(BUNDLES_DIR)
    }

    /// An open descriptor for `name` on `shard`: this shard's own files are
    /// opened for writing too (and created for a write); other shards'
    /// read-only. A read that finds no file reports it as damage: every
    /// file a read needs is one a flush recorded. When the process is out
    /// of descriptors, the cached ones are closed and the open tried once
    /// more (those in use close when their reads finish).
    async fn file(&self, shard: u32, name: FileName, need: Need) -> std::io::Result<Rc<BufferedFile>> {
        let key = (shard, name);
        if let Some(f) = self.open.borrow().get(&key) {
            return Ok(f.clone());
        }
        let f = match self.open_file(shard, name, need).await {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                self.open.borrow_mut().clear();
                self.open_file(shard, name, need).await?
            }
            r => r?,
        };
        let f = Rc::new(f);
        let mut open = self.open.borrow_mut();
        if open.len() >= self.capacity {
            open.clear();
        }
        open.insert(key, f.clone());
        Ok(f)
    }

    async fn open_file(&self, shard: u32, name: FileName, need: Need) -> std::io::Result<BufferedFile> {
        let access = match need {
            _ if shard != self.shard => Access::Read,
            Need::Write => Access::Durable,
            Need::Read | Need::Extend => Access::Existing,
        };
        self.storage.open(&self.dir(shard).join(name.to_string()), access).await.map_err(|e| match e.kind() {
            ErrorKind::NotFound if need == Need::Read => std::io::Error::new(
                ErrorKind::InvalidData,
                format!("{} is missing (a flush recorded it)", name.shown(shard)),
            ),
            _ => e,
        })
    }

    /// Bytes free for unprivileged writers on the file system holding this
    /// shard's stream files.
    pub fn free_bytes(&self) -> std::io::Result<u64> {
        self.storage.free_bytes(&self.dir(self.shard))
    }

    /// Keeps the cached descriptors whose (shard, handle) is `referenced`
    /// and closes the others (those in use close when their reads finish).
    pub fn retain_open(&self, referenced: impl Fn(u32, u64) -> bool) {
        self.open.borrow_mut().retain(|(shard, name), _| name.stream().is_none_or(|h| referenced(*shard, h)));
    }

    /// Drops the cached descriptor of one of this shard's files (before it is unlinked).
    pub fn forget(&self, name: FileName) {
        self.open.borrow_mut().remove(&(self.shard, name));
    }

    /// Appends exactly `len` bytes at `pos` of `name` on `shard` to `out`.
    pub async fn read_into(
        &self,
        shard: u32,
        name: FileName,
        pos: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let f = self.file(shard, name, Need::Read).await?;
        // Every byte read is below what the checkpoint or the flush recorded:
        // a file that ends before it is damaged (shortened or replaced).
        let short = |got: usize, n: usize, at: u64| {
            std::io::Error::new(
                ErrorKind::InvalidData,
                format!("short read: {got} of {n} bytes at {at} of {}", name.shown(shard)),
            )
        };
        out.reserve(len);
        let mut done = 0;
        while done < len {
            let (n, at) = (READ_CHUNK.min(len - done), pos + done as u64);
            // In pieces of READ_CHUNK: cached pages go straight into `out`;
            // others come through io_uring into a buffer small enough to
            // stay in the CPU cache until it is copied on.
            match self.storage.read_cached(&f, at, &mut out.spare_capacity_mut()[..n]) {
                Ok(0) => return Err(short(0, n, at)),
                Ok(got) => {
                    // SAFETY: preadv2 initialised the first `got` spare bytes.
                    unsafe { out.set_len(out.len() + got) };
                    done += got;
                }
                // Not cached, or no RWF_NOWAIT here (file system or kernel):
                // io_uring reads it, and reports any real error itself.
                Err(e) if e.kind() == ErrorKind::WouldBlock || cannot_nowait(&e) => {
                    let r = self.storage.read_at(&f, at, n).await?;
                    if r.len() != n {
                        return Err(short(r.len(), n, at));
                    }
                    out.extend_from_slice(&r);
                    done += n;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Exactly `len` bytes at `pos` of `name` on `shard`.
    pub async fn read(&self, shard: u32, name: FileName, pos: u64, len: usize) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        self.read_into(shard, name, pos, len, &mut out).await?;
        Ok(out)
    }

    /// Appends the bytes of `[layer.start, layer.end)` to `out`: those below
    /// the data file's tiered boundary from the object store (see
    /// [`crate::tiered`]), the rest from the file. The boundary is published
    /// before the bytes under it are punched, and only rises: when it has not
    /// moved by the end of a local read, no punch reached those bytes before
    /// they were read; when it has, the read is made again.
    pub async fn read_bytes(&self, layer: FileLayer, out: &mut Vec<u8>) -> std::io::Result<()> {
        let (pos, end) = (layer.start - layer.origin, layer.end - layer.origin);
        if layer.bundle.is_some() {
            // A bundled stream is small: never in the cold tier.
            let (name, at) = data_of(layer);
            return self.read_into(layer.shard, name, at + pos, (end - pos) as usize, out).await;
        }
        let before = out.len();
        loop {
            let remote = crate::tiered::boundary(layer.shard, layer.handle).clamp(pos, end);
            if remote > pos {
                out.extend(crate::tiered::fetch(layer.shard, layer.handle, pos, (remote - pos) as usize).await?);
            }
            if remote == end {
                return Ok(());
            }
            self.read_into(layer.shard, FileName::Data(layer.handle), remote, (end - remote) as usize, out).await?;
            if crate::tiered::boundary(layer.shard, layer.handle).clamp(pos, end) == remote {
                return Ok(());
            }
            out.truncate(before);
        }
    }

    /// The length of `layer`'s index: known for this shard's own streams,
    /// the file's size for an ancestor's (its owner may be appending to
    /// it; what lies below the size is whole).
    pub async fn index_len(&self, layer: FileLayer) -> std::io::Result<u64> {
        match layer.index_len {
            Some(len) => Ok(len),
            None => {
                let f = self.file(layer.shard, FileName::Index(layer.handle), Need::Read).await?;
                self.storage.file_size(&f).await
            }
        }
    }

    /// The header of page `p` of `layer`'s index.
    pub async fn index_header(&self, layer: FileLayer, p: u64) -> std::io::Result<Header> {
        let (name, at) = index_of(layer);
        let b = self.read(layer.shard, name, at + p * INDEX_PAGE, PAGE_HEADER as usize).await?;
        Ok(Header::decode(&b))
    }

    /// Page `p` of `layer`'s index, decoded (`len` is the index's length).
    pub async fn index_page(&self, layer: FileLayer, p: u64, len: u64) -> std::io::Result<Page> {
        let ((name, at), pos) = (index_of(layer), p * INDEX_PAGE);
        assert!(pos < len, "page {p} is inside the index");
        let b = self.read(layer.shard, name, at + pos, (len - pos).min(INDEX_PAGE) as usize).await?;
        decode_page(&b).map_err(|why| damaged(layer, name, format_args!("index page {p}: {why}")))
    }

    /// Writes all of `bytes` at `pos` of this shard's file `name`: in
    /// pieces of [`WRITE_PIECE`] ([`Storage::write_all_at`]), then, with
    /// [`Sync::File`], one fdatasync (with [`Sync::Later`] the caller syncs
    /// the file system once for many files, [`StreamFiles::file_system`]).
    /// One `O_DSYNC` write of a whole chunk took 4-8x as long on the test
    /// disk (1 MiB fill, issue 24).
    pub async fn write(&self, name: FileName, pos: u64, bytes: &[u8], sync: Sync) -> std::io::Result<()> {
        let f = self.file(self.shard, name, Need::Write).await?;
        self.write_to(&f, pos, bytes, sync).await
    }

    /// As [`StreamFiles::write`], into a file that exists: never creates
    /// one (a stream deleted meanwhile has its files removed, and a write
    /// must not bring one back as a file no stream owns).
    pub async fn extend(&self, name: FileName, pos: u64, bytes: &[u8], sync: Sync) -> std::io::Result<()> {
        let f = self.file(self.shard, name, Need::Extend).await?;
        self.write_to(&f, pos, bytes, sync).await
    }

    async fn write_to(&self, f: &BufferedFile, pos: u64, bytes: &[u8], sync: Sync) -> std::io::Result<()> {
        self.storage.write_all_at(f, bytes, pos).await?;
        match sync {
            Sync::File => self.storage.fdatasync(f).await,
            Sync::Later => Ok(()),
        }
    }

    /// Makes this shard's file `name` durable (fdatasync).
    pub async fn sync(&self, name: FileName) -> std::io::Result<()> {
        let f = self.file(self.shard, name, Need::Extend).await?;
        self.storage.fdatasync(&f).await
    }

    /// Cuts this shard's file `name` back to `len` bytes.
    pub async fn truncate(&self, name: FileName, len: u64) -> std::io::Result<()> {
        let f = self.file(self.shard, name, Need::Write).await?;
        self.storage.truncate(&f, len)
    }

    /// Gives `[from, to)` of this shard's file `name` back to the file
    /// system (whole pages only); the file keeps its size.
    pub async fn punch(&self, name: FileName, from: u64, to: u64) -> std::io::Result<()> {
        let (a, b) = (from.div_ceil(PAGE) * PAGE, to / PAGE * PAGE);
        if a >= b {
            return Ok(());
        }
        let f = self.file(self.shard, name, Need::Write).await?;
        self.storage.punch(&f, a, b - a)
    }
}

/// Whether a `preadv2(RWF_NOWAIT)` failed for want of support (a file
/// system without it, a kernel that predates the flag or the call) or a
/// signal, rather than because of the file.
fn cannot_nowait(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS | libc::EINTR))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A descriptor's access mode (`O_RDONLY`, `O_WRONLY` or `O_RDWR`).
    fn access_mode(fd: std::os::fd::RawFd) -> i32 {
        // SAFETY: F_GETFL reads a descriptor's flags and changes nothing.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        assert!(flags >= 0, "F_GETFL: {}", std::io::Error::last_os_error());
        flags & libc::O_ACCMODE
    }

    /// A write is durable when it returns: a failed fdatasync fails it,
    /// and a write of several pieces lands whole.
    #[test]
    fn writes_return_once_synced() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../target/files-sync-{}", std::process::id()));
        std::fs::create_dir_all(root.join("shard-0").join(STREAMS_DIR)).unwrap();
        let dir = root.clone();
        let faults = std::sync::Arc::new(crate::storage::faults::Faults::new(1));
        let plan = faults.clone();
        let bytes: Vec<u8> = (0..2 * WRITE_PIECE + 5).map(|i| (i % 253) as u8).collect();
        let want = bytes.clone();
        crate::tick::block_on(move || async move {
            let files = StreamFiles::new(&dir, 0, MAX_OPEN_FILES, Storage::Faulty(faults));
            plan.fail_nth(crate::storage::faults::Op::Sync, 0, libc::EIO);
            let err = files.write(FileName::Data(1), 0, &bytes, Sync::File).await.unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::EIO));
            files.write(FileName::Data(1), 0, &bytes, Sync::File).await.unwrap();
        });
        assert_eq!(std::fs::read(root.join("shard-0").join(STREAMS_DIR).join(data_name(1))).unwrap(), want);
        std::fs::remove_dir_all(&root).unwrap();
    }
    use std::os::fd::AsRawFd;

    #[test]
    fn names_round_trip() {
        assert_eq!(FileName::parse(&data_name(7)), Some(FileName::Data(7)));
        assert_eq!(FileName::parse(&index_name(u64::MAX)), Some(FileName::Index(u64::MAX)));
        assert_eq!(FileName::parse(&snapshot_name(3, 9)), Some(FileName::Snapshot(3, 9)));
        for bad in ["7.data", "x.idx", "checkpoint", "0000000000000003.snap", "000000000000000g.data"] {
            assert_eq!(FileName::parse(bad), None, "{bad}");
        }
    }

    /// A read of a stream file that is not there reports damage naming it,
    /// and leaves no file behind (a created empty one would look like a
    /// truncated file to the next start); a write creates it.
    #[test]
    fn a_read_never_creates_a_missing_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../target/missing-test-{}", std::process::id()));
        std::fs::create_dir_all(root.join("shard-0").join(STREAMS_DIR)).unwrap();
        let dir = root.clone();
        crate::tick::block_on(move || async move {
            let files = StreamFiles::new(&dir, 0, MAX_OPEN_FILES, Storage::Real);
            let name = FileName::Data(7);
            let e = files.read(0, name, 0, 10).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidData, "{e}");
            assert!(e.to_string().contains(&format!("shard-0/{STREAMS_DIR}/{name} is missing")), "{e}");
            assert!(!files.dir(0).join(name.to_string()).exists(), "the read created the file");
            files.write(name, 0, b"0123456789", Sync::File).await.unwrap();
            assert_eq!(files.read(0, name, 0, 10).await.unwrap(), b"0123456789");
        });
        std::fs::remove_dir_all(root).unwrap();
    }

    /// Reads serve cached pages with preadv2 and fall back to io_uring for
    /// the rest, within one read; a read past the end is an error.
    #[test]
    fn reads_mix_cached_and_uncached_pages() {
        // Beside the sources (a disk file system: tmpfs keeps its pages).
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../target/files-test-{}", std::process::id()));
        std::fs::create_dir_all(root.join("shard-0").join(STREAMS_DIR)).unwrap();
        let bytes: Vec<u8> = (0..3 * READ_CHUNK + 777).map(|i| (i * 31 % 251) as u8).collect();
        let dir = root.clone();
        crate::tick::block_on(move || async move {
            let files = StreamFiles::new(&dir, 0, MAX_OPEN_FILES, Storage::Real);
            let name = FileName::Data(1);
            files.write(name, 0, &bytes, Sync::File).await.unwrap();
            let f = files.file(0, name, Need::Write).await.unwrap();
            assert_eq!(access_mode(f.as_raw_fd()), libc::O_RDWR, "a shard writes its own stream files");
            let other = StreamFiles::new(&dir, 1, MAX_OPEN_FILES, Storage::Real);
            let theirs = other.file(0, name, Need::Read).await.unwrap();
            assert_eq!(access_mode(theirs.as_raw_fd()), libc::O_RDONLY, "and reads other shards' only");
            // The file's clean pages leave the cache; with read-ahead off,
            // reading its first piece brings back only that piece.
            let fd = f.as_raw_fd();
            for advice in [libc::POSIX_FADV_DONTNEED, libc::POSIX_FADV_RANDOM] {
                // SAFETY: fadvise on a descriptor we own.
                assert_eq!(unsafe { libc::posix_fadvise(fd, 0, 0, advice) }, 0);
            }
            let mut probe = vec![std::mem::MaybeUninit::new(0u8); READ_CHUNK];
            let e = Storage::Real.read_cached(&f, 0, &mut probe).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::WouldBlock, "a page not in the cache is not read");
            assert_eq!(f.read_at(0, READ_CHUNK).await.unwrap().len(), READ_CHUNK);
            assert_eq!(Storage::Real.read_cached(&f, 0, &mut probe).unwrap(), READ_CHUNK, "now it is cached");
            let mut out = b"head".to_vec();
            files.read_into(0, name, 5, bytes.len() - 5, &mut out).await.unwrap();
            assert_eq!(&out[..4], b"head");
            assert!(out[4..] == bytes[5..], "cached and uncached pieces join up");
            let e = files.read(0, name, bytes.len() as u64 - 10, 20).await.unwrap_err();
            assert!(e.to_string().contains("short read: 0 of 10 bytes"), "{e}");
        });
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Bytes below a data file's tiered boundary come through the tier's
    /// reader (here one serving a copy of the file), the rest from the file,
    /// whose tiered pages are holes.
    #[test]
    fn reads_below_the_tiered_boundary_come_from_the_tier() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../target/files-tiered-{}", std::process::id()));
        std::fs::create_dir_all(root.join("shard-0").join(STREAMS_DIR)).unwrap();
        let (handle, shard) = (0x7e57, 0);
        let bytes: Vec<u8> = (0..4 * PAGE as usize + 100).map(|i| (i * 7 % 251) as u8).collect();
        let remote = bytes.clone();
        crate::tiered::install(Box::new(move |s, h, pos, len| {
            assert_eq!((s, h), (shard, handle));
            let got = remote[pos as usize..pos as usize + len].to_vec();
            Box::pin(async move { Ok(got) })
        }));
        let dir = root.clone();
        crate::tick::block_on(move || async move {
            let files = StreamFiles::new(&dir, shard, MAX_OPEN_FILES, Storage::Real);
            files.write(FileName::Data(handle), 0, &bytes, Sync::File).await.unwrap();
            crate::tiered::publish(shard, &[crate::tiered::Mark { handle, ino: 0, boundary: 2 * PAGE }]);
            files.punch(FileName::Data(handle), 0, 2 * PAGE).await.unwrap();
            let layer = |start: u64, end: u64| FileLayer {
                shard,
                handle,
                origin: 0,
                origin_record: 0,
                start,
                end,
                start_record: 0,
                end_record: 0,
                index_len: None,
                bundle: None,
            };
            for (a, b) in [(10, bytes.len() as u64), (0, PAGE), (2 * PAGE, 3 * PAGE), (PAGE + 1, 2 * PAGE + 1)] {
                let mut out = b"head".to_vec();
                files.read_bytes(layer(a, b), &mut out).await.unwrap();
                assert!(out[4..] == bytes[a as usize..b as usize], "{a}..{b}");
            }
            crate::tiered::publish(shard, &[]);
        });
        std::fs::remove_dir_all(&root).unwrap();
    }

    /// Missing support for RWF_NOWAIT falls back to io_uring; damage does not.
    #[test]
    fn only_missing_nowait_support_falls_back() {
        for errno in [libc::EOPNOTSUPP, libc::EINVAL, libc::ENOSYS, libc::EINTR] {
            assert!(cannot_nowait(&std::io::Error::from_raw_os_error(errno)), "errno {errno}");
        }
        for errno in [libc::EIO, libc::EBADF, libc::EFAULT] {
            assert!(!cannot_nowait(&std::io::Error::from_raw_os_error(errno)), "errno {errno}");
        }
    }
}
