//! Fan-out: one stream, `--subscribers` SSE readers subscribed at the tail
//! (`offset=now&live=sse`), and one writer appending `--rate` messages per
//! second. Each message carries its send time (ns since a base instant this
//! process shares with the subscribers), so every delivery yields one
//! publish-to-receive latency. The writer starts once every subscriber has
//! received its first control event (it is parked at the tail).

use super::{add_process_facts, base_report, setup, spawn_cpu_sampler};
use crate::args::Config;
use crate::blocking::Client;
use crate::progress::Progress;
use crate::report::{ms, thousands, Report};
use crate::request::rendered;
use crate::sse::{put_ts, TS_DIGITS, TS_MARK};
use crate::stats::{self, latency, round3, Tally};
use crate::subscribers::{self, Shared, SubPlan};
use hdrhistogram::Histogram;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Longest wait for all subscribers to be parked at the tail.
const SUBSCRIBE_LIMIT: Duration = Duration::from_secs(60);
/// Longest wait after the last append for deliveries to arrive.
const DRAIN_LIMIT: Duration = Duration::from_secs(3);

pub fn run(cfg: &Config) -> Result<Report, String> {
    let n = cfg.subscribers.max(1);
    let mut r = base_report(
        cfg,
        format!("fanout: 1 stream, {n} SSE subscribers, {} appends/s of {} B, {}", cfg.rate, cfg.payload, cfg.url),
    );
    let progress = Progress::new(cfg.threads);
    let printer = progress.spawn_printer("deliveries");
    progress.set_phase("setup");
    setup::surface(cfg)?;
    let path = format!("{}{}fan", crate::request::path_base(cfg), cfg.prefix);
    let mut c = Client::connect(cfg.addr).map_err(|e| format!("connect: {e}"))?;
    let (h, body) = c.request("PUT", &path, &cfg.host, Some("text/plain"), b"").map_err(|e| format!("PUT: {e}"))?;
    if !(200..300).contains(&h.status) {
        return Err(format!("PUT {path}: {} {}", h.status, String::from_utf8_lossy(&body)));
    }
    let base = Instant::now();
    let plan = SubPlan {
        addr: cfg.addr,
        subscribers: n,
        threads: cfg.threads,
        request: format!(
            "GET {path}?offset=now&live=sse HTTP/1.1\r\nhost: {}\r\naccept: text/event-stream\r\n\r\n",
            cfg.host
        )
        .into_bytes(),
        base,
    };
    let shared = Shared::new();
    progress.set_phase("subscribing");
    let (subs, writer, ready, cpu, subscribe_secs) = std::thread::scope(|scope| {
        let sub_thread = scope.spawn(|| subscribers::run(&plan, &shared, &progress));
        let t0 = Instant::now();
        while shared.ready.load(Ordering::Relaxed) < n && t0.elapsed() < SUBSCRIBE_LIMIT {
            std::thread::sleep(Duration::from_millis(10));
        }
        let subscribe_secs = t0.elapsed().as_secs_f64();
        let ready = shared.ready.load(Ordering::Relaxed);
        progress.set_phase("fanout");
        let start = Instant::now();
        let measure_from = start + cfg.warmup;
        let until = measure_from + cfg.duration;
        shared.record_from_ns.store(measure_from.duration_since(base).as_nanos() as u64, Ordering::Relaxed);
        let sampler = spawn_cpu_sampler(cfg, measure_from, until);
        let writer = write_paced(cfg, &path, base, until, measure_from);
        // Drain: wait until every ready subscriber has every message.
        let expected = writer.published * ready as u64;
        let drain_start = Instant::now();
        while progress.totals().0 < expected && drain_start.elapsed() < DRAIN_LIMIT {
            std::thread::sleep(Duration::from_millis(5));
        }
        shared.stop.store(true, Ordering::Relaxed);
        let cpu = sampler.join().expect("sampler");
        (sub_thread.join().expect("subscribers"), writer, ready, cpu, subscribe_secs)
    });
    progress.finish(printer);

    let lat = latency(&subs.hist);
    let wlat = latency(&writer.hist);
    let expected = writer.published * ready as u64;
    let delivered_per_sec = subs.received as f64 / (cfg.warmup + cfg.duration).as_secs_f64();
    r.row("subscribed", format!("{ready} of {n} in {subscribe_secs:.2} s ({})", subs.tally.statuses_text()));
    let achieved = writer.published as f64 / (cfg.warmup + cfg.duration).as_secs_f64();
    r.row("published", format!("{} appends, {achieved:.1}/s ({})", writer.published, writer.tally.statuses_text()));
    r.row("delivered", format!("{} of {expected} expected ({}/s)", subs.received, thousands(delivered_per_sec)));
    r.row(
        "publish->receive p50 / p99 / p999",
        format!("{} / {} / {}", ms(lat.p50_ms), ms(lat.p99_ms), ms(lat.p999_ms)),
    );
    r.row("publish->receive mean / max", format!("{} / {}", ms(lat.mean_ms), ms(lat.max_ms)));
    r.row("append latency p50 / p99", format!("{} / {}", ms(wlat.p50_ms), ms(wlat.p99_ms)));
    r.row("sse events data / control", format!("{} / {}", subs.data_events, subs.control_events));
    r.row("subscriptions ended early", subs.ended_early);
    r.set("subscribers", n);
    r.set("subscribers_ready", ready);
    r.set("subscribe_secs", round3(subscribe_secs));
    r.set("rate", cfg.rate);
    r.set("payload_bytes", cfg.payload);
    r.set("measured_secs", round3(cfg.duration.as_secs_f64()));
    r.set("published", writer.published);
    r.set("achieved_rate", round3(achieved));
    r.set("expected_deliveries", expected);
    r.set("delivered", subs.received);
    r.set("latency", lat.json());
    r.set("append_latency", wlat.json());
    r.set("append_statuses", writer.tally.statuses_json());
    r.set("subscribe_statuses", subs.tally.statuses_json());
    r.set("data_events", subs.data_events);
    r.set("control_events", subs.control_events);
    r.set("ended_early", subs.ended_early);
    r.set("errors", writer.tally.errors() + subs.tally.errors());
    add_process_facts(cfg, &mut r, cpu);
    Ok(r)
}

struct WriterResult {
    published: u64,
    hist: Histogram<u64>,
    tally: Tally,
}

/// Appends at `--rate` per second until `until`, each body starting with
/// `ts=<20 digits>;` patched into the pre-rendered request just before it is
/// sent. If an append takes longer than the interval the next goes at once;
/// the writer stops at `until` however far behind schedule it is.
fn write_paced(cfg: &Config, path: &str, base: Instant, until: Instant, measure_from: Instant) -> WriterResult {
    let mut body = Vec::with_capacity(cfg.payload);
    body.extend_from_slice(TS_MARK);
    body.extend_from_slice(&[b'0'; TS_DIGITS]);
    body.push(b';');
    while body.len() < cfg.payload {
        body.push(b'.');
    }
    let mut req = rendered("POST", path, &cfg.host, Some("text/plain"), &body);
    let ts_at = req.len() - body.len() + TS_MARK.len();
    let mut res = WriterResult { published: 0, hist: stats::histogram(), tally: Tally::default() };
    let interval = Duration::from_secs_f64(1.0 / f64::from(cfg.rate));
    let start = Instant::now();
    let mut client = Client::connect(cfg.addr).ok();
    for k in 0u32.. {
        let due = start + interval * k;
        if due >= until || Instant::now() >= until {
            break;
        }
        crate::procfs::sleep_until(due);
        let Some(c) = client.as_mut() else {
            res.tally.io_errors += 1;
            client = Client::connect(cfg.addr).ok();
            continue;
        };
        let sent = Instant::now();
        put_ts(&mut req[ts_at..], sent.duration_since(base).as_nanos() as u64);
        match c.exchange(&req, |_| {}) {
            Ok(h) => {
                res.tally.status(h.status);
                if (200..300).contains(&h.status) {
                    res.published += 1;
                    if sent >= measure_from {
                        stats::record(&mut res.hist, sent.elapsed().as_nanos() as u64);
                    }
                }
            }
            Err(_) => {
                res.tally.io_errors += 1;
                client = Client::connect(cfg.addr).ok();
            }
        }
    }
    res
}
