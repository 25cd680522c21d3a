//! The subscription surface and tasks (the state and its rules are in
//! `crate::subscriptions`): the reserved `__ds` requests (`routes`, with
//! `manage` and `settle`), the messages between shards (`messages`), wakes
//! and webhook outcomes (`wake`) and making changes durable (`persist`).

pub mod answers;
pub mod manage;
pub mod messages;
pub mod persist;
pub mod routes;
pub mod settle;
pub mod wake;
