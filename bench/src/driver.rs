//! The closed-loop engine: `threads` std threads, each owning an epoll
//! instance and a share of `connections` non-blocking keep-alive sockets.
//! Every connection keeps exactly one request in flight: send the
//! pre-rendered bytes, read the response, record its latency, send again.
//! Nothing is allocated per request; latencies go into a per-thread
//! histogram and counts into per-thread tallies, merged when the run ends.

use crate::poll::{Poller, BROKEN, READABLE, WRITABLE};
use crate::progress::Progress;
use crate::response::{Part, ResponseReader};
use crate::stats::{self, Tally};
use hdrhistogram::Histogram;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Supplies each connection's requests.
pub trait Source: Send {
    /// Renders the next request of global connection `conn` into `req`, which
    /// still holds that connection's previous request (empty at first).
    /// Returning false retires the connection.
    fn next(&mut self, conn: usize, req: &mut Vec<u8>) -> bool;
}

/// The same pre-rendered request forever on each connection.
pub struct Fixed(pub Arc<Vec<Vec<u8>>>);

impl Source for Fixed {
    #[inline]
    fn next(&mut self, conn: usize, req: &mut Vec<u8>) -> bool {
        if req.is_empty() {
            req.extend_from_slice(&self.0[conn % self.0.len()]);
        }
        true
    }
}

/// Each connection rotates over every pre-rendered request in turn,
/// connection `c` starting at request `c` (a pooled client: any connection
/// may carry a request for any stream).
pub struct Rotating {
    pub requests: Arc<Vec<Vec<u8>>>,
    /// Requests sent so far per connection of this thread (global index / threads).
    pub sent: Vec<usize>,
    pub threads: usize,
}

impl Source for Rotating {
    #[inline]
    fn next(&mut self, conn: usize, req: &mut Vec<u8>) -> bool {
        let local = conn / self.threads;
        if self.sent.len() <= local {
            self.sent.resize(local + 1, 0);
        }
        let k = self.sent[local];
        self.sent[local] = k + 1;
        req.clear();
        req.extend_from_slice(&self.requests[(conn + k) % self.requests.len()]);
        true
    }
}

pub struct Plan {
    pub addr: SocketAddr,
    pub connections: usize,
    pub threads: usize,
    /// Responses completing before this are not recorded (warm-up).
    pub measure_from: Instant,
    /// Every thread stops here, whatever is in flight.
    pub stop_at: Instant,
}

pub struct Outcome {
    /// Latency of 2xx responses completed in the measured window, in ns.
    pub hist: Histogram<u64>,
    /// Responses completed in the measured window.
    pub measured: Tally,
    /// Every response, warm-up included.
    pub all: Tally,
    /// Connections that could not be (re)opened at the end.
    pub dead: usize,
    /// When the last thread finished (count-bound runs end early).
    pub finished: Instant,
}

impl Outcome {
    /// Seconds of the measured window actually run.
    pub fn measured_secs(&self, plan: &Plan) -> f64 {
        self.finished.min(plan.stop_at).saturating_duration_since(plan.measure_from).as_secs_f64()
    }
}

/// Runs the plan; `sources[t]` feeds thread t, which owns connections
/// t, t + threads, t + 2 threads, ...
pub fn run<S: Source>(plan: &Plan, sources: Vec<S>, progress: &Arc<Progress>) -> Outcome {
    assert_eq!(sources.len(), plan.threads);
    let results: Vec<ThreadResult> = std::thread::scope(|scope| {
        let handles: Vec<_> = sources
            .into_iter()
            .enumerate()
            .map(|(t, source)| {
                let progress = progress.clone();
                scope.spawn(move || worker(plan, t, source, &progress))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("client thread panicked")).collect()
    });
    let mut out = Outcome {
        hist: stats::histogram(),
        measured: Tally::default(),
        all: Tally::default(),
        dead: 0,
        finished: plan.measure_from,
    };
    for r in results {
        out.hist.add(&r.hist).expect("same histogram bounds");
        out.measured.merge(&r.measured);
        out.all.merge(&r.all);
        out.dead += r.dead;
        out.finished = out.finished.max(r.finished);
    }
    out
}

struct Conn {
    id: usize,
    sock: Option<TcpStream>,
    req: Vec<u8>,
    written: usize,
    sent: Instant,
    reader: ResponseReader,
    status: u16,
    done: bool,
}

struct ThreadResult {
    hist: Histogram<u64>,
    measured: Tally,
    all: Tally,
    dead: usize,
    finished: Instant,
}

struct Worker<'a, S: Source> {
    plan: &'a Plan,
    t: usize,
    source: S,
    poller: Poller,
    progress: &'a Progress,
    res: ThreadResult,
    live: usize,
    /// Some connection lost its socket and waits to reconnect.
    any_dead: bool,
}

fn worker<S: Source>(plan: &Plan, t: usize, source: S, progress: &Progress) -> ThreadResult {
    let ids: Vec<usize> = (t..plan.connections).step_by(plan.threads).collect();
    let mut conns: Vec<Conn> = ids
        .iter()
        .map(|&id| Conn {
            id,
            sock: None,
            req: Vec::with_capacity(512),
            written: 0,
            sent: Instant::now(),
            reader: ResponseReader::new(),
            status: 0,
            done: false,
        })
        .collect();
    let mut w = Worker {
        plan,
        t,
        source,
        poller: Poller::new(conns.len().min(4096)).expect("epoll_create1"),
        progress,
        res: ThreadResult {
            hist: stats::histogram(),
            measured: Tally::default(),
            all: Tally::default(),
            dead: 0,
            finished: Instant::now(),
        },
        live: conns.len(),
        any_dead: false,
    };
    for (token, c) in conns.iter_mut().enumerate() {
        if !w.source.next(c.id, &mut c.req) {
            c.done = true;
            w.live -= 1;
            continue;
        }
        w.open(token, c);
    }
    let mut rbuf = vec![0u8; 64 * 1024];
    let mut last_retry = Instant::now();
    while w.live > 0 {
        let now = Instant::now();
        if now >= plan.stop_at {
            break;
        }
        if w.any_dead && now.duration_since(last_retry) >= Duration::from_millis(100) {
            last_retry = now;
            w.any_dead = false;
            for (token, c) in conns.iter_mut().enumerate() {
                if !c.done && c.sock.is_none() {
                    w.open(token, c);
                }
            }
        }
        let timeout = (plan.stop_at - now).min(Duration::from_millis(50));
        let n = w.poller.wait(timeout).expect("epoll_wait");
        for i in 0..n {
            let (token, ev) = w.poller.event(i);
            let c = &mut conns[token];
            if c.sock.is_none() || c.done {
                continue;
            }
            if ev & WRITABLE != 0 && c.written < c.req.len() {
                w.flush(token, c);
            }
            if ev & (READABLE | BROKEN) != 0 && c.sock.is_some() {
                w.on_readable(token, c, &mut rbuf);
            }
        }
    }
    w.res.finished = Instant::now();
    w.res.dead = conns.iter().filter(|c| !c.done && c.sock.is_none()).count();
    w.res
}

impl<S: Source> Worker<'_, S> {
    /// Connects (blocking: loopback connects are immediate) and sends the
    /// connection's current request.
    fn open(&mut self, token: usize, c: &mut Conn) {
        let sock = match TcpStream::connect_timeout(&self.plan.addr, Duration::from_secs(2)) {
            Ok(s) => s,
            Err(_) => {
                self.res.all.io_errors += 1;
                self.any_dead = true;
                return;
            }
        };
        let _ = sock.set_nodelay(true);
        if sock.set_nonblocking(true).is_err() || self.poller.add(sock.as_raw_fd(), READABLE, token).is_err() {
            self.res.all.io_errors += 1;
            self.any_dead = true;
            return;
        }
        c.sock = Some(sock);
        c.reader.reset();
        self.send(token, c);
    }

    fn send(&mut self, token: usize, c: &mut Conn) {
        c.written = 0;
        c.sent = Instant::now();
        self.flush(token, c);
    }

    /// Writes what remains of the request; waits for writability if the
    /// socket buffer is full.
    fn flush(&mut self, token: usize, c: &mut Conn) {
        let Some(sock) = c.sock.as_mut() else { return };
        let was_blocked = c.written > 0;
        while c.written < c.req.len() {
            match sock.write(&c.req[c.written..]) {
                Ok(n) => c.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let _ = self.poller.modify(sock.as_raw_fd(), READABLE | WRITABLE, token);
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.fail(c);
                    return;
                }
            }
        }
        if was_blocked {
            let _ = self.poller.modify(sock.as_raw_fd(), READABLE, token);
        }
    }

    fn on_readable(&mut self, token: usize, c: &mut Conn, rbuf: &mut [u8]) {
        let Some(sock) = c.sock.as_mut() else { return };
        let n = match sock.read(rbuf) {
            Ok(0) => {
                if c.reader.until_close() {
                    self.complete(token, c, true);
                } else {
                    self.fail(c);
                }
                return;
            }
            Ok(n) => n,
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => return,
            Err(_) => {
                self.fail(c);
                return;
            }
        };
        let mut status = c.status;
        let fed = c.reader.feed(&rbuf[..n], &mut |p| {
            if let Part::Head(h) = p {
                status = h.status;
            }
        });
        c.status = status;
        match fed {
            Err(_) => self.fail(c),
            Ok(_) if c.reader.is_done() => self.complete(token, c, false),
            Ok(_) => {}
        }
    }

    /// A whole response arrived: record it and send the next request.
    fn complete(&mut self, token: usize, c: &mut Conn, closed: bool) {
        let now = Instant::now();
        let ok = (200..300).contains(&c.status);
        self.res.all.status(c.status);
        if now >= self.plan.measure_from && now <= self.plan.stop_at {
            self.res.measured.status(c.status);
            if ok {
                stats::record(&mut self.res.hist, now.duration_since(c.sent).as_nanos() as u64);
            }
        }
        if ok {
            self.progress.done[self.t].add(1);
        } else {
            self.progress.errors[self.t].add(1);
        }
        c.reader.reset();
        c.status = 0;
        if closed {
            self.drop_sock(c);
        }
        if !self.source.next(c.id, &mut c.req) {
            c.done = true;
            self.live -= 1;
            self.drop_sock(c);
            return;
        }
        if c.sock.is_none() {
            self.open(token, c);
        } else {
            self.send(token, c);
        }
    }

    /// The connection broke: count it and reconnect (same request) later.
    fn fail(&mut self, c: &mut Conn) {
        self.res.all.io_errors += 1;
        if Instant::now() >= self.plan.measure_from {
            self.res.measured.io_errors += 1;
        }
        self.progress.errors[self.t].add(1);
        self.drop_sock(c);
        c.reader.reset();
        c.status = 0;
        self.any_dead = true;
    }

    fn drop_sock(&mut self, c: &mut Conn) {
        if let Some(s) = c.sock.take() {
            self.poller.remove(s.as_raw_fd());
        }
    }
}
