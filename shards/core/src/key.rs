//! A stream's name, `{bucket_id}/{stream_id}`, held in one allocation:
//! the bucket, a NUL, then the stream id. Neither id may hold a NUL (the
//! edge refuses them), so the split is unambiguous, and byte order of the
//! joined name is the order of (bucket, stream id): a bucket listing is a
//! range scan of the store's sorted map.
//!
//! The store holds every stream's name once, as an `Rc<StreamKey>` shared
//! by its map, its handle table and the stream's state (one allocation of
//! the name's length plus 16 bytes: a million names cost tens of MiB, not
//! the three allocations a pair of `String`s in an `Rc` took). Requests
//! and messages between shards carry a `Box<StreamKey>`, which is `Send`.

use std::fmt;
use std::rc::Rc;

/// The joined name (see the module header). Unsized, like `str`: held
/// behind `Rc`, `Box` or `&`.
#[derive(PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct StreamKey(str);

/// What separates the bucket from the stream id.
const SEPARATOR: char = '\0';

fn join(bucket: &str, stream: &str) -> String {
    assert!(!bucket.contains(SEPARATOR) && !stream.contains(SEPARATOR), "stream names hold no NUL");
    let mut joined = String::with_capacity(bucket.len() + 1 + stream.len());
    joined.push_str(bucket);
    joined.push(SEPARATOR);
    joined.push_str(stream);
    joined
}

impl StreamKey {
    /// The name as the store shares it.
    pub fn shared(bucket: &str, stream: &str) -> Rc<StreamKey> {
        Self::rc(Rc::from(join(bucket, stream)))
    }

    /// The name as requests and messages between shards carry it.
    pub fn boxed(bucket: &str, stream: &str) -> Box<StreamKey> {
        Self::from_box(join(bucket, stream).into_boxed_str())
    }

    fn rc(joined: Rc<str>) -> Rc<StreamKey> {
        // SAFETY: `StreamKey` is a `repr(transparent)` wrapper of `str`, so
        // the pointer (data and length) means the same for both types (as
        // `std` turns an `Rc<OsStr>` into an `Rc<Path>`).
        unsafe { Rc::from_raw(Rc::into_raw(joined) as *const StreamKey) }
    }

    fn from_box(joined: Box<str>) -> Box<StreamKey> {
        // SAFETY: as in `rc`, for `Box`.
        unsafe { Box::from_raw(Box::into_raw(joined) as *mut StreamKey) }
    }

    fn split(&self) -> (&str, &str) {
        self.0.split_once(SEPARATOR).expect("a stream name joins its bucket and id")
    }

    pub fn bucket(&self) -> &str {
        self.split().0
    }

    pub fn stream(&self) -> &str {
        self.split().1
    }

    /// The name shared (one allocation, as the store keeps it).
    pub fn to_shared(&self) -> Rc<StreamKey> {
        Self::rc(Rc::from(&self.0))
    }
}

impl Clone for Box<StreamKey> {
    fn clone(&self) -> Self {
        StreamKey::from_box(Box::from(&self.0))
    }
}

impl ToOwned for StreamKey {
    type Owned = Box<StreamKey>;

    fn to_owned(&self) -> Box<StreamKey> {
        StreamKey::from_box(Box::from(&self.0))
    }
}

/// `bucket/stream`, as in the bucketed surface's path.
impl fmt::Display for StreamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (bucket, stream) = self.split();
        write!(f, "{bucket}/{stream}")
    }
}

impl fmt::Debug for StreamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (bucket, stream) = self.split();
        f.debug_tuple("StreamKey").field(&bucket).field(&stream).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names sort as (bucket, stream id) pairs do, a bucket that is a
    /// prefix of another included, and split back into both ids.
    #[test]
    fn names_sort_as_pairs_and_split_back() {
        let pairs = [("abcd", "z"), ("abcd", ""), ("abcd-1", "a"), ("abc", "zz"), ("abcd", "y/x"), ("b", "a")];
        let mut by_pair = pairs.to_vec();
        by_pair.sort();
        let mut by_name: Vec<Rc<StreamKey>> = pairs.iter().map(|(b, s)| StreamKey::shared(b, s)).collect();
        by_name.sort();
        let back: Vec<(&str, &str)> = by_name.iter().map(|k| (k.bucket(), k.stream())).collect();
        assert_eq!(back, by_pair);
        let boxed = StreamKey::boxed("abcd", "y/x");
        assert_eq!(*boxed.clone(), *StreamKey::shared("abcd", "y/x"));
        assert_eq!(*boxed.to_shared(), *boxed);
        assert_eq!(boxed.to_string(), "abcd/y/x");
    }

    #[test]
    #[should_panic(expected = "stream names hold no NUL")]
    fn a_nul_in_a_name_is_refused() {
        StreamKey::shared("abcd", "a\0b");
    }
}
