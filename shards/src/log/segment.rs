//! Segment files: naming, zero-filled preallocation and listing; and the
//! atomic replacement of a whole small file of the journal (its marks).
//!
//! Segments are zero-filled and synced before use, so a later commit's
//! sync flushes only data, never block allocation metadata. With `dsync`
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
/// zeros are written without `O_DSYNC` and synced once.
pub async fn create_segment(dir: &Path, no: u32, size: u64, dsync: bool) -> std::io::Result<Segment> {
    let path = segment_path(dir, no);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .buffered_open(&path)
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
    file.close().await.map_err(std::io::Error::from)?;
    Storage::Real.sync_dir(dir).await?;
    open_segment(dir, no, dsync).await
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
}
