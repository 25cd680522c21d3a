//! Segment files: naming, zero-filled preallocation and listing.
//!
//! Segments are zero-filled and synced before use, so a later commit's
//! fdatasync flushes only data, never block allocation metadata.

use glommio::io::{BufferedFile, Directory, OpenOptions};
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

/// Opens an existing segment for reading and writing.
pub async fn open_segment(dir: &Path, no: u32) -> std::io::Result<Segment> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .buffered_open(segment_path(dir, no))
        .await
        .map_err(std::io::Error::from)?;
    let size = file.file_size().await.map_err(std::io::Error::from)?;
    Ok(Segment { no, file: Rc::new(file), size })
}

/// Creates segment `no` of `size` zero bytes, durable (file and directory entry).
pub async fn create_segment(dir: &Path, no: u32, size: u64) -> std::io::Result<Segment> {
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
    sync_dir(dir).await?;
    Ok(Segment { no, file: Rc::new(file), size })
}

/// Makes directory entries (new or removed files) durable.
pub async fn sync_dir(dir: &Path) -> std::io::Result<()> {
    let d = Directory::open(dir).await.map_err(std::io::Error::from)?;
    d.sync().await.map_err(std::io::Error::from)?;
    d.close().await.map_err(std::io::Error::from)
}
