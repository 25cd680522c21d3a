//! A flush that writes many streams makes their files durable with one
//! sync of the file system (`syncfs`), one that writes few with an
//! fdatasync per file (`FlushConfig::sync_once`); either way every byte
//! reads back after a crash, and a failed sync of the file system (or a
//! handle to it that cannot be opened) fails the flush without losing
//! anything: the next flush writes it all again.

mod sim;

use sim::{crash, key, one_shard, NO_BACKGROUND_FLUSH};
use sluice_shards::core::create::CreateInput;
use sluice_shards::storage::faults::{Faults, Op};
use sluice_shards::storage::Storage;
use sluice_shards::store::{FlushConfig, Shard, ShardConfig};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const OCTET: &str = "application/octet-stream";
const STREAMS: usize = 100;

fn config(root: &Path, sync_once: usize, faults: &Arc<Faults>) -> ShardConfig {
    let mut cfg = one_shard(root, 1 << 20, FlushConfig { sync_once, bundle_max: 0, ..NO_BACKGROUND_FLUSH });
    cfg.storage = Storage::Faulty(faults.clone());
    cfg
}

fn body(i: usize) -> Vec<u8> {
    format!("stream {i}'s first message").into_bytes()
}

/// Runs `test` on a fresh scratch data dir (its root and a fault plan
/// that injects nothing until told), then removes the dir.
fn in_scratch<T, F>(name: &str, test: impl FnOnce(PathBuf, Arc<Faults>) -> F + Send + 'static) -> T
where
    F: Future<Output = T> + 'static,
    T: Send + 'static,
{
    let root = sim::scratch_root(name);
    std::fs::create_dir_all(root.join("shard-0")).unwrap();
    let (dir, faults) = (root.clone(), Arc::new(Faults::new(1)));
    let out = sluice_shards::tick::block_on(move || test(dir, faults));
    let _ = std::fs::remove_dir_all(&root);
    out
}

/// Creates `STREAMS` streams, each with its first message.
async fn create_all(s: &Shard) {
    for i in 0..STREAMS {
        s.create(&key(&format!("s{i}")), &CreateInput::plain(OCTET), &body(i), None, 0).await.unwrap();
    }
}

/// Every stream `create_all` made holds its message.
async fn all_read_back(s: &Shard) {
    for i in 0..STREAMS {
        let want = body(i);
        assert_eq!(s.bytes(&key(&format!("s{i}")), 0, want.len() as u64).await.unwrap(), want, "stream s{i}");
    }
}

/// Flushes `STREAMS` new streams and returns the syncs the flush made
/// (files, directories, the file system); every byte survives a crash.
fn syncs_of_a_flush(sync_once: usize) -> u64 {
    in_scratch(&format!("sluice-sync-once-{sync_once}"), move |dir, faults| async move {
        let s = Shard::open(0, config(&dir, sync_once, &faults)).await.unwrap();
        create_all(&s).await;
        let before = faults.seen(Op::Sync);
        s.flush().await.unwrap();
        let syncs = faults.seen(Op::Sync) - before;
        crash(s).await;
        all_read_back(&Shard::open(0, config(&dir, sync_once, &faults)).await.unwrap()).await;
        syncs
    })
}

#[test]
fn many_streams_sync_the_file_system_once_few_each_file() {
    let each = syncs_of_a_flush(usize::MAX);
    let once = syncs_of_a_flush(STREAMS);
    assert!(each >= 2 * STREAMS as u64, "each stream's data and index file synced: {each} syncs");
    assert!(once <= 5, "one sync of the file system, the directories and the checkpoint: {once} syncs");
}

#[test]
fn a_failed_sync_of_the_file_system_fails_the_flush_and_the_next_one_stores_everything() {
    in_scratch("sluice-sync-once-fails", |dir, faults| async move {
        let s = Shard::open(0, config(&dir, 2, &faults)).await.unwrap();
        create_all(&s).await;
        // The flush's first sync is the file system's: its files are written unsynced.
        faults.fail_nth(Op::Sync, 0, libc::EIO);
        let failed = s.flush().await.unwrap_err();
        assert!(format!("{failed:?}").contains("streams"), "{failed:?}");
        all_read_back(&s).await;
        s.flush().await.unwrap();
        assert_eq!(s.store.borrow().streams.get(&*key("s7")).unwrap().state.body.stored, body(7).len() as u64);
        crash(s).await;
        all_read_back(&Shard::open(0, config(&dir, 2, &faults)).await.unwrap()).await;
    });
}

#[test]
fn a_file_system_that_cannot_be_opened_for_its_sync_fails_the_flush_until_it_can() {
    in_scratch("sluice-sync-once-open", |dir, faults| async move {
        let s = Shard::open(0, config(&dir, 2, &faults)).await.unwrap();
        create_all(&s).await;
        // The flush's first open is the file system's handle, before any stream file.
        faults.fail_nth(Op::Open, 0, libc::EMFILE);
        let failed = s.flush().await.unwrap_err();
        assert!(format!("{failed:?}").contains("Too many open files"), "{failed:?}");
        assert_eq!(s.store.borrow().streams.get(&*key("s7")).unwrap().state.body.stored, 0, "nothing stored");
        let before = faults.seen(Op::Sync);
        s.flush().await.unwrap();
        assert!(faults.seen(Op::Sync) - before <= 5, "the retry syncs the file system once");
        crash(s).await;
        all_read_back(&Shard::open(0, config(&dir, 2, &faults)).await.unwrap()).await;
    });
}
