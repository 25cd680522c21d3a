//! The tier's flags (`sluice serve` and `sluice restore`) and its limits:
//! every range is declared and checked here, once.

use crate::tier::error::TierError;
use crate::tier::layout::MAX_PACK_BYTES;
use clap::Args;
use sluice::units::{parse_duration, parse_size};
use std::path::PathBuf;
use std::time::Duration;

/// Shortest and longest `--backup-interval`.
pub const MIN_BACKUP_INTERVAL: Duration = Duration::from_millis(100);
pub const MAX_BACKUP_INTERVAL: Duration = Duration::from_secs(3600);
/// First and longest wait between retries of a failed backup step.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(200);
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// One request to the object store gives up after this long (then retried).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The start-up probe of the bucket gives up after this long.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes a pack part holds before it is uploaded (multipart part size).
pub const PART_BYTES: usize = 8 << 20;
/// Smallest and largest `--local-bytes` (stream data kept on local disk).
pub const MIN_LOCAL_BYTES: u64 = 1 << 20;
pub const MAX_LOCAL_BYTES: u64 = 1 << 50;
/// Shortest and longest `--tier-after`.
pub const MIN_TIER_AFTER: Duration = Duration::from_secs(1);
pub const MAX_TIER_AFTER: Duration = Duration::from_secs(10 * 365 * 86_400);
/// Local copies are dropped in steps of at most this many bytes of a file
/// (whole pages), so a drop frees about what `--local-bytes` asks.
pub const DROP_STEP: u64 = 1 << 20;
/// Smallest, default and largest `--cache-bytes` (tiered bytes kept in memory).
pub const MIN_CACHE_BYTES: u64 = 128 << 20;
pub const DEFAULT_CACHE_BYTES: &str = "256MiB";
pub const MAX_CACHE_BYTES: u64 = 1 << 40;
/// Tiered bytes are fetched and cached in blocks of this many bytes of a pack.
pub const BLOCK_BYTES: u64 = 8 << 20;
/// A tiered read also fetches this many bytes of the file after it, all
/// at once (a catch-up reads on); half of the smallest cache.
pub const READ_AHEAD_BYTES: u64 = MIN_CACHE_BYTES / 2;
const _: () = assert!(READ_AHEAD_BYTES + 2 * BLOCK_BYTES <= MIN_CACHE_BYTES, "read-ahead fits in any cache");
/// One range GET of a tiered read gives up after this long: the read is
/// then answered 503, never left hanging.
pub const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(5);
/// Confirmation times of cycles remembered for `--tier-after` (older
/// cycles count as confirmed when this run's first was).
pub const MAX_CYCLE_TIMES: usize = 1 << 16;
/// Manifests kept behind the newest one (a restore racing a cycle still
/// finds every object of the one it read).
pub const KEEP_MANIFESTS: usize = 2;

/// Pack compaction (see [`super::compact`]): a pack is rewritten when
/// under this percentage of its bytes is live (some file of the newest
/// manifest reads them) ...
pub const COMPACT_LIVE_PERCENT: u64 = 50;
/// ... and at least this many of its bytes are dead (smaller savings are
/// not worth the requests).
pub const MIN_COMPACT_DEAD_BYTES: u64 = 1 << 20;
/// Live bytes one compaction step rewrites at most (one new pack; a step
/// runs between backup cycles, so compaction never holds up a cycle longer).
pub const MAX_COMPACT_BYTES: u64 = 32 << 20;
/// Live ranges of a pack this close are read with one range GET (the dead
/// bytes between them are read and skipped: fewer requests).
pub const COMPACT_GAP_BYTES: u64 = 256 << 10;
const _: () = assert!(COMPACT_LIVE_PERCENT > 0 && COMPACT_LIVE_PERCENT < 100, "a live fraction");
const _: () = assert!(
    MAX_COMPACT_BYTES * 100 >= MAX_PACK_BYTES * COMPACT_LIVE_PERCENT,
    "any pack compaction would rewrite fits in one step"
);
const _: () = assert!(MAX_COMPACT_BYTES <= MAX_PACK_BYTES, "a step writes one pack");
const _: () = assert!(COMPACT_GAP_BYTES < MIN_COMPACT_DEAD_BYTES, "reading gaps never costs what compaction saves");

/// Where the backup goes: shared by `serve` and `restore`.
#[derive(Args, Clone, Debug, Default)]
pub struct StoreArgs {
    /// S3 endpoint for non-AWS stores (Garage, MinIO, Ceph RGW), e.g. http://127.0.0.1:3900.
    #[arg(long, env = "SLUICE_TIER_ENDPOINT", value_name = "URL")]
    pub tier_endpoint: Option<String>,

    /// Region of the bucket (AWS: the bucket's region; Garage: its s3_region).
    #[arg(long, env = "SLUICE_TIER_REGION", value_name = "REGION", default_value = "us-east-1")]
    pub tier_region: String,

    /// File with the access key id on its first line and the secret on its
    /// second [default: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY].
    #[arg(long, env = "SLUICE_TIER_CREDENTIALS_FILE", value_name = "FILE")]
    pub tier_credentials_file: Option<PathBuf>,
}

/// `sluice serve`'s backup flags.
#[derive(Args, Clone, Debug, Default)]
pub struct TierArgs {
    /// Continuous backup to S3-compatible object storage: s3://BUCKET/PREFIX (off when unset).
    #[arg(long, env = "SLUICE_TIER_URL", value_name = "s3://BUCKET/PREFIX", value_parser = parse_url)]
    pub tier_url: Option<TierUrl>,

    #[command(flatten)]
    pub store: StoreArgs,

    /// Ship committed data to the object store at least this often (100ms..1h).
    #[arg(long, env = "SLUICE_BACKUP_INTERVAL", value_name = "DUR", default_value = "1s",
          value_parser = interval)]
    pub backup_interval: Duration,

    /// Cold tier: once stream data files hold more than this, the oldest
    /// bytes a confirmed backup holds are dropped locally and read back from
    /// the object store (1MiB..1024TiB; off when unset; needs --tier-url).
    #[arg(long, env = "SLUICE_LOCAL_BYTES", value_name = "SIZE", value_parser = local_bytes)]
    pub local_bytes: Option<u64>,

    /// Cold tier: stream bytes a confirmed backup has held for this long are
    /// dropped locally (1s..10y; off when unset; needs --tier-url).
    #[arg(long, env = "SLUICE_TIER_AFTER", value_name = "DUR", value_parser = tier_after)]
    pub tier_after: Option<Duration>,

    /// Memory for tiered bytes read back from the object store, least recently used dropped first (128MiB..1TiB).
    #[arg(long, env = "SLUICE_CACHE_BYTES", value_name = "SIZE", default_value = DEFAULT_CACHE_BYTES,
          value_parser = cache_bytes)]
    pub cache_bytes: u64,
}

/// `sluice restore`: rebuild a data dir from the object store alone.
#[derive(Args, Clone, Debug)]
pub struct RestoreArgs {
    /// The backup to restore: s3://BUCKET/PREFIX, as given to `serve --tier-url`.
    #[arg(long, value_name = "s3://BUCKET/PREFIX", value_parser = parse_url)]
    pub from: TierUrl,

    /// The new data dir: must not exist, or be empty.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,

    #[command(flatten)]
    pub store: StoreArgs,
}

/// A parsed `s3://BUCKET/PREFIX`.
#[derive(Clone, Debug, PartialEq)]
pub struct TierUrl {
    pub bucket: String,
    /// Without leading or trailing slashes; may be empty.
    pub prefix: String,
}

impl std::fmt::Display for TierUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "s3://{}/{}", self.bucket, self.prefix)
    }
}

pub fn parse_url(s: &str) -> Result<TierUrl, TierError> {
    let rest = s.strip_prefix("s3://").ok_or("expected s3://BUCKET/PREFIX")?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let valid = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.';
    if bucket.len() < 3 || bucket.len() > 63 || !bucket.chars().all(valid) {
        return Err(format!("bucket name {bucket:?}: 3..63 of a-z, 0-9, '-' and '.'").into());
    }
    let prefix = prefix.trim_matches('/');
    if prefix.split('/').any(|p| p == "." || p == "..") || (!prefix.is_empty() && prefix.contains("//")) {
        return Err(format!("prefix {prefix:?}: no empty, '.' or '..' parts").into());
    }
    Ok(TierUrl { bucket: bucket.to_string(), prefix: prefix.to_string() })
}

fn interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    if d < MIN_BACKUP_INTERVAL || d > MAX_BACKUP_INTERVAL {
        return Err(format!("{s}: must be between 100ms and 1h"));
    }
    Ok(d)
}

fn sized(s: &str, min: u64, max: u64) -> Result<u64, String> {
    let n = parse_size(s).map_err(|e| e.to_string())?;
    if n < min || n > max {
        return Err(format!(
            "{s}: must be between {} and {}",
            sluice::units::format_size(min),
            sluice::units::format_size(max)
        ));
    }
    Ok(n)
}

fn local_bytes(s: &str) -> Result<u64, String> {
    sized(s, MIN_LOCAL_BYTES, MAX_LOCAL_BYTES)
}

fn cache_bytes(s: &str) -> Result<u64, String> {
    sized(s, MIN_CACHE_BYTES, MAX_CACHE_BYTES)
}

fn tier_after(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s).map_err(|e| e.to_string())?;
    if d < MIN_TIER_AFTER || d > MAX_TIER_AFTER {
        return Err(format!("{s}: must be between 1s and 10 years"));
    }
    Ok(d)
}

impl TierArgs {
    /// Whether local copies may be dropped (the cold tier is on).
    pub fn tiering(&self) -> bool {
        self.local_bytes.is_some() || self.tier_after.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_and_bad_ones_are_named() {
        assert_eq!(
            parse_url("s3://my-bucket/a/b/").unwrap(),
            TierUrl { bucket: "my-bucket".into(), prefix: "a/b".into() }
        );
        assert_eq!(parse_url("s3://bkt").unwrap().prefix, "");
        assert!(parse_url("http://bkt/x").unwrap_err().to_string().contains("s3://"));
        assert!(parse_url("s3://B/x").unwrap_err().to_string().contains("bucket"));
        assert!(parse_url("s3://bkt/a/../b").unwrap_err().to_string().contains("prefix"));
        assert!(parse_url("s3://bkt/a//b").unwrap_err().to_string().contains("prefix"));
    }

    #[test]
    fn interval_limits() {
        assert_eq!(interval("1s").unwrap(), Duration::from_secs(1));
        assert!(interval("10ms").is_err());
        assert!(interval("2h").is_err());
        assert!(interval("x").is_err());
    }

    #[test]
    fn cold_tier_limits() {
        assert_eq!(local_bytes("64MiB").unwrap(), 64 << 20);
        assert!(local_bytes("1KiB").unwrap_err().to_string().contains("between 1MiB and"));
        assert_eq!(cache_bytes(DEFAULT_CACHE_BYTES).unwrap(), 256 << 20);
        assert!(cache_bytes("64MiB").unwrap_err().to_string().contains("between 128MiB and 1TiB"));
        assert!(cache_bytes("2TiB").is_err());
        assert_eq!(tier_after("1h").unwrap(), Duration::from_secs(3600));
        assert!(tier_after("10ms").is_err());
    }
}
