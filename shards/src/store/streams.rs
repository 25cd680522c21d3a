//! A shard's streams by name, and the flush's work in progress over them:
//! the capture's pass and the checkpoint being encoded.
//!
//! Reads see the map as it is (`Deref`); every change goes through this
//! type, which first has a pass in progress visit the stream if it has not
//! yet ([`Pass::visit`]), then lets a checkpoint in progress encode the
//! stream as it was at the capture ([`Encoder::before_change`]). So a
//! flush of a burst of a hundred thousand streams, and a checkpoint of a
//! million, run in slices that requests run between
//! ([`super::Store::pass_some`], [`Streams::encode_some`]), and still
//! take one instant. It also counts, as streams come and go, the streams
//! reading each ancestor's files (forks), so nothing walks every stream to
//! learn which files are still read ([`Streams::inherits`]), and what the
//! streams' own files hold ([`Streams::file_bytes`]).

use super::bundles::Bundles;
use super::checkpoint::Encoder;
use super::file_sum::{held_in_files, FileSum};
use super::pass::Pass;
use super::Entry;
use crate::core::body::BundleAt;
use crate::core::stream::StreamKey;
use crate::handles::HandleMap;
use std::collections::{BTreeMap, HashMap};
use std::ops::{Bound, Deref};
use std::rc::Rc;

/// Streams by name, sorted so bucket listings are range scans. The name
/// is shared with the store's handle table, and entries are boxed: B-tree
/// nodes are part empty, and empty slots cost what a slot holds.
pub struct Streams {
    map: BTreeMap<Rc<StreamKey>, Box<Entry>>,
    /// The capture's pass, until every stream it named is visited.
    pass: Option<Pass>,
    /// The checkpoint being encoded, between its capture and its last slice.
    checkpoint: Option<Encoder>,
    /// Streams here whose bodies begin with the files of (shard, handle),
    /// by ancestor (a fork's ancestors are fixed at its create).
    inherited: HashMap<(u32, u64), u32>,
    /// What the streams' own files hold ([`Streams::file_bytes`]).
    files: FileSum,
    /// The bundles small streams' extents are in, kept as extents come
    /// and go ([`super::bundles`]).
    pub(crate) bundles: Bundles,
}

impl Default for Streams {
    fn default() -> Streams {
        let (map, inherited, files) = Default::default();
        let bundles = Bundles::new(0, 1);
        Streams { map, pass: None, checkpoint: None, inherited, files, bundles }
    }
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
        let mut streams = Streams { map: BTreeMap::new(), ..Streams::default() };
        let mut files = 0;
        for e in map.values() {
            streams.count_ancestors(e, true);
            files += held_in_files(e);
            if let Some(at) = e.state.body.bundle {
                streams.bundles.joined(at, e.state.body.extent_len());
            }
        }
        streams.files = FileSum::summed(files);
        streams.map = map;
        streams
    }

    /// What every stream's own files hold ([`super::file_sum`]); `handles`
    /// names the stream of a handle.
    pub(crate) fn file_bytes(&mut self, handles: &HandleMap<Rc<StreamKey>>) -> u64 {
        let map = &self.map;
        self.files.total(live(map, handles), map.values().map(|e| &**e))
    }

    /// Changes the stream at `key` with `change`, as [`Streams::get_mut`]
    /// does, and puts it back into the files' sum at once
    /// ([`FileSum::settle`]): the flush, storing a tail.
    pub(crate) fn change_settled(&mut self, key: &StreamKey, change: impl FnOnce(&mut Entry)) {
        if let Some(e) = self.map.get_mut(key) {
            before_change(&mut self.pass, &mut self.checkpoint, &mut self.files, &mut self.bundles, e);
            let was = (e.state.body.bundle, e.state.body.extent_len());
            change(e);
            let now = (e.state.body.bundle, e.state.body.extent_len());
            if was != now {
                if let (Some(at), len) = was {
                    self.bundles.left(at, len);
                }
                if let (Some(at), len) = now {
                    self.bundles.joined(at, len);
                }
            }
            self.files.settle(e);
        }
    }

    /// The streams whose extents `bytes`, the first bytes of bundle `no`,
    /// hold, which the next flush moves out of it ([`Bundles::compact`]);
    /// `handles` names the stream of a handle.
    pub(crate) fn compact_bundle(&mut self, handles: &HandleMap<Rc<StreamKey>>, no: u32, bytes: &[u8]) -> Vec<u64> {
        let live = live(&self.map, handles);
        let is_at = |h: u64, at: BundleAt| live(h).is_some_and(|e| e.state.body.bundle == Some(at));
        self.bundles.compact(no, bytes, is_at)
    }

    /// Asserts the files' sum is what a walk finds (debug builds).
    #[cfg(debug_assertions)]
    pub(crate) fn check_file_bytes(&self, handles: &HandleMap<Rc<StreamKey>>) {
        self.files.check(live(&self.map, handles), self.map.values().map(|e| &**e));
    }

    /// Whether a stream here reads the files of stream `handle` of `shard`
    /// as its ancestor's.
    pub fn inherits(&self, shard: u32, handle: u64) -> bool {
        self.inherited.contains_key(&(shard, handle))
    }

    /// Counts `e`'s ancestors in (`add`) or out of [`Streams::inherited`].
    fn count_ancestors(&mut self, e: &Entry, add: bool) {
        for a in e.state.body.ancestors.iter() {
            let n = self.inherited.entry((a.shard, a.handle)).or_insert(0);
            match add {
                true => *n += 1,
                false => {
                    assert!(*n > 0, "a removed fork's ancestors were counted");
                    *n -= 1;
                    if *n == 0 {
                        self.inherited.remove(&(a.shard, a.handle));
                    }
                }
            }
        }
    }

    /// The stream at `key`, to change.
    pub fn get_mut(&mut self, key: &StreamKey) -> Option<&mut Entry> {
        let e = self.map.get_mut(key)?;
        before_change(&mut self.pass, &mut self.checkpoint, &mut self.files, &mut self.bundles, e);
        Some(&mut **e)
    }

    /// Every stream, to change; not while a flush passes over them or
    /// encodes a checkpoint.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Entry> {
        assert!(self.pass.is_none(), "streams change one at a time while a flush passes over them");
        assert!(self.checkpoint.is_none(), "streams change one at a time while a checkpoint is encoded");
        self.files.forget();
        self.map.values_mut().map(|e| &mut **e)
    }

    /// Removes the stream at `key`.
    pub(crate) fn remove(&mut self, key: &StreamKey) -> Option<Box<Entry>> {
        self.get_mut(key)?;
        let removed = self.map.remove(key).expect("the stream is here");
        self.count_ancestors(&removed, false);
        if let Some(at) = removed.state.body.bundle {
            self.bundles.left(at, removed.state.body.extent_len());
        }
        self.bundles.gone(removed.state.handle);
        Some(removed)
    }

    /// Adds a stream under a name no stream holds.
    pub(crate) fn insert(&mut self, key: Rc<StreamKey>, entry: Box<Entry>) {
        self.count_ancestors(&entry, true);
        self.files.added(entry.state.handle);
        let old = self.map.insert(key, entry);
        assert!(old.is_none(), "a stream replacing another is removed first");
    }

    /// Has the pass in progress visit the stream at `key`, unless it did
    /// (or has no work for it).
    pub(crate) fn visit(&mut self, key: &StreamKey) {
        if let (Some(pass), Some(e)) = (&mut self.pass, self.map.get_mut(key)) {
            visit(pass, &mut self.files, &mut self.bundles, e);
        }
    }

    /// Starts a capture's pass over the streams as they are now.
    pub(crate) fn begin_pass(&mut self, pass: Pass) {
        assert!(self.pass.is_none(), "one pass at a time");
        self.pass = Some(pass);
    }

    /// The pass in progress.
    pub(crate) fn pass(&mut self) -> &mut Pass {
        self.pass.as_mut().expect("a pass is in progress")
    }

    /// Ends the pass in progress, if any.
    pub(crate) fn end_pass(&mut self) -> Option<Pass> {
        self.pass.take()
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

/// The live stream of a handle in `map`, found through `handles`.
fn live<'a>(
    map: &'a BTreeMap<Rc<StreamKey>, Box<Entry>>,
    handles: &'a HandleMap<Rc<StreamKey>>,
) -> impl Fn(u64) -> Option<&'a Entry> {
    move |h| handles.get(&h).and_then(|k| map.get(k)).filter(|e| e.state.handle == h).map(|e| &**e)
}

/// Readies `e` for a change: the pass in progress visits it first (the
/// checkpoint records the stream as the flush leaves it, its tail frozen),
/// then the checkpoint in progress encodes it as it was at the capture.
fn before_change(
    pass: &mut Option<Pass>,
    checkpoint: &mut Option<Encoder>,
    files: &mut FileSum,
    bundles: &mut Bundles,
    e: &mut Entry,
) {
    files.unsum(e);
    if let Some(pass) = pass {
        visit(pass, files, bundles, e);
    }
    if let Some(encoder) = checkpoint {
        encoder.before_change(&e.state.key, &e.state);
    }
}

/// Has `pass` visit `e` if it holds it and has not yet.
fn visit(pass: &mut Pass, files: &mut FileSum, bundles: &mut Bundles, e: &mut Entry) {
    if pass.holds(e.state.handle) {
        // A visit hands retention's punch to the flush (`Entry::punched`).
        files.unsum(e);
        pass.visit(e, bundles);
    }
}

#[cfg(test)]
mod tests {
    use super::super::checkpoint::{Encoder, Header};
    use super::super::pass::Pass;
    use super::super::spares::Spares;
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

    /// Change `step` of a churn over streams 0-39 and new ones from `next`:
    /// an append, attributes, a delete and a create under the same name, a
    /// create under a new name, a delete.
    fn change(st: &mut Store, step: u64, next: &mut u64) {
        let h = (step * 7) % 40;
        match step % 5 {
            0 => append(st, h, b"later"),
            1 => {
                st.apply(Record::Attrs { handle: h, attrs: b"{\"k\":1}".to_vec() });
            }
            2 if st.state_of(h).is_some() => {
                let name = st.state_of(h).unwrap().key.stream().to_string();
                st.apply(Record::Delete { handle: h });
                create(st, *next, &name);
                append(st, *next, b"new");
                *next += 1;
            }
            3 => {
                create(st, *next, &format!("s{h:02}-new"));
                *next += 1;
            }
            _ => {
                st.apply(Record::Delete { handle: h });
            }
        }
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
            st.by_handle(h).unwrap().state.body.freeze(false);
        }
        let mut whole = encoder(&st);
        assert!(whole.step(st.streams.iter().map(|(k, e)| (k, &e.state)), usize::MAX));
        let want = whole.finish();

        st.streams.begin_checkpoint(encoder(&st));
        let mut next = st.next_handle;
        let mut step = 0u64;
        while !st.streams.encode_some(1) {
            step += 1;
            change(&mut st, step, &mut next);
        }
        assert!(step > 30, "changes ran between {step} slices");
        let got = st.streams.end_checkpoint().unwrap().finish();
        assert!(got == want, "the sliced checkpoint differs from the one encoded at its capture");
    }

    /// The streams reading each ancestor's files are counted as forks are
    /// created and deleted, and again when the map is rebuilt (a restart).
    #[test]
    fn ancestors_are_counted_as_forks_come_and_go() {
        use crate::core::body::Ancestor;
        use crate::log::ForkRecord;
        let fork = |handle: u64, name: &str, parent: u64| {
            let ancestor = Ancestor { shard: 1, handle: parent, start: 0, end: 5, start_record: 0, end_record: 1 };
            let fork = ForkRecord {
                parent_shard: 1,
                parent_handle: parent,
                from: "/b/src".into(),
                offset: Some(5),
                sub: 0,
                ancestors: vec![ancestor],
                retained: 0,
                first_record: 0,
            };
            Record::Create(CreateRecord { fork: Some(fork), ..CreateRecord::bare(handle, "b", name, "text/plain", 1) })
        };
        let mut st = Store::new(0, 4);
        create(&mut st, 0, "plain");
        for (handle, name, parent) in [(1, "f1", 9), (2, "f2", 9), (3, "f3", 8)] {
            st.apply(fork(handle, name, parent));
        }
        assert!(st.streams.inherits(1, 9) && st.streams.inherits(1, 8));
        assert!(!st.streams.inherits(0, 9) && !st.streams.inherits(1, 0), "only ancestors count");
        st.apply(Record::Delete { handle: 1 });
        assert!(st.streams.inherits(1, 9), "f2 still reads stream 9's files");
        st.apply(Record::Delete { handle: 2 });
        assert!(!st.streams.inherits(1, 9), "no stream reads stream 9's files");
        let rebuilt = super::Streams::of(std::mem::take(&mut st.streams.map));
        assert!(rebuilt.inherits(1, 8) && !rebuilt.inherits(1, 9));
        assert_eq!(rebuilt.inherited.len(), 1);
    }

    /// What the streams' files hold, summed as they change, is what a walk
    /// over them finds, asked between changes of every kind: appends,
    /// creates, deletes, flushes storing tails (their passes handing
    /// retention's punches on), and after more streams changed than the
    /// sum keeps track of (the sum forgotten, then walked once).
    #[test]
    fn file_bytes_follow_every_change() {
        let walk = |st: &Store| st.streams.values().map(|e| super::held_in_files(e)).sum::<u64>();
        let flush = |st: &mut Store| {
            let written = std::mem::take(&mut st.written);
            st.streams.begin_pass(Pass::new(written, true, Spares::new(0)));
            assert!(st.pass_some(usize::MAX));
            for job in st.streams.end_pass().unwrap().jobs {
                st.stored_frozen(job.handle);
            }
        };
        let mut st = Store::new(0, 4);
        for h in 0..40u64 {
            create(&mut st, h, &format!("s{h:02}"));
        }
        let mut next = st.next_handle;
        for step in 1..=600u64 {
            change(&mut st, step, &mut next);
            if step % 9 == 0 {
                let h = (step * 11) % 40;
                if st.state_of(h).is_some() {
                    append(&mut st, h, b"kept");
                    let s = &mut st.by_handle(h).unwrap().state;
                    let (tail, records, closed) = (s.tail(), s.records(), s.closed);
                    s.publish(tail, records, closed);
                    let record = st.state_of(h).unwrap().records() - 1;
                    let offset = st.state_of(h).unwrap().tail() - 4;
                    st.apply(Record::Retention { handle: h, offset, record });
                }
            }
            if step % 7 == 0 {
                flush(&mut st);
            }
            if step % 50 == 0 {
                assert_eq!(st.file_bytes(), walk(&st), "asked at step {step}");
            }
        }
        flush(&mut st);
        assert!(walk(&st) > 0 && st.streams.iter().any(|(_, e)| e.punched().0 > 0), "files and punches came");
        assert_eq!(st.file_bytes(), walk(&st));
        // More streams changed before the next ask than the set keeps: the
        // sum is forgotten.
        for step in 0..=crate::tuning::UNSUMMED_MAX as u64 {
            create(&mut st, next, &format!("burst{step}"));
            next += 1;
        }
        assert!(!st.streams.files.known(), "more streams changed than the set keeps");
        assert_eq!(st.file_bytes(), walk(&st));
        assert!(st.streams.files.known());
    }

    /// 40 streams, each with an unflushed tail; the capture that takes
    /// them all, with the checkpoint due.
    fn captured() -> Store {
        let mut st = Store::new(0, 4);
        for h in 0..40u64 {
            create(&mut st, h, &format!("s{h:02}"));
            append(&mut st, h, format!("tail of {h};").as_bytes());
        }
        let written = std::mem::take(&mut st.written);
        st.streams.begin_pass(Pass::new(written, true, Spares::new(0)));
        let encoder = encoder(&st);
        st.streams.begin_checkpoint(encoder);
        st
    }

    /// The frozen chunks of a finished pass, by stream: what the flush writes.
    fn jobs(st: &mut Store) -> Vec<(u64, Vec<u8>, Vec<u64>, u64)> {
        let taken = st.streams.end_pass().unwrap();
        assert!(taken.done());
        let mut jobs: Vec<_> =
            taken.jobs.iter().map(|j| (j.handle, j.chunk.bytes.clone(), j.chunk.ends.clone(), j.index_after)).collect();
        jobs.sort();
        jobs
    }

    /// A pass a stream a slice while the streams are appended to, given
    /// attributes, deleted, created and created again under a deleted name
    /// (`change`) takes the tails the capture
    /// held, every one once, and the checkpoint after it is byte for byte
    /// the one of a pass and an encoding done at once at the capture.
    #[test]
    fn a_pass_in_slices_takes_the_capture_whatever_changes_between_them() {
        let mut at_once = captured();
        assert!(at_once.pass_some(usize::MAX));
        let want_jobs = jobs(&mut at_once);
        assert!(at_once.streams.encode_some(usize::MAX));
        let want = at_once.streams.end_checkpoint().unwrap().finish();
        assert_eq!(want_jobs.len(), 40, "every tail is taken");

        let mut st = captured();
        let mut next = st.next_handle;
        let mut step = 0u64;
        while !st.pass_some(1) {
            step += 1;
            change(&mut st, step, &mut next);
        }
        assert!(step > 20, "changes ran between {step} slices");
        assert!(jobs(&mut st) == want_jobs, "the sliced pass took other tails than the pass at its capture");
        assert!(st.streams.encode_some(usize::MAX));
        let got = st.streams.end_checkpoint().unwrap().finish();
        assert!(got == want, "the checkpoint after a sliced pass differs from the one at its capture");
    }
}
