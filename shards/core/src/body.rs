//! Where a stream's bytes and message boundaries live, by offset and by
//! record ordinal, with no I/O.
//!
//! A stream's offsets `[0, tail)` are covered by layers, oldest first:
//! - its ancestors' stream files (a fork's inherited prefix, `[0, base)`);
//! - its own stream files (`[base, stored)`), written by the flusher: files
//!   of its own, or, while the stream is small, one extent of a bundle (a
//!   file many small streams share, see [`BundleAt`]);
//! - the chunk being flushed (`frozen`), still served from memory;
//! - the unflushed tail (`cache`), filled by appends as they are decided.
//!
//! Memory per stream is the layer bookkeeping plus the unflushed bytes and
//! their message ends; the flusher bounds the latter, whatever the
//! stream's message count. An idle stream (everything stored) holds no
//! chunk at all: its tail is where its own files end.

use crate::index::{self, IndexEnd};
use std::rc::Rc;

/// Bytes a fork inherits from one ancestor's own stream files: offsets
/// `[start, end)` holding records `[start_record, end_record)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ancestor {
    pub shard: u32,
    pub handle: u64,
    /// The ancestor's own first offset (its file position 0).
    pub start: u64,
    pub end: u64,
    /// The ancestor's own first record ordinal (its index entry 0).
    pub start_record: u64,
    pub end_record: u64,
}

/// Where a small stream's own bytes live instead of files of its own: an
/// extent of bundle file `no` at byte `at`: a header (the stream's handle,
/// u64 LE, and the extent's length, u32 LE), then what the stream's index
/// file would hold (`index_len` bytes), then what its data file would hold
/// (`[base, stored)`). An extent is written once, whole, and never
/// changes; a flush that adds to the stream writes a new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BundleAt {
    pub no: std::num::NonZeroU32,
    pub at: u32,
}

impl BundleAt {
    /// Bytes of an extent's header.
    pub const HEADER: u64 = 12;

    /// Where the extent's index starts in its bundle.
    pub fn index_pos(self) -> u64 {
        u64::from(self.at) + Self::HEADER
    }

    /// Where the extent's data starts, after an index of `index_len` bytes.
    pub fn data_pos(self, index_len: u64) -> u64 {
        self.index_pos() + index_len
    }

    /// The header of an extent of `len` bytes (header included) of stream `handle`.
    pub fn header(handle: u64, len: u64) -> [u8; Self::HEADER as usize] {
        let mut h = [0; Self::HEADER as usize];
        h[..8].copy_from_slice(&handle.to_le_bytes());
        h[8..].copy_from_slice(&u32::try_from(len).expect("an extent is smaller than 4 GiB").to_le_bytes());
        h
    }

    /// The stream and length a header names.
    pub fn parse_header(b: &[u8]) -> (u64, u64) {
        let handle = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        (handle, u64::from(u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"))))
    }

    /// The location in one word for a checkpoint (0: files of its own).
    pub fn to_word(at: Option<BundleAt>) -> u64 {
        at.map_or(0, |b| (u64::from(b.no.get()) << 32) | u64::from(b.at))
    }

    pub fn from_word(w: u64) -> Option<BundleAt> {
        let no = std::num::NonZeroU32::new((w >> 32) as u32)?;
        Some(BundleAt { no, at: w as u32 })
    }
}

/// Messages held in memory: bytes `[start, start + bytes.len())`, records
/// `[start_record, start_record + ends.len())`, each ending at `ends[i]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    pub start: u64,
    pub start_record: u64,
    pub bytes: Vec<u8>,
    pub ends: Vec<u64>,
}

impl Chunk {
    /// An empty chunk starting at `start` and record `start_record`.
    pub fn at(start: u64, start_record: u64) -> Chunk {
        Chunk { start, start_record, bytes: Vec::new(), ends: Vec::new() }
    }

    pub fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    pub fn end_record(&self) -> u64 {
        self.start_record + self.ends.len() as u64
    }

    /// Appends messages of `lengths` whose bytes are `data`.
    pub fn push(&mut self, data: &[u8], lengths: &[u32]) {
        let start = self.end();
        self.ends.extend(message_ends(start, lengths));
        let end = if lengths.is_empty() { start } else { self.ends[self.ends.len() - 1] };
        assert!(end <= crate::limits::MAX_OFFSET, "offset {end} beyond the largest offset");
        self.bytes.extend_from_slice(data);
        assert_eq!(end, self.end(), "message lengths must add up to the appended bytes");
    }

    /// End offset of record `r` (which this chunk holds).
    pub fn end_of(&self, r: u64) -> u64 {
        self.ends[(r - self.start_record) as usize]
    }

    /// The record holding `offset` (in `[start, end)`).
    pub fn record_at(&self, offset: u64) -> u64 {
        self.start_record + self.ends.partition_point(|&e| e <= offset) as u64
    }

    /// Bytes `[from, to)` (within the chunk).
    pub fn slice(&self, from: u64, to: u64) -> &[u8] {
        &self.bytes[(from - self.start) as usize..(to - self.start) as usize]
    }

    /// Start offset of record `r` (which this chunk holds).
    pub fn start_of(&self, r: u64) -> u64 {
        if r == self.start_record {
            self.start
        } else {
            self.end_of(r - 1)
        }
    }
}

/// A visible position as the index resolved it: the offset, and the record
/// that starts there when it is a message boundary (None inside a message).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    pub offset: u64,
    pub record: Option<u64>,
}

/// A stream-file layer: whose files, what they cover, and the offset and
/// record at position 0 of the data file and of the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileLayer {
    pub shard: u32,
    pub handle: u64,
    pub origin: u64,
    pub origin_record: u64,
    pub start: u64,
    pub end: u64,
    pub start_record: u64,
    pub end_record: u64,
    /// The index's length when the stream is this shard's own (an
    /// ancestor's grows as its owner flushes: its file size bounds it).
    pub index_len: Option<u64>,
    /// The bundle extent holding the index and the data, when they are
    /// not in files of their own (this shard's own small streams only).
    pub bundle: Option<BundleAt>,
}

/// The lengths of the messages a write of `data_len` bytes appends:
/// `messages`, or all the data as one message (held in `one`) when it
/// names none. One rule for a live append, a placed one and their replay.
pub fn lengths<'a>(data_len: usize, messages: &'a [u32], one: &'a mut [u32; 1]) -> &'a [u32] {
    if messages.is_empty() && data_len > 0 {
        one[0] = u32::try_from(data_len).expect("a message is shorter than 4 GiB");
        &one[..]
    } else {
        messages
    }
}

/// The end offsets of messages of `lengths` that start at `start`.
pub fn message_ends(start: u64, lengths: &[u32]) -> impl Iterator<Item = u64> + '_ {
    lengths.iter().scan(start, |end, &len| {
        assert!(len > 0, "a message has at least one byte");
        *end += u64::from(len);
        Some(*end)
    })
}

/// Where a lookup is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer<'a> {
    File(FileLayer),
    Ram(&'a Chunk),
}

/// The chunk a flush is writing, and the stream's own index and data once
/// it is stored.
#[derive(Clone, Debug)]
pub struct Frozen {
    pub chunk: Rc<Chunk>,
    /// The own index's length then.
    pub index_len: u64,
    /// Where they are then: a new bundle extent, or files of its own.
    pub bundle: Option<BundleAt>,
}

/// A stream's layers (see the module header).
#[derive(Clone, Debug, Default)]
pub struct Body {
    pub ancestors: Box<[Ancestor]>,
    pub base: u64,
    pub base_record: u64,
    /// Own stream files hold `[base, stored)` and records `[base_record, stored_records)`.
    pub stored: u64,
    pub stored_records: u64,
    /// Bytes of the own index file holding records `[base_record, stored_records)`.
    pub index_len: u64,
    /// The bundle extent holding the own index and data, when the stream
    /// has no files of its own ([`BundleAt`]).
    pub bundle: Option<BundleAt>,

    /// The chunk the flusher is writing, `[stored, chunk.end())`, and
    /// where it goes (boxed: an idle stream pays one pointer).
    pub frozen: Option<Box<Frozen>>,
    /// Decided, not yet flushed: `[frozen end or stored, tail)`; None
    /// while nothing is (made by the first append after a capture). Held
    /// in the `Rc` the capture hands the flusher, so freezing it allocates
    /// nothing (and leaves no hole among the streams' long-lived memory).
    cache: Option<Rc<Chunk>>,
}

impl Body {
    /// A body whose own bytes start at `base` (record `base_record`), after
    /// the inherited `ancestors`.
    pub fn new(ancestors: Vec<Ancestor>, base: u64, base_record: u64) -> Body {
        if let Some(last) = ancestors.last() {
            assert_eq!((last.end, last.end_record), (base, base_record), "ancestors end where the stream begins");
        }
        Body {
            ancestors: ancestors.into_boxed_slice(),
            base,
            base_record,
            stored: base,
            stored_records: base_record,
            index_len: 0,
            bundle: None,
            frozen: None,
            cache: None,
        }
    }

    /// Where the newest memory layer ends (the stream files' end when
    /// none is held): the decided tail and record count.
    fn end(&self) -> (u64, u64) {
        match (&self.cache, self.frozen.as_deref().map(|f| &f.chunk)) {
            (Some(c), _) => (c.end(), c.end_record()),
            (None, Some(f)) => (f.end(), f.end_record()),
            (None, None) => (self.stored, self.stored_records),
        }
    }

    pub fn tail(&self) -> u64 {
        self.end().0
    }

    pub fn records(&self) -> u64 {
        self.end().1
    }

    /// The decided, unflushed tail, if it holds anything.
    pub fn unflushed(&self) -> Option<&Chunk> {
        self.cache.as_deref()
    }

    /// Appends messages of `lengths` whose bytes are `data` to the unflushed
    /// tail (nothing, such as a close, makes no chunk).
    pub fn push(&mut self, data: &[u8], lengths: &[u32]) {
        if data.is_empty() && lengths.is_empty() {
            return;
        }
        let (tail, records) = self.end();
        let c = self.cache.get_or_insert_with(|| Rc::new(Chunk::at(tail, records)));
        Rc::get_mut(c).expect("only the stream holds its unflushed tail").push(data, lengths);
    }

    /// The own-file layer, as any reader (this shard's or a fork's) sees it.
    pub fn own_files(&self, shard: u32, handle: u64) -> FileLayer {
        FileLayer {
            shard,
            handle,
            origin: self.base,
            origin_record: self.base_record,
            start: self.base,
            end: self.stored,
            start_record: self.base_record,
            end_record: self.stored_records,
            index_len: Some(self.index_len),
            bundle: self.bundle,
        }
    }

    /// Whether the own bytes are in files of the stream's own (it wrote
    /// some there: a stream never goes back into a bundle).
    pub fn has_own_files(&self) -> bool {
        self.stored > self.base && self.bundle.is_none()
    }

    /// What a bundle extent of the own index and data takes once the
    /// frozen chunk is stored (header included).
    pub fn extent_len_after_flush(&self) -> u64 {
        let end = self.frozen.as_ref().map_or(self.stored, |f| f.chunk.end());
        BundleAt::HEADER + self.index_len_after_flush() + (end - self.base)
    }

    /// What a bundle extent of the own index and data as stored now takes.
    pub fn extent_len(&self) -> u64 {
        BundleAt::HEADER + self.index_len + (self.stored - self.base)
    }

    /// Where the own files' bytes are once the frozen chunk is stored.
    pub fn bundle_after_flush(&self) -> Option<BundleAt> {
        self.frozen.as_ref().map_or(self.bundle, |f| f.bundle)
    }

    /// The frozen chunk goes to extent `to` (None: files of its own).
    pub fn store_frozen_in(&mut self, to: Option<BundleAt>) {
        assert!(to.is_none() || !self.has_own_files(), "a stream with files of its own keeps them");
        self.frozen.as_mut().expect("only a frozen chunk has a destination").bundle = to;
    }

    /// Where the own index ends.
    pub fn index_end(&self) -> IndexEnd {
        IndexEnd { len: self.index_len, offset: self.stored, record: self.stored_records }
    }

    /// The own index's length once everything up to the tail is stored
    /// (right after a flush's capture froze the whole tail).
    pub fn index_len_after_flush(&self) -> u64 {
        assert!(self.cache.as_ref().is_none_or(|c| c.ends.is_empty()), "the capture froze the whole tail");
        self.frozen.as_ref().map_or(self.index_len, |f| f.index_len)
    }

    fn file_layers(&self, shard: u32, handle: u64) -> impl Iterator<Item = FileLayer> + '_ {
        let inherited = self.ancestors.iter().map(|a| FileLayer {
            shard: a.shard,
            handle: a.handle,
            origin: a.start,
            origin_record: a.start_record,
            start: a.start,
            end: a.end,
            start_record: a.start_record,
            end_record: a.end_record,
            index_len: None,
            bundle: None,
        });
        inherited.chain(std::iter::once(self.own_files(shard, handle)))
    }

    fn ram(&self) -> impl Iterator<Item = &Chunk> {
        self.frozen.as_deref().map(|f| &*f.chunk).into_iter().chain(self.cache.as_deref())
    }

    /// The layer holding byte `offset` (below the tail).
    pub fn layer_at(&self, shard: u32, handle: u64, offset: u64) -> Layer<'_> {
        assert!(offset < self.tail(), "offset {offset} is not below the tail {}", self.tail());
        if let Some(f) = self.file_layers(shard, handle).find(|f| offset >= f.start && offset < f.end) {
            return Layer::File(f);
        }
        Layer::Ram(self.ram().find(|c| offset >= c.start && offset < c.end()).expect("the layers cover [0, tail)"))
    }

    /// The memory layer holding byte `offset` (below the tail), or None
    /// when a file holds it (which file does not matter here, so the
    /// layer is looked up with no shard or handle of its own).
    pub fn ram_at(&self, offset: u64) -> Option<&Chunk> {
        match self.layer_at(0, 0, offset) {
            Layer::Ram(c) => Some(c),
            Layer::File(_) => None,
        }
    }

    /// The layer holding record `r` (below the record count).
    pub fn layer_of(&self, shard: u32, handle: u64, r: u64) -> Layer<'_> {
        assert!(r < self.records(), "record {r} is not below the record count {}", self.records());
        if let Some(f) = self.file_layers(shard, handle).find(|f| r >= f.start_record && r < f.end_record) {
            return Layer::File(f);
        }
        Layer::Ram(
            self.ram().find(|c| r >= c.start_record && r < c.end_record()).expect("the layers cover every record"),
        )
    }

    /// File pieces covering `[from, to)` up to the memory layers, and the
    /// offset where memory takes over.
    pub fn file_pieces(&self, shard: u32, handle: u64, from: u64, to: u64) -> (Vec<FileLayer>, u64) {
        let mut pieces = Vec::new();
        for f in self.file_layers(shard, handle) {
            let (a, b) = (from.max(f.start), to.min(f.end));
            if a < b {
                pieces.push(FileLayer { start: a, end: b, ..f });
            }
        }
        (pieces, from.max(self.stored).min(to))
    }

    /// Copies the in-memory bytes of `[from, to)` (all at or above `stored`).
    pub fn copy_ram(&self, from: u64, to: u64, out: &mut Vec<u8>) {
        assert!(from >= self.stored && to <= self.tail(), "[{from}, {to}) is not in memory");
        for c in self.ram() {
            let (a, b) = (from.max(c.start), to.min(c.end()));
            if a < b {
                out.extend_from_slice(c.slice(a, b));
            }
        }
    }

    /// Moves the unflushed tail into `frozen` for the flusher; returns it
    /// (None when there is nothing to flush, unless `even_empty`: a stream
    /// whose stored bytes move to another extent or into files of its own).
    /// The stream then holds no unflushed tail until its next append; the
    /// chunk goes to files of its own unless [`Body::store_frozen_in`] says.
    pub fn freeze(&mut self, even_empty: bool) -> Option<Rc<Chunk>> {
        assert!(self.frozen.is_none(), "one flush at a time");
        if self.cache.as_ref().is_none_or(|c| c.bytes.is_empty()) {
            if !even_empty {
                return None;
            }
            let (tail, records) = self.end();
            let empty = Rc::new(Chunk::at(tail, records));
            // A kept empty tail buffer stays for the next append.
            self.frozen = Some(Box::new(Frozen { chunk: empty.clone(), index_len: self.index_len, bundle: None }));
            return Some(empty);
        }
        let chunk = self.cache.take().expect("a tail with bytes");
        let index_len = index::planned(self.index_end(), &chunk.ends).len;
        self.frozen = Some(Box::new(Frozen { chunk: chunk.clone(), index_len, bundle: None }));
        Some(chunk)
    }

    /// Gives the empty unflushed tail `room`, a buffer whose pages are
    /// already mapped (`store::spares`): appends copy into it without
    /// faulting fresh memory in.
    pub fn give_room(&mut self, room: Vec<u8>) {
        assert!(
            self.cache.as_ref().is_none_or(|c| c.bytes.is_empty()) && room.is_empty(),
            "room goes to an empty tail"
        );
        let (tail, records) = self.end();
        self.cache = Some(Rc::new(Chunk { bytes: room, ..Chunk::at(tail, records) }));
    }

    /// A flush failed: the frozen chunk goes back in front of the unflushed
    /// tail, for the next flush to write again.
    pub fn thaw(&mut self) {
        let Some(mut f) = self.frozen.take().map(|f| f.chunk) else { return };
        // The tail is the stream's alone (the flusher may still hold the frozen chunk).
        let c = Rc::make_mut(&mut f);
        if let Some(after) = self.cache.take() {
            c.bytes.extend_from_slice(&after.bytes);
            c.ends.extend_from_slice(&after.ends);
        }
        self.cache = Some(f);
    }

    /// Messages of `lengths` were placed in the own files at the tail
    /// (data and index entries durable, see `record::PlacedRecord`): the
    /// files now end after them. Only a body with nothing unflushed takes
    /// a placement, so the files are contiguous.
    pub fn place(&mut self, lengths: &[u32]) {
        assert!(self.frozen.is_none(), "a placement waits for the flush of the stream's tail");
        assert!(self.bundle.is_none(), "a placement lands in files of the stream's own");
        let (tail, records) = self.end();
        assert_eq!((tail, records), (self.stored, self.stored_records), "a placement lands at the stored tail");
        let ends: Vec<u64> = message_ends(tail, lengths).collect();
        let end = ends.last().copied().unwrap_or(tail);
        assert!(end > tail && end <= crate::limits::MAX_OFFSET, "placed bytes [{tail}, {end})");
        self.index_len = index::planned(self.index_end(), &ends).len;
        self.stored = end;
        self.stored_records += ends.len() as u64;
        // An empty tail buffer (`give_room`) starts where the files now end.
        if let Some(room) = self.cache.take() {
            let room = Rc::try_unwrap(room).expect("only the stream holds its unflushed tail");
            assert!(room.bytes.is_empty(), "a placement lands after nothing unflushed");
            self.cache = Some(Rc::new(Chunk { bytes: room.bytes, ..Chunk::at(self.stored, self.stored_records) }));
        }
    }

    /// Whether nothing decided waits in memory for a flush (a placement
    /// may land at the tail).
    pub fn all_stored(&self) -> bool {
        self.frozen.is_none() && self.cache.as_ref().is_none_or(|c| c.bytes.is_empty())
    }

    /// The frozen chunk is in the stream files: serve it from there.
    pub fn stored_frozen(&mut self) {
        let Frozen { chunk: f, index_len, bundle } = *self.frozen.take().expect("a frozen chunk was flushed");
        assert_eq!((f.start, f.start_record), (self.stored, self.stored_records), "flushes are contiguous");
        self.stored = f.end();
        self.stored_records = f.end_record();
        self.index_len = index_len;
        self.bundle = bundle;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write naming no messages is one message of all its bytes;
    /// one naming them keeps them; no bytes, no message.
    #[test]
    fn a_write_without_message_lengths_is_one_message() {
        let mut one = [0];
        assert_eq!(lengths(5, &[], &mut one), [5]);
        assert_eq!(lengths(5, &[2, 3], &mut one), [2, 3]);
        assert!(lengths(0, &[], &mut one).is_empty());
    }

    fn ancestor() -> Ancestor {
        Ancestor { shard: 1, handle: 7, start: 0, end: 10, start_record: 0, end_record: 2 }
    }

    #[test]
    fn layers_cover_ancestors_files_frozen_and_cache() {
        let mut b = Body::new(vec![ancestor()], 10, 2);
        assert_eq!((b.tail(), b.records(), b.unflushed()), (10, 2, None), "no chunk before the first append");
        b.push(b"abcdef", &[2, 4]);
        assert_eq!((b.tail(), b.records()), (16, 4));
        assert_eq!(b.freeze(false).map(|c| c.end()), Some(16));
        assert_eq!((b.unflushed(), b.tail()), (None, 16), "the capture took the whole tail");
        b.push(b"xyz", &[3]);
        assert!(matches!(b.layer_at(0, 3, 9), Layer::File(f) if f.handle == 7));
        assert!(matches!(b.layer_at(0, 3, 12), Layer::Ram(c) if c.start == 10));
        assert!(matches!(b.layer_of(0, 3, 4), Layer::Ram(c) if c.start == 16));
        let mut out = Vec::new();
        b.copy_ram(11, 18, &mut out);
        assert_eq!(out, b"bcdefxy");
        b.thaw();
        let c = b.unflushed().expect("thawed");
        assert_eq!((b.frozen.is_none(), c.start, c.ends.clone()), (true, 10, vec![12, 16, 19]));
        assert!(b.freeze(false).is_some());
        assert_eq!(b.index_len_after_flush(), 16 + 5 + 3, "a page header and an entry of three lengths");
        b.stored_frozen();
        assert_eq!((b.stored, b.stored_records, b.index_len), (19, 5, 24));
        assert!(matches!(b.layer_at(0, 3, 12), Layer::File(f) if f.handle == 3 && f.start == 10));
        let (pieces, ram_from) = b.file_pieces(0, 3, 5, 18);
        assert_eq!(pieces.iter().map(|p| (p.handle, p.start, p.end)).collect::<Vec<_>>(), [(7, 5, 10), (3, 10, 18)]);
        assert_eq!(ram_from, 18);
    }

    #[test]
    fn a_placement_extends_the_files_and_moves_an_empty_tail_buffer() {
        let mut b = Body::new(vec![], 0, 0);
        b.push(b"abc", &[3]);
        assert!(!b.all_stored());
        b.freeze(false);
        b.stored_frozen();
        b.give_room(Vec::with_capacity(64));
        assert!(b.all_stored(), "an empty tail buffer holds nothing unflushed");
        let planned = index::planned(b.index_end(), &[8, 10]).len;
        b.place(&[5, 2]);
        assert_eq!((b.stored, b.stored_records, b.index_len, b.tail(), b.records()), (10, 3, planned, 10, 3));
        b.push(b"z", &[1]);
        assert_eq!((b.unflushed().map(|c| (c.start, c.start_record)), b.tail()), (Some((10, 3)), 11));
        assert!(matches!(b.layer_at(0, 1, 9), Layer::File(f) if f.end == 10));
    }

    #[test]
    #[should_panic(expected = "a placement lands at the stored tail")]
    fn a_placement_needs_nothing_unflushed() {
        let mut b = Body::new(vec![], 0, 0);
        b.push(b"abc", &[3]);
        b.place(&[4]);
    }

    #[test]
    fn chunk_finds_records_by_offset() {
        let mut c = Chunk::at(100, 5);
        c.push(b"aabbb", &[2, 3]);
        assert_eq!((c.record_at(100), c.record_at(101), c.record_at(102), c.record_at(104)), (5, 5, 6, 6));
        assert_eq!((c.end_of(6), c.start_of(6), c.start_of(5)), (105, 102, 100));
    }

    #[test]
    #[should_panic(expected = "add up")]
    fn lengths_must_match_the_bytes() {
        Chunk::at(0, 0).push(b"abc", &[2]);
    }
}
