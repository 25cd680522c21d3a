//! Closed-loop scenarios. `write`: N streams, one writer connection each,
//! POSTing `--payload` bytes back to back. `healthz`: the same concurrency
//! against `GET /v1/healthz`, the server's raw HTTP ceiling.

use super::{add_process_facts, base_report, setup, spawn_cpu_sampler};
use crate::args::{Config, Scenario};
use crate::driver::{self, Fixed, Plan};
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
    let write = cfg.scenario == Scenario::Write;
    let title = if write {
        format!("write: {n} streams x 1 writer, {} B appends, {}", cfg.payload, cfg.url)
    } else {
        format!("healthz: {n} connections, GET /v1/healthz, {}", cfg.url)
    };
    let mut r = base_report(cfg, title);
    r.set("connections", n);
    let requests: Vec<Vec<u8>> = if write {
        progress.set_phase("setup: creating streams");
        setup::surface(cfg)?;
        let name = format!("{}w", cfg.prefix);
        let made = setup::create_streams(cfg, &name, n, "text/plain", &progress, Duration::from_secs(300));
        r.row("setup", format!("{n} streams created in {:.2} s ({})", made.secs, made.tally.statuses_text()));
        r.set("streams", n);
        r.set("setup_secs", round3(made.secs));
        r.set("setup_statuses", made.tally.statuses_json());
        if made.tally.ok < n as u64 {
            eprintln!("warning: only {} of {n} streams were created ({})", made.tally.ok, made.tally.statuses_text());
        }
        let body = filler(cfg.payload);
        let base = crate::request::path_base(cfg);
        (0..n).map(|i| rendered("POST", &format!("{base}{name}{i}"), &cfg.host, Some("text/plain"), &body)).collect()
    } else {
        vec![rendered("GET", "/v1/healthz", &cfg.host, None, b"")]
    };
    r.set("payload_bytes", cfg.payload);
    let start = Instant::now();
    let plan = Plan {
        addr: cfg.addr,
        connections: n,
        threads: cfg.threads,
        measure_from: start + cfg.warmup,
        stop_at: start + cfg.warmup + cfg.duration,
    };
    progress.set_phase(if write { "write" } else { "healthz" });
    let sampler = spawn_cpu_sampler(cfg, plan.measure_from, plan.stop_at);
    let shared = Arc::new(requests);
    let sources = (0..cfg.threads).map(|_| Fixed(shared.clone())).collect();
    let out = driver::run(&plan, sources, &progress);
    let cpu = sampler.join().expect("sampler");
    progress.finish(printer);

    let secs = out.measured_secs(&plan);
    let ops = out.measured.ok as f64 / secs.max(1e-9);
    let lat = latency(&out.hist);
    r.row("measured", format!("{secs:.2} s after {:.1} s warm-up", cfg.warmup.as_secs_f64()));
    r.row("ops/s (2xx)", thousands(ops));
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
