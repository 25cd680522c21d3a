//! A shard's streams by name, and the checkpoint being encoded from them.
//!
//! Reads see the map as it is (`Deref`); every change goes through this
//! type, which first lets a checkpoint in progress encode the stream as
//! it was at the capture ([`Encoder::before_change`]). So a checkpoint of
//! a million streams is encoded in slices that requests run between
//! ([`Streams::encode_some`]), and still records one instant.

use super::checkpoint::Encoder;
use super::Entry;
use crate::core::stream::StreamKey;
use std::collections::BTreeMap;
use std::ops::{Bound, Deref};
use std::rc::Rc;

/// Streams by name, sorted so bucket listings are range scans. The name
/// is shared with the store's handle table, and entries are boxed: B-tree
/// nodes are part empty, and empty slots cost what a slot holds.
#[derive(Default)]
pub struct Streams {
    map: BTreeMap<Rc<StreamKey>, Box<Entry>>,
    /// The checkpoint being encoded, between its capture and its last slice.
    checkpoint: Option<Encoder>,
}

impl Deref for Streams {
    type Target = BTreeMap<Rc<StreamKey>, Box<Entry>>;

    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

impl Streams {
    /// The streams of `map`, with no checkpoint in progress.
    pub(crate) fn of(map: BTreeMap<Rc<StreamKey>, Box<Entry>>) -> Streams {
        Streams { map, checkpoint: None }
    }

    /// The stream at `key`, to change.
    pub fn get_mut(&mut self, key: &StreamKey) -> Option<&mut Entry> {
        self.before_change(key);
        self.map.get_mut(key).map(|e| &mut **e)
    }

    /// Every stream, to change; not while a checkpoint is encoded.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        assert!(self.checkpoint.is_none(), "streams change one at a time while a checkpoint is encoded");
        self.map.values_mut().map(|e| &mut **e)
    }

    /// Removes the stream at `key`.
    pub(crate) fn remove(&mut self, key: &StreamKey) -> Option<Box<Entry>> {
        self.before_change(key);
        self.map.remove(key)
    }

    /// Adds a stream under a name no stream holds.
    pub(crate) fn insert(&mut self, key: Rc<StreamKey>, entry: Box<Entry>) {
        let old = self.map.insert(key, entry);
        assert!(old.is_none(), "a stream replacing another is removed first");
    }

    fn before_change(&mut self, key: &StreamKey) {
        if let Some(encoder) = &mut self.checkpoint {
            if let Some((k, e)) = self.map.get_key_value(key) {
                encoder.before_change(k, &e.state);
            }
        }
    }

    /// Starts encoding a checkpoint of the streams as they are now.
    pub(crate) fn begin_checkpoint(&mut self, encoder: Encoder) {
        assert!(self.checkpoint.is_none(), "one checkpoint at a time");
        self.checkpoint = Some(encoder);
    }

    /// Encodes up to `budget` more streams of the checkpoint in progress;
    /// returns whether it holds them all.
    pub(crate) fn encode_some(&mut self, budget: usize) -> bool {
        let encoder = self.checkpoint.as_mut().expect("a checkpoint is being encoded");
        let from = encoder.after().map_or(Bound::Unbounded, Bound::Excluded);
        let live = self.map.range::<StreamKey, _>((from, Bound::Unbounded)).map(|(k, e)| (k, &e.state));
        encoder.step(live, budget)
    }

    /// Ends the checkpoint in progress, if any: its encoder, to finish
    /// once [`Streams::encode_some`] returned true, or to drop.
    pub(crate) fn end_checkpoint(&mut self) -> Option<Encoder> {
        self.checkpoint.take()
    }
}

#[cfg(test)]
mod tests {
    use super::super::checkpoint::{Encoder, Header};
    use super::super::Store;
    use crate::log::{AppendRecord, CreateRecord, Record};

    fn create(st: &mut Store, handle: u64, name: &str) {
        let c = CreateRecord {
            initial: name.as_bytes().to_vec(),
            ..CreateRecord::bare(handle, "b", name, "text/plain", 1)
        };
        st.apply(Record::Create(c));
    }

    fn append(st: &mut Store, handle: u64, data: &[u8]) {
        let (stream_seq, producer, close, messages) = (None, None, false, vec![data.len() as u32]);
        st.apply(Record::Append(AppendRecord { handle, at_ms: 2, stream_seq, producer, close, messages, data }));
    }

    fn encoder(st: &Store) -> Encoder {
        let header = Header {
            generation: 7,
            journal: (1, 4096),
            next_handle: st.next_handle,
            home_buckets: &st.home_buckets,
            doomed: &[],
            subscriptions: &st.subscriptions,
        };
        Encoder::new(&header, st.streams.len())
    }

    /// Encoded a stream a slice while streams after the last one written
    /// and before it are appended to, given attributes, deleted, created
    /// and created again under a deleted name, a checkpoint holds what it
    /// would have held encoded at once at its capture, byte for byte.
    #[test]
    fn slices_record_the_capture_whatever_changes_between_them() {
        let mut st = Store::new(0, 4);
        let names: Vec<String> = (0..40).map(|i| format!("s{i:02}")).collect();
        for (h, name) in names.iter().enumerate() {
            create(&mut st, h as u64, name);
        }
        // As a capture leaves them: every tail frozen for its flush.
        for h in 0..names.len() as u64 {
            st.by_handle(h).unwrap().state.body.freeze();
        }
        let mut whole = encoder(&st);
        assert!(whole.step(st.streams.iter().map(|(k, e)| (k, &e.state)), usize::MAX));
        let want = whole.finish();

        st.streams.begin_checkpoint(encoder(&st));
        let mut next = st.next_handle;
        let mut step = 0u64;
        while !st.streams.encode_some(1) {
            step += 1;
            let h = (step * 7) % 40;
            match step % 5 {
                0 => append(&mut st, h, b"later"),
                1 => {
                    st.apply(Record::Attrs { handle: h, attrs: b"{\"k\":1}".to_vec() });
                }
                2 if st.state_of(h).is_some() => {
                    let name = st.state_of(h).unwrap().key.stream().to_string();
                    st.apply(Record::Delete { handle: h });
                    create(&mut st, next, &name);
                    next += 1;
                }
                3 => {
                    create(&mut st, next, &format!("s{h:02}-new"));
                    next += 1;
                }
                _ => {
                    st.apply(Record::Delete { handle: h });
                }
            }
        }
        assert!(step > 30, "changes ran between {step} slices");
        let got = st.streams.end_checkpoint().unwrap().finish();
        assert!(got == want, "the sliced checkpoint differs from the one encoded at its capture");
    }
}
