//! Restart time: start the server (`--server-cmd`), poll `GET /v1/healthz`
//! every millisecond until it answers 200, report the time from spawn to
//! that answer and the RSS then, and stop the server with SIGTERM.

use super::base_report;
use crate::args::Config;
use crate::blocking::Client;
use crate::procfs;
use crate::report::{mib, Report};
use crate::request::rendered;
use crate::stats::round3;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn run(cfg: &Config) -> Result<Report, String> {
    let cmd = cfg.server_cmd.as_deref().ok_or("restart needs --server-cmd 'PROGRAM ARGS...'")?;
    let mut words = cmd.split_whitespace();
    let program = words.next().ok_or("--server-cmd is empty")?;
    let mut r = base_report(cfg, format!("restart: {cmd}"));
    // A server that just exited can keep its listening socket for a moment
    // (io_uring tears down asynchronously): wait for the port to be free.
    let free_by = Instant::now() + Duration::from_secs(5);
    while Client::connect(cfg.addr).is_ok() {
        if Instant::now() >= free_by {
            return Err(format!("something already listens on {}", cfg.addr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let req = rendered("GET", "/v1/healthz", &cfg.host, None, b"");
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(words)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn {program}: {e}"))?;
    let pid = child.id();
    let mut ready = None;
    let mut attempts = 0u64;
    while start.elapsed() < cfg.timeout {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("server exited during start-up: {status}"));
        }
        attempts += 1;
        if let Ok(mut c) = Client::connect(cfg.addr) {
            if let Ok(h) = c.exchange(&req, |_| {}) {
                if h.status == 200 {
                    ready = Some(start.elapsed());
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let rss = procfs::rss_kib(pid);
    // Stop it: SIGTERM, then SIGKILL after 30 s.
    let stop_start = Instant::now();
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let mut stopped = None;
    while stop_start.elapsed() < Duration::from_secs(30) {
        if let Ok(Some(_)) = child.try_wait() {
            stopped = Some(stop_start.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if stopped.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let ready = ready.ok_or_else(|| format!("no 200 from /v1/healthz within {:?}", cfg.timeout))?;
    r.row("start to /v1/healthz 200", format!("{:.3} s ({attempts} polls)", ready.as_secs_f64()));
    if let Some(rss) = rss {
        r.row("rss when ready", mib(rss));
        r.set("rss_kib", rss);
    }
    match stopped {
        Some(d) => r.row("SIGTERM to exit", format!("{:.3} s", d.as_secs_f64())),
        None => r.row("SIGTERM to exit", "did not exit in 30 s (killed)"),
    }
    r.set("ready_secs", round3(ready.as_secs_f64()));
    r.set("stop_secs", stopped.map(|d| round3(d.as_secs_f64())));
    Ok(r)
}
