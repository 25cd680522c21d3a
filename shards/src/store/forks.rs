//! Forks: a fork reads its inherited bytes from its ancestors' stream files
//! (any shard), so creating one costs O(1) memory and disk whatever the
//! parent's size. The parent grants a reference, flushing first so the
//! inherited range is in its files; while references remain, a deleted
//! parent stays as a tombstone (410) and its files stay.

use super::shard::Room;
use super::{ForkGrant, Shard, StoreError, StreamKey};
use crate::core::body::Ancestor;
use crate::log::Record;

impl Shard {
    /// Takes a fork reference on stream `key` at `offset` (default: the
    /// visible tail) plus the first `sub` units after it (records of a JSON
    /// stream, bytes otherwise). The fork inherits up to the last message
    /// boundary by reference and gets the rest (part of one message) copied.
    pub async fn grant_fork(
        &self,
        key: &StreamKey,
        offset: Option<u64>,
        sub: u64,
        now_ms: u64,
    ) -> Result<ForkGrant, StoreError> {
        let (handle, at, json, tail, records, retained) = {
            let mut st = self.store.borrow_mut();
            if st.is_tombstone(key) {
                return Err(StoreError::Conflict("the fork source was deleted"));
            }
            let s = &st.live(key, now_ms).ok_or(StoreError::NotFound("fork source not found"))?.state;
            let at = offset.unwrap_or(s.visible.tail);
            (s.handle, at, s.json, s.visible.tail, s.visible.messages, s.retained)
        };
        if at > tail {
            return Err(StoreError::Invalid("Stream-Fork-Offset is beyond the source tail"));
        }
        if at < retained {
            return Err(StoreError::Trimmed("Stream-Fork-Offset is older than the earliest retained offset"));
        }
        let read_failed = |e: std::io::Error| {
            tracing::error!(shard = self.id, key = %key, error = %e, "fork lookup failed");
            StoreError::ReadFailed
        };
        let point = self.point(key, at).await.map_err(read_failed)?;
        // The fork ends at `end`; it inherits up to `cut`, the last message
        // boundary at or before it, and gets `[cut, end)` copied.
        let cut = match (json, point.record) {
            (true, None) => {
                return Err(StoreError::Invalid("Stream-Fork-Offset is not a message boundary of this JSON stream"))
            }
            (true, Some(r)) if r.saturating_add(sub) > records => {
                return Err(StoreError::Invalid("Stream-Fork-Sub-Offset is past the end of the source"))
            }
            (true, Some(r)) => {
                Boundary { offset: self.record_offset(key, r + sub).await.map_err(read_failed)?, record: r + sub }
            }
            (false, _) if at.saturating_add(sub) > tail => {
                return Err(StoreError::Invalid("Stream-Fork-Sub-Offset is past the end of the source"))
            }
            (false, _) if at + sub == tail => Boundary { offset: tail, record: records },
            (false, _) => {
                let k = self.record_at(key, at + sub).await.map_err(read_failed)?;
                Boundary { offset: self.record_offset(key, k).await.map_err(read_failed)?, record: k }
            }
        };
        let end = if json { cut.offset } else { at + sub };
        let prefix = self.bytes(key, cut.offset, end).await.map_err(read_failed)?;
        let prefix_messages = if prefix.is_empty() { Vec::new() } else { vec![prefix.len() as u32] };
        self.flush_through(key, handle, cut.offset).await.map_err(StoreError::Log)?;
        let mut st = self.store.borrow_mut();
        let e = st.live(key, now_ms).filter(|e| e.state.handle == handle);
        let s = &mut e.ok_or(StoreError::NotFound("fork source not found"))?.state;
        let mut ancestors: Vec<Ancestor> = s.body.ancestors.iter().copied().filter(|a| a.start < cut.offset).collect();
        if let Some(last) = ancestors.last_mut().filter(|a| a.end > cut.offset) {
            (last.end, last.end_record) = (cut.offset, cut.record);
        }
        if cut.offset > s.body.base {
            ancestors.push(Ancestor {
                shard: self.id as u32,
                handle,
                start: s.body.base,
                end: cut.offset,
                start_record: s.body.base_record,
                end_record: cut.record,
            });
        }
        s.forks += 1;
        Ok(ForkGrant {
            parent_handle: handle,
            content_type: s.content_type.to_string(),
            ttl_secs: s.lifetime.ttl_secs,
            expires_at_ms: s.lifetime.expires_at_ms,
            ancestors,
            retained: s.retained.min(cut.offset),
            first_record: s.first_message.min(cut.record),
            prefix,
            prefix_messages,
        })
    }

    /// Counts a fork recovered on some shard against stream `handle`.
    pub fn add_fork_ref(&self, handle: u64) {
        if let Some(e) = self.store.borrow_mut().by_handle(handle) {
            e.state.forks += 1;
        }
    }

    /// After every shard has counted its forks: tombstones nobody reads any
    /// more are deleted for good.
    pub async fn purge_tombstones(&self) {
        let dead: Vec<u64> = self
            .store
            .borrow()
            .streams
            .values()
            .filter(|e| e.state.deleted && e.state.forks == 0)
            .map(|e| e.state.handle)
            .collect();
        for handle in dead {
            if self.reserve(16, Room::Frees).await.is_ok() {
                let record = Record::Delete { handle };
                self.log.append(&record);
                self.store.borrow_mut().commit(record);
            }
        }
    }

    /// Drops one fork reference; a soft-deleted stream with none left goes for good.
    pub async fn release_fork(&self, handle: u64) {
        if self.reserve(16, Room::Frees).await.is_err() {
            return;
        }
        let mut st = self.store.borrow_mut();
        let Some(e) = st.by_handle(handle) else { return };
        e.state.forks = e.state.forks.saturating_sub(1);
        if e.state.deleted && e.state.forks == 0 {
            let record = Record::Delete { handle };
            self.log.append(&record);
            st.commit(record);
        }
    }
}

/// A message boundary: its offset and the record starting there.
struct Boundary {
    offset: u64,
    record: u64,
}
