//! Continuous backup to object storage and `sluice restore` (issue 27),
//! through the real binary against a real Garage.
//!
//! The tests that need Garage are `#[ignore]`d: `scripts/test` starts one
//! with `scripts/object-store` and runs them with `--ignored` (so without
//! Garage they count as ignored, never as passed). They read the store from
//! SLUICE_TEST_S3_* and AWS_* (scripts/object-store's env lines) and fail,
//! not skip, when run without them. The refusals that need no store run
//! always.

mod common;

use common::*;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const INTERVAL: Duration = Duration::from_secs(1);

struct Store {
    endpoint: String,
    bucket: String,
    region: String,
    key_id: String,
    secret: String,
    garage_dir: String,
}

fn store() -> Store {
    let var = |k: &str| {
        std::env::var(k).unwrap_or_else(|_| {
            panic!("{k} is not set: run these tests through scripts/test, which starts Garage (scripts/object-store)")
        })
    };
    Store {
        endpoint: var("SLUICE_TEST_S3_ENDPOINT"),
        bucket: var("SLUICE_TEST_S3_BUCKET"),
        region: var("SLUICE_TEST_S3_REGION"),
        key_id: var("AWS_ACCESS_KEY_ID"),
        secret: var("AWS_SECRET_ACCESS_KEY"),
        garage_dir: var("SLUICE_TEST_GARAGE_DIR"),
    }
}

impl Store {
    /// A fresh prefix per test run.
    fn url(&self, tag: &str) -> String {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
        format!("s3://{}/{tag}-{nanos}", self.bucket)
    }

    fn flags(&self) -> Vec<String> {
        ["--tier-endpoint", &self.endpoint, "--tier-region", &self.region].iter().map(|s| s.to_string()).collect()
    }

    fn garage(&self, action: &str) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/object-store");
        let out = Command::new(script).arg(action).arg(&self.garage_dir).output().expect("run scripts/object-store");
        assert!(out.status.success(), "scripts/object-store {action}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

/// A test's store, fresh prefix, directory, data dir and server log.
struct Setup {
    s: Store,
    url: String,
    dir: TempDir,
    data: std::path::PathBuf,
    log: std::path::PathBuf,
}

/// A fresh [`Setup`], its server started with `extra` flags and `n` streams created.
fn start(tag: &str, n: usize, extra: &[&str]) -> (Setup, Server, Vec<String>) {
    let s = store();
    let url = s.url(tag);
    let dir = TempDir::new(&format!("tier-{tag}"));
    let (data, log) = (dir.path().join("data"), dir.path().join("server.log"));
    let mut server = launch(&s, &url, &data, &log, extra);
    server.hold(&dir);
    let paths = streams(&server, tag, n);
    (Setup { s, url, dir, data, log }, server, paths)
}

/// A server backing up to `url` every [`INTERVAL`], logging to `log`.
fn launch(s: &Store, url: &str, data: &Path, log: &Path, extra: &[&str]) -> Server {
    let mut flags = vec!["--tier-url".to_string(), url.to_string(), "--backup-interval".into(), "1s".into()];
    flags.extend(s.flags());
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut l = Launch::quick(2, &flags);
    l.log = Some(log.to_path_buf());
    l.start_timeout = Duration::from_secs(20);
    Server::launch(data, l)
}

/// `sluice restore`; returns its exit status success, stdout and stderr.
fn restore(s: &Store, url: &str, into: &Path) -> (bool, String, String) {
    let mut args = vec!["restore", "--from", url, "--data-dir", into.to_str().unwrap()];
    let flags = s.flags();
    args.extend(flags.iter().map(String::as_str));
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(&args).stdin(Stdio::null()).output().expect("run sluice");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// One acknowledged append.
#[derive(Clone)]
struct Ack {
    stream: String,
    start: u64,
    body: Vec<u8>,
    at: Instant,
}

/// A steady writer over `streams` until stopped or the server is gone.
struct Load {
    stop: Arc<AtomicBool>,
    acks: Arc<Mutex<Vec<Ack>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(addr: SocketAddr, streams: Vec<String>, size: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let acks = Arc::new(Mutex::new(Vec::new()));
        let (st, ac) = (stop.clone(), acks.clone());
        let thread = std::thread::spawn(move || {
            let mut n = 0u64;
            while !st.load(Ordering::SeqCst) {
                let stream = &streams[n as usize % streams.len()];
                let mut body = format!("{stream}#{n};").into_bytes();
                body.resize(size.max(body.len()), b'a' + (n % 26) as u8);
                let Ok(sock) = std::net::TcpStream::connect(addr) else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
                let headers = [("Content-Type", "application/octet-stream")];
                match Conn::from_stream(sock).try_request("POST", stream, &headers, &body) {
                    Ok(r) if r.status == 204 || r.status == 200 => {
                        let end = offset_pos(&r.next_offset());
                        let start = end - body.len() as u64;
                        ac.lock().unwrap().push(Ack { stream: stream.clone(), start, body, at: Instant::now() });
                    }
                    _ => std::thread::sleep(Duration::from_millis(20)),
                }
                n += 1;
            }
        });
        Load { stop, acks, thread: Some(thread) }
    }

    fn stop(&mut self) -> Vec<Ack> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        self.acks.lock().unwrap().clone()
    }

    fn count(&self) -> usize {
        self.acks.lock().unwrap().len()
    }
}

fn streams(server: &Server, tag: &str, n: usize) -> Vec<String> {
    let paths: Vec<String> = (0..n).map(|i| format!("/v1/stream/{tag}-{i}")).collect();
    for p in &paths {
        server.create(p, "application/octet-stream");
    }
    paths
}

/// Checks every ack acknowledged before `by` is in `server` byte-exact at
/// its offset, and that nothing read contradicts an ack; returns how many
/// acks were checked present and the measured RPO (the loss time minus the
/// earliest acknowledged append that did not come back).
fn verify(server: &Server, acks: &[Ack], by: Instant, loss: Instant) -> (usize, Duration) {
    let mut present = 0;
    let mut earliest_missing: Option<Instant> = None;
    let mut read = std::collections::HashMap::new();
    for a in acks {
        let bytes = read.entry(a.stream.clone()).or_insert_with(|| server.read_all(&a.stream).0);
        let end = (a.start as usize) + a.body.len();
        if end <= bytes.len() {
            assert_eq!(&bytes[a.start as usize..end], &a.body[..], "{} at {}: bytes differ", a.stream, a.start);
            present += 1;
        } else {
            assert!(
                a.at >= by,
                "{} at {}: acknowledged {:?} before the loss, not restored",
                a.stream,
                a.start,
                loss - a.at
            );
            earliest_missing = Some(earliest_missing.map_or(a.at, |e| e.min(a.at)));
        }
    }
    (present, earliest_missing.map_or(Duration::ZERO, |e| loss.saturating_duration_since(e)))
}

/// Restores `url` into `dir/restored`, starts a server there and verifies
/// `acks` against it: every one acknowledged more than [`INTERVAL`] before
/// `loss` must be back. Returns the restored server, the acks present and the RPO.
fn restore_and_verify(s: &Store, url: &str, dir: &Path, acks: &[Ack], loss: Instant, what: &str) -> (Server, Duration) {
    let new = dir.join("restored");
    let (ok, out, err) = restore(s, url, &new);
    assert!(ok, "restore failed: {err}");
    assert!(out.contains("restored"), "{out}");
    println!("{}", out.trim());
    let restored = Server::launch(&new, Launch::quick(2, &[]));
    let (present, rpo) = verify(&restored, acks, loss - INTERVAL, loss);
    println!(
        "RPO {} ms measured {what} ({present} of {} acknowledged appends back, backup interval {} ms)",
        rpo.as_millis(),
        acks.len(),
        INTERVAL.as_millis()
    );
    (restored, rpo)
}

fn metric(server: &Server, name: &str) -> f64 {
    let text = server.get("/v1/metrics").expect(200).text();
    let line = text.lines().find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '));
    line.unwrap_or_else(|| panic!("no {name} in the metrics")).rsplit(' ').next().unwrap().parse().unwrap()
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn restore_after_rm_rf_under_load_brings_back_every_acknowledged_append() {
    let (Setup { s, url, dir, data, .. }, server, paths) = start("rmrf", 6, &["--flush-interval", "300ms"]);
    let mut load = Load::start(server.addr, paths, 2000);
    std::thread::sleep(Duration::from_secs(6));
    let loss = Instant::now();
    std::fs::remove_dir_all(&data).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let mut server = server;
    server.kill();
    let acks = load.stop();
    assert!(acks.len() > 100, "the load made only {} appends", acks.len());

    let (restored, rpo) = restore_and_verify(&s, &url, dir.path(), &acks, loss, "after rm -rf under load");
    assert!(rpo <= INTERVAL, "RPO {rpo:?} over the interval");
    // The restored node serves writes again.
    restored.post("/v1/stream/rmrf-0", "application/octet-stream", b"after").expect(204);
}

#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn store_down_for_30s_keeps_serving_then_the_backlog_drains_and_nothing_is_lost() {
    let (Setup { s, url, dir, data, .. }, mut server, paths) = start("down", 4, &["--flush-interval", "300ms"]);
    let mut load = Load::start(server.addr, paths.clone(), 1000);
    wait_for("a first confirmed cycle", Duration::from_secs(10), || metric(&server, "sluice_tier_cycles_total") >= 1.0);
    s.garage("stop");
    let down = Instant::now();
    let before = load.count();
    wait_for("the degraded health", Duration::from_secs(20), || {
        server.get("/v1/healthz").text().starts_with("degraded")
    });
    assert_eq!(server.get("/v1/healthz").status, 200, "degraded, not dead");
    assert_eq!(metric(&server, "sluice_tier_degraded"), 1.0);
    let remaining = Duration::from_secs(30).saturating_sub(down.elapsed());
    std::thread::sleep(remaining);
    assert!(load.count() > before + 100, "writes stalled while the store was down");
    assert!(metric(&server, "sluice_tier_unshipped_age_seconds") >= 25.0, "the live RPO shows the outage");
    // Local reads still work.
    assert!(!server.read_all(&paths[0]).0.is_empty());
    s.garage("start");
    wait_for("the backlog to drain", Duration::from_secs(60), || {
        metric(&server, "sluice_tier_degraded") == 0.0 && metric(&server, "sluice_tier_unshipped_age_seconds") < 2.0
    });
    assert!(server.get("/v1/healthz").text().starts_with("ok"));
    std::thread::sleep(Duration::from_secs(2));
    let loss = Instant::now();
    server.kill();
    let acks = load.stop();
    // Nothing local was dropped: the same data dir still has everything.
    let again = Server::launch(&data, Launch::quick(2, &[]));
    let (local, _) = verify(&again, &acks, loss, loss);
    assert_eq!(local, acks.len(), "every acknowledged append is still local");
    drop(again);
    let (_, rpo) = restore_and_verify(&s, &url, dir.path(), &acks, loss, "after a 30 s outage and a kill");
    assert!(rpo <= INTERVAL, "RPO {rpo:?} over the interval once the backlog drained");
}

#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn crashes_during_uploads_lose_nothing_acknowledged() {
    let (Setup { s, url, dir, data, log }, mut server, paths) = start("crash", 4, &["--flush-interval", "200ms"]);
    let mut all = Vec::new();
    for round in 0..4u64 {
        // 16 KiB appends: cycles ship megabytes, so kills land in uploads.
        let mut load = Load::start(server.addr, paths.clone(), 16 << 10);
        std::thread::sleep(Duration::from_millis(1500 + 500 * round));
        server.kill();
        all.extend(load.stop());
        server = launch(&s, &url, &data, &log, &["--flush-interval", "200ms"]);
    }
    let mut load = Load::start(server.addr, paths, 16 << 10);
    std::thread::sleep(Duration::from_secs(3));
    let loss = Instant::now();
    server.kill();
    all.extend(load.stop());
    std::fs::remove_dir_all(&data).unwrap();
    let (restored, _) = restore_and_verify(&s, &url, dir.path(), &all, loss, "after 4 kills mid-upload and rm -rf");
    // The restored node backs up again, to a new prefix, from its first cycle.
    drop(restored);
    let again = launch(&s, &s.url("crash-again"), &dir.path().join("restored"), &log, &[]);
    wait_for("a cycle of the restored node", Duration::from_secs(90), || {
        metric(&again, "sluice_tier_cycles_total") >= 1.0
    });
}

#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn credentials_never_reach_the_logs_and_wrong_ones_refuse_the_start() {
    let (Setup { s, url, dir, log, .. }, mut server, paths) = start("creds", 2, &["--log-level", "debug"]);
    for p in &paths {
        server.post(p, "application/octet-stream", b"secret-free").expect(204);
    }
    wait_for("a confirmed cycle", Duration::from_secs(10), || metric(&server, "sluice_tier_cycles_total") >= 1.0);
    let metrics = server.get("/v1/metrics").expect(200).text();
    server.terminate();
    let logged = std::fs::read_to_string(&log).unwrap() + &metrics;
    assert!(!logged.contains(&s.secret), "the secret key is in the logs");
    assert!(!logged.contains(&s.key_id), "the access key id is in the logs");

    // Wrong secret: a one-line refusal that names neither credential.
    let mut flags = vec!["--tier-url".to_string(), url.clone()];
    flags.extend(s.flags());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut l = Launch::quick(1, &flags);
    l.env.push(("AWS_SECRET_ACCESS_KEY".into(), "0".repeat(64)));
    let (status, out) = match Server::try_launch(&dir.path().join("other"), l) {
        Err(refused) => refused,
        Ok(_) => panic!("started with a wrong secret"),
    };
    assert!(!status.success());
    assert!(out.contains("refused to start") && out.contains("object store"), "{out}");
    assert!(!out.contains(&s.key_id) && !out.contains(&"0".repeat(64)), "{out}");

    // Nothing at a prefix: a one-line refusal, and no data dir.
    let (ok, _, err) = restore(&s, &s.url("empty"), &dir.path().join("none"));
    assert!(!ok && err.contains("no backup at") && err.lines().count() == 1, "{err}");
    assert!(!dir.path().join("none").exists());
    // The restore prints no credential either.
    let (ok, out, err) = restore(&s, &url, &dir.path().join("restored"));
    assert!(ok, "{err}");
    assert!(!(out.clone() + &err).contains(&s.secret) && !(out + &err).contains(&s.key_id));
}

#[test]
fn restore_refuses_a_non_empty_dir_missing_credentials_and_an_unreachable_store() {
    let dir = TempDir::new("tier-refusals");
    std::fs::write(dir.path().join("x"), b"x").unwrap();
    let port = free_port().to_string();
    let endpoint = format!("http://127.0.0.1:{port}");
    let run = |data: &Path, env: &[(&str, &str)]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
        c.args(["restore", "--from", "s3://bkt/p", "--data-dir", data.to_str().unwrap(), "--tier-endpoint", &endpoint]);
        c.env_remove("AWS_ACCESS_KEY_ID").env_remove("AWS_SECRET_ACCESS_KEY").envs(env.iter().copied());
        let out = c.output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let creds = [("AWS_ACCESS_KEY_ID", "GKexample"), ("AWS_SECRET_ACCESS_KEY", "shh-secret")];
    let (code, err) = run(dir.path(), &creds);
    assert_eq!(code, Some(1));
    assert!(err.contains("not empty"), "{err}");
    let (code, err) = run(&dir.path().join("new"), &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no object-store credentials"), "{err}");
    let (code, err) = run(&dir.path().join("new"), &creds);
    assert_eq!(code, Some(1));
    assert!(err.starts_with("sluice restore: ") && err.lines().count() == 1, "{err}");
    assert!(!err.contains("shh-secret"), "{err}");
    assert!(!dir.path().join("new").exists(), "a failed restore leaves no data dir");
    let creds_file = dir.path().join("creds");
    std::fs::write(&creds_file, "only-one-line\n").unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.args(["restore", "--from", "s3://bkt/p", "--data-dir", "/nonexistent/new", "--tier-credentials-file"]);
    let out = c.arg(&creds_file).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("two lines"));
}

#[test]
fn serve_refuses_to_start_without_a_usable_store() {
    let dir = TempDir::new("tier-serve-refusals");
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let flags = ["--tier-url", "s3://bkt/p", "--tier-endpoint", endpoint.as_str()];
    let mut l = Launch::quick(1, &flags);
    l.env.push(("AWS_ACCESS_KEY_ID".into(), "GKexample".into()));
    l.env.push(("AWS_SECRET_ACCESS_KEY".into(), "shh-secret".into()));
    let (status, out) = match Server::try_launch(&dir.path().join("data"), l) {
        Err(refused) => refused,
        Ok(_) => panic!("started against a closed port"),
    };
    assert!(!status.success());
    assert!(out.contains("object store s3://bkt/p unusable"), "{out}");
    assert!(!out.contains("shh-secret"), "{out}");
    let (status, err) = run_to_exit(&["serve", "--tier-url", "http://bkt"]);
    assert!(!status.success());
    assert!(err.contains("s3://"), "{err}");
}

// The cold tier: local copies dropped past --local-bytes, read back from the store.

/// Bytes the stream data files of `data` take on disk (allocated blocks).
fn local_data_bytes(data: &Path) -> u64 {
    data_files(data).0
}

/// Bytes the stream data files of `data` take on disk, and their sizes.
fn data_files(data: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let (mut total, mut size) = (0, 0);
    for shard in
        std::fs::read_dir(data).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().starts_with("shard-"))
    {
        let Ok(files) = std::fs::read_dir(shard.path().join("streams")) else { continue };
        for f in files.flatten().filter(|f| f.file_name().to_string_lossy().ends_with(".data")) {
            let m = f.metadata().unwrap();
            (total, size) = (total + m.blocks() * 512, size + m.len());
        }
    }
    (total, size)
}

/// Appends `total` bytes to `stream` in `piece`-byte appends of a pattern
/// unique to the stream and offset; returns the bytes.
fn fill(server: &Server, stream: &str, total: usize, piece: usize) -> Vec<u8> {
    let all = pattern(stream, total);
    for chunk in all.chunks(piece) {
        append(server, stream, chunk);
    }
    all
}

/// Appends `body` to `stream`, retrying while the cold tier holds writes
/// (507: the store has not yet confirmed --local-bytes of local data), as a
/// client would; fails after a minute of it.
fn append(server: &Server, stream: &str, body: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = server.post(stream, "application/octet-stream", body);
        if r.status != 507 {
            r.expect(204);
            return;
        }
        assert!(Instant::now() < deadline, "{stream}: writes held for a minute: {}", r.text());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for two more confirmed cycles: everything written before is then
/// confirmed, and the cold tier's cap counts from it.
fn settle(server: &Server) {
    let cycles = metric(server, "sluice_tier_cycles_total");
    wait_for("two more confirmed cycles", Duration::from_secs(30), || {
        metric(server, "sluice_tier_cycles_total") >= cycles + 2.0
    });
}

const MIB: usize = 1 << 20;

/// Waits until what `server` wrote is in its data files and they hold at
/// most `limit` bytes locally, some of them dropped to the tier.
fn wait_tiered(server: &Server, data: &Path, limit: u64, within: Duration) {
    server.wait_flushed();
    wait_for("local data within --local-bytes", within, || {
        local_data_bytes(data) <= limit && metric(server, "sluice_tier_tiered_bytes") > 0.0
    });
}

/// Starts the store again when dropped (a failed test leaves it running for the next).
struct Started<'a>(&'a Store);

impl Drop for Started<'_> {
    fn drop(&mut self) {
        self.0.garage("start");
    }
}

#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn cold_tier_keeps_local_data_within_local_bytes_and_reads_every_byte_back() {
    let limit = 8 * MIB as u64;
    let extra = ["--flush-interval", "200ms", "--local-bytes", "8MiB", "--cache-bytes", "128MiB"];
    let (Setup { s, url, data, dir, .. }, mut server, paths) = start("cold", 2, &extra);
    let want: Vec<Vec<u8>> = paths.iter().map(|p| fill(&server, p, 20 * MIB, 256 << 10)).collect();
    wait_tiered(&server, &data, limit, Duration::from_secs(60));
    let (after, written) = data_files(&data);
    assert_eq!(written, 40 * MIB as u64, "the data files hold every byte written");
    println!(
        "local stream data: {} KiB written, {} KiB on disk once tiered (--local-bytes 8MiB)",
        written >> 10,
        after >> 10
    );
    assert!(after > limit / 2, "only the oldest bytes go: {after} bytes left local");
    assert!(metric(&server, "sluice_tier_tiered_bytes") >= (written - limit) as f64);
    assert!(metric(&server, "sluice_tier_local_bytes") <= limit as f64);
    for (p, w) in paths.iter().zip(&want) {
        assert!(server.read_all(p).0 == *w, "{p}: catch-up from the start differs");
        let mid = (w.len() / 2 + 12345) as u64;
        assert!(server.read_from(p, mid).0 == w[mid as usize..], "{p}: a read from the middle differs");
    }
    assert!(metric(&server, "sluice_tier_download_bytes_total") >= 20.0 * MIB as f64);
    assert!(metric(&server, "sluice_tier_cache_hits_total") > 0.0, "read-ahead serves a catch-up");

    // A restart reads the tiered bytes back: the marks survive, the zeros are not damage.
    server.restart_after_kill();
    for (p, w) in paths.iter().zip(&want) {
        assert!(server.read_all(p).0 == *w, "{p}: differs after a restart");
    }
    assert!(local_data_bytes(&data) <= limit, "nothing came back to the local disk");
    server.terminate();
    let (status, out) = run_to_exit(&["check", "--data-dir", data.to_str().unwrap()]);
    assert!(status.success(), "sluice check on a tiered data dir: {out}");
    // Without its store, a tiered data dir refuses to start (its bytes are there).
    let (status, err) = run_to_exit(&["serve", "--data-dir", data.to_str().unwrap(), "--shards", "2"]);
    assert!(!status.success() && err.contains("--tier-url"), "{err}");
    // Nor with a prefix that does not hold them.
    let mut flags = vec!["--tier-url".to_string(), s.url("cold-elsewhere")];
    flags.extend(s.flags());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    match Server::try_launch(&data, Launch::quick(2, &flags)) {
        Err((status, out)) => assert!(!status.success() && out.contains("does not hold them"), "{out}"),
        Ok(_) => panic!("a tiered data dir started against a prefix without its bytes"),
    }
    // A restore brings every byte back, local again.
    let new = dir.path().join("restored");
    let (ok, _, err) = restore(&s, &url, &new);
    assert!(ok, "restore of a tiered node: {err}");
    let restored = Server::launch(&new, Launch::quick(2, &[]));
    for (p, w) in paths.iter().zip(&want) {
        assert!(restored.read_all(p).0 == *w, "{p}: differs after a restore");
    }
    assert!(data_files(&new).0 >= 40 * MIB as u64, "a restored data dir holds every byte locally");
}

#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn store_down_nothing_unconfirmed_is_dropped_writes_go_on_and_tiered_reads_answer_503() {
    let limit = 4 * MIB as u64;
    let extra = ["--flush-interval", "200ms", "--local-bytes", "4MiB"];
    let (Setup { s, data, dir: _dir, .. }, server, paths) = start("colddown", 1, &extra);
    let p = &paths[0];
    let mut want = fill(&server, p, 12 * MIB, 256 << 10);
    wait_tiered(&server, &data, limit, Duration::from_secs(60));
    settle(&server);
    let tiered = metric(&server, "sluice_tier_tiered_bytes");
    let local = local_data_bytes(&data);
    s.garage("stop");
    let started = Started(&s);
    // Writes go on (within --local-bytes), and stay local: nothing unconfirmed is dropped.
    let at = want.len();
    want.extend(fill(&server, p, 2 * MIB, 256 << 10));
    server.wait_flushed();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(metric(&server, "sluice_tier_tiered_bytes"), tiered, "dropped while the store is down");
    assert!(local_data_bytes(&data) + 4096 >= local + 2 * MIB as u64, "unconfirmed bytes left the disk");
    assert!(server.read_from(p, at as u64).0 == want[at..], "local reads go on");
    // A tiered read answers 503 with a reason, soon.
    let t = Instant::now();
    let r = server.get(&format!("{p}?offset={}", offset(0)));
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(t.elapsed() < Duration::from_secs(15), "a tiered read hung for {:?}", t.elapsed());
    assert!(!r.text().is_empty());
    assert!(metric(&server, "sluice_tier_download_errors_total") > 0.0);
    drop(started);
    wait_for("the backlog to drain and local data within --local-bytes", Duration::from_secs(90), || {
        metric(&server, "sluice_tier_degraded") == 0.0 && local_data_bytes(&data) <= limit
    });
    assert!(server.read_all(p).0 == want, "every byte back after the outage");
}

#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn forks_read_their_sources_tiered_bytes_and_deleted_streams_leave_the_tier() {
    let extra = ["--flush-interval", "200ms", "--local-bytes", "1MiB"];
    let (Setup { s, url, data, dir, .. }, server, paths) = start("coldfork", 1, &extra);
    let src = &paths[0];
    let mut want = fill(&server, src, 8 * MIB, 256 << 10);
    wait_tiered(&server, &data, MIB as u64, Duration::from_secs(60));
    let fork = "/v1/stream/coldfork-fork";
    server
        .req("PUT", fork, &[("Stream-Forked-From", src.as_str()), ("Content-Type", "application/octet-stream")], b"")
        .expect(201);
    server.post(fork, "application/octet-stream", b"the fork's own").expect(204);
    want.extend_from_slice(b"the fork's own");
    assert!(server.read_all(fork).0 == want, "the fork reads its source's tiered bytes");
    // The source deleted, the fork still reads them (its files stay, so their objects stay).
    server.delete(src).expect(204);
    std::thread::sleep(Duration::from_secs(3));
    assert!(server.read_all(fork).0 == want, "the fork reads them after the source's deletion");
    // Both deleted: the files go, and so do their marks and the tiered bytes.
    server.delete(fork).expect(204);
    wait_for("the deleted streams to leave the tier", Duration::from_secs(60), || {
        metric(&server, "sluice_tier_tiered_bytes") == 0.0
            && std::fs::read_to_string(data.join("shard-0/tiered")).is_ok_and(|m| m.is_empty())
    });
    // The newest manifest names none of their files: their packs go once
    // no kept manifest names them (shared packs: see the README).
    let cycles = metric(&server, "sluice_tier_cycles_total");
    wait_for("a cycle after the deletion", Duration::from_secs(20), || {
        metric(&server, "sluice_tier_cycles_total") >= cycles + 1.0
    });
    let new = dir.path().join("restored");
    let (ok, _, err) = restore(&s, &url, &new);
    assert!(ok, "{err}");
    assert_eq!(data_files(&new), (0, 0), "the deleted streams' data files are in the backup");
}

#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn a_long_catch_up_from_the_tier() {
    let total = 256 * MIB;
    let extra = ["--flush-interval", "200ms", "--local-bytes", "16MiB", "--max-read-bytes", "8MiB"];
    let (Setup { data, dir: _dir, .. }, mut server, paths) = start("coldcatchup", 1, &extra);
    let p = &paths[0];
    let want = fill(&server, p, total, MIB);
    wait_tiered(&server, &data, 16 * MIB as u64, Duration::from_secs(180));
    // A restart empties the cache: the catch-up reads from the store.
    server.restart_after_kill();
    let downloaded = metric(&server, "sluice_tier_download_bytes_total");
    let t = Instant::now();
    let got = server.read_all(p).0;
    let took = t.elapsed();
    assert!(got == want, "the catch-up differs");
    let fetched = metric(&server, "sluice_tier_download_bytes_total") - downloaded;
    assert!(fetched >= (total - 16 * MIB) as f64, "only {fetched} bytes came from the store");
    let rate = total as f64 / took.as_secs_f64() / 1e6;
    println!("catch-up of {} MiB from the tier: {:.2} s, {rate:.0} MB/s", total >> 20, took.as_secs_f64());
    let cached = metric(&server, "sluice_tier_cache_bytes");
    assert!(cached > 0.0 && cached <= (256 * MIB) as f64, "the cache holds {cached} bytes, over --cache-bytes");
    let secs = metric(&server, "sluice_tier_download_seconds_total");
    let gets = metric(&server, "sluice_tier_downloads_total");
    println!("{gets} range GETs, mean {:.1} ms", secs / gets * 1e3);
}

#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn tier_after_drops_what_the_store_has_held_that_long() {
    let extra = ["--flush-interval", "200ms", "--tier-after", "2s"];
    let (Setup { data, dir: _dir, .. }, server, paths) = start("coldage", 1, &extra);
    let p = &paths[0];
    let want = fill(&server, p, 4 * MIB, 256 << 10);
    server.wait_flushed();
    let written = Instant::now();
    wait_for("the old bytes dropped", Duration::from_secs(30), || local_data_bytes(&data) < MIB as u64);
    assert!(written.elapsed() >= Duration::from_secs(1), "dropped before --tier-after");
    assert!(metric(&server, "sluice_tier_tiered_bytes") >= (3 * MIB) as f64);
    assert!(server.read_all(p).0 == want, "every byte back");
}

#[test]
fn cold_tier_flags_are_checked_at_start() {
    let dir = TempDir::new("tier-cold-flags");
    let data = dir.path().join("data");
    let data = data.to_str().unwrap();
    for (flags, says) in [
        (&["--local-bytes", "8MiB"][..], "--local-bytes and --tier-after need --tier-url"),
        (&["--tier-after", "1h"][..], "--local-bytes and --tier-after need --tier-url"),
        (&["--local-bytes", "1KiB"][..], "between 1MiB and"),
        (&["--tier-after", "10ms"][..], "between 1s and 10 years"),
        (&["--cache-bytes", "1MiB"][..], "between 128MiB and 1TiB"),
    ] {
        let mut args = vec!["serve", "--data-dir", data];
        args.extend_from_slice(flags);
        let (status, err) = run_to_exit(&args);
        assert!(!status.success(), "{flags:?} started");
        assert!(err.contains(says), "{flags:?}: {err}");
    }
}

/// Retention over bytes already in the tier: reads below the retained offset
/// get 410, from it on the tier serves them, and a restart agrees.
#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn retention_over_tiered_bytes_hides_them_and_the_rest_reads_back() {
    let limit = 8 * MIB as u64;
    let extra = ["--flush-interval", "200ms", "--local-bytes", "8MiB"];
    let (Setup { data, dir: _dir, .. }, mut server, paths) = start("retain", 1, &extra);
    let p = &paths[0];
    let want = fill(&server, p, 20 * MIB, 256 << 10);
    wait_tiered(&server, &data, limit, Duration::from_secs(60));
    // The same stream on the bucketed surface, where retention lives; a
    // message boundary (appends are 256 KiB) well inside the tiered part.
    let b = p.replacen("/v1/stream/", "/v1-stream/", 1);
    let at = 4 * MIB as u64;
    let snapshot = format!("{b}/snapshot/{}", offset(at));
    server.req("PUT", &snapshot, &[("Content-Type", "application/x-state")], b"state").expect(204);
    server.req("PUT", &format!("{b}/retention/{}", offset(at)), &[], b"").expect(204);
    let check = |server: &Server, when: &str| {
        server.get(&format!("{p}?offset={}", offset(0))).expect(410);
        assert!(server.read_from(p, at).0 == want[at as usize..], "{when}: a read from the retained offset differs");
    };
    check(&server, "live");
    server.wait_flushed();
    server.restart_after_kill();
    check(&server, "after a restart");
}

/// The store down: writes that add stream data go on until the bytes it has
/// not confirmed reach --local-bytes, then are refused (507, nothing
/// changed) while reads and deletes go on; once it confirms, they are taken
/// again, and every acknowledged byte reads back.
#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn store_down_caps_writes_at_local_bytes_and_they_resume_once_it_confirms() {
    let limit = 8 * MIB as u64;
    let extra = ["--flush-interval", "200ms", "--local-bytes", "8MiB"];
    let (Setup { s, data, dir: _dir, .. }, server, paths) = start("coldcap", 2, &extra);
    let (p, other) = (&paths[0], &paths[1]);
    let mut want = fill(&server, p, 20 * MIB, 256 << 10);
    wait_tiered(&server, &data, limit, Duration::from_secs(60));
    settle(&server);
    assert_eq!(metric(&server, "sluice_tier_writes_held"), 0.0, "writes held with everything confirmed");
    let (_, size) = data_files(&data);
    s.garage("stop");
    let started = Started(&s);
    // Appends are taken until the unconfirmed bytes reach --local-bytes.
    let piece = 256 << 10;
    let refused = loop {
        let body: Vec<u8> = (0..piece).map(|i| (i as u64 * 7 + want.len() as u64 / piece as u64) as u8).collect();
        let r = server.post(p, "application/octet-stream", &body);
        match r.status {
            204 => want.extend(body),
            507 => break r,
            other => panic!("an append while the store is down: {other} {}", r.text()),
        }
        assert!(want.len() < 20 * MIB + 4 * limit as usize, "never refused");
    };
    let taken = (want.len() - 20 * MIB) as u64;
    assert_eq!(refused.text().trim(), "object store behind: local data at --local-bytes; retry later");
    assert_eq!(refused.header("retry-after"), Some("1"));
    println!("{} KiB appended while the store was down before the first 507 (--local-bytes 8MiB)", taken >> 10);
    assert!(taken >= limit - MIB as u64, "refused after only {taken} bytes");
    // The room left is under one piece: smaller appends take it, nearly to the byte.
    let mut small: usize = piece / 2;
    while small > 0 {
        loop {
            let body = vec![b'a' + small.trailing_zeros() as u8; small];
            let r = server.post(p, "application/octet-stream", &body);
            match r.status {
                204 => want.extend(body),
                507 => break,
                other => panic!("an append of {small} bytes while the store is down: {other} {}", r.text()),
            }
        }
        small /= 2;
    }
    // Nothing changed: the tail is the last acknowledged append's.
    assert_eq!(offset_pos(&server.head(p).expect(200).next_offset()), want.len() as u64);
    server.wait_flushed();
    let (_, grown) = data_files(&data);
    assert!(grown - size <= limit + MIB as u64, "{} bytes of data files unconfirmed", grown - size);
    // Creates are refused too; reads, deletes and health go on.
    let r = server.put("/v1/stream/coldcap-new", "application/octet-stream", b"");
    assert_eq!((r.status, r.header("retry-after")), (507, Some("1")), "{}", r.text());
    // Repeating the create of a stream that is there adds nothing: answered as ever.
    server.put(p, "application/octet-stream", b"").expect(200);
    assert!(server.read_from(p, 20 * MIB as u64).0 == want[20 * MIB..], "local reads go on");
    server.delete(other).expect(204);
    let health = server.get("/v1/healthz").expect(200).text();
    assert!(health.starts_with("degraded:") && health.contains("writes held"), "{health}");
    assert_eq!(metric(&server, "sluice_tier_writes_held"), 1.0);
    assert_eq!(server.post(p, "application/octet-stream", b"x").status, 507, "still held");
    // The store back: appends are taken again, soon.
    drop(started);
    let back = Instant::now();
    let body = b"after the outage".to_vec();
    wait_for("appends taken again", Duration::from_secs(60), || {
        server.post(p, "application/octet-stream", &body).status == 204
    });
    println!("appends taken again {} ms after the store came back", back.elapsed().as_millis());
    want.extend(body);
    wait_for("writes no longer held", Duration::from_secs(30), || metric(&server, "sluice_tier_writes_held") == 0.0);
    assert!(server.get("/v1/healthz").text().starts_with("ok"));
    server.create("/v1/stream/coldcap-new", "application/octet-stream");
    assert!(server.read_all(p).0 == want, "every acknowledged byte reads back");
}

// Pack compaction: a deleted stream's bytes leave the store even when its
// packs also held a surviving stream's.

/// The objects under `dir/` of `url` in the store: key (relative to the
/// prefix) and size.
fn objects(s: &Store, url: &str, dir: &str) -> Vec<(String, u64)> {
    use futures_lite::StreamExt;
    let (store, prefix) = s3(s, url);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut out = Vec::new();
        let mut list = store.list(Some(&object_store::path::Path::from(format!("{prefix}/{dir}"))));
        while let Some(m) = list.next().await {
            let m = m.expect("listing the store");
            out.push((m.location.to_string()[prefix.len() + 1..].to_string(), m.size));
        }
        out.sort();
        out
    })
}

/// Every object under `dir/` of `url`, read whole.
fn download(s: &Store, url: &str, dir: &str) -> Vec<(String, Vec<u8>)> {
    use object_store::ObjectStore;
    let (store, prefix) = s3(s, url);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let keys = objects(s, url, dir);
    rt.block_on(async {
        let mut out = Vec::new();
        for (key, _) in keys {
            let path = object_store::path::Path::from(format!("{prefix}/{key}"));
            let body = store.get(&path).await.expect("reading an object").bytes().await.expect("its body");
            out.push((key, body.to_vec()));
        }
        out
    })
}

/// A client of the test's store, and `url`'s prefix.
fn s3(s: &Store, url: &str) -> (Box<dyn object_store::ObjectStore>, String) {
    let prefix = url.strip_prefix(&format!("s3://{}/", s.bucket)).unwrap().to_string();
    let store = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(&s.bucket)
        .with_region(&s.region)
        .with_endpoint(&s.endpoint)
        .with_allow_http(true)
        .with_access_key_id(&s.key_id)
        .with_secret_access_key(&s.secret)
        .build()
        .unwrap();
    (Box::new(store), prefix)
}

/// Bytes of every pack under `url`.
fn pack_bytes(s: &Store, url: &str) -> u64 {
    objects(s, url, "packs").iter().map(|(_, n)| n).sum()
}

/// Appends `keep` and `gone` bytes to `streams[0]` and `[1]` (their
/// patterns, see [`fill`]) in `piece`-byte appends, interleaved so that
/// every cycle's pack holds both; returns their bytes.
fn fill_both(server: &Server, streams: &[String], keep: usize, gone: usize, piece: usize) -> [Vec<u8>; 2] {
    let want = [pattern(&streams[0], keep), pattern(&streams[1], gone)];
    let (mut at, step) = ([0, 0], [piece * keep / (keep + gone), piece * gone / (keep + gone)]);
    while at[0] < keep || at[1] < gone {
        for i in 0..2 {
            let end = (at[i] + step[i]).min(want[i].len());
            if at[i] < end {
                append(server, &streams[i], &want[i][at[i]..end]);
                at[i] = end;
            }
        }
    }
    want
}

/// Windows of `bytes`' first half (its last segment's worth may stay in the
/// journal, a live file), 64 bytes each: none occurs in the other stream.
fn needles(bytes: &[u8]) -> Vec<&[u8]> {
    (0..16).map(|i| i * bytes.len() / 32).map(|at| &bytes[at..at + 64]).collect()
}

/// How many of `needles` occur in the packs under `url`.
fn found_in_packs(s: &Store, url: &str, needles: &[&[u8]]) -> usize {
    let packs = download(s, url, "packs");
    needles.iter().filter(|n| packs.iter().any(|(_, body)| body.windows(n.len()).any(|w| w == **n))).count()
}

/// Deletes `streams[1]`, then appends small pieces to `keep` (its bytes in
/// `want`, extended) so cycles go on, until the store's packs hold at most
/// `bound` bytes; returns them.
fn delete_and_wait_compacted(
    setup: &Setup,
    server: &Server,
    streams: &[String],
    want: &mut Vec<u8>,
    bound: u64,
) -> u64 {
    server.delete(&streams[1]).expect(204);
    let mut n = 0u64;
    wait_for("compaction to shrink the packs", Duration::from_secs(120), || {
        let tick = pattern(&format!("tick{n}"), 8 << 10);
        append(server, &streams[0], &tick);
        want.extend_from_slice(&tick);
        n += 1;
        n.is_multiple_of(5) && pack_bytes(&setup.s, &setup.url) <= bound
    });
    pack_bytes(&setup.s, &setup.url)
}

/// The bytes of [`fill`]'s pattern for `stream`: a hash of the stream and
/// the offset, so no 64 bytes of one stream occur in another.
fn pattern(stream: &str, total: usize) -> Vec<u8> {
    let seed = stream.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    let word = |k: u64| {
        // splitmix64
        let mut z = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(k).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut all: Vec<u8> = (0..total.div_ceil(8) as u64).flat_map(|k| word(k).to_le_bytes()).collect();
    all.truncate(total);
    all
}

#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn compaction_deletes_a_deleted_streams_bytes_from_shared_packs_and_restore_reads_the_survivor() {
    let extra = ["--flush-interval", "200ms", "--segment-bytes", "1MiB"];
    let (setup, server, paths) = start("compact", 2, &extra);
    let [mut keep, gone] = fill_both(&server, &paths, 8 * MIB, 24 * MIB, MIB);
    server.wait_flushed();
    let cycles = metric(&server, "sluice_tier_cycles_total");
    wait_for("the writes confirmed", Duration::from_secs(30), || {
        metric(&server, "sluice_tier_cycles_total") >= cycles + 2.0
            && metric(&server, "sluice_tier_backlog_bytes") == 0.0
    });
    let before = pack_bytes(&setup.s, &setup.url);
    let needles = needles(&gone);
    assert_eq!(
        found_in_packs(&setup.s, &setup.url, &needles),
        needles.len(),
        "the deleted stream's bytes were shipped"
    );

    let bound = keep.len() as u64 + 6 * MIB as u64;
    let after = delete_and_wait_compacted(&setup, &server, &paths, &mut keep, bound);
    println!(
        "packs in the store: {} KiB before the deletion, {} KiB after compaction ({} KiB of the surviving stream; \
         {} KiB rewritten, {} packs emptied)",
        before >> 10,
        after >> 10,
        keep.len() >> 10,
        metric(&server, "sluice_tier_compacted_bytes_total") as u64 >> 10,
        metric(&server, "sluice_tier_compacted_packs_total")
    );
    assert!(before >= 32 * MIB as u64, "both streams' bytes were shipped: {before}");
    assert!(metric(&server, "sluice_tier_compacted_packs_total") > 0.0);
    assert_eq!(found_in_packs(&setup.s, &setup.url, &needles), 0, "the deleted stream's bytes are still in the store");
    assert!(server.read_all(&paths[0]).0 == keep, "the survivor reads back");

    let new = setup.dir.path().join("restored");
    let (ok, out, err) = restore(&setup.s, &setup.url, &new);
    assert!(ok, "restore after compaction: {err}");
    println!("{}", out.trim());
    let restored = Server::launch(&new, Launch::quick(2, &[]));
    assert!(restored.read_all(&paths[0]).0 == keep, "the survivor differs after a restore");
    assert_eq!(restored.get(&paths[1]).status, 404, "the deleted stream is back");
}

#[test]
#[ignore = "needs Garage: scripts/test starts it (scripts/object-store)"]
fn tiered_bytes_read_back_from_the_packs_compaction_moved_them_to() {
    let extra = ["--flush-interval", "200ms", "--segment-bytes", "1MiB", "--local-bytes", "1MiB"];
    let (setup, mut server, paths) = start("compactcold", 2, &extra);
    let [mut keep, _] = fill_both(&server, &paths, 8 * MIB, 24 * MIB, MIB);
    wait_tiered(&server, &setup.data, MIB as u64, Duration::from_secs(60));
    let old: Vec<String> = objects(&setup.s, &setup.url, "packs").into_iter().map(|(k, _)| k).collect();
    // Nothing read yet: the cache holds no block of an old pack.
    let bound = keep.len() as u64 + 6 * MIB as u64;
    let after = delete_and_wait_compacted(&setup, &server, &paths, &mut keep, bound);
    let now: Vec<String> = objects(&setup.s, &setup.url, "packs").into_iter().map(|(k, _)| k).collect();
    let kept_old = now.iter().filter(|k| old.contains(k)).count();
    println!("packs: {} before, {} now ({kept_old} of the old ones), {} KiB", old.len(), now.len(), after >> 10);
    assert!(metric(&server, "sluice_tier_compacted_packs_total") > 0.0);
    assert!(kept_old < old.len(), "no old pack left the store");
    let tiered = metric(&server, "sluice_tier_tiered_bytes");
    assert!(tiered >= 6.0 * MIB as f64, "the survivor is tiered: {tiered}");
    let downloaded = metric(&server, "sluice_tier_download_bytes_total");
    assert!(server.read_all(&paths[0]).0 == keep, "the tiered survivor differs after compaction");
    assert!(metric(&server, "sluice_tier_download_bytes_total") - downloaded >= tiered, "read from the store");
    assert_eq!(metric(&server, "sluice_tier_download_errors_total"), 0.0);
    // A restart maps the tiered bytes through the newest manifest (a compaction's).
    server.restart_after_kill();
    assert!(server.read_all(&paths[0]).0 == keep, "the tiered survivor differs after a restart");
}
