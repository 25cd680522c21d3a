//! Incremental chunked transfer-coding decoder (RFC 9112 section 7.1).
//!
//! It consumes bytes as they arrive, appends decoded data to the caller's
//! buffer, and reports how many input bytes it used, so a body can be read
//! straight from the connection buffer with a hard size limit.

/// Decoder progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Size,
    Ext,
    SizeLf,
    Data(u64),
    DataCr,
    DataLf,
    Trailer { line_empty: bool },
    TrailerLf { line_empty: bool },
    Done,
}

use sluice_shards::core::Error;

/// A body over `--max-body-bytes`.
pub const BODY_TOO_LARGE: Error = Error::TooLarge("request body exceeds --max-body-bytes");
/// A body the shard's part of `--max-body-memory` cannot hold now (503 with
/// Retry-After; the body is not read).
pub const BODY_MEMORY: Error = Error::Unavailable("request bodies in progress fill --max-body-memory; retry");

pub struct ChunkedDecoder {
    state: State,
    size: u64,
    size_digits: u32,
    limit: u64,
    total: u64,
}

impl ChunkedDecoder {
    pub fn new(limit: u64) -> Self {
        ChunkedDecoder { state: State::Size, size: 0, size_digits: 0, limit, total: 0 }
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from `input` into `out`; returns input bytes consumed.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, Error> {
        let mut i = 0;
        while i < input.len() && self.state != State::Done {
            let b = input[i];
            match self.state {
                State::Size => match b {
                    b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                        let d = (b as char).to_digit(16).expect("hex") as u64;
                        self.size_digits += 1;
                        if self.size_digits > 15 {
                            return Err(BODY_TOO_LARGE);
                        }
                        self.size = self.size * 16 + d;
                        i += 1;
                    }
                    b';' | b' ' | b'\t' if self.size_digits > 0 => {
                        self.state = State::Ext;
                        i += 1;
                    }
                    b'\r' if self.size_digits > 0 => {
                        self.state = State::SizeLf;
                        i += 1;
                    }
                    _ => return Err(Error::Invalid("invalid chunk size")),
                },
                State::Ext => {
                    if b == b'\r' {
                        self.state = State::SizeLf;
                    } else if b == b'\n' {
                        return Err(Error::Invalid("bare LF in chunk header"));
                    }
                    i += 1;
                }
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(Error::Invalid("expected LF after chunk size"));
                    }
                    i += 1;
                    self.total += self.size;
                    if self.total > self.limit {
                        return Err(BODY_TOO_LARGE);
                    }
                    self.state =
                        if self.size == 0 { State::Trailer { line_empty: true } } else { State::Data(self.size) };
                    self.size = 0;
                    self.size_digits = 0;
                }
                State::Data(left) => {
                    let n = (left.min((input.len() - i) as u64)) as usize;
                    out.extend_from_slice(&input[i..i + n]);
                    i += n;
                    self.state = if left == n as u64 { State::DataCr } else { State::Data(left - n as u64) };
                }
                State::DataCr => {
                    if b != b'\r' {
                        return Err(Error::Invalid("chunk data longer than its size"));
                    }
                    self.state = State::DataLf;
                    i += 1;
                }
                State::DataLf => {
                    if b != b'\n' {
                        return Err(Error::Invalid("expected LF after chunk data"));
                    }
                    self.state = State::Size;
                    i += 1;
                }
                State::Trailer { line_empty } => {
                    if b == b'\r' {
                        self.state = State::TrailerLf { line_empty };
                    } else {
                        self.state = State::Trailer { line_empty: false };
                    }
                    i += 1;
                }
                State::TrailerLf { line_empty } => {
                    if b != b'\n' {
                        return Err(Error::Invalid("expected LF in trailer"));
                    }
                    i += 1;
                    self.state = if line_empty { State::Done } else { State::Trailer { line_empty: true } };
                }
                State::Done => unreachable!("loop guard"),
            }
        }
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(input: &[u8], step: usize) -> Result<(Vec<u8>, usize), Error> {
        let mut d = ChunkedDecoder::new(1 << 20);
        let mut out = Vec::new();
        let mut used = 0;
        while used < input.len() && !d.is_done() {
            let end = (used + step).min(input.len());
            used += d.feed(&input[used..end], &mut out)?;
        }
        assert!(d.is_done());
        Ok((out, used))
    }

    #[test]
    fn decodes_in_any_split() {
        let raw = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-T: 1\r\n\r\nNEXT";
        for step in 1..raw.len() {
            let (out, used) = decode_all(raw, step).unwrap();
            assert_eq!(out, b"hello world");
            assert_eq!(&raw[used..], b"NEXT");
        }
    }

    #[test]
    fn rejects_bad_framing_and_oversize() {
        let mut d = ChunkedDecoder::new(4);
        assert_eq!(d.feed(b"5\r\nhello\r\n", &mut Vec::new()), Err(BODY_TOO_LARGE));
        let mut d = ChunkedDecoder::new(100);
        assert!(matches!(d.feed(b"zz\r\n", &mut Vec::new()), Err(Error::Invalid(_))));
        let mut d = ChunkedDecoder::new(100);
        assert!(matches!(d.feed(b"2\r\nabc\r\n", &mut Vec::new()), Err(Error::Invalid(_))));
        let mut d = ChunkedDecoder::new(u64::MAX);
        assert_eq!(d.feed(b"ffffffffffffffffff\r\n", &mut Vec::new()), Err(BODY_TOO_LARGE));
    }
}
