//! Command-line flags: a hand-written parser for `--flag value` pairs, with
//! duration (`10s`, `500ms`, `2m`) and size (`256`, `1MiB`, `1GiB`) values.

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

pub const USAGE: &str = "\
sluice-bench: load generator for Durable Streams servers (sluice or any other)

usage: sluice-bench --scenario write|pool|batch|healthz|fanout|catchup|idle|restart [flags]

  --url URL            server base URL (http only)             [http://127.0.0.1:4437]
  --surface v1|bucket  /v1/stream/{id}, or /{bucket}/{id} after PUT /bench   [v1]
  --scenario NAME      write | pool | batch | healthz | fanout | catchup | idle |
                       restart                                              [write]
  --streams N          write: streams = writer connections; pool: streams every
                       connection rotates over; healthz: connections;
                       idle: streams to create                                [100]
  --duration DUR       measured time for write, healthz, fanout               [10s]
  --warmup DUR         run before measuring (not recorded)                     [1s]
  --payload BYTES      append body size (write, fanout)                        [256]
  --frames N           batch: frames per append-batch request (bucket surface) [512]
  --frame-bytes BYTES  batch: payload bytes per frame                           [16]
  --subscribers N      fanout: SSE subscribers on the one stream              [100]
  --rate N             fanout: appends per second                              [50]
  --bytes BYTES        catchup: stream size to fill and read back             [1GiB]
  --append-bytes BYTES catchup: body size of each fill append (bucket surface:
                       of each append-batch frame, --frames per request)     [1MiB]
  --interleave N       catchup: fill N streams round-robin, read the first     [1]
  --read-path PATH     catchup: only read PATH (a stream filled before, or
                       bench/trivial/file_server.c's ceiling), no fill
  --initial-bytes N    idle: bytes each created stream starts with (one
                       message in its create request; 0: empty)             [0]
  --delete-all yes|no  idle: then delete every created stream, report the
                       delete rate and the RSS after                         [no]
  --connections N      pool: writer connections; idle/setup: concurrent
                       creating connections                                   [128]
  --threads N          client event-loop threads                                [2]
  --server-pid PID     report this process's RSS and CPU use
  --server-cmd CMD     restart: command to start the server (split on spaces)
  --timeout DUR        restart: give up waiting for /v1/healthz after this    [60s]
  --prefix STR         stream id prefix (default: unique per run)
  --label STR          free-form label copied into the JSON result
  --json FILE          also write the result as JSON to FILE
";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surface {
    V1,
    Bucket,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    Write,
    Pool,
    Batch,
    Healthz,
    Fanout,
    Catchup,
    Idle,
    Restart,
}

impl Scenario {
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Write => "write",
            Scenario::Pool => "pool",
            Scenario::Batch => "batch",
            Scenario::Healthz => "healthz",
            Scenario::Fanout => "fanout",
            Scenario::Catchup => "catchup",
            Scenario::Idle => "idle",
            Scenario::Restart => "restart",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Config {
    pub url: String,
    pub addr: SocketAddr,
    /// `host:port` as sent in the Host header.
    pub host: String,
    pub surface: Surface,
    pub scenario: Scenario,
    pub streams: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub payload: usize,
    pub frames: usize,
    pub frame_bytes: usize,
    pub subscribers: usize,
    pub rate: u32,
    pub bytes: u64,
    pub append_bytes: usize,
    /// catchup: streams filled round-robin (the first is read back).
    pub interleave: usize,
    /// catchup: read this path as it is, with no stream created or filled.
    pub read_path: Option<String>,
    /// idle: bytes each created stream starts with.
    pub initial_bytes: usize,
    /// idle: delete every created stream afterwards.
    pub delete_all: bool,
    pub connections: usize,
    pub threads: usize,
    pub server_pid: Option<u32>,
    pub server_cmd: Option<String>,
    pub timeout: Duration,
    pub prefix: String,
    pub label: Option<String>,
    pub json: Option<String>,
}

pub fn parse(args: &[String]) -> Result<Config, String> {
    let mut c = Config {
        url: "http://127.0.0.1:4437".into(),
        addr: "127.0.0.1:4437".parse().expect("literal"),
        host: "127.0.0.1:4437".into(),
        surface: Surface::V1,
        scenario: Scenario::Write,
        streams: 100,
        duration: Duration::from_secs(10),
        warmup: Duration::from_secs(1),
        payload: 256,
        frames: 512,
        frame_bytes: 16,
        subscribers: 100,
        rate: 50,
        bytes: 1 << 30,
        append_bytes: 1 << 20,
        interleave: 1,
        read_path: None,
        initial_bytes: 0,
        delete_all: false,
        connections: 128,
        threads: 2,
        server_pid: None,
        server_cmd: None,
        timeout: Duration::from_secs(60),
        prefix: default_prefix(),
        label: None,
        json: None,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag.as_str(), None),
        };
        let value = match inline {
            Some(v) => v,
            None => it.next().cloned().ok_or_else(|| format!("{name} needs a value"))?,
        };
        let v = value.as_str();
        match name {
            "--url" => c.url = v.to_string(),
            "--surface" => {
                c.surface = match v {
                    "v1" => Surface::V1,
                    "bucket" => Surface::Bucket,
                    _ => return Err(format!("--surface: v1 or bucket, not {v}")),
                }
            }
            "--scenario" => {
                c.scenario = match v {
                    "write" => Scenario::Write,
                    "pool" => Scenario::Pool,
                    "batch" => Scenario::Batch,
                    "healthz" => Scenario::Healthz,
                    "fanout" => Scenario::Fanout,
                    "catchup" => Scenario::Catchup,
                    "idle" => Scenario::Idle,
                    "restart" => Scenario::Restart,
                    _ => return Err(format!("unknown scenario {v}")),
                }
            }
            "--streams" => c.streams = count(name, v)?,
            "--duration" => c.duration = duration(name, v)?,
            "--warmup" => c.warmup = duration(name, v)?,
            "--payload" => c.payload = size(name, v)? as usize,
            "--frames" => c.frames = count(name, v)?,
            "--frame-bytes" => c.frame_bytes = size(name, v)? as usize,
            "--subscribers" => c.subscribers = count(name, v)?,
            "--rate" => c.rate = count(name, v)? as u32,
            "--bytes" => c.bytes = size(name, v)?,
            "--append-bytes" => c.append_bytes = size(name, v)? as usize,
            "--interleave" => c.interleave = count(name, v)?,
            "--read-path" if v.starts_with('/') => c.read_path = Some(v.to_string()),
            "--read-path" => return Err(format!("{name} must start with /, not {v}")),
            "--initial-bytes" => c.initial_bytes = size(name, v)? as usize,
            "--delete-all" => {
                c.delete_all = match v {
                    "yes" => true,
                    "no" => false,
                    _ => return Err(format!("{name} must be yes or no")),
                }
            }
            "--connections" => c.connections = count(name, v)?,
            "--threads" => c.threads = count(name, v)?,
            "--server-pid" => c.server_pid = Some(count(name, v)? as u32),
            "--server-cmd" => c.server_cmd = Some(v.to_string()),
            "--timeout" => c.timeout = duration(name, v)?,
            "--prefix" => c.prefix = v.to_string(),
            "--label" => c.label = Some(v.to_string()),
            "--json" => c.json = Some(v.to_string()),
            _ => return Err(format!("unknown flag {name}")),
        }
    }
    let rest = c.url.strip_prefix("http://").ok_or("--url must start with http://")?;
    let hostport = rest.split('/').next().unwrap_or(rest);
    if hostport.is_empty() {
        return Err("--url has no host".into());
    }
    let with_port = if hostport.contains(':') { hostport.to_string() } else { format!("{hostport}:80") };
    c.addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("--url {}: {e}", c.url))?
        .next()
        .ok_or_else(|| format!("--url {}: no address", c.url))?;
    if !c.addr.ip().is_loopback() {
        return Err(format!("--url {}: only loopback targets are allowed", c.url));
    }
    c.host = with_port;
    if c.scenario == Scenario::Batch {
        // append-batch is a sub-resource of the bucketed surface only.
        c.surface = Surface::Bucket;
    }
    if c.threads == 0 || c.connections == 0 || c.rate == 0 || c.frames == 0 {
        return Err("--threads, --connections, --rate and --frames must be at least 1".into());
    }
    if c.payload < 32 {
        return Err("--payload must be at least 32 bytes (fanout embeds a timestamp)".into());
    }
    Ok(c)
}

/// A run-unique stream id prefix, so repeated runs against one server never
/// collide with streams (or closed streams) of earlier runs.
fn default_prefix() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    format!("b{}-{}-", secs % 1_000_000, std::process::id())
}

fn count(name: &str, v: &str) -> Result<usize, String> {
    v.replace('_', "").parse().map_err(|_| format!("{name}: not a count: {v}"))
}

/// A duration as the server's flags take it (`500ms`, `10s`, `2m`, `1h30m`),
/// or bare seconds.
pub fn duration(name: &str, v: &str) -> Result<Duration, String> {
    let with_unit =
        if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) { format!("{v}s") } else { v.to_string() };
    sluice::units::parse_duration(&with_unit).map_err(|e| format!("{name}: {e}"))
}

/// A size as the server's flags take it (`256`, `4KiB`, `1MiB`, `1GB`), plus
/// the SI shorthands `K`, `M`, `G` (`2K` = `2KB`).
pub fn size(name: &str, v: &str) -> Result<u64, String> {
    let si = v.strip_suffix(['K', 'M', 'G']).map(|n| format!("{n}{}B", &v[n.len()..]));
    sluice::units::parse_size(si.as_deref().unwrap_or(v)).map_err(|e| format!("{name}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_flags_and_units() {
        let c = parse(&args("--url http://127.0.0.1:9000 --scenario fanout --duration 500ms --bytes 1GiB")).unwrap();
        assert_eq!(c.addr.port(), 9000);
        assert_eq!(c.host, "127.0.0.1:9000");
        assert_eq!(c.scenario, Scenario::Fanout);
        assert_eq!(c.duration, Duration::from_millis(500));
        assert_eq!(c.bytes, 1 << 30);
        assert_eq!(size("x", "1MiB").unwrap(), 1 << 20);
        assert_eq!(size("x", "2K").unwrap(), 2000);
        assert_eq!(duration("x", "2m").unwrap(), Duration::from_secs(120));
        assert!(parse(&args("--url http://10.0.0.1:80")).is_err());
        assert!(parse(&args("--nope 1")).is_err());
        let c = parse(&args("--scenario batch --frames 64 --frame-bytes 1KiB")).unwrap();
        assert_eq!((c.scenario, c.frames, c.frame_bytes), (Scenario::Batch, 64, 1024));
        assert!(parse(&args("--scenario batch --frames 0")).is_err());
        let c = parse(&args("--scenario catchup --read-path /v1/stream/a")).unwrap();
        assert_eq!(c.read_path.as_deref(), Some("/v1/stream/a"));
        assert!(parse(&args("--scenario catchup --read-path v1/stream/a")).is_err());
    }
}
