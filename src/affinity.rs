//! Which shard a connection belongs on. A request for a stream another
//! shard owns is forwarded over the mesh: a round trip between executors
//! per request. A connection whose last [`MOVE_AFTER`] requests all went
//! to one other shard moves there instead (one handoff of its socket), so
//! a client that writes one stream per connection is served where the
//! stream lives. A pool rotating over streams of every shard almost never
//! qualifies (the chance is 1 in 2^8 per request on two shards), so it
//! does not bounce between shards.

use crate::edge_limits::MOVE_AFTER;

/// The run of requests a connection sent to one other shard.
#[derive(Default)]
pub struct Affinity {
    run: Option<(usize, u32)>,
}

impl Affinity {
    /// Notes a request owned by `owner` (`None`: served here); true when the
    /// connection should move to `owner` before serving it.
    pub fn moves_to(&mut self, owner: Option<usize>) -> bool {
        let Some(o) = owner else {
            self.run = None;
            return false;
        };
        let n = match self.run {
            Some((prev, n)) if prev == o => n + 1,
            _ => 1,
        };
        self.run = Some((o, n));
        n >= MOVE_AFTER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_only_after_a_run_to_one_shard() {
        let mut a = Affinity::default();
        for _ in 1..MOVE_AFTER {
            assert!(!a.moves_to(Some(1)));
        }
        assert!(a.moves_to(Some(1)));
        let mut a = Affinity::default();
        for i in 0..100 {
            // A local request or another owner starts the run again.
            let owner = if i % 5 == 4 { None } else { Some(1 + i % 2) };
            assert!(!a.moves_to(owner));
        }
    }
}
