//! A checkpoint taken right after the journal rolled into a new segment,
//! before anything was committed there, then two crashes: what is
//! acknowledged after the first restart survives the second.

mod sim;

use sim::{append_input, crash, key, one_shard, NO_BACKGROUND_FLUSH};
use sluice_shards::core::create::CreateInput;
use sluice_shards::store::{Shard, ShardConfig, StoreError};
use std::path::Path;

const SEGMENT: u64 = 8 << 10;
const OCTET: &str = "application/octet-stream";

fn config(root: &Path) -> ShardConfig {
    one_shard(root, SEGMENT, NO_BACKGROUND_FLUSH)
}

#[test]
fn a_checkpoint_at_a_roll_loses_nothing_appended_after_a_restart() {
    sim::in_scratch("sluice-checkpoint-roll", |dir| async move {
        let input = CreateInput::plain(OCTET);
        let s = Shard::open(0, config(&dir)).await.unwrap();
        let mut want = b"first".to_vec();
        s.create(&key("a"), &input, &want, None, 0).await.unwrap();
        // A refused append big enough to roll the journal: no record
        // follows the seal in the new segment.
        // Fill the active segment until a big append no longer fits.
        let before = s.log.position().0;
        let big = vec![7u8; SEGMENT as usize - 1024];
        while s.log.position().1 < 1024 {
            s.append(&key("a"), &append_input(b"."), 0).await.unwrap();
            want.push(b'.');
        }
        assert_eq!(s.log.position().0, before);
        assert_eq!(s.append(&key("none"), &append_input(&big), 0).await, Err(StoreError::NoStream));
        // Segments before the active one count as reclaimable below any mark.
        assert!(s.log.disk_usage(u32::MAX).reclaimable > 0, "the refused append rolled the journal");
        s.flush().await.unwrap();
        crash(s).await;

        let s = Shard::open(0, config(&dir)).await.unwrap();
        s.append(&key("a"), &append_input(b" second"), 0).await.unwrap();
        want.extend_from_slice(b" second");
        crash(s).await;

        let s = Shard::open(0, config(&dir)).await.unwrap();
        let tail = s.store.borrow().streams.get(&*key("a")).map(|e| e.state.visible.tail);
        assert_eq!(tail, Some(want.len() as u64), "the acknowledged append survived");
        assert_eq!(s.bytes(&key("a"), 0, want.len() as u64).await.unwrap(), want);
    });
}
