//! Emptied buffers a shard thread keeps for its next requests: request
//! heads' fields, responses' header lists, rendered responses. A shelf per
//! kind and thread holds at most a fixed number, each of at most a fixed
//! room (`edge_limits`), so what is kept is bounded per shard however many
//! connections are open; a buffer kept per connection would be held by
//! every idle one.

use std::cell::RefCell;
use std::thread::LocalKey;

/// A buffer that can be emptied and says how much room it holds.
pub trait Emptied {
    fn room(&self) -> usize;
    fn empty(&mut self);
}

impl Emptied for String {
    fn room(&self) -> usize {
        self.capacity()
    }

    fn empty(&mut self) {
        self.clear();
    }
}

impl<T> Emptied for Vec<T> {
    fn room(&self) -> usize {
        self.capacity()
    }

    fn empty(&mut self) {
        self.clear();
    }
}

/// Up to `most` emptied buffers of at most `room` each.
pub struct Shelf<T> {
    kept: RefCell<Vec<T>>,
    most: usize,
    room: usize,
}

impl<T: Emptied> Shelf<T> {
    pub const fn new(most: usize, room: usize) -> Shelf<T> {
        Shelf { kept: RefCell::new(Vec::new()), most, room }
    }

    /// A kept buffer (empty), if there is one.
    pub fn take(&self) -> Option<T> {
        let item = self.kept.borrow_mut().pop();
        debug_assert!(item.as_ref().is_none_or(|i| i.room() <= self.room), "only buffers within the room are kept");
        item
    }

    /// Keeps `item`, emptied, unless the shelf is full or it holds more
    /// than the room (then it is freed).
    pub fn put(&self, mut item: T) {
        let mut kept = self.kept.borrow_mut();
        if kept.len() < self.most && item.room() <= self.room && item.room() > 0 {
            item.empty();
            kept.push(item);
        }
    }
}

/// Puts `item` on this thread's `shelf`. A thread's last buffers may be
/// dropped after its shelves (at thread exit): those are freed.
pub fn put_back<T: Emptied + 'static>(shelf: &'static LocalKey<Shelf<T>>, item: T) {
    let _ = shelf.try_with(|s| s.put(item));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_emptied_buffers_within_its_bounds() {
        let shelf: Shelf<Vec<u8>> = Shelf::new(2, 64);
        assert!(shelf.take().is_none());
        let mut a = Vec::with_capacity(32);
        a.extend_from_slice(b"abc");
        let at = a.as_ptr();
        shelf.put(a);
        shelf.put(Vec::with_capacity(65));
        shelf.put(Vec::new());
        let b = shelf.take().expect("the buffer within the room");
        assert_eq!((b.as_ptr(), b.len()), (at, 0), "the same buffer, emptied");
        assert!(shelf.take().is_none(), "nothing larger than the room, nothing without room");
        for _ in 0..3 {
            shelf.put(Vec::with_capacity(8));
        }
        assert!(shelf.take().is_some() && shelf.take().is_some() && shelf.take().is_none(), "at most two");
    }
}
