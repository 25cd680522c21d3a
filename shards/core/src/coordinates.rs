//! JSON record coordinates (extension section 6): record-aware read
//! parameters and their resolution to a starting record ordinal.

use super::int::parse_uint;
use crate::error::Error;
use crate::stream::StreamState;

/// Where a record-aware read starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordStart {
    /// `record=<ordinal>`
    At(u64),
    /// `record=now`
    Now,
    /// `tail_records=<count>`
    Tail(u64),
}

/// A parsed record-aware read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordQuery {
    pub start: RecordStart,
    pub max_records: Option<u64>,
    /// `record_view=envelope`
    pub envelope: bool,
}

/// Parses the record parameters; `get` returns a query parameter's value.
/// `Ok(None)`: not a record-aware read.
pub fn parse<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Result<Option<RecordQuery>, Error> {
    let bad = |why| Err(Error::Invalid(why));
    let record = get("record");
    let tail = get("tail_records");
    let max = get("max_records");
    let view = get("record_view");
    let start = match (record, tail) {
        (Some(_), Some(_)) => return bad("record and tail_records are mutually exclusive"),
        (Some("now"), None) => Some(RecordStart::Now),
        (Some(r), None) => match parse_uint(r) {
            Some(r) => Some(RecordStart::At(r)),
            None => return bad("record must be an unsigned integer or 'now'"),
        },
        (None, Some(t)) => match parse_uint(t) {
            Some(t) => Some(RecordStart::Tail(t)),
            None => return bad("tail_records must be a non-negative integer"),
        },
        (None, None) => None,
    };
    let Some(start) = start else {
        if max.is_some() {
            return bad("max_records needs record or tail_records");
        }
        if view.is_some() {
            return bad("record_view needs record or tail_records");
        }
        return Ok(None);
    };
    if get("offset").is_some() {
        return bad("record parameters are mutually exclusive with offset");
    }
    if get("max_bytes").is_some() {
        return bad("max_bytes cannot be combined with record-aware reads");
    }
    let max_records = match max {
        None => None,
        Some(m) => match parse_uint(m).filter(|n| *n > 0) {
            Some(m) => Some(m),
            None => return bad("max_records must be a positive integer"),
        },
    };
    let envelope = match view {
        None => false,
        Some("envelope") => true,
        Some(_) => return bad("record_view must be 'envelope'"),
    };
    Ok(Some(RecordQuery { start, max_records, envelope }))
}

/// A record before the first retained one.
pub const TRIMMED: Error = Error::Trimmed("record is older than the first retained record");

/// Resolves a record start to a record ordinal in [F, N].
pub fn resolve(s: &StreamState, start: RecordStart) -> Result<u64, Error> {
    let first = s.first_message;
    let next = s.visible.messages;
    let r = match start {
        RecordStart::Now | RecordStart::Tail(0) => next,
        RecordStart::Tail(n) => next.saturating_sub(n).max(first),
        RecordStart::At(r) if r < first => return Err(TRIMMED),
        RecordStart::At(r) if r > next => return Err(Error::RecordBeyondTail),
        RecordStart::At(r) => r,
    };
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q<'a>(pairs: &'a [(&'a str, &'a str)]) -> Result<Option<RecordQuery>, Error> {
        parse(|k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| *v))
    }

    #[test]
    fn parameters() {
        assert_eq!(q(&[]), Ok(None));
        assert_eq!(q(&[("offset", "-1")]), Ok(None));
        let r = q(&[("record", "4"), ("max_records", "2"), ("record_view", "envelope")]).unwrap().unwrap();
        assert_eq!(r, RecordQuery { start: RecordStart::At(4), max_records: Some(2), envelope: true });
        assert_eq!(q(&[("record", "now")]).unwrap().unwrap().start, RecordStart::Now);
        assert_eq!(q(&[("tail_records", "3")]).unwrap().unwrap().start, RecordStart::Tail(3));
        for bad in [
            &[("record", "1"), ("tail_records", "1")][..],
            &[("record", "1"), ("offset", "-1")],
            &[("record", "1"), ("max_bytes", "10")],
            &[("max_records", "1")],
            &[("record", "-1")],
            &[("record", "+1")],
            &[("record", "1"), ("max_records", "+2")],
            &[("record", "99999999999999999999")],
            &[("tail_records", "x")],
            &[("record", "1"), ("max_records", "0")],
            &[("record", "1"), ("record_view", "raw")],
        ] {
            assert!(q(bad).is_err(), "{bad:?}");
        }
    }
}
