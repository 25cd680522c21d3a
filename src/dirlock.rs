//! The data directory's exclusive lock: a second sluice process on the same
//! directory would write the same log, so it is refused at start.
//!
//! The lock is `flock(LOCK_EX)` on `sluice.lock` inside the data directory,
//! held as long as the process runs; the kernel drops it when the process
//! exits, however it exits, so a crash never leaves a stale lock behind.

use crate::start_error::StartError;
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;

/// Lock file in the data directory (kept, never deleted: deleting it would
/// let two processes lock two different files).
const LOCK_FILE: &str = "sluice.lock";

/// Holds the lock until dropped.
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock without waiting; another holder is an error in one line.
    pub fn acquire(dir: &Path) -> Result<DirLock, StartError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| format!("cannot open lock file {}: {e}", path.display()))?;
        // SAFETY: flock(2) on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EWOULDBLOCK) => {
                    format!("data dir {} is in use by another sluice process (it holds {LOCK_FILE})", dir.display())
                }
                _ => format!("cannot lock {}: {e}", path.display()),
            }
            .into());
        }
        Ok(DirLock { _file: file })
    }
}
