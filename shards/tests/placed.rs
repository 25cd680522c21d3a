//! Large appends written once (`store::place`): an append of
//! `FlushConfig::place_from` bytes or more goes into its stream file
//! before its journal record, which names the bytes. They read back at
//! once, after a crash, and after a second crash before any checkpoint
//! recorded them, also when a flush between the crashes failed; damage to them is refused at start; concurrent ones keep
//! the offsets they were answered with; a placement whose write or sync
//! fails takes the journal instead and loses nothing; one whose stream is
//! deleted meanwhile answers as the journal path does and leaves no file.

mod sim;

use sim::{crash, key, one_shard, NO_BACKGROUND_FLUSH};
use sluice_shards::core::append::AppendInput;
use sluice_shards::core::create::CreateInput;
use sluice_shards::log::recovery::{self, Mode};
use sluice_shards::log::Record;
use sluice_shards::storage::faults::{Faults, Op};
use sluice_shards::storage::Storage;
use sluice_shards::store::files::data_name;
use sluice_shards::store::{FlushConfig, Shard, ShardConfig};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

const OCTET: &str = "application/octet-stream";
/// Appends of this many bytes or more are placed.
const PLACE_FROM: usize = 4096;

fn config(root: &Path, faults: &Arc<Faults>) -> ShardConfig {
    let mut cfg =
        one_shard(root, 1 << 20, FlushConfig { place_from: PLACE_FROM, bundle_max: 0, ..NO_BACKGROUND_FLUSH });
    cfg.storage = Storage::Faulty(faults.clone());
    cfg
}

/// Runs `test` on a fresh scratch data dir and a fault plan that injects
/// nothing until told, then removes the dir.
fn in_scratch<F>(name: &str, test: impl FnOnce(PathBuf, Arc<Faults>) -> F + Send + 'static)
where
    F: Future<Output = ()> + 'static,
{
    let root = sim::scratch_root(name);
    std::fs::create_dir_all(root.join("shard-0")).unwrap();
    let (dir, faults) = (root.clone(), Arc::new(Faults::new(1)));
    sluice_shards::tick::block_on(move || test(dir, faults));
    let _ = std::fs::remove_dir_all(&root);
}

/// `len` bytes that differ from append to append (`tag`).
fn body(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| tag.wrapping_mul(31).wrapping_add((i % 251) as u8)).collect()
}

fn input(body: &[u8]) -> AppendInput<'_> {
    AppendInput { content_type: Some(OCTET), body, close: false, stream_seq: None, producer: None, record_match: None }
}

/// Appends `body` to stream `s`; returns the offset it ends at.
async fn append(shard: &Shard, s: &str, body: &[u8]) -> u64 {
    shard.append(&key(s), &input(body), 0).await.unwrap().next_offset
}

/// Creates stream `s` with a first message, stored in its files (a placement
/// needs the stream's files).
async fn stored_stream(shard: &Shard, s: &str) -> Vec<u8> {
    let first = b"first".to_vec();
    shard.create(&key(s), &CreateInput::plain(OCTET), &first, None, 0).await.unwrap();
    shard.flush().await.unwrap();
    first
}

async fn reads_back(shard: &Shard, s: &str, want: &[u8]) {
    let got = shard.bytes(&key(s), 0, want.len() as u64).await.unwrap();
    assert!(got == want, "stream {s}: {} bytes read back differ from the {} appended", got.len(), want.len());
}

/// The journal's placed and inline appends, and the inline bytes.
fn journal(dir: &Path) -> (usize, usize, usize) {
    let (mut placed, mut inline, mut bytes) = (0, 0, 0);
    recovery::scan(&dir.join("shard-0"), Mode::Verify, |r, _| match r {
        Record::Placed(_) => placed += 1,
        Record::Append(a) => (inline, bytes) = (inline + 1, bytes + a.data.len()),
        _ => {}
    })
    .unwrap();
    (placed, inline, bytes)
}

#[test]
fn large_appends_are_placed_and_survive_two_crashes_before_a_checkpoint() {
    in_scratch("sluice-placed-crashes", |dir, faults| async move {
        let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
        let mut want = stored_stream(&s, "big").await;
        for (tag, len) in [(1, 5000), (2, PLACE_FROM), (3, 20_000)] {
            let b = body(tag, len);
            want.extend_from_slice(&b);
            assert_eq!(append(&s, "big", &b).await, want.len() as u64);
        }
        // A small append goes to the journal; the next large one has the
        // flush store it first, then is placed after it.
        for (tag, len) in [(4, 100), (5, 9000)] {
            let b = body(tag, len);
            want.extend_from_slice(&b);
            assert_eq!(append(&s, "big", &b).await, want.len() as u64);
        }
        assert_eq!(s.log.stats.placed.get(), 4);
        {
            let st = s.store.borrow();
            let b = &st.streams.get(&*key("big")).unwrap().state.body;
            assert_eq!((b.stored, b.all_stored()), (want.len() as u64, true), "nothing in memory");
        }
        reads_back(&s, "big", &want).await;
        crash(s).await;
        let (placed, inline, bytes) = journal(&dir);
        assert_eq!((placed, inline), (4, 1), "the journal names the placed appends and carries the small one");
        assert_eq!(bytes, 100, "the journal carries no placed byte");

        // The restart replays the placed appends from the data file into
        // memory; the file keeps them: a second crash replays them again.
        let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
        reads_back(&s, "big", &want).await;
        crash(s).await;
        let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
        reads_back(&s, "big", &want).await;
        let more = body(6, 7000);
        want.extend_from_slice(&more);
        assert_eq!(append(&s, "big", &more).await, want.len() as u64);
        s.stop_clean().await.unwrap();
        drop(s);
        let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
        reads_back(&s, "big", &want).await;
    });
}

/// After a restart the placed appends are in memory again, and their bytes
/// still in the data file past what the checkpoint records: a flush of
/// them that fails half-way must not cut the file back below them (the
/// journal still names them there), or the next start loses them.
#[test]
fn a_failed_flush_after_a_restart_keeps_the_placed_bytes_the_journal_names() {
    in_scratch("sluice-placed-failed-flush", |dir, faults| async move {
        let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
        let mut want = stored_stream(&s, "big").await;
        let b = body(1, 20_000);
        want.extend_from_slice(&b);
        assert_eq!(append(&s, "big", &b).await, want.len() as u64);
        assert_eq!(s.log.stats.placed.get(), 1);
        crash(s).await;
        let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
        reads_back(&s, "big", &want).await;
        // The flush writes the replayed bytes again; its first sync fails.
        faults.fail_nth(Op::Sync, 0, libc::EIO);
        assert!(s.flush().await.is_err(), "the injected failure fails the flush");
        crash(s).await;
        let len = std::fs::metadata(dir.join("shard-0/streams").join(data_name(0))).unwrap().len();
        assert!(len >= want.len() as u64, "the data file was cut back to {len} bytes, below the placed ones");
        let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
        reads_back(&s, "big", &want).await;
    });
}

#[test]
fn damaged_placed_bytes_are_refused_at_start() {
    for damage in ["flip", "cut"] {
        in_scratch(&format!("sluice-placed-damage-{damage}"), move |dir, faults| async move {
            let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
            let first = stored_stream(&s, "big").await;
            append(&s, "big", &body(1, 6000)).await;
            let handle = s.store.borrow().streams.get(&*key("big")).unwrap().state.handle;
            crash(s).await;
            let path = dir.join("shard-0").join("streams").join(data_name(handle));
            let mut bytes = std::fs::read(&path).unwrap();
            match damage {
                "flip" => bytes[first.len() + 3000] ^= 0x10,
                _ => bytes.truncate(first.len() + 10),
            }
            std::fs::write(&path, &bytes).unwrap();
            let refused = Shard::open(0, config(&dir, &faults)).await.err().expect("the start refuses");
            let why = format!("{refused:?}");
            assert!(why.contains("placed by the journal"), "{damage}: {why}");
        });
    }
}

#[test]
fn concurrent_placements_and_small_appends_keep_their_offsets() {
    in_scratch("sluice-placed-concurrent", |dir, faults| async move {
        let s = Rc::new(Shard::open(0, config(&dir, &faults)).await.unwrap());
        let first = stored_stream(&s, "big").await;
        let mut tasks = Vec::new();
        for tag in 1..=24u8 {
            let s = s.clone();
            let len = if tag % 4 == 0 { 50 } else { PLACE_FROM + 1000 * tag as usize };
            tasks.push(sluice_shards::tasks::spawn(async move {
                let b = body(tag, len);
                let end = append(&s, "big", &b).await;
                (end - b.len() as u64, b)
            }));
        }
        let mut ranges = Vec::new();
        for t in tasks {
            ranges.push(t.await);
        }
        assert!(s.log.stats.placed.get() >= 2, "placed: {}", s.log.stats.placed.get());
        ranges.sort_by_key(|(start, _)| *start);
        let mut want = first;
        for (start, b) in &ranges {
            assert_eq!(*start, want.len() as u64, "the answered ranges follow on from each other");
            want.extend_from_slice(b);
        }
        reads_back(&s, "big", &want).await;
        let s = Rc::into_inner(s).expect("the tasks are done");
        crash(s).await;
        let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
        reads_back(&s, "big", &want).await;
    });
}

#[test]
fn a_placement_whose_write_or_sync_fails_takes_the_journal() {
    // A write that stops part way (a full disk), a sync that fails.
    for (op, errno) in [(Op::Write, libc::ENOSPC), (Op::Sync, libc::EIO)] {
        in_scratch(&format!("sluice-placed-fails-{op:?}"), move |dir, faults| async move {
            let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
            let mut want = stored_stream(&s, "big").await;
            let b = body(1, 8000);
            want.extend_from_slice(&b);
            // The placement's first write (or sync) of the stream's files fails.
            faults.fail_nth(op, 0, errno);
            assert_eq!(append(&s, "big", &b).await, want.len() as u64);
            assert_eq!(s.log.stats.placed.get(), 0, "{op:?}: the append took the journal");
            reads_back(&s, "big", &want).await;
            // The next one is placed again.
            let more = body(2, 8000);
            want.extend_from_slice(&more);
            assert_eq!(append(&s, "big", &more).await, want.len() as u64);
            assert_eq!(s.log.stats.placed.get(), 1, "{op:?}");
            crash(s).await;
            let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
            reads_back(&s, "big", &want).await;
        });
    }
}

#[test]
fn appends_below_the_threshold_or_to_a_stream_without_files_take_the_journal() {
    in_scratch("sluice-placed-not", |dir, faults| async move {
        let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
        s.create(&key("new"), &CreateInput::plain(OCTET), b"", None, 0).await.unwrap();
        let b = body(1, 9000);
        assert_eq!(append(&s, "new", &b).await, 9000, "a stream without files takes its first bytes in the journal");
        let small = body(2, PLACE_FROM - 1);
        stored_stream(&s, "old").await;
        append(&s, "old", &small).await;
        assert_eq!(s.log.stats.placed.get(), 0);
        crash(s).await;
        assert_eq!(journal(&dir).0, 0);
    });
}

#[test]
fn a_stream_deleted_while_its_append_is_placed_leaves_no_file() {
    in_scratch("sluice-placed-deleted", |dir, faults| async move {
        let s = Rc::new(Shard::open(0, config(&dir, &faults)).await.unwrap());
        stored_stream(&s, "big").await;
        let handle = s.store.borrow().streams.get(&*key("big")).unwrap().state.handle;
        // The placement writes (an await) before it is decided; the delete,
        // spawned after it, is decided meanwhile.
        let placing = {
            let s = s.clone();
            sluice_shards::tasks::spawn(async move { s.append(&key("big"), &input(&body(1, 8000)), 0).await })
        };
        let deleting = {
            let s = s.clone();
            sluice_shards::tasks::spawn(async move { s.delete(&key("big"), 0).await })
        };
        deleting.await.unwrap();
        let answered = placing.await;
        assert!(answered.is_err(), "the append finds no stream: {answered:?}");
        assert_eq!(s.log.stats.placed.get(), 0);
        // A checkpoint without the stream (the clean stop's) removes its files.
        s.stop_clean().await.unwrap();
        let streams = dir.join("shard-0").join("streams");
        let left: Vec<_> = std::fs::read_dir(&streams).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "files of deleted stream {handle} left: {left:?}");
        drop(Rc::into_inner(s).expect("the tasks are done"));
        let s = Shard::open(0, config(&dir, &faults)).await.unwrap();
        assert!(!s.store.borrow().streams.contains_key(&*key("big")));
    });
}
