//! sluice's HTTP/1.1 edge as a library: request heads (httparse), chunked
//! bodies, request targets, response rendering and the SSE wire format. The server binary uses it;
//! so do the fuzz targets and micro-benchmarks. Also the unit grammar of the command line.

pub mod http;
pub mod sse_wire;
pub mod units;
