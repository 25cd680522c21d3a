//! Setup shared by scenarios: the bench bucket (bucket surface) and creating
//! many streams concurrently through the closed-loop engine (creates are
//! durable, so doing them one at a time would take one fsync each).

use crate::args::{Config, Surface};
use crate::blocking::Client;
use crate::driver::{self, Plan, Source};
use crate::progress::Progress;
use crate::request::{path_base, BUCKET};
use crate::stats::Tally;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Creates the bench bucket when the bucket surface is used (201, or 409 if
/// an earlier run made it).
pub fn surface(cfg: &Config) -> Result<(), String> {
    if cfg.surface == Surface::V1 {
        return Ok(());
    }
    let mut c = Client::connect(cfg.addr).map_err(|e| format!("connect {}: {e}", cfg.addr))?;
    let (h, body) =
        c.request("PUT", &format!("/{BUCKET}"), &cfg.host, None, b"").map_err(|e| format!("PUT /{BUCKET}: {e}"))?;
    match h.status {
        200..=299 | 409 => Ok(()),
        s => Err(format!("PUT /{BUCKET}: {s} {}", String::from_utf8_lossy(&body))),
    }
}

/// What [`Each`] does to every stream.
#[derive(Clone)]
enum Op {
    /// PUT with this content type and body (empty: an empty stream).
    Create {
        content_type: &'static str,
        initial: Vec<u8>,
    },
    Delete,
}

/// Renders `Op` on `{base}{prefix}{i}` for i = 0..total, shared across threads.
struct Each {
    next: Arc<AtomicUsize>,
    total: usize,
    base: String,
    host: String,
    op: Op,
}

impl Source for Each {
    fn next(&mut self, _conn: usize, req: &mut Vec<u8>) -> bool {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        if i >= self.total {
            return false;
        }
        req.clear();
        match &self.op {
            Op::Delete => {
                let _ = write!(req, "DELETE {}{i} HTTP/1.1\r\nhost: {}\r\n\r\n", self.base, self.host);
            }
            Op::Create { content_type, initial } => {
                let _ = write!(
                    req,
                    "PUT {}{i} HTTP/1.1\r\nhost: {}\r\ncontent-type: {}\r\ncontent-length: {}\r\n\r\n",
                    self.base,
                    self.host,
                    content_type,
                    initial.len()
                );
                req.extend_from_slice(initial);
            }
        }
        true
    }
}

/// What creating streams took.
pub struct Created {
    pub tally: Tally,
    pub secs: f64,
}

/// Creates streams `{name_prefix}0 .. {name_prefix}{total-1}` over
/// `connections` concurrent connections, each with `--initial-bytes` of
/// data (the idle scenario; others create empty streams). Bounded by `limit`.
pub fn create_streams(
    cfg: &Config,
    name_prefix: &str,
    total: usize,
    content_type: &'static str,
    initial: usize,
    progress: &Arc<Progress>,
    limit: Duration,
) -> Created {
    let op = Op::Create { content_type, initial: vec![b'x'; initial] };
    run_each(cfg, name_prefix, total, op, progress, limit)
}

/// Deletes the streams [`create_streams`] made, the same way.
pub fn delete_streams(
    cfg: &Config,
    name_prefix: &str,
    total: usize,
    progress: &Arc<Progress>,
    limit: Duration,
) -> Created {
    run_each(cfg, name_prefix, total, Op::Delete, progress, limit)
}

fn run_each(
    cfg: &Config,
    name_prefix: &str,
    total: usize,
    op: Op,
    progress: &Arc<Progress>,
    limit: Duration,
) -> Created {
    let next = Arc::new(AtomicUsize::new(0));
    let base = format!("{}{name_prefix}", path_base(cfg));
    let sources = (0..cfg.threads)
        .map(|_| Each { next: next.clone(), total, base: base.clone(), host: cfg.host.clone(), op: op.clone() })
        .collect();
    let start = Instant::now();
    let plan = Plan {
        addr: cfg.addr,
        connections: cfg.connections.min(total).max(1),
        threads: cfg.threads,
        measure_from: start,
        stop_at: start + limit,
    };
    let out = driver::run(&plan, sources, progress);
    Created { tally: out.all, secs: out.finished.duration_since(start).as_secs_f64() }
}
