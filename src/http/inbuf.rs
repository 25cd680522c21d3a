//! A connection's input buffer: the bytes read but not yet consumed, and
//! room after them that was zeroed once, when the buffer last grew. A
//! socket read needs initialised bytes to read into; a `Vec` resized by the
//! read size before every read zeroes that much again per request (8 KiB
//! for each pooled append), which this keeps to the first read of a
//! connection and to growth.

/// Unconsumed input in `bytes[start..end]`; all of `bytes` is initialised.
#[derive(Debug, Default)]
pub struct InBuf {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl InBuf {
    /// A buffer whose unconsumed input is `bytes` (bytes read before a handoff).
    pub fn from_vec(bytes: Vec<u8>) -> InBuf {
        let end = bytes.len();
        InBuf { bytes, start: 0, end }
    }

    /// The input read and not yet consumed.
    pub fn data(&self) -> &[u8] {
        &self.bytes[self.start..self.end]
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Marks the first `n` bytes of [`data`](Self::data) consumed.
    pub fn consume(&mut self, n: usize) {
        assert!(n <= self.end - self.start, "consumed {n} of {} bytes", self.end - self.start);
        self.start += n;
        if self.start == self.end {
            // Nothing left: the next read starts at the front, no copy.
            self.start = 0;
            self.end = 0;
        }
    }

    /// Exactly `want` bytes of room right after the data, for one read;
    /// [`filled`](Self::filled) then says how many the read brought. The
    /// data moves to the front first when that makes room; the buffer
    /// grows (zeroing only the new part) when it does not.
    pub fn room(&mut self, want: usize) -> &mut [u8] {
        if self.end + want > self.bytes.len() && self.start > 0 {
            self.bytes.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end + want > self.bytes.len() {
            self.bytes.resize(self.end + want, 0);
        }
        &mut self.bytes[self.end..self.end + want]
    }

    /// Adds `n` bytes that a read put into [`room`](Self::room) to the data.
    pub fn filled(&mut self, n: usize) {
        assert!(self.end + n <= self.bytes.len(), "filled past the room");
        self.end += n;
    }

    /// Lets go of room above `keep` bytes when no input is pending (between
    /// requests: a chunked body's large reads leave large room behind).
    pub fn trim(&mut self, keep: usize) {
        if self.is_empty() && self.bytes.len() > keep {
            self.bytes = Vec::new();
        }
    }

    /// The unconsumed input, for a handoff to another shard.
    pub fn into_vec(mut self) -> Vec<u8> {
        self.bytes.truncate(self.end);
        self.bytes.drain(..self.start);
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(buf: &mut InBuf, want: usize, input: &[u8]) {
        let room = buf.room(want);
        assert_eq!(room.len(), want);
        room[..input.len()].copy_from_slice(input);
        buf.filled(input.len());
    }

    #[test]
    fn reads_consumes_and_reuses_its_room() {
        let mut buf = InBuf::default();
        read(&mut buf, 16, b"GET / HT");
        read(&mut buf, 16, b"TP/1.1\r\n");
        assert_eq!(buf.data(), b"GET / HTTP/1.1\r\n");
        let grown = buf.bytes.len();
        buf.consume(16);
        assert!(buf.is_empty());
        read(&mut buf, 16, b"next");
        assert_eq!((buf.data(), buf.bytes.len()), (&b"next"[..], grown), "no growth once room exists");
    }

    #[test]
    fn moves_data_to_the_front_before_growing() {
        let mut buf = InBuf::default();
        read(&mut buf, 8, b"abcdefgh");
        buf.consume(6);
        read(&mut buf, 6, b"ij");
        assert_eq!(buf.data(), b"ghij");
        assert_eq!(buf.bytes.len(), 8, "the two left moved to the front; six fit after them");
        read(&mut buf, 8, b"klmnopqr");
        assert_eq!(buf.data(), b"ghijklmnopqr");
        assert_eq!(buf.into_vec(), b"ghijklmnopqr");
    }

    #[test]
    fn large_room_goes_between_requests() {
        let mut buf = InBuf::default();
        read(&mut buf, 1024, b"POST /a HTTP/1.1\r\n");
        buf.trim(64);
        assert_eq!(buf.bytes.len(), 1024, "input pending: kept");
        buf.consume(buf.data().len());
        buf.trim(2048);
        assert_eq!(buf.bytes.len(), 1024, "within what is kept");
        buf.trim(64);
        assert_eq!(buf.bytes.capacity(), 0, "let go");
        read(&mut buf, 16, b"GET");
        assert_eq!(buf.data(), b"GET");
    }

    #[test]
    fn a_handoff_buffer_is_the_data() {
        let mut buf = InBuf::from_vec(b"POST /a HTTP/1.1\r\n".to_vec());
        buf.consume(5);
        assert_eq!(buf.data(), b"/a HTTP/1.1\r\n");
        assert_eq!(buf.into_vec(), b"/a HTTP/1.1\r\n");
    }

    #[test]
    #[should_panic(expected = "consumed")]
    fn consuming_more_than_the_data_is_a_bug() {
        InBuf::from_vec(b"ab".to_vec()).consume(3);
    }
}
