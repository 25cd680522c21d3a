//! Hostile input and unlucky operators, against the real binary: values
//! beyond the representable range, bodies whose encoded form outgrows them,
//! a shard that panics, and a data directory that is damaged or in use.

mod common;

use common::{free_port, run_to_exit, Server, TempDir};
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `MAX_TTL_SECS` in the core: 9999-12-31T23:59:59Z in Unix seconds.
const MAX_TTL: &str = "253402300799";

#[test]
fn ttl_beyond_the_representable_range_is_refused_and_the_largest_is_kept() {
    let s = Server::start();
    // 18446744073709552 * 1000 wraps u64: this stream used to expire at once.
    for ttl in ["18446744073709552", "253402300800", "18446744073709551615"] {
        let r = s.req("PUT", "/v1/stream/ttl-huge", &[("Stream-TTL", ttl)], b"").expect(400);
        assert!(r.text().contains("Stream-TTL"), "{ttl}: {}", r.text());
        s.head("/v1/stream/ttl-huge").expect(404);
    }
    s.req("PUT", "/v1/stream/ttl-max", &[("Stream-TTL", MAX_TTL)], b"").expect(201);
    std::thread::sleep(Duration::from_millis(1100));
    let r = s.head("/v1/stream/ttl-max").expect(200);
    assert_eq!(r.h("stream-ttl"), MAX_TTL);
    s.req("PUT", "/v1/stream/exp-max", &[("Stream-Expires-At", "9999-12-31T23:59:59Z")], b"").expect(201);
    let r = s.head("/v1/stream/exp-max").expect(200);
    assert_eq!(r.h("stream-expires-at"), "9999-12-31T23:59:59.000Z");
}

/// Issue #11: a `Stream-Expires-At` that names no real instant up to the
/// end of year 9999, or an instant already past, is refused with a reason
/// and creates nothing (it used to be accepted: echoed as a year-10000 date,
/// rolled over to March 2, or created already gone).
#[test]
fn expires_at_that_is_no_future_instant_is_refused_and_creates_nothing() {
    let s = Server::start();
    for (at, why) in [
        ("9999-12-31T23:59:59-23:59", "beyond 9999-12-31T23:59:59Z"),
        ("2030-02-30T00:00:00Z", "no such day"),
        ("2031-04-31T12:00:00Z", "no such day"),
        ("2029-02-29T00:00:00Z", "no such day"),
        ("2030-01-01T00:00:00+24:00", "RFC 3339"),
        ("2030-01-01T00:00:00+01:60", "RFC 3339"),
        ("2001-01-01T00:00:00Z", "in the past"),
        ("1970-01-01T00:00:00Z", "in the past"),
    ] {
        let r = s.req("PUT", "/v1/stream/exp-bad", &[("Stream-Expires-At", at)], b"").expect(400);
        assert!(r.text().contains(why), "{at}: {}", r.text());
        s.head("/v1/stream/exp-bad").expect(404);
    }
    s.req("PUT", "/v1/stream/exp-leap", &[("Stream-Expires-At", "2032-02-29T23:00:00-01:00")], b"").expect(201);
    let r = s.head("/v1/stream/exp-leap").expect(200);
    assert_eq!(r.h("stream-expires-at"), "2032-03-01T00:00:00.000Z");
}

#[test]
fn cursor_beyond_the_representable_range_is_refused_and_never_wraps() {
    let s = Server::start();
    s.put("/v1/stream/cur", "text/plain", b"hello").expect(201);
    for bad in ["18446744073709551615", "18446744073709551436", "99999999999999999999999"] {
        let r = s.get(&format!("/v1/stream/cur?offset=-1&live=long-poll&cursor={bad}")).expect(400);
        assert!(r.text().contains("cursor"), "{bad}: {}", r.text());
    }
    // The largest cursor still moves strictly forward.
    let max = u64::MAX - 180;
    let r = s.get(&format!("/v1/stream/cur?offset=-1&live=long-poll&cursor={max}")).expect(200);
    let next: u64 = r.h("stream-cursor").parse().expect("numeric cursor");
    assert!(next > max, "cursor went from {max} to {next}");
    // Junk is ignored as before.
    s.get("/v1/stream/cur?offset=-1&live=long-poll&cursor=junk").expect(200);
}

#[test]
fn json_array_whose_records_outgrow_the_body_is_appended_whole() {
    // 4 MiB segments (the test default). A 3 MiB `[1,1,...]` body encodes to
    // 3 MiB of data plus 6 MiB of message lengths: it used to panic shard
    // with "log append without reserve".
    let mut s = Server::start();
    s.create("/v1/stream/ones", "application/json");
    let n = 3 * 1024 * 1024 / 2;
    let mut body = Vec::with_capacity(2 * n + 1);
    body.push(b'[');
    for i in 0..n {
        body.extend_from_slice(if i + 1 == n { b"1]" } else { b"1," });
    }
    let r = s.post("/v1/stream/ones", "application/json", &body);
    assert!(r.status == 200 || r.status == 204, "{} {}", r.status, r.text());
    let records = |s: &Server| s.head("/v1/stream/ones").expect(200).h("stream-record-next").to_string();
    assert_eq!(records(&s), n.to_string());
    s.post("/v1/stream/ones", "application/json", b"[2]").expect(204);
    s.restart_after_kill();
    assert_eq!(records(&s), (n + 1).to_string());
    let r = s.get(&format!("/v1/stream/ones?record={n}")).expect(200);
    assert_eq!(r.text().trim(), "2");
}

#[test]
fn a_panicking_shard_stops_the_whole_process_with_one_clear_line() {
    let dir = TempDir::new("panic");
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--shards", "2", "--segment-bytes", "4194304", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(dir.path())
        .env("SLUICE_FAULT", "panic-shard-1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sluice");
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sluice kept running with a dead shard");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    child.stderr.take().expect("piped").read_to_string(&mut err).expect("stderr");
    assert_eq!(status.code(), Some(70), "{err}");
    assert!(err.contains("sluice: fatal: thread shard-1"), "{err}");
    assert!(err.contains("injected fault"), "{err}");
}

/// How many `refused to start` lines sluice logged (warnings may come too).
fn refusal(stderr: &str) -> usize {
    stderr.lines().filter(|l| l.contains("refused to start")).count()
}

#[test]
fn lost_meta_file_with_shard_directories_is_refused() {
    let dir = TempDir::new("nometa");
    let data = dir.path().join("data");
    let mut s = Server::start_in(&data, 2, &[]);
    s.put("/v1/stream/kept", "text/plain", b"x").expect(201);
    s.terminate();
    std::fs::remove_file(data.join("sluice.meta")).unwrap();
    let d = data.to_str().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let (status, err) = run_to_exit(&["serve", "--shards", "1", "--data-dir", d, "--listen", &listen]);
    assert!(!status.success());
    assert_eq!(refusal(&err), 1, "{err}");
    assert!(err.contains("2 shard directories but no sluice.meta"), "{err}");
    assert!(!data.join("sluice.meta").exists(), "a new meta file was written");
}

#[test]
fn a_second_process_on_a_data_dir_in_use_is_refused() {
    let dir = TempDir::new("locked");
    let data = dir.path().join("data");
    let mut s = Server::start_in(&data, 2, &[]);
    s.put("/v1/stream/mine", "text/plain", b"first").expect(201);
    let d = data.to_str().unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let (status, err) = run_to_exit(&["serve", "--shards", "2", "--data-dir", d, "--listen", &listen]);
    assert!(!status.success());
    assert_eq!(refusal(&err), 1, "{err}");
    assert!(err.contains("in use by another sluice process"), "{err}");
    // The first one is untouched and the lock goes with it.
    s.post("/v1/stream/mine", "text/plain", b"+").expect(204);
    s.terminate();
    s.start_again();
    assert_eq!(s.read_all("/v1/stream/mine").0, b"first+");
}
