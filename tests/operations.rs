//! Operations through the real binary: /v1/metrics moves with load, the
//! command line honours SLUICE_* variables, units and `--flag=value`, bad
//! limits are refused with one line, SIGHUP does not stop the server, and
//! the start/stop events and /v1/healthz behave as documented, and a
//! restart right after SIGKILL binds the same port.

mod common;

use common::{build, free_port, Launch, Server, TempDir};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Sum of every sample of `name` whose labels contain all of `labels`
/// (e.g. `shard="0"`); `None` if the metric has no such sample.
fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = line.rsplit_once(' ').expect("sample line");
        let (metric, tags) = series.split_once('{').unwrap_or((series, ""));
        if metric == name && labels.iter().all(|l| tags.contains(l)) {
            *found.get_or_insert(0.0) += value.parse::<f64>().expect("numeric sample");
        }
    }
    found
}

fn scrape(s: &Server) -> String {
    let r = s.get("/v1/metrics");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.h("content-type").starts_with("text/plain; version=0.0.4"));
    r.text()
}

fn value(text: &str, name: &str, labels: &[&str]) -> f64 {
    sample(text, name, labels).unwrap_or_else(|| panic!("no {name}{labels:?} in:\n{text}"))
}

/// Scrapes until `done` holds (shard-side changes land asynchronously).
fn scrape_until(s: &Server, what: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = scrape(s);
        if done(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{what} never showed in:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn metrics_move_with_load() {
    let s = Server::start_with(&["--long-poll-timeout", "10s"]);
    let before = scrape(&s);
    assert_eq!(sample(&before, "sluice_streams", &[]), Some(0.0));
    let streams: Vec<String> = (0..8).map(|i| format!("/v1/stream/load-{i}")).collect();
    for p in &streams {
        s.create(p, "text/plain");
    }
    let mut c = s.connect();
    let (appends, body) = (200usize, b"0123456789abcdef");
    for i in 0..appends {
        let r = c.request("POST", &streams[i % streams.len()], &[("Content-Type", "text/plain")], body);
        assert_eq!(r.status, 204);
    }
    assert_eq!(s.get("/v1/stream/missing").status, 404);

    let after = scrape(&s);
    assert_eq!(value(&after, "sluice_appends_total", &[]) - value(&before, "sluice_appends_total", &[]), 200.0);
    assert_eq!(value(&after, "sluice_append_bytes_total", &[]), (appends * body.len()) as f64);
    assert_eq!(value(&after, "sluice_streams", &[]), 8.0);
    assert_eq!(value(&after, "sluice_http_requests_total", &["route=\"append\"", "status=\"204\""]), 200.0);
    assert_eq!(value(&after, "sluice_http_requests_total", &["route=\"create\"", "status=\"201\""]), 8.0);
    assert_eq!(value(&after, "sluice_http_requests_total", &["route=\"read\"", "status=\"404\""]), 1.0);
    assert_eq!(value(&after, "sluice_http_request_seconds_count", &["route=\"append\""]), 200.0);
    // Per-shard histograms, the fail-stop gauge and the standard process metrics.
    for shard in ["shard=\"0\"", "shard=\"1\""] {
        assert!(sample(&after, "sluice_fsync_seconds_count", &[shard]).is_some(), "{after}");
        assert!(sample(&after, "sluice_group_commit_records_count", &[shard]).is_some(), "{after}");
        assert!(sample(&after, "sluice_flush_seconds_count", &[shard]).is_some(), "{after}");
        assert_eq!(value(&after, "sluice_log_failed", &[shard]), 0.0);
    }
    assert!(value(&after, "process_cpu_seconds_total", &[]) > 0.0);
    assert!(value(&after, "process_max_fds", &[]) >= value(&after, "process_open_fds", &[]));
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let started = value(&after, "process_start_time_seconds", &[]);
    assert!(started <= now && started > now - 120.0, "started {started}, now {now}");
    // Every append and create was made durable by some group commit, each with an fdatasync.
    let commits = value(&after, "sluice_group_commit_records_count", &[]);
    assert!(commits >= 1.0 && value(&after, "sluice_group_commit_records_sum", &[]) >= 208.0, "{after}");
    assert_eq!(value(&after, "sluice_fsync_seconds_count", &[]), commits);
    assert!(value(&after, "sluice_fsync_seconds_sum", &[]) > 0.0);
    assert!(value(&after, "sluice_disk_bytes", &["kind=\"live\""]) >= (appends * body.len()) as f64);
    assert!(value(&after, "sluice_disk_bytes", &["kind=\"preallocated\""]) > 0.0);
    assert!(value(&after, "process_resident_memory_bytes", &[]) > 1e6);
    let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
    assert_eq!(value(&after, "sluice_build_info", &[&version]), 1.0);
    assert!(sample(&after, "sluice_recovery_seconds", &["shard=\"1\""]).is_some());
    // With 2 shards and 8 streams, some requests went to the other shard.
    assert!(value(&after, "sluice_cross_shard_requests_total", &[]) > 0.0);
    // The flusher moves every appended byte into stream files (within the
    // default 5 s, or CI's 100 ms).
    let flushed = scrape_until(&s, "every byte flushed", |t| value(t, "sluice_unflushed_bytes", &[]) == 0.0);
    assert!(value(&flushed, "sluice_flushes_total", &["result=\"ok\""]) >= 1.0, "{flushed}");
    assert_eq!(value(&flushed, "sluice_flushes_total", &["result=\"failed\""]), 0.0);
    assert!(value(&flushed, "sluice_flush_seconds_count", &[]) >= 1.0);
    // The first flush after a start writes a checkpoint.
    assert!(value(&flushed, "sluice_checkpoint_bytes_total", &[]) > 0.0, "{flushed}");

    // Live readers: a parked long-poll and an open SSE connection.
    let mut poll = s.connect();
    poll.send(&build("GET", &format!("{}?offset=now&live=long-poll", streams[0]), &[], b"")).unwrap();
    let mut sse = s.connect();
    sse.send(&build("GET", &format!("{}?offset=now&live=sse", streams[1]), &[], b"")).unwrap();
    let text = scrape_until(&s, "a parked long-poll and an SSE reader", |t| {
        sample(t, "sluice_live_readers", &["kind=\"long_poll\""]) == Some(1.0)
            && sample(t, "sluice_live_readers", &["kind=\"sse\""]) == Some(1.0)
    });
    assert!(value(&text, "sluice_connections", &[]) >= 3.0, "{text}");
    assert_eq!(c.request("POST", &streams[0], &[("Content-Type", "text/plain")], b"wake").status, 204);
    assert_eq!(poll.read_response(false).status, 200);
    // The long-poll's wait is its own series, not an append's or a read's.
    let t = scrape_until(&s, "the long-poll answered", |t| {
        sample(t, "sluice_live_readers", &["kind=\"long_poll\""]) == Some(0.0)
    });
    assert_eq!(value(&t, "sluice_http_requests_total", &["route=\"read_long_poll\"", "status=\"200\""]), 1.0);
    assert_eq!(value(&t, "sluice_http_requests_total", &["route=\"read_sse\"", "status=\"200\""]), 1.0);
}

#[test]
fn metrics_count_buckets_and_reject_writes() {
    let s = Server::start();
    let before = value(&scrape(&s), "sluice_buckets", &[]);
    assert_eq!(s.req("PUT", "/ops-bucket", &[], b"").status, 201);
    let text = scrape(&s);
    assert_eq!(value(&text, "sluice_buckets", &[]), before + 1.0);
    assert_eq!(s.req("POST", "/v1/metrics", &[], b"").status, 405);
    assert_eq!(s.req("DELETE", "/v1/healthz", &[], b"").status, 405);
}

/// A logged launch with `env` set, on its own data dir.
fn start_env(dir: &TempDir, env: &[(&str, &str)], extra: &[&str]) -> Server {
    let mut launch = Launch::logged(&dir.path().join("server.log"), extra);
    launch.env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Server::launch(&dir.path().join("data"), launch)
}

#[test]
fn environment_variables_and_units_are_honoured() {
    let dir = TempDir::new("env");
    let env = [("SLUICE_MAX_BODY_BYTES", "1KiB"), ("SLUICE_SEGMENT_BYTES", "256KiB"), ("SLUICE_FSYNC", "never")];
    let s = start_env(&dir, &env, &[]);
    s.create("/v1/stream/env", "text/plain");
    assert_eq!(s.post("/v1/stream/env", "text/plain", &[b'x'; 1024]).status, 204);
    assert_eq!(s.post("/v1/stream/env", "text/plain", &[b'x'; 1025]).status, 413, "SLUICE_MAX_BODY_BYTES=1KiB");
    let seg = dir.path().join("data/shard-0/0000000001.seg");
    assert_eq!(std::fs::metadata(&seg).expect("segment").len(), 256 << 10, "SLUICE_SEGMENT_BYTES=256KiB");
    common::eventually("the start line", || s.output().contains(" started "));
    let out = s.output();
    assert!(out.contains("fsync=\"never\""), "SLUICE_FSYNC: {out}");
    drop(s);

    // A flag (here in --flag=value form) wins over its variable.
    let dir = TempDir::new("env-flag");
    let s = start_env(&dir, &env, &["--max-body-bytes=4KiB", "--segment-bytes=1MiB"]);
    s.create("/v1/stream/env", "text/plain");
    assert_eq!(s.post("/v1/stream/env", "text/plain", &[b'x'; 4096]).status, 204);
    assert_eq!(s.post("/v1/stream/env", "text/plain", &[b'x'; 4097]).status, 413);
}

/// Runs sluice with `env` and a locked-memory limit (if given) and expects
/// it to exit; returns the exit code and its stderr.
fn run_refused(args: &[&str], env: &[(&str, &str)], memlock: Option<u64>) -> (i32, String) {
    let dir = TempDir::new("refused");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(args)
        .args(["--data-dir", dir.path().to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(bytes) = memlock {
        // SAFETY: only setrlimit(2), which is async-signal-safe, runs in the child.
        unsafe {
            cmd.pre_exec(move || {
                let lim = libc::rlimit { rlim_cur: bytes, rlim_max: bytes };
                if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let child = cmd.spawn().expect("spawn sluice");
    let out = child.wait_with_output().expect("sluice exits");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_limits_are_refused_with_one_line() {
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (&["serve", "--max-connections", "0"], &[], "--max-connections"),
        (&["serve", "--shards=0"], &[], "--shards"),
        (&["serve", "--segment-bytes", "1.5GiB"], &[], "--segment-bytes"),
        (&["serve", "--long-poll-timeout", "2"], &[], "--long-poll-timeout"),
        (&["serve", "--idle-timeout", "5y"], &[], "--idle-timeout"),
        (&["serve"], &[("SLUICE_MAX_BODY_BYTES", "0")], "--max-body-bytes"),
        (&["serve"], &[("SLUICE_FSYNC", "sometimes")], "--fsync"),
        (&["serve", "--no-such-flag"], &[], "--no-such-flag"),
    ];
    for (args, env, flag) in cases {
        let (code, err) = run_refused(args, env, None);
        assert_eq!(code, 2, "{args:?} {env:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line for {args:?} {env:?}: {err}");
        assert!(err.starts_with("sluice: ") && err.contains(flag), "{args:?}: {err}");
        // A value from the environment names its variable.
        for (var, _) in env.iter() {
            assert!(err.contains(&format!("(from {var})")), "{err}");
        }
        if env.is_empty() {
            assert!(!err.contains("(from SLUICE_"), "{err}");
        }
    }
    // Below glommio's per-executor minimum the executors could not start:
    // refused up front, naming the limit to raise.
    let (code, err) = run_refused(&["serve"], &[], Some(256 << 10));
    assert_eq!(code, 1, "{err}");
    let refusals: Vec<&str> = err.lines().filter(|l| l.contains("refused to start")).collect();
    assert_eq!(refusals.len(), 1, "{err}");
    assert!(refusals[0].contains("locked-memory limit 256KiB") && refusals[0].contains("LimitMEMLOCK"), "{err}");
}

#[test]
fn version_and_help() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).arg("--version").output().expect("run");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("sluice {}", env!("CARGO_PKG_VERSION")));
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(["serve", "--help"]).output().expect("run");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for want in ["--segment-bytes <SIZE>", "SLUICE_SEGMENT_BYTES", "[default: 64MiB]", "--access-log"] {
        assert!(help.contains(want), "{want} in:\n{help}");
    }
}

#[test]
fn sighup_does_not_stop_the_server_and_reaches_every_shard() {
    let mut s = Server::start_logged(&["--segment-bytes", "1MiB"]);
    s.create("/v1/stream/hup", "text/plain");
    for n in 1..=2 {
        s.signal(libc::SIGHUP);
        scrape_until(&s, "the reload on both shards", |t| {
            sample(t, "sluice_reloads_total", &["shard=\"0\""]) == Some(n as f64)
                && sample(t, "sluice_reloads_total", &["shard=\"1\""]) == Some(n as f64)
        });
    }
    assert!(s.is_running());
    assert_eq!(s.get("/v1/healthz").status, 200);
    assert_eq!(s.post("/v1/stream/hup", "text/plain", b"still here").status, 204);
    let log = s.output();
    assert_eq!(log.matches("reload requested").count(), 2, "{log}");

    let (status, _) = s.sigterm(Duration::from_secs(15));
    assert!(status.success(), "{status}");
    let log = s.output();
    let started = log.lines().find(|l| l.contains(" started ")).unwrap_or_else(|| panic!("no start line: {log}"));
    for field in ["version=", "shards=2", "data_dir=", "fsync=\"always\"", "recovery_ms=", "torn_bytes_repaired=0"] {
        assert!(started.contains(field), "{field} in {started}");
    }
    assert!(log.contains("signal=\"SIGTERM\""), "{log}");
    assert!(log.lines().any(|l| l.contains(" stopped ")), "{log}");
}

#[test]
fn access_log_is_an_option() {
    let dir = TempDir::new("access");
    let s = start_env(&dir, &[], &["--segment-bytes", "1MiB"]);
    assert_eq!(s.get("/v1/stream/none").status, 404);
    assert!(!s.output().contains("sluice::access"), "no line per request by default");
    drop(s);
    let dir = TempDir::new("access-on");
    let s = start_env(&dir, &[("SLUICE_ACCESS_LOG", "true")], &["--segment-bytes", "1MiB"]);
    assert_eq!(s.get("/v1/stream/none").status, 404);
    common::eventually("the access line", || s.output().contains("/v1/stream/none"));
    let log = s.output();
    let line = log.lines().find(|l| l.contains("/v1/stream/none")).unwrap_or_else(|| panic!("{log}"));
    assert!(line.contains("sluice::access") && line.contains("status=404") && line.contains("method=GET"), "{line}");
}

#[test]
fn rust_log_overrides_the_level() {
    let dir = TempDir::new("rust-log");
    let s = start_env(&dir, &[("RUST_LOG", "warn")], &["--segment-bytes", "1MiB", "--log-level", "debug"]);
    assert_eq!(s.get("/v1/healthz").status, 200);
    let mut s = s;
    assert!(s.sigterm(Duration::from_secs(15)).0.success());
    let log = s.output();
    assert!(!log.contains(" started ") && !log.contains(" stopped "), "RUST_LOG=warn hides info: {log}");
    drop(s);
    // glommio logs through the `log` crate; its records reach the same log.
    let dir = TempDir::new("rust-log-glommio");
    let s = start_env(&dir, &[("RUST_LOG", "info,glommio=trace")], &["--segment-bytes", "1MiB"]);
    assert_eq!(s.get("/v1/healthz").status, 200);
    // The start line follows readiness: the shards answer before it is written.
    common::eventually("the start line", || s.output().contains(" started "));
    let log = s.output();
    assert!(log.lines().any(|l| l.contains(" glommio::")), "no glommio record in: {log}");
}

/// Shards are pinned to the CPUs the process may use (taskset, systemd
/// CPUAffinity=, a container's cpuset), not to CPUs 0..N-1.
#[test]
fn shards_pin_to_the_allowed_cpus() {
    // The highest CPU this test may use: on a multi-core host that is not
    // CPU 0, where shard 0 was pinned before.
    let cpu = allowed_cpus().into_iter().max().expect("some CPU");
    let dir = TempDir::new("pin");
    let port = common::free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["serve", "--shards", "1", "--segment-bytes", "1MiB", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only sched_setaffinity(2) runs in the child before exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().expect("spawn sluice");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(10);
    let ready = loop {
        let ok = std::net::TcpStream::connect(addr).ok().and_then(|s| {
            s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
            common::Conn::from_stream(s).try_request("GET", "/v1/healthz", &[], b"").ok()
        });
        let up = ok.is_some_and(|r| r.status == 200);
        if up || Instant::now() > deadline {
            break up;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let tasks = format!("/proc/{}/task", child.id());
    let shard_cpus: Vec<String> = std::fs::read_dir(&tasks)
        .expect("task dir")
        .filter_map(|t| {
            let t = t.ok()?.path();
            let comm = std::fs::read_to_string(t.join("comm")).ok()?;
            let status = std::fs::read_to_string(t.join("status")).ok()?;
            let cpus = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim().to_string();
            comm.starts_with("shard-0-").then_some(cpus)
        })
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    assert!(ready, "the server did not start");
    assert!(!shard_cpus.is_empty(), "no shard-0 thread found");
    assert!(shard_cpus.iter().all(|c| *c == cpu.to_string()), "shard 0 runs on CPU {cpu} only: {shard_cpus:?}");
}

/// The CPUs this test process may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity(2) fills the zeroed set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

/// /v1/healthz answers only once recovery is over: the first 200 after a
/// restart comes no sooner than the slowest shard's log replay took.
#[test]
fn healthz_answers_only_after_recovery() {
    let dir = TempDir::new("ready");
    let data = dir.path().join("data");
    let args = ["--fsync", "never", "--segment-bytes", "16MiB"];
    let mut s = Server::launch(&data, Launch::logged(&dir.path().join("server.log"), &args));
    let paths: Vec<String> = (0..4).map(|i| format!("/v1/stream/replay-{i}")).collect();
    for p in &paths {
        s.create(p, "text/plain");
    }
    // Many small records make a replay that takes measurable time.
    let mut c = s.connect();
    for round in 0..40 {
        let mut batch = Vec::new();
        for i in 0..500 {
            let body = format!("record {round}-{i}\n");
            batch.extend(build("POST", &paths[i % paths.len()], &[("Content-Type", "text/plain")], body.as_bytes()));
        }
        c.send(&batch).unwrap();
        for _ in 0..500 {
            assert_eq!(c.read_response(false).status, 204);
        }
    }
    drop(c);
    let (status, _) = s.sigterm(Duration::from_secs(15));
    assert!(status.success());

    // Restart by hand, probing /v1/healthz from the moment of spawn.
    let port = common::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--shards", "2", "--listen", &format!("127.0.0.1:{port}")])
        .args(args)
        .arg("--data-dir")
        .arg(&data)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sluice");
    let spawned = Instant::now();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let first_ok = loop {
        let answered = std::net::TcpStream::connect(addr).ok().and_then(|sock| {
            sock.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
            common::Conn::from_stream(sock).try_request("GET", "/v1/healthz", &[], b"").ok()
        });
        if answered.is_some_and(|r| r.status == 200) {
            break spawned.elapsed();
        }
        assert!(spawned.elapsed() < Duration::from_secs(20), "no 200 from /v1/healthz");
        std::thread::sleep(Duration::from_millis(1));
    };
    let text = {
        let sock = std::net::TcpStream::connect(addr).expect("connect");
        sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        common::Conn::from_stream(sock).request("GET", "/v1/metrics", &[], b"").text()
    };
    let _ = child.kill();
    let _ = child.wait();
    let slowest = ["0", "1"]
        .iter()
        .map(|sh| value(&text, "sluice_recovery_seconds", &[&format!("shard=\"{sh}\"")]))
        .fold(0.0, f64::max);
    assert!(slowest > 0.0, "{text}");
    assert!(first_ok.as_secs_f64() >= slowest, "first 200 after {first_ok:?}, replay took {slowest}s");
    println!("replay {slowest:.3}s, first healthz 200 after {first_ok:?}");
}

/// Issue #8: a supervisor restarting sluice right after SIGKILL, on the
/// same port, with a client connected at the kill, gets a running server
/// (it was refused with "address already in use" for about 0.3 s).
#[test]
fn restart_right_after_sigkill_binds_the_same_port() {
    let dir = TempDir::new("rebind");
    let data = dir.path().join("data");
    let launch = Launch::quick(2, &[]);
    let port = free_port();
    let mut s = Server::try_launch_on(&data, port, launch.clone()).expect("first start");
    for round in 0..5 {
        let path = format!("/v1/stream/round-{round}");
        s.put(&path, "text/plain", b"kept").expect(201);
        let _open = s.connect();
        s.kill();
        s = Server::try_launch_on(&data, port, launch.clone())
            .unwrap_or_else(|(status, out)| panic!("restart {round} on port {port}: {status}: {out}"));
        assert_eq!(s.addr.port(), port);
        assert_eq!(s.read_all(&path).0, b"kept");
    }
    // A port a live process holds is still refused, after the short wait.
    let other = TempDir::new("rebind-other");
    let (d, listen) = (other.path().to_str().unwrap(), format!("127.0.0.1:{port}"));
    let started = Instant::now();
    let (status, err) = common::run_to_exit(&["serve", "--shards", "1", "--data-dir", d, "--listen", &listen]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("address already in use"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(s.read_all("/v1/stream/round-4").0, b"kept");
}

/// Two sluice processes never share a port: the per-shard listeners use
/// SO_REUSEPORT, so a second server that passed the free-port check in the
/// same instant as another could join it; the address is claimed first,
/// for the process's life (`sluice::port_claim`). Here another "server"
/// holds the claim of a port no socket listens on: the start is refused
/// with the reason, and starts once the claim is given back.
#[test]
fn a_claimed_address_is_refused_even_while_the_port_is_free() {
    use std::os::linux::net::SocketAddrExt;
    let dir = TempDir::new("claimed");
    let d = dir.path().to_str().unwrap();
    let listen: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let name = sluice::port_claim::name(listen);
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let held = std::os::unix::net::UnixListener::bind_addr(&addr).expect("hold the claim");
    let (status, err) =
        common::run_to_exit(&["serve", "--shards", "1", "--data-dir", d, "--listen", &listen.to_string()]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("address already in use (another sluice process serves it)"), "{err}");
    drop(held);
    let s = Server::try_launch_on(&dir.path().join("data"), listen.port(), Launch::quick(1, &[]))
        .unwrap_or_else(|(status, out)| panic!("start once the claim is free: {status}: {out}"));
    s.put("/v1/stream/claimed", "text/plain", b"x").expect(201);
}

/// Newcomers' mistakes get a clear line: a `SLUICE_*` variable no flag
/// reads is named in a warning (the server starts), and a data dir that is
/// a file is refused as such.
#[test]
fn unknown_variables_and_a_file_as_data_dir_are_named() {
    let dir = TempDir::new("newcomer");
    let s = start_env(&dir, &[("SLUICE_SHARD", "4"), ("SLUICE_LISTEN_ADDR", "x")], &[]);
    let out = s.output();
    for name in ["SLUICE_SHARD", "SLUICE_LISTEN_ADDR"] {
        assert!(out.contains(&format!("no flag reads {name}")), "{out}");
    }
    assert!(!out.contains("no flag reads SLUICE_DATA_DIR"), "{out}");
    drop(s);
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let (status, err) =
        common::run_to_exit(&["serve", "--data-dir", file.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("is a file, not a directory"), "{err}");
}
