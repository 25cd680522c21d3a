//! Bundles: files that many small streams share, so a node of a million
//! small streams holds a few files per shard, not two per stream.
//!
//! A stream whose own index and data take at most
//! [`super::FlushConfig::bundle_max`] bytes keeps them in one extent of a
//! bundle (`shard-N/bundles/<no>.bundle`, see [`crate::core::body::BundleAt`])
//! instead of files of its own. A flush that adds to such a stream writes
//! it a new extent, whole (the old one's bytes read back, the new ones
//! after them), in the bundle being filled; once a stream outgrows the
//! limit, or is forked (forks on any shard read their ancestors' files),
//! the flush writes it files of its own, and it never comes back.
//!
//! Extents are written once and never change; a bundle only grows until
//! it reaches [`BUNDLE_FILE_BYTES`], then the next one is started. What a
//! bundle holds that no stream's extent is any more is dead: a bundle
//! with nothing live goes to the graveyard at the next capture (deleted
//! once a checkpoint that no longer names it is durable, as every stream
//! file is), and a bundle at most half live with [`BUNDLE_DEAD_FROM`]
//! dead bytes has its streams moved to the bundle being filled by the
//! next flush, one bundle at a time, so bundles hold at most about twice
//! what their streams store.
//!
//! Nothing here is persisted: the checkpoint records each stream's extent,
//! and a start rebuilds this from them ([`Bundles::joined`]) and starts a
//! new bundle after every one it finds.

use crate::core::body::BundleAt;
use crate::tuning::{BUNDLE_DEAD_FROM, BUNDLE_FILE_BYTES};
use std::collections::BTreeMap;
use std::num::NonZeroU32;

/// One bundle's bookkeeping.
#[derive(Debug, Default)]
struct Held {
    /// Where its next extent would go: what was written or reserved in it.
    size: u64,
    /// Bytes of the extents streams are in now.
    live: u64,
}

/// A shard's bundles (see the module header).
#[derive(Debug)]
pub struct Bundles {
    /// The largest extent a stream keeps in a bundle (0: none does).
    max: u32,
    /// The bundle being filled.
    current: Option<NonZeroU32>,
    /// The number the next new bundle takes.
    next_no: u32,
    held: BTreeMap<u32, Held>,
    /// Streams whose stored bytes the next flush moves: out of a bundle
    /// being compacted (`false`), or into files of their own (`true`).
    moving: crate::handles::HandleMap<bool>,
}

/// Where reservations stood at a capture, to go back to if its flush fails.
#[derive(Clone, Copy, Debug)]
pub struct Mark {
    current: Option<(NonZeroU32, u64)>,
    next_no: u32,
}

impl Bundles {
    /// No bundles yet; the first gets number `next_no` (at least 1).
    pub fn new(max: u32, next_no: u32) -> Bundles {
        let next_no = next_no.max(1);
        let mut b = Bundles { max: 0, current: None, next_no, held: BTreeMap::new(), moving: Default::default() };
        b.set_max(max);
        b
    }

    /// Sets the largest extent a stream keeps in a bundle (0: none).
    pub fn set_max(&mut self, max: u32) {
        assert!(u64::from(max) <= BUNDLE_FILE_BYTES, "an extent fits in a bundle");
        self.max = max;
    }

    /// Whether a stream whose own bytes will take `len` (index and data)
    /// keeps them in a bundle.
    pub fn fits(&self, len: u64) -> bool {
        len > 0 && len <= u64::from(self.max)
    }

    /// The bundles streams' extents are in, and where their last extent ends.
    pub fn in_use(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.held.iter().filter(|(_, h)| h.live > 0).map(|(no, h)| (*no, h.size))
    }

    /// An extent of `len` bytes in the bundle being filled, starting the
    /// next bundle when this one has no room.
    pub fn reserve(&mut self, len: u64) -> BundleAt {
        assert!(self.fits(len), "an extent of {len} bytes is bundled");
        let room = |no: &NonZeroU32, held: &BTreeMap<u32, Held>| held[&no.get()].size + len <= BUNDLE_FILE_BYTES;
        let no = match self.current {
            Some(no) if room(&no, &self.held) => no,
            _ => {
                let no = NonZeroU32::new(self.next_no).expect("bundle numbers start at 1");
                self.next_no = self.next_no.checked_add(1).expect("fewer than 2^32 bundles");
                self.held.insert(no.get(), Held::default());
                self.current = Some(no);
                no
            }
        };
        let h = self.held.get_mut(&no.get()).expect("the current bundle is held");
        let at = u32::try_from(h.size).expect("a bundle is smaller than 4 GiB");
        h.size += len;
        BundleAt { no, at }
    }

    /// Where reservations stand now.
    pub fn mark(&self) -> Mark {
        let current = self.current.map(|no| (no, self.held[&no.get()].size));
        Mark { current, next_no: self.next_no }
    }

    /// A flush failed: its reservations since `m` are given up. Bundles
    /// it started hold nothing live (their files, if written, are dead);
    /// they are returned, for the graveyard.
    pub fn rewind(&mut self, m: Mark) -> Vec<u32> {
        let started: Vec<u32> = (m.next_no..self.next_no).collect();
        for no in &started {
            let h = self.held.remove(no).expect("a bundle started since the mark is held");
            assert_eq!(h.live, 0, "no stream settled in bundle {no} before its flush failed");
        }
        self.current = m.current.map(|(no, _)| no);
        if let Some((no, size)) = m.current {
            self.held.get_mut(&no.get()).expect("the marked bundle is held").size = size;
        }
        // Their numbers are not taken again: the graveyard deletes them.
        started
    }

    /// A stream's stored bytes are now in extent `at`, `len` bytes (a
    /// flush stored them there, or a start found them there).
    pub fn joined(&mut self, at: BundleAt, len: u64) {
        let h = self.held.entry(at.no.get()).or_default();
        h.live += len;
        h.size = h.size.max(u64::from(at.at) + len);
        // Streams found at a start fill no bundle: new extents go to a new one.
        self.next_no = self.next_no.max(at.no.get() + 1);
    }

    /// A stream's `len` stored bytes left extent `at` (moved, or deleted).
    pub fn left(&mut self, at: BundleAt, len: u64) {
        let h = self.held.get_mut(&at.no.get()).expect("an extent streams are in is held");
        h.live = h.live.checked_sub(len).expect("a bundle's live bytes are its extents'");
    }

    /// A bundle file found at a start that no stream's extent is in: known
    /// until the next capture hands it to the graveyard; no new bundle
    /// takes its number.
    pub fn found(&mut self, no: u32) {
        self.held.entry(no).or_default();
        self.next_no = self.next_no.max(no + 1);
    }

    /// At a capture (no flush in progress, so no extent is reserved and
    /// not yet stored): the bundles nothing lives in any more, except the
    /// one being filled, forgotten here and returned for the graveyard.
    pub fn take_emptied(&mut self) -> Vec<u32> {
        let current = self.current.map(NonZeroU32::get);
        let emptied: Vec<u32> =
            self.held.iter().filter(|(no, h)| h.live == 0 && Some(**no) != current).map(|(no, _)| *no).collect();
        for no in &emptied {
            self.held.remove(no);
        }
        emptied
    }

    /// The bundle most worth compacting, if one is (at most half live,
    /// with [`BUNDLE_DEAD_FROM`] dead bytes or more; not the one being
    /// filled), and how many bytes of it to read ([`Bundles::compact`]).
    pub fn worth_compacting(&self) -> Option<(u32, u64)> {
        let current = self.current.map(NonZeroU32::get);
        let worth = |(no, h): &(&u32, &Held)| {
            Some(**no) != current && h.live > 0 && h.size - h.live >= BUNDLE_DEAD_FROM && h.live * 2 <= h.size
        };
        self.held.iter().filter(worth).max_by_key(|(_, h)| h.size - h.live).map(|(no, h)| (*no, h.size))
    }

    /// The streams whose extents `bytes`, bundle `no` from its start, hold
    /// (extent by extent, by their headers; `is_at` says whether a
    /// stream's stored bytes are at that extent now): the next flush
    /// moves them to the bundle being filled, and the emptied bundle goes.
    /// Reading stops at a header that does not fit (the unwritten end).
    pub fn compact(&mut self, no: u32, bytes: &[u8], is_at: impl Fn(u64, BundleAt) -> bool) -> Vec<u64> {
        let Some(no) = NonZeroU32::new(no) else { return Vec::new() };
        let mut moving = Vec::new();
        let mut pos = 0;
        while let Some(header) = bytes.get(pos..pos + BundleAt::HEADER as usize) {
            let (handle, len) = BundleAt::parse_header(header);
            if len < BundleAt::HEADER || pos as u64 + len > bytes.len() as u64 {
                break;
            }
            let at = BundleAt { no, at: u32::try_from(pos).expect("a bundle is smaller than 4 GiB") };
            if is_at(handle, at) {
                self.moving.entry(handle).or_insert(false);
                moving.push(handle);
            }
            pos += len as usize;
        }
        moving
    }

    /// Stream `handle` went: no move is left for it.
    pub fn gone(&mut self, handle: u64) {
        if !self.moving.is_empty() {
            self.moving.remove(&handle);
        }
    }

    /// Stream `handle` gets files of its own at the next flush (a fork
    /// will read them).
    pub fn leave_for_own_files(&mut self, handle: u64) {
        self.moving.insert(handle, true);
    }

    /// At a pass's visit of stream `handle`: whether its stored bytes move
    /// (`Some`), and whether into files of its own (`Some(true)`).
    pub fn take_move(&mut self, handle: u64) -> Option<bool> {
        match self.moving.is_empty() {
            true => None,
            false => self.moving.remove(&handle),
        }
    }

    /// Bytes of every bundle, and of the extents streams are in.
    pub fn bytes(&self) -> (u64, u64) {
        self.held.values().fold((0, 0), |(size, live), h| (size + h.size, live + h.live))
    }

    /// The live bytes of bundle `no`.
    #[cfg(test)]
    pub fn live(&self, no: u32) -> u64 {
        self.held.get(&no).map_or(0, |h| h.live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(no: u32, at: u32) -> BundleAt {
        BundleAt { no: NonZeroU32::new(no).unwrap(), at }
    }

    #[test]
    fn extents_follow_each_other_and_a_full_bundle_starts_the_next() {
        let mut b = Bundles::new(4096, 1);
        assert!(!b.fits(0) && b.fits(4096) && !b.fits(4097));
        assert_eq!(b.reserve(100), at(1, 0));
        assert_eq!(b.reserve(50), at(1, 100));
        let mut pos = 150;
        while pos + 4096 <= BUNDLE_FILE_BYTES {
            assert_eq!(b.reserve(4096), at(1, pos as u32));
            pos += 4096;
        }
        assert_eq!(b.reserve(4096), at(2, 0), "no room left in bundle 1");
    }

    #[test]
    fn a_failed_flush_gives_its_reservations_back() {
        let mut b = Bundles::new(4096, 7);
        b.reserve(10);
        let m = b.mark();
        b.reserve(10);
        assert!(b.rewind(m).is_empty());
        assert_eq!(b.reserve(10), at(7, 10), "the given-up extent is reserved again");
        let m = b.mark();
        for _ in 0..=BUNDLE_FILE_BYTES / 4096 {
            b.reserve(4096);
        }
        assert_eq!(b.rewind(m), vec![8], "the bundle started since is dead");
        assert_eq!(b.reserve(10), at(7, 20));
        for _ in 0..=BUNDLE_FILE_BYTES / 4096 {
            b.reserve(4096);
        }
        assert_eq!(b.reserve(10).no.get(), 9, "a dead bundle's number is never taken again");
    }

    #[test]
    fn emptied_bundles_go_and_half_dead_ones_are_compacted() {
        let mut b = Bundles::new(4096, 1);
        // A start finds streams in bundles 3 and 5 and a file of 6 nobody is in.
        b.joined(at(3, 0), 2000);
        b.joined(at(5, 0), 4096);
        b.found(6);
        assert_eq!(b.reserve(100), at(7, 0), "new extents go to a new bundle");
        assert_eq!(b.take_emptied(), vec![6]);
        b.left(at(3, 0), 2000);
        assert_eq!(b.take_emptied(), vec![3]);
        assert_eq!(b.worth_compacting(), None);
        // Bundle 5 grows to about 1 MiB, of which one extent stays live.
        let mut bytes = BundleAt::header(11, 4096).to_vec();
        bytes.resize(4096, 0);
        for i in 0..(BUNDLE_DEAD_FROM / 4096) {
            let pos = 4096 * (i as u32 + 1);
            b.joined(at(5, pos), 4096);
            b.left(at(5, pos), 4096);
            bytes.extend_from_slice(&BundleAt::header(100 + i, 4096));
            bytes.resize(bytes.len() + 4096 - BundleAt::HEADER as usize, 0);
        }
        let size = BUNDLE_DEAD_FROM + 4096;
        assert_eq!(b.worth_compacting(), Some((5, size)));
        // What the file holds past its extents (a torn write) is not read.
        bytes.extend_from_slice(&BundleAt::header(99, 1 << 30));
        let moving = b.compact(5, &bytes, |h, a| h == 11 && a == at(5, 0));
        assert_eq!(moving, vec![11]);
        assert_eq!(b.take_move(11), Some(false));
        assert_eq!(b.take_move(11), None);
        b.leave_for_own_files(12);
        b.gone(12);
        assert_eq!(b.take_move(12), None, "a stream gone moves nowhere");
        b.leave_for_own_files(12);
        assert_eq!(b.take_move(12), Some(true));
        assert_eq!(b.live(5), 4096);
    }
}
