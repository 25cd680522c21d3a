//! Tests of the server's parts together, in one thread and without
//! sockets: two shards and the messages between them ([`pair`], [`mesh`]).

mod mesh;
mod pair;
pub mod wakes;
