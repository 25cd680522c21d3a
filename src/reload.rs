//! SIGHUP as an event every shard can react to. The main thread (the only
//! one that receives signals) bumps a shared counter; a task on each shard
//! polls it and notifies the shard's `Ctx::reload` signal, so shard code
//! waits with `ctx.reload.changed(seen).await` and re-reads what it reloads.
//! SIGHUP never stops the server.

use crate::ctx::Ctx;
use crate::edge_limits::RELOAD_POLL;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// SIGHUPs received by the process so far.
#[derive(Default)]
pub struct Reloads(AtomicU64);

impl Reloads {
    /// Called by the signal thread for each SIGHUP.
    pub fn request(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }

    fn count(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// Runs on each shard: turns new SIGHUPs into `ctx.reload` notifications,
/// one per SIGHUP (the signal's generation is the number seen).
pub async fn watch(ctx: Rc<Ctx>, reloads: Arc<Reloads>) {
    loop {
        while ctx.reload.generation() < reloads.count() {
            ctx.reload.notify();
        }
        glommio::timer::sleep(sluice_shards::tick::period(RELOAD_POLL)).await;
    }
}
