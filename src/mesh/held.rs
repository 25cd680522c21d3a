//! Messages between shards held for a test (see `tests::pair`): every send
//! of every shard lands in one queue, and the test takes them out one at a
//! time, in the order it picks, or closes a shard so sends to it fail as
//! they do to a stopping peer.

use super::Message;
use super::PeerGone;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

/// A message on its way from shard `from` to shard `to`.
pub struct InFlight {
    pub from: usize,
    pub to: usize,
    pub msg: Message,
}

/// The messages every shard sent and nobody delivered yet, oldest first.
#[derive(Default)]
pub struct Held {
    pub queue: RefCell<VecDeque<InFlight>>,
    /// Shards that take no more messages.
    pub closed: RefCell<Vec<usize>>,
}

/// One shard's sending end into [`Held`].
pub struct Outlet {
    pub from: usize,
    pub held: Rc<Held>,
}

impl Outlet {
    pub fn send_to(&self, to: usize, msg: Message) -> Result<(), PeerGone> {
        assert_ne!(to, self.from, "a shard never sends to itself");
        if self.held.closed.borrow().contains(&to) {
            return Err(PeerGone(Some(Box::new(msg))));
        }
        self.held.queue.borrow_mut().push_back(InFlight { from: self.from, to, msg });
        Ok(())
    }
}
