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
//! its bytes are durable, one system call (and one io_uring worker hop)
//! where a write and an fdatasync would take two.

use crate::storage::Storage;
use glommio::io::{BufferedFile, OpenOptions};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::core::limits::FILL_CHUNK;

/// An open segment.
#[derive(Clone)]
pub struct Segment {
    pub no: u32,
    pub file: Rc<BufferedFile>,
    pub size: u64,
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
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(if dsync { libc::O_DSYNC } else { 0 })
        .buffered_open(segment_path(dir, no))
        .await
        .map_err(std::io::Error::from)?;
    let size = file.file_size().await.map_err(std::io::Error::from)?;
    Ok(Segment { no, file: Rc::new(file), size })
}

/// Creates segment `no` of `size` zero bytes, durable (file and directory
/// entry), and opens it for commits (durable writes with `dsync`). The
/// zeros are written without `O_DSYNC` to a temporary file, synced once
/// and renamed; on failure the temporary file is removed.
pub async fn create_segment(dir: &Path, no: u32, size: u64, dsync: bool) -> std::io::Result<Segment> {
    let tmp = unfinished_path(dir, no);
    if let Err(e) = zero_fill(&tmp, size).await {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, segment_path(dir, no))?;
    Storage::Real.sync_dir(dir).await?;
    open_segment(dir, no, dsync).await
}

/// Writes `size` zero bytes to a new file at `path` and syncs them.
async fn zero_fill(path: &Path, size: u64) -> std::io::Result<()> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .buffered_open(path)
        .await
        .map_err(std::io::Error::from)?;
    let mut pos = 0u64;
    while pos < size {
        let n = FILL_CHUNK.min((size - pos) as usize);
        let written = file.write_at(vec![0u8; n], pos).await.map_err(std::io::Error::from)?;
        if written == 0 {
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
