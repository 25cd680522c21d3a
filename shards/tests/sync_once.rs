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
use std::path::Path;
use std::sync::Arc;

const OCTET: &str = "application/octet-stream";
const STREAMS: usize = 100;

fn config(root: &Path, sync_once: usize, faults: &Arc<Faults>) -> ShardConfig {
    let mut cfg = one_shard(root, 1 << 20, FlushConfig { sync_once, ..NO_BACKGROUND_FLUSH });
    cfg.storage = Storage::Faulty(faults.clone());
    cfg
}

fn body(i: usize) -> Vec<u8> {
    format!("stream {i}'s first message").into_bytes()
}

/// Creates `STREAMS` streams with a body each, flushes them, and returns
/// the syncs the flush made (files, directories, the file system).
fn syncs_of_a_flush(sync_once: usize) -> u64 {
    let root = sim::scratch_root(&format!("sluice-sync-once-{sync_once}"));
    std::fs::create_dir_all(root.join("shard-0")).unwrap();
    let faults = Arc::new(Faults::new(1));
    let dir = root.clone();
    let syncs = sluice_shards::tick::block_on(move || async move {
        let s = Shard::open(0, config(&dir, sync_once, &faults)).await.unwrap();
        for i in 0..STREAMS {
            s.create(&key(&format!("s{i}")), &CreateInput::plain(OCTET), &body(i), None, 0).await.unwrap();
        }
        let before = faults.seen(Op::Sync);
        s.flush().await.unwrap();
        let syncs = faults.seen(Op::Sync) - before;
        crash(s).await;
        let s = Shard::open(0, config(&dir, sync_once, &faults)).await.unwrap();
        for i in 0..STREAMS {
            let want = body(i);
            assert_eq!(s.bytes(&key(&format!("s{i}")), 0, want.len() as u64).await.unwrap(), want, "stream s{i}");
        }
        syncs
    });
    let _ = std::fs::remove_dir_all(&root);
    syncs
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
    let root = sim::scratch_root("sluice-sync-once-fails");
    std::fs::create_dir_all(root.join("shard-0")).unwrap();
    let faults = Arc::new(Faults::new(1));
    let dir = root.clone();
    sluice_shards::tick::block_on(move || async move {
        let s = Shard::open(0, config(&dir, 2, &faults)).await.unwrap();
        for i in 0..STREAMS {
            s.create(&key(&format!("s{i}")), &CreateInput::plain(OCTET), &body(i), None, 0).await.unwrap();
        }
        // The flush's first sync is the file system's: its files are written unsynced.
        faults.fail_nth(Op::Sync, 0, libc::EIO);
        let failed = s.flush().await.unwrap_err();
        assert!(format!("{failed:?}").contains("streams"), "{failed:?}");
        for i in 0..STREAMS {
            let want = body(i);
            assert_eq!(s.bytes(&key(&format!("s{i}")), 0, want.len() as u64).await.unwrap(), want, "stream s{i}");
        }
        s.flush().await.unwrap();
        assert_eq!(s.store.borrow().streams.get(&*key("s7")).unwrap().state.body.stored, body(7).len() as u64);
        crash(s).await;
        let s = Shard::open(0, config(&dir, 2, &faults)).await.unwrap();
        for i in 0..STREAMS {
            let want = body(i);
            assert_eq!(s.bytes(&key(&format!("s{i}")), 0, want.len() as u64).await.unwrap(), want, "stream s{i}");
        }
    });
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn a_file_system_that_cannot_be_opened_for_its_sync_fails_the_flush_until_it_can() {
    let root = sim::scratch_root("sluice-sync-once-open");
    std::fs::create_dir_all(root.join("shard-0")).unwrap();
    let faults = Arc::new(Faults::new(1));
    let dir = root.clone();
    sluice_shards::tick::block_on(move || async move {
        let s = Shard::open(0, config(&dir, 2, &faults)).await.unwrap();
        for i in 0..STREAMS {
            s.create(&key(&format!("s{i}")), &CreateInput::plain(OCTET), &body(i), None, 0).await.unwrap();
        }
        // The flush's first open is the file system's handle, before any stream file.
        faults.fail_nth(Op::Open, 0, libc::EMFILE);
        let failed = s.flush().await.unwrap_err();
        assert!(format!("{failed:?}").contains("Too many open files"), "{failed:?}");
        assert_eq!(s.store.borrow().streams.get(&*key("s7")).unwrap().state.body.stored, 0, "nothing stored");
        let before = faults.seen(Op::Sync);
        s.flush().await.unwrap();
        assert!(faults.seen(Op::Sync) - before <= 5, "the retry syncs the file system once");
        crash(s).await;
        let s = Shard::open(0, config(&dir, 2, &faults)).await.unwrap();
        for i in 0..STREAMS {
            let want = body(i);
            assert_eq!(s.bytes(&key(&format!("s{i}")), 0, want.len() as u64).await.unwrap(), want, "stream s{i}");
        }
    });
    let _ = std::fs::remove_dir_all(&root);
}
