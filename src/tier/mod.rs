//! Continuous backup to S3-compatible object storage and `sluice restore`
//! (issue 27).
//!
//! - [`args`]: the flags and every limit;
//! - [`error`]: the tier's one error type;
//! - [`client`]: object_store's S3 client on the backup's own thread;
//! - [`layout`]: the objects and the manifest, readable by any node;
//! - [`scan`]: what changed in the data dir since the last cycle;
//! - [`backup`]: the cycle thread (holds, packs, manifest, retries, deletion);
//! - [`compact`]: rewriting the live bytes of mostly-dead packs;
//! - [`progress`]: shards publish their durable journal positions;
//! - [`status`]: metrics and health;
//! - [`restore`]: the `restore` subcommand;
//! - the cold tier: [`tiering`] (which confirmed local copies to drop, and
//!   dropping them), [`fetch`] (reading tiered bytes back on a thread of its
//!   own), [`extents`] (where a file's bytes are in the packs),
//!   [`leases`] (which mappings reads still use) and [`cache`] (the bounded
//!   cache of what was read back).
//!
//! The shards never wait on the network: they only publish positions and
//! skip a clean-up while held (both non-blocking), the backup thread does
//! all writes to the object store, and the reading thread answers tiered
//! reads over a channel the shards await.

use crate::tier::error::TierError;
pub mod args;
pub mod backup;
pub mod cache;
pub mod client;
pub mod compact;
pub mod error;
pub mod extents;
pub mod fetch;
pub mod layout;
pub mod leases;
pub mod progress;
pub mod restore;
pub mod scan;
pub mod status;
pub mod tiering;

pub use args::{RestoreArgs, TierArgs};

/// Connects to the object store of `tier` and checks it can write, read and
/// delete there (`None` when no `--tier-url`); the one-line error refuses the start.
/// Without one, a data dir holding tiered bytes, or cold-tier flags, refuse it.
pub fn prepare(tier: &TierArgs, dir: &std::path::Path, shards: usize) -> Result<Option<backup::Backup>, TierError> {
    let Some(url) = &tier.tier_url else {
        if tier.tiering() {
            return Err("--local-bytes and --tier-after need --tier-url (the cold tier is in the object store)".into());
        }
        // A data dir that is not a directory holds no marks (the start
        // refuses a file there, with its own line).
        for shard in (0..shards as u32).filter(|_| dir.is_dir()) {
            if !tiering::load(dir, shard)?.is_empty() {
                return Err(format!(
                    "shard-{shard} holds stream bytes dropped locally and kept in the object store: \
                     start with the --tier-url it backs up to"
                )
                .into());
            }
        }
        return Ok(None);
    };
    let remote = client::Remote::new(url, &tier.store, 1)?;
    remote.probe()?;
    // The reading thread's requests are retried by the reader, not the client.
    let map = fetch::start(client::Remote::new(url, &tier.store, 0)?, tier.cache_bytes);
    backup::Backup::new(remote, dir, shards, tier, map).map(Some)
}
