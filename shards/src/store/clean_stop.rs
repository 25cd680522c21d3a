//! The clean-stop mark: a shard whose last act was a flush that wrote a
//! checkpoint leaves `clean-stop` in its directory, naming that checkpoint
//! (its generation and checksum). Nothing writes a stream file after that
//! flush, so every stream file is exactly what the checkpoint records.
//!
//! The next start, finding the mark valid for the checkpoint it loads,
//! trusts that: it skips the per-stream length and last-record checks (a
//! stat, two opens and two reads per stream, most of a restart with many
//! streams), keeping the rest of the decision table in [`super::restore`]
//! (doomed, extra and missing files, snapshot digests). Damage done to a
//! stream file while the server was down is then found where it matters:
//! every read checks each index entry it touches ([`super::verify`]), and
//! `sluice check` ignores the mark and checks everything.
//!
//! The mark is removed, and the removal made durable, before the shard
//! serves: a crash afterwards (a flush cut off half-way) leaves no mark, and
//! the start after it checks every stream file. A mark that does not match
//! the checkpoint (another checkpoint was installed, or either file was
//! damaged or replaced) is ignored the same way.

use crate::storage::Storage;
use std::path::Path;

/// The mark's file name in a shard directory.
pub const CLEAN_STOP: &str = "clean-stop";

/// Which checkpoint a mark vouches for: its flush generation and the
/// CRC32C stored at its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointId {
    pub generation: u64,
    pub crc: u32,
}

impl CheckpointId {
    /// The id of the encoded checkpoint `bytes` of `generation` (its last
    /// four bytes are its checksum).
    pub fn of(generation: u64, bytes: &[u8]) -> CheckpointId {
        let tail: [u8; 4] = bytes[bytes.len() - 4..].try_into().expect("a checkpoint ends with its checksum");
        CheckpointId { generation, crc: u32::from_le_bytes(tail) }
    }
}

fn checksum(id: CheckpointId) -> u32 {
    let mut bytes = CLEAN_STOP.as_bytes().to_vec();
    bytes.extend(id.generation.to_le_bytes());
    bytes.extend(id.crc.to_le_bytes());
    crc32c::crc32c(&bytes)
}

/// The mark's one line: generation, checkpoint CRC and the line's own CRC.
pub fn encode(id: CheckpointId) -> Vec<u8> {
    format!("{} {:08x} {:08x}\n", id.generation, id.crc, checksum(id)).into_bytes()
}

/// The checkpoint the mark in `dir` vouches for; `None` when there is no
/// mark, or one that does not decode (then nothing is trusted).
pub fn read(io: &Storage, dir: &Path) -> Option<CheckpointId> {
    let bytes = io.read_file(&dir.join(CLEAN_STOP)).ok()?;
    let text = std::str::from_utf8(&bytes).ok()?.strip_suffix('\n')?;
    let mut parts = text.split(' ');
    let generation = parts.next()?.parse().ok()?;
    let crc = u32::from_str_radix(parts.next()?, 16).ok()?;
    let sum = u32::from_str_radix(parts.next()?, 16).ok()?;
    let id = CheckpointId { generation, crc };
    (parts.next().is_none() && sum == checksum(id) && encode(id) == bytes).then_some(id)
}

/// Writes the mark for checkpoint `id` durably (temporary file, rename,
/// directory sync).
pub async fn write(io: &Storage, dir: &Path, id: CheckpointId) -> std::io::Result<()> {
    io.install(dir, CLEAN_STOP, encode(id)).await?;
    io.sync_dir(dir).await
}

/// Removes the mark, durably, if there is one.
pub async fn remove(io: &Storage, dir: &Path) -> std::io::Result<()> {
    match io.unlink(&dir.join(CLEAN_STOP)) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
        Ok(()) => io.sync_dir(dir).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_reads_back_and_a_damaged_one_is_none() {
        let dir = crate::test_dir::TestDir::new("clean-stop");
        let io = Storage::Real;
        assert_eq!(read(&io, &dir), None, "no mark");
        let id = CheckpointId { generation: 42, crc: 0xdead_beef };
        let line = String::from_utf8(encode(id)).unwrap();
        std::fs::write(dir.join(CLEAN_STOP), &line).unwrap();
        assert_eq!(read(&io, &dir), Some(id));
        let other_generation = line.replacen("42", "43", 1);
        let other = if line.ends_with("0\n") { '1' } else { '0' };
        let flipped_sum = format!("{}{other}\n", &line[..line.len() - 2]);
        let no_newline = line.trim_end().to_string();
        let longer = format!("{line}more\n");
        for damaged in [other_generation, flipped_sum, no_newline, longer, String::new()] {
            std::fs::write(dir.join(CLEAN_STOP), &damaged).unwrap();
            assert_eq!(read(&io, &dir), None, "{damaged:?}");
        }
    }

    #[test]
    fn the_id_is_the_checkpoints_trailing_checksum() {
        let id = CheckpointId::of(7, &[1, 2, 3, 0x78, 0x56, 0x34, 0x12]);
        assert_eq!(id, CheckpointId { generation: 7, crc: 0x1234_5678 });
    }
}
