//! Server-Sent Events wire format: `data` events whose payload lines are
//! split on every CR, LF and CRLF (so no payload can forge an event), and
//! `control` events carrying the stream position as one line of JSON.

use sluice_shards::core::media_type;
use sluice_shards::offset::Offset;

/// What a control event reports.
#[derive(Clone, Copy, Debug, Default)]
pub struct Control {
    pub next: u64,
    pub cursor: Option<u64>,
    pub up_to_date: bool,
    pub closed: bool,
    /// Record-aware reads: first retained record and the next record.
    pub records: Option<(u64, u64)>,
}

/// Whether SSE data for this content type travels as base64.
pub fn is_binary(content_type: &str) -> bool {
    let m = media_type(content_type);
    !(m.starts_with("text/") || m == "application/json")
}

/// Appends one `data` event, splitting the payload on CR, LF and CRLF so no
/// payload byte can start a new event.
pub fn encode_data_event(payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(b"event: data\n");
    let mut line_start = 0;
    let mut i = 0;
    while i <= payload.len() {
        let at_end = i == payload.len();
        if at_end || payload[i] == b'\n' || payload[i] == b'\r' {
            out.extend_from_slice(b"data:");
            let line = &payload[line_start..i];
            if line.first() == Some(&b' ') {
                // Parsers strip one leading space: keep the payload's own.
                out.push(b' ');
            }
            out.extend_from_slice(line);
            out.push(b'\n');
            if !at_end && payload[i] == b'\r' && payload.get(i + 1) == Some(&b'\n') {
                i += 1;
            }
            line_start = i + 1;
        }
        i += 1;
    }
    out.push(b'\n');
}

/// Appends one `control` event.
pub fn encode_control(c: Control, out: &mut Vec<u8>) {
    let mut json = format!("{{\"streamNextOffset\":\"{}\"", Offset(c.next));
    if let Some(cursor) = c.cursor {
        json.push_str(&format!(",\"streamCursor\":\"{cursor}\""));
    }
    if let Some((first, next)) = c.records {
        json.push_str(&format!(",\"streamFirstRecord\":{first},\"streamNextRecord\":{next}"));
    }
    if c.up_to_date {
        json.push_str(",\"upToDate\":true");
    }
    if c.closed {
        json.push_str(",\"streamClosed\":true");
    }
    json.push('}');
    out.extend_from_slice(b"event: control\ndata:");
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_lines_split_on_every_line_break() {
        let mut out = Vec::new();
        encode_data_event(b"a\r\n\r\nevent: control\rdata: x\n b", &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: data\ndata:a\ndata:\ndata:event: control\ndata:data: x\ndata:  b\n\n"
        );
    }

    #[test]
    fn control_fields() {
        let mut out = Vec::new();
        encode_control(Control { next: 5, cursor: Some(7), up_to_date: true, ..Control::default() }, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: control\ndata:{\"streamNextOffset\":\"0000000000000000_0000000000000005\",\"streamCursor\":\"7\",\"upToDate\":true}\n\n"
        );
        let mut out = Vec::new();
        encode_control(
            Control { next: 5, up_to_date: true, closed: true, records: Some((1, 4)), ..Control::default() },
            &mut out,
        );
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\"streamFirstRecord\":1,\"streamNextRecord\":4"));
        assert!(text.contains("\"streamClosed\":true}"));
    }

    #[test]
    fn binary_detection() {
        assert!(is_binary("application/octet-stream"));
        assert!(is_binary("image/png"));
        assert!(!is_binary("text/plain; charset=utf-8"));
        assert!(!is_binary("application/json"));
    }
}
