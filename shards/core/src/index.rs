//! The record index of a stream file (`<handle>.idx`), with no I/O: how it
//! is laid out, written and read.
//!
//! The index is sparse, as Kafka's offset index is: it is cut into pages of
//! [`INDEX_PAGE`] bytes, and only the start of each page says where it is in
//! the stream. A page begins with a header, the offset and the record
//! ordinal its first entry starts at (u64 LE each, absolute stream
//! coordinates), then entries until the next one does not fit, then zeros.
//! An entry covers up to [`ENTRY_RECORDS`] consecutive records (and takes
//! no more once they reach [`ENTRY_BYTES`]): their count
//! (u8, never 0), the CRC32C of their bytes (u32 LE), and each record's
//! length (LEB128). A record boundary inside a page is found by adding up
//! the stored lengths from the page's header; a page is found by a binary
//! search over the headers. A 16-byte message costs about one byte of
//! index.
//!
//! The file is append-only: a flush adds entries after the last one, and
//! starts a page only to put an entry in it, so every page holds at least
//! one. Retention punches whole pages before the one holding the first
//! retained record; a punched page reads as zeros, whose header `(0, 0)`
//! sorts before every real one, so the search never lands on it.

use crate::codec::{get_varint, put_varint, varint_len, MAX_VARINT};
pub use crate::limits::{ENTRY_BYTES, ENTRY_RECORDS, INDEX_PAGE};

/// Bytes of a page header: offset and record ordinal.
pub const PAGE_HEADER: u64 = 16;
/// Bytes of an entry before its lengths: count and CRC32C.
pub const ENTRY_HEADER: u64 = 5;

const _: () = assert!(
    PAGE_HEADER + ENTRY_HEADER + MAX_VARINT as u64 <= INDEX_PAGE,
    "a fresh page holds an entry of one record, however long"
);

/// Where an index ends: its length in bytes, and the offset and record
/// ordinal of the next record it will hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexEnd {
    pub len: u64,
    pub offset: u64,
    pub record: u64,
}

/// A page header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    pub offset: u64,
    pub record: u64,
}

impl Header {
    pub fn decode(b: &[u8]) -> Header {
        assert!(b.len() as u64 >= PAGE_HEADER, "a page header is {PAGE_HEADER} bytes");
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Header { offset: u64_at(0), record: u64_at(8) }
    }
}

/// One entry of a decoded page: its records are `ends[first..first + count]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub crc: u32,
    pub first: usize,
    pub count: usize,
}

/// A decoded page: records `[header.record, header.record + ends.len())`,
/// the first starting at `header.offset`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    pub header: Header,
    pub ends: Vec<u64>,
    pub entries: Vec<Entry>,
}

impl Page {
    pub fn end_record(&self) -> u64 {
        self.header.record + self.ends.len() as u64
    }

    /// Where the page's records end (its header's offset when it has none).
    pub fn end(&self) -> u64 {
        self.ends.last().copied().unwrap_or(self.header.offset)
    }

    /// Offset where `ends[i]`'s record starts.
    pub fn start_at(&self, i: usize) -> u64 {
        if i == 0 {
            self.header.offset
        } else {
            self.ends[i - 1]
        }
    }
}

/// The index page number holding byte `pos` of the file.
pub fn page_of(pos: u64) -> u64 {
    pos / INDEX_PAGE
}

/// What the layout asks to be written next.
enum Piece<'a> {
    Header(Header),
    Pad(u64),
    /// An entry of the records ending at `ends`, the first starting at `start`.
    Entry {
        start: u64,
        ends: &'a [u64],
    },
}

/// Lays out the entries of records ending at `ends` after `at`, calling
/// `sink` with each piece; returns where the index then ends.
fn layout<'a>(at: IndexEnd, ends: &'a [u64], mut sink: impl FnMut(Piece<'a>)) -> IndexEnd {
    let IndexEnd { mut len, mut offset, mut record } = at;
    let mut rest = ends;
    while !rest.is_empty() {
        if len % INDEX_PAGE == 0 {
            sink(Piece::Header(Header { offset, record }));
            len += PAGE_HEADER;
        }
        let room = INDEX_PAGE - len % INDEX_PAGE;
        let (mut n, mut used, mut prev) = (0, ENTRY_HEADER, offset);
        while n < rest.len() && n < ENTRY_RECORDS && prev - offset < ENTRY_BYTES {
            assert!(rest[n] > prev, "records are not empty and ends ascend");
            let l = varint_len(rest[n] - prev);
            if used + l > room {
                break;
            }
            (used, prev, n) = (used + l, rest[n], n + 1);
        }
        if n == 0 {
            sink(Piece::Pad(room));
            len += room;
            continue;
        }
        sink(Piece::Entry { start: offset, ends: &rest[..n] });
        (len, offset, record, rest) = (len + used, prev, record + n as u64, &rest[n..]);
    }
    IndexEnd { len, offset, record }
}

/// Where the index will end once the records ending at `ends` follow `at`.
pub fn planned(at: IndexEnd, ends: &[u64]) -> IndexEnd {
    layout(at, ends, |_| {})
}

/// Encodes the entries of records ending at `ends` after `at`; `bytes` are
/// the records' bytes (from `at.offset`). Returns where the index then ends.
pub fn encode(at: IndexEnd, ends: &[u64], bytes: &[u8], out: &mut Vec<u8>) -> IndexEnd {
    encode_into(at, ends, bytes, out, None)
}

/// As [`encode`], and the CRC32C of all of `bytes`, combined from the
/// entries' own (one pass over the bytes for both: a placed append's
/// journal record names its bytes by this CRC).
pub fn encode_summed(at: IndexEnd, ends: &[u64], bytes: &[u8], out: &mut Vec<u8>) -> (IndexEnd, u32) {
    let mut sum = None;
    let end = encode_into(at, ends, bytes, out, Some(&mut sum));
    (end, sum.unwrap_or(0))
}

/// The CRC32C of the bytes so far (`None`: none yet) followed by an
/// entry's bytes, `len` of them with CRC32C `crc`. The first entry's CRC is
/// the sum as it is: a combine costs about as much as the CRC of a 1 MiB
/// entry (20 squarings of a 32x32 bit matrix, `perf`: 3.9% of a 1 MiB
/// fill's server samples against 2.2% for the CRCs), and most placed
/// appends are one entry.
fn sum_with(sum: Option<u32>, crc: u32, len: usize) -> u32 {
    match sum {
        None => crc,
        Some(s) => crc32c::crc32c_combine(s, crc, len),
    }
}

fn encode_into(
    at: IndexEnd,
    ends: &[u64],
    bytes: &[u8],
    out: &mut Vec<u8>,
    mut sum: Option<&mut Option<u32>>,
) -> IndexEnd {
    assert_eq!(ends.last().map_or(0, |e| e - at.offset), bytes.len() as u64, "the bytes are the records'");
    let before = out.len() as u64;
    let end = layout(at, ends, |piece| match piece {
        Piece::Header(h) => {
            out.extend_from_slice(&h.offset.to_le_bytes());
            out.extend_from_slice(&h.record.to_le_bytes());
        }
        Piece::Pad(n) => out.resize(out.len() + n as usize, 0),
        Piece::Entry { start, ends } => {
            let data = &bytes[(start - at.offset) as usize..(ends[ends.len() - 1] - at.offset) as usize];
            out.push(ends.len() as u8);
            let crc = crc32c::crc32c(data);
            out.extend_from_slice(&crc.to_le_bytes());
            // Entries follow on from each other over all of `bytes`.
            if let Some(sum) = sum.as_deref_mut() {
                *sum = Some(sum_with(*sum, crc, data.len()));
            }
            let mut prev = start;
            for &e in ends {
                put_varint(out, e - prev);
                prev = e;
            }
        }
    });
    assert_eq!(out.len() as u64 - before, end.len - at.len, "the layout and the encoding agree");
    end
}

crate::line_error! {
    /// What is wrong with an index page, for the caller to name the file
    /// and position.
    pub struct PageError;
}

/// Decodes a page (`b` is the page, or what the file holds of it). A page
/// of zeros (hole-punched) decodes to a header `(0, 0)` and no entries.
pub fn decode_page(b: &[u8]) -> Result<Page, PageError> {
    if (b.len() as u64) < PAGE_HEADER || b.len() as u64 > INDEX_PAGE {
        return Err(format!("a page of {} bytes", b.len()).into());
    }
    let header = Header::decode(b);
    let mut page = Page { header, ..Page::default() };
    let (mut at, mut end) = (PAGE_HEADER as usize, header.offset);
    while at < b.len() && b[at] != 0 {
        let count = b[at] as usize;
        if count > ENTRY_RECORDS || at + ENTRY_HEADER as usize > b.len() {
            return Err(format!("an entry at byte {at} is damaged").into());
        }
        let crc = u32::from_le_bytes(b[at + 1..at + 5].try_into().expect("4 bytes"));
        page.entries.push(Entry { crc, first: page.ends.len(), count });
        at += ENTRY_HEADER as usize;
        for _ in 0..count {
            let (len, n) = get_varint(&b[at..]).ok_or_else(|| format!("a length at byte {at} is damaged"))?;
            end = end
                .checked_add(len)
                .filter(|&e| len > 0 && e <= crate::limits::MAX_OFFSET)
                .ok_or_else(|| format!("a length at byte {at} is out of range"))?;
            page.ends.push(end);
            at += n;
        }
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records of `lens` bytes from offset `start`: their ends and bytes.
    fn records(start: u64, lens: &[u64]) -> (Vec<u64>, Vec<u8>) {
        let mut ends = Vec::new();
        let mut end = start;
        for &l in lens {
            end += l;
            ends.push(end);
        }
        let bytes = (0..end - start).map(|i| (i % 251) as u8).collect();
        (ends, bytes)
    }

    fn pages(file: &[u8]) -> Vec<Page> {
        file.chunks(INDEX_PAGE as usize).map(|p| decode_page(p).unwrap()).collect()
    }

    /// Written in several flushes, the pages hold every record in order,
    /// each page's header where its first record starts, every entry's CRC
    /// over its records' bytes; planning agrees with writing.
    #[test]
    fn flushes_append_pages_that_decode_to_every_record() {
        let lens: Vec<u64> = (0..20_000u64).map(|i| 1 + (i * 37) % 300).collect();
        let (all_ends, all_bytes) = records(1000, &lens);
        let mut file = Vec::new();
        let mut at = IndexEnd { len: 0, offset: 1000, record: 7 };
        for part in [0..1usize, 1..5000, 5000..5001, 5001..20_000] {
            let ends = &all_ends[part.clone()];
            let from = (at.offset - 1000) as usize;
            let bytes = &all_bytes[from..(ends[ends.len() - 1] - 1000) as usize];
            let plan = planned(at, ends);
            at = encode(at, ends, bytes, &mut file);
            assert_eq!(plan, at);
            assert_eq!(file.len() as u64, at.len);
        }
        assert_eq!((at.offset, at.record), (all_ends[19_999], 20_007));
        let (mut record, mut offset) = (7, 1000);
        for p in pages(&file) {
            assert_eq!(p.header, Header { offset, record });
            assert!(!p.entries.is_empty(), "a page holds an entry");
            for e in &p.entries {
                let (start, end) = (p.start_at(e.first), p.ends[e.first + e.count - 1]);
                let data = &all_bytes[(start - 1000) as usize..(end - 1000) as usize];
                assert_eq!(crc32c::crc32c(data), e.crc);
            }
            assert_eq!(&p.ends[..], &all_ends[(record - 7) as usize..(p.end_record() - 7) as usize]);
            (record, offset) = (p.end_record(), p.end());
        }
        assert_eq!(record, 20_007);
        // About a byte and a half per record of these sizes.
        assert!(file.len() < 20_000 * 2, "{} bytes", file.len());
    }

    /// An entry that does not fit in what is left of a page starts the
    /// next page, after zero padding.
    #[test]
    fn an_entry_never_straddles_pages() {
        let (ends, bytes) = records(0, &[2, 300]);
        let mut file = vec![0u8; (INDEX_PAGE - 7) as usize];
        let at = IndexEnd { len: file.len() as u64, ..IndexEnd::default() };
        let at = encode(at, &ends, &bytes, &mut file);
        let next = INDEX_PAGE as usize;
        let crc = crc32c::crc32c(&bytes[..2]).to_le_bytes();
        assert_eq!(file[next - 7..next - 1], [&[1][..], &crc, &[2]].concat()[..], "one record fits");
        assert_eq!(file[next - 1], 0, "padding");
        assert_eq!(at.len, INDEX_PAGE + PAGE_HEADER + ENTRY_HEADER + 2, "a header and the second record");
        let p = decode_page(&file[next..]).unwrap();
        assert_eq!((p.header, p.ends), (Header { offset: 2, record: 1 }, vec![302]));
    }

    /// An entry takes no more records once their bytes reach ENTRY_BYTES;
    /// a longer record is an entry alone.
    #[test]
    fn entries_are_bounded_in_bytes() {
        let big = ENTRY_BYTES + 1;
        let (ends, bytes) = records(0, &[1000, 3000, big, 10, ENTRY_BYTES / 2, ENTRY_BYTES / 2, 1, 1]);
        let mut file = Vec::new();
        encode(IndexEnd::default(), &ends, &bytes, &mut file);
        let p = decode_page(&file).unwrap();
        let spans: Vec<u64> = p.entries.iter().map(|e| p.ends[e.first + e.count - 1] - p.start_at(e.first)).collect();
        let whole = ENTRY_BYTES / 2 * 2;
        assert_eq!(spans, vec![4000 + big, 10 + whole, 2], "an entry ends at the record reaching the bound");
        for e in &p.entries {
            let (start, end) = (p.start_at(e.first), p.ends[e.first + e.count - 1]);
            assert_eq!(crc32c::crc32c(&bytes[start as usize..end as usize]), e.crc);
        }
    }

    /// The CRC of all the bytes, combined from the entries' own, is the
    /// CRC of the bytes: over one record, many entries, pages and padding,
    /// and from a start inside a page; the index is the one `encode` writes.
    #[test]
    fn the_summed_crc_is_the_crc_of_all_the_bytes() {
        for (start_len, lens) in [
            (0, vec![1u64]),
            (0, vec![ENTRY_BYTES * 3]),
            (INDEX_PAGE - 7, vec![2, 300, ENTRY_BYTES + 1, 5]),
            (40, (0..5000u64).map(|i| 1 + (i * 37) % 300).collect()),
        ] {
            let (ends, bytes) = records(100, &lens);
            let at = IndexEnd { len: start_len, offset: 100, record: 3 };
            let (mut summed, mut plain) = (Vec::new(), Vec::new());
            let (end, crc) = encode_summed(at, &ends, &bytes, &mut summed);
            assert_eq!(end, encode(at, &ends, &bytes, &mut plain));
            assert!(summed == plain, "the same index");
            assert_eq!(crc, crc32c::crc32c(&bytes), "{} records", lens.len());
        }
    }

    #[test]
    fn zero_pages_decode_to_nothing_and_damage_is_reported() {
        let zeros = vec![0u8; INDEX_PAGE as usize];
        let p = decode_page(&zeros).unwrap();
        assert_eq!((p.header, p.ends.len()), (Header::default(), 0));
        let (ends, bytes) = records(0, &[3, 4, 5]);
        let mut page = Vec::new();
        encode(IndexEnd::default(), &ends, &bytes, &mut page);
        let mut bad = page.clone();
        bad[PAGE_HEADER as usize] = ENTRY_RECORDS as u8 + 1;
        assert!(decode_page(&bad).unwrap_err().to_string().contains("damaged"));
        let mut bad = page.clone();
        bad[PAGE_HEADER as usize + 5] = 0;
        assert!(decode_page(&bad).unwrap_err().to_string().contains("out of range"), "an empty record");
        let cut = &page[..page.len() - 1];
        assert!(decode_page(cut).unwrap_err().to_string().contains("damaged"), "an entry cut short");
        assert!(decode_page(&page[..3]).is_err());
    }
}
