//! Command line and configuration (clap): every flag, its `SLUICE_*`
//! environment variable, its default and its accepted range are declared
//! here once; `Config::check` adds the checks that span several flags.

use crate::edge_limits::{
    DEFAULT_BODY_MEMORY, DRAIN_TIMEOUT_RANGE, IDLE_TIMEOUT_RANGE, IO_MEMORY_RANGE, LONG_POLL_TIMEOUT_RANGE,
    MAX_BATCH_FRAMES_RANGE, MAX_BODY_BYTES_RANGE, MAX_BODY_MEMORY_RANGE, MAX_CONNECTIONS_RANGE, MAX_HEADERS_RANGE,
    MAX_HEAD_BYTES_RANGE, MAX_PRODUCERS_RANGE, MAX_PRODUCER_ID_BYTES_RANGE, MAX_READ_BYTES_RANGE,
    MAX_RESPONSE_BYTES_RANGE, MAX_SHARDS_PER_CORE, MAX_WAITERS_RANGE, MIN_LOCKED_MEMORY, REQUEST_TIMEOUT_RANGE,
    SHARDS_RANGE, SSE_RECONNECT_RANGE,
};
use crate::start_error::StartError;
use clap::builder::BoolishValueParser;
use clap::{ArgAction, Args, Parser, Subcommand};
use sluice::http::cors::CorsPolicy;
use sluice::units::{format_duration, format_size, parse_duration, parse_size};
use sluice_shards::log::FsyncMode;
use sluice_shards::tuning;
use std::net::SocketAddr;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::Duration;

/// sluice: a Durable Streams server on pinned io_uring shards with an
/// fsync-durable log.
#[derive(Parser, Debug)]
#[command(name = "sluice", version, propagate_version = true, arg_required_else_help = true)]
#[command(after_help = "Every flag can also be set with its SLUICE_* environment variable; the flag wins.\n\
    Durations take units up to days (500ms, 30s, 5m, 2h, 7d, 1h30m); sizes take units (4096, 64KiB, 64MiB, 1GiB).")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the Durable Streams protocol until SIGTERM or SIGINT.
    Serve(Box<Config>),
    /// Verify a stopped data dir offline, changing nothing: exit 0 clean, 1 damaged.
    Check(CheckArgs),
    /// Rebuild a data dir from a backup on S3-compatible object storage (`serve --tier-url`).
    Restore(crate::tier::RestoreArgs),
}

/// What `sluice check` verifies.
#[derive(Args, Clone, Debug)]
pub struct CheckArgs {
    /// The data directory of a stopped server.
    #[arg(long, value_name = "DIR")]
    pub data_dir: PathBuf,
}

/// Everything a shard needs to know about how to serve.
#[derive(Args, Clone, Debug)]
pub struct Config {
    /// Address to listen on (one SO_REUSEPORT socket per shard).
    #[arg(long, env = "SLUICE_LISTEN", value_name = "ADDR:PORT", default_value = "127.0.0.1:4437")]
    pub listen: SocketAddr,

    /// Data directory (shard-N/ segment files, sluice.meta).
    #[arg(long, env = "SLUICE_DATA_DIR", value_name = "DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// Continuous backup to object storage (issue 27): the `--tier-*` and `--backup-interval` flags.
    #[command(flatten)]
    pub tier: crate::tier::TierArgs,

    /// Shard (executor) count; shard i is pinned to the i-th CPU this process may use.
    /// At most 4 per usable CPU; fixed when the data dir is created [default: the number of usable CPUs].
    #[arg(long, env = "SLUICE_SHARDS", value_name = "N", value_parser = count::<usize>(SHARDS_RANGE),
          default_value_t = cores(), hide_default_value = true)]
    pub shards: usize,

    /// always: acknowledge writes once durable (fdatasync semantics); never: after write(2) only, which
    /// survives a process crash but NOT power loss.
    #[arg(long, env = "SLUICE_FSYNC", value_name = "always|never", value_parser = parse_fsync, default_value = "always")]
    pub fsync: FsyncMode,

    /// Long-poll wait before 204 (10ms..1h).
    #[arg(long, env = "SLUICE_LONG_POLL_TIMEOUT", value_name = "DUR", default_value = "20s",
          value_parser = duration(LONG_POLL_TIMEOUT_RANGE))]
    pub long_poll_timeout: Duration,

    /// SSE connection lifetime before the client reconnects (1s..1d).
    #[arg(long, env = "SLUICE_SSE_RECONNECT", value_name = "DUR", default_value = "60s",
          value_parser = duration(SSE_RECONNECT_RANGE))]
    pub sse_reconnect: Duration,

    /// Request head limit, 431 beyond (1KiB..1MiB).
    #[arg(long, env = "SLUICE_MAX_HEAD_BYTES", value_name = "SIZE", default_value = "16KiB",
          value_parser = size::<usize>(MAX_HEAD_BYTES_RANGE))]
    pub max_head_bytes: usize,

    /// Header count limit, 431 beyond (8..1024).
    #[arg(long, env = "SLUICE_MAX_HEADERS", value_name = "N", default_value = "64",
          value_parser = count::<usize>(MAX_HEADERS_RANGE))]
    pub max_headers: usize,

    /// Request body limit, 413 beyond (1KiB..1GiB; a body is held in memory).
    #[arg(long, env = "SLUICE_MAX_BODY_BYTES", value_name = "SIZE", default_value = "64MiB",
          value_parser = size::<u64>(MAX_BODY_BYTES_RANGE))]
    pub max_body_bytes: u64,

    /// Memory all request bodies being received may hold, server-wide; a body that would
    /// exceed it gets 503 with Retry-After, unread. Split evenly: each shard owns
    /// this / --shards, which must be at least --max-body-bytes (1KiB..16TiB)
    /// [default: 1GiB, or --shards x --max-body-bytes when larger].
    #[arg(long, env = "SLUICE_MAX_BODY_MEMORY", value_name = "SIZE", value_parser = size::<u64>(MAX_BODY_MEMORY_RANGE))]
    pub max_body_memory: Option<u64>,

    /// Open connections per shard; more get 503 and are closed (1..1000000).
    #[arg(long, env = "SLUICE_MAX_CONNECTIONS", value_name = "N", default_value = "10000",
          value_parser = count::<usize>(MAX_CONNECTIONS_RANGE))]
    pub max_connections: usize,

    /// Parked long-poll/SSE readers per shard, 503 beyond (1..10000000).
    #[arg(long, env = "SLUICE_MAX_WAITERS", value_name = "N", default_value = "100000",
          value_parser = count::<usize>(MAX_WAITERS_RANGE))]
    pub max_waiters: usize,

    /// Frames per append-batch request, 413 beyond (1..65536).
    #[arg(long, env = "SLUICE_MAX_BATCH_FRAMES", value_name = "N", default_value = "512",
          value_parser = count::<usize>(MAX_BATCH_FRAMES_RANGE))]
    pub max_batch_frames: usize,

    /// Idempotent producers remembered per stream; beyond it the least recently
    /// written one is forgotten (1..1000000).
    #[arg(long, env = "SLUICE_MAX_PRODUCERS", value_name = "N", default_value = "1000",
          value_parser = count::<usize>(MAX_PRODUCERS_RANGE))]
    pub max_producers: usize,

    /// Producer-Id length, 400 beyond (1..64KiB).
    #[arg(long, env = "SLUICE_MAX_PRODUCER_ID_BYTES", value_name = "SIZE", default_value = "256",
          value_parser = size::<usize>(MAX_PRODUCER_ID_BYTES_RANGE))]
    pub max_producer_id_bytes: usize,

    /// Bytes one catch-up response or SSE event reads ahead of the socket; a JSON
    /// stream reads at least one whole message (4KiB..1GiB).
    #[arg(long, env = "SLUICE_MAX_READ_BYTES", value_name = "SIZE", default_value = "8MiB",
          value_parser = size::<u64>(MAX_READ_BYTES_RANGE))]
    pub max_read_bytes: u64,

    /// Largest catch-up response of a byte stream: a read with more than
    /// --max-read-bytes to catch up on is streamed in pieces of that size, up to this
    /// (4KiB..1TiB).
    #[arg(long, env = "SLUICE_MAX_RESPONSE_BYTES", value_name = "SIZE", default_value = "1GiB",
          value_parser = size::<u64>(MAX_RESPONSE_BYTES_RANGE))]
    pub max_response_bytes: u64,

    /// Keep-alive idle limit; also how long a peer may take to accept each 256KiB of a
    /// response before its connection is reset (1s..1d).
    #[arg(long, env = "SLUICE_IDLE_TIMEOUT", value_name = "DUR", default_value = "60s",
          value_parser = duration(IDLE_TIMEOUT_RANGE))]
    pub idle_timeout: Duration,

    /// Time to receive a whole request, 408 beyond (100ms..1h).
    #[arg(long, env = "SLUICE_REQUEST_TIMEOUT", value_name = "DUR", default_value = "30s",
          value_parser = duration(REQUEST_TIMEOUT_RANGE))]
    pub request_timeout: Duration,

    /// Log segment size, preallocated and zero-filled ahead of use (4KiB..64GiB).
    #[arg(long, env = "SLUICE_SEGMENT_BYTES", value_name = "SIZE", default_value = "64MiB",
          value_parser = size::<u64>(tuning::MIN_SEGMENT_BYTES..=tuning::MAX_SEGMENT_BYTES))]
    pub segment_bytes: u64,

    /// Journal bytes after which a shard flushes its streams' new bytes into their stream
    /// files and checkpoints; writers wait beyond 4x this (1MiB..4GiB). Bounds the memory
    /// unflushed bytes hold and the journal a restart replays.
    #[arg(long, env = "SLUICE_FLUSH_BYTES", value_name = "SIZE", default_value = "32MiB",
          value_parser = size::<u64>(tuning::MIN_FLUSH_BYTES..=tuning::MAX_FLUSH_BYTES))]
    pub flush_bytes: u64,

    /// Longest time between flushes while anything changed; deleted and retained-away
    /// bytes are given back to the file system within two of these (100ms..30s).
    #[arg(long, env = "SLUICE_FLUSH_INTERVAL", value_name = "DUR", default_value = "5s",
          value_parser = duration(ms(tuning::MIN_FLUSH_INTERVAL_MS)..=ms(tuning::MAX_FLUSH_INTERVAL_MS)))]
    pub flush_interval: Duration,

    /// io_uring registered buffer memory per shard, locked in RAM (64KiB..4GiB).
    #[arg(long, env = "SLUICE_IO_MEMORY", value_name = "SIZE", default_value = "2MiB",
          value_parser = size::<usize>(IO_MEMORY_RANGE))]
    pub io_memory: usize,

    /// Log verbosity when RUST_LOG is not set (RUST_LOG, if set, is a full filter and wins).
    #[arg(long, env = "SLUICE_LOG_LEVEL", value_name = "LEVEL", default_value = "info",
          value_parser = ["error", "warn", "info", "debug", "trace"])]
    pub log_level: String,

    /// Log one line per request (method, path, status, duration) at info level.
    #[arg(long, env = "SLUICE_ACCESS_LOG", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          default_value = "false", value_name = "BOOL", value_parser = BoolishValueParser::new(), action = ArgAction::Set)]
    pub access_log: bool,

    /// Log lines as text (key=value) or json (one JSON object per line, access log included).
    #[arg(long, env = "SLUICE_LOG_FORMAT", value_name = "FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,

    /// After SIGTERM, how long in-flight requests may take to finish; live readers are told to
    /// reconnect at once (SSE ends at an event boundary, long-polls get 204) (100ms..5m).
    #[arg(long, env = "SLUICE_DRAIN_TIMEOUT", value_name = "DUR", default_value = "10s",
          value_parser = duration(DRAIN_TIMEOUT_RANGE))]
    pub drain_timeout: Duration,

    /// A TOML file of settings named as the flags (`data-dir = "/var/lib/sluice"`); a flag or
    /// SLUICE_* variable wins over the file, the file over the defaults.
    #[arg(long, env = "SLUICE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Bearer tokens file: SHA-256 hashes of tokens and their scopes (README, Security);
    /// reloaded on SIGHUP. Without it, clients off loopback get 403 unless --open.
    #[arg(long, env = "SLUICE_TOKENS", value_name = "FILE")]
    pub tokens: Option<PathBuf>,

    /// Serve clients from any address without tokens (no access control at all).
    #[arg(long, env = "SLUICE_OPEN", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          default_value = "false", value_name = "BOOL", value_parser = BoolishValueParser::new(), action = ArgAction::Set)]
    pub open: bool,

    /// Web origins browsers may call from: a comma-separated list of http(s)://host[:port],
    /// or * [default: * without --tokens, none with it].
    #[arg(long, env = "SLUICE_CORS_ORIGINS", value_name = "ORIGINS|*", value_parser = CorsPolicy::parse)]
    pub cors_origins: Option<CorsPolicy>,

    /// Development only: webhook subscriptions may target http:// URLs and loopback
    /// addresses (never private networks). Off: https:// to public addresses only.
    #[arg(long, env = "SLUICE_ALLOW_LOCAL_WEBHOOKS", num_args = 0..=1, require_equals = true, default_missing_value = "true",
          default_value = "false", value_name = "BOOL", value_parser = BoolishValueParser::new(), action = ArgAction::Set)]
    pub allow_local_webhooks: bool,

    /// Test-only: periodic tasks (reactor tick, flusher poll, heartbeats,
    /// sweeps) run this many times faster, so a test covers days of timer
    /// periods in seconds. Not for service.
    #[arg(long, env = "SLUICE_TEST_TIME_SCALE", value_name = "N", default_value = "1", hide = true,
          value_parser = count::<u32>(1..=tuning::MAX_TIME_SCALE as u64))]
    pub test_time_scale: u32,

    /// Stream-file descriptors each shard may keep open: not a flag, set by
    /// [`Config::check`] from the open-files limit.
    #[arg(skip = tuning::MAX_OPEN_FILES)]
    pub open_files: usize,
}

impl Config {
    /// Flags that contradict each other, as a bad command line (exit 2):
    /// `--tokens` with `--open` (a plain conflict rule would also refuse
    /// `--open=false`).
    pub fn contradiction(&self) -> Option<&'static str> {
        (self.tokens.is_some() && self.open).then_some("--tokens cannot be used with --open")
    }

    /// A listen address off loopback in protected mode (neither `--tokens`
    /// nor `--open`), where every client but a local one would get 403
    /// while health checks pass: a bad command line too (issue 29 item 7).
    pub fn unserved(&self) -> Option<String> {
        let exposed = !sluice::http::peer::is_loopback(self.listen.ip()) && self.tokens.is_none() && !self.open;
        exposed.then(|| {
            format!(
                "--listen {} is not loopback, but without --tokens only loopback clients are served: \
                 start with --tokens FILE (or --open, to serve everyone without tokens)",
                self.listen
            )
        })
    }

    /// Each shard's part of `--max-body-memory` (or of its default).
    pub fn body_memory_per_shard(&self) -> u64 {
        let shards = self.shards as u64;
        let total = self.max_body_memory.unwrap_or(DEFAULT_BODY_MEMORY.max(shards * self.max_body_bytes));
        total / shards
    }

    /// Checks that span several flags, or a flag and the host; run once
    /// before start. Shares the open-files limit out among the shards
    /// (`max_connections` and `open_files` may come down). Returns the
    /// warnings worth logging; a configuration that cannot work is an
    /// error (one line).
    pub fn check(&mut self, host: &HostLimits) -> Result<Vec<String>, StartError> {
        if self.shards > host.max_shards() {
            return Err(format!(
                "--shards {} is too many for this host: at most {MAX_SHARDS_PER_CORE} per core, {} on {} \
                 (each shard pins a thread and zero-fills its journal segments at start)",
                self.shards,
                host.max_shards(),
                host.cpus()
            )
            .into());
        }
        let mut warnings = Vec::new();
        if self.body_memory_per_shard() < self.max_body_bytes {
            return Err(format!(
                "--max-body-memory {} gives each of the {} shards {}, below --max-body-bytes {}: \
                 raise it to at least {}",
                format_size(self.max_body_memory.unwrap_or_default()),
                self.shards,
                format_size(self.body_memory_per_shard()),
                format_size(self.max_body_bytes),
                format_size(self.shards as u64 * self.max_body_bytes)
            )
            .into());
        }
        warnings.extend(self.share_descriptors(host.open_files)?);
        let locked = (self.shards as u64).saturating_mul(self.io_memory as u64);
        if let Some(memlock) = host.locked_memory {
            if memlock < MIN_LOCKED_MEMORY {
                return Err(format!(
                    "the locked-memory limit {} is below the {} each io_uring executor needs \
                     (raise LimitMEMLOCK / ulimit -l, see tuning/README.md)",
                    format_size(memlock),
                    format_size(MIN_LOCKED_MEMORY)
                )
                .into());
            }
            if locked > memlock {
                warnings.push(format!(
                    "the locked-memory limit {} is below --shards {} x --io-memory {}: io_uring falls back to \
                     unregistered buffers (raise LimitMEMLOCK / ulimit -l)",
                    format_size(memlock),
                    self.shards,
                    format_size(self.io_memory as u64)
                ));
            }
        }
        if self.shards > host.cores {
            warnings.push(format!("--shards {} exceeds the {} cores: shards share cores", self.shards, host.cores));
        }
        Ok(warnings)
    }
}

impl Config {
    /// Splits `open_files` (the process's limit) evenly among the shards:
    /// each keeps [`tuning::FIXED_FDS_PER_SHARD`], then its stream-file
    /// cache and its connections share the rest. When the limit cannot hold
    /// `--max-connections` and a full cache, the cache keeps a quarter of
    /// the rest (or what the connections leave, if more; between
    /// [`tuning::MIN_OPEN_FILES`] and `MAX_OPEN_FILES`) and the connections
    /// get the remainder (refused with 503 beyond, instead of accepts
    /// failing). A limit that leaves fewer than [`tuning::MIN_CONNECTIONS`]
    /// (or `--max-connections`, if lower) is refused. A cut to less than
    /// half the connections or a quarter of the cache is returned as a
    /// warning; a smaller one is only noted (a default start on a host
    /// whose limit is a little low should not warn every time).
    fn share_descriptors(&mut self, open_files: u64) -> Result<Option<String>, String> {
        let per_shard = usize::try_from(open_files / self.shards as u64).unwrap_or(usize::MAX);
        let spare = per_shard.saturating_sub(tuning::FIXED_FDS_PER_SHARD);
        let files = (spare / 4)
            .max(spare.saturating_sub(self.max_connections))
            .clamp(tuning::MIN_OPEN_FILES, tuning::MAX_OPEN_FILES);
        let connections = self.max_connections.min(spare.saturating_sub(files));
        let least = self.max_connections.min(tuning::MIN_CONNECTIONS);
        if connections < least {
            let need = self.shards * (tuning::FIXED_FDS_PER_SHARD + tuning::MIN_OPEN_FILES + least);
            return Err(format!(
                "the open-files limit {open_files} is too low for --shards {}: at least {need} descriptors are needed \
                 (raise LimitNOFILE / ulimit -n)",
                self.shards
            ));
        }
        let shared = format!(
            "the open-files limit {open_files} leaves each of the {} shards {per_shard} descriptors: \
             {connections} connections (of --max-connections {}) and {files} cached stream files \
             (raise LimitNOFILE / ulimit -n)",
            self.shards, self.max_connections
        );
        let warning = if connections < self.max_connections / 2 || files < tuning::MAX_OPEN_FILES / 4 {
            Some(shared)
        } else {
            if connections < self.max_connections || files < tuning::MAX_OPEN_FILES {
                tracing::info!("{shared}");
            }
            None
        };
        self.max_connections = connections;
        self.open_files = files;
        Ok(warning)
    }
}

/// The `SLUICE_*` variable a refused value came from: set in the
/// environment, and its flag not on the command line.
pub fn value_source(e: &clap::Error) -> Option<String> {
    let long = refused_flag(e)?;
    let long = long.as_str();
    let var = format!("SLUICE_{}", long.to_ascii_uppercase().replace('-', "_"));
    let on_command_line = std::env::args().any(|a| a == format!("--{long}") || a.starts_with(&format!("--{long}=")));
    (std::env::var_os(&var).is_some() && !on_command_line).then_some(var)
}

/// The long name (no `--`) of the flag whose value clap refused.
pub fn refused_flag(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return None };
    arg.strip_prefix("--")?.split([' ', '=', '[', '<']).next().map(str::to_string)
}

/// `SLUICE_*` variables in `vars` that no flag reads (a typo such as
/// `SLUICE_SHARD=4` would otherwise be ignored in silence). `SLUICE_FAULT`
/// is the fault-injection switch the tests use.
pub fn unknown_variables(vars: impl Iterator<Item = String>) -> Vec<String> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let serve = cmd.find_subcommand("serve").expect("the serve command exists");
    let known: Vec<String> =
        serve.get_arguments().filter_map(|a| a.get_env()).map(|e| e.to_string_lossy().into_owned()).collect();
    vars.filter(|v| v.starts_with("SLUICE_") && v != crate::fatal::FAULT_VAR && !known.contains(v)).collect()
}

/// What the host allows this process, read once at start.
#[derive(Clone, Debug)]
pub struct HostLimits {
    pub open_files: u64,
    /// `None` when unlimited.
    pub locked_memory: Option<u64>,
    pub cores: usize,
}

impl HostLimits {
    /// Reads the limits, first raising the open-files soft limit to the hard one.
    pub fn read() -> HostLimits {
        let mut nofile = rlimit(libc::RLIMIT_NOFILE);
        if nofile.rlim_cur < nofile.rlim_max {
            nofile.rlim_cur = nofile.rlim_max;
            // SAFETY: setrlimit(2) with a fully initialised struct.
            unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &nofile) };
            nofile = rlimit(libc::RLIMIT_NOFILE);
        }
        let memlock = rlimit(libc::RLIMIT_MEMLOCK).rlim_cur;
        HostLimits {
            open_files: nofile.rlim_cur,
            locked_memory: (memlock != libc::RLIM_INFINITY).then_some(memlock),
            cores: cores(),
        }
    }

    /// The most shards this host runs ([`MAX_SHARDS_PER_CORE`] per usable CPU).
    pub fn max_shards(&self) -> usize {
        self.cores.saturating_mul(MAX_SHARDS_PER_CORE)
    }

    /// The usable CPUs, for messages: "1 usable CPU", "2 usable CPUs".
    pub fn cpus(&self) -> String {
        format!("{} usable CPU{}", self.cores, if self.cores == 1 { "" } else { "s" })
    }
}

fn rlimit(which: libc::__rlimit_resource_t) -> libc::rlimit {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit(2) writes into the struct we own.
    unsafe { libc::getrlimit(which, &mut r) };
    r
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn parse_fsync(s: &str) -> Result<FsyncMode, StartError> {
    match s {
        "always" => Ok(FsyncMode::Always),
        "never" => Ok(FsyncMode::Never),
        _ => Err("use always or never".into()),
    }
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A duration parser accepting `range`.
fn duration(range: RangeInclusive<Duration>) -> impl Fn(&str) -> Result<Duration, StartError> + Clone + Send + Sync {
    let (min, max) = range.into_inner();
    move |s: &str| {
        let d = parse_duration(s)?;
        if d < min || d > max {
            return Err(format!("must be between {} and {}", format_duration(min), format_duration(max)).into());
        }
        Ok(d)
    }
}

/// A size parser (units allowed) accepting `range` bytes.
fn size<T: TryFrom<u64>>(range: RangeInclusive<u64>) -> impl Fn(&str) -> Result<T, StartError> + Clone + Send + Sync {
    let (min, max) = range.into_inner();
    move |s: &str| {
        let n = parse_size(s)?;
        if n < min || n > max {
            return Err(format!("must be between {} and {}", format_size(min), format_size(max)).into());
        }
        Ok(T::try_from(n).map_err(|_| format!("{n} does not fit this platform"))?)
    }
}

/// A plain count parser accepting `range`.
fn count<T: TryFrom<u64>>(range: RangeInclusive<u64>) -> impl Fn(&str) -> Result<T, StartError> + Clone + Send + Sync {
    let (min, max) = range.into_inner();
    move |s: &str| {
        let n: u64 = s.trim().parse().map_err(|_| format!("'{s}' is not a whole number"))?;
        if n < min || n > max {
            return Err(format!("must be between {min} and {max}").into());
        }
        Ok(T::try_from(n).map_err(|_| format!("{n} does not fit this platform"))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn serve(args: &str) -> Result<Config, String> {
        let argv = std::iter::once("sluice").chain(args.split_whitespace());
        match Cli::try_parse_from(argv) {
            Ok(Cli { command: Command::Serve(c) }) => Ok(*c),
            Ok(Cli { command: other }) => Err(format!("not serve: {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    fn roomy_host() -> HostLimits {
        HostLimits { open_files: 1 << 20, locked_memory: None, cores: 256 }
    }

    #[test]
    fn check_takes_a_data_dir() {
        let parsed = Cli::try_parse_from(["sluice", "check", "--data-dir", "/d"]).expect("parses");
        assert!(matches!(parsed.command, Command::Check(a) if a.data_dir.as_os_str() == "/d"));
        assert!(Cli::try_parse_from(["sluice", "check"]).is_err());
        assert!(Cli::try_parse_from(["sluice", "check", "--data-dir", "/d", "--x"]).is_err());
    }

    #[test]
    fn flags_with_units_and_equals() {
        let c =
            serve("serve --listen=127.0.0.1:9 --shards 2 --fsync=never --long-poll-timeout 1h --idle-timeout 1d --segment-bytes 64MiB")
                .expect("parses");
        assert_eq!(c.listen.port(), 9);
        assert_eq!(c.shards, 2);
        assert_eq!(c.fsync, FsyncMode::Never);
        assert_eq!(c.long_poll_timeout, Duration::from_secs(3600));
        assert_eq!(c.idle_timeout, Duration::from_secs(86_400));
        assert_eq!(c.segment_bytes, 64 << 20);
        assert_eq!(c.max_body_bytes, 64 << 20, "default");
        assert!(!c.access_log);
        let c = serve("serve --max-producers 3 --max-producer-id-bytes 16 --max-read-bytes 128KiB").expect("parses");
        assert_eq!((c.max_producers, c.max_producer_id_bytes, c.max_read_bytes), (3, 16, 128 << 10));
    }

    #[test]
    fn nonsense_is_refused_with_the_flag_named() {
        for (args, flag) in [
            ("serve --shards 0", "--shards"),
            ("serve --shards 257", "--shards"),
            ("serve --max-connections 0", "--max-connections"),
            ("serve --fsync sometimes", "--fsync"),
            ("serve --segment-bytes 1KiB", "--segment-bytes"),
            ("serve --long-poll-timeout 0s", "--long-poll-timeout"),
            ("serve --long-poll-timeout 2", "--long-poll-timeout"),
            ("serve --idle-timeout 2w", "--idle-timeout"),
            ("serve --max-body-bytes 2GiB", "--max-body-bytes"),
            ("serve --max-body-memory 1", "--max-body-memory"),
            ("serve --max-producers 0", "--max-producers"),
            ("serve --max-producer-id-bytes 0", "--max-producer-id-bytes"),
            ("serve --max-read-bytes 1KiB", "--max-read-bytes"),
            ("serve --log-level loud", "--log-level"),
            ("serve --bogus 1", "--bogus"),
            ("serve --listen", "--listen"),
            ("serve --cors-origins example.com", "--cors-origins"),
            ("serve --drain-timeout 0s", "--drain-timeout"),
            ("serve --drain-timeout 6m", "--drain-timeout"),
            ("serve --log-format xml", "--log-format"),
        ] {
            let e = serve(args).expect_err(args);
            assert!(e.contains(flag), "{args}: {e}");
        }
    }

    #[test]
    fn every_flag_has_its_environment_variable() {
        let cmd = Cli::command();
        let serve = cmd.find_subcommand("serve").expect("serve");
        let mut n = 0;
        for arg in serve.get_arguments().filter(|a| a.get_long().is_some_and(|l| l != "help")) {
            let long = arg.get_long().expect("long");
            let want = format!("SLUICE_{}", long.to_ascii_uppercase().replace('-', "_"));
            assert_eq!(arg.get_env().and_then(|e| e.to_str()), Some(want.as_str()), "--{long}");
            n += 1;
        }
        assert!(n >= 17, "{n} flags");
    }

    #[test]
    fn cross_flag_checks() {
        let mut c = serve("serve --shards 4 --max-connections 1000 --io-memory 4MiB").expect("parses");
        assert!(c.check(&roomy_host()).expect("fine").is_empty());
        let tight = HostLimits { open_files: 1024, locked_memory: Some(8 << 20), cores: 2 };
        let w = c.check(&tight).expect("warnings only");
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].contains("open-files limit 1024"), "{}", w[0]);
        assert!(w[1].contains("locked-memory limit 8MiB"), "{}", w[1]);
        assert!(w[2].contains("exceeds the 2 cores"), "{}", w[2]);
        assert_eq!((c.max_connections, c.open_files), (168, 56), "1024 / 4 - 32 = 224: a quarter to files");
        let mut lean = serve("serve --shards 4 --max-body-bytes 64MiB --max-body-memory 255MiB").expect("parses");
        let e = lean.check(&roomy_host()).expect_err("a shard's part below one body").to_string();
        assert_eq!(
            e,
            "--max-body-memory 255MiB gives each of the 4 shards 65280KiB, below --max-body-bytes 64MiB: \
             raise it to at least 256MiB"
        );
        let mut fits = serve("serve --shards 4 --max-body-bytes 64MiB --max-body-memory 256MiB").expect("parses");
        assert_eq!((fits.check(&roomy_host()).map(|w| w.len()), fits.body_memory_per_shard()), (Ok(0), 64 << 20));
        let wide = serve("serve --shards 64 --max-body-bytes 64MiB").expect("parses");
        assert_eq!(wide.body_memory_per_shard(), 64 << 20, "the default grows to one largest body per shard");
        assert_eq!(serve("serve --shards 2").expect("parses").body_memory_per_shard(), 512 << 20, "1GiB / 2");
        let small = HostLimits { cores: 1, ..roomy_host() };
        let e = c.check(&small).expect("4 shards on one core are allowed");
        assert!(e[0].contains("exceeds the 1 cores"), "{e:?}");
        let e = serve("serve --shards 5").unwrap().check(&small).expect_err("5 shards on one core").to_string();
        assert!(e.starts_with("--shards 5 is too many") && e.contains("at most 4 per core, 4 on 1 usable CPU "), "{e}");
        let starved = HostLimits { locked_memory: Some(256 << 10), ..roomy_host() };
        let e = c.check(&starved).expect_err("below glommio's minimum").to_string();
        assert!(e.contains("locked-memory limit 256KiB is below the 512KiB"), "{e}");
    }

    #[test]
    fn the_open_files_limit_is_shared_out() {
        let mut c = serve("serve --shards 2 --max-connections 100").expect("parses");
        assert_eq!(c.share_descriptors(2 * (32 + 100 + 512)).expect("fits"), None);
        assert_eq!((c.max_connections, c.open_files), (100, tuning::MAX_OPEN_FILES));
        assert_eq!(c.share_descriptors(2 * (32 + 100 + 200)).expect("fits"), None, "a small cut is only noted");
        assert_eq!((c.max_connections, c.open_files), (100, 200));
        let mut many = serve("serve --shards 2 --max-connections 10000").expect("parses");
        assert_eq!(many.share_descriptors(20_000).expect("fits"), None, "a default start here: noted, no warning");
        assert_eq!((many.max_connections, many.open_files), (10_000 - 32 - 512, tuning::MAX_OPEN_FILES));
        let mut c = serve("serve --shards 2 --max-connections 100").expect("parses");
        let w = c.share_descriptors(2 * (32 + 16 + 40)).expect("fits").expect("a warning");
        assert!(w.contains("40 connections (of --max-connections 100) and 16 cached stream files"), "{w}");
        let e = c.share_descriptors(2 * (32 + 16 + 15)).expect_err("too low");
        assert!(e.contains("the open-files limit 126 is too low for --shards 2: at least 128"), "{e}");
        let mut few = serve("serve --shards 2 --max-connections 2").expect("parses");
        assert!(few.share_descriptors(2 * (32 + 16 + 2)).expect("fits").is_some());
        assert_eq!((few.max_connections, few.open_files), (2, tuning::MIN_OPEN_FILES));
        let e = few.share_descriptors(2 * (32 + 16 + 1)).expect_err("too low");
        assert!(e.contains("the open-files limit 98 is too low for --shards 2: at least 100"), "{e}");
    }

    #[test]
    fn boolean_flags_take_a_value_like_their_variables() {
        assert!(!serve("serve").unwrap().access_log);
        assert!(serve("serve --access-log").unwrap().access_log);
        assert!(serve("serve --access-log=true").unwrap().access_log);
        assert!(serve("serve --access-log=yes").unwrap().access_log);
        assert!(!serve("serve --access-log=false").unwrap().access_log);
        assert!(!serve("serve --open=0").unwrap().open);
        assert!(serve("serve --open").unwrap().open);
        assert!(serve("serve --open=maybe").unwrap_err().contains("--open"));
        assert_eq!(
            serve("serve --tokens t --open").unwrap().contradiction(),
            Some("--tokens cannot be used with --open")
        );
        assert_eq!(serve("serve --tokens t --open=false").unwrap().contradiction(), None);
        assert!(serve("serve --listen 0.0.0.0:1")
            .unwrap()
            .unserved()
            .unwrap()
            .starts_with("--listen 0.0.0.0:1 is not"));
        assert!(serve("serve --listen [::]:1 --open=false").unwrap().unserved().is_some());
        for fine in
            ["--listen [::1]:1", "--listen 127.0.0.2:1", "--listen 0.0.0.0:1 --open", "--listen 0.0.0.0:1 --tokens t"]
        {
            assert_eq!(serve(&format!("serve {fine}")).unwrap().unserved(), None, "{fine}");
        }
    }
}
