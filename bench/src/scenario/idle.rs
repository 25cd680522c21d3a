//! Idle streams: create `--streams` streams (empty, or each with one
//! message of `--initial-bytes`) and report the server's
//! resident memory before and after (`--server-pid`), i.e. the per-stream
//! cost of the server's in-memory state; with `--delete-all yes`, then
//! delete them all and report the delete rate and the memory after.

use super::{add_process_facts, base_report, setup, Cpu};
use crate::args::Config;
use crate::procfs;
use crate::progress::Progress;
use crate::report::{mib, thousands, Report};
use crate::stats::round3;
use std::time::Duration;

pub fn run(cfg: &Config) -> Result<Report, String> {
    let pid = cfg.server_pid.ok_or("idle needs --server-pid PID to read the server's RSS")?;
    let n = cfg.streams;
    let what = match cfg.initial_bytes {
        0 => "empty streams".to_string(),
        b => format!("streams of {b} B"),
    };
    let mut r = base_report(cfg, format!("idle: {n} {what}, server pid {pid}, {}", cfg.url));
    let progress = Progress::new(cfg.threads);
    let printer = progress.spawn_printer("creates");
    progress.set_phase("setup");
    setup::surface(cfg)?;
    let before = procfs::rss_kib(pid).ok_or("cannot read server RSS")?;
    progress.set_phase("creating streams");
    let name = format!("{}i", cfg.prefix);
    let made =
        setup::create_streams(cfg, &name, n, "text/plain", cfg.initial_bytes, &progress, Duration::from_secs(600));
    progress.set_phase("settling");
    std::thread::sleep(Duration::from_secs(2));
    progress.finish(printer);
    let after = procfs::rss_kib(pid).ok_or("cannot read server RSS")?;
    let per_stream = (after.saturating_sub(before) * 1024) as f64 / n.max(1) as f64;
    r.row("created", format!("{} of {n} in {:.2} s ({})", made.tally.ok, made.secs, made.tally.statuses_text()));
    r.row("create rate", format!("{}/s", thousands(made.tally.ok as f64 / made.secs.max(1e-9))));
    r.row("server rss before / after", format!("{} / {}", mib(before), mib(after)));
    r.row("per stream", format!("{per_stream:.0} B"));
    r.set("streams", n);
    r.set("initial_bytes", cfg.initial_bytes);
    r.set("created", made.tally.ok);
    r.set("create_secs", round3(made.secs));
    r.set("statuses", made.tally.statuses_json());
    r.set("rss_before_kib", before);
    r.set("rss_after_kib", after);
    r.set("bytes_per_stream", per_stream.round());
    if cfg.delete_all {
        let progress = Progress::new(cfg.threads);
        let printer = progress.spawn_printer("deletes");
        progress.set_phase("deleting streams");
        let gone = setup::delete_streams(cfg, &name, n, &progress, Duration::from_secs(600));
        progress.set_phase("settling");
        std::thread::sleep(Duration::from_secs(2));
        progress.finish(printer);
        let left = procfs::rss_kib(pid).ok_or("cannot read server RSS")?;
        r.row("deleted", format!("{} of {n} in {:.2} s ({})", gone.tally.ok, gone.secs, gone.tally.statuses_text()));
        r.row("delete rate", format!("{}/s", thousands(gone.tally.ok as f64 / gone.secs.max(1e-9))));
        r.row("server rss after deletes", mib(left));
        r.set("deleted", gone.tally.ok);
        r.set("delete_secs", round3(gone.secs));
        r.set("rss_after_deletes_kib", left);
    }
    add_process_facts(cfg, &mut r, Cpu::default());
    Ok(r)
}
