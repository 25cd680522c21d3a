//! Continuous backup to S3-compatible object storage and `sluice restore`
//! (issue 27).
//!
//! - [`args`]: the flags and every limit;
//! - [`client`]: object_store's S3 client on the backup's own thread;
//! - [`layout`]: the objects and the manifest, readable by any node;
//! - [`scan`]: what changed in the data dir since the last cycle;
//! - [`backup`]: the cycle thread (holds, packs, manifest, retries, deletion);
//! - [`progress`]: shards publish their durable journal positions;
//! - [`status`]: metrics and health;
//! - [`restore`]: the `restore` subcommand.
//!
//! The shards never wait on the network: they only publish positions and
//! skip a clean-up while held (both non-blocking), and the backup thread
//! does all I/O to the object store.

pub mod args;
pub mod backup;
pub mod client;
pub mod layout;
pub mod progress;
pub mod restore;
pub mod scan;
pub mod status;

pub use args::{RestoreArgs, TierArgs};

/// Connects to the object store of `tier` and checks it can write, read and
/// delete there (`None` when no `--tier-url`); the one-line error refuses the start.
pub fn prepare(tier: &TierArgs, dir: &std::path::Path, shards: usize) -> Result<Option<backup::Backup>, String> {
    let Some(url) = &tier.tier_url else { return Ok(None) };
    let remote = client::Remote::new(url, &tier.store, 1)?;
    remote.probe()?;
    backup::Backup::new(remote, dir, shards, tier.backup_interval).map(Some)
}
