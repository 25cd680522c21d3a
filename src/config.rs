//! Command line and configuration: every limit sluice enforces is a flag here.

use sluice_shards::log::FsyncMode;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Everything a shard needs to know about how to serve.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub shards: usize,
    pub fsync: FsyncMode,
    pub long_poll_timeout: Duration,
    pub sse_reconnect: Duration,
    pub max_head_bytes: usize,
    pub max_headers: usize,
    pub max_body_bytes: u64,
    pub max_connections: usize,
    pub max_waiters: usize,
    pub max_batch_frames: usize,
    pub max_producers: usize,
    pub max_producer_id_bytes: usize,
    pub max_read_bytes: u64,
    pub idle_timeout: Duration,
    pub request_timeout: Duration,
    pub segment_bytes: u64,
    pub io_memory: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: "127.0.0.1:4437".parse().expect("static address"),
            data_dir: PathBuf::from("./data"),
            shards: std::thread::available_parallelism().map_or(1, |n| n.get()),
            fsync: FsyncMode::Always,
            long_poll_timeout: Duration::from_secs(20),
            sse_reconnect: Duration::from_secs(60),
            max_head_bytes: 16 * 1024,
            max_headers: 64,
            max_body_bytes: 64 * 1024 * 1024,
            max_connections: 10_000,
            max_waiters: 100_000,
            max_batch_frames: 512,
            max_producers: 1000,
            max_producer_id_bytes: 256,
            max_read_bytes: 8 * 1024 * 1024,
            idle_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            segment_bytes: 64 * 1024 * 1024,
            io_memory: 2 * 1024 * 1024,
        }
    }
}

pub const USAGE: &str = "\
sluice - a Durable Streams server

USAGE:
    sluice serve [OPTIONS]
    sluice --help

OPTIONS (defaults in brackets):
    --listen ADDR:PORT          address to listen on [127.0.0.1:4437]
    --data-dir DIR              data directory [./data]
    --shards N                  shard (executor) count, fixed per data dir [cores]
    --fsync always|never        always: acknowledge after fdatasync (default);
                                never: acknowledge after write(2) only, which
                                survives a process crash but NOT power loss
    --long-poll-timeout DUR     long-poll wait before 204 [20s]
    --sse-reconnect DUR         SSE connection lifetime before the client reconnects [60s]
    --max-head-bytes N          request head limit, 431 beyond [16384]
    --max-headers N             header count limit, 431 beyond [64]
    --max-body-bytes N          request body limit (at most 1 GiB), 413 beyond [67108864]
    --max-connections N         open connections per shard; more are closed [10000]
    --max-waiters N             parked long-poll/SSE readers per shard, 503 beyond [100000]
    --max-batch-frames N        frames per append-batch request, 413 beyond [512]
    --max-producers N           idempotent producers remembered per stream; the
                                least recently written is forgotten beyond [1000]
    --max-producer-id-bytes N   Producer-Id length, 400 beyond [256]
    --max-read-bytes N          bytes one catch-up response or SSE event reads
                                ahead of the socket (a JSON stream: at least one
                                whole message) [8388608]
    --idle-timeout DUR          keep-alive idle limit [60s]
    --request-timeout DUR       time to receive a whole request [30s]
    --segment-bytes N           log segment size [67108864]
    --io-memory N               io_uring registered buffer memory per shard [2097152]

DUR is a number with a unit: 500ms, 2s, 1m.
";

/// Largest `--max-body-bytes`: a log frame's length is a u32, and a JSON
/// array body encodes to at most three times its size (4 bytes of length per
/// 2-byte message), so 1 GiB keeps every record well inside one frame.
const MAX_BODY_LIMIT: u64 = 1 << 30;

/// Parses `2s`, `500ms`, `1m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration '{s}' (use e.g. 500ms, 2s, 1m)");
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => n.checked_mul(60).map(Duration::from_secs).ok_or_else(bad),
        _ => Err(bad()),
    }
}

/// What the command line asked for.
pub enum Command {
    Serve(Box<Config>),
    Help,
}

/// Parses `args` (without the program name).
pub fn parse_args(args: &[String]) -> Result<Command, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("serve") => {}
        Some("--help") | Some("-h") | Some("help") | None => return Ok(Command::Help),
        Some(other) => return Err(format!("unknown command '{other}' (try: sluice serve --help)")),
    }
    let mut c = Config::default();
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Ok(Command::Help);
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let num = |v: &str| v.parse::<u64>().map_err(|_| format!("{flag}: '{v}' is not a number"));
        let positive = |n: u64| if n > 0 { Ok(n) } else { Err(format!("{flag} must be at least 1")) };
        match flag.as_str() {
            "--listen" => c.listen = value.parse().map_err(|_| format!("--listen: '{value}' is not ADDR:PORT"))?,
            "--data-dir" => c.data_dir = PathBuf::from(value),
            "--shards" => {
                c.shards = num(value)? as usize;
                if c.shards == 0 || c.shards > 256 {
                    return Err("--shards must be between 1 and 256".into());
                }
            }
            "--fsync" => {
                c.fsync = match value.as_str() {
                    "always" => FsyncMode::Always,
                    "never" => FsyncMode::Never,
                    v => return Err(format!("--fsync: '{v}' is not always|never")),
                }
            }
            "--long-poll-timeout" => c.long_poll_timeout = parse_duration(value)?,
            "--sse-reconnect" => c.sse_reconnect = parse_duration(value)?,
            "--max-head-bytes" => c.max_head_bytes = num(value)? as usize,
            "--max-headers" => c.max_headers = num(value)? as usize,
            "--max-body-bytes" => {
                c.max_body_bytes = num(value)?;
                if c.max_body_bytes == 0 || c.max_body_bytes > MAX_BODY_LIMIT {
                    return Err(format!("--max-body-bytes must be between 1 and {MAX_BODY_LIMIT}"));
                }
            }
            "--max-connections" => c.max_connections = num(value)? as usize,
            "--max-waiters" => c.max_waiters = num(value)? as usize,
            "--max-batch-frames" => c.max_batch_frames = num(value)? as usize,
            "--max-producers" => c.max_producers = positive(num(value)?)? as usize,
            "--max-producer-id-bytes" => c.max_producer_id_bytes = positive(num(value)?)? as usize,
            "--max-read-bytes" => c.max_read_bytes = positive(num(value)?)?,
            "--idle-timeout" => c.idle_timeout = parse_duration(value)?,
            "--request-timeout" => c.request_timeout = parse_duration(value)?,
            "--segment-bytes" => c.segment_bytes = num(value)?.max(4096),
            "--io-memory" => c.io_memory = num(value)? as usize,
            other => return Err(format!("unknown option '{other}' (see sluice --help)")),
        }
    }
    Ok(Command::Serve(Box::new(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("2").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("2h").is_err());
        assert!(parse_duration("18446744073709551615m").is_err());
    }

    #[test]
    fn flags() {
        let Ok(Command::Serve(c)) =
            parse_args(&args("serve --listen 127.0.0.1:9 --shards 2 --fsync never --long-poll-timeout 2s"))
        else {
            panic!("should parse")
        };
        assert_eq!(c.listen.port(), 9);
        assert_eq!(c.shards, 2);
        assert_eq!(c.fsync, FsyncMode::Never);
        assert_eq!(c.long_poll_timeout, Duration::from_secs(2));
        assert!(parse_args(&args("serve --shards 0")).is_err());
        assert!(parse_args(&args("serve --fsync sometimes")).is_err());
        assert!(parse_args(&args("serve --max-body-bytes 1073741824")).is_ok());
        assert!(parse_args(&args("serve --max-body-bytes 1073741825")).is_err());
        for zero in ["--max-producers", "--max-producer-id-bytes", "--max-read-bytes", "--max-body-bytes"] {
            assert!(parse_args(&args(&format!("serve {zero} 0"))).is_err(), "{zero}");
        }
        let Ok(Command::Serve(c)) = parse_args(&args("serve --max-producers 3 --max-read-bytes 4096")) else {
            panic!("should parse")
        };
        assert_eq!((c.max_producers, c.max_read_bytes), (3, 4096));
        assert!(parse_args(&args("serve --bogus 1")).is_err());
        assert!(parse_args(&args("serve --listen")).is_err());
        assert!(matches!(parse_args(&args("--help")), Ok(Command::Help)));
    }
}
