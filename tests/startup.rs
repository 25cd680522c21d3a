//! Start-up against the real binary (issue #10): a shard count far above
//! the host's cores is refused with one line, also for a data dir created
//! with more shards than this host allows; SIGTERM while a start is still
//! preparing its segments stops it promptly, and the next start works.

mod common;

use common::{free_port, Launch, Server, TempDir};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Shards allowed per usable CPU (`MAX_SHARDS_PER_CORE` in src/edge_limits.rs).
const PER_CORE: usize = 4;

/// `sluice serve` on `data` with `args`, allowed only the first `cpus`
/// CPUs of this process, output to `log`.
fn spawn(data: &Path, cpus: usize, args: &[&str], log: &Path) -> Child {
    let allowed = allowed_cpus();
    assert!(allowed.len() >= cpus, "this test needs {cpus} CPUs, the process may use {allowed:?}");
    let out = std::fs::File::create(log).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(data)
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    let pin: Vec<usize> = allowed[..cpus].to_vec();
    // SAFETY: only sched_setaffinity(2), which is async-signal-safe, runs in the child.
    unsafe {
        cmd.pre_exec(move || {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for &c in &pin {
                libc::CPU_SET(c, &mut set);
            }
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().expect("spawn sluice")
}

fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity(2) fills the zeroed set we own; CPU_ISSET reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set), 0);
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

/// Runs a start that must be refused; returns its exit code and output.
fn refused(data: &Path, cpus: usize, args: &[&str], log: &Path) -> (i32, String) {
    let mut child = spawn(data, cpus, args, log);
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sluice {args:?} on {cpus} CPUs kept running: {}", std::fs::read_to_string(log).unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status.code().unwrap_or(-1), std::fs::read_to_string(log).unwrap())
}

#[test]
fn shards_far_above_the_cores_are_refused_with_one_line() {
    let tmp = TempDir::new("too-many-shards");
    let data = tmp.path().join("data");
    let log = tmp.path().join("server.log");
    let too_many = (PER_CORE + 1).to_string();
    let (code, out) = refused(&data, 1, &["--shards", &too_many], &log);
    assert_eq!(code, 1, "{out}");
    assert_eq!(out.trim_end().lines().count(), 1, "one line: {out}");
    assert!(out.contains("refused to start") && out.contains(&format!("--shards {too_many}")), "{out}");
    assert!(out.contains(&format!("{PER_CORE} per core")) && out.contains("1 usable CPU"), "{out}");
    assert!(!data.join("sluice.meta").exists(), "a refused start created the data dir");

    // A data dir made with more shards than this host allows: both numbers named.
    let made = PER_CORE + 1;
    let mut child = spawn(&data, 2, &["--shards", &made.to_string(), "--segment-bytes", "64KiB"], &log);
    common::eventually("the data dir is created", || data.join("sluice.meta").exists());
    let _ = child.kill();
    let _ = child.wait();
    let (code, out) = refused(&data, 1, &["--shards", &PER_CORE.to_string()], &log);
    assert_eq!(code, 1, "{out}");
    assert_eq!(
        out.lines().filter(|l| l.contains("refused to start")).count(),
        1,
        "one refusal (warnings may come too): {out}"
    );
    assert!(
        out.contains(&format!("created with {made} shards")) && out.contains(&format!("at most {PER_CORE}")),
        "{out}"
    );
}

/// SIGTERM while the first segment of a huge `--segment-bytes` is still
/// being zero-filled: sluice exits within 2 s with status 0 and one line
/// saying it stopped during start-up, and the next start works.
#[test]
fn sigterm_during_start_up_exits_promptly_and_the_next_start_works() {
    let tmp = TempDir::new("term-at-start");
    let data = tmp.path().join("data");
    let log = tmp.path().join("server.log");
    let mut child = spawn(&data, 1, &["--shards", "1", "--segment-bytes", "8GiB"], &log);
    let preparing = data.join("shard-0").join("0000000001.seg.tmp");
    common::eventually("the first segment is being prepared", || preparing.exists());
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: plain kill(2) on our own child, which has not been reaped.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let sent = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if sent.elapsed() > Duration::from_secs(3) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no exit within 3 s of SIGTERM during start-up: {}", std::fs::read_to_string(&log).unwrap());
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = sent.elapsed();
    let out = std::fs::read_to_string(&log).unwrap();
    assert!(took < Duration::from_secs(2), "took {took:?}: {out}");
    assert!(status.success(), "{status}: {out}");
    assert!(out.contains("stopped during start-up"), "{out}");
    assert!(!data.join("shard-0").join("0000000001.seg").exists(), "the preparation was not interrupted: {out}");

    let s = Server::launch(&data, Launch::quick(1, &[]));
    s.put("/v1/stream/after", "text/plain", b"served").expect(201);
    assert_eq!(s.read_all("/v1/stream/after").0, b"served");
    assert!(!preparing.exists(), "the unfinished segment is still there");
}
