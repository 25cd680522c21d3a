//! Hashing for tables keyed by stream handle. Handles are assigned by the
//! shard in sequence, never chosen by a client, so a table of them needs
//! no defence against crafted keys (SipHash's job, and most of a lookup's
//! cost here): a multiply by an odd constant spreads sequential handles
//! over every bucket and mixes the top bits the table's tags come from.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Fibonacci hashing's multiplier: 2^64 divided by the golden ratio, odd.
const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;

/// Hashes one `u64` handle (see the module header).
#[derive(Default, Clone, Copy)]
pub struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only whole handles are hashed here; any other key still hashes
        // every byte.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, handle: u64) {
        self.0 = (self.0 ^ handle).wrapping_mul(SPREAD);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by stream handle.
pub type HandleMap<V> = HashMap<u64, V, BuildHasherDefault<HandleHasher>>;
/// A set of stream handles.
pub type HandleSet = HashSet<u64, BuildHasherDefault<HandleHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// Sequential handles land in distinct buckets of a table their size
    /// (the low bits) and differ in their top 7 bits (the tags) often.
    #[test]
    fn sequential_handles_spread() {
        let build = BuildHasherDefault::<HandleHasher>::default();
        let hashes: Vec<u64> = (1000..1000 + 1024u64).map(|h| build.hash_one(h)).collect();
        let buckets: HashSet<u64> = hashes.iter().map(|h| h & 1023).collect();
        assert_eq!(buckets.len(), 1024, "one handle per bucket");
        let tags: HashSet<u64> = hashes.iter().map(|h| h >> 57).collect();
        assert!(tags.len() > 100, "{} distinct tags of 128", tags.len());
    }
}
