//! Segment files: naming, zero-filled preallocation and listing; and the
//! atomic replacement of a whole small file of the journal (its marks).
//!
//! Segments are zero-filled and synced before use, so a later commit's
//! sync flushes only data, never block allocation metadata. A segment is
//! prepared under a temporary name and renamed once whole, so a preparation
//! that fails (no space) or is cut short (the process killed) never leaves
//! a segment of the wrong size: it removes its temporary file, and the next
//! start removes what a killed one left ([`remove_unfinished`]). With `dsync`
//! a segment is opened `O_DSYNC` for its commits: each write returns once
//! its bytes are durable, one system call where a write and an fdatasync
//! would take two.
//!
//! Segments are `O_DIRECT` files (glommio `DmaFile`): the journal is only
//! ever written in steady state (recovery reads it at start), so its bytes
//! go from the commit buffer to the disk without a copy into the page cache,
//! and a write into already-written blocks completes in the kernel without
//! an io_uring worker thread. Their sizes are whole [`JOURNAL_BLOCK`]s, the
//! unit every commit is padded to ([`super::blocks`]).

use crate::storage::Storage;
use crate::tuning::{FILL_CHUNK, JOURNAL_BLOCK};
use glommio::io::{DmaFile, OpenOptions};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// An open segment.
#[derive(Clone)]
pub struct Segment {
    pub no: u32,
    pub file: Rc<DmaFile>,
    pub size: u64,
}

/// `size` rounded up to whole journal blocks.
pub fn whole_blocks(size: u64) -> u64 {
    size.next_multiple_of(JOURNAL_BLOCK)
}

pub fn segment_path(dir: &Path, no: u32) -> PathBuf {
    dir.join(format!("{no:010}.seg"))
}

/// Ending of a segment still being prepared.
const UNFINISHED: &str = ".seg.tmp";

fn unfinished_path(dir: &Path, no: u32) -> PathBuf {
    dir.join(format!("{no:010}{UNFINISHED}"))
}

/// Removes the segments a preparation cut short left in `dir` (the
/// process was killed while zero-filling); returns how many. Run before
/// anything else writes to the directory: on a full disk they hold its space.
pub fn remove_unfinished(dir: &Path) -> std::io::Result<usize> {
    let mut n = 0;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_name().to_string_lossy().ends_with(UNFINISHED) {
            std::fs::remove_file(e.path())?;
            n += 1;
        }
    }
    Ok(n)
}

/// Segment numbers present in `dir`, ascending.
pub fn list_segments(dir: &Path) -> std::io::Result<Vec<u32>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let name = e?.file_name();
        let name = name.to_string_lossy();
        if let Some(n) = name.strip_suffix(".seg").and_then(|s| s.parse().ok()) {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// Opens an existing segment for reading and writing (durable writes with `dsync`).
pub async fn open_segment(dir: &Path, no: u32, dsync: bool) -> std::io::Result<Segment> {
    let path = segment_path(dir, no);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(if dsync { libc::O_DSYNC } else { 0 })
        .dma_open(&path)
        .await
        .map_err(std::io::Error::from)?;
    if !JOURNAL_BLOCK.is_multiple_of(file.alignment()) {
        return Err(std::io::Error::other(format!(
            "{}: the disk's logical block ({} bytes) does not divide the journal block ({JOURNAL_BLOCK})",
            path.display(),
            file.alignment()
        )));
    }
    let size = file.file_size().await.map_err(std::io::Error::from)?;
    Ok(Segment { no, file: Rc::new(file), size })
}

/// Creates segment `no` of `size` zero bytes (whole journal blocks),
/// durable (file and directory entry), and opens it for commits (durable
/// writes with `dsync`). The zeros are written without `O_DSYNC` to a
/// temporary file, synced once and renamed; on failure the temporary file
/// is removed.
pub async fn create_segment(dir: &Path, no: u32, size: u64, dsync: bool) -> std::io::Result<Segment> {
    assert!(size > 0 && size.is_multiple_of(JOURNAL_BLOCK), "segment of {size} bytes: not whole journal blocks");
    let tmp = unfinished_path(dir, no);
    if let Err(e) = zero_fill(&tmp, size).await {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, segment_path(dir, no))?;
    Storage::Real.sync_dir(dir).await?;
    open_segment(dir, no, dsync).await
}

/// Writes `size` zero bytes (whole journal blocks) to a new file at `path`
/// and syncs them, straight from one zeroed buffer (no page-cache copy).
///
/// The file's first block is written before it is opened for direct I/O:
/// glommio probes the device for polled I/O with a read of the first file
/// it opens that way, and a read of an empty file succeeds without asking
/// the device, which would send every later operation to a polled ring
/// the device cannot serve (reads then fail with `EOPNOTSUPP`).
async fn zero_fill(path: &Path, size: u64) -> std::io::Result<()> {
    {
        use std::io::Write;
        let mut first = std::fs::File::create(path)?;
        first.write_all(&[0u8; JOURNAL_BLOCK as usize])?;
    }
    let file = OpenOptions::new().read(true).write(true).dma_open(path).await.map_err(std::io::Error::from)?;
    let mut zeros = file.alloc_dma_buffer(FILL_CHUNK.min(size as usize));
    zeros.as_bytes_mut().fill(0);
    let zeros = Rc::new(zeros);
    let mut pos = 0u64;
    while pos < size {
        let n = zeros.len().min((size - pos) as usize);
        let written = if n == zeros.len() {
            file.write_rc_at(zeros.clone(), pos).await
        } else {
            let mut tail = file.alloc_dma_buffer(n);
            tail.as_bytes_mut().fill(0);
            file.write_at(tail, pos).await
        }
        .map_err(std::io::Error::from)?;
        if written != n {
            return Err(std::io::Error::other("short write while preallocating"));
        }
        pos += written as u64;
    }
    file.fdatasync().await.map_err(std::io::Error::from)?;
    file.close().await.map_err(std::io::Error::from)
}

/// Durably replaces file `name` in `dir` with `bytes` ([`Storage::install`],
/// then the directory synced). A crash leaves the old file or the new one,
/// never a mix.
pub async fn replace_file(dir: &Path, name: &str, bytes: Vec<u8>) -> std::io::Result<()> {
    Storage::Real.install(dir, name, bytes).await?;
    Storage::Real.sync_dir(dir).await
}

/// Whether `fd` was opened for durable writes (`O_DSYNC`).
#[cfg(test)]
pub(crate) fn is_dsync(fd: std::os::fd::RawFd) -> bool {
    // SAFETY: F_GETFL reads a descriptor's flags and changes nothing.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    assert!(flags >= 0, "F_GETFL: {}", std::io::Error::last_os_error());
    flags & libc::O_DSYNC != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dir::TestDir;
    use std::os::fd::AsRawFd;

    /// Commits into a segment are durable writes with `dsync` (`--fsync
    /// always`) and plain writes without, whether the segment was just
    /// created (zero-filled without `O_DSYNC`) or reopened at start.
    #[test]
    fn segments_open_for_durable_writes_only_with_dsync() {
        let dir = TestDir::new("segment-dsync");
        let d = dir.to_path_buf();
        crate::tick::block_on(move || async move {
            let synced = create_segment(&d, 1, 8192, true).await.unwrap();
            let plain = create_segment(&d, 2, 8192, false).await.unwrap();
            assert!(is_dsync(synced.file.as_raw_fd()));
            assert!(!is_dsync(plain.file.as_raw_fd()));
            assert_eq!((synced.size, std::fs::read(segment_path(&d, 1)).unwrap()), (8192, vec![0; 8192]));
            assert!(is_dsync(open_segment(&d, 2, true).await.unwrap().file.as_raw_fd()));
            assert!(!is_dsync(open_segment(&d, 1, false).await.unwrap().file.as_raw_fd()));
        });
    }

    /// A preparation cut short leaves only a temporary file, which the
    /// next start removes; a whole segment is never touched.
    #[test]
    fn unfinished_segments_are_removed_and_whole_ones_kept() {
        let dir = TestDir::new("segment-unfinished");
        let d = dir.to_path_buf();
        std::fs::write(unfinished_path(&d, 3), vec![0u8; 100]).unwrap();
        let d2 = d.clone();
        crate::tick::block_on(move || async move {
            create_segment(&d2, 2, 8192, false).await.unwrap();
        });
        assert_eq!(remove_unfinished(&d).unwrap(), 1);
        assert_eq!(list_segments(&d).unwrap(), vec![2]);
        let names: Vec<_> = std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, vec![std::ffi::OsString::from("0000000002.seg")]);
    }
}
