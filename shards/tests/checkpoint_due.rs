//! A flush writes a checkpoint only when it is due (`Shard::lagging`,
//! `Shard::may_free`):
//! a trickle of appends to a shard holding many streams moves their tails
//! into stream files without rewriting every stream's state, a crash then
//! loses nothing (the journal since the last checkpoint is replayed and the
//! longer stream files cut back), and one is written at the first flush
//! after a start, once the journal since the last is a quarter of its
//! size, and when something is given back (at most once per
//! `free_spacing` times as long as the last checkpoint's flush took).

mod sim;

use sim::{append_input, crash, key, one_shard, NO_BACKGROUND_FLUSH};
use sluice_shards::core::create::CreateInput;
use sluice_shards::store::{FlushConfig, Shard, ShardConfig};
use std::path::Path;

const OCTET: &str = "application/octet-stream";
const STREAMS: usize = 2000;

fn config(root: &Path) -> ShardConfig {
    spaced(root, 0)
}

/// With `free_spacing` (see `FlushConfig`).
fn spaced(root: &Path, free_spacing: u32) -> ShardConfig {
    one_shard(root, 1 << 20, FlushConfig { free_spacing, bundle_max: 0, ..NO_BACKGROUND_FLUSH })
}

fn count(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

#[test]
fn small_flushes_skip_the_checkpoint_and_lose_nothing_in_a_crash() {
    let root = sim::scratch_root("sluice-checkpoint-due");
    std::fs::create_dir_all(root.join("shard-0")).unwrap();
    let dir = root.clone();
    let checkpoint = root.join("shard-0").join("checkpoint");
    let streams = root.join("shard-0/streams");
    sluice_shards::tick::block_on(move || async move {
        let s = Shard::open(0, config(&dir)).await.unwrap();
        for i in 0..STREAMS {
            s.create(&key(&format!("s{i}")), &CreateInput::plain(OCTET), b"first", None, 0).await.unwrap();
        }
        s.flush().await.unwrap();
        let written = std::fs::read(&checkpoint).unwrap();
        // A trickle: each flush stores one small tail, and the checkpoint
        // (every stream's state) is not rewritten for it.
        for i in 0..5 {
            s.append(&key(&format!("s{i}")), &append_input(b" more"), 0).await.unwrap();
            s.flush().await.unwrap();
            assert_eq!(std::fs::read(&checkpoint).unwrap(), written, "flush {i} rewrote the checkpoint");
            assert_eq!(s.store.borrow().streams.get(&*key(&format!("s{i}"))).unwrap().state.body.stored, 10);
        }
        crash(s).await;

        let s = Shard::open(0, config(&dir)).await.unwrap();
        for i in 0..STREAMS {
            let want: &[u8] = if i < 5 { b"first more" } else { b"first" };
            assert_eq!(s.bytes(&key(&format!("s{i}")), 0, want.len() as u64).await.unwrap(), want, "stream s{i}");
        }
        // The first flush after a start writes one (bounding the next
        // start's replay); then one is due once the journal since it is a
        // quarter of its size.
        s.append(&key("s0"), &append_input(b"!"), 0).await.unwrap();
        s.flush().await.unwrap();
        let written = std::fs::read(&checkpoint).unwrap();
        let mut i = 0;
        while std::fs::read(&checkpoint).unwrap() == written {
            s.append(&key("s0"), &append_input(&[b'x'; 4096]), 0).await.unwrap();
            s.flush().await.unwrap();
            i += 1;
            assert!(i * 4096 <= written.len() / 2, "no checkpoint after {i} appends of 4 KiB");
        }
        assert!(i * 4096 >= written.len() / 8, "a checkpoint after only {i} appends of 4 KiB");
        // Giving space back (a delete) writes one at once when the spacing is 0.
        let before = std::fs::read(&checkpoint).unwrap();
        let all = count(&streams);
        s.delete(&key("s1"), 0).await.unwrap();
        s.flush().await.unwrap();
        assert_ne!(std::fs::read(&checkpoint).unwrap(), before, "a delete's flush writes a checkpoint");
        assert_eq!(count(&streams), all - 2, "the deleted stream's data and index files are given back");
        crash(s).await;

        // With a spacing no flush reaches, a delete's files stay until a
        // checkpoint is due for another reason; a crash meanwhile loses
        // nothing, and the restarted shard gives them back.
        let s = Shard::open(0, spaced(&dir, u32::MAX)).await.unwrap();
        s.flush().await.unwrap();
        let before = std::fs::read(&checkpoint).unwrap();
        s.delete(&key("s2"), 0).await.unwrap();
        s.flush().await.unwrap();
        assert_eq!(std::fs::read(&checkpoint).unwrap(), before, "a delete's flush waits for the spacing");
        assert_eq!(count(&streams), all - 2, "files given back without a checkpoint");
        assert!(s.bytes(&key("s2"), 0, 5).await.is_err(), "the deleted stream is gone at once");
        crash(s).await;
        let s = Shard::open(0, spaced(&dir, 0)).await.unwrap();
        assert!(!s.store.borrow().streams.contains_key(&*key("s2")), "the delete was replayed");
        s.flush().await.unwrap();
        assert_eq!(count(&streams), all - 4, "given back after the restart");
        assert_eq!(s.bytes(&key("s3"), 0, 5).await.unwrap(), b"first");
    });
    std::fs::remove_dir_all(&root).unwrap();
}
