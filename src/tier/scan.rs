//! What changed in the data dir since the last confirmed cycle, file by
//! file, and the manifest entries those changes produce.
//!
//! Three kinds of files, by what may change in them:
//! - journal segments (`shard-N/*.seg`): preallocated zeros, written
//!   forward; shipped up to the shard's published durable position (bytes
//!   after it are not final yet and restore as zeros, as on disk);
//! - stream data and index files (`*.data`, `*.idx`) and bundles
//!   (`shard-N/bundles/*.bundle`, written forward only): appended to, with
//!   the last page of an index rewritten in place and retention's hole
//!   punches zeroing old ranges; shipped from the last whole page below
//!   what was shipped (so a rewritten last page goes again);
//! - everything else (checkpoint, marks, metadata, snapshots, keys): small
//!   or written once, replaced by rename or rewritten; shipped whole when
//!   its inode, size or modification time changed.
//!
//! A file with a new inode starts over. Temporary files (`*.tmp`) are never
//! shipped: they are replaced or removed before anything depends on them.

use super::extents::Resolved;
use super::layout::{Extent, FileEntry, Local};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Pages of appended files: a rewrite never reaches below the last one.
const PAGE: u64 = sluice_shards::core::limits::PAGE;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Segment { shard: usize, no: u32 },
    Appended,
    Whole,
}

fn kind(path: &str) -> Kind {
    let mut parts = path.split('/');
    let (first, name) = (parts.next().unwrap_or(""), path.rsplit('/').next().unwrap_or(""));
    if let (Some(shard), Some(no)) = (first.strip_prefix("shard-"), name.strip_suffix(".seg")) {
        if path.matches('/').count() == 1 {
            if let (Ok(shard), Ok(no)) = (shard.parse(), no.parse()) {
                return Kind::Segment { shard, no };
            }
        }
    }
    if name.ends_with(".data") || name.ends_with(".idx") || name.ends_with(".bundle") {
        return Kind::Appended;
    }
    Kind::Whole
}

/// A file's identity and change marks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stat {
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
}

impl Stat {
    pub fn of(m: &std::fs::Metadata) -> Stat {
        Stat {
            ino: m.ino(),
            size: m.size(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        }
    }
}

/// A file as shipped in the last confirmed cycle.
#[derive(Clone, Debug)]
pub struct Tracked {
    pub stat: Stat,
    /// Bytes below this are shipped (for segments: up to the durable position).
    pub shipped: u64,
    pub entry: FileEntry,
}

/// A byte range to ship.
#[derive(Clone, Debug, PartialEq)]
pub struct Delta {
    pub path: String,
    pub from: u64,
    pub to: u64,
}

/// One file found by a scan.
#[derive(Clone, Debug)]
pub struct Found {
    pub stat: Stat,
    /// Bytes that count as shipped once the cycle is confirmed.
    pub shipped: u64,
    /// Starts over: earlier extents are dropped.
    pub reset: bool,
    pub delta: Option<Delta>,
}

/// Files never shipped: temporaries, and the cold tier's marks (a restored
/// data dir holds every byte locally).
fn skipped(name: &str) -> bool {
    name.ends_with(".tmp") || name == sluice_shards::tiered::MARKS
}

/// Every regular file under `dir`, relative, `/`-separated, sorted; `*.tmp`
/// and the cold tier's marks left out.
pub fn walk(dir: &Path) -> std::io::Result<BTreeMap<String, (PathBuf, Stat)>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && d != dir => continue,
            Err(e) => return Err(e),
        };
        for e in entries {
            let e = e?;
            let path = e.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() && !skipped(&e.file_name().to_string_lossy()) {
                let rel = path.strip_prefix(dir).expect("under dir").to_string_lossy().replace('\\', "/");
                out.insert(rel, (path, Stat::of(&meta)));
            }
        }
    }
    Ok(out)
}

/// What to ship of file `path` (now `stat`), given what was shipped before,
/// the shards' durable journal positions and the file's tiered boundary
/// (bytes below it are holes here, their confirmed extents stand: they are
/// never shipped again).
pub fn plan(path: &str, stat: Stat, before: Option<&Tracked>, journals: &[(u32, u64)], tiered: u64) -> Found {
    let same = before.filter(|t| t.stat.ino == stat.ino);
    let reset = same.is_none();
    let shipped = same.map_or(0, |t| t.shipped);
    let (end, from) = match kind(path) {
        Kind::Segment { shard, no } => {
            let end = match journals.get(shard) {
                Some(&(seg, _)) if no < seg => stat.size,
                Some(&(seg, byte)) if no == seg => byte.min(stat.size),
                _ => 0,
            };
            (end, shipped.min(end) / PAGE * PAGE)
        }
        Kind::Appended => {
            let changed = same.is_none_or(|t| t.stat != stat);
            // From the page holding the last shipped byte: it may have been rewritten.
            let from = if changed { shipped.min(stat.size).saturating_sub(1) / PAGE * PAGE } else { stat.size };
            (stat.size, from)
        }
        Kind::Whole => {
            let changed = same.is_none_or(|t| t.stat != stat);
            (stat.size, if changed { 0 } else { stat.size })
        }
    };
    // A whole file shipped again replaces its extents, as a new one does.
    let reset = reset || (kind(path) == Kind::Whole && from == 0);
    assert!(tiered == 0 || !reset, "{path}: a tiered file keeps its extents");
    let from = from.max(tiered);
    let unchanged_segment = matches!(kind(path), Kind::Segment { .. }) && end <= shipped && !reset;
    let delta = (end > from && !unchanged_segment).then(|| Delta { path: path.to_string(), from, to: end });
    Found { stat, shipped: end, reset, delta }
}

/// The entry of a file after a confirmed cycle: `extents` are where this
/// cycle put its delta. Bytes a later extent overwrote are dropped from
/// earlier ones (see [`Resolved`]): the file reads the same, and a pack
/// whose bytes were all overwritten is named no more, so it can be deleted.
pub fn entry_after(before: Option<&Tracked>, found: &Found, extents: Vec<Extent>) -> FileEntry {
    let mut entry = match before {
        Some(t) if !found.reset => t.entry.clone(),
        _ => FileEntry::default(),
    };
    entry.size = found.stat.size;
    entry.extents.extend(extents);
    entry.extents = Resolved::new(&entry.extents).pieces().cloned().collect();
    entry.local = Some(Local { ino: found.stat.ino, mtime_ns: found.stat.mtime_ns, shipped: found.shipped });
    entry
}

/// What a confirmed manifest says was shipped of each file, for a
/// restarted writer to resume from.
pub fn resume(files: &BTreeMap<String, FileEntry>) -> BTreeMap<String, Tracked> {
    let tracked = |(path, e): (&String, &FileEntry)| {
        let l = e.local?;
        let stat = Stat { ino: l.ino, size: e.size, mtime_ns: l.mtime_ns };
        Some((path.clone(), Tracked { stat, shipped: l.shipped, entry: e.clone() }))
    };
    files.iter().filter_map(tracked).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(ino: u64, size: u64, mtime_ns: i128) -> Stat {
        Stat { ino, size, mtime_ns }
    }

    fn tracked(s: Stat, shipped: u64) -> Tracked {
        Tracked { stat: s, shipped, entry: FileEntry { size: s.size, ..FileEntry::default() } }
    }

    #[test]
    fn kinds() {
        assert_eq!(kind("shard-3/0000000007.seg"), Kind::Segment { shard: 3, no: 7 });
        assert_eq!(kind("shard-0/streams/12.data"), Kind::Appended);
        assert_eq!(kind("shard-0/bundles/00000001.bundle"), Kind::Appended);
        assert_eq!(kind("shard-0/streams/12.idx"), Kind::Appended);
        assert_eq!(kind("shard-0/checkpoint"), Kind::Whole);
        assert_eq!(kind("shard-0/streams/1.0000000007.seg"), Kind::Whole, "not a segment outside the shard dir");
    }

    #[test]
    fn segments_ship_up_to_the_durable_position_from_the_last_page() {
        let s = stat(1, 1 << 20, 5);
        let f = plan("shard-0/0000000002.seg", s, None, &[(2, 5000)], 0);
        assert_eq!(f.delta, Some(Delta { path: "shard-0/0000000002.seg".into(), from: 0, to: 5000 }));
        assert_eq!(f.shipped, 5000);
        let f = plan("shard-0/0000000002.seg", s, Some(&tracked(s, 5000)), &[(2, 9000)], 0);
        assert_eq!(f.delta.map(|d| (d.from, d.to)), Some((4096, 9000)));
        let f = plan("shard-0/0000000002.seg", s, Some(&tracked(s, 9000)), &[(2, 9000)], 0);
        assert_eq!(f.delta, None, "nothing new");
        let f = plan("shard-0/0000000002.seg", s, Some(&tracked(s, 9000)), &[(3, 10)], 0);
        assert_eq!(f.delta.map(|d| (d.from, d.to)), Some((8192, 1 << 20)), "sealed: to its end");
        let f = plan("shard-0/0000000004.seg", s, None, &[(3, 10)], 0);
        assert_eq!((f.delta, f.shipped), (None, 0), "ahead of the log: zeros");
    }

    #[test]
    fn appended_files_ship_from_their_last_page_when_changed() {
        let old = stat(1, 10_000, 5);
        let f = plan("shard-0/streams/1.idx", stat(1, 10_000, 6), Some(&tracked(old, 10_000)), &[], 0);
        assert_eq!(f.delta.map(|d| (d.from, d.to)), Some((8192, 10_000)), "last page rewritten in place");
        let whole_pages = stat(1, 8192, 5);
        let f = plan("shard-0/streams/1.idx", stat(1, 8192, 6), Some(&tracked(whole_pages, 8192)), &[], 0);
        assert_eq!(f.delta.map(|d| (d.from, d.to)), Some((4096, 8192)), "a full last page rewritten");
        let f = plan("shard-0/streams/1.data", old, Some(&tracked(old, 10_000)), &[], 0);
        assert_eq!(f.delta, None);
        let f = plan("shard-0/streams/1.data", stat(1, 3000, 7), Some(&tracked(old, 10_000)), &[], 0);
        assert_eq!((f.delta.map(|d| (d.from, d.to)), f.shipped), (Some((0, 3000)), 3000), "cut back");
        let f = plan("shard-0/streams/1.data", stat(2, 5000, 7), Some(&tracked(old, 10_000)), &[], 0);
        assert!(f.reset, "a new inode starts over");
        let grown = stat(1, 12_000, 8);
        let f = plan("shard-0/streams/1.data", grown, Some(&tracked(stat(1, 8192, 5), 8192)), &[], 8192);
        assert_eq!(f.delta.map(|d| (d.from, d.to)), Some((8192, 12_000)), "never a tiered page again");
        let f = plan("shard-0/streams/1.data", stat(1, 3000, 7), Some(&tracked(old, 10_000)), &[], 8192);
        assert_eq!(f.delta, None, "holes below the tiered boundary are never shipped");
    }

    #[test]
    fn other_files_ship_whole_when_changed() {
        let old = stat(1, 100, 5);
        let f = plan("shard-0/checkpoint", stat(2, 90, 6), Some(&tracked(old, 100)), &[], 0);
        assert_eq!((f.delta.map(|d| (d.from, d.to)), f.reset), (Some((0, 90)), true));
        let f = plan("shard-0/checkpoint", old, Some(&tracked(old, 100)), &[], 0);
        assert_eq!(f.delta, None);
        let f = plan("shard-0/checkpoint", stat(1, 0, 6), None, &[], 0);
        assert_eq!((f.delta, f.reset), (None, true), "an empty file has no extent");
    }

    #[test]
    fn entries_keep_or_drop_earlier_extents() {
        let ext = |p: &str| Extent { pack: p.into(), pack_offset: 0, file_offset: 0, len: 1 };
        let mut t = tracked(stat(1, 1, 1), 1);
        t.entry.extents.push(ext("a"));
        let grown = plan("shard-0/streams/1.data", stat(1, 2, 2), Some(&t), &[], 0);
        let appended = Extent { pack: "b".into(), pack_offset: 0, file_offset: 1, len: 1 };
        assert_eq!(entry_after(Some(&t), &grown, vec![appended.clone()]).extents, vec![ext("a"), appended]);
        assert_eq!(
            entry_after(Some(&t), &grown, vec![ext("b")]).extents,
            vec![ext("b")],
            "overwritten: a is named no more"
        );
        let new = plan("shard-0/streams/1.data", stat(9, 2, 2), Some(&t), &[], 0);
        assert_eq!(entry_after(Some(&t), &new, vec![ext("b")]).extents, vec![ext("b")]);
    }

    #[test]
    fn a_restarted_writer_resumes_from_the_manifest() {
        let t = tracked(stat(1, 10_000, 5), 10_000);
        let found = plan("shard-0/streams/1.data", stat(1, 12_000, 6), Some(&t), &[], 0);
        let entry = entry_after(Some(&t), &found, Vec::new());
        let mut files = BTreeMap::new();
        files.insert("shard-0/streams/1.data".to_string(), entry);
        files.insert("other".to_string(), FileEntry::default());
        let resumed = resume(&files);
        assert_eq!(resumed.len(), 1, "entries without a local identity start over");
        let r = &resumed["shard-0/streams/1.data"];
        assert_eq!((r.stat, r.shipped), (stat(1, 12_000, 6), 12_000));
        let next = plan("shard-0/streams/1.data", stat(1, 12_000, 6), Some(r), &[], 0);
        assert_eq!(next.delta, None, "nothing changed since the manifest");
    }

    #[test]
    fn walk_lists_files_and_leaves_out_temporaries() {
        let d = std::env::temp_dir().join(format!("sluice-scan-{}", std::process::id()));
        std::fs::create_dir_all(d.join("shard-0/streams")).unwrap();
        std::fs::write(d.join("shard-0/checkpoint"), b"c").unwrap();
        std::fs::write(d.join("shard-0/checkpoint.tmp"), b"t").unwrap();
        std::fs::write(d.join("shard-0/streams/1.data"), b"dd").unwrap();
        let found = walk(&d).unwrap();
        assert_eq!(found.keys().cloned().collect::<Vec<_>>(), vec!["shard-0/checkpoint", "shard-0/streams/1.data"]);
        assert_eq!(found["shard-0/streams/1.data"].1.size, 2);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
