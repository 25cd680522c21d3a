//! The store's file operations, behind one interface: every open, read,
//! write, truncate, hole punch, sync, unlink, rename and directory listing
//! of stream files, snapshots and the checkpoint (the flush, the reads,
//! recovery) goes through a [`Storage`].
//!
//! [`Storage::Real`] makes the calls (glommio's io_uring for reads and
//! writes, `preadv2(RWF_NOWAIT)` for cached reads, plain system calls on
//! the executor for metadata changes of microseconds). [`Storage::Faulty`]
//! makes the same calls but first asks its [`Faults`] plan whether this one
//! fails instead, so the simulation can fail any step of a flush, a read
//! or a recovery (the journal has its own seam: the `Journal` trait of the store's write decisions).
//! The choice is an enum, not a trait object: production pays one branch.

pub mod faults;

use crate::tuning::WRITE_PIECE;
use faults::{Fault, Faults, Op};
use glommio::io::{BufferedFile, Directory, OpenOptions, ReadResult};
use std::io::{Error, Result};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the store's file operations go.
#[derive(Clone, Debug, Default)]
pub enum Storage {
    /// The file system.
    #[default]
    Real,
    /// The file system, with the failures a plan injects.
    Faulty(Arc<Faults>),
}

/// How a file is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read only.
    Read,
    /// Read and write, created if missing: a shard's own stream files
    /// (their writer makes them durable with fdatasync).
    Durable,
    /// Read and write, not created: a shard's own stream file opened for a
    /// read, which must find it.
    Existing,
    /// Write only, created empty (truncated): a file about to be installed.
    Replace,
}

/// Keeps the errno of "out of descriptors" that glommio's own conversion
/// drops (it keeps only the kind): callers retry on it.
fn glommio_error(e: glommio::GlommioError<()>) -> Error {
    match e {
        glommio::GlommioError::EnhancedIoError { source, .. }
            if matches!(source.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) =>
        {
            source
        }
        e => e.into(),
    }
}

/// The result of a system call that returns 0 or -1 and sets errno.
/// Removes a file on glommio's blocking thread (freeing a large one takes
/// milliseconds). Best effort: a file left behind is removed by the next
/// [`Storage::install`] of the same name.
async fn release(path: PathBuf) {
    let removed = glommio::executor().spawn_blocking(move || std::fs::remove_file(path)).await;
    if let Err(error) = removed {
        tracing::debug!(%error, "cannot remove a replaced file");
    }
}

/// Frees `bytes` on glommio's blocking thread: unmapping a large buffer
/// takes milliseconds (6 ms for the 128 MiB of a checkpoint of a million
/// streams), which requests on the shard would otherwise wait for.
async fn free(bytes: Vec<u8>) {
    glommio::executor().spawn_blocking(move || drop(bytes)).await
}

fn check(r: libc::c_int) -> Result<()> {
    if r != 0 {
        return Err(Error::last_os_error());
    }
    Ok(())
}

impl Storage {
    /// The failure the plan injects into this operation, if any.
    fn fault(&self, op: Op, len: usize) -> Option<Fault> {
        match self {
            Storage::Real => None,
            Storage::Faulty(f) => f.roll(op, len),
        }
    }

    /// Fails with the errno the plan injects into this operation, if any.
    fn fail(&self, op: Op) -> Result<()> {
        match self.fault(op, 0) {
            Some(Fault::Errno(e)) => Err(Error::from_raw_os_error(e)),
            Some(other) => unreachable!("{other:?} for {op:?}, which moves no bytes"),
            None => Ok(()),
        }
    }

    pub async fn open(&self, path: &Path, access: Access) -> Result<BufferedFile> {
        self.fail(Op::Open)?;
        let mut o = OpenOptions::new();
        match access {
            Access::Read => o.read(true),
            Access::Durable => o.read(true).write(true).create(true),
            Access::Existing => o.read(true).write(true),
            Access::Replace => o.write(true).create(true).truncate(true),
        };
        o.buffered_open(path).await.map_err(glommio_error)
    }

    /// Writes `bytes` at `pos`; returns how many were written, as a
    /// `pwrite` does (fewer than asked is not an error).
    pub async fn write_at(&self, f: &BufferedFile, mut bytes: Vec<u8>, pos: u64) -> Result<usize> {
        let fault = self.fault(Op::Write, bytes.len());
        let torn = match fault {
            Some(Fault::Errno(e)) => return Err(Error::from_raw_os_error(e)),
            Some(Fault::Short(n) | Fault::Torn(n)) => {
                bytes.truncate(n);
                if n == 0 {
                    return Ok(0);
                }
                matches!(fault, Some(Fault::Torn(_)))
            }
            None => false,
        };
        let n = f.write_at(bytes, pos).await.map_err(Error::from)?;
        if torn {
            return Err(Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(n)
    }

    /// Reads what the page cache holds of `buf.len()` bytes at `pos` of `f`
    /// into `buf`, without blocking: `preadv2(RWF_NOWAIT)` fails with
    /// `WouldBlock` when the first page is not cached, and stops early at
    /// the first one that is not. Returns the bytes read (0 at the end).
    pub fn read_cached(&self, f: &BufferedFile, pos: u64, buf: &mut [std::mem::MaybeUninit<u8>]) -> Result<usize> {
        self.fail(Op::Read)?;
        let iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        // SAFETY: one iovec over memory `buf` owns for the call; the kernel
        // writes at most `buf.len()` bytes into it.
        let r = unsafe { libc::preadv2(f.as_raw_fd(), &iov, 1, pos as libc::off_t, libc::RWF_NOWAIT) };
        if r < 0 {
            return Err(Error::last_os_error());
        }
        Ok(r as usize)
    }

    /// Reads up to `len` bytes at `pos` through io_uring.
    pub async fn read_at(&self, f: &BufferedFile, pos: u64, len: usize) -> Result<ReadResult> {
        self.fail(Op::Read)?;
        f.read_at(pos, len).await.map_err(Error::from)
    }

    pub async fn file_size(&self, f: &BufferedFile) -> Result<u64> {
        self.fail(Op::Size)?;
        f.file_size().await.map_err(Error::from)
    }

    /// Cuts `f` back to `len` bytes: a plain ftruncate on the executor.
    pub fn truncate(&self, f: &BufferedFile, len: u64) -> Result<()> {
        self.fail(Op::Truncate)?;
        // SAFETY: ftruncate on an open descriptor; no memory is shared.
        check(unsafe { libc::ftruncate(f.as_raw_fd(), len as libc::off_t) })
    }

    /// Gives `len` bytes at `at` of `f` back to the file system; the file
    /// keeps its size.
    pub fn punch(&self, f: &BufferedFile, at: u64, len: u64) -> Result<()> {
        self.fail(Op::Punch)?;
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: fallocate on an open descriptor; no memory is shared.
        check(unsafe { libc::fallocate(f.as_raw_fd(), mode, at as libc::off_t, len as libc::off_t) })
    }

    pub async fn fdatasync(&self, f: &BufferedFile) -> Result<()> {
        self.fail(Op::Sync)?;
        f.fdatasync().await.map_err(Error::from)
    }

    /// Opens directory `dir` to sync the file system it is on ([`Storage::sync_fs`]).
    pub fn open_file_system(&self, dir: &Path) -> Result<std::fs::File> {
        self.fail(Op::Open)?;
        std::fs::File::open(dir)
    }

    /// Makes everything written to the file system holding `fs` durable:
    /// every file's data and size and every directory entry (`syncfs(2)`),
    /// on glommio's blocking thread, since it takes as long as the dirty
    /// data does. It reports a write-back error of any file there since
    /// `fs` was opened, once: open `fs` before the writes it is to cover.
    pub async fn sync_fs(&self, fs: &Arc<std::fs::File>) -> Result<()> {
        self.fail(Op::Sync)?;
        let fs = fs.clone();
        // SAFETY: a system call on a descriptor the closure keeps open.
        glommio::executor().spawn_blocking(move || check(unsafe { libc::syncfs(fs.as_raw_fd()) })).await
    }

    /// Makes directory entries (new or removed files) durable.
    pub async fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.fail(Op::Sync)?;
        let d = Directory::open(dir).await.map_err(Error::from)?;
        d.sync().await.map_err(Error::from)?;
        d.close().await.map_err(Error::from)
    }

    /// Replaces file `name` in `dir` with `bytes`, up to the rename: a
    /// temporary file, fdatasync'ed, renamed over the old one. When it
    /// fails, `name` is the old file still; when it succeeds, `name` is the
    /// new one, durable once the caller syncs `dir`. A crash leaves the old
    /// file or the new one, never a mix. The bytes go in pieces
    /// ([`Storage::write_all_at`]).
    ///
    /// The old file's blocks and cached pages are given back on glommio's
    /// blocking thread: a rename over the last name of a file frees it
    /// inside the rename, 14-16 ms for a checkpoint of a million streams,
    /// which every request on the shard would wait for. So the old file
    /// keeps a second name (`<name>.replaced.tmp`, which the backup skips as
    /// it does every `*.tmp`) across the rename, removed after it there.
    /// Without that name (a file system without hard links) the rename
    /// frees it as before. The written buffer is freed there too. Both only
    /// from a [`WRITE_PIECE`] on: a small file or buffer (the clean-stop
    /// mark, the journal's head marks, a small shard's checkpoint) frees
    /// in microseconds, less than the two hops to that thread and back.
    pub async fn install(&self, dir: &Path, name: &str, bytes: Vec<u8>) -> Result<()> {
        let (path, tmp) = (dir.join(name), dir.join(format!("{name}.tmp")));
        let file = self.open(&tmp, Access::Replace).await?;
        self.write_all_at(&file, &bytes, 0).await?;
        match bytes.len() >= WRITE_PIECE {
            true => free(bytes).await,
            false => drop(bytes),
        }
        self.fdatasync(&file).await?;
        file.close().await.map_err(Error::from)?;
        let replaced = dir.join(format!("{name}.replaced.tmp"));
        if replaced.exists() {
            // Left by a crash between the rename and the removal below.
            release(replaced.clone()).await;
        }
        let large = std::fs::metadata(&path).is_ok_and(|m| m.len() >= WRITE_PIECE as u64);
        let kept = large && std::fs::hard_link(&path, &replaced).is_ok();
        self.rename(&tmp, &path)?;
        if kept {
            release(replaced).await;
        }
        Ok(())
    }

    /// Writes all of `bytes` at `pos` of `f` in pieces of [`WRITE_PIECE`]:
    /// glommio takes an owned buffer, so each piece is copied (memory the
    /// allocator reuses, where one copy of a whole buffer faults in fresh
    /// pages), and no piece keeps the io-wq worker that copies it into the
    /// page cache busy for long on the core it shares with the shard (a
    /// 70 MiB checkpoint written at once held requests up to 20 ms).
    pub async fn write_all_at(&self, f: &BufferedFile, bytes: &[u8], pos: u64) -> Result<()> {
        let mut done = 0;
        while done < bytes.len() {
            let piece = &bytes[done..bytes.len().min(done + WRITE_PIECE)];
            let n = self.write_at(f, piece.to_vec(), pos + done as u64).await?;
            if n == 0 {
                return Err(Error::other(format!("short write: {done} of {} bytes", bytes.len())));
            }
            done += n;
        }
        Ok(())
    }

    /// A plain rename on the executor, as every unlink and rename of a
    /// shard is: a metadata change of microseconds, where glommio's would
    /// hop to its blocking thread and back.
    pub fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.fail(Op::Rename)?;
        std::fs::rename(from, to)
    }

    pub fn unlink(&self, path: &Path) -> Result<()> {
        self.fail(Op::Unlink)?;
        std::fs::remove_file(path)
    }

    /// Bytes free for unprivileged writers on the file system holding `dir`.
    pub fn free_bytes(&self, dir: &Path) -> Result<u64> {
        self.fail(Op::Statvfs)?;
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(Error::other)?;
        let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
        // SAFETY: a valid C string and a pointer to memory statvfs fills.
        check(unsafe { libc::statvfs(path.as_ptr(), st.as_mut_ptr()) })?;
        // SAFETY: statvfs returned 0, so it filled the struct.
        let st = unsafe { st.assume_init() };
        Ok(st.f_bavail.saturating_mul(st.f_frsize))
    }

    // Recovery's calls: blocking, before the shard serves.

    pub fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.fail(Op::Dir)?;
        std::fs::create_dir_all(dir)
    }

    /// Visits the names in `dir` (a name that is not UTF-8 lossily
    /// converted; `.` and `..` skipped) without collecting them (a streams
    /// directory holds two names per stream), until `visit` refuses one:
    /// its error is the inner result, the directory's the outer. Names are
    /// read in place from the directory's buffer (`readdir`): the standard
    /// library's iterator allocated a name per entry, a tenth of a start
    /// after a crash at two million names.
    pub fn each_name<E>(
        &self,
        dir: &Path,
        mut visit: impl FnMut(&str) -> std::result::Result<(), E>,
    ) -> Result<std::result::Result<(), E>> {
        self.fail(Op::Dir)?;
        let mut names = DirNames::open(dir)?;
        while let Some(name) = names.next()? {
            if name == c"." || name == c".." {
                continue;
            }
            let visited = match name.to_str() {
                Ok(name) => visit(name),
                Err(_) => visit(&name.to_string_lossy()),
            };
            if visited.is_err() {
                return Ok(visited);
            }
        }
        Ok(Ok(()))
    }

    /// The whole of the file at `path`, in a buffer freed whole
    /// (`heap::buffer`: a checkpoint of tens of MB read at start).
    pub fn read_file(&self, path: &Path) -> Result<Vec<u8>> {
        use std::io::Read;
        self.fail(Op::Read)?;
        let mut f = std::fs::File::open(path)?;
        let len = usize::try_from(f.metadata()?.len()).map_err(Error::other)?;
        let mut out = crate::heap::buffer(len);
        f.read_to_end(&mut out)?;
        Ok(out)
    }

    /// The size of the file at `path`.
    pub fn len(&self, path: &Path) -> Result<u64> {
        self.fail(Op::Size)?;
        Ok(std::fs::metadata(path)?.len())
    }

    /// Cuts the file at `path` back to `len` bytes, durably.
    pub fn cut(&self, path: &Path, len: u64) -> Result<()> {
        self.fail(Op::Open)?;
        let f = std::fs::OpenOptions::new().write(true).open(path)?;
        self.fail(Op::Truncate)?;
        f.set_len(len)?;
        self.fail(Op::Sync)?;
        f.sync_data()
    }

    /// Opens the file at `path` for [`Storage::read_exact_at`].
    pub fn open_blocking(&self, path: &Path) -> Result<std::fs::File> {
        self.fail(Op::Open)?;
        std::fs::File::open(path)
    }

    /// Fills `buf` from `pos` of `f`.
    pub fn read_exact_at(&self, f: &std::fs::File, buf: &mut [u8], pos: u64) -> Result<()> {
        self.fail(Op::Read)?;
        f.read_exact_at(buf, pos)
    }
}

/// An open directory stream (`opendir`), closed on drop.
struct DirNames(std::ptr::NonNull<libc::DIR>);

impl DirNames {
    fn open(dir: &Path) -> Result<DirNames> {
        let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).map_err(Error::other)?;
        // SAFETY: opendir reads a NUL-terminated path we own.
        let d = unsafe { libc::opendir(path.as_ptr()) };
        std::ptr::NonNull::new(d).map(DirNames).ok_or_else(Error::last_os_error)
    }

    /// The next name, valid until the next call; `None` at the end.
    fn next(&mut self) -> Result<Option<&std::ffi::CStr>> {
        // readdir reports an error only through errno, which it leaves
        // unchanged at the end of the directory.
        // SAFETY: errno is this thread's; readdir64 reads the stream we own
        // and returns null or an entry that lives until the next call on it.
        unsafe {
            *libc::__errno_location() = 0;
            let e = libc::readdir64(self.0.as_ptr());
            if e.is_null() {
                return match *libc::__errno_location() {
                    0 => Ok(None),
                    errno => Err(Error::from_raw_os_error(errno)),
                };
            }
            Ok(Some(std::ffi::CStr::from_ptr((*e).d_name.as_ptr())))
        }
    }
}

impl Drop for DirNames {
    fn drop(&mut self) {
        // SAFETY: the stream was opened by opendir and is closed once.
        unsafe { libc::closedir(self.0.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    /// Every name is visited once, `.` and `..` never, a name that is not
    /// UTF-8 lossily; a refusal stops the visit and is returned; a missing
    /// directory is the outer error.
    #[test]
    fn each_name_visits_every_name_until_refused() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../target/each-name-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let mut made: Vec<String> = (0..1000).map(|i| format!("{i:016x}.data")).collect();
        for name in &made {
            std::fs::write(root.join(name), b"").unwrap();
        }
        std::fs::write(root.join(std::ffi::OsStr::from_bytes(b"bad-\xff")), b"").unwrap();
        made.push("bad-\u{fffd}".into());
        let mut seen = Vec::new();
        let r = Storage::Real.each_name(&root, |n| -> std::result::Result<(), ()> {
            seen.push(n.to_string());
            Ok(())
        });
        assert_eq!(r.unwrap(), Ok(()));
        seen.sort();
        made.sort();
        assert_eq!(seen, made);
        let mut visited = 0;
        let r = Storage::Real.each_name(&root, |n| {
            visited += 1;
            if visited == 10 {
                return Err(n.to_string());
            }
            Ok(())
        });
        assert!(matches!(r, Ok(Err(_))) && visited == 10, "{r:?} after {visited}");
        let gone = Storage::Real.each_name(&root.join("gone"), |_| -> std::result::Result<(), ()> { Ok(()) });
        assert_eq!(gone.unwrap_err().kind(), std::io::ErrorKind::NotFound);
        std::fs::remove_dir_all(root).unwrap();
    }

    /// An install replaces the file whole (written in several pieces) and
    /// leaves no second name of the old one behind; one a crash left
    /// behind goes at the next install.
    #[test]
    fn install_replaces_and_gives_the_old_file_back() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../target/install-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let dir = root.clone();
        let names = crate::tick::block_on(move || async move {
            let io = Storage::Real;
            let big: Vec<u8> = (0..2 * WRITE_PIECE + 7).map(|i| (i % 251) as u8).collect();
            io.install(&dir, "f", big.clone()).await.unwrap();
            assert!(std::fs::read(dir.join("f")).unwrap() == big);
            io.install(&dir, "f", vec![2; 3]).await.unwrap();
            assert_eq!(std::fs::read(dir.join("f")).unwrap(), [2, 2, 2]);
            // As a crash between the rename and the removal leaves it.
            std::fs::hard_link(dir.join("f"), dir.join("f.replaced.tmp")).unwrap();
            io.install(&dir, "f", vec![3; 5]).await.unwrap();
            assert_eq!(std::fs::read(dir.join("f")).unwrap(), [3; 5]);
            let mut names: Vec<String> =
                std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
            names.sort();
            names
        });
        assert_eq!(names, ["f"]);
        std::fs::remove_dir_all(root).unwrap();
    }
}
