//! A large flush (`--flush-bytes` of journal since the last) keeps the tail
//! buffers it wrote for the next capture's large tails (`store::spares`): a
//! stream taking large appends fills memory that is already mapped and
//! reads back exactly what it appended. A smaller flush, and a shard with
//! nothing to flush for an interval, give the buffers back.

mod sim;

use sim::{append_input, key, one_shard};
use sluice_shards::core::create::CreateInput;
use sluice_shards::store::{FlushConfig, Shard, ShardConfig, StreamKey};
use sluice_shards::tuning::{CHECKPOINT_FREE_SPACING, MIN_FLUSH_BYTES, MIN_SPARE_TAIL, SYNC_ONCE_STREAMS};
use std::path::Path;
use std::time::Duration;

const OCTET: &str = "application/octet-stream";

fn config(root: &Path, every: Duration) -> ShardConfig {
    one_shard(
        root,
        4 << 20,
        FlushConfig {
            bytes: MIN_FLUSH_BYTES,
            every,
            free_spacing: CHECKPOINT_FREE_SPACING,
            sync_once: SYNC_ONCE_STREAMS,
            place_from: sluice_shards::tuning::PLACE_FROM,
            bundle_max: sluice_shards::tuning::BUNDLE_MAX,
            slice: sluice_shards::tuning::FLUSH_SLICE,
        },
    )
}

#[test]
fn large_tails_reuse_written_buffers_and_idle_shards_give_them_back() {
    sim::in_scratch("sluice-tail-buffers", |dir| async move {
        let s = Shard::open(0, config(&dir, Duration::from_millis(200))).await.unwrap();
        let (a, small) = (key("a"), key("small"));
        let mut want = Vec::new();
        s.create(&a, &CreateInput::plain(OCTET), b"", None, 0).await.unwrap();
        s.create(&small, &CreateInput::plain(OCTET), b"tiny", None, 0).await.unwrap();
        let cache_room = |k: &StreamKey| {
            s.store.borrow().streams.get(k).map(|e| e.state.body.unflushed().map_or(0, |c| c.bytes.capacity())).unwrap()
        };
        // Appends of a large flush: past --flush-bytes of journal.
        let large = MIN_FLUSH_BYTES as usize / (MIN_SPARE_TAIL + 1000) + 1;
        for round in 0..3u8 {
            for i in 0..large {
                let body = vec![round * 64 + i as u8 + 1; MIN_SPARE_TAIL + 1000];
                s.append(&a, &append_input(&body), 0).await.unwrap();
                want.extend_from_slice(&body);
            }
            s.append(&small, &append_input(b"x"), 0).await.unwrap();
            s.flush().await.unwrap();
            if round == 0 {
                // Nothing was written before the first capture.
                assert_eq!(cache_room(&a), 0, "no buffer to give yet");
            } else {
                assert!(cache_room(&a) >= MIN_FLUSH_BYTES as usize, "the capture gave the large tail a written buffer");
            }
            // A small tail never takes one, and a buffer is kept only while unused.
            assert_eq!(cache_room(&small), 0);
            assert!(s.spares.borrow().bytes() >= MIN_FLUSH_BYTES as usize, "the written buffer is kept");
            // Bytes in a reused buffer are only what was appended since.
            let tail = want.len() as u64;
            s.append(&a, &append_input(b"end"), 0).await.unwrap();
            want.extend_from_slice(b"end");
            assert_eq!(s.bytes(&a, 0, want.len() as u64).await.unwrap(), want);
            assert_eq!(s.bytes(&a, tail, want.len() as u64).await.unwrap(), b"end");
        }
        // A small flush: nothing kept, and the stream's next tail starts empty.
        s.flush().await.unwrap();
        assert_eq!((s.spares.borrow().bytes(), cache_room(&a)), (0, 0), "a small flush gives everything back");
        // A large flush again, then the background flusher with nothing to
        // flush for an interval.
        for _ in 0..large {
            s.append(&a, &append_input(&[9u8; MIN_SPARE_TAIL + 1000]), 0).await.unwrap();
        }
        s.flush().await.unwrap();
        assert!(s.spares.borrow().bytes() > 0);
        let s = std::rc::Rc::new(s);
        let flusher = s.clone();
        let task = glommio::spawn_local(async move { flusher.flush_loop().await });
        glommio::timer::sleep(Duration::from_millis(800)).await;
        assert_eq!(s.spares.borrow().bytes(), 0, "an idle shard holds no kept buffers");
        drop(task);
    });
}
