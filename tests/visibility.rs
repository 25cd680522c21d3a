//! Readers and error responses observe only durable state (issue 13.3).
//!
//! Each test makes one change while a ballast writer keeps the shard's group
//! commit busy (so the change's record waits in memory behind an in-flight
//! write + fdatasync), polls until a reader or a refusal shows the change,
//! SIGKILLs the server at once, restarts it, and checks that what was shown
//! is still there. A server that showed a decided-but-not-durable change
//! loses it in the kill, and the check fails.

mod common;

use common::{offset, Conn, Resp, Server, TempDir};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TEXT: &str = "text/plain";
const BUCKET: &str = "/seen";
/// Ballast append size: its write + fdatasync is the window a decided
/// change waits in.
const BALLAST: usize = 4 << 20;
/// How long a probe may poll before the change counts as never shown.
const PROBE_LIMIT: Duration = Duration::from_secs(20);

/// One shard (so the ballast shares the change's log) with room for the
/// ballast, in its own data dir (removed when the `TempDir` drops).
fn server() -> (TempDir, Server) {
    let dir = TempDir::new("visibility");
    let s = Server::start_in(dir.path(), 1, &["--segment-bytes", "16777216"]);
    s.req("PUT", BUCKET, &[], b"").expect(201);
    (dir, s)
}

/// Appends ballast to its own stream until dropped.
struct Ballast {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ballast {
    fn start(s: &Server) -> Ballast {
        let path = format!("{BUCKET}/ballast");
        let made = s.put(&path, TEXT, b"").status;
        assert!(made == 201 || made == 200, "ballast stream: {made}");
        let stop = Arc::new(AtomicBool::new(false));
        let (addr, flag) = (s.addr, stop.clone());
        let thread = std::thread::spawn(move || {
            let mut c = Conn::open(addr);
            let body = vec![b'b'; BALLAST];
            while !flag.load(Ordering::Relaxed) {
                if c.try_request("POST", &path, &[("Content-Type", TEXT)], &body).is_err() {
                    return;
                }
            }
        });
        // Let the ballast's first commit get under way.
        std::thread::sleep(Duration::from_millis(50));
        Ballast { stop, thread: Some(thread) }
    }
}

impl Drop for Ballast {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sends `change` on its own connection (its answer is not awaited), polls
/// `probe` until it returns true, then kills and restarts the server.
fn shown_then_crash(
    s: &mut Server,
    change: (&str, String, Vec<(&str, String)>, Vec<u8>),
    probe: impl Fn(&Server) -> bool,
) {
    let ballast = Ballast::start(s);
    let (method, path, headers, body) = change;
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut writer = Conn::open(s.addr);
    writer.send(&common::build(method, &path, &headers, &body)).expect("send the change");
    let started = Instant::now();
    while !probe(s) {
        assert!(started.elapsed() < PROBE_LIMIT, "{method} {path} was never shown");
    }
    s.kill();
    drop(writer);
    drop(ballast);
    s.start_again();
}

fn head_status(s: &Server, path: &str) -> u16 {
    s.head(path).status
}

#[test]
fn a_created_stream_is_shown_only_once_durable() {
    let (_dir, mut s) = server();
    let p = format!("{BUCKET}/made");
    let change = ("PUT", p.clone(), vec![("Content-Type", TEXT.to_string())], b"first".to_vec());
    shown_then_crash(&mut s, change, |s| head_status(s, &p) == 200);
    let r = s.head(&p).expect(200);
    assert_eq!(r.next_offset(), offset(5), "a reader saw the stream; it must survive a crash");
}

#[test]
fn a_deleted_stream_is_gone_only_once_durable() {
    let (_dir, mut s) = server();
    let p = format!("{BUCKET}/doomed");
    s.put(&p, TEXT, b"x").expect(201);
    shown_then_crash(&mut s, ("DELETE", p.clone(), vec![], vec![]), |s| head_status(s, &p) == 404);
    s.head(&p).expect(404);
}

#[test]
fn attributes_are_shown_only_once_durable() {
    let (_dir, mut s) = server();
    let p = format!("{BUCKET}/named");
    s.put(&p, TEXT, b"x").expect(201);
    let attrs = format!("{p}/attrs");
    let change =
        ("PUT", attrs.clone(), vec![("Content-Type", "application/json".to_string())], br#"{"title":"two"}"#.to_vec());
    shown_then_crash(&mut s, change, |s| s.get(&attrs).json()["title"] == "two");
    assert_eq!(s.get(&attrs).expect(200).json()["title"], "two");
}

#[test]
fn retention_is_shown_only_once_durable() {
    let (_dir, mut s) = server();
    let p = format!("{BUCKET}/kept");
    s.put(&p, TEXT, b"aaa").expect(201);
    s.post(&p, TEXT, b"bbb").expect(204);
    s.req("PUT", &format!("{p}/snapshot/{}", offset(3)), &[("Content-Type", TEXT)], b"AAA").expect(204);
    let change = ("PUT", format!("{p}/retention/{}", offset(3)), vec![], vec![]);
    let read = format!("{p}?offset=-1");
    shown_then_crash(&mut s, change, |s| s.get(&read).body == b"bbb");
    assert_eq!(s.get(&read).expect(200).body, b"bbb");
}

#[test]
fn a_snapshot_is_served_only_once_durable_and_whole() {
    let (_dir, mut s) = server();
    let p = format!("{BUCKET}/snapped");
    s.put(&p, TEXT, b"abc").expect(201);
    let blob: Vec<u8> = (0..(2 << 20)).map(|i| (i % 251) as u8 + 1).collect();
    let snap = format!("{p}/snapshot/{}", offset(3));
    let change = ("PUT", snap.clone(), vec![("Content-Type", "application/x-state".to_string())], blob.clone());
    shown_then_crash(&mut s, change, |s| {
        let r = s.get(&snap);
        if r.status == 200 {
            assert!(r.body == blob, "a snapshot was served before its bytes were written");
        }
        r.status == 200
    });
    assert!(s.get(&snap).expect(200).body == blob, "a served snapshot must survive a crash");
}

#[test]
fn a_refusal_reports_only_a_durable_close() {
    let (_dir, mut s) = server();
    let p = format!("{BUCKET}/shut");
    s.put(&p, TEXT, b"abc").expect(201);
    let change = ("POST", p.clone(), vec![("Stream-Closed", "true".to_string())], vec![]);
    let refused = |s: &Server| -> Resp { s.req("POST", &p, &[("Content-Type", TEXT)], b"late") };
    let reported = std::cell::RefCell::new(String::new());
    shown_then_crash(&mut s, change, |s| {
        let r = refused(s);
        let closed = r.status == 409 && r.header("stream-closed") == Some("true");
        if closed {
            *reported.borrow_mut() = r.next_offset();
        }
        closed
    });
    let r = refused(&s).expect(409);
    assert_eq!(r.h("stream-closed"), "true", "a 409 reported the close; it must survive a crash");
    assert_eq!(r.next_offset(), *reported.borrow(), "the 409 reported a tail a crash took back");
}

/// Whether the bucket listing shows stream `id`.
fn listed(s: &Server, id: &str) -> bool {
    let r = s.get(&format!("{BUCKET}/streams"));
    r.status == 200 && r.json()["streams"].as_array().is_some_and(|a| a.iter().any(|x| x["stream_id"] == id))
}

#[test]
fn a_listing_shows_only_durable_creates_and_deletes() {
    let (_dir, mut s) = server();
    let p = format!("{BUCKET}/listed");
    let change = ("PUT", p.clone(), vec![("Content-Type", TEXT.to_string())], vec![]);
    shown_then_crash(&mut s, change, |s| listed(s, "listed"));
    assert!(listed(&s, "listed"), "a listing showed the stream; it must survive a crash");
    shown_then_crash(&mut s, ("DELETE", p.clone(), vec![], vec![]), |s| !listed(s, "listed"));
    assert!(!listed(&s, "listed"), "a listing dropped the stream; its delete must survive a crash");
}
