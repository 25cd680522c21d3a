//! A flush's pass over the streams it captured.
//!
//! The capture names the streams a flush has work for: those written since
//! the last capture (new bytes, a pending snapshot, a retention that moved)
//! and, when the flush gives space back, those whose retention is not all
//! given back. The pass visits each once: freezes its unflushed tail into a
//! [`Job`], takes its pending snapshot and the retained-away range to give
//! back ([`Punch`]).
//!
//! A burst of creates leaves a hundred thousand streams or more to one
//! capture, about a microsecond each (their entries are cold in the CPU
//! cache): visited at once, every request on the shard waited 100-155 ms.
//! So the pass runs a slice at a time between requests
//! ([`super::Store::pass_some`]), and still takes every stream as it was
//! at the capture: a stream changed before its slice came is visited first
//! ([`super::Streams`]), and visiting a stream nothing changed since the
//! capture finds what the capture would have found.

use super::bundles::Bundles;
use super::spares::Spares;
use super::Entry;
use crate::core::body::{BundleAt, Chunk};
use crate::core::index::IndexEnd;
use crate::core::stream::{Blob, Snapshot};
use crate::handles::HandleSet;
use crate::tuning::MIN_SPARE_TAIL;
use std::rc::Rc;

/// One stream's frozen chunk, where its data file starts, and where its
/// index ends before and after the chunk; where its stored bytes are
/// (`from`: a bundle extent, None for files of its own or nothing stored)
/// and where they go with the chunk (`to`: a new extent, or None for files
/// of its own; see [`super::bundles`]).
pub(crate) struct Job {
    pub handle: u64,
    pub origin: u64,
    pub index: IndexEnd,
    pub index_after: u64,
    pub chunk: Rc<Chunk>,
    pub from: Option<BundleAt>,
    pub to: Option<BundleAt>,
}

impl Job {
    /// The bytes of the stored index and data the job carries over from
    /// its old extent (after its header).
    pub fn carried_len(&self) -> u64 {
        self.index.len + (self.chunk.start - self.origin)
    }
}

/// Retained-away ranges to give back: bytes (own-file relative), and the
/// index pages before the one holding the first retained record.
#[derive(Clone, Copy)]
pub(crate) struct Punch {
    pub handle: u64,
    /// What was punched before, restored if the flush fails.
    pub from: (u64, u64),
    pub bytes: (u64, u64),
    pub record: u64,
}

/// The capture's pass, from the capture until every stream it named is
/// visited.
pub(crate) struct Pass {
    /// Streams not visited yet.
    pending: HandleSet,
    /// The flush gives space back: visits take the ranges to punch.
    punch: bool,
    /// Buffers the last large flush kept, for the large tails frozen now
    /// (none unless this capture is large too: `super::spares`); what no
    /// visit took goes back once the pass is done.
    pub spares: Spares,
    pub jobs: Vec<Job>,
    pub snapshots: Vec<(u64, Rc<Vec<u8>>)>,
    pub punches: Vec<Punch>,
    /// Visited streams, and whether their retention is still beyond what
    /// was given back (see `Store::punching`).
    pub punching: Vec<(u64, bool)>,
}

impl Pass {
    pub fn new(pending: HandleSet, punch: bool, spares: Spares) -> Pass {
        Pass {
            pending,
            punch,
            spares,
            jobs: Vec::new(),
            snapshots: Vec::new(),
            punches: Vec::new(),
            punching: Vec::new(),
        }
    }

    /// Whether the stream with `handle` waits for its visit.
    pub fn holds(&self, handle: u64) -> bool {
        self.pending.contains(&handle)
    }

    /// Up to `budget` streams still waiting for their visit.
    pub fn next(&self, budget: usize) -> Vec<u64> {
        self.pending.iter().take(budget).copied().collect()
    }

    pub fn done(&self) -> bool {
        self.pending.is_empty()
    }

    /// A stream named by the capture is gone: nothing left to give back.
    pub fn gone(&mut self, handle: u64) {
        assert!(self.pending.remove(&handle), "a stream is visited once");
        self.punching.push((handle, false));
    }

    /// Visits `e` as it was at the capture: freezes its unflushed tail into
    /// a job, with where its stored bytes go (`bundles`), takes its pending
    /// snapshot and, when the pass gives space back, the retained-away
    /// range it may give back now.
    pub fn visit(&mut self, e: &mut Entry, bundles: &mut Bundles) {
        let (mut done, next) = (e.punched(), e.punch_next());
        let s = &mut e.state;
        assert!(self.pending.remove(&s.handle), "a stream is visited once");
        if let Some(Snapshot { blob: Blob::Pending(b), .. }) = s.snapshot.as_deref() {
            self.snapshots.push((s.handle, b.clone()));
        }
        let (origin, index, from) = (s.body.base, s.body.index_end(), s.body.bundle);
        let moving = bundles.take_move(s.handle);
        if let Some(chunk) = s.body.freeze(moving.is_some() && from.is_some()) {
            if chunk.bytes.len() >= MIN_SPARE_TAIL {
                if let Some(room) = self.spares.take() {
                    s.body.give_room(room);
                }
            }
            // Bundled while small, never forked and never in files of its own.
            let len = s.body.extent_len_after_flush();
            let bundled = !s.body.has_own_files() && s.forks == 0 && moving != Some(true) && bundles.fits(len);
            let to = bundled.then(|| bundles.reserve(len));
            s.body.store_frozen_in(to);
            let index_after = s.body.index_len_after_flush();
            self.jobs.push(Job { handle: s.handle, origin, index, index_after, chunk, from, to });
        }
        // Retention is given back one capture after it moved, so a read
        // that resolved its start just before never meets a hole. A
        // bundled stream gives nothing back: its extent is small, and the
        // next one is written whole anyway.
        if s.body.bundle_after_flush().is_some() {
            done = (s.retained, s.first_message);
        }
        if self.punch && s.forks == 0 && next.0 > done.0 {
            let own = |v: u64, base: u64| v.max(base) - base;
            self.punches.push(Punch {
                handle: s.handle,
                from: done,
                bytes: (own(done.0, origin), own(next.0, origin)),
                record: next.1,
            });
            done = next;
        }
        let (handle, next) = (s.handle, (s.retained, s.first_message));
        e.set_punches(done, next);
        self.punching.push((handle, next.0 > done.0));
    }
}
