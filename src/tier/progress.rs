//! Each shard's durable journal position, published for the backup thread:
//! a task on the shard samples where its records end, waits until they are
//! durable, and publishes that position with a fresh sequence number. The
//! backup ships journal bytes only up to a published position, so it never
//! copies bytes a commit may still be writing as if they were final.

use sluice_shards::store::Shard;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How often a shard publishes its position.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(10);

#[derive(Clone, Copy, Debug, Default)]
pub struct Published {
    /// Increases with every publication.
    pub seq: u64,
    pub position: (u32, u64),
}

fn all() -> &'static Mutex<Vec<Published>> {
    static ALL: OnceLock<Mutex<Vec<Published>>> = OnceLock::new();
    ALL.get_or_init(Default::default)
}

fn set(shard: usize, position: (u32, u64)) {
    let mut all = all().lock().unwrap_or_else(|p| p.into_inner());
    if all.len() <= shard {
        all.resize(shard + 1, Published::default());
    }
    let seq = all[shard].seq + 1;
    all[shard] = Published { seq, position };
}

/// The latest publication of every shard (`shards` of them).
pub fn read(shards: usize) -> Vec<Published> {
    let all = all().lock().unwrap_or_else(|p| p.into_inner());
    (0..shards).map(|i| all.get(i).copied().unwrap_or_default()).collect()
}

/// Waits (on the backup thread) until every shard published twice after
/// `before`, so each position was sampled after the call; `None` after `limit`.
pub fn fresh(before: &[Published], limit: Duration) -> Option<Vec<Published>> {
    let started = Instant::now();
    loop {
        let now = read(before.len());
        if now.iter().zip(before).all(|(n, b)| n.seq >= b.seq + 2) {
            return Some(now);
        }
        if started.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The shard's publishing task (runs until the process ends).
pub async fn publish(id: usize, shard: &Shard) {
    loop {
        let (position, lsn) = (shard.log.position(), shard.log.assigned());
        if shard.log.durable(lsn).await.is_ok() {
            set(id, position);
        }
        glommio::timer::sleep(PUBLISH_EVERY).await;
    }
}
