//! systemd's notification protocol through the real binary: a datagram
//! socket stands where systemd's would (`NOTIFY_SOCKET`), as under
//! `Type=notify` with `WatchdogSec=`: `READY=1` once it serves, `WATCHDOG=1`
//! while every shard beats, `STOPPING=1` on SIGTERM. Without
//! `NOTIFY_SOCKET` nothing is sent (every other test runs that way).

mod common;

use common::{Launch, Server, TempDir};
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// The next notification, or None after `wait`.
fn next(sock: &UnixDatagram, wait: Duration) -> Option<String> {
    sock.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 512];
    sock.recv(&mut buf).ok().map(|n| String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[test]
fn ready_watchdog_and_stopping_reach_the_notify_socket() {
    let dir = TempDir::new("notify");
    let path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    let mut launch = Launch::logged(&dir.path().join("server.log"), &[]);
    launch.env =
        vec![("NOTIFY_SOCKET".into(), path.to_str().unwrap().into()), ("WATCHDOG_USEC".into(), "1000000".into())];
    let mut s = Server::launch(&dir.path().join("data"), launch);
    s.get("/v1/healthz").expect(200);
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Some(m) = next(&sock, Duration::from_millis(200)) {
            got.push(m);
        }
    }
    assert!(got.iter().any(|m| m.starts_with("READY=1")), "{got:?}");
    let pings = got.iter().filter(|m| *m == "WATCHDOG=1").count();
    // Twice per WatchdogSec at most, and at least once per half of it give or take a check.
    assert!((3..=7).contains(&pings), "{pings} pings in 3 s with WatchdogSec=1s: {got:?}");
    let (status, _) = s.sigterm(Duration::from_secs(10));
    assert!(status.success());
    let mut rest = Vec::new();
    while let Some(m) = next(&sock, Duration::from_millis(200)) {
        rest.push(m);
    }
    assert!(rest.iter().any(|m| m.starts_with("STOPPING=1")), "{rest:?}");
}

#[test]
fn a_watchdog_meant_for_another_process_is_ignored() {
    let dir = TempDir::new("notify-pid");
    let path = dir.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    let mut launch = Launch::logged(&dir.path().join("server.log"), &[]);
    launch.env = vec![
        ("NOTIFY_SOCKET".into(), path.to_str().unwrap().into()),
        ("WATCHDOG_USEC".into(), "200000".into()),
        ("WATCHDOG_PID".into(), "1".into()),
    ];
    let s = Server::launch(&dir.path().join("data"), launch);
    s.get("/v1/healthz").expect(200);
    let mut got = Vec::new();
    while let Some(m) = next(&sock, Duration::from_millis(700)) {
        got.push(m);
    }
    assert!(got.iter().any(|m| m.starts_with("READY=1")), "{got:?}");
    assert!(!got.iter().any(|m| m == "WATCHDOG=1"), "{got:?}");
}
