//! Giving freed heap memory back to the kernel, and when not to.
//!
//! glibc keeps what a thread's arena freed for its next allocations; a
//! large buffer freed among long-lived data (a checkpoint, a flush's
//! finished tail buffers) would hold its pages for the life of the
//! process. A large transient buffer is made a mapping of its own
//! ([`buffer`]), returned whole when freed; what the heap holds free
//! anyway, [`give_back`] returns (`malloc_trim`) once a burst is flushed.
//! While a shard is busy, [`configure`] keeps up to [`HEAP_KEEP_FREE`]
//! free at its arena's top for the next 1 MiB request body or write piece,
//! which glibc's moving thresholds returned to the kernel at every free
//! (see [`HEAP_MAPPED_ABOVE`]); [`trim_top`] returns it when the shard
//! goes idle.
//!
//! Freed memory sorted a little at a time. glibc puts a freed chunk its
//! per-thread cache has no room for on an unsorted list, and sorts that
//! list into its bins in the allocations that miss the cache, up to 10,000
//! chunks per call. During a burst the requests' own allocations find
//! their sizes early in the list, so it grows: after a million creates a
//! shard's arena held 181,594 unsorted chunks (`malloc_info`), and the
//! first requests after the burst each sorted 10,000 of them, cold (10-15
//! ms each, 20-62 ms for the first). [`settle`] sorts the list now; a
//! flush calls it after each slice of the streams it visits and frees,
//! which during a burst is every second or so. (Called from the reactor
//! tick as well, every 20 ms, it cost pooled appends 2-3% of their
//! requests per core-second: the sorting holds the arena's lock, which
//! the other shard takes to free what it was sent.)

use crate::tuning::{HEAP_KEEP_FREE, HEAP_MAPPED_ABOVE, MAPPED_FROM, OWN_MAPPING, SETTLE_BYTES, TRIM_NUDGE};

/// Fixes glibc's thresholds for the process: buffers above
/// [`HEAP_MAPPED_ABOVE`] are mappings of their own, and free memory at an
/// arena's top is returned beyond [`HEAP_KEEP_FREE`] (a no-op off glibc).
/// Call once at start, before the shards allocate.
pub fn configure() {
    // SAFETY: mallopt only changes the allocator's thresholds.
    #[cfg(target_env = "gnu")]
    unsafe {
        let mmap = libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_MAPPED_ABOVE as libc::c_int);
        let trim = libc::mallopt(libc::M_TRIM_THRESHOLD, HEAP_KEEP_FREE as libc::c_int);
        assert!(mmap == 1 && trim == 1, "glibc took the heap thresholds");
    }
}

/// An empty buffer with room for `len` bytes; past [`MAPPED_FROM`] its
/// capacity is beyond glibc's mmap ceiling, so it is a mapping of its own.
pub fn buffer(len: usize) -> Vec<u8> {
    match len > MAPPED_FROM {
        true => Vec::with_capacity(len.max(OWN_MAPPING + 1)),
        false => Vec::with_capacity(len),
    }
}

/// Sorts the chunks freed since the last call into the heap's bins (up to
/// glibc's 10,000 a call): an allocation of [`SETTLE_BYTES`], beyond the
/// per-thread cache, sorts the unsorted list before it is served, and is
/// freed at once.
pub fn settle() {
    drop(std::hint::black_box(Vec::<u8>::with_capacity(SETTLE_BYTES)));
}

/// Returns the heap's free pages to the kernel (a no-op off glibc):
/// `malloc_trim` frees the pages inside free chunks of every arena (it
/// walks them all: up to 7 ms a shard with 300k streams on two), then
/// [`trim_top`].
pub fn give_back() {
    // SAFETY: malloc_trim only returns free heap memory to the kernel.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::malloc_trim(0);
    }
    trim_top();
}

/// Returns the free memory at the top of the calling thread's arena, where
/// up to [`HEAP_KEEP_FREE`] stays while a shard is busy and which
/// `malloc_trim` leaves alone (call it on the shard's thread; a no-op off
/// glibc): a free of [`TRIM_NUDGE`] bytes with the trim threshold at zero
/// trims it, then the threshold goes back. One shrink of the arena, however
/// many chunks it holds. The threshold is the process's: two shards going
/// idle at once take turns ([`TRIMMING`]), or one would put it back before
/// the other's free.
pub fn trim_top() {
    #[cfg(target_env = "gnu")]
    {
        let _turn = TRIMMING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: mallopt only changes the trim threshold.
        unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, 0) };
        drop(std::hint::black_box(Vec::<u8>::with_capacity(TRIM_NUDGE)));
        // SAFETY: as above.
        unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, HEAP_KEEP_FREE as libc::c_int) };
    }
}

/// Held while a thread lowers the process's trim threshold to trim its
/// arena: taken when a shard goes idle and after a burst's flush, never on
/// a request's path.
#[cfg(target_env = "gnu")]
static TRIMMING: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(all(test, target_env = "gnu"))]
mod tests {
    use crate::test_dir::TestDir;
    use std::path::{Path, PathBuf};

    /// A `malloc_info` report to a file, opened (with its stream buffer)
    /// before the test frees anything: any allocation in between would
    /// sort the list it is to count.
    struct Report {
        path: PathBuf,
        file: *mut libc::FILE,
        _buf: Vec<u8>,
    }

    // SAFETY: the FILE is used by one thread at a time: made here, written
    // and closed by the test's thread, which takes it by value.
    unsafe impl Send for Report {}

    impl Report {
        fn open(path: PathBuf) -> Report {
            let c = std::ffi::CString::new(path.to_str().expect("utf-8")).expect("no NUL");
            let mut buf = vec![0u8; 1 << 20];
            // SAFETY: a fresh FILE given a buffer that outlives it.
            let file = unsafe {
                let f = libc::fopen(c.as_ptr(), c"w".as_ptr());
                assert!(!f.is_null(), "open {}", path.display());
                assert_eq!(libc::setvbuf(f, buf.as_mut_ptr().cast(), libc::_IOFBF, buf.len()), 0);
                f
            };
            Report { path, file, _buf: buf }
        }

        /// Writes the heap's state now and closes the report; returns
        /// where it is.
        fn take(self) -> PathBuf {
            // SAFETY: the FILE is open; `self` goes, so it is closed once.
            unsafe {
                assert_eq!(libc::malloc_info(0, self.file), 0);
                libc::fclose(self.file);
            }
            self.path
        }
    }

    /// Freed chunks a report found on unsorted lists.
    fn unsorted(report: &Path) -> u64 {
        let xml = std::fs::read_to_string(report).expect("malloc_info wrote");
        xml.lines()
            .filter(|l| l.trim_start().starts_with("<unsorted "))
            .map(|l| {
                let count = l.split("count=\"").nth(1).and_then(|r| r.split('"').next()).expect("a count");
                count.parse::<u64>().expect("a number")
            })
            .sum()
    }

    /// Chunks freed between live ones wait on the unsorted list (past the
    /// per-thread cache); a few calls of `settle` sort them.
    #[test]
    fn settle_sorts_what_was_freed() {
        let dir = TestDir::new("heap-settle");
        let (before, after) = (Report::open(dir.join("before.xml")), Report::open(dir.join("after.xml")));
        // Its own thread, so its own arena, where only this test allocates.
        let (before, after) = std::thread::scope(|s| {
            s.spawn(move || {
                let mut chunks: Vec<Vec<u8>> = (0..40_000).map(|i| vec![i as u8; 200]).collect();
                let mut kept = Vec::with_capacity(chunks.len() / 2);
                for (i, c) in chunks.drain(..).enumerate() {
                    if i % 2 == 0 {
                        kept.push(c);
                    }
                }
                let before = before.take();
                for _ in 0..3 {
                    super::settle();
                }
                let after = after.take();
                drop(kept);
                (before, after)
            })
            .join()
            .expect("the test's thread")
        });
        let (before, after) = (unsorted(&before), unsorted(&after));
        assert!(before >= 19_000, "the freed chunks were not left unsorted ({before})");
        assert!(after + 19_000 <= before, "settle sorted too little: {before} -> {after}");
    }
}
