//! The append decision (POST): closure, content type, producers, Stream-Seq,
//! record-tail preconditions and JSON normalization, in the order the
//! protocol's conformance suite pins down.

use super::json::normalize;
use super::limits::MAX_OFFSET;
use super::producer::{check, ProducerCheck};
use crate::error::Error;
use crate::media::same_media_type;
use crate::record::ProducerStamp;
use crate::stream::StreamState;
use std::borrow::Cow;

/// A POST after header parsing.
#[derive(Debug)]
pub struct AppendInput<'a> {
    pub content_type: Option<&'a str>,
    pub body: &'a [u8],
    pub close: bool,
    pub stream_seq: Option<&'a str>,
    pub producer: Option<ProducerStamp>,
    /// `Stream-Record-Match`: the record tail the writer expects.
    pub record_match: Option<u64>,
}

/// What to do.
#[derive(Debug, PartialEq, Eq)]
pub enum AppendDecision<'a> {
    /// Log these bytes (already normalized; borrowed when no normalization
    /// was needed) as one atomic append.
    Write { data: Cow<'a, [u8]>, messages: Vec<u32> },
    /// Close only, no data (204).
    Close,
    /// Already done: a producer retry, or closing a closed stream (204).
    Duplicate { producer: Option<(u64, u64)> },
}

/// Decides an append against the stream's current (decided) state.
pub fn decide<'a>(s: &StreamState, input: &AppendInput<'a>) -> Result<AppendDecision<'a>, Error> {
    let close_only = input.body.is_empty() && input.close;
    if input.body.is_empty() && !input.close {
        return Err(Error::Invalid("empty append body"));
    }
    if s.closed {
        let same_closer = input.producer.is_some() && input.producer.as_ref() == s.closed_by();
        return if (close_only && input.producer.is_none()) || same_closer {
            Ok(AppendDecision::Duplicate { producer: input.producer.as_ref().map(|p| (p.epoch, p.seq)) })
        } else {
            Err(Error::Closed)
        };
    }
    if !close_only {
        match input.content_type {
            None => return Err(Error::Invalid("missing Content-Type")),
            Some(ct) if !same_media_type(ct, &s.content_type) => return Err(Error::ContentTypeMismatch),
            Some(_) => {}
        }
    }
    if let Some(p) = &input.producer {
        match check(s.producers.get(&p.id), p) {
            ProducerCheck::Accept => {}
            ProducerCheck::Duplicate { epoch, last_seq } => {
                return Ok(AppendDecision::Duplicate { producer: Some((epoch, last_seq)) })
            }
            ProducerCheck::StaleEpoch { current } => return Err(Error::StaleEpoch { current }),
            ProducerCheck::EpochNeedsSeqZero => return Err(Error::Invalid("a new producer epoch must start at seq 0")),
            ProducerCheck::Gap { expected, received } => return Err(Error::ProducerGap { expected, received }),
        }
    }
    if let (Some(seq), Some(last)) = (input.stream_seq, s.last_stream_seq()) {
        if seq.as_bytes() <= last.as_bytes() {
            return Err(Error::SeqRegression);
        }
    }
    if let Some(expected) = input.record_match {
        if expected != s.records() {
            return Err(Error::RecordMismatch);
        }
    }
    if close_only {
        return Ok(AppendDecision::Close);
    }
    let (data, messages) = if s.json {
        let n = normalize(input.body, false)?;
        (Cow::Owned(n.bytes), n.lengths)
    } else {
        (Cow::Borrowed(input.body), Vec::new())
    };
    if s.tail().saturating_add(data.len() as u64) > MAX_OFFSET {
        return Err(PAST_MAX_OFFSET);
    }
    Ok(AppendDecision::Write { data, messages })
}

/// An append that would carry the stream past the largest offset a token holds.
pub const PAST_MAX_OFFSET: Error = Error::TooLarge("the stream would pass the largest offset");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::AppendRecord;

    #[test]
    fn no_append_passes_the_largest_offset() {
        let mut s = stream("text/plain");
        s.body = crate::body::Body::new(Vec::new(), MAX_OFFSET - 2, 0);
        assert!(matches!(decide(&s, &input(Some("text/plain"), b"ab")), Ok(AppendDecision::Write { .. })));
        assert_eq!(decide(&s, &input(Some("text/plain"), b"abc")), Err(PAST_MAX_OFFSET));
    }

    use crate::stream::fixture::stream;

    fn input<'a>(ct: Option<&'a str>, body: &'a [u8]) -> AppendInput<'a> {
        AppendInput { content_type: ct, body, close: false, stream_seq: None, producer: None, record_match: None }
    }

    fn stamp(epoch: u64, seq: u64) -> ProducerStamp {
        ProducerStamp { id: "p".into(), epoch, seq }
    }

    #[test]
    fn plain_and_json_writes() {
        let s = stream("text/plain");
        assert_eq!(
            decide(&s, &input(Some("text/plain; charset=utf-8"), b"hi")),
            Ok(AppendDecision::Write { data: Cow::Borrowed(&b"hi"[..]), messages: vec![] })
        );
        assert_eq!(decide(&s, &input(Some("application/json"), b"hi")), Err(Error::ContentTypeMismatch));
        assert_eq!(decide(&s, &input(None, b"hi")), Err(Error::Invalid("missing Content-Type")));
        assert_eq!(decide(&s, &input(Some("text/plain"), b"")), Err(Error::Invalid("empty append body")));
        let j = stream("application/json");
        assert_eq!(
            decide(&j, &input(Some("application/json"), b"[1, 2]")),
            Ok(AppendDecision::Write { data: Cow::Owned(b"1\n2\n".to_vec()), messages: vec![2, 2] })
        );
        assert!(matches!(decide(&j, &input(Some("application/json"), b"[]")), Err(Error::Invalid(_))));
        assert!(matches!(decide(&j, &input(Some("application/json"), b"{x")), Err(Error::Invalid(_))));
    }

    #[test]
    fn closure_rules() {
        let mut s = stream("text/plain");
        let mut close = input(None, b"");
        close.close = true;
        assert_eq!(decide(&s, &close), Ok(AppendDecision::Close));
        s.apply_append(
            &AppendRecord {
                handle: 1,
                at_ms: 0,
                stream_seq: None,
                producer: Some(stamp(0, 0)),
                close: true,
                messages: vec![],
                data: b"x",
            },
            16,
        );
        assert_eq!(decide(&s, &close), Ok(AppendDecision::Duplicate { producer: None }));
        assert_eq!(decide(&s, &input(Some("text/plain"), b"more")), Err(Error::Closed));
        let mut retry = input(Some("text/plain"), b"other body");
        retry.close = true;
        retry.producer = Some(stamp(0, 0));
        assert_eq!(decide(&s, &retry), Ok(AppendDecision::Duplicate { producer: Some((0, 0)) }));
        retry.producer = Some(stamp(0, 1));
        assert_eq!(decide(&s, &retry), Err(Error::Closed));
    }

    #[test]
    fn producer_dedup_runs_before_stream_seq() {
        let mut s = stream("text/plain");
        s.producers.record(&ProducerStamp { id: "p".into(), epoch: 0, seq: 0 }, (0, 0, 0), 16);
        s.rare_mut().last_stream_seq = Some("b".into());
        let mut dup = input(Some("text/plain"), b"x");
        dup.producer = Some(stamp(0, 0));
        dup.stream_seq = Some("b");
        assert_eq!(decide(&s, &dup), Ok(AppendDecision::Duplicate { producer: Some((0, 0)) }));
        dup.producer = Some(stamp(0, 1));
        assert_eq!(decide(&s, &dup), Err(Error::SeqRegression));
        dup.stream_seq = Some("c");
        assert!(matches!(decide(&s, &dup), Ok(AppendDecision::Write { .. })));
        dup.producer = Some(stamp(0, 3));
        assert_eq!(decide(&s, &dup), Err(Error::ProducerGap { expected: 1, received: 3 }));
    }

    #[test]
    fn record_match() {
        let s = stream("application/json");
        let mut i = input(Some("application/json"), b"1");
        i.record_match = Some(1);
        assert_eq!(decide(&s, &i), Err(Error::RecordMismatch));
        i.record_match = Some(0);
        assert!(decide(&s, &i).is_ok());
    }
}
