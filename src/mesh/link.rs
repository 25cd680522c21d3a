//! Where a shard's messages to its peers go: the glommio channel mesh
//! between the shards' executors in the server, or (in tests) a queue the
//! test delivers from one message at a time, in the order it picks
//! (`held`). Every send of the server goes through [`Link`].

use super::Message;
use glommio::channels::channel_mesh::Senders;
use glommio::{GlommioError, ResourceType};

/// A shard's sending end towards its peers.
pub enum Link {
    /// The channel mesh between executors (the server).
    Mesh(Senders<Message>),
    /// Messages held for a test to deliver.
    #[cfg(test)]
    Held(super::held::Outlet),
}

/// A message its peer did not take (it is stopping); the message itself
/// when the channel gave it back (boxed: a send that fails is rare, and
/// the result of every send stays small).
pub struct PeerGone(pub Option<Box<Message>>);

impl Link {
    /// Sends `msg` to shard `to` (never this shard itself).
    pub async fn send_to(&self, to: usize, msg: Message) -> Result<(), PeerGone> {
        match self {
            Link::Mesh(senders) => senders.send_to(to, msg).await.map_err(|e| match e {
                GlommioError::Closed(ResourceType::Channel(msg)) => PeerGone(Some(Box::new(msg))),
                _ => PeerGone(None),
            }),
            #[cfg(test)]
            Link::Held(outlet) => outlet.send_to(to, msg),
        }
    }
}
