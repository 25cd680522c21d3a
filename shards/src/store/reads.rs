//! Reads and record lookups across a stream's layers (see
//! [`crate::core::body`]): memory answers at once, stream files through the
//! record index (a binary search over its page headers, then the lengths
//! stored in one page; see [`crate::core::index`]). A lookup takes what it needs from the store, then awaits
//! file reads without holding a borrow; what it looks up lies below the
//! visible tail, where boundaries never change.

use super::{Shard, StreamKey};
use crate::core::body::{FileLayer, Layer, Point};
use crate::core::index::{page_of, Header, Page, INDEX_PAGE};
use crate::core::stream::{Blob, Snapshot};
use std::io;

/// How much one read may hold.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    pub bytes: u64,
    /// `max_bytes` was given: cut exactly (at a UTF-8 boundary for text and
    /// JSON), inside a JSON record too unless `whole_json`.
    pub exact: bool,
    /// JSON streams are read in whole messages (the base surface's arrays).
    pub whole_json: bool,
    pub records: Option<u64>,
}

/// Visible bytes `[from, end)` of a stream.
#[derive(Debug, Default)]
pub struct Span {
    pub data: Vec<u8>,
    /// Length of each message piece in `data` (JSON streams; one piece otherwise).
    pub lengths: Vec<u32>,
    pub end: u64,
    /// JSON streams: the record holding `from`, and the records starting
    /// before `end` (0 otherwise: record ordinals are a JSON extension).
    pub first: u64,
    pub next: u64,
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "the stream was deleted during the read")
}

/// The index of `f` does not hold what its layer says it does.
fn damaged(f: FileLayer, what: impl std::fmt::Display) -> io::Error {
    super::files::damaged(f, super::files::index_file_name(f), what)
}

impl Shard {
    /// Where record `r` of `key` is, or its end offset when memory holds it.
    fn locate_record(&self, key: &StreamKey, r: u64) -> io::Result<Result<u64, FileLayer>> {
        let st = self.store.borrow();
        let s = &st.streams.get(key).ok_or_else(gone)?.state;
        Ok(match s.body.layer_of(self.id as u32, s.handle, r) {
            Layer::Ram(c) => Ok(c.end_of(r)),
            Layer::File(f) => Err(f),
        })
    }

    /// End offset of record `r` (decided).
    pub async fn end_of(&self, key: &StreamKey, r: u64) -> io::Result<u64> {
        match self.locate_record(key, r)? {
            Ok(end) => Ok(end),
            Err(f) => {
                let (_, page, _) = self.index_page(f, |h| h.record <= r).await?;
                let end = r.checked_sub(page.header.record).and_then(|i| page.ends.get(i as usize));
                end.copied().ok_or_else(|| damaged(f, format_args!("no entry for record {r}")))
            }
        }
    }

    /// Offset where record `r` starts.
    pub async fn record_offset(&self, key: &StreamKey, r: u64) -> io::Result<u64> {
        match r {
            0 => Ok(0),
            _ => self.end_of(key, r - 1).await,
        }
    }

    /// The record holding byte `offset` (below the decided tail).
    pub async fn record_at(&self, key: &StreamKey, offset: u64) -> io::Result<u64> {
        Ok(self.locate(key, offset).await?.0)
    }

    /// The record holding byte `offset` (below the decided tail) and the
    /// offset where it starts, in one lookup.
    pub async fn locate(&self, key: &StreamKey, offset: u64) -> io::Result<(u64, u64)> {
        let f = {
            let st = self.store.borrow();
            let s = &st.streams.get(key).ok_or_else(gone)?.state;
            match s.body.layer_at(self.id as u32, s.handle, offset) {
                Layer::Ram(c) => {
                    let k = c.record_at(offset);
                    return Ok((k, c.start_of(k)));
                }
                Layer::File(f) => f,
            }
        };
        let (_, page, _) = self.index_page(f, |h| h.offset <= offset).await?;
        let i = page.ends.partition_point(|&e| e <= offset);
        if page.header.offset > offset || i == page.ends.len() {
            return Err(damaged(f, format_args!("no entry for offset {offset}")));
        }
        Ok((page.header.record + i as u64, page.start_at(i)))
    }

    /// The last page of `f`'s index whose header satisfies `before` (which
    /// holds for a prefix of the pages: it asks whether a page starts at or
    /// before what is sought), found by binary search over the headers, and
    /// its number, and the index's length.
    pub(super) async fn index_page(
        &self,
        f: FileLayer,
        before: impl Fn(Header) -> bool,
    ) -> io::Result<(u64, Page, u64)> {
        let len = self.files.index_len(f).await?;
        if len == 0 {
            return Err(damaged(f, "empty"));
        }
        let (mut lo, mut hi) = (0, page_of(len - 1) + 1);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if before(self.files.index_header(f, mid).await?) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Ok((lo, self.files.index_page(f, lo, len).await?, len))
    }

    /// What the index says about visible `offset` (at most the visible tail).
    pub async fn point(&self, key: &StreamKey, offset: u64) -> io::Result<Point> {
        let (tail, records) = self.visible(key)?;
        assert!(offset <= tail, "point {offset} beyond the visible tail {tail}");
        if offset == tail {
            return Ok(Point { offset, record: Some(records) });
        }
        let (k, start) = self.locate(key, offset).await?;
        Ok(Point { offset, record: (start == offset).then_some(k) })
    }

    fn visible(&self, key: &StreamKey) -> io::Result<(u64, u64)> {
        let st = self.store.borrow();
        let s = &st.streams.get(key).ok_or_else(gone)?.state;
        Ok((s.visible.tail, s.visible.messages))
    }

    /// End offsets of records `[r0, r1)`.
    pub async fn ends(&self, key: &StreamKey, r0: u64, r1: u64) -> io::Result<Vec<u64>> {
        let mut out = Vec::with_capacity((r1 - r0) as usize);
        let mut r = r0;
        while r < r1 {
            let f = {
                let st = self.store.borrow();
                let s = &st.streams.get(key).ok_or_else(gone)?.state;
                match s.body.layer_of(self.id as u32, s.handle, r) {
                    Layer::Ram(c) => {
                        let to = r1.min(c.end_record());
                        out.extend((r..to).map(|x| c.end_of(x)));
                        r = to;
                        continue;
                    }
                    Layer::File(f) => f,
                }
            };
            // The page holding record r, then the pages after it in order.
            let to = r1.min(f.end_record);
            let (mut p, mut page, len) = self.index_page(f, |h| h.record <= r).await?;
            if page.header.record > r {
                return Err(damaged(f, format_args!("no entry for record {r}")));
            }
            loop {
                let take = page.ends.iter().skip((r - page.header.record) as usize).take((to - r) as usize);
                let before = out.len();
                out.extend(take);
                r += (out.len() - before) as u64;
                if r == to {
                    break;
                }
                p += 1;
                if p * INDEX_PAGE >= len {
                    return Err(damaged(f, format_args!("no entry for record {r}")));
                }
                page = self.files.index_page(f, p, len).await?;
                if page.header.record != r {
                    return Err(damaged(f, format_args!("page {p} does not start at record {r}")));
                }
            }
        }
        Ok(out)
    }

    /// The bytes `[from, to)` (decided, below the tail). Memory is copied
    /// before any await (a flush may move it into files meanwhile); reads of
    /// a single layer copy once. File bytes are checked against their
    /// index entries (see [`super::verify`]).
    pub async fn bytes(&self, key: &StreamKey, from: u64, to: u64) -> io::Result<Vec<u8>> {
        self.bytes_into(key, from, to, Vec::new()).await
    }

    /// [`Shard::bytes`] into `out` (emptied first): a caller reading a long
    /// stream piece by piece passes the last piece's buffer back, so the
    /// reads land in memory already mapped rather than fresh pages.
    pub async fn bytes_into(&self, key: &StreamKey, from: u64, to: u64, mut out: Vec<u8>) -> io::Result<Vec<u8>> {
        out.clear();
        out.reserve((to - from) as usize);
        if from == to {
            return Ok(out);
        }
        let (pieces, ram, retained) = {
            let st = self.store.borrow();
            let s = &st.streams.get(key).ok_or_else(gone)?.state;
            let (pieces, ram_from) = s.body.file_pieces(self.id as u32, s.handle, from, to);
            if pieces.is_empty() {
                s.body.copy_ram(from, to, &mut out);
                return Ok(out);
            }
            let mut ram = Vec::new();
            if ram_from < to {
                s.body.copy_ram(ram_from, to, &mut ram);
            }
            (pieces, ram, s.retained)
        };
        for p in pieces {
            self.read_checked(p, retained, &mut out).await?;
        }
        out.extend_from_slice(&ram);
        Ok(out)
    }

    /// Reads visible bytes from `from` within `limit`: whole messages when
    /// `whole_json` applies to a JSON stream (at least one); otherwise cut at
    /// the limit when exact, or when a single message exceeds it, and at the
    /// last message boundary within it otherwise. One index lookup finds
    /// the end; JSON streams also look up the record holding `from` and the
    /// message lengths.
    pub async fn read_span(&self, key: &StreamKey, from: u64, limit: Limit) -> io::Result<Span> {
        self.read_span_into(key, from, limit, Vec::new()).await
    }

    /// [`Shard::read_span`] with its bytes read into `buf` (see [`Shard::bytes_into`]).
    pub async fn read_span_into(&self, key: &StreamKey, from: u64, limit: Limit, buf: Vec<u8>) -> io::Result<Span> {
        let (tail, records, json) = {
            let st = self.store.borrow();
            let s = &st.streams.get(key).ok_or_else(gone)?.state;
            (s.visible.tail, s.visible.messages, s.json)
        };
        assert!(from <= tail, "read from {from} beyond the visible tail {tail}");
        if from == tail {
            return Ok(Span { end: from, first: records, next: records, ..Span::default() });
        }
        let whole = json && limit.whole_json;
        let first = if json { self.record_at(key, from).await? } else { 0 };
        let mut cap = tail.min(from.saturating_add(limit.bytes));
        if let Some(n) = limit.records.filter(|n| json && first.saturating_add(*n) < records) {
            cap = cap.min(self.record_offset(key, first + n).await?);
        }
        let (end, next) = if cap == tail {
            (tail, records)
        } else {
            let (k, start) = self.locate(key, cap).await?;
            if start == cap {
                (cap, k)
            } else if limit.exact && !whole {
                (cap, k + 1)
            } else if start > from {
                (start, k)
            } else if whole {
                (self.end_of(key, k).await?, k + 1)
            } else {
                (cap, k + 1)
            }
        };
        let data = self.bytes_into(key, from, end, buf).await?;
        if !json {
            // Record ordinals are a JSON extension: one piece, no ordinals.
            return Ok(Span { lengths: vec![data.len() as u32], data, end, first: 0, next: 0 });
        }
        let mut at = from;
        let lengths = self
            .ends(key, first, next)
            .await?
            .into_iter()
            .map(|e| {
                let len = e.min(end) - at;
                at = e.min(end);
                len as u32
            })
            .collect();
        Ok(Span { data, lengths, end, first, next })
    }

    /// A snapshot's bytes, from memory or its file; a file's bytes are
    /// checked against the snapshot's digest (after a clean stop nothing
    /// else checked them).
    pub async fn snapshot_blob(&self, handle: u64, s: &Snapshot) -> io::Result<Vec<u8>> {
        match &s.blob {
            Blob::Pending(b) => Ok(b.as_ref().clone()),
            Blob::Stored(generation) => {
                let name = super::files::FileName::Snapshot(handle, *generation);
                let blob = self.files.read(self.id as u32, name, 0, s.len as usize).await?;
                if !crate::core::snapshot::holds(s, &blob) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("shard-{}/{}/{name} does not match its digest", self.id, super::files::STREAMS_DIR),
                    ));
                }
                Ok(blob)
            }
        }
    }
}
