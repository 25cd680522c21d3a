//! Injected storage failures, for the simulation: which of the store's
//! file operations ([`super::Storage`]) fail, and how.
//!
//! A plan is seeded: each kind of operation fails with its own probability
//! (per mille), and single operations can be failed explicitly ("the Nth
//! write fails with ENOSPC"). A failure is what the real call reports:
//! an errno from the kinds that call can return, or, for a write, a short
//! count after part of the bytes reached the file, or ENOSPC after part
//! of them did (after TigerBeetle's `src/testing/storage.zig`).

use std::sync::Mutex;

/// A kind of file operation the store makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Opening or creating a file.
    Open,
    Read,
    Write,
    /// A file's size (fstat, stat).
    Size,
    /// Cutting a file back (ftruncate).
    Truncate,
    /// Giving a range back (fallocate punch hole).
    Punch,
    /// fdatasync of a file, fsync of a directory, syncfs of the file system.
    Sync,
    Unlink,
    Rename,
    /// Listing a directory, creating one.
    Dir,
    /// Free space of the file system (statvfs).
    Statvfs,
}

impl Op {
    pub const ALL: [Op; 11] = [
        Op::Open,
        Op::Read,
        Op::Write,
        Op::Size,
        Op::Truncate,
        Op::Punch,
        Op::Sync,
        Op::Unlink,
        Op::Rename,
        Op::Dir,
        Op::Statvfs,
    ];

    /// The errors the real call can return that the simulation injects.
    fn errnos(self) -> &'static [i32] {
        match self {
            Op::Open => &[libc::EIO, libc::ENOSPC, libc::EMFILE],
            Op::Write | Op::Sync | Op::Rename | Op::Punch => &[libc::EIO, libc::ENOSPC],
            Op::Unlink => &[libc::EIO, libc::EACCES],
            Op::Dir => &[libc::EIO, libc::EMFILE],
            Op::Read | Op::Size | Op::Truncate | Op::Statvfs => &[libc::EIO],
        }
    }
}

/// What one operation does instead of succeeding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Fails with this errno, changing nothing (a write: see [`Fault::Torn`]).
    Errno(i32),
    /// A write stores only the first `n` bytes and returns `n`.
    Short(usize),
    /// A write stores only the first `n` bytes, then fails with ENOSPC.
    Torn(usize),
}

struct Plan {
    /// splitmix64 state.
    rng: u64,
    /// Probability per operation kind, per mille (index: [`Op::ALL`]).
    per_mille: [u64; Op::ALL.len()],
    /// Operations of each kind so far.
    seen: [u64; Op::ALL.len()],
    /// Explicit failures: (kind, ordinal of the operation of that kind, errno).
    planned: Vec<(Op, u64, i32)>,
    /// Failures injected so far, by kind.
    injected: [u64; Op::ALL.len()],
}

/// A seeded fault plan, shared by the storage of every shard using it.
pub struct Faults(Mutex<Plan>);

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults").field("injected", &self.injected()).finish()
    }
}

fn slot(op: Op) -> usize {
    Op::ALL.iter().position(|&o| o == op).expect("every op is listed")
}

impl Plan {
    fn next(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

impl Faults {
    /// A plan that injects nothing yet.
    pub fn new(seed: u64) -> Faults {
        Faults(Mutex::new(Plan {
            rng: seed,
            per_mille: [0; Op::ALL.len()],
            seen: [0; Op::ALL.len()],
            planned: Vec::new(),
            injected: [0; Op::ALL.len()],
        }))
    }

    fn plan(&self) -> std::sync::MutexGuard<'_, Plan> {
        self.0.lock().expect("the fault plan is never poisoned")
    }

    /// Operations of kind `op` fail with probability `per_mille` / 1000.
    pub fn set(&self, op: Op, per_mille: u64) {
        assert!(per_mille <= 1000, "a probability per mille");
        self.plan().per_mille[slot(op)] = per_mille;
    }

    /// No more failures, random or planned.
    pub fn off(&self) {
        let mut p = self.plan();
        p.per_mille = [0; Op::ALL.len()];
        p.planned.clear();
    }

    /// The `nth` operation of kind `op` from now (0: the next) fails with `errno`.
    pub fn fail_nth(&self, op: Op, nth: u64, errno: i32) {
        let mut p = self.plan();
        let at = p.seen[slot(op)] + nth;
        p.planned.push((op, at, errno));
    }

    /// Operations of kind `op` so far, failed or not.
    pub fn seen(&self, op: Op) -> u64 {
        self.plan().seen[slot(op)]
    }

    /// Failures injected so far, by kind.
    pub fn injected(&self) -> Vec<(Op, u64)> {
        let p = self.plan();
        Op::ALL.iter().map(|&op| (op, p.injected[slot(op)])).collect()
    }

    /// Decides the fate of one operation of kind `op` that would move `len`
    /// bytes (0 when it moves none).
    pub(crate) fn roll(&self, op: Op, len: usize) -> Option<Fault> {
        let mut p = self.plan();
        let i = slot(op);
        let ordinal = p.seen[i];
        p.seen[i] += 1;
        let planned = p.planned.iter().position(|&(o, at, _)| o == op && at == ordinal);
        let errno = match planned {
            Some(k) => p.planned.swap_remove(k).2,
            None if p.next() % 1000 < p.per_mille[i] => {
                let errnos = op.errnos();
                errnos[(p.next() % errnos.len() as u64) as usize]
            }
            None => return None,
        };
        p.injected[i] += 1;
        if op != Op::Write || len == 0 {
            return Some(Fault::Errno(errno));
        }
        let prefix = (p.next() % len as u64) as usize;
        Some(match (errno, p.next() % 2) {
            (libc::ENOSPC, _) => Fault::Torn(prefix),
            (_, 0) => Fault::Short(prefix),
            _ => Fault::Errno(errno),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An explicit failure hits exactly the Nth operation of its kind, once.
    #[test]
    fn the_nth_operation_fails_once() {
        let f = Faults::new(1);
        f.roll(Op::Unlink, 0);
        f.fail_nth(Op::Unlink, 2, libc::EACCES);
        let fates: Vec<_> = (0..5).map(|_| f.roll(Op::Unlink, 0)).collect();
        assert_eq!(fates, [None, None, Some(Fault::Errno(libc::EACCES)), None, None]);
        assert!(f.injected().contains(&(Op::Unlink, 1)));
    }

    /// Random failures follow the seed, stay within the call's errnos, and
    /// a failed write stores at most a strict prefix; `off` stops them all.
    #[test]
    fn random_failures_are_reproducible_and_plausible() {
        let run = |seed| {
            let f = Faults::new(seed);
            f.set(Op::Write, 500);
            f.set(Op::Open, 500);
            f.fail_nth(Op::Sync, 0, libc::EIO);
            let fates: Vec<_> = (0..200).map(|i| f.roll(if i % 2 == 0 { Op::Write } else { Op::Open }, 100)).collect();
            f.off();
            assert_eq!(f.roll(Op::Write, 100), None);
            assert_eq!(f.roll(Op::Sync, 0), None, "off drops planned failures too");
            fates
        };
        let fates = run(7);
        assert_eq!(fates, run(7));
        assert_ne!(fates, run(8));
        for (i, fate) in fates.iter().enumerate() {
            match (i % 2, fate) {
                (_, None) => {}
                (0, Some(Fault::Short(n) | Fault::Torn(n))) => assert!(*n < 100),
                (0, Some(Fault::Errno(e))) => assert!(Op::Write.errnos().contains(e)),
                (_, Some(Fault::Errno(e))) => assert!(Op::Open.errnos().contains(e)),
                (_, other) => panic!("{other:?} for an open"),
            }
        }
        assert!(fates.iter().any(|f| matches!(f, Some(Fault::Torn(_)))));
        assert!(fates.iter().any(|f| matches!(f, Some(Fault::Short(_)))));
    }
}
