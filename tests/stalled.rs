//! Readers that stop reading: an SSE reader of a stream still being
//! appended to, and a pipelined catch-up reader, whose sockets take no
//! bytes, are cut off once they have taken nothing for `--idle-timeout`, as
//! the client sees it (its socket is no longer established: a close whose
//! FIN waits behind unsent bytes does not count), and hold a bounded amount
//! of server memory meanwhile. Against the real binary; the client sockets
//! have a tiny receive buffer so the kernel's buffers fill at once.

mod common;

use common::{build, Server};
use socket2::{Domain, Socket, Type};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const IDLE: Duration = Duration::from_secs(2);
const MAX_READ: u64 = 1 << 20;
/// `tcpi_state` of an established connection (linux/tcp_states.h).
const TCP_ESTABLISHED: u8 = 1;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).expect("VmRSS value")
}

/// Whether the client's socket is still established: the server has
/// neither reset it nor sent its FIN (a client that never reads sees
/// nothing else).
fn established(tcp: &std::net::TcpStream) -> bool {
    let mut info = std::mem::MaybeUninit::<libc::tcp_info>::zeroed();
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: TCP_INFO fills at most `len` bytes of the struct we own.
    let r = unsafe {
        libc::getsockopt(tcp.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, info.as_mut_ptr().cast(), &mut len)
    };
    assert_eq!(r, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    // SAFETY: getsockopt succeeded and zeroed memory is a valid tcp_info.
    unsafe { info.assume_init() }.tcpi_state == TCP_ESTABLISHED
}

/// A connection that sends `requests` and never reads, with a receive
/// buffer as small as the kernel allows.
fn stalled(s: &Server, requests: &[u8]) -> std::net::TcpStream {
    let sock = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    sock.set_recv_buffer_size(1024).unwrap();
    sock.connect(&s.addr.into()).unwrap();
    let mut tcp: std::net::TcpStream = sock.into();
    tcp.write_all(requests).unwrap();
    tcp
}

#[test]
fn readers_that_take_no_bytes_are_closed_after_the_idle_timeout() {
    let s = Server::start_with(&["--idle-timeout", "2s", "--max-read-bytes", "1MiB", "--sse-reconnect", "1h"]);
    let p = "/v1/stream/stall";
    s.create(p, "application/octet-stream");
    let chunk = vec![b'q'; 256 << 10];
    for _ in 0..16 {
        s.post(p, "application/octet-stream", &chunk).expect(204);
    }
    // Appends continue throughout, so live readers always have more to send.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (stop, addr) = (stop.clone(), s.addr);
        std::thread::spawn(move || {
            let mut c = common::Conn::open(addr);
            while !stop.load(Ordering::Relaxed) {
                let r =
                    c.request("POST", "/v1/stream/stall", &[("Content-Type", "application/octet-stream")], &[7; 4096]);
                assert_eq!(r.status, 204);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let before = rss_kib(s.pid());
    let n = 16;
    let sse = build("GET", &format!("{p}?offset=-1&live=sse"), &[], b"");
    let get = build("GET", &format!("{p}?offset=-1"), &[], b"");
    let start = Instant::now();
    let readers: Vec<_> =
        (0..n).map(|i| if i % 2 == 0 { stalled(&s, &sse) } else { stalled(&s, &get.repeat(8)) }).collect();
    std::thread::sleep(Duration::from_millis(1500));
    // Each holds at most one read (and its SSE encoding) while it waits.
    let grown_kib = rss_kib(s.pid()).saturating_sub(before);
    let bound_kib = n * 3 * MAX_READ / 1024 + 32 * 1024;
    assert!(grown_kib < bound_kib, "{n} stalled readers grew the server by {grown_kib} KiB (bound {bound_kib})");
    // Closed within the idle timeout and some slack, while appends go on.
    let slack = Duration::from_secs(6);
    let open = || readers.iter().filter(|r| established(r)).count();
    while open() > 0 && start.elapsed() < IDLE + slack {
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(open(), 0, "readers that take no bytes still connected after {took:?} (--idle-timeout {IDLE:?})");
    assert!(took >= IDLE, "closed after {took:?}, before the idle timeout");
    drop(readers);
    s.get("/v1/healthz").expect(200);
}
