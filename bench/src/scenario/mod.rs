//! Scenario dispatch plus what every scenario reports: the run's settings,
//! CPU used by client and server over the measured window, server memory.

mod catchup;
mod closed;
mod fanout;
mod idle;
mod restart;
mod setup;

use crate::args::{Config, Scenario, Surface};
use crate::procfs::{self, CpuWindow, MachineWindow};
use crate::report::{mib, Report};
use crate::stats::round3;
use serde_json::json;
use std::thread::JoinHandle;
use std::time::Instant;

pub fn run(cfg: &Config) -> Result<Report, String> {
    match cfg.scenario {
        Scenario::Write | Scenario::Pool | Scenario::Batch | Scenario::Healthz => closed::run(cfg),
        Scenario::Fanout => fanout::run(cfg),
        Scenario::Catchup => catchup::run(cfg),
        Scenario::Idle => idle::run(cfg),
        Scenario::Restart => restart::run(cfg),
    }
}

/// A report pre-filled with the run's settings.
fn base_report(cfg: &Config, title: String) -> Report {
    let mut r = Report::new(title);
    r.set("scenario", cfg.scenario.name());
    r.set("url", cfg.url.clone());
    r.set("surface", if cfg.surface == Surface::V1 { "v1" } else { "bucket" });
    r.set("threads", cfg.threads);
    if let Some(l) = &cfg.label {
        r.set("label", l.clone());
    }
    r
}

/// CPU use over a measured window, in cores.
#[derive(Clone, Copy, Default)]
struct Cpu {
    client: Option<f64>,
    server: Option<f64>,
    machine: Option<f64>,
}

/// Starts measuring CPU of this process, of `--server-pid`, and of the whole
/// machine (to see load from anything else sharing the cores).
struct CpuWindows(CpuWindow, Option<CpuWindow>, MachineWindow);

impl CpuWindows {
    fn begin(cfg: &Config) -> CpuWindows {
        CpuWindows(CpuWindow::begin(std::process::id()), cfg.server_pid.map(CpuWindow::begin), MachineWindow::begin())
    }

    fn end(&self) -> Cpu {
        Cpu { client: self.0.cores(), server: self.1.as_ref().and_then(CpuWindow::cores), machine: self.2.cores() }
    }
}

/// Measures CPU between `from` and `to` on a side thread.
fn spawn_cpu_sampler(cfg: &Config, from: Instant, to: Instant) -> JoinHandle<Cpu> {
    let cfg = cfg.clone();
    std::thread::spawn(move || {
        procfs::sleep_until(from);
        let w = CpuWindows::begin(&cfg);
        procfs::sleep_until(to);
        w.end()
    })
}

/// Adds client/server/other CPU and server memory to the report.
fn add_process_facts(cfg: &Config, r: &mut Report, cpu: Cpu) {
    if let Some(c) = cpu.client {
        r.row("client cpu", format!("{c:.2} cores"));
        r.set("client_cpu_cores", round3(c));
    }
    if let Some(c) = cpu.server {
        r.row("server cpu", format!("{c:.2} cores"));
        r.set("server_cpu_cores", round3(c));
    }
    if let Some(m) = cpu.machine {
        // Busy time of every other process on the machine (noise).
        let other = (m - cpu.client.unwrap_or(0.0) - cpu.server.unwrap_or(0.0)).max(0.0);
        r.row("other processes cpu", format!("{other:.2} cores (machine {m:.2})"));
        r.set("machine_cpu_cores", round3(m));
        r.set("other_cpu_cores", round3(other));
    }
    if let Some(pid) = cfg.server_pid {
        let rss = procfs::rss_kib(pid);
        let hwm = procfs::hwm_kib(pid);
        if let (Some(rss), Some(hwm)) = (rss, hwm) {
            r.row("server rss (peak)", format!("{} ({})", mib(rss), mib(hwm)));
            r.set("server_rss_kib", rss);
            r.set("server_hwm_kib", hwm);
        } else {
            r.set("server_rss_kib", json!(null));
        }
    }
}
