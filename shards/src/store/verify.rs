//! Reads of stream files checked against their record index: every index
//! entry a read touches is read whole and its CRC32C compared before any of
//! its bytes are served, and the pages it walks must follow on from each
//! other (a page starts where the one before ends), so a flipped data byte
//! or a flipped record length is reported as damage, never served.
//!
//! A read that starts or ends inside an entry reads the entry's other bytes
//! only into a scratch buffer of [`READ_CHUNK`] bytes for the checksum, so
//! memory stays the bytes asked for; entries hold at most
//! [`crate::core::limits::ENTRY_BYTES`] (or one longer record), which
//! bounds the extra reading. Entries that start below the stream's
//! retention are not checked: retention may have punched their first bytes.

use super::files::{damaged, data_file_name, index_file_name, READ_CHUNK};
use super::Shard;
use crate::core::body::FileLayer;
use crate::core::index::INDEX_PAGE;
use std::io;

impl Shard {
    /// Appends the bytes of `[f.start, f.end)` to `out`, each index entry
    /// they touch checked whole unless it starts below `retained`.
    pub(super) async fn read_checked(&self, f: FileLayer, retained: u64, out: &mut Vec<u8>) -> io::Result<()> {
        let index = |what: String| damaged(f, index_file_name(f), what);
        let (mut p, mut page, len) = self.index_page(f, |h| h.offset <= f.start).await?;
        if page.header.offset > f.start {
            return Err(index(format!("no entry holds offset {}", f.start)));
        }
        let mut i = page.entries.partition_point(|e| page.ends[e.first + e.count - 1] <= f.start);
        let mut at = f.start;
        while at < f.end {
            if i == page.entries.len() {
                p += 1;
                if p * INDEX_PAGE >= len {
                    return Err(index(format!("records end at {}, before offset {}", page.end(), f.end)));
                }
                let next = self.files.index_page(f, p, len).await?;
                if (next.header.offset, next.header.record) != (page.end(), page.end_record()) {
                    return Err(index(format!(
                        "page {p} starts at offset {}, the page before ends at {}",
                        next.header.offset,
                        page.end()
                    )));
                }
                (page, i) = (next, 0);
                continue;
            }
            let e = page.entries[i];
            let (a, b) = (page.start_at(e.first), page.ends[e.first + e.count - 1]);
            if a > at {
                return Err(index(format!("no entry holds offset {at}")));
            }
            let hi = b.min(f.end);
            let before = out.len();
            self.files.read_bytes(FileLayer { start: at, end: hi, ..f }, out).await?;
            if a >= retained {
                let crc = self.crc_of(f, a, at, 0).await?;
                let crc = crc32c::crc32c_append(crc, &out[before..]);
                if self.crc_of(f, hi, b, crc).await? != e.crc {
                    let what = format!("bytes {a}..{b} do not match their index checksum");
                    return Err(damaged(f, data_file_name(f), what));
                }
            }
            (at, i) = (hi, i + 1);
        }
        Ok(())
    }

    /// `crc` extended over the bytes `[from, to)` of `f`'s data file, read
    /// in pieces into a scratch buffer.
    async fn crc_of(&self, f: FileLayer, from: u64, to: u64, mut crc: u32) -> io::Result<u32> {
        let mut scratch = Vec::new();
        let mut at = from;
        while at < to {
            let end = to.min(at + READ_CHUNK as u64);
            scratch.clear();
            self.files.read_bytes(FileLayer { start: at, end, ..f }, &mut scratch).await?;
            crc = crc32c::crc32c_append(crc, &scratch);
            at = end;
        }
        Ok(crc)
    }
}
