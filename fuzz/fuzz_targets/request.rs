//! Whole requests, not only their parsers: the input is a run of pipelined
//! HTTP/1.1 requests. Each is parsed (head, target, Content-Length or chunked
//! body), its stream-scoped PUT/POST/GET is decided by the protocol core
//! against an in-memory stream table, and every decided record goes through
//! the log codec (encode, then decode) before it is applied, as replay
//! applies it. Nothing may panic, a refused request changes nothing, and a
//! stream rebuilt from the decoded records equals the live one.
//!
//! The seam: the server's handlers (src/handlers) run on a glommio shard
//! with its log, so this target drives the same core calls the store makes
//! (`core::create::decide`, `core::append::decide`, `StreamState::apply_append`,
//! `core::records`, `offset`, `core::cursor`, `core::ttl`) in memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::http::body::ChunkedDecoder;
use sluice::http::request::BodyKind;
use sluice::http::url::parse_target;
use sluice::http::{parse_head, Method};
use sluice_shards::core::append::{self, AppendDecision, AppendInput};
use sluice_shards::core::create::{self, CreateDecision, CreateInput};
use sluice_shards::core::cursor::{cursor_in_range, next_cursor};
use sluice_shards::core::producer::parse_producer_int;
use sluice_shards::core::records;
use sluice_shards::core::stream::StreamState;
use sluice_shards::core::ttl::{parse_rfc3339, parse_ttl, MAX_TTL_SECS};
use sluice_shards::log::record::{read_frame, Frame, Record};
use sluice_shards::log::{AppendRecord, CreateRecord, ProducerStamp};
use sluice_shards::offset::OffsetQuery;
use std::collections::HashMap;

const MAX_BODY: u64 = 1 << 16;
const MAX_PRODUCERS: usize = 4;
const NOW_MS: u64 = 1_735_689_600_000;

/// A stream and the records that built it.
struct Stream {
    state: StreamState,
    log: Vec<Vec<u8>>,
}

/// Encodes `r`, decodes it back and checks the round trip.
fn through_log(r: &Record<'_>) -> Vec<u8> {
    let mut buf = Vec::new();
    r.encode(&mut buf);
    match read_frame(&buf) {
        Frame::Record { record, .. } => assert_eq!(&record, r),
        other => panic!("decided record does not decode: {other:?}"),
    }
    buf
}

fn rebuild(log: &[Vec<u8>]) -> StreamState {
    let mut state = None;
    for frame in log {
        match read_frame(frame) {
            Frame::Record { record: Record::Create(c), .. } => {
                state = Some(StreamState::from_create(&c, 0, MAX_PRODUCERS))
            }
            Frame::Record { record: Record::Append(a), .. } => {
                let s = state.as_mut().expect("create comes first");
                s.apply_append(&a, 1, 0);
                s.publish(s.tail, s.closed);
            }
            other => panic!("unexpected frame {other:?}"),
        }
    }
    state.expect("a stream has a create record")
}

fn put(streams: &mut HashMap<String, Stream>, name: &str, h: &dyn Fn(&str) -> Option<String>, body: &[u8]) {
    let ttl_secs = match h("stream-ttl").map(|v| parse_ttl(&v)) {
        Some(None) => return,
        Some(Some(t)) if t > MAX_TTL_SECS => return,
        Some(t) => t,
        None => None,
    };
    let expires_at_ms = match h("stream-expires-at").map(|v| parse_rfc3339(&v)) {
        Some(None) => return,
        Some(t) => t,
        None => None,
    };
    let content_type = h("content-type").unwrap_or_else(|| "application/octet-stream".into());
    let closed = h("stream-closed").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let input = CreateInput { content_type: content_type.clone(), ttl_secs, expires_at_ms, closed, attrs: vec![] };
    let existing = streams.get(name).map(|s| &s.state);
    let Ok(CreateDecision::Create { data, messages }) = create::decide(existing, &input, body) else { return };
    let c = CreateRecord {
        handle: 1,
        bucket: "fuzz".into(),
        stream: name.into(),
        content_type,
        created_ms: NOW_MS,
        ttl_secs,
        expires_at_ms,
        closed,
        fork: None,
        attrs: vec![],
        initial: data,
        initial_messages: messages,
    };
    // A create and its initial body are one record, replayed as both.
    let log = vec![through_log(&Record::Create(c.clone()))];
    let mut state = StreamState::from_create(&c, 0, MAX_PRODUCERS);
    if let Some(a) = c.initial_append() {
        state.apply_append(&a, 1, 0);
        state.publish(state.tail, state.closed);
    }
    streams.insert(name.into(), Stream { state, log });
}

fn post(s: &mut Stream, h: &dyn Fn(&str) -> Option<String>, body: &[u8]) {
    let producer = match (h("producer-id"), h("producer-epoch"), h("producer-seq")) {
        (Some(id), Some(e), Some(q)) if !id.is_empty() && id.len() <= 256 => {
            let (Some(epoch), Some(seq)) = (parse_producer_int(&e), parse_producer_int(&q)) else { return };
            Some(ProducerStamp { id, epoch, seq })
        }
        (None, None, None) => None,
        _ => return,
    };
    let (ct, seq) = (h("content-type"), h("stream-seq"));
    let input = AppendInput {
        content_type: ct.as_deref(),
        body,
        close: h("stream-closed").is_some_and(|v| v.eq_ignore_ascii_case("true")),
        stream_seq: seq.as_deref(),
        producer,
        record_match: h("stream-record-match").and_then(|v| v.parse().ok()),
    };
    let before = (s.state.tail, s.state.messages.len(), s.state.closed);
    let (data, messages) = match append::decide(&s.state, &input) {
        Ok(AppendDecision::Write { data, messages }) => (data, messages),
        Ok(AppendDecision::Close) => (std::borrow::Cow::Borrowed(&[][..]), Vec::new()),
        Ok(AppendDecision::Duplicate { .. }) | Err(_) => {
            assert_eq!(before, (s.state.tail, s.state.messages.len(), s.state.closed), "refusal changed state");
            return;
        }
    };
    let a = AppendRecord {
        handle: 1,
        at_ms: NOW_MS,
        stream_seq: if data.is_empty() { None } else { input.stream_seq.map(str::to_string) },
        producer: input.producer.clone(),
        close: input.close,
        messages,
        data: &data,
    };
    s.log.push(through_log(&Record::Append(a.clone())));
    let tail = s.state.apply_append(&a, 1, 0);
    assert_eq!(tail, before.0 + data.len() as u64);
    s.state.publish(tail, s.state.closed);
}

fn get(s: &Stream, t: &sluice::http::url::Target) {
    if let Some(c) = t.param("cursor") {
        if cursor_in_range(c) {
            let _ = next_cursor(NOW_MS, Some(c), u64::from(c.len() as u32));
        }
    }
    if let Some(o) = t.param("offset") {
        let _ = OffsetQuery::parse(o);
    }
    if let Ok(Some(q)) = records::parse(|k| t.param(k)) {
        if let Ok(r) = records::resolve(&s.state, q.start) {
            assert!(r <= s.state.visible.messages);
        }
    }
}

fn one_request(streams: &mut HashMap<String, Stream>, data: &[u8]) -> Option<usize> {
    let head = parse_head(data, 4096, 32).ok()?;
    let mut body = Vec::new();
    let used = match head.body {
        BodyKind::None => head.len,
        BodyKind::Length(n) if n <= MAX_BODY && head.len + n as usize <= data.len() => {
            body.extend_from_slice(&data[head.len..head.len + n as usize]);
            head.len + n as usize
        }
        BodyKind::Length(_) => return None,
        BodyKind::Chunked => {
            let mut dec = ChunkedDecoder::new(MAX_BODY);
            let used = dec.feed(&data[head.len..], &mut body).ok()?;
            if !dec.is_done() {
                return None;
            }
            head.len + used
        }
    };
    let t = parse_target(&head.target).ok()?;
    let name = match t.segments.as_slice() {
        [v1, stream, rest @ ..] if v1 == "v1" && stream == "stream" && !rest.is_empty() => rest.join("/"),
        _ => return Some(used),
    };
    let h = |n: &str| head.header(n).map(str::to_string);
    match head.method {
        Method::Put => put(streams, &name, &h, &body),
        Method::Post => {
            if let Some(s) = streams.get_mut(&name) {
                post(s, &h, &body);
            }
        }
        Method::Get => {
            if let Some(s) = streams.get(&name) {
                get(s, &t);
            }
        }
        Method::Delete => {
            streams.remove(&name);
        }
        _ => {}
    }
    Some(used)
}

fuzz_target!(|data: &[u8]| {
    let mut streams: HashMap<String, Stream> = HashMap::new();
    let mut at = 0;
    while at < data.len() {
        match one_request(&mut streams, &data[at..]) {
            Some(used) if used > 0 => at += used,
            _ => break,
        }
    }
    for s in streams.values() {
        let again = rebuild(&s.log);
        assert_eq!(
            (again.tail, again.closed, again.messages.len()),
            (s.state.tail, s.state.closed, s.state.messages.len())
        );
        assert_eq!(again.visible, s.state.visible);
        assert_eq!(again.producers.len(), s.state.producers.len());
        let sum: u64 = s.state.messages.iter().map(|m| u64::from(m.len)).sum();
        assert_eq!(sum, s.state.tail);
    }
});
