//! What a shard's streams' own files hold (the `live` disk-usage metric),
//! kept as streams change instead of walked on every metrics request: a
//! walk over a million streams took the shard tens of milliseconds, which
//! every request on it waited behind.
//!
//! [`super::Streams`], through which every change to a stream goes, takes
//! a stream out of the sum before it changes ([`FileSum::unsum`]) and
//! names the streams that come in ([`FileSum::added`]); the flush puts
//! back the streams whose tails it stored ([`FileSum::settle`]), and an
//! ask sums the rest as they are now, and only those. Past
//! [`UNSUMMED_MAX`] of them the sum is forgotten and the next ask walks
//! every stream once, so the set stays small whatever happens between
//! asks (a set emptied by a flush gives its memory back).

use super::Entry;
use crate::handles::HandleSet;
use crate::tuning::UNSUMMED_MAX;

/// Room an emptied set keeps (a set that held a burst gives the rest back).
const UNSUMMED_KEPT: usize = 1024;

/// What stream `e`'s own files hold: its data past what retention punched
/// away, and its whole index; a bundled stream, its whole extent (nothing
/// is punched there).
pub fn held_in_files(e: &Entry) -> u64 {
    let b = &e.state.body;
    if b.bundle.is_some() {
        return b.extent_len();
    }
    let own = b.stored - b.base;
    let punched = e.punched().0.saturating_sub(b.base).min(own);
    own - punched + b.index_len
}

/// The sum over the streams not in `unsummed`, as they were when they
/// were last summed (None: unknown, the next ask walks them all).
pub struct FileSum {
    files: Option<u64>,
    /// Streams changed or added since they were last summed.
    unsummed: HandleSet,
}

impl Default for FileSum {
    /// The sum over no streams.
    fn default() -> FileSum {
        FileSum { files: Some(0), unsummed: HandleSet::default() }
    }
}

impl FileSum {
    /// A sum of `files` over every stream ([`held_in_files`], summed by
    /// the caller's own walk).
    pub fn summed(files: u64) -> FileSum {
        FileSum { files: Some(files), unsummed: HandleSet::default() }
    }

    /// Takes `e` out of the sum, before it changes, until the next ask.
    pub fn unsum(&mut self, e: &Entry) {
        if let Some(files) = &mut self.files {
            if self.unsummed.insert(e.state.handle) {
                *files -= held_in_files(e);
                self.bound();
            }
        }
    }

    /// A stream with `handle` came in: summed at the next ask.
    pub fn added(&mut self, handle: u64) {
        if self.files.is_some() {
            self.unsummed.insert(handle);
            self.bound();
        }
    }

    /// Puts `e` back into the sum, as it is now (it changed since it was
    /// taken out; it may change again only through [`FileSum::unsum`]).
    pub fn settle(&mut self, e: &Entry) {
        if let Some(files) = &mut self.files {
            if self.unsummed.remove(&e.state.handle) {
                *files += held_in_files(e);
            }
            if self.unsummed.is_empty() && self.unsummed.capacity() > UNSUMMED_KEPT {
                self.unsummed = HandleSet::default();
            }
        }
    }

    /// Every stream may have changed: the next ask walks them all.
    pub fn forget(&mut self) {
        self.files = None;
        self.unsummed = HandleSet::default();
    }

    fn bound(&mut self) {
        if self.unsummed.len() > UNSUMMED_MAX {
            self.forget();
        }
    }

    /// The sum now: the streams changed since the last ask summed as they
    /// are (`now` finds a live stream by handle), or, when the sum is
    /// unknown, `all` of them.
    pub fn total<'a>(&mut self, now: impl Fn(u64) -> Option<&'a Entry>, all: impl Iterator<Item = &'a Entry>) -> u64 {
        let files = match self.files {
            Some(files) => files + self.changed(now),
            None => all.map(held_in_files).sum(),
        };
        self.unsummed.clear();
        self.files = Some(files);
        files
    }

    /// Asserts the sum is what a walk over `all` finds (the flush's checks
    /// in debug builds, at every capture).
    #[cfg(debug_assertions)]
    pub fn check<'a>(&self, now: impl Fn(u64) -> Option<&'a Entry>, all: impl Iterator<Item = &'a Entry>) {
        if let Some(files) = self.files {
            let walked: u64 = all.map(held_in_files).sum();
            assert_eq!(files + self.changed(now), walked, "the files' sum strayed from the streams");
        }
    }

    /// What the streams changed since the last ask hold now.
    fn changed<'a>(&self, now: impl Fn(u64) -> Option<&'a Entry>) -> u64 {
        self.unsummed.iter().filter_map(|&h| now(h)).map(held_in_files).sum()
    }

    /// Whether the sum is known (tests).
    #[cfg(test)]
    pub fn known(&self) -> bool {
        self.files.is_some()
    }
}
