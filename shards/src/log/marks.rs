//! The log's two marks: `log-start` (the oldest segment kept; older ones
//! were reclaimed) and `log-head` (the newest segment holding a durable
//! record). Recovery checks every segment from start to head is there, so
//! deleting the newest segment, or damaging a mark, is caught.
//!
//! `log-start` is one line, `N CRC` (CRC32C over the mark's name and N),
//! replaced atomically (temp file, fdatasync, rename, fsync of the directory).
//! `log-head` moves on a full disk too, so it is rewritten in place and never
//! allocates: two 8-byte slots `[N u32][CRC u32]`, N written to slot N % 2.
//! A torn slot leaves the other one, and the higher valid N is the head.

use super::segment::replace_file;
use crate::storage::Storage;
use glommio::io::{BufferedFile, OpenOptions};
use std::path::Path;

/// The oldest segment the log still has.
pub const LOG_START: &str = "log-start";
/// The newest segment with a durable record.
pub const LOG_HEAD: &str = "log-head";

fn checksum(name: &str, no: u32) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(name.as_bytes()), &no.to_le_bytes())
}

/// The line stored for mark `name` at segment `no`.
pub fn encode(name: &str, no: u32) -> String {
    format!("{no} {:08x}\n", checksum(name, no))
}

/// Reads mark `name` of `dir`: `Ok(None)` when the file does not exist,
/// `Err` naming the file when it is unreadable or damaged.
pub fn read(dir: &Path, name: &str) -> Result<Option<u32>, String> {
    let path = dir.join(name);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
    };
    let parsed = text.strip_suffix('\n').and_then(|l| l.split_once(' ')).and_then(|(n, c)| {
        let no = n.parse::<u32>().ok()?;
        (u32::from_str_radix(c, 16).ok()? == checksum(name, no) && encode(name, no) == text).then_some(no)
    });
    parsed
        .map(Some)
        .ok_or_else(|| format!("{}: damaged ({text:?} is not a checksummed segment number)", path.display()))
}

/// Bytes of one `log-head` slot, and of the file.
const SLOT: usize = 8;
const HEAD_FILE: usize = 2 * SLOT;

/// Reads `log-head` of `dir`: `Ok(None)` when missing; 0 when no segment
/// held a durable record yet.
pub fn read_head(dir: &Path) -> Result<Option<u32>, String> {
    let path = dir.join(LOG_HEAD);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
    };
    if bytes.len() != HEAD_FILE {
        return Err(format!("{}: damaged ({} bytes, not {HEAD_FILE})", path.display(), bytes.len()));
    }
    let slot = |b: &[u8]| {
        let no = u32::from_le_bytes(b[..4].try_into().expect("4"));
        (u32::from_le_bytes(b[4..].try_into().expect("4")) == checksum(LOG_HEAD, no)).then_some(no)
    };
    match (slot(&bytes[..SLOT]), slot(&bytes[SLOT..])) {
        (None, None) => Err(format!("{}: damaged (no slot holds a checksummed segment number)", path.display())),
        (a, b) => Ok(a.max(b)),
    }
}

/// The open `log-head` file.
pub struct Head {
    file: BufferedFile,
}

impl Head {
    /// Opens `log-head`, creating it (naming segment 0) if missing.
    pub async fn open(dir: &Path) -> std::io::Result<Head> {
        let path = dir.join(LOG_HEAD);
        let exists = path.exists();
        let file = OpenOptions::new().read(true).write(true).create(true).buffered_open(&path).await?;
        if !exists {
            file.write_at(head_file(0), 0).await?;
            file.fdatasync().await?;
            Storage::Real.sync_dir(dir).await?;
        }
        Ok(Head { file })
    }

    /// Durably records `no` as the head, in place.
    pub async fn write(&self, no: u32) -> std::io::Result<()> {
        let mut slot = no.to_le_bytes().to_vec();
        slot.extend_from_slice(&checksum(LOG_HEAD, no).to_le_bytes());
        let n = self.file.write_at(slot, (no as usize % 2 * SLOT) as u64).await?;
        if n != SLOT {
            return Err(std::io::Error::other(format!("short write of {LOG_HEAD}: {n} of {SLOT} bytes")));
        }
        self.file.fdatasync().await.map_err(std::io::Error::from)
    }
}

/// The bytes of a fresh `log-head` file naming `no`.
pub fn head_file(no: u32) -> Vec<u8> {
    let mut out = vec![0; HEAD_FILE];
    let at = no as usize % 2 * SLOT;
    out[at..at + 4].copy_from_slice(&no.to_le_bytes());
    out[at + 4..at + SLOT].copy_from_slice(&checksum(LOG_HEAD, no).to_le_bytes());
    out
}

/// Durably replaces mark `name` with segment `no`.
pub async fn write(dir: &Path, name: &str, no: u32) -> std::io::Result<()> {
    replace_file(dir, name, encode(name, no).into_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_dir::TestDir;

    fn dir(name: &str) -> TestDir {
        TestDir::new(&format!("marks-{name}"))
    }

    #[test]
    fn start_round_trips_and_damage_is_named() {
        let d = dir("rt");
        assert_eq!(read(&d, LOG_START), Ok(None));
        std::fs::write(d.join(LOG_START), encode(LOG_START, 7)).unwrap();
        assert_eq!(read(&d, LOG_START), Ok(Some(7)));
        // The other mark's line, a changed number, a cut line, garbage.
        for bad in [encode(LOG_HEAD, 7), encode(LOG_START, 7).replace('7', "8"), "7 ".into(), "999\n".into()] {
            std::fs::write(d.join(LOG_START), &bad).unwrap();
            let err = read(&d, LOG_START).unwrap_err();
            assert!(err.contains("log-start: damaged"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn head_keeps_the_newer_valid_slot_and_damage_is_named() {
        let d = dir("head");
        let path = d.join(LOG_HEAD);
        assert_eq!(read_head(&d), Ok(None));
        std::fs::write(&path, head_file(0)).unwrap();
        assert_eq!(read_head(&d), Ok(Some(0)));
        std::fs::write(&path, vec![0; HEAD_FILE]).unwrap();
        assert!(read_head(&d).unwrap_err().contains("log-head: damaged"));
        let mut both = head_file(6);
        both[SLOT..].copy_from_slice(&head_file(7)[SLOT..]);
        std::fs::write(&path, &both).unwrap();
        assert_eq!(read_head(&d), Ok(Some(7)));
        // A torn write of slot 1 leaves slot 0.
        both[SLOT + 2] ^= 0xff;
        std::fs::write(&path, &both).unwrap();
        assert_eq!(read_head(&d), Ok(Some(6)));
        both[2] ^= 0xff;
        std::fs::write(&path, &both).unwrap();
        assert!(read_head(&d).unwrap_err().contains("log-head: damaged"));
        std::fs::write(&path, &both[..SLOT]).unwrap();
        assert!(read_head(&d).unwrap_err().contains("log-head: damaged"));
    }
}
