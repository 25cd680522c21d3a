//! Catch-up: fill a stream to `--bytes` with `--append-bytes` appends (from
//! a few concurrent writers, so group commit applies), then time reading it
//! all from `offset=-1`, following Stream-Next-Offset until
//! Stream-Up-To-Date. The read is repeated (`PASSES`) and each pass reported.
//!
//! With `--interleave N`, N streams are filled round-robin (each to
//! `--bytes`) and the first is read back: its messages sit between the
//! others' in the server's journal, as on a real ingestion host. On the
//! bucket surface each fill request is an append-batch of `--frames`
//! messages of `--append-bytes`, so millions of small messages fill fast.
//!
//! With `--read-path P` nothing is created or filled: P is read as it is
//! (a stream filled before, or the ceiling file server of
//! `bench/trivial/file_server.c`), so every server is read by this client.

use super::closed::frames;
use super::{add_process_facts, base_report, setup, CpuWindows};
use crate::args::Config;
use crate::blocking::Client;
use crate::progress::Progress;
use crate::report::Report;
use crate::request::{filler, rendered};
use crate::stats::{median, round3};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Concurrent fill connections.
const FILL_WRITERS: usize = 4;
/// Read passes over the filled stream.
const PASSES: usize = 3;
/// Longest a fill may take.
const FILL_LIMIT: Duration = Duration::from_secs(600);

pub fn run(cfg: &Config) -> Result<Report, String> {
    let progress = Progress::new(FILL_WRITERS.max(1));
    let printer = progress.spawn_printer("bytes");
    if let Some(path) = &cfg.read_path {
        let mut r = base_report(cfg, format!("catchup: read {path} from offset=-1, {}", cfg.url));
        let done = read_passes(cfg, path, None, &progress, &mut r);
        progress.finish(printer);
        return done.map(|_| r);
    }
    let mut r = base_report(cfg, format!("catchup: fill {} MiB, read from offset=-1, {}", cfg.bytes >> 20, cfg.url));
    progress.set_phase("setup");
    setup::surface(cfg)?;
    let paths: Vec<String> =
        (0..cfg.interleave).map(|i| format!("{}{}catchup{i}", crate::request::path_base(cfg), cfg.prefix)).collect();
    let path = &paths[0];
    let ct = "application/octet-stream";
    let mut c = Client::connect(cfg.addr).map_err(|e| format!("connect: {e}"))?;
    for p in &paths {
        let (h, body) = c.request("PUT", p, &cfg.host, Some(ct), b"").map_err(|e| format!("PUT: {e}"))?;
        if !(200..300).contains(&h.status) {
            return Err(format!("PUT {p}: {} {}", h.status, String::from_utf8_lossy(&body)));
        }
    }

    // Fill: request k goes to stream k mod N.
    progress.set_phase("fill");
    let batch = cfg.surface == crate::args::Surface::Bucket;
    let per_request = if batch { cfg.frames } else { 1 };
    let request_bytes = (per_request * cfg.append_bytes) as u64;
    let appends = cfg.bytes.div_ceil(request_bytes) * cfg.interleave as u64;
    let reqs: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| match batch {
            true => rendered(
                "POST",
                &format!("{p}/append-batch"),
                &cfg.host,
                Some(ct),
                &frames(cfg.frames, cfg.append_bytes),
            ),
            false => rendered("POST", p, &cfg.host, Some(ct), &filler(cfg.append_bytes)),
        })
        .collect();
    let next = AtomicU64::new(0);
    let fill_cpu = CpuWindows::begin(cfg);
    let fill_start = Instant::now();
    let fill_errors: u64 = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..FILL_WRITERS)
            .map(|t| {
                let (reqs, next, progress) = (&reqs, &next, &progress);
                scope.spawn(move || {
                    let mut errors = 0;
                    let Ok(mut c) = Client::connect(cfg.addr) else { return 1 };
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= appends || fill_start.elapsed() >= FILL_LIMIT {
                            break;
                        }
                        match c.exchange(&reqs[(k % reqs.len() as u64) as usize], |_| {}) {
                            Ok(h) if (200..300).contains(&h.status) => progress.done[t].add(request_bytes),
                            _ => {
                                errors += 1;
                                progress.errors[t].add(1);
                                if errors > 10 {
                                    break;
                                }
                            }
                        }
                    }
                    errors
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("fill thread")).sum()
    });
    let fill_secs = fill_start.elapsed().as_secs_f64();
    let fill_cpu = fill_cpu.end();
    let filled_all = progress.totals().0;
    let filled = filled_all / cfg.interleave as u64;
    if fill_errors > 0 {
        progress.finish(printer);
        return Err(format!("fill failed: {fill_errors} errors after {filled} bytes"));
    }
    r.row(
        "filled",
        format!(
            "{} MiB in {} streams in {fill_secs:.2} s ({:.1} MB/s durable), {} messages of {} B",
            filled_all >> 20,
            cfg.interleave,
            filled_all as f64 / fill_secs / 1e6,
            filled_all / cfg.append_bytes as u64,
            cfg.append_bytes
        ),
    );
    r.set("interleave", cfg.interleave);
    r.set("messages", filled_all / cfg.append_bytes as u64);
    r.set("filled_bytes", filled);
    r.set("append_bytes", cfg.append_bytes);
    r.set("fill_secs", round3(fill_secs));
    if let Some(c) = fill_cpu.server {
        r.row("fill server cpu", format!("{c:.2} cores"));
        r.set("fill_server_cpu_cores", round3(c));
    }

    let done = read_passes(cfg, path, Some(filled), &progress, &mut r);
    progress.finish(printer);
    done.map(|_| r)
}

/// Reads `path` whole `PASSES` times into `r`: each pass's rate, their
/// median and the processes' CPU over all of them; `filled` is what a read
/// should find.
fn read_passes(
    cfg: &Config,
    path: &str,
    filled: Option<u64>,
    progress: &Progress,
    r: &mut Report,
) -> Result<(), String> {
    let mut rates = Vec::new();
    let mut passes = Vec::new();
    let w = CpuWindows::begin(cfg);
    for pass in 0..PASSES {
        progress.set_phase(&format!("read pass {}", pass + 1));
        let (bytes, responses, secs) = read_all(cfg, path, progress)?;
        let gbps = bytes as f64 / secs / 1e9;
        r.row(
            &format!("read pass {}", pass + 1),
            format!("{} MiB in {secs:.3} s = {gbps:.2} GB/s ({responses} responses)", bytes >> 20),
        );
        if let Some(filled) = filled.filter(|f| *f != bytes) {
            r.row("  warning", format!("read {bytes} bytes, filled {filled}"));
        }
        rates.push(gbps);
        passes.push(json!({"bytes": bytes, "secs": round3(secs), "gb_per_sec": round3(gbps), "responses": responses}));
    }
    let cpu = w.end();
    let med = median(&mut rates);
    r.row("read median", format!("{med:.2} GB/s ({:.2} GiB/s)", med * 1e9 / (1u64 << 30) as f64));
    r.set("passes", passes);
    r.set("read_gb_per_sec_median", round3(med));
    add_process_facts(cfg, r, cpu);
    Ok(())
}

/// Reads the whole stream once; (bytes, responses, seconds).
fn read_all(cfg: &Config, path: &str, progress: &Progress) -> Result<(u64, u64, f64), String> {
    let mut c = Client::with_buffer(cfg.addr, 4 << 20).map_err(|e| format!("connect: {e}"))?;
    let mut offset = String::from("-1");
    let mut bytes = 0u64;
    let mut responses = 0u64;
    let mut req = Vec::with_capacity(256);
    let start = Instant::now();
    loop {
        crate::request::render(&mut req, "GET", &format!("{path}?offset={offset}"), &cfg.host, None, b"");
        let mut got = 0u64;
        let h = c.exchange(&req, |b| got += b.len() as u64).map_err(|e| format!("GET: {e}"))?;
        responses += 1;
        bytes += got;
        progress.done[0].add(got);
        if h.status != 200 {
            return Err(format!("GET {path}?offset={offset}: {}", h.status));
        }
        let next = h.next_offset().ok_or("response without Stream-Next-Offset")?;
        if h.up_to_date {
            break;
        }
        if next == offset {
            return Err(format!("no progress at offset {offset}"));
        }
        offset.clear();
        offset.push_str(next);
    }
    Ok((bytes, responses, start.elapsed().as_secs_f64()))
}
