//! Little-endian binary field codec shared by log records, the checkpoint
//! and the record index.
//!
//! `Put` appends fields to a byte vector; `Cursor` reads them back and returns
//! `None` on any truncation, so a damaged record can never panic recovery.
//! Fixed-width fields (`u32`, `u64`, `bytes` with a u32 length) serve the
//! journal's records; LEB128 fields (`var`, `var_bytes`) serve what is
//! mostly small numbers (the checkpoint's streams, index lengths).

/// Bytes of the longest LEB128 value (a u64).
pub const MAX_VARINT: usize = 10;

/// Bytes `v` takes as LEB128.
pub fn varint_len(v: u64) -> u64 {
    (u64::from(64 - v.max(1).leading_zeros())).div_ceil(7)
}

/// Appends `v` as LEB128: seven bits a byte, low bits first, the high bit
/// set on every byte but the last.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A LEB128 value at the start of `b` and its length in bytes (None: cut
/// short, or longer than a u64 takes).
pub fn get_varint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(MAX_VARINT) {
        v |= u64::from(byte & 0x7f).checked_shl(7 * i as u32)?;
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

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
    /// A LEB128 value.
    fn put_var(&mut self, v: u64);
    /// A presence byte, then (when present) a LEB128 value.
    fn put_opt_var(&mut self, v: Option<u64>);
    /// A LEB128 length followed by the bytes.
    fn put_var_bytes(&mut self, v: &[u8]);
    /// A presence byte, then (when present) LEB128-length-prefixed bytes.
    fn put_opt_var_bytes(&mut self, v: Option<&[u8]>);
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
    fn put_var(&mut self, v: u64) {
        put_varint(self, v);
    }
    fn put_opt_var(&mut self, v: Option<u64>) {
        self.put_u8(v.is_some() as u8);
        if let Some(v) = v {
            self.put_var(v);
        }
    }
    fn put_var_bytes(&mut self, v: &[u8]) {
        self.put_var(v.len() as u64);
        self.extend_from_slice(v);
    }
    fn put_opt_var_bytes(&mut self, v: Option<&[u8]>) {
        self.put_u8(v.is_some() as u8);
        if let Some(v) = v {
            self.put_var_bytes(v);
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
    /// What `put_var` wrote.
    pub fn var(&mut self) -> Option<u64> {
        let (v, n) = get_varint(&self.buf[self.pos..])?;
        self.pos += n;
        Some(v)
    }
    /// What `put_var_bytes` wrote, borrowed.
    pub fn var_bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.var()?).ok()?;
        self.take(n)
    }
    /// What `put_var_bytes` wrote, borrowed, when it is UTF-8.
    pub fn var_str(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.var_bytes()?).ok()
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

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, 1 << 35, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len() as u64, varint_len(v), "{v}");
            assert_eq!(get_varint(&b), Some((v, b.len())));
        }
        assert_eq!(get_varint(&[0x80; 11]), None, "too long");
        assert_eq!(get_varint(&[0x80, 0x80]), None, "cut short");
    }

    #[test]
    fn var_fields_round_trip_and_refuse_truncation() {
        let mut v = Vec::new();
        v.put_var(300);
        v.put_opt_var(Some(1 << 40));
        v.put_opt_var(None);
        v.put_var_bytes(b"text/plain");
        v.put_opt_var_bytes(Some(b"k"));
        v.put_opt_var_bytes(None);
        assert_eq!(v.len(), 2 + 1 + 6 + 1 + 1 + 10 + 1 + 2 + 1, "small numbers take few bytes");
        // An option is its presence byte, then the value (the reader
        // decides how to read the value: `store::checkpoint`'s fields).
        type Read<'a> = (u64, (u8, u64), u8, &'a str, (u8, &'a str), u8);
        fn read<'a>(c: &mut Cursor<'a>) -> Option<Read<'a>> {
            Some((c.var()?, (c.u8()?, c.var()?), c.u8()?, c.var_str()?, (c.u8()?, c.var_str()?), c.u8()?))
        }
        let mut c = Cursor::new(&v);
        assert_eq!(read(&mut c), Some((300, (1, 1 << 40), 0, "text/plain", (1, "k"), 0)));
        assert!(c.is_empty());
        for cut in 0..v.len() {
            assert_eq!(read(&mut Cursor::new(&v[..cut])), None, "cut at {cut}");
        }
        let mut long = Vec::new();
        long.put_var(u64::MAX);
        assert_eq!(Cursor::new(&long).var_bytes(), None, "a length past the buffer");
    }
}
