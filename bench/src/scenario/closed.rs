//! Closed-loop scenarios. `write`: N streams, one writer connection each,
//! POSTing `--payload` bytes back to back. `pool`: C connections, each
//! rotating its appends over all N streams (a gateway or client pool).
//! `batch`: like `write`, with `--frames` appends of `--frame-bytes` per
//! append-batch request (bucket surface; sluice's extension).
//! `healthz`: the same concurrency against `GET /v1/healthz`, the server's
//! raw HTTP ceiling.

use super::{add_process_facts, base_report, setup, spawn_cpu_sampler};
use crate::args::{Config, Scenario};
use crate::driver::{self, Fixed, Plan, Rotating};
use crate::progress::Progress;
use crate::report::{ms, thousands, Report};
use crate::request::{filler, rendered};
use crate::stats::{latency, round3};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn run(cfg: &Config) -> Result<Report, String> {
    let n = cfg.streams.max(1);
    let progress = Progress::new(cfg.threads);
    let printer = progress.spawn_printer("req");
    let write = cfg.scenario != Scenario::Healthz;
    let pool = cfg.scenario == Scenario::Pool;
    let batch = cfg.scenario == Scenario::Batch;
    let connections = if pool { cfg.connections } else { n };
    let title = match cfg.scenario {
        Scenario::Pool => {
            format!("pool: {connections} connections rotating over {n} streams, {} B appends, {}", cfg.payload, cfg.url)
        }
        Scenario::Write => format!("write: {n} streams x 1 writer, {} B appends, {}", cfg.payload, cfg.url),
        Scenario::Batch => format!(
            "batch: {n} streams x 1 writer, append-batch of {} x {} B frames, {}",
            cfg.frames, cfg.frame_bytes, cfg.url
        ),
        _ => format!("healthz: {n} connections, GET /v1/healthz, {}", cfg.url),
    };
    let mut r = base_report(cfg, title);
    r.set("connections", connections);
    let requests: Vec<Vec<u8>> = if write {
        progress.set_phase("setup: creating streams");
        setup::surface(cfg)?;
        let name = format!("{}w", cfg.prefix);
        let made = setup::create_streams(cfg, &name, n, "text/plain", 0, &progress, Duration::from_secs(300));
        r.row("setup", format!("{n} streams created in {:.2} s ({})", made.secs, made.tally.statuses_text()));
        r.set("streams", n);
        r.set("setup_secs", round3(made.secs));
        r.set("setup_statuses", made.tally.statuses_json());
        if made.tally.ok < n as u64 {
            eprintln!("warning: only {} of {n} streams were created ({})", made.tally.ok, made.tally.statuses_text());
        }
        let base = crate::request::path_base(cfg);
        let (suffix, body) =
            if batch { ("/append-batch", frames(cfg.frames, cfg.frame_bytes)) } else { ("", filler(cfg.payload)) };
        let path = |i| format!("{base}{name}{i}{suffix}");
        (0..n).map(|i| rendered("POST", &path(i), &cfg.host, Some("text/plain"), &body)).collect()
    } else {
        vec![rendered("GET", "/v1/healthz", &cfg.host, None, b"")]
    };
    r.set("payload_bytes", cfg.payload);
    let start = Instant::now();
    let plan = Plan {
        addr: cfg.addr,
        connections,
        threads: cfg.threads,
        measure_from: start + cfg.warmup,
        stop_at: start + cfg.warmup + cfg.duration,
    };
    progress.set_phase(cfg.scenario.name());
    let sampler = spawn_cpu_sampler(cfg, plan.measure_from, plan.stop_at);
    let shared = Arc::new(requests);
    let out = if pool {
        let rotating =
            (0..cfg.threads).map(|_| Rotating { requests: shared.clone(), sent: Vec::new(), threads: cfg.threads });
        driver::run(&plan, rotating.collect(), &progress)
    } else {
        driver::run(&plan, (0..cfg.threads).map(|_| Fixed(shared.clone())).collect(), &progress)
    };
    let cpu = sampler.join().expect("sampler");
    progress.finish(printer);

    let secs = out.measured_secs(&plan);
    let ops = out.measured.ok as f64 / secs.max(1e-9);
    let lat = latency(&out.hist);
    r.row("measured", format!("{secs:.2} s after {:.1} s warm-up", cfg.warmup.as_secs_f64()));
    r.row("ops/s (2xx)", thousands(ops));
    if batch {
        let records = ops * cfg.frames as f64;
        r.row("records/s (in 2xx batches)", thousands(records));
        r.set("records_per_sec", round3(records));
        r.set("frames", cfg.frames);
    }
    r.row("latency p50 / p99 / p999", format!("{} / {} / {}", ms(lat.p50_ms), ms(lat.p99_ms), ms(lat.p999_ms)));
    r.row("latency mean / max", format!("{} / {}", ms(lat.mean_ms), ms(lat.max_ms)));
    r.row("responses", out.measured.statuses_text());
    r.row("errors (non-2xx + io)", format!("{} (io {})", out.measured.errors(), out.measured.io_errors));
    r.set("measured_secs", round3(secs));
    r.set("ops", out.measured.ok);
    r.set("ops_per_sec", round3(ops));
    r.set("latency", lat.json());
    r.set("statuses", out.measured.statuses_json());
    r.set("errors", out.measured.errors());
    r.set("io_errors", out.measured.io_errors);
    r.set("dead_connections", out.dead);
    add_process_facts(cfg, &mut r, cpu);
    Ok(r)
}

/// An append-batch body: `n` frames, each a u32 big-endian length and
/// `bytes` of payload.
pub fn frames(n: usize, bytes: usize) -> Vec<u8> {
    let frame = filler(bytes);
    let mut body = Vec::with_capacity(n * (4 + frame.len()));
    for _ in 0..n {
        body.extend_from_slice(&(frame.len() as u32).to_be_bytes());
        body.extend_from_slice(&frame);
    }
    body
}
