//! Whole-block journal writes: segments are `O_DIRECT` files, so every
//! commit is written as whole [`JOURNAL_BLOCK`]s from a block-aligned
//! buffer at a block-aligned position.
//!
//! A commit rarely ends on a block boundary. The block it ends in is kept
//! (its written bytes, the rest zeros as on disk) and written again, whole,
//! at the front of the next commit into the same segment. Rewriting it
//! puts the same bytes over the same bytes: a power loss during the
//! rewrite leaves each of its sectors old or new, which read alike, so no
//! acknowledged byte is at risk, and the zeros after the log's end stay
//! zeros (recovery's torn-tail rule, `log::recovery`). After a restart the
//! block is read back from the segment before the first commit.

use crate::tuning::JOURNAL_BLOCK;
use glommio::io::DmaFile;
use std::io;

/// One commit's bytes for one segment, starting at `pos`.
pub struct Chunk {
    pub no: u32,
    pub file: std::rc::Rc<DmaFile>,
    pub pos: u64,
    pub bytes: Vec<u8>,
}

/// The block the last commit ended in: segment, where the block starts,
/// and the bytes of it written so far.
struct Partial {
    no: u32,
    at: u64,
    bytes: Vec<u8>,
}

/// Writes chunks as whole blocks, carrying each segment's partial last block.
#[derive(Default)]
pub struct Blocks {
    partial: Option<Partial>,
}

fn block_floor(pos: u64) -> u64 {
    pos - pos % JOURNAL_BLOCK
}

impl Blocks {
    /// Writes `c` durably (per how its segment was opened). A short write
    /// is an error: the space is preallocated, so only a failing disk
    /// writes less.
    pub async fn write(&mut self, c: &Chunk) -> io::Result<()> {
        let at = block_floor(c.pos);
        let head = self.head(c, at).await?;
        debug_assert_eq!(at + head.len() as u64, c.pos);
        let end = c.pos + c.bytes.len() as u64;
        let len = (end - at).next_multiple_of(JOURNAL_BLOCK) as usize;
        let mut buf = c.file.alloc_dma_buffer(len);
        let out = buf.as_bytes_mut();
        out[..head.len()].copy_from_slice(&head);
        out[head.len()..head.len() + c.bytes.len()].copy_from_slice(&c.bytes);
        out[head.len() + c.bytes.len()..].fill(0);
        let tail_at = block_floor(end);
        let tail = out[(tail_at - at) as usize..(end - at) as usize].to_vec();
        let n = c.file.write_at(buf, at).await.map_err(io::Error::from)?;
        if n != len {
            return Err(io::Error::other(format!("short write: {n} of {len} bytes")));
        }
        self.partial = Some(Partial { no: c.no, at: tail_at, bytes: tail });
        Ok(())
    }

    /// The bytes of block `at` before `c.pos`: kept from the last commit
    /// into the segment, or read back from it (the first commit after a
    /// restart, or after a failed write).
    async fn head(&mut self, c: &Chunk, at: u64) -> io::Result<Vec<u8>> {
        let want = (c.pos - at) as usize;
        match self.partial.take() {
            Some(p) if p.no == c.no && p.at == at && p.bytes.len() == want => return Ok(p.bytes),
            Some(p) if p.no == c.no => {
                assert!(p.at + p.bytes.len() as u64 <= c.pos, "journal commits into segment {} overlap", c.no)
            }
            _ => {}
        }
        if want == 0 {
            return Ok(Vec::new());
        }
        let read = c.file.read_at_aligned(at, JOURNAL_BLOCK as usize).await.map_err(io::Error::from)?;
        if read.len() < want {
            return Err(io::Error::other(format!("segment {}: short read of the block at {at}", c.no)));
        }
        Ok(read[..want].to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::segment::create_segment;
    use crate::test_dir::TestDir;

    /// Commits of odd sizes, some through a fresh writer (a restart: the
    /// partial block is read back from the segment), land byte for byte,
    /// with zeros after the last one.
    #[test]
    fn odd_commits_and_restarts_keep_every_byte() {
        let dir = TestDir::new("blocks-odd");
        let d = dir.to_path_buf();
        let want = crate::tick::block_on(move || async move {
            let seg = create_segment(&d, 1, 8 * JOURNAL_BLOCK, true).await.unwrap();
            let mut blocks = Blocks::default();
            let (mut pos, mut want) = (0u64, Vec::new());
            for (i, len) in [1usize, 4095, 1, 5000, 3, 8191, 700].into_iter().enumerate() {
                if i % 3 == 2 {
                    blocks = Blocks::default();
                }
                let bytes: Vec<u8> = (0..len).map(|k| (i * 31 + k % 251 + 1) as u8).collect();
                want.extend_from_slice(&bytes);
                let c = Chunk { no: 1, file: seg.file.clone(), pos, bytes };
                blocks.write(&c).await.unwrap();
                pos += len as u64;
            }
            want
        });
        let got = std::fs::read(crate::log::segment::segment_path(&dir, 1)).unwrap();
        assert_eq!(got.len() as u64, 8 * JOURNAL_BLOCK);
        assert_eq!(&got[..want.len()], &want[..]);
        assert!(got[want.len()..].iter().all(|&b| b == 0), "zeros after the last commit");
    }
}
