//! Periodic tasks over days of timer periods, in seconds: the real binary
//! with `--test-time-scale` (every periodic task's period divided by it),
//! idle and under light mixed load (appends, long-polls, SSE readers that
//! come and go), must stay up, and its task, thread and descriptor counts
//! must come back to where they started. A task that keeps one waker
//! reference per timer period (glommio's count is 16 bits) panics its
//! shard within seconds here; at the real periods it took 27 minutes.

mod common;

use common::{Launch, Server, TempDir};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Periods shrink 200x: the 50 ms flusher poll runs every 250 us, the 20 ms
/// reactor tick every 100 us; a leak of one reference per period reaches
/// 32,768 in about 8 s.
const SCALE: &str = "200";
/// How long each phase runs: over 100,000 flusher periods.
const PHASE: Duration = Duration::from_secs(25);

/// Tasks, threads (not the kernel's io_uring workers) and open descriptors.
#[derive(Debug, PartialEq, Clone, Copy)]
struct Counts {
    tasks: u64,
    threads: u64,
    fds: u64,
}

fn counts(s: &Server) -> Counts {
    let text = s.get("/v1/metrics").expect(200).text();
    let tasks = text
        .lines()
        .filter(|l| l.starts_with("sluice_tasks{"))
        .map(|l| l.rsplit_once(' ').expect("sample").1.parse::<f64>().expect("number") as u64)
        .sum();
    // The kernel's io_uring workers (iou-wrk-*) come and go with the I/O;
    // every other thread is the server's own.
    let threads = std::fs::read_dir(format!("/proc/{}/task", s.pid()))
        .expect("the server is running")
        .filter_map(|t| std::fs::read_to_string(t.expect("task").path().join("comm")).ok())
        .filter(|comm| !comm.starts_with("iou-"))
        .count() as u64;
    let fds = std::fs::read_dir(format!("/proc/{}/fd", s.pid())).expect("fd dir").count() as u64;
    Counts { tasks, threads, fds }
}

/// Runs for `long`, checking every second that the server is alive, and
/// with `ask` also that it answers. An idle phase must not connect: a
/// connection completes each shard's pending accept, and whatever that
/// accept held goes with it.
fn watch(s: &mut Server, long: Duration, what: &str, ask: bool) {
    let end = Instant::now() + long;
    while Instant::now() < end {
        std::thread::sleep(Duration::from_secs(1));
        assert!(s.is_running(), "the server died while {what}:\n{}", s.output());
        if ask {
            s.get("/v1/healthz").expect(200);
        }
    }
}

/// Appends, long-polls and short-lived SSE readers until `stop`.
fn light_load(addr: std::net::SocketAddr, stop: Arc<AtomicBool>) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let mut c = common::Conn::open_with_timeout(addr, Duration::from_secs(10));
        c.request("POST", "/v1/stream/soak", &[("Content-Type", "text/plain")], format!("m{n};").as_bytes())
            .expect(204);
        // A long-poll at the tail waits its timeout out (204).
        c.request("GET", "/v1/stream/soak?offset=now&live=long-poll", &[], b"").expect(204);
        // An SSE reader reads its first event, then leaves.
        let mut sse = TcpStream::connect(addr).expect("connect");
        sse.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        sse.write_all(b"GET /v1/stream/soak?offset=-1&live=sse HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
        let mut buf = [0u8; 4096];
        let mut got = Vec::new();
        while !String::from_utf8_lossy(&got).contains("event: data") {
            let k = sse.read(&mut buf).expect("SSE bytes");
            assert!(k > 0, "SSE ended early: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..k]);
        }
    }
}

#[test]
fn periodic_tasks_hold_no_references_over_many_periods() {
    let dir = TempDir::new("timers");
    let mut launch =
        Launch::quick(2, &["--test-time-scale", SCALE, "--long-poll-timeout", "50ms", "--flush-interval", "100ms"]);
    launch.log = Some(dir.path().join("server.log"));
    let mut s = Server::launch(&dir.path().join("data"), launch);
    s.create("/v1/stream/soak", "text/plain");
    // A short round of load first: start-up's own threads and tasks end, and
    // what the load keeps for good (the stream's open files) is there.
    load_for(&mut s, Duration::from_secs(2), "warming up");
    s.wait_flushed();
    std::thread::sleep(Duration::from_secs(1));
    let idle = counts(&s);
    watch(&mut s, PHASE, "idle", false);
    settle(&s, idle, "idle");
    load_for(&mut s, PHASE, "under light load");
    settle(&s, idle, "after the load");
    assert!(s.is_running());
}

/// Runs [`light_load`] for `long` while watching the server.
fn load_for(s: &mut Server, long: Duration, what: &str) {
    let stop = Arc::new(AtomicBool::new(false));
    let load = std::thread::spawn({
        let (addr, stop) = (s.addr, stop.clone());
        move || light_load(addr, stop)
    });
    watch(s, long, what, true);
    stop.store(true, Ordering::Relaxed);
    load.join().expect("the load ran without errors");
}

/// Waits until the counts are `idle`'s again: connections just closed by
/// the client (the last health check, the load's) end within moments.
fn settle(s: &Server, idle: Counts, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while counts(s) != idle {
        assert!(Instant::now() < deadline, "{what}: {:?}, idle at the start: {idle:?}", counts(s));
        std::thread::sleep(Duration::from_millis(100));
    }
}
