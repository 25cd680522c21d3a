//! Constant-time comparison of token hashes: the time taken never depends on
//! where (or whether) two hashes differ, nor on which table entry matches.

/// Length of a SHA-256 digest.
pub const HASH_LEN: usize = 32;

/// Whether `a == b`, looking at every byte whatever the first difference.
pub fn ct_eq(a: &[u8; HASH_LEN], b: &[u8; HASH_LEN]) -> bool {
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    // Keeps the compiler from turning the fold into an early-exit compare.
    std::hint::black_box(diff) == 0
}

/// The index of `needle` in `hashes`, comparing against every entry (no
/// early exit on a match), so timing says nothing about the position.
pub fn ct_find<'a>(needle: &[u8; HASH_LEN], hashes: impl Iterator<Item = &'a [u8; HASH_LEN]>) -> Option<usize> {
    let mut found = None;
    for (i, h) in hashes.enumerate() {
        if ct_eq(needle, h) {
            found = Some(i);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_and_every_single_bit_difference() {
        let a: [u8; HASH_LEN] = std::array::from_fn(|i| (i * 37 + 11) as u8);
        assert!(ct_eq(&a, &a.clone()));
        // A difference in any bit of any byte, first or last, is seen.
        for byte in 0..HASH_LEN {
            for bit in 0..8 {
                let mut b = a;
                b[byte] ^= 1 << bit;
                assert!(!ct_eq(&a, &b), "byte {byte} bit {bit}");
            }
        }
        assert!(!ct_eq(&[0; HASH_LEN], &[0xff; HASH_LEN]));
    }

    #[test]
    fn find_visits_every_entry_whatever_matches() {
        let table: Vec<[u8; HASH_LEN]> = (0..5u8).map(|i| [i; HASH_LEN]).collect();
        for (i, h) in table.iter().enumerate() {
            let mut visited = 0;
            let found = ct_find(h, table.iter().inspect(|_| visited += 1));
            assert_eq!(found, Some(i));
            assert_eq!(visited, table.len(), "a match at {i} must not end the scan early");
        }
        let mut visited = 0;
        assert_eq!(ct_find(&[9; HASH_LEN], table.iter().inspect(|_| visited += 1)), None);
        assert_eq!(visited, table.len());
    }
}
