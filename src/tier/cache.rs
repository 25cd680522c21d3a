//! The bounded cache of tiered bytes read back from the object store
//! (`--cache-bytes`): values with a size, the least recently used dropped
//! first once the sizes add up past the bound.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

pub struct Lru<K, V> {
    bound: u64,
    held: u64,
    clock: u64,
    /// Value, size and last use.
    entries: HashMap<K, (V, u64, u64)>,
    /// Keys by last use.
    order: BTreeMap<u64, K>,
}

impl<K: Hash + Eq + Clone, V: Clone> Lru<K, V> {
    pub fn new(bound: u64) -> Lru<K, V> {
        Lru { bound, held: 0, clock: 0, entries: HashMap::new(), order: BTreeMap::new() }
    }

    /// The value of `k`, now the most recently used.
    pub fn get(&mut self, k: &K) -> Option<V> {
        self.clock += 1;
        let (v, _, used) = self.entries.get_mut(k)?;
        let key = self.order.remove(used).expect("every entry is ordered");
        *used = self.clock;
        self.order.insert(self.clock, key);
        Some(v.clone())
    }

    /// Holds `v` (of `size` bytes) for `k`, dropping the least recently used
    /// until the bound holds; a value larger than the bound is not kept.
    pub fn insert(&mut self, k: K, v: V, size: u64) {
        if let Some((_, old, used)) = self.entries.remove(&k) {
            self.order.remove(&used);
            self.held -= old;
        }
        if size > self.bound {
            return;
        }
        self.clock += 1;
        self.held += size;
        self.order.insert(self.clock, k.clone());
        self.entries.insert(k, (v, size, self.clock));
        while self.held > self.bound {
            let (_, oldest) = self.order.pop_first().expect("bytes held: an entry");
            let (_, size, _) = self.entries.remove(&oldest).expect("every ordered key is an entry");
            self.held -= size;
        }
        assert_eq!(self.entries.len(), self.order.len());
    }

    /// Bytes held (at most the bound).
    pub fn held(&self) -> u64 {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_go_first_and_the_bound_holds() {
        let mut c = Lru::new(10);
        c.insert("a", 1, 4);
        c.insert("b", 2, 4);
        assert_eq!(c.get(&"a"), Some(1), "a is now the most recent");
        c.insert("c", 3, 4);
        assert_eq!((c.get(&"b"), c.get(&"a"), c.get(&"c")), (None, Some(1), Some(3)), "b was the oldest");
        assert_eq!(c.held(), 8);
        c.insert("a", 9, 2);
        assert_eq!((c.get(&"a"), c.held()), (Some(9), 6), "replacing counts the new size only");
        c.insert("big", 0, 11);
        assert_eq!((c.get(&"big"), c.held()), (None, 6), "larger than the bound: not kept, nothing dropped");
        c.insert("d", 4, 10);
        assert_eq!((c.get(&"a"), c.get(&"c"), c.get(&"d"), c.held()), (None, None, Some(4), 10));
    }
}
