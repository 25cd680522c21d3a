//! Server-Sent Events parsing for the fan-out subscribers: splits the decoded
//! response body into lines, tracks `event:` types, hands every `data:` line
//! of a `data` event to a callback and counts `control` events. Also the
//! timestamp marker that the fan-out writer embeds in its payloads.

/// Marker before the send time (decimal nanoseconds) in fan-out payloads.
pub const TS_MARK: &[u8] = b"ts=";
/// Digits of the send time, zero-padded so the request can be patched in place.
pub const TS_DIGITS: usize = 20;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// No `event:` field yet (the SSE default type, "message").
    None,
    Data,
    Control,
    Other,
}

pub struct SseParser {
    line: Vec<u8>,
    kind: Kind,
    pub control_events: u64,
    pub data_events: u64,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser::new()
    }
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser { line: Vec::with_capacity(1024), kind: Kind::None, control_events: 0, data_events: 0 }
    }

    /// Feeds body bytes; `on_data` gets each `data:` value of `data` events.
    pub fn feed(&mut self, mut body: &[u8], on_data: &mut impl FnMut(&[u8])) {
        while !body.is_empty() {
            match body.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    if self.line.is_empty() {
                        self.on_line(&body[..i], on_data);
                    } else {
                        let mut line = std::mem::take(&mut self.line);
                        line.extend_from_slice(&body[..i]);
                        self.on_line(&line, on_data);
                        line.clear();
                        self.line = line;
                    }
                    body = &body[i + 1..];
                }
                None => {
                    self.line.extend_from_slice(body);
                    return;
                }
            }
        }
    }

    fn on_line(&mut self, line: &[u8], on_data: &mut impl FnMut(&[u8])) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            match self.kind {
                Kind::Data => self.data_events += 1,
                Kind::Control => self.control_events += 1,
                Kind::None | Kind::Other => {}
            }
            self.kind = Kind::None;
        } else if let Some(v) = field(line, b"event") {
            self.kind = match v {
                b"data" => Kind::Data,
                b"control" => Kind::Control,
                _ => Kind::Other,
            };
        } else if let Some(v) = field(line, b"data") {
            if self.kind == Kind::Data {
                on_data(v);
            }
        }
    }
}

/// The value of `name:value` (one optional space after the colon dropped).
fn field<'a>(line: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let rest = line.strip_prefix(name)?.strip_prefix(b":")?;
    Some(rest.strip_prefix(b" ").unwrap_or(rest))
}

/// Calls `f` with every send time embedded in `data` (several messages may
/// arrive in one event).
pub fn timestamps(data: &[u8], mut f: impl FnMut(u64)) {
    let mut i = 0;
    while i + TS_MARK.len() <= data.len() {
        if &data[i..i + TS_MARK.len()] == TS_MARK {
            i += TS_MARK.len();
            let mut v: u64 = 0;
            let mut digits = 0;
            while i < data.len() && data[i].is_ascii_digit() {
                v = v.wrapping_mul(10).wrapping_add(u64::from(data[i] - b'0'));
                i += 1;
                digits += 1;
            }
            if digits > 0 {
                f(v);
            }
        } else {
            i += 1;
        }
    }
}

/// Writes `nanos` as TS_DIGITS zero-padded digits into `out`.
pub fn put_ts(out: &mut [u8], mut nanos: u64) {
    for slot in out[..TS_DIGITS].iter_mut().rev() {
        *slot = b'0' + (nanos % 10) as u8;
        nanos /= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_anywhere() {
        let stream = b"event: control\ndata:{\"upToDate\":true}\n\nevent: data\r\ndata: ts=00000000000000000042;....\r\ndata:ts=7;\n\nevent: control\ndata:{}\n\n";
        for step in 1..stream.len() {
            let mut p = SseParser::new();
            let mut lines = Vec::new();
            for chunk in stream.chunks(step) {
                p.feed(chunk, &mut |d| lines.push(d.to_vec()));
            }
            assert_eq!(lines, vec![b"ts=00000000000000000042;....".to_vec(), b"ts=7;".to_vec()], "{step}");
            assert_eq!((p.data_events, p.control_events), (1, 2));
        }
    }

    #[test]
    fn timestamps_are_found_and_rendered() {
        let mut buf = *b"ts=xxxxxxxxxxxxxxxxxxxx;ts=";
        put_ts(&mut buf[3..], 123456789);
        let mut seen = Vec::new();
        timestamps(&buf, |t| seen.push(t));
        assert_eq!(seen, vec![123456789]);
        timestamps(b"..ts=5;..ts=6;", |t| seen.push(t));
        assert_eq!(seen, vec![123456789, 5, 6]);
    }
}
