//! sluice-bench: a load generator for Durable Streams servers, light enough
//! to share two cores with the server it measures. See bench/README.md.
//!
//! Modules: `args` (flags), `poll` (epoll), `response` (HTTP/1.1 response
//! reader), `request` (request bytes), `driver` (closed-loop engine),
//! `subscribers` + `sse` (SSE fan-out readers), `blocking` (setup client),
//! `stats` (histograms), `progress` (per-second line), `procfs` (RSS, CPU),
//! `report` (table + JSON), `scenario/*` (one file per scenario).

mod args;
mod blocking;
mod driver;
mod poll;
mod procfs;
mod progress;
mod report;
mod request;
mod response;
mod scenario;
mod sse;
mod stats;
mod subscribers;

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match args::parse(&argv) {
        Ok(c) => c,
        Err(e) => {
            if e.is_empty() {
                print!("{}", args::USAGE);
                return;
            }
            eprintln!("sluice-bench: {e}\n\n{}", args::USAGE);
            std::process::exit(2);
        }
    };
    raise_fd_limit();
    match scenario::run(&cfg) {
        Ok(report) => {
            report.print();
            if let Some(path) = &cfg.json {
                if let Err(e) = report.write_json(path) {
                    eprintln!("sluice-bench: writing {path}: {e}");
                    std::process::exit(1);
                }
            }
        }
        Err(e) => {
            eprintln!("sluice-bench: {}: {e}", cfg.scenario.name());
            std::process::exit(1);
        }
    }
}

/// Thousands of sockets need more than the usual soft limit of 1024 fds.
fn raise_fd_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
