//! sluice as a library: the HTTP/1.1 edge (request heads on httparse, chunked
//! bodies, request targets, response rendering, the SSE wire format), the unit
//! grammar of the command line, and the server itself (shards, connections,
//! handlers). The `sluice` binary is a thin `main` over it; the fuzz targets
//! drive the real request handlers through it and the micro-benchmarks the edge.

// The server modules name the edge `sluice::http`, as the binary did.
extern crate self as sluice;

pub mod http;
pub mod sse_wire;
pub mod units;

mod affinity;
mod auth;
pub mod budget;
mod catchup;
pub mod check;
pub mod config;
pub mod config_file;
pub mod conn;
pub mod ctx;
mod dirlock;
pub mod edge_limits;
pub mod fatal;
mod forward;
pub mod handlers;
pub mod logging;
mod mesh;
mod metrics;
mod notify;
mod outbox;
pub mod port_claim;
mod relay;
mod reload;
pub mod route;
mod send;
pub mod serve;
pub mod server;
pub mod shard;
mod sse;
pub mod start_error;
mod subscriptions;
pub mod tier;
mod watchdog;

#[cfg(test)]
mod tests;
