//! A blocking keep-alive client for everything off the hot path: setup
//! requests, the paced fan-out writer, catch-up fill and read, and readiness
//! polls. One request at a time; the body is streamed to a callback so
//! multi-megabyte reads never get buffered whole.

use crate::response::{Head, Part, ResponseReader};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

pub struct Client {
    sock: TcpStream,
    buf: Vec<u8>,
    /// Unconsumed bytes are `buf[pos..len]`.
    pos: usize,
    len: usize,
    reader: ResponseReader,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> io::Result<Client> {
        Client::with_buffer(addr, 64 * 1024)
    }

    /// A client whose read buffer is `buf_len` bytes (large for bulk reads).
    pub fn with_buffer(addr: SocketAddr, buf_len: usize) -> io::Result<Client> {
        let sock = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
        sock.set_nodelay(true)?;
        sock.set_read_timeout(Some(Duration::from_secs(60)))?;
        Ok(Client { sock, buf: vec![0; buf_len], pos: 0, len: 0, reader: ResponseReader::new() })
    }

    /// Sends `req` and reads one response, passing body bytes to `on_body`.
    pub fn exchange(&mut self, req: &[u8], mut on_body: impl FnMut(&[u8])) -> io::Result<Head> {
        self.sock.write_all(req)?;
        self.reader.reset();
        loop {
            if self.pos < self.len {
                let used = self
                    .reader
                    .feed(&self.buf[self.pos..self.len], &mut |p| {
                        if let Part::Body(b) = p {
                            on_body(b)
                        }
                    })
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.0))?;
                self.pos += used;
                if self.reader.is_done() {
                    return Ok(*self.reader.head());
                }
            }
            self.pos = 0;
            self.len = 0;
            let n = self.sock.read(&mut self.buf)?;
            if n == 0 {
                if self.reader.until_close() {
                    return Ok(*self.reader.head());
                }
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-response"));
            }
            self.len = n;
        }
    }

    /// Convenience for setup: the status and the whole body.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        host: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> io::Result<(Head, Vec<u8>)> {
        let req = crate::request::rendered(method, path, host, content_type, body);
        let mut out = Vec::new();
        let head = self.exchange(&req, |b| out.extend_from_slice(b))?;
        Ok((head, out))
    }
}
