//! Pack compaction: a pack holds everything one cycle shipped, so a deleted
//! stream's (or a reclaimed journal segment's) bytes would stay in the
//! store while any other file names a byte of the same pack. Packs whose
//! live bytes (bytes some file of the newest manifest reads) are under
//! [`COMPACT_LIVE_PERCENT`] of the pack, with at least
//! [`MIN_COMPACT_DEAD_BYTES`] dead, have their live bytes copied into one
//! new pack (range GETs, gaps under [`COMPACT_GAP_BYTES`] read through), at
//! most [`MAX_COMPACT_BYTES`] a step, the emptiest packs first.
//!
//! This module plans a step ([`plan`]: which packs, which pieces go where)
//! and copies the bytes ([`copy`]); the backup thread ships the new pack,
//! then a manifest naming it instead, and only then may the old packs go,
//! by the rule for every pack: once no kept manifest names them and no
//! read of the cold tier still uses them (see [`super::leases`]).

use super::args::{COMPACT_GAP_BYTES, COMPACT_LIVE_PERCENT, MAX_COMPACT_BYTES, MIN_COMPACT_DEAD_BYTES};
use super::client::Remote;
use super::extents::Resolved;
use super::layout::{Extent, FileEntry};
use crate::tier::error::TierError;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

/// A live piece of a file that moves: where it is, and its offset in the new pack.
#[derive(Clone, Debug, PartialEq)]
pub struct Move {
    pub path: String,
    pub from: Extent,
    pub to: u64,
}

/// One range GET of an old pack, and the moves (indexes) it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Read {
    pub pack: String,
    pub range: Range<u64>,
    pub moves: Range<usize>,
}

/// One compaction step.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// The packs emptied, sorted: no file of the new manifest names them.
    pub packs: Vec<String>,
    /// Every live piece of them, by old pack and offset: the new pack holds
    /// them back to back in this order.
    pub moves: Vec<Move>,
    pub reads: Vec<Read>,
    /// Live bytes moved: the new pack's size.
    pub bytes: u64,
}

/// The step for `files` (a manifest's) given the sizes of the packs
/// (packs of unknown size are left alone); `None` when no pack qualifies.
pub fn plan<'a>(
    files: impl Iterator<Item = (&'a String, &'a FileEntry)> + Clone,
    sizes: &BTreeMap<String, u64>,
) -> Option<Plan> {
    // Entries hold resolved pieces already (see `scan::entry_after`); were
    // one not to, its overlaps would count as live, never as dead.
    let mut live: BTreeMap<&str, u64> = BTreeMap::new();
    for e in files.clone().flat_map(|(_, f)| &f.extents) {
        *live.entry(e.pack.as_str()).or_default() += e.len;
    }
    let mut candidates: Vec<(&str, u64, u64)> = live
        .iter()
        .filter_map(|(&pack, &live)| {
            let size = *sizes.get(pack)?;
            let sparse = live * 100 < size * COMPACT_LIVE_PERCENT && size - live >= MIN_COMPACT_DEAD_BYTES;
            sparse.then_some((pack, live, size))
        })
        .collect();
    // The emptiest first (live / size ascending), then by key.
    candidates.sort_by(|a, b| (u128::from(a.1) * u128::from(b.2)).cmp(&(u128::from(b.1) * u128::from(a.2))));
    let mut chosen = BTreeSet::new();
    let mut bytes = 0;
    for (pack, live, _) in candidates {
        if bytes + live <= MAX_COMPACT_BYTES {
            chosen.insert(pack.to_string());
            bytes += live;
        }
    }
    if chosen.is_empty() {
        return None;
    }
    let mut moves: Vec<Move> = Vec::new();
    for (path, f) in files.filter(|(_, f)| f.extents.iter().any(|e| chosen.contains(&e.pack))) {
        let mine = Resolved::new(&f.extents);
        let hit = mine.pieces().filter(|e| chosen.contains(&e.pack));
        moves.extend(hit.map(|e| Move { path: path.clone(), from: e.clone(), to: 0 }));
    }
    moves.sort_by(|a, b| (&a.from.pack, a.from.pack_offset).cmp(&(&b.from.pack, b.from.pack_offset)));
    let mut reads: Vec<Read> = Vec::new();
    let mut at = 0;
    for (i, m) in moves.iter_mut().enumerate() {
        m.to = at;
        at += m.from.len;
        let (start, end) = (m.from.pack_offset, m.from.pack_offset + m.from.len);
        match reads.last_mut() {
            Some(r) if r.pack == m.from.pack && start <= r.range.end + COMPACT_GAP_BYTES => {
                r.range.end = r.range.end.max(end);
                r.moves.end = i + 1;
            }
            _ => reads.push(Read { pack: m.from.pack.clone(), range: start..end, moves: i..i + 1 }),
        }
    }
    Some(Plan { packs: chosen.into_iter().collect(), moves, reads, bytes: at })
}

impl Plan {
    /// The files whose extents move.
    pub fn paths(&self) -> BTreeSet<&str> {
        self.moves.iter().map(|m| m.path.as_str()).collect()
    }

    /// The extents of `path` (now `entry`) once the new pack is `pack`: its
    /// pieces, those that move pointing into `pack`.
    pub fn rewrite(&self, path: &str, entry: &FileEntry, pack: &str) -> Vec<Extent> {
        let moved = |e: &Extent| {
            let i = self
                .moves
                .binary_search_by(|m| (&m.from.pack, m.from.pack_offset).cmp(&(&e.pack, e.pack_offset)))
                .ok()?;
            let m = &self.moves[i];
            (m.path == path && m.from == *e).then(|| Extent { pack: pack.to_string(), pack_offset: m.to, ..e.clone() })
        };
        Resolved::new(&entry.extents).pieces().map(|e| moved(e).unwrap_or_else(|| e.clone())).collect()
    }
}

/// The new pack's bytes, read from the old packs; also the bytes read.
pub fn copy(remote: &Remote, plan: &Plan) -> Result<(Vec<u8>, u64), TierError> {
    let mut out = Vec::with_capacity(plan.bytes as usize);
    let mut read = 0;
    for r in &plan.reads {
        let got = remote.get_range(&r.pack, r.range.clone())?;
        if (got.len() as u64) < r.range.end - r.range.start {
            return Err(format!("{}: shorter than the manifest says", r.pack).into());
        }
        read += got.len() as u64;
        for m in &plan.moves[r.moves.clone()] {
            let at = (m.from.pack_offset - r.range.start) as usize;
            out.extend_from_slice(&got[at..at + m.from.len as usize]);
        }
    }
    assert_eq!(out.len() as u64, plan.bytes, "the moves fill the new pack");
    Ok((out, read))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn ext(pack: &str, pack_offset: u64, file_offset: u64, len: u64) -> Extent {
        Extent { pack: pack.into(), pack_offset, file_offset, len }
    }

    fn files(list: &[(&str, Vec<Extent>)]) -> BTreeMap<String, FileEntry> {
        list.iter()
            .map(|(p, e)| {
                let size = e.iter().map(|e| e.file_offset + e.len).max().unwrap_or(0);
                (p.to_string(), FileEntry { size, extents: e.clone(), local: None })
            })
            .collect()
    }

    fn sizes(list: &[(&str, u64)]) -> BTreeMap<String, u64> {
        list.iter().map(|(p, s)| (p.to_string(), *s)).collect()
    }

    #[test]
    fn only_mostly_dead_packs_with_enough_dead_bytes_are_chosen_emptiest_first() {
        // p1: 8 MiB, 1 MiB live (12%); p2: 8 MiB, 3 MiB live (37%); p3: 8 MiB,
        // 5 MiB live (62%); p4: 1 MiB, 0.25 MiB live (dead under the minimum);
        // p5: live but of unknown size.
        let f = files(&[
            ("a", vec![ext("p1", 0, 0, MIB), ext("p2", 0, MIB, 3 * MIB), ext("p3", 0, 4 * MIB, 5 * MIB)]),
            ("b", vec![ext("p4", 0, 0, MIB / 4), ext("p5", 0, MIB / 4, 10)]),
        ]);
        let s = sizes(&[("p1", 8 * MIB), ("p2", 8 * MIB), ("p3", 8 * MIB), ("p4", MIB)]);
        let p = plan(f.iter(), &s).unwrap();
        assert_eq!(p.packs, vec!["p1", "p2"]);
        assert_eq!(p.bytes, 4 * MIB);
        assert_eq!(p.paths(), ["a"].into());
        assert!(plan(f.iter(), &sizes(&[("p3", 8 * MIB), ("p4", MIB)])).is_none(), "nothing qualifies");
        let half = files(&[("a", vec![ext("p1", 0, 0, 4 * MIB)])]);
        assert!(plan(half.iter(), &sizes(&[("p1", 8 * MIB)])).is_none(), "exactly half live stays");
    }

    #[test]
    fn a_step_moves_at_most_its_bound_taking_the_emptiest_that_fit() {
        // Three 64 MiB packs: 30 MiB, 20 MiB and 10 MiB live; 32 MiB a step.
        let f = files(&[(
            "a",
            vec![ext("p1", 0, 0, 30 * MIB), ext("p2", 0, 30 * MIB, 20 * MIB), ext("p3", 0, 50 * MIB, 10 * MIB)],
        )]);
        let s = sizes(&[("p1", 64 * MIB), ("p2", 64 * MIB), ("p3", 64 * MIB)]);
        let p = plan(f.iter(), &s).unwrap();
        assert_eq!((p.packs.clone(), p.bytes), (vec!["p2".to_string(), "p3".to_string()], 30 * MIB));
        assert!(p.bytes <= MAX_COMPACT_BYTES);
        // The next step (p2 and p3 rewritten into a full pack) takes p1.
        let after: Vec<Extent> = p.rewrite("a", &f["a"], "new");
        let f2 = files(&[("a", after)]);
        let s2 = sizes(&[("p1", 64 * MIB), ("new", 30 * MIB)]);
        assert_eq!(plan(f2.iter(), &s2).unwrap().packs, vec!["p1"]);
    }

    #[test]
    fn live_pieces_move_back_to_back_and_near_ones_share_a_read() {
        // Pack p (4 MiB) holds a's 0..100 at 0, b's bytes at 1000 and at 3
        // MiB (far: its own read); q (2 MiB) holds c's 50 bytes. a's second
        // extent is in a pack that stays.
        let far = 3 * MIB;
        let f = files(&[
            ("a", vec![ext("p", 0, 0, 100), ext("keep", 0, 100, 10)]),
            ("b", vec![ext("p", far, 0, 20), ext("p", 1000, 20, 30)]),
            ("c", vec![ext("q", 7, 0, 50)]),
        ]);
        let s = sizes(&[("p", 4 * MIB), ("q", 2 * MIB), ("keep", 10)]);
        let p = plan(f.iter(), &s).unwrap();
        assert_eq!(p.packs, vec!["p", "q"]);
        let moved: Vec<(&str, u64, u64)> =
            p.moves.iter().map(|m| (m.path.as_str(), m.from.pack_offset, m.to)).collect();
        assert_eq!(moved, vec![("a", 0, 0), ("b", 1000, 100), ("b", far, 130), ("c", 7, 150)]);
        assert_eq!(p.bytes, 200);
        let reads: Vec<(&str, Range<u64>, Range<usize>)> =
            p.reads.iter().map(|r| (r.pack.as_str(), r.range.clone(), r.moves.clone())).collect();
        assert_eq!(reads, vec![("p", 0..1030, 0..2), ("p", far..far + 20, 2..3), ("q", 7..57, 3..4)]);
        assert_eq!(p.rewrite("a", &f["a"], "n"), vec![ext("n", 0, 0, 100), ext("keep", 0, 100, 10)]);
        assert_eq!(p.rewrite("b", &f["b"], "n"), vec![ext("n", 130, 0, 20), ext("n", 100, 20, 30)]);
        assert_eq!(p.rewrite("c", &f["c"], "n"), vec![ext("n", 150, 0, 50)]);
        let untouched = FileEntry { size: 10, extents: vec![ext("keep", 0, 0, 10)], local: None };
        assert_eq!(p.rewrite("d", &untouched, "n"), untouched.extents, "a file not moved keeps its extents");
    }

    #[test]
    fn overwritten_bytes_are_dead_and_stay_behind() {
        // a's 0..2 MiB in p, its first MiB overwritten later by r: only the
        // second MiB of p is live, and only it moves.
        let f = files(&[("a", vec![ext("p", 0, 0, 2 * MIB), ext("r", 0, 0, MIB)])]);
        let mut resolved = f.clone();
        resolved.get_mut("a").unwrap().extents = Resolved::new(&f["a"].extents).pieces().cloned().collect();
        let p = plan(resolved.iter(), &sizes(&[("p", 4 * MIB), ("r", MIB)])).unwrap();
        assert_eq!(p.packs, vec!["p"]);
        assert_eq!(p.moves.iter().map(|m| m.from.clone()).collect::<Vec<_>>(), vec![ext("p", MIB, MIB, MIB)]);
        assert_eq!(p.rewrite("a", &f["a"], "n"), vec![ext("r", 0, 0, MIB), ext("n", 0, MIB, MIB)]);
    }
}
