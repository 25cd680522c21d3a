//! sluice's HTTP/1.1 edge as a library: request heads (httparse), chunked
//! bodies, request targets and response rendering. The server binary uses it;
//! so do the fuzz targets and micro-benchmarks.

pub mod http;
