//! Little-endian binary field codec shared by log records.
//!
//! `Put` appends fields to a byte vector; `Cursor` reads them back and returns
//! `None` on any truncation, so a damaged record can never panic recovery.

/// Field writers for a byte vector.
pub trait Put {
    fn put_u8(&mut self, v: u8);
    fn put_u32(&mut self, v: u32);
    fn put_u64(&mut self, v: u64);
    /// A u32 length prefix followed by the bytes.
    fn put_bytes(&mut self, v: &[u8]);
    fn put_opt_u64(&mut self, v: Option<u64>);
    /// A presence byte, then (when present) length-prefixed bytes.
    fn put_opt_bytes(&mut self, v: Option<&[u8]>);
}

impl Put for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_bytes(&mut self, v: &[u8]) {
        self.put_u32(v.len() as u32);
        self.extend_from_slice(v);
    }
    fn put_opt_bytes(&mut self, v: Option<&[u8]>) {
        match v {
            Some(b) => {
                self.put_u8(1);
                self.put_bytes(b);
            }
            None => self.put_u8(0),
        }
    }
    fn put_opt_u64(&mut self, v: Option<u64>) {
        match v {
            Some(v) => {
                self.put_u8(1);
                self.put_u64(v);
            }
            None => self.put_u8(0),
        }
    }
}

/// A bounds-checked reader over an encoded record.
pub struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }
    pub fn position(&self) -> usize {
        self.pos
    }
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    pub fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
    }
    pub fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
    pub fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub fn string(&mut self) -> Option<String> {
        self.str().map(str::to_string)
    }
    /// What `put_bytes` wrote, borrowed, when it is UTF-8.
    pub fn str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }
    /// What `put_opt_bytes` wrote, as a UTF-8 string.
    pub fn opt_string(&mut self) -> Option<Option<String>> {
        match self.u8()? {
            0 => Some(None),
            1 => self.string().map(Some),
            _ => None,
        }
    }
    pub fn opt_u64(&mut self) -> Option<Option<u64>> {
        match self.u8()? {
            0 => Some(None),
            1 => self.u64().map(Some),
            _ => None,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let mut v = Vec::new();
        v.put_u8(7);
        v.put_u64(1 << 40);
        v.put_bytes(b"abc");
        v.put_opt_u64(Some(5));
        v.put_opt_u64(None);
        let mut c = Cursor::new(&v);
        assert_eq!(c.u8(), Some(7));
        assert_eq!(c.u64(), Some(1 << 40));
        assert_eq!(c.bytes(), Some(&b"abc"[..]));
        assert_eq!(c.opt_u64(), Some(Some(5)));
        assert_eq!(c.opt_u64(), Some(None));
        assert!(c.is_empty());
        let mut short = Cursor::new(&v[..10]);
        short.u8();
        short.u64();
        assert_eq!(short.bytes(), None);
    }
}
