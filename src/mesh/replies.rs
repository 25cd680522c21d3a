//! Matching replies to their askers over the mesh: each request gets an id
//! and a one-slot channel; the reply with that id fills it. One table kind
//! serves bucket requests (`Ctx::pending`) and forwarded requests
//! (`Ctx::waiting`).

use glommio::channels::local_channel::{self, LocalReceiver, LocalSender};
use glommio::{GlommioError, ResourceType};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// Requests of this shard awaiting their replies.
pub struct Replies<T> {
    next_id: Cell<u64>,
    slots: RefCell<HashMap<u64, LocalSender<T>>>,
}

impl<T> Default for Replies<T> {
    fn default() -> Self {
        Replies { next_id: Cell::new(0), slots: RefCell::default() }
    }
}

impl<T> Replies<T> {
    /// A new request id and where its reply arrives (`None`: never, the table is gone).
    pub fn open(&self) -> (u64, LocalReceiver<T>) {
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        let (tx, rx) = local_channel::new_bounded(1);
        let fresh = self.slots.borrow_mut().insert(id, tx).is_none();
        debug_assert!(fresh, "reply ids are never reused");
        (id, rx)
    }

    /// Hands a reply to its asker; gives it back if the asker is gone.
    pub fn complete(&self, id: u64, reply: T) -> Result<(), T> {
        let Some(tx) = self.slots.borrow_mut().remove(&id) else {
            return Err(reply);
        };
        match tx.try_send(reply) {
            Ok(()) => Ok(()),
            Err(
                GlommioError::Closed(ResourceType::Channel(r)) | GlommioError::WouldBlock(ResourceType::Channel(r)),
            ) => Err(r),
            // try_send fails only as closed or full, both carrying the item.
            Err(_) => Ok(()),
        }
    }
}
