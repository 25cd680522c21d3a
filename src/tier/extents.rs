//! Where a file's bytes are in the packs: a manifest entry's extents (later
//! ones overwrite earlier ones) resolved into pieces that do not overlap,
//! sorted by file offset, and the pieces of a byte range of the file.

use super::layout::Extent;
use std::collections::BTreeMap;

/// A file's bytes in the packs, by file offset; no two overlap.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Resolved(BTreeMap<u64, Extent>);

impl Resolved {
    /// Resolves `extents` in order: each overwrites what it covers.
    pub fn new(extents: &[Extent]) -> Resolved {
        let mut r = Resolved::default();
        for e in extents.iter().filter(|e| e.len > 0) {
            r.cut(e.file_offset, e.file_offset + e.len);
            r.0.insert(e.file_offset, e.clone());
        }
        r
    }

    /// Removes `[from, to)`, keeping the parts of pieces outside it.
    fn cut(&mut self, from: u64, to: u64) {
        let hit: Vec<u64> =
            self.0.range(..to).rev().take_while(|(_, e)| e.file_offset + e.len > from).map(|(k, _)| *k).collect();
        for k in hit {
            let e = self.0.remove(&k).expect("listed");
            if e.file_offset < from {
                self.0.insert(e.file_offset, slice(&e, e.file_offset, from));
            }
            if e.file_offset + e.len > to {
                self.0.insert(to, slice(&e, to, e.file_offset + e.len));
            }
        }
    }

    /// The pieces holding `[from, to)`, in order; `None` when a byte of it
    /// is in no piece.
    pub fn range(&self, from: u64, to: u64) -> Option<Vec<Extent>> {
        let mut out = Vec::new();
        let mut at = from;
        let start = self.0.range(..=from).next_back().map_or(from, |(k, _)| *k);
        for e in self.0.range(start..to).map(|(_, e)| e) {
            let end = e.file_offset + e.len;
            if end <= at {
                continue;
            }
            if e.file_offset > at {
                return None;
            }
            out.push(slice(e, at, end.min(to)));
            at = end.min(to);
            if at == to {
                break;
            }
        }
        (at >= to).then_some(out)
    }

    /// The pieces overlapping `[from, to)`, cut to it, in order (gaps left out).
    pub fn overlapping(&self, from: u64, to: u64) -> Vec<Extent> {
        if from >= to {
            return Vec::new();
        }
        let start = self.0.range(..=from).next_back().map_or(from, |(k, _)| *k);
        let hit = self.0.range(start..to).map(|(_, e)| e).filter(|e| e.file_offset + e.len > from);
        hit.map(|e| slice(e, e.file_offset.max(from), (e.file_offset + e.len).min(to))).collect()
    }

    /// Every piece, by file offset.
    pub fn pieces(&self) -> impl Iterator<Item = &Extent> {
        self.0.values()
    }
}

/// The part `[from, to)` of `e` (within it).
fn slice(e: &Extent, from: u64, to: u64) -> Extent {
    assert!(e.file_offset <= from && from < to && to <= e.file_offset + e.len, "a slice inside the extent");
    Extent {
        pack: e.pack.clone(),
        pack_offset: e.pack_offset + (from - e.file_offset),
        file_offset: from,
        len: to - from,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(pack: &str, pack_offset: u64, file_offset: u64, len: u64) -> Extent {
        Extent { pack: pack.into(), pack_offset, file_offset, len }
    }

    #[test]
    fn later_extents_win_and_ranges_split_pieces() {
        // a: file 0..100 at a:0; b rewrites 40..60 at b:1000; c appends 100..150.
        let r = Resolved::new(&[ext("a", 0, 0, 100), ext("b", 1000, 40, 20), ext("c", 5, 100, 50)]);
        let pieces: Vec<_> = r.pieces().cloned().collect();
        assert_eq!(
            pieces,
            vec![ext("a", 0, 0, 40), ext("b", 1000, 40, 20), ext("a", 60, 60, 40), ext("c", 5, 100, 50)]
        );
        assert_eq!(r.range(50, 110).unwrap(), vec![ext("b", 1010, 50, 10), ext("a", 60, 60, 40), ext("c", 5, 100, 10)]);
        assert_eq!(r.range(0, 10).unwrap(), vec![ext("a", 0, 0, 10)]);
        assert_eq!(r.range(140, 151), None, "past the end");
        assert_eq!(r.overlapping(140, 151), vec![ext("c", 45, 140, 10)], "up to the end");
        assert_eq!(r.overlapping(30, 45), vec![ext("a", 30, 30, 10), ext("b", 1000, 40, 5)]);
        let holed = Resolved::new(&[ext("a", 0, 0, 10), ext("b", 0, 20, 10)]);
        assert_eq!(holed.range(5, 25), None, "a gap");
        assert_eq!(holed.overlapping(5, 25), vec![ext("a", 5, 5, 5), ext("b", 0, 20, 5)], "gaps left out");
        assert_eq!(holed.overlapping(10, 20), vec![], "only a gap");
        assert_eq!(holed.overlapping(9, 9), vec![], "empty");
        let over = Resolved::new(&[ext("a", 0, 0, 10), ext("b", 0, 0, 30)]);
        assert_eq!(over.pieces().cloned().collect::<Vec<_>>(), vec![ext("b", 0, 0, 30)], "covered whole");
    }
}
