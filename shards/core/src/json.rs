//! JSON-mode normalization: validation, one-level array flattening, and the
//! canonical stored form of each message.
//!
//! Each message is stored as one NDJSON record: minified (whitespace outside
//! strings removed, every other byte kept as sent) and followed by `\n`. These
//! canonical bytes are what the bucketed surface serves (`application/x-ndjson`)
//! and what offsets count. A minified value holds no raw newline (JSON strings
//! escape it), so every `\n` in the stored bytes ends a record; the base
//! protocol surface renders whole records as a JSON array from them.

use crate::error::Error;
use serde_json::value::RawValue;

const NOT_JSON: Error = Error::Invalid("body is not valid JSON");
const EMPTY_ARRAY: Error = Error::Invalid("empty JSON array appends nothing");

/// Normalized messages: stored bytes (each message + `\n`) and each message's stored length.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Normalized {
    pub bytes: Vec<u8>,
    pub lengths: Vec<u32>,
}

/// Normalizes a JSON body. `allow_empty` is true for create (PUT), where `[]`
/// makes no messages; an append (POST) of `[]` is an error.
pub fn normalize(body: &[u8], allow_empty: bool) -> Result<Normalized, Error> {
    let text = std::str::from_utf8(body).map_err(|_| NOT_JSON)?;
    let mut out = Normalized::default();
    if is_array(body) {
        let items: Vec<&RawValue> = serde_json::from_str(text).map_err(|_| NOT_JSON)?;
        if items.is_empty() && !allow_empty {
            return Err(EMPTY_ARRAY);
        }
        for item in items {
            push_message(&mut out, item.get());
        }
    } else {
        let value: &RawValue = serde_json::from_str(text).map_err(|_| NOT_JSON)?;
        push_message(&mut out, value.get());
    }
    Ok(out)
}

/// Whether a JSON body is an array (its first byte past JSON white space
/// is `[`): the only body that holds more than one message.
pub fn is_array(body: &[u8]) -> bool {
    body.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')) == Some(&b'[')
}

fn push_message(out: &mut Normalized, raw: &str) {
    let start = out.bytes.len();
    minify_into(raw.as_bytes(), &mut out.bytes);
    out.bytes.push(RECORD_END);
    out.lengths.push((out.bytes.len() - start) as u32);
}

/// Copies valid JSON dropping whitespace outside strings.
fn minify_into(src: &[u8], out: &mut Vec<u8>) {
    let mut in_string = false;
    let mut escaped = false;
    for &b in src {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            if b == b'"' {
                in_string = true;
            }
            out.push(b);
        }
    }
}

/// The byte that ends every stored JSON record.
pub const RECORD_END: u8 = b'\n';

/// The media type of the canonical stored form (reads of JSON streams on the
/// bucketed surface, and their SSE data).
pub const NDJSON: &str = "application/x-ndjson";

/// One stored record without its trailing newline: the JSON value.
pub fn record_value(record: &[u8]) -> &[u8] {
    record.strip_suffix(&[RECORD_END]).unwrap_or(record)
}

/// Renders stored JSON-mode bytes (whole records) as a JSON array: record
/// ends become commas, the last one is dropped.
pub fn render_array(stored: &[u8], out: &mut Vec<u8>) {
    out.reserve(stored.len() + 2);
    out.push(b'[');
    let body = record_value(stored);
    let mut rest = body;
    while let Some(i) = rest.iter().position(|&b| b == RECORD_END) {
        out.extend_from_slice(&rest[..i]);
        out.push(b',');
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_are_known_by_their_first_byte_past_white_space() {
        assert!(is_array(b" \r\n\t[1,2]"));
        assert!(!is_array(b"{\"a\":[1,2]}"));
        assert!(!is_array(b"\x0c[1]"), "form feed is not JSON white space");
        assert!(!is_array(b""));
    }

    #[test]
    fn flattens_one_level_and_minifies() {
        let n = normalize(br#" [ {"a": 1}, [1, 2], "x y" ] "#, false).unwrap();
        assert_eq!(n.bytes, b"{\"a\":1}\n[1,2]\n\"x y\"\n");
        assert_eq!(n.lengths, vec![8, 6, 6]);
        let mut out = Vec::new();
        render_array(&n.bytes, &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v, serde_json::json!([{"a":1},[1,2],"x y"]));
    }

    #[test]
    fn single_values_and_strings_with_escapes() {
        let n = normalize(br#"{"s":"a \" b\\","n":1.50}"#, false).unwrap();
        assert_eq!(n.bytes, b"{\"s\":\"a \\\" b\\\\\",\"n\":1.50}\n");
        assert_eq!(n.lengths.len(), 1);
        assert_eq!(normalize(b"42", false).unwrap().bytes, b"42\n");
        // A newline inside a string arrives escaped, so it never ends a record.
        let n = normalize(b"[\"a\\nb\", \"c\"]", false).unwrap();
        assert_eq!(n.bytes, b"\"a\\nb\"\n\"c\"\n");
        let mut out = Vec::new();
        render_array(&n.bytes, &mut out);
        assert_eq!(out, b"[\"a\\nb\",\"c\"]");
    }

    #[test]
    fn empty_and_invalid() {
        assert_eq!(normalize(b"[]", false), Err(EMPTY_ARRAY));
        assert_eq!(normalize(b"[]", true).unwrap(), Normalized::default());
        assert_eq!(normalize(b"{", false), Err(NOT_JSON));
        assert_eq!(normalize(b"", false), Err(NOT_JSON));
        assert_eq!(normalize(b"[1,]", false), Err(NOT_JSON));
        assert_eq!(normalize(b"\xff", false), Err(NOT_JSON));
        let mut out = Vec::new();
        render_array(b"", &mut out);
        assert_eq!(out, b"[]");
    }
}
