//! The checkpoint: everything a shard's store holds, as of one position in
//! the journal, with every stream's bytes up to its tail in stream files.
//!
//! Layout: `SLUICECK`, a format version, the fields below, and a CRC32C of
//! everything before it. Recovery loads it and replays only the journal
//! written after `journal`; a checkpoint that does not decode or check out
//! is damage, never an empty store.

use crate::codec::{Cursor, Put};
use crate::core::body::{Body, BundleAt};
use crate::core::producer::{ProducerState, Producers};
use crate::core::stream::{Blob, Rare, Snapshot, StreamKey, StreamState, Visible};
use crate::core::ttl::Lifetime;
use crate::log::recovery::RecoveryError;
use crate::log::{ForkRecord, ProducerStamp};
use crate::tuning::CHECKPOINT_STREAM_BYTES;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// The checkpoint's file name in a shard directory.
pub const CHECKPOINT: &str = "checkpoint";
const MAGIC: &[u8; 8] = b"SLUICECK";
/// Version 5 writes a stream's numbers and lengths as LEB128, its times
/// after the first as offsets from its creation, its content type as a
/// code when it is a common one ([`COMMON_TYPES`]), and its two flags in
/// one byte (159 -> about 60 bytes for a small stream); version 4 added
/// each stream's bundle extent, version 3 the subscriptions. Versions 2
/// to 4 still load (fixed-width fields; every stream in files of its own
/// before 4, no subscriptions in 2).
const VERSION: u32 = 5;
const VERSION_BEFORE_COMPACT: u32 = 4;
const VERSION_BEFORE_BUNDLES: u32 = 3;
const VERSION_BEFORE_SUBSCRIPTIONS: u32 = 2;

/// Content types a version-5 checkpoint writes as their code (the index
/// here plus one; 0 is a literal type that follows). Append only: the
/// codes are part of the format.
const COMMON_TYPES: [&str; 6] = [
    "application/octet-stream",
    "application/json",
    "text/plain",
    "text/plain; charset=utf-8",
    "application/x-ndjson",
    "application/ndjson",
];

/// A decoded checkpoint.
#[derive(Debug)]
pub struct Checkpoint {
    /// The flush generation that wrote it.
    pub generation: u64,
    /// Journal position (segment, byte) the state includes everything before.
    pub journal: (u32, u64),
    pub next_handle: u64,
    pub home_buckets: Vec<(String, u64)>,
    /// Stream files to delete: dropped by the state this checkpoint records.
    pub doomed: Vec<String>,
    /// Subscriptions the shard owns: id and server-encoded state.
    pub subscriptions: Vec<(String, Vec<u8>)>,
}

/// What the flusher writes besides the streams.
pub struct Header<'a> {
    pub generation: u64,
    pub journal: (u32, u64),
    pub next_handle: u64,
    pub home_buckets: &'a HashMap<String, u64>,
    pub doomed: &'a [String],
    pub subscriptions: &'a BTreeMap<String, Vec<u8>>,
}

/// A checkpoint encoded a slice of streams at a time, in name order, while
/// the shard serves requests between slices (a million streams take a
/// tenth of a second to encode). It records the state at its capture all
/// the same: a stream about to change before its turn is encoded first
/// ([`Encoder::before_change`], which the store's one mutable path calls),
/// and streams created after the capture (handles from its
/// `next_handle` on) are left to the journal after it.
pub struct Encoder {
    out: Vec<u8>,
    /// CRC32C of `out[..summed]`.
    crc: u32,
    summed: usize,
    generation: u64,
    /// Streams with this handle or a later one came after the capture.
    below: u64,
    /// The last stream written, in name order.
    after: Option<Rc<StreamKey>>,
    /// Streams encoded before a change reached them, not written yet.
    early: BTreeMap<Rc<StreamKey>, Vec<u8>>,
    /// Streams still to write.
    left: u32,
    /// Everything after the streams (the subscriptions), encoded at the capture.
    end: Vec<u8>,
}

impl Encoder {
    /// Starts a checkpoint of the `streams` streams the store holds now,
    /// as they will be once the flush of `h.generation` has stored every
    /// stream's bytes up to its tail and every pending snapshot.
    pub fn new(h: &Header<'_>, streams: usize) -> Encoder {
        let mut out = crate::heap::buffer(streams.saturating_mul(CHECKPOINT_STREAM_BYTES));
        out.extend_from_slice(MAGIC);
        out.put_u32(VERSION);
        out.put_u64(h.generation);
        out.put_u32(h.journal.0);
        out.put_u64(h.journal.1);
        out.put_u64(h.next_handle);
        out.put_u32(h.home_buckets.len() as u32);
        for (b, at) in h.home_buckets {
            out.put_bytes(b.as_bytes());
            out.put_u64(*at);
        }
        out.put_u32(h.doomed.len() as u32);
        for d in h.doomed {
            out.put_bytes(d.as_bytes());
        }
        let left = u32::try_from(streams).expect("a shard holds fewer than 2^32 streams");
        out.put_u32(left);
        let mut end = Vec::new();
        end.put_u32(h.subscriptions.len() as u32);
        for (id, state) in h.subscriptions {
            end.put_bytes(id.as_bytes());
            end.put_bytes(state);
        }
        let (generation, below, after, early) = (h.generation, h.next_handle, None, BTreeMap::new());
        Encoder { out, crc: 0, summed: 0, generation, below, after, early, left, end }
    }

    /// Stream `s` at `key` is about to change: if the checkpoint holds it
    /// and has not written it yet, it is encoded now, as it was at the capture.
    pub fn before_change(&mut self, key: &Rc<StreamKey>, s: &StreamState) {
        let written = self.after.as_ref().is_some_and(|a| **a >= **key);
        if s.handle < self.below && !written && !self.early.contains_key(key) {
            let mut bytes = Vec::new();
            put_stream(&mut bytes, s, self.generation);
            self.early.insert(key.clone(), bytes);
        }
    }

    /// The last stream written: the next slice starts after it.
    pub fn after(&self) -> Option<&StreamKey> {
        self.after.as_deref()
    }

    /// Writes up to `budget` more streams: `live` is the store's streams
    /// after [`Encoder::after`], in name order. Returns whether every
    /// stream is written.
    pub fn step<'a>(
        &mut self,
        live: impl Iterator<Item = (&'a Rc<StreamKey>, &'a StreamState)>,
        budget: usize,
    ) -> bool {
        let below = self.below;
        let mut live = live.filter(|(_, s)| s.handle < below).peekable();
        for _ in 0..budget {
            let early = self.early.first_key_value().map(|(k, _)| k);
            let from_early = match (early, live.peek()) {
                (None, None) => break,
                (Some(e), Some((l, _))) => e <= *l,
                (e, _) => e.is_some(),
            };
            let key = if from_early {
                let (key, bytes) = self.early.pop_first().expect("peeked");
                // The live stream of that name was encoded before it changed.
                live.next_if(|(l, _)| **l == key);
                self.out.extend_from_slice(&bytes);
                key
            } else {
                let (key, s) = live.next().expect("peeked");
                put_stream(&mut self.out, s, self.generation);
                key.clone()
            };
            assert!(self.after.as_ref().is_none_or(|a| *a < key), "streams are written in name order, once");
            self.after = Some(key);
            self.left = self.left.checked_sub(1).expect("no more streams than the capture held");
        }
        self.crc = crc32c::crc32c_append(self.crc, &self.out[self.summed..]);
        self.summed = self.out.len();
        self.early.is_empty() && live.peek().is_none()
    }

    /// The checkpoint's bytes, once [`Encoder::step`] wrote every stream.
    pub fn finish(mut self) -> Vec<u8> {
        assert!(self.left == 0 && self.early.is_empty(), "{} streams of the capture left", self.left);
        self.out.extend_from_slice(&self.end);
        let crc = crc32c::crc32c_append(self.crc, &self.out[self.summed..]);
        self.out.put_u32(crc);
        self.out
    }
}

fn put_stream(out: &mut Vec<u8>, s: &StreamState, generation: u64) {
    out.put_var(s.handle);
    out.put_var_bytes(s.key.bucket().as_bytes());
    out.put_var_bytes(s.key.stream().as_bytes());
    match COMMON_TYPES.iter().position(|t| *t == &*s.content_type) {
        Some(i) => out.put_var(i as u64 + 1),
        None => {
            out.put_var(0);
            out.put_var_bytes(s.content_type.as_bytes());
        }
    }
    let created = s.created_ms;
    out.put_var(created);
    out.put_var(s.last_write_ms.wrapping_sub(created));
    out.put_opt_var(s.lifetime.ttl_secs);
    out.put_opt_var(s.lifetime.expires_at_ms);
    out.put_var(s.lifetime.last_access_ms.wrapping_sub(created));
    out.put_var_bytes(s.attrs());
    out.put_u8(s.closed as u8 | (s.deleted as u8) << 1);
    ProducerStamp::put_opt(out, s.closed_by());
    out.put_opt_var_bytes(s.last_stream_seq().map(str::as_bytes));
    let (writes, producers) = s.producers.entries();
    out.put_var(writes);
    out.put_var(s.producers.len() as u64);
    for (id, p) in producers {
        out.put_var_bytes(id.as_bytes());
        for v in [p.epoch, p.last_seq, p.ack.0, p.ack.1, p.ack.2, p.written] {
            out.put_var(v);
        }
    }
    let b = &s.body;
    for v in [b.base, b.base_record, s.tail(), s.records(), s.retained, s.first_message, b.index_len_after_flush()] {
        out.put_var(v);
    }
    out.put_var(BundleAt::to_word(b.bundle_after_flush()));
    // A fork's ancestors are its body's: they are recorded once, in the fork record.
    debug_assert_eq!(s.fork().map_or(&[][..], |f| &f.ancestors[..]), &b.ancestors[..]);
    ForkRecord::put_opt(out, s.fork());
    match &s.snapshot {
        Some(snap) => {
            out.put_u8(1);
            out.put_var(snap.offset);
            out.put_var_bytes(snap.content_type.as_bytes());
            out.put_var_bytes(snap.digest.as_bytes());
            out.put_var(u64::from(snap.len));
            out.put_var(match snap.blob {
                Blob::Pending(_) => generation,
                Blob::Stored(g) => g,
            });
        }
        None => out.put_u8(0),
    }
}

/// A stream's fields as the checkpoint's `version` wrote them: LEB128
/// numbers and lengths from version 5, fixed-width before it.
struct Fields<'c, 'a> {
    c: &'c mut Cursor<'a>,
    compact: bool,
}

impl<'a> Fields<'_, 'a> {
    fn num(&mut self) -> Option<u64> {
        if self.compact {
            self.c.var()
        } else {
            self.c.u64()
        }
    }
    /// A presence byte, then the value: as `put_opt_var`/`put_opt_u64` wrote it.
    fn opt<T>(&mut self, value: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        match self.c.u8()? {
            0 => Some(None),
            1 => value(self).map(Some),
            _ => None,
        }
    }
    /// A count or length written as a u32 before version 5.
    fn count(&mut self) -> Option<u64> {
        if self.compact {
            self.c.var()
        } else {
            self.c.u32().map(u64::from)
        }
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        if self.compact {
            self.c.var_bytes()
        } else {
            self.c.bytes()
        }
    }
    fn text(&mut self) -> Option<&'a str> {
        std::str::from_utf8(self.bytes()?).ok()
    }
    /// A time written after the creation time: an offset from it in version 5.
    fn time_after(&mut self, created: u64) -> Option<u64> {
        if self.compact {
            self.c.var().map(|d| created.wrapping_add(d))
        } else {
            self.c.u64()
        }
    }
    fn content_type(&mut self) -> Option<&'a str> {
        if !self.compact {
            return self.c.str();
        }
        match usize::try_from(self.c.var()?).ok()? {
            0 => self.c.var_str(),
            code => COMMON_TYPES.get(code - 1).copied(),
        }
    }
    /// Closed and deleted: one byte of two flags in version 5, a byte each before.
    fn flags(&mut self) -> Option<(bool, bool)> {
        if self.compact {
            let f = self.c.u8()?;
            return (f & !3 == 0).then_some((f & 1 != 0, f & 2 != 0));
        }
        Some((self.c.u8()? != 0, self.c.u8()? != 0))
    }
}

/// Decodes a checkpoint file, handing each stream to `stream` as it is
/// decoded (a million streams are not held twice); streams remember at most
/// `max_producers` producers each. Errors name what is wrong; streams
/// handed over before an error are to be dropped.
pub fn decode(buf: &[u8], max_producers: usize, stream: impl FnMut(StreamState)) -> Result<Checkpoint, RecoveryError> {
    decode_checked(buf, max_producers, stream).map_err(RecoveryError::from)
}

fn decode_checked(buf: &[u8], max_producers: usize, stream: impl FnMut(StreamState)) -> Result<Checkpoint, String> {
    let body_len = buf.len().checked_sub(4).ok_or("it is shorter than its checksum")?;
    let crc = u32::from_le_bytes(buf[body_len..].try_into().expect("4 bytes"));
    if crc32c::crc32c(&buf[..body_len]) != crc {
        return Err("its checksum does not match (damaged or zeroed)".into());
    }
    let mut c = Cursor::new(&buf[..body_len]);
    if c.take(8) != Some(&MAGIC[..]) {
        return Err("it is not a sluice checkpoint".into());
    }
    let version = c.u32().ok_or("truncated")?;
    if !(VERSION_BEFORE_SUBSCRIPTIONS..=VERSION).contains(&version) {
        return Err(format!("format version {version} is not {VERSION}"));
    }
    decode_fields(&mut c, max_producers, version, stream).ok_or_else(|| "a field does not decode".to_string())
}

fn decode_fields(
    c: &mut Cursor<'_>,
    max_producers: usize,
    version: u32,
    mut stream: impl FnMut(StreamState),
) -> Option<Checkpoint> {
    let generation = c.u64()?;
    let journal = (c.u32()?, c.u64()?);
    let next_handle = c.u64()?;
    let n = c.u32()?;
    let mut home_buckets = Vec::new();
    for _ in 0..n {
        home_buckets.push((c.string()?, c.u64()?));
    }
    let n = c.u32()?;
    let mut doomed = Vec::new();
    for _ in 0..n {
        doomed.push(c.string()?);
    }
    for _ in 0..c.u32()? {
        stream(get_stream(c, max_producers, version)?);
    }
    let mut subscriptions = Vec::new();
    if version > VERSION_BEFORE_SUBSCRIPTIONS {
        for _ in 0..c.u32()? {
            subscriptions.push((c.string()?, c.bytes()?.to_vec()));
        }
    }
    c.is_empty().then_some(Checkpoint { generation, journal, next_handle, home_buckets, doomed, subscriptions })
}

fn get_stream(c: &mut Cursor<'_>, max_producers: usize, version: u32) -> Option<StreamState> {
    let mut f = Fields { c, compact: version > VERSION_BEFORE_COMPACT };
    let handle = f.num()?;
    let (bucket, name, content_type) = (f.text()?, f.text()?, f.content_type()?);
    let created_ms = f.num()?;
    let last_write_ms = f.time_after(created_ms)?;
    let (ttl_secs, expires_at_ms) = (f.opt(Fields::num)?, f.opt(Fields::num)?);
    let lifetime = Lifetime { ttl_secs, expires_at_ms, last_access_ms: f.time_after(created_ms)? };
    let attrs = f.bytes()?.to_vec();
    let (closed, deleted) = f.flags()?;
    let closed_by = ProducerStamp::get_opt(f.c)?;
    let last_stream_seq = f.opt(|f| f.text().map(str::to_string))?;
    let writes = f.num()?;
    let n = f.count()?;
    let mut by_id = HashMap::new();
    for _ in 0..n {
        let id = f.text()?.to_string();
        let v: Vec<u64> = (0..6).map(|_| f.num()).collect::<Option<_>>()?;
        by_id.insert(id, ProducerState { epoch: v[0], last_seq: v[1], ack: (v[2], v[3], v[4]), written: v[5] });
    }
    let v: Vec<u64> = (0..7).map(|_| f.num()).collect::<Option<_>>()?;
    let (base, base_record, tail, records, retained, first_message) = (v[0], v[1], v[2], v[3], v[4], v[5]);
    let index_len = v[6];
    let bundle = match version > VERSION_BEFORE_BUNDLES {
        true => BundleAt::from_word(f.num()?),
        false => None,
    };
    let fork = ForkRecord::get_opt(f.c)?;
    let ancestors = fork.as_ref().map_or_else(Vec::new, |f| f.ancestors.clone());
    let consistent = ancestors.last().is_none_or(|a| (a.end, a.end_record) == (base, base_record))
        && base <= tail
        && base_record <= records
        && retained <= tail
        && first_message <= records
        && (records == base_record) == (index_len == 0)
        && (bundle.is_none() || records > base_record);
    if !consistent {
        return None;
    }
    let snapshot = match f.c.u8()? {
        0 => None,
        _ => Some(Snapshot {
            offset: f.num()?,
            content_type: f.text()?.to_string(),
            digest: f.text()?.to_string(),
            len: u32::try_from(f.count()?).ok()?,
            blob: Blob::Stored(f.num()?),
        }),
    };
    let mut body = Body::new(ancestors, base, base_record);
    (body.stored, body.stored_records, body.index_len, body.bundle) = (tail, records, index_len, bundle);
    Some(StreamState {
        handle,
        key: StreamKey::shared(bucket, name),
        json: crate::core::is_json(content_type),
        content_type: content_type.into(),
        created_ms,
        last_write_ms,
        lifetime,
        closed,
        rare: Rare { attrs, fork, closed_by, last_stream_seq }.boxed(),
        producers: Producers::restore(max_producers, writes, by_id),
        body,
        visible: Visible { tail, closed, messages: records },
        forks: 0,
        deleted,
        snapshot: snapshot.map(Box::new),
        retained,
        first_message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{AppendRecord, CreateRecord};

    fn json_stream() -> StreamState {
        let c = CreateRecord { ttl_secs: Some(60), ..CreateRecord::bare(1, "b", "s", "application/json", 100) };
        StreamState::from_create(&c)
    }

    /// A checkpoint of `streams` encoded in one slice.
    fn encode(h: &Header<'_>, streams: &[&StreamState]) -> Vec<u8> {
        let mut e = Encoder::new(h, streams.len());
        assert!(e.step(streams.iter().map(|s| (&s.key, *s)), usize::MAX), "one slice holds them all");
        e.finish()
    }

    fn header<'a>(
        buckets: &'a HashMap<String, u64>,
        doomed: &'a [String],
        subscriptions: &'a BTreeMap<String, Vec<u8>>,
    ) -> Header<'a> {
        Header { generation: 4, journal: (3, 4096), next_handle: 9, home_buckets: buckets, doomed, subscriptions }
    }

    #[test]
    fn round_trip_keeps_every_field() {
        let mut s = json_stream();
        let data = b"1\n22\n";
        s.apply_append(
            &AppendRecord {
                handle: 1,
                at_ms: 200,
                stream_seq: None,
                producer: None,
                close: false,
                messages: vec![2, 3],
                data,
            },
            16,
        );
        s.producers.record(&ProducerStamp { id: "p".into(), epoch: 2, seq: 7 }, (5, 0, 2), 16);
        s.rare_mut().last_stream_seq = Some("k".into());
        s.rare_mut().attrs = b"{\"a\":1}".to_vec();
        s.retain_from(0, 0);
        let blob = Blob::Pending(std::rc::Rc::new(b"snap".to_vec()));
        s.snapshot =
            Some(Box::new(Snapshot { offset: 2, content_type: "x/y".into(), digest: "d".into(), len: 4, blob }));
        let buckets = HashMap::from([("b".to_string(), 77)]);
        let doomed = ["0000000000000002.data".to_string()];
        s.body.freeze(false);
        let subs = BTreeMap::from([("sub-1".to_string(), b"{}".to_vec())]);
        let bytes = encode(&header(&buckets, &doomed, &subs), &[&s]);
        let mut streams = Vec::new();
        let c = decode(&bytes, 16, |s| streams.push(s)).unwrap();
        assert_eq!(c.subscriptions, [("sub-1".to_string(), b"{}".to_vec())]);
        assert_eq!((c.generation, c.journal, c.next_handle), (4, (3, 4096), 9));
        assert_eq!(c.home_buckets, [("b".to_string(), 77)]);
        assert_eq!(c.doomed, doomed);
        let r = &streams[0];
        assert_eq!((r.tail(), r.records(), r.body.stored, r.body.stored_records), (5, 2, 5, 2));
        assert_eq!(r.body.index_len, 16 + 5 + 2, "the index as the flush will leave it: a page header, one entry");
        assert_eq!(r.visible, Visible { tail: 5, closed: false, messages: 2 });
        assert_eq!(r.producers.get("p").map(|p| (p.epoch, p.last_seq, p.ack)), Some((2, 7, (5, 0, 2))));
        assert_eq!((r.last_stream_seq(), r.attrs(), r.json), (Some("k"), &b"{\"a\":1}"[..], true));
        assert_eq!(
            r.snapshot.as_ref().map(|s| s.blob.clone()),
            Some(Blob::Stored(4)),
            "pending blobs are stored by this flush"
        );
    }

    #[test]
    fn a_fork_keeps_its_origin_and_ancestors() {
        let mut c = CreateRecord::bare(4, "b", "f", "text/plain", 1);
        let ancestor =
            crate::core::body::Ancestor { shard: 1, handle: 9, start: 0, end: 5, start_record: 0, end_record: 2 };
        c.fork = Some(ForkRecord {
            parent_shard: 1,
            parent_handle: 9,
            from: "/b/src".into(),
            offset: Some(5),
            sub: 0,
            ancestors: vec![ancestor],
            retained: 3,
            first_record: 1,
        });
        let s = StreamState::from_create(&c);
        let buckets = HashMap::new();
        let mut streams = Vec::new();
        decode(&encode(&header(&buckets, &[], &BTreeMap::new()), &[&s]), 4, |s| streams.push(s)).unwrap();
        let r = &streams[0];
        assert_eq!(r.fork(), c.fork.as_ref());
        assert_eq!((&r.body.ancestors[..], r.body.base, r.tail(), r.retained), (&[ancestor][..], 5, 5, 3));
    }

    #[test]
    fn a_small_stream_takes_a_few_dozen_bytes() {
        let now = 1_796_586_659_033;
        let c = CreateRecord::bare(123_456, "bench", "idle-0000042", "application/octet-stream", now);
        let mut s = StreamState::from_create(&c);
        let data = b"0123456789";
        let messages = vec![10];
        s.apply_append(
            &AppendRecord { handle: 1, at_ms: now + 5, stream_seq: None, producer: None, close: false, messages, data },
            16,
        );
        s.body.freeze(false);
        let mut out = Vec::new();
        put_stream(&mut out, &s, 1);
        // 17 of the name, 3 of the handle, 6 of the creation time, the rest
        // small numbers and absent options (159 bytes in format 4).
        assert!(out.len() <= 56, "{} bytes", out.len());
        let mut streams = Vec::new();
        let r = get_stream(&mut Cursor::new(&out), 16, VERSION).expect("decodes");
        streams.push(r);
        let r = &streams[0];
        assert_eq!(
            (r.handle, r.key.bucket(), r.key.stream(), &*r.content_type),
            (123_456, "bench", "idle-0000042", "application/octet-stream")
        );
        assert_eq!(
            (r.created_ms, r.last_write_ms, r.lifetime.last_access_ms),
            (now, now + 5, s.lifetime.last_access_ms)
        );
        assert_eq!((r.tail(), r.records()), (10, 1));
    }

    #[test]
    fn uncommon_content_types_and_times_before_creation_survive() {
        let mut a = StreamState::from_create(&CreateRecord::bare(1, "b", "a", "application/json", 500));
        let b = StreamState::from_create(&CreateRecord::bare(2, "b", "b", "application/json", 500));
        let odd = StreamState::from_create(&CreateRecord::bare(3, "b", "c", "x/odd; v=1", 500));
        // A clock that went back between creation and a later write.
        a.last_write_ms = 100;
        a.lifetime.last_access_ms = 7;
        let buckets = HashMap::new();
        let bytes = encode(&header(&buckets, &[], &BTreeMap::new()), &[&a, &b, &odd]);
        let mut streams = Vec::new();
        decode(&bytes, 4, |s| streams.push(s)).unwrap();
        assert_eq!((streams[0].last_write_ms, streams[0].lifetime.last_access_ms), (100, 7));
        assert_eq!((&*streams[0].content_type, &*streams[1].content_type), ("application/json", "application/json"));
        assert_eq!(&*streams[2].content_type, "x/odd; v=1");
    }

    #[test]
    fn damage_is_reported_not_guessed() {
        let buckets = HashMap::new();
        let bytes = encode(&header(&buckets, &[], &BTreeMap::new()), &[]);
        let decode = |b: &[u8]| decode(b, 1, drop);
        assert!(decode(&bytes).is_ok());
        let mut flipped = bytes.clone();
        flipped[12] ^= 1;
        assert!(decode(&flipped).unwrap_err().to_string().contains("checksum"));
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(&vec![0; bytes.len()]).is_err());
        assert!(decode(&[]).is_err());
    }
}
