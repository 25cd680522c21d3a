//! Incremental HTTP/1.1 response reader: status line and the few headers a
//! Durable Streams client needs, then the body framed by Content-Length,
//! chunked transfer coding, or connection close. Fed whatever bytes a
//! non-blocking read returned; allocation-free once its head buffer has grown.

/// What the head said that matters to us.
#[derive(Clone, Copy, Debug)]
pub struct Head {
    pub status: u16,
    pub up_to_date: bool,
    pub closed: bool,
    /// `Stream-Next-Offset`, as sent (offsets are short ASCII tokens).
    next_offset: [u8; 64],
    next_offset_len: u8,
}

impl Default for Head {
    fn default() -> Self {
        Head { status: 0, up_to_date: false, closed: false, next_offset: [0; 64], next_offset_len: 0 }
    }
}

impl Head {
    pub fn next_offset(&self) -> Option<&str> {
        (self.next_offset_len > 0)
            .then(|| std::str::from_utf8(&self.next_offset[..self.next_offset_len as usize]).unwrap_or(""))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Reading hex size digits.
    Size(u64),
    /// Skipping a chunk extension / CR up to LF.
    SizeLine(u64),
    Data(u64),
    /// Skipping the CRLF after chunk data.
    DataEnd,
    /// At the start of a trailer line (an empty one ends the body).
    TrailerStart,
    TrailerLine,
    TrailerCr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Length(u64),
    Chunked(Chunk),
    UntilClose,
    Done,
}

/// A malformed response: the connection cannot be reused.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// What one `feed` call found.
pub enum Part<'a> {
    Head(&'a Head),
    Body(&'a [u8]),
}

pub struct ResponseReader {
    state: State,
    head_buf: Vec<u8>,
    head: Head,
    /// The request was HEAD: no body whatever the headers say.
    pub no_body: bool,
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader::new()
    }
}

const MAX_HEAD: usize = 64 * 1024;

impl ResponseReader {
    pub fn new() -> Self {
        ResponseReader { state: State::Head, head_buf: Vec::with_capacity(1024), head: Head::default(), no_body: false }
    }

    /// Ready for the next response on the same connection.
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.head_buf.clear();
    }

    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The body runs until the peer closes (no length, not chunked).
    pub fn until_close(&self) -> bool {
        self.state == State::UntilClose
    }

    pub fn head(&self) -> &Head {
        &self.head
    }

    /// Consumes bytes from `input`; returns how many were used. Stops at the
    /// end of the response (the rest belongs to the next one).
    pub fn feed(&mut self, input: &[u8], on: &mut impl FnMut(Part<'_>)) -> Result<usize, Malformed> {
        let mut used = 0;
        while used < input.len() {
            let rest = &input[used..];
            match self.state {
                State::Done => break,
                State::Head => used += self.feed_head(rest, on)?,
                State::Length(left) => {
                    let n = (left as usize).min(rest.len());
                    on(Part::Body(&rest[..n]));
                    used += n;
                    let left = left - n as u64;
                    self.state = if left == 0 { State::Done } else { State::Length(left) };
                }
                State::UntilClose => {
                    on(Part::Body(rest));
                    used += rest.len();
                }
                State::Chunked(c) => used += self.feed_chunked(c, rest, on)?,
            }
        }
        Ok(used)
    }

    fn feed_head(&mut self, rest: &[u8], on: &mut impl FnMut(Part<'_>)) -> Result<usize, Malformed> {
        let (state, head, consumed) = if self.head_buf.is_empty() {
            // Fast path: the whole head is in this read; parse it in place.
            let Some(end) = find_head_end(rest) else {
                self.head_buf.extend_from_slice(rest);
                return Ok(rest.len());
            };
            let (state, head) = parse_head(&rest[..end])?;
            (state, head, end)
        } else {
            let before = self.head_buf.len();
            // Look from a little before the join for a CRLFCRLF split across reads.
            let scan_from = before.saturating_sub(3);
            self.head_buf.extend_from_slice(rest);
            let Some(e) = find_head_end(&self.head_buf[scan_from..]) else {
                if self.head_buf.len() > MAX_HEAD {
                    return Err(Malformed("response head too large"));
                }
                return Ok(rest.len());
            };
            let end = scan_from + e;
            let (state, head) = parse_head(&self.head_buf[..end])?;
            (state, head, end - before)
        };
        self.head = head;
        self.state = if self.no_body { State::Done } else { state };
        on(Part::Head(&self.head));
        Ok(consumed)
    }

    fn feed_chunked(&mut self, mut c: Chunk, rest: &[u8], on: &mut impl FnMut(Part<'_>)) -> Result<usize, Malformed> {
        let mut i = 0;
        while i < rest.len() {
            let b = rest[i];
            match c {
                Chunk::Size(n) => match hex(b) {
                    Some(d) => {
                        if n > (u64::MAX >> 8) {
                            return Err(Malformed("chunk size overflow"));
                        }
                        c = Chunk::Size(n * 16 + d);
                        i += 1;
                    }
                    None => c = Chunk::SizeLine(n),
                },
                Chunk::SizeLine(n) => {
                    i += 1;
                    if b == b'\n' {
                        c = if n == 0 { Chunk::TrailerStart } else { Chunk::Data(n) };
                    }
                }
                Chunk::Data(n) => {
                    let take = (n as usize).min(rest.len() - i);
                    on(Part::Body(&rest[i..i + take]));
                    i += take;
                    let left = n - take as u64;
                    c = if left == 0 { Chunk::DataEnd } else { Chunk::Data(left) };
                }
                Chunk::DataEnd => {
                    i += 1;
                    if b == b'\n' {
                        c = Chunk::Size(0);
                    }
                }
                Chunk::TrailerStart => {
                    i += 1;
                    c = match b {
                        b'\n' => {
                            self.state = State::Done;
                            return Ok(i);
                        }
                        b'\r' => Chunk::TrailerCr,
                        _ => Chunk::TrailerLine,
                    };
                }
                Chunk::TrailerCr => {
                    i += 1;
                    if b != b'\n' {
                        return Err(Malformed("bad chunked trailer"));
                    }
                    self.state = State::Done;
                    return Ok(i);
                }
                Chunk::TrailerLine => {
                    i += 1;
                    if b == b'\n' {
                        c = Chunk::TrailerStart;
                    }
                }
            }
        }
        self.state = State::Chunked(c);
        Ok(i)
    }
}

fn hex(b: u8) -> Option<u64> {
    match b {
        b'0'..=b'9' => Some(u64::from(b - b'0')),
        b'a'..=b'f' => Some(u64::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u64::from(b - b'A' + 10)),
        _ => None,
    }
}

/// Index just past the `\r\n\r\n` that ends a head.
fn find_head_end(b: &[u8]) -> Option<usize> {
    b.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn parse_head(h: &[u8]) -> Result<(State, Head), Malformed> {
    let mut lines = h.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = lines.next().ok_or(Malformed("empty head"))?;
    if !status_line.starts_with(b"HTTP/1.") || status_line.len() < 12 {
        return Err(Malformed("bad status line"));
    }
    let code = &status_line[9..12];
    if !code.iter().all(u8::is_ascii_digit) {
        return Err(Malformed("bad status code"));
    }
    let status = code.iter().fold(0u16, |a, d| a * 10 + u16::from(d - b'0'));
    let mut head = Head { status, ..Head::default() };
    let mut length = None;
    let mut chunked = false;
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = &line[..colon];
        let value = trim(&line[colon + 1..]);
        if name.eq_ignore_ascii_case(b"content-length") {
            let n = std::str::from_utf8(value).ok().and_then(|s| s.parse::<u64>().ok());
            length = Some(n.ok_or(Malformed("bad content-length"))?);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = value.eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case(b"stream-next-offset") {
            let n = value.len().min(head.next_offset.len());
            head.next_offset[..n].copy_from_slice(&value[..n]);
            head.next_offset_len = n as u8;
        } else if name.eq_ignore_ascii_case(b"stream-up-to-date") {
            head.up_to_date = value.eq_ignore_ascii_case(b"true");
        } else if name.eq_ignore_ascii_case(b"stream-closed") {
            head.closed = value.eq_ignore_ascii_case(b"true");
        }
    }
    let state = if (100..200).contains(&status) || status == 204 || status == 304 {
        State::Done
    } else if chunked {
        State::Chunked(Chunk::Size(0))
    } else {
        match length {
            Some(0) => State::Done,
            Some(n) => State::Length(n),
            None => State::UntilClose,
        }
    };
    Ok((state, head))
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(v.len());
    let end = v.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &v[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` in pieces of `step`, collecting status and body.
    fn run(bytes: &[u8], step: usize) -> (u16, Vec<u8>, usize, bool) {
        let mut r = ResponseReader::new();
        let mut status = 0;
        let mut body = Vec::new();
        let mut used = 0;
        while used < bytes.len() && !r.is_done() {
            let end = (used + step).min(bytes.len());
            let n = r
                .feed(&bytes[used..end], &mut |p| match p {
                    Part::Head(h) => status = h.status,
                    Part::Body(b) => body.extend_from_slice(b),
                })
                .unwrap();
            used += n;
        }
        (status, body, used, r.is_done())
    }

    #[test]
    fn content_length_and_leftover() {
        let msg = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nStream-Up-To-Date: true\r\n\r\nhelloNEXT";
        for step in [1, 2, 3, 7, 100] {
            let (status, body, used, done) = run(msg, step);
            assert_eq!((status, body.as_slice(), used, done), (200, &b"hello"[..], msg.len() - 4, true), "{step}");
        }
    }

    #[test]
    fn no_body_statuses_and_headers() {
        let msg = b"HTTP/1.1 204 No Content\r\nstream-next-offset: 0000000000000000_0000000000000042\r\n\r\n";
        let mut r = ResponseReader::new();
        let mut off = String::new();
        r.feed(msg, &mut |p| {
            if let Part::Head(h) = p {
                off = h.next_offset().unwrap().to_string()
            }
        })
        .unwrap();
        assert!(r.is_done());
        assert_eq!(off, "0000000000000000_0000000000000042");
    }

    #[test]
    fn chunked_with_trailer_split_anywhere() {
        let msg = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\nA\r\n0123456789\r\n0\r\nT: v\r\n\r\n";
        for step in 1..20 {
            let (status, body, used, done) = run(msg, step);
            assert_eq!((status, body.as_slice(), used, done), (200, &b"hello0123456789"[..], msg.len(), true));
        }
    }

    #[test]
    fn until_close_and_malformed() {
        let mut r = ResponseReader::new();
        r.feed(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\nabc", &mut |_| {}).unwrap();
        assert!(r.until_close());
        let mut r = ResponseReader::new();
        assert!(r.feed(b"garbage\r\n\r\n", &mut |_| {}).is_err());
    }
}
