//! Log record kinds and their framing: `[len u32][crc32c u32][kind u8][payload]`.
//!
//! `len` counts the kind byte and payload; the CRC covers the same bytes. A
//! zero `len` marks the unwritten (zero-filled) end of a segment. Every state
//! change a shard makes durable is one of these records.

use crate::body::Ancestor;
use crate::codec::{Cursor, Put};

/// Bytes before the kind byte: length and CRC.
pub const FRAME_HEADER: usize = 8;

/// Identity and configuration of a new stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateRecord {
    /// Shard-local handle that later records use to name the stream.
    pub handle: u64,
    pub bucket: String,
    pub stream: String,
    pub content_type: String,
    pub created_ms: u64,
    pub ttl_secs: Option<u64>,
    pub expires_at_ms: Option<u64>,
    /// Closed once created (after its initial body, if any).
    pub closed: bool,
    /// Set when the stream is a fork of another stream.
    pub fork: Option<ForkRecord>,
    /// Canonical attribute JSON ("" when none).
    pub attrs: Vec<u8>,
    /// The initial body, in the same record so a crash keeps both or neither.
    pub initial: Vec<u8>,
    /// Lengths of the messages in `initial`.
    pub initial_messages: Vec<u32>,
}

impl CreateRecord {
    /// A stream with no initial body, lifetime, fork or attributes.
    pub fn bare(handle: u64, bucket: &str, stream: &str, content_type: &str, created_ms: u64) -> CreateRecord {
        CreateRecord {
            handle,
            bucket: bucket.into(),
            stream: stream.into(),
            content_type: content_type.into(),
            created_ms,
            ttl_secs: None,
            expires_at_ms: None,
            closed: false,
            fork: None,
            attrs: vec![],
            initial: vec![],
            initial_messages: vec![],
        }
    }

    /// The initial body as the append it amounts to (none when empty).
    pub fn initial_append(&self) -> Option<AppendRecord<'_>> {
        (!self.initial.is_empty()).then(|| AppendRecord {
            handle: self.handle,
            at_ms: self.created_ms,
            stream_seq: None,
            producer: None,
            close: self.closed,
            messages: self.initial_messages.clone(),
            data: &self.initial,
        })
    }
}

/// A fork's origin: the parent it holds a reference on, the request that made
/// it (for idempotent re-creation), the ancestors' stream files it reads its
/// inherited bytes from, and the retention it inherits with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkRecord {
    pub parent_shard: u32,
    pub parent_handle: u64,
    pub from: String,
    pub offset: Option<u64>,
    pub sub: u64,
    pub ancestors: Vec<Ancestor>,
    /// The parent's earliest retained offset and first record when forked.
    pub retained: u64,
    pub first_record: u64,
}

impl ForkRecord {
    /// Encodes an optional fork origin: a presence byte, then its fields
    /// and ancestors.
    pub fn put_opt(out: &mut Vec<u8>, f: Option<&ForkRecord>) {
        let Some(f) = f else { return out.put_u8(0) };
        out.put_u8(1);
        out.put_u32(f.parent_shard);
        out.put_u64(f.parent_handle);
        out.put_bytes(f.from.as_bytes());
        out.put_opt_u64(f.offset);
        for v in [f.sub, f.retained, f.first_record] {
            out.put_u64(v);
        }
        out.put_u32(f.ancestors.len() as u32);
        for a in &f.ancestors {
            out.put_u32(a.shard);
            for v in [a.handle, a.start, a.end, a.start_record, a.end_record] {
                out.put_u64(v);
            }
        }
    }

    /// Decodes what [`ForkRecord::put_opt`] wrote (None: truncated or damaged).
    pub fn get_opt(c: &mut Cursor<'_>) -> Option<Option<ForkRecord>> {
        if c.u8()? == 0 {
            return Some(None);
        }
        let (parent_shard, parent_handle, from, offset) = (c.u32()?, c.u64()?, c.string()?, c.opt_u64()?);
        let (sub, retained, first_record) = (c.u64()?, c.u64()?, c.u64()?);
        let n = c.u32()?;
        let mut ancestors = Vec::new();
        for _ in 0..n {
            let shard = c.u32()?;
            let (handle, start, end, start_record, end_record) = (c.u64()?, c.u64()?, c.u64()?, c.u64()?, c.u64()?);
            ancestors.push(Ancestor { shard, handle, start, end, start_record, end_record });
        }
        Some(Some(ForkRecord { parent_shard, parent_handle, from, offset, sub, ancestors, retained, first_record }))
    }
}

/// Idempotent-producer identity carried by an append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerStamp {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
}

impl ProducerStamp {
    /// Encodes an optional stamp: a presence byte, then id, epoch, seq.
    pub fn put_opt(out: &mut Vec<u8>, p: Option<&ProducerStamp>) {
        match p {
            Some(p) => {
                out.put_u8(1);
                out.put_bytes(p.id.as_bytes());
                out.put_u64(p.epoch);
                out.put_u64(p.seq);
            }
            None => out.put_u8(0),
        }
    }

    /// Decodes what [`ProducerStamp::put_opt`] wrote (None: truncated or damaged).
    pub fn get_opt(c: &mut Cursor<'_>) -> Option<Option<ProducerStamp>> {
        match c.u8()? {
            0 => Some(None),
            1 => Some(Some(ProducerStamp { id: c.string()?, epoch: c.u64()?, seq: c.u64()? })),
            _ => None,
        }
    }
}

/// Bytes appended to a stream, with the state changes made atomically with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendRecord<'a> {
    pub handle: u64,
    pub at_ms: u64,
    pub stream_seq: Option<String>,
    pub producer: Option<ProducerStamp>,
    /// The append also closes the stream.
    pub close: bool,
    /// Lengths of the messages inside `data` (one entry per message).
    pub messages: Vec<u32>,
    pub data: &'a [u8],
}

/// An append whose bytes were written into the stream's data file, and
/// made durable there, before this record was: it names them (where, how
/// many, their CRC32C) instead of carrying them, so a large append reaches
/// the disk once. Recovery reads them back from the file and checks them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacedRecord {
    /// The append, its bytes aside: `data` is empty, `messages` holds the
    /// lengths of the messages in the placed bytes (one entry per message).
    pub append: AppendRecord<'static>,
    /// Where the bytes start in the stream's own data file.
    pub at: u64,
    pub len: u64,
    pub crc: u32,
}

impl PlacedRecord {
    /// The append this record amounts to, with its bytes `data` (read back
    /// from the file, or in hand when it was decided).
    pub fn with_data<'d>(&self, data: &'d [u8]) -> AppendRecord<'d> {
        assert_eq!(data.len() as u64, self.len, "a placed append's bytes are its length");
        AppendRecord { data, ..self.append.clone() }
    }
}

/// A published snapshot blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRecord<'a> {
    pub handle: u64,
    pub offset: u64,
    pub content_type: String,
    pub digest: String,
    pub body: &'a [u8],
}

/// The first record of every segment: what the previous segment held when
/// the log rolled past it, and this segment's own preallocated size. A
/// sealed segment that was truncated, zeroed or replaced by an older copy no
/// longer matches its seal, and a truncated segment no longer has its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seal {
    /// The previous segment's number (0 before the first segment).
    pub previous: u32,
    /// Bytes of records in the previous segment.
    pub len: u64,
    /// CRC32C of those bytes.
    pub crc: u32,
    /// This segment's file size.
    pub size: u64,
}

/// Encoded size of a [`Record::Seal`] frame.
pub const SEAL_FRAME: usize = FRAME_HEADER + 1 + 4 + 8 + 4 + 8;

/// Every durable state change, and the segment seals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    BucketCreate {
        bucket: String,
        at_ms: u64,
    },
    BucketDelete {
        bucket: String,
    },
    Create(CreateRecord),
    Append(AppendRecord<'a>),
    Placed(PlacedRecord),
    Delete {
        handle: u64,
    },
    /// Deleted while forks still read its bytes: answers 410 until they are gone.
    SoftDelete {
        handle: u64,
    },
    Attrs {
        handle: u64,
        attrs: Vec<u8>,
    },
    Snapshot(SnapshotRecord<'a>),
    /// Retention from `offset`, the start of record `record`.
    Retention {
        handle: u64,
        offset: u64,
        record: u64,
    },
    SnapshotDelete {
        handle: u64,
        offset: u64,
    },
    Seal(Seal),
    /// A subscription's whole state (PROTOCOL.md sections 6-7), opaque to
    /// the store: the server encodes it; the latest record for an id wins.
    SubscriptionPut {
        id: String,
        state: Vec<u8>,
    },
    /// A subscription deleted (its tombstone).
    SubscriptionDelete {
        id: String,
    },
}

const K_BUCKET_CREATE: u8 = 1;
const K_BUCKET_DELETE: u8 = 2;
const K_CREATE: u8 = 3;
const K_APPEND: u8 = 4;
const K_DELETE: u8 = 5;
const K_ATTRS: u8 = 6;
const K_SNAPSHOT: u8 = 7;
const K_RETENTION: u8 = 8;
const K_SNAPSHOT_DELETE: u8 = 9;
const K_SOFT_DELETE: u8 = 10;
const K_SEAL: u8 = 11;
const K_SUBSCRIPTION_PUT: u8 = 12;
const K_SUBSCRIPTION_DELETE: u8 = 13;
const K_PLACED: u8 = 14;
/// The highest record kind: a frame whose kind byte is above it is damaged.
pub const MAX_KIND: u8 = K_PLACED;

/// Where a record's bulk bytes (append data, snapshot body) sit inside its frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Encoded {
    pub frame_len: usize,
    /// Offset of the bulk bytes from the frame start.
    pub data_at: usize,
}

impl Record<'_> {
    /// The stream handle the record names, if it names one.
    pub fn handle(&self) -> Option<u64> {
        match self {
            Record::Create(c) => Some(c.handle),
            Record::Append(a) => Some(a.handle),
            Record::Placed(p) => Some(p.append.handle),
            Record::Snapshot(s) => Some(s.handle),
            Record::Delete { handle }
            | Record::SoftDelete { handle }
            | Record::Attrs { handle, .. }
            | Record::Retention { handle, .. }
            | Record::SnapshotDelete { handle, .. } => Some(*handle),
            Record::BucketCreate { .. }
            | Record::BucketDelete { .. }
            | Record::Seal(_)
            | Record::SubscriptionPut { .. }
            | Record::SubscriptionDelete { .. } => None,
        }
    }

    /// Appends the framed record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Encoded {
        let start = out.len();
        out.extend_from_slice(&[0; FRAME_HEADER]);
        let mut data_at = 0;
        match self {
            Record::BucketCreate { bucket, at_ms } => {
                out.put_u8(K_BUCKET_CREATE);
                out.put_bytes(bucket.as_bytes());
                out.put_u64(*at_ms);
            }
            Record::BucketDelete { bucket } => {
                out.put_u8(K_BUCKET_DELETE);
                out.put_bytes(bucket.as_bytes());
            }
            Record::Create(c) => {
                out.put_u8(K_CREATE);
                out.put_u64(c.handle);
                out.put_bytes(c.bucket.as_bytes());
                out.put_bytes(c.stream.as_bytes());
                out.put_bytes(c.content_type.as_bytes());
                out.put_u64(c.created_ms);
                out.put_opt_u64(c.ttl_secs);
                out.put_opt_u64(c.expires_at_ms);
                out.put_u8(c.closed as u8);
                ForkRecord::put_opt(out, c.fork.as_ref());
                out.put_bytes(&c.attrs);
                put_lengths(out, &c.initial_messages);
                out.put_u32(c.initial.len() as u32);
                data_at = out.len() - start;
                out.extend_from_slice(&c.initial);
            }
            Record::Append(a) => {
                out.put_u8(K_APPEND);
                put_append_head(out, a);
                out.put_u32(a.data.len() as u32);
                data_at = out.len() - start;
                out.extend_from_slice(a.data);
            }
            Record::Placed(p) => {
                out.put_u8(K_PLACED);
                put_append_head(out, &p.append);
                out.put_u64(p.at);
                out.put_u64(p.len);
                out.put_u32(p.crc);
            }
            Record::Delete { handle } => {
                out.put_u8(K_DELETE);
                out.put_u64(*handle);
            }
            Record::SoftDelete { handle } => {
                out.put_u8(K_SOFT_DELETE);
                out.put_u64(*handle);
            }
            Record::Attrs { handle, attrs } => {
                out.put_u8(K_ATTRS);
                out.put_u64(*handle);
                out.put_bytes(attrs);
            }
            Record::Snapshot(s) => {
                out.put_u8(K_SNAPSHOT);
                out.put_u64(s.handle);
                out.put_u64(s.offset);
                out.put_bytes(s.content_type.as_bytes());
                out.put_bytes(s.digest.as_bytes());
                out.put_u32(s.body.len() as u32);
                data_at = out.len() - start;
                out.extend_from_slice(s.body);
            }
            Record::Retention { handle, offset, record } => {
                out.put_u8(K_RETENTION);
                out.put_u64(*handle);
                out.put_u64(*offset);
                out.put_u64(*record);
            }
            Record::SnapshotDelete { handle, offset } => {
                out.put_u8(K_SNAPSHOT_DELETE);
                out.put_u64(*handle);
                out.put_u64(*offset);
            }
            Record::Seal(seal) => {
                out.put_u8(K_SEAL);
                out.put_u32(seal.previous);
                out.put_u64(seal.len);
                out.put_u32(seal.crc);
                out.put_u64(seal.size);
            }
            Record::SubscriptionPut { id, state } => {
                out.put_u8(K_SUBSCRIPTION_PUT);
                out.put_bytes(id.as_bytes());
                out.put_bytes(state);
            }
            Record::SubscriptionDelete { id } => {
                out.put_u8(K_SUBSCRIPTION_DELETE);
                out.put_bytes(id.as_bytes());
            }
        }
        let body = &out[start + FRAME_HEADER..];
        let len = body.len() as u32;
        let crc = crc32c::crc32c(body);
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
        out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        Encoded { frame_len: out.len() - start, data_at }
    }
}

/// What an append and a placed append encode before the bytes: every
/// field but `data`.
fn put_append_head(out: &mut Vec<u8>, a: &AppendRecord<'_>) {
    out.put_u64(a.handle);
    out.put_u64(a.at_ms);
    out.put_opt_bytes(a.stream_seq.as_deref().map(str::as_bytes));
    ProducerStamp::put_opt(out, a.producer.as_ref());
    out.put_u8(a.close as u8);
    put_lengths(out, &a.messages);
}

/// Decodes what [`put_append_head`] wrote, with `data` empty.
fn get_append_head(c: &mut Cursor<'_>, frame: usize) -> Option<AppendRecord<'static>> {
    let (handle, at_ms) = (c.u64()?, c.u64()?);
    let (stream_seq, producer, close) = (c.opt_string()?, ProducerStamp::get_opt(c)?, c.u8()? != 0);
    let messages = get_lengths(c, frame)?;
    Some(AppendRecord { handle, at_ms, stream_seq, producer, close, messages, data: &[] })
}

/// Message lengths: a count, then each.
fn put_lengths(out: &mut Vec<u8>, lengths: &[u32]) {
    out.put_u32(lengths.len() as u32);
    for m in lengths {
        out.put_u32(*m);
    }
}

/// Decodes what [`put_lengths`] wrote (a count no longer than the frame allows).
fn get_lengths(c: &mut Cursor<'_>, frame: usize) -> Option<Vec<u32>> {
    let n = c.u32()? as usize;
    let mut lengths = Vec::with_capacity(n.min(frame / 4));
    for _ in 0..n {
        lengths.push(c.u32()?);
    }
    Some(lengths)
}

/// What reading one frame from a segment found (short-lived, so the size
/// difference between variants does not matter).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A valid record; `len` is the whole frame length, `data_at` as in [`Encoded`].
    Record { record: Record<'a>, len: usize, data_at: usize },
    /// Zero-filled space: the segment's written part ends here.
    End,
    /// A short, CRC-bad or undecodable frame.
    Damaged,
}

/// Reads the frame at the start of `buf`.
pub fn read_frame(buf: &[u8]) -> Frame<'_> {
    if buf.len() < FRAME_HEADER {
        return if buf.iter().all(|b| *b == 0) { Frame::End } else { Frame::Damaged };
    }
    let len = u32::from_le_bytes(buf[0..4].try_into().expect("4")) as usize;
    let crc = u32::from_le_bytes(buf[4..8].try_into().expect("4"));
    if len == 0 && crc == 0 {
        return Frame::End;
    }
    let Some(body) = buf.get(FRAME_HEADER..FRAME_HEADER + len) else {
        return Frame::Damaged;
    };
    if len == 0 || crc32c::crc32c(body) != crc {
        return Frame::Damaged;
    }
    match decode(body) {
        Some((record, data_at)) => {
            let data_at = if data_at == 0 { 0 } else { data_at + FRAME_HEADER };
            Frame::Record { record, len: FRAME_HEADER + len, data_at }
        }
        None => Frame::Damaged,
    }
}

fn decode(body: &[u8]) -> Option<(Record<'_>, usize)> {
    let mut c = Cursor::new(body);
    let kind = c.u8()?;
    let mut data_at = 0;
    let record = match kind {
        K_BUCKET_CREATE => Record::BucketCreate { bucket: c.string()?, at_ms: c.u64()? },
        K_BUCKET_DELETE => Record::BucketDelete { bucket: c.string()? },
        K_CREATE => {
            let handle = c.u64()?;
            let bucket = c.string()?;
            let stream = c.string()?;
            let content_type = c.string()?;
            let created_ms = c.u64()?;
            let ttl_secs = c.opt_u64()?;
            let expires_at_ms = c.opt_u64()?;
            let closed = c.u8()? != 0;
            let fork = ForkRecord::get_opt(&mut c)?;
            let attrs = c.bytes()?.to_vec();
            let initial_messages = get_lengths(&mut c, body.len())?;
            let len = c.u32()? as usize;
            data_at = c.position();
            let initial = c.take(len)?.to_vec();
            Record::Create(CreateRecord {
                handle,
                bucket,
                stream,
                content_type,
                created_ms,
                ttl_secs,
                expires_at_ms,
                closed,
                fork,
                attrs,
                initial,
                initial_messages,
            })
        }
        K_APPEND => {
            let head = get_append_head(&mut c, body.len())?;
            let len = c.u32()? as usize;
            data_at = c.position();
            let data = c.take(len)?;
            Record::Append(AppendRecord { data, ..head })
        }
        K_PLACED => {
            let append = get_append_head(&mut c, body.len())?;
            let (at, len, crc) = (c.u64()?, c.u64()?, c.u32()?);
            Record::Placed(PlacedRecord { append, at, len, crc })
        }
        K_DELETE => Record::Delete { handle: c.u64()? },
        K_SOFT_DELETE => Record::SoftDelete { handle: c.u64()? },
        K_ATTRS => Record::Attrs { handle: c.u64()?, attrs: c.bytes()?.to_vec() },
        K_SNAPSHOT => {
            let handle = c.u64()?;
            let offset = c.u64()?;
            let content_type = c.string()?;
            let digest = c.string()?;
            let len = c.u32()? as usize;
            data_at = c.position();
            let body = c.take(len)?;
            Record::Snapshot(SnapshotRecord { handle, offset, content_type, digest, body })
        }
        K_RETENTION => Record::Retention { handle: c.u64()?, offset: c.u64()?, record: c.u64()? },
        K_SNAPSHOT_DELETE => Record::SnapshotDelete { handle: c.u64()?, offset: c.u64()? },
        K_SEAL => Record::Seal(Seal { previous: c.u32()?, len: c.u64()?, crc: c.u32()?, size: c.u64()? }),
        K_SUBSCRIPTION_PUT => Record::SubscriptionPut { id: c.string()?, state: c.bytes()?.to_vec() },
        K_SUBSCRIPTION_DELETE => Record::SubscriptionDelete { id: c.string()? },
        _ => return None,
    };
    c.is_empty().then_some((record, data_at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Record<'static>> {
        vec![
            Record::BucketCreate { bucket: "agents".into(), at_ms: 5 },
            Record::BucketDelete { bucket: "agents".into() },
            Record::Create(CreateRecord {
                handle: 3,
                bucket: "agents".into(),
                stream: "s/é".into(),
                content_type: "application/json".into(),
                created_ms: 9,
                ttl_secs: Some(60),
                expires_at_ms: None,
                closed: true,
                fork: Some(ForkRecord {
                    parent_shard: 1,
                    parent_handle: 7,
                    from: "/v1/stream/p".into(),
                    offset: Some(40),
                    sub: 2,
                    ancestors: vec![Ancestor { shard: 1, handle: 2, start: 0, end: 3, start_record: 0, end_record: 1 }],
                    retained: 1,
                    first_record: 1,
                }),
                attrs: br#"{"title":"t"}"#.to_vec(),
                initial: b"[1][2]".to_vec(),
                initial_messages: vec![3, 3],
            }),
            Record::Append(AppendRecord {
                handle: 3,
                at_ms: 10,
                stream_seq: Some("0007".into()),
                producer: Some(ProducerStamp { id: "p".into(), epoch: 2, seq: 9 }),
                close: true,
                messages: vec![2, 3],
                data: b"hello",
            }),
            Record::Placed(PlacedRecord {
                append: AppendRecord {
                    handle: 3,
                    at_ms: 11,
                    stream_seq: None,
                    producer: Some(ProducerStamp { id: "p".into(), epoch: 2, seq: 10 }),
                    close: false,
                    messages: vec![1 << 20],
                    data: &[],
                },
                at: 5,
                len: 1 << 20,
                crc: 0x1234_5678,
            }),
            Record::Delete { handle: 3 },
            Record::SoftDelete { handle: 3 },
            Record::Attrs { handle: 3, attrs: vec![] },
            Record::Snapshot(SnapshotRecord {
                handle: 3,
                offset: 5,
                content_type: "text/plain".into(),
                digest: "d".into(),
                body: b"snap",
            }),
            Record::Retention { handle: 3, offset: 5, record: 2 },
            Record::SnapshotDelete { handle: 3, offset: 5 },
            Record::Seal(Seal { previous: 4, len: 70_000, crc: 0xdead_beef, size: 1 << 20 }),
            Record::SubscriptionPut { id: "sub-1".into(), state: b"{}".to_vec() },
            Record::SubscriptionDelete { id: "sub-1".into() },
        ]
    }

    #[test]
    fn seal_frame_size_is_exact() {
        let mut buf = Vec::new();
        Record::Seal(Seal { previous: 1, len: 2, crc: 3, size: 4 }).encode(&mut buf);
        assert_eq!(buf.len(), SEAL_FRAME);
    }

    #[test]
    fn every_kind_round_trips() {
        for r in samples() {
            let mut buf = Vec::new();
            let enc = r.encode(&mut buf);
            assert_eq!(enc.frame_len, buf.len());
            match read_frame(&buf) {
                Frame::Record { record, len, data_at } => {
                    assert_eq!(record, r);
                    assert_eq!(len, buf.len());
                    assert_eq!(data_at, enc.data_at);
                    if let Record::Append(a) = &record {
                        assert_eq!(&buf[data_at..data_at + a.data.len()], a.data);
                    }
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn damage_is_detected() {
        let mut buf = Vec::new();
        samples()[3].encode(&mut buf);
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            assert!(!matches!(read_frame(&bad), Frame::Record { .. }), "flip at {i}");
        }
        assert_eq!(read_frame(&buf[..buf.len() - 1]), Frame::Damaged);
        assert_eq!(read_frame(&[0u8; 32]), Frame::End);
        assert_eq!(read_frame(&[0u8; 3]), Frame::End);
    }
}
