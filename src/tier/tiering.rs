//! The cold tier's drops: which confirmed stream data bytes lose their
//! local copy, and dropping them.
//!
//! Only bytes a confirmed manifest holds are candidates: a data file's
//! bytes below what the last confirmed cycle shipped of it (whole pages;
//! data files are only appended to, so those bytes are final). Each file
//! keeps one boundary, below which it is remote only, so candidates are
//! taken in file order; across files, the oldest first (by when the cycle
//! that shipped them was confirmed). They are taken while the local data
//! files hold more than `--local-bytes`, and while older than `--tier-after`.
//!
//! Dropping, in this order: the reading thread learns where the bytes are
//! (the manifest's extents), the shard's marks are written durably and
//! published (`sluice_shards::tiered`), then the pages are punched. A crash
//! between any two steps leaves bytes both local and remote, never neither.
//!
//! Bytes no confirmed manifest holds cannot be dropped, so while the store
//! is down or behind they are capped instead ([`cap_writes`]): the shards
//! take writes that add stream data only while those bytes stay within
//! `--local-bytes`.

use super::args::DROP_STEP;
use super::extents::Resolved;
use super::layout::{self, FileEntry};
use crate::tier::error::TierError;
use sluice_shards::tiered::Mark;
use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::path::Path;

const PAGE: u64 = sluice_shards::core::limits::PAGE;

/// A data file's bytes that could be dropped, in file order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Candidate {
    pub boundary: u64,
    /// Chunks `(end, confirmed_ms)`: each runs from the end of the one
    /// before (or the boundary); ends rise, and so do their times.
    pub chunks: Vec<(u64, u64)>,
}

/// The chunks of a file whose last confirmed cycle shipped `shipped` bytes
/// and whose extents are `entry`'s; `confirmed_ms` gives when a cycle's
/// manifest was confirmed.
pub fn candidate(entry: &FileEntry, shipped: u64, boundary: u64, confirmed_ms: impl Fn(u64) -> u64) -> Candidate {
    let cap = shipped.min(entry.size) / PAGE * PAGE;
    let mut chunks: Vec<(u64, u64)> = Vec::new();
    let mut when = 0;
    for e in Resolved::new(&entry.extents).pieces() {
        let end = (e.file_offset + e.len).min(cap) / PAGE * PAGE;
        if end <= boundary {
            continue;
        }
        // A prefix drops no later than its newest byte's cycle allows.
        when = when.max(layout::pack_seq(&e.pack).map_or(u64::MAX, &confirmed_ms));
        match chunks.last().copied() {
            Some((_, w)) if w == when => chunks.last_mut().expect("a last chunk").0 = end,
            Some((e, _)) if e >= end => {}
            _ => chunks.push((end, when)),
        }
    }
    // At most DROP_STEP a chunk: a drop frees about what it must, no more.
    let mut steps = Vec::with_capacity(chunks.len());
    let mut from = boundary;
    for (end, when) in chunks {
        steps.extend((from + DROP_STEP..end).step_by(DROP_STEP as usize).map(|e| (e, when)));
        steps.push((end, when));
        from = end;
    }
    Candidate { boundary, chunks: steps }
}

/// New boundaries (by candidate index) given `local` bytes held locally:
/// the oldest chunks first while `local` exceeds `limit`, and every chunk
/// confirmed at or before `older_than_ms`.
pub fn choose(
    files: &[Candidate],
    mut local: u64,
    limit: Option<u64>,
    older_than_ms: Option<u64>,
) -> BTreeMap<usize, u64> {
    let mut order: Vec<(u64, usize, u64)> =
        files.iter().enumerate().flat_map(|(i, c)| c.chunks.iter().map(move |&(end, when)| (when, i, end))).collect();
    order.sort_unstable();
    let mut out = BTreeMap::new();
    for (when, i, end) in order {
        let over = limit.is_some_and(|l| local > l);
        let old = older_than_ms.is_some_and(|t| when <= t);
        if !over && !old {
            break;
        }
        let b = out.entry(i).or_insert(files[i].boundary);
        assert!(end > *b, "chunks of a file come in file order");
        local = local.saturating_sub(end - *b);
        *b = end;
    }
    out
}

/// Gives `[from, to)` of `path` back to the file system (keeping its size).
pub fn punch(path: &Path, from: u64, to: u64) -> std::io::Result<()> {
    assert!(from.is_multiple_of(PAGE) && to.is_multiple_of(PAGE) && from < to, "whole pages");
    let f = std::fs::OpenOptions::new().write(true).open(path)?;
    let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: fallocate on a descriptor we own, within its file.
    if unsafe { libc::fallocate(f.as_raw_fd(), mode, from as libc::off_t, (to - from) as libc::off_t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The shard and handle of a data file's path relative to the data dir.
pub fn data_file(path: &str) -> Option<(u32, u64)> {
    use sluice_shards::store::files::{FileName, STREAMS_DIR};
    let mut parts = path.split('/');
    let shard = parts.next()?.strip_prefix("shard-")?.parse().ok()?;
    match (parts.next(), parts.next().and_then(FileName::parse), parts.next()) {
        (Some(STREAMS_DIR), Some(FileName::Data(handle)), None) => Some((shard, handle)),
        _ => None,
    }
}

/// The data files under `dir`'s shards: each one's path relative to `dir`
/// and its metadata.
fn data_files(dir: &Path, shards: usize) -> impl Iterator<Item = (String, std::fs::Metadata)> + '_ {
    use sluice_shards::store::files::STREAMS_DIR;
    (0..shards).flat_map(move |i| {
        let entries = std::fs::read_dir(dir.join(format!("shard-{i}")).join(STREAMS_DIR)).into_iter().flatten();
        entries.flatten().filter_map(move |e| {
            let name = e.file_name().into_string().ok().filter(|n| n.ends_with(".data"))?;
            Some((format!("shard-{i}/{STREAMS_DIR}/{name}"), e.metadata().ok()?))
        })
    })
}

/// Bytes the data files under `dir`'s shards hold on disk (allocated blocks).
pub fn local_bytes(dir: &Path, shards: usize) -> u64 {
    measure(dir, shards, |_| None).0
}

/// What the data files under `dir`'s shards hold, in one pass over them:
/// bytes on disk (allocated blocks), and bytes no confirmed manifest holds
/// (each file's bytes past what `confirmed(path)` says was shipped of it,
/// its inode and size then; the whole file when it names none or another
/// inode).
pub fn measure(dir: &Path, shards: usize, confirmed: impl Fn(&str) -> Option<(u64, u64)>) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    data_files(dir, shards).fold((0, 0), |(local, unconfirmed), (path, m)| {
        let past = match confirmed(&path) {
            Some((ino, shipped)) if ino == m.ino() => m.len().saturating_sub(shipped),
            _ => m.len(),
        };
        (local + m.blocks() * 512, unconfirmed + past)
    })
}

/// Caps writes at `--local-bytes` (`limit`): lets the shards append as many
/// journal bytes as the data files' `unconfirmed` bytes (see [`measure`])
/// may still grow by (`sluice_shards::tiered::CAP`), from `appended`, the
/// cap's count read before they were measured (whatever is appended after
/// counts against the room). Journal bytes are at least the stream data
/// they carry; bytes appended but not yet flushed when the files are
/// measured count in neither, so the data files may pass `limit` by what
/// one flush writes.
pub fn cap_writes(appended: u64, unconfirmed: u64, limit: u64) {
    sluice_shards::tiered::CAP.set_ceiling(appended.saturating_add(limit.saturating_sub(unconfirmed)));
}

/// The marks of every shard, by data file path.
pub type Marks = BTreeMap<String, (u32, Mark)>;

/// Shard `shard`'s marks in the data dir `dir`.
pub fn load(dir: &Path, shard: u32) -> Result<Vec<Mark>, TierError> {
    let shard_dir = dir.join(format!("shard-{shard}"));
    let streams = shard_dir.join(sluice_shards::store::files::STREAMS_DIR);
    sluice_shards::tiered::load(&shard_dir, |h| streams.join(sluice_shards::store::files::data_name(h)))
        .map_err(|e| format!("{}: {e}", shard_dir.join(sluice_shards::tiered::MARKS).display()).into())
}

/// Writes and publishes the marks of `shard` from `all`.
pub fn store(dir: &Path, shard: u32, all: &Marks) -> Result<(), TierError> {
    let mine: Vec<Mark> = all.values().filter(|(s, _)| *s == shard).map(|(_, m)| *m).collect();
    let shard_dir = dir.join(format!("shard-{shard}"));
    sluice_shards::tiered::store(&shard_dir, &mine)
        .map_err(|e| format!("{}: {e}", shard_dir.join(sluice_shards::tiered::MARKS).display()))?;
    sluice_shards::tiered::publish(shard, &mine);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tier::layout::Extent;

    fn ext(seq: u64, file_offset: u64, len: u64) -> Extent {
        Extent { pack: layout::pack_key(seq, 0), pack_offset: 0, file_offset, len }
    }

    #[test]
    fn candidates_are_confirmed_whole_pages_above_the_boundary() {
        let entry = FileEntry {
            size: 5 * PAGE + 10,
            extents: vec![ext(1, 0, 2 * PAGE), ext(2, 2 * PAGE, 3 * PAGE + 10)],
            local: None,
        };
        let when = |seq| seq * 100;
        let c = candidate(&entry, 5 * PAGE + 10, 0, when);
        assert_eq!(c.chunks, vec![(2 * PAGE, 100), (5 * PAGE, 200)], "the last part page stays");
        let c = candidate(&entry, 3 * PAGE + 1, PAGE, when);
        assert_eq!(c.chunks, vec![(2 * PAGE, 100), (3 * PAGE, 200)], "never past what was confirmed");
        let c = candidate(&entry, 5 * PAGE, 5 * PAGE, when);
        assert!(c.chunks.is_empty(), "all dropped already");
        // A later cycle re-shipped the last page of the first: the prefix is as new as it.
        let entry =
            FileEntry { size: 4 * PAGE, extents: vec![ext(1, 0, 2 * PAGE), ext(3, PAGE, 3 * PAGE)], local: None };
        assert_eq!(candidate(&entry, 4 * PAGE, 0, when).chunks, vec![(PAGE, 100), (4 * PAGE, 300)]);
        // Long runs are cut in steps of DROP_STEP.
        let entry = FileEntry { size: 3 * DROP_STEP, extents: vec![ext(1, 0, 3 * DROP_STEP)], local: None };
        let steps = candidate(&entry, 3 * DROP_STEP, PAGE, when).chunks;
        assert_eq!(steps, vec![(PAGE + DROP_STEP, 100), (PAGE + 2 * DROP_STEP, 100), (3 * DROP_STEP, 100)]);
    }

    #[test]
    fn the_oldest_go_first_until_local_bytes_fit_and_old_ones_always() {
        let a = Candidate { boundary: 0, chunks: vec![(100, 1), (300, 5)] };
        let b = Candidate { boundary: 50, chunks: vec![(150, 2), (250, 3)] };
        let files = [a, b];
        assert!(choose(&files, 500, Some(500), None).is_empty(), "within the limit: nothing");
        assert!(choose(&files, 500, None, None).is_empty(), "no limits: nothing");
        // 100 over: a's first chunk (oldest, 100 bytes) is enough.
        assert_eq!(choose(&files, 600, Some(500), None), BTreeMap::from([(0, 100)]));
        // 150 over: then b's first (100 more).
        assert_eq!(choose(&files, 650, Some(500), None), BTreeMap::from([(0, 100), (1, 150)]));
        // Far over: everything.
        assert_eq!(choose(&files, 10_000, Some(500), None), BTreeMap::from([(0, 300), (1, 250)]));
        // By age: every chunk confirmed at or before 3.
        assert_eq!(choose(&files, 0, Some(500), Some(3)), BTreeMap::from([(0, 100), (1, 250)]));
    }

    #[test]
    fn data_file_paths() {
        let p = crate::tier::fetch::data_path(3, 0xab);
        assert_eq!(data_file(&p), Some((3, 0xab)));
        assert_eq!(data_file("shard-3/streams/00000000000000ab.idx"), None);
        assert_eq!(data_file("shard-x/streams/00000000000000ab.data"), None);
        assert_eq!(data_file("shard-3/00000000000000ab.data"), None);
    }

    #[test]
    fn unconfirmed_bytes_are_those_past_what_was_shipped_of_the_same_file() {
        use std::os::unix::fs::MetadataExt;
        let dir = std::env::temp_dir().join(format!("sluice-unconfirmed-{}", std::process::id()));
        let streams = dir.join("shard-1").join(sluice_shards::store::files::STREAMS_DIR);
        std::fs::create_dir_all(&streams).unwrap();
        let (a, b) = (crate::tier::fetch::data_path(1, 0xa), crate::tier::fetch::data_path(1, 0xb));
        std::fs::write(dir.join(&a), vec![1u8; 5000]).unwrap();
        std::fs::write(dir.join(&b), vec![1u8; 300]).unwrap();
        std::fs::write(streams.join("000000000000000a.idx"), vec![1u8; 999]).unwrap();
        let ino = std::fs::metadata(dir.join(&a)).unwrap().ino();
        assert_eq!(measure(&dir, 2, |_| None).1, 5300, "nothing confirmed: every data file");
        assert_eq!(measure(&dir, 2, |p| (p == a).then_some((ino, 4096))).1, 904 + 300);
        assert_eq!(measure(&dir, 2, |p| (p == a).then_some((ino + 1, 4096))).1, 5300, "another inode");
        assert_eq!(measure(&dir, 1, |_| None).1, 0, "shard-1 not counted with one shard");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn punching_frees_pages_and_keeps_the_size() {
        use std::os::unix::fs::MetadataExt;
        let d = std::env::temp_dir().join(format!("sluice-punch-{}", std::process::id()));
        std::fs::write(&d, vec![7u8; 64 * PAGE as usize]).unwrap();
        std::fs::File::open(&d).unwrap().sync_all().unwrap();
        let before = std::fs::metadata(&d).unwrap().blocks();
        punch(&d, 0, 32 * PAGE).unwrap();
        let m = std::fs::metadata(&d).unwrap();
        assert_eq!(m.len(), 64 * PAGE);
        assert!(m.blocks() * 512 <= before * 512 - 32 * PAGE, "{} blocks of {before} left", m.blocks());
        let bytes = std::fs::read(&d).unwrap();
        assert!(
            bytes[..32 * PAGE as usize].iter().all(|&b| b == 0) && bytes[32 * PAGE as usize..].iter().all(|&b| b == 7)
        );
        std::fs::remove_file(&d).unwrap();
    }
}
