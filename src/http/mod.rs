//! The hand-written HTTP/1.1 edge: request heads (httparse), bodies, responses.

pub mod chunked;
pub mod cors;
pub mod date;
pub mod error;
pub mod headers;
pub mod inbuf;
pub mod peer;
pub mod request;
pub mod response;
pub mod shelf;
pub mod url;

pub use request::{parse_head, Head, HeadError, Method};
pub use response::Response;
