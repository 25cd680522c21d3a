//! SSE subscribers for fan-out: `threads` std threads, each with an epoll
//! instance and a share of the subscriber sockets. Every subscriber sends one
//! `GET ...?offset=now&live=sse`, then parses the event stream; each message
//! timestamp found in a `data` event yields one publish-to-receive latency,
//! taken against the clock read right after the `read(2)` that delivered it.

use crate::poll::{Poller, BROKEN, READABLE};
use crate::progress::Progress;
use crate::response::{Part, ResponseReader};
use crate::sse::{timestamps, SseParser};
use crate::stats::{self, Tally};
use hdrhistogram::Histogram;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct SubPlan {
    pub addr: SocketAddr,
    pub subscribers: usize,
    pub threads: usize,
    /// The subscribe request, sent once per connection.
    pub request: Vec<u8>,
    /// Origin of the embedded timestamps.
    pub base: Instant,
}

/// Coordination with the fan-out orchestrator.
pub struct Shared {
    /// Subscribers that got their first control event (subscribed at the tail).
    pub ready: AtomicUsize,
    /// Set to end the run.
    pub stop: AtomicBool,
    /// Messages sent before this (ns since `base`) are counted, not timed.
    pub record_from_ns: AtomicU64,
}

impl Shared {
    pub fn new() -> Shared {
        Shared { ready: AtomicUsize::new(0), stop: AtomicBool::new(false), record_from_ns: AtomicU64::new(u64::MAX) }
    }
}

#[derive(Clone)]
pub struct SubResult {
    pub hist: Histogram<u64>,
    /// Message timestamps received, over all subscribers.
    pub received: u64,
    pub data_events: u64,
    pub control_events: u64,
    /// Subscribe responses by status, plus connect/read failures.
    pub tally: Tally,
    /// Subscriptions that ended (server closed) before the run did.
    pub ended_early: usize,
}

impl SubResult {
    fn new() -> SubResult {
        SubResult {
            hist: stats::histogram(),
            received: 0,
            data_events: 0,
            control_events: 0,
            tally: Tally::default(),
            ended_early: 0,
        }
    }

    fn merge(&mut self, o: &SubResult) {
        self.hist.add(&o.hist).expect("same bounds");
        self.received += o.received;
        self.data_events += o.data_events;
        self.control_events += o.control_events;
        self.tally.merge(&o.tally);
        self.ended_early += o.ended_early;
    }
}

struct Sub {
    sock: Option<TcpStream>,
    reader: ResponseReader,
    sse: SseParser,
    announced: bool,
}

/// Runs until `shared.stop` is set.
pub fn run(plan: &SubPlan, shared: &Shared, progress: &Arc<Progress>) -> SubResult {
    let parts: Vec<SubResult> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..plan.threads)
            .map(|t| {
                let progress = progress.clone();
                scope.spawn(move || worker(plan, t, shared, &progress))
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("subscriber thread panicked")).collect()
    });
    let mut out = SubResult::new();
    for p in &parts {
        out.merge(p);
    }
    out
}

fn worker(plan: &SubPlan, t: usize, shared: &Shared, progress: &Progress) -> SubResult {
    let mut res = SubResult::new();
    let count = (t..plan.subscribers).step_by(plan.threads).count();
    let mut poller = Poller::new(count.min(4096)).expect("epoll_create1");
    let mut subs: Vec<Sub> = Vec::with_capacity(count);
    for token in 0..count {
        let mut sub = Sub { sock: None, reader: ResponseReader::new(), sse: SseParser::new(), announced: false };
        match subscribe(plan, &poller, token) {
            Ok(s) => sub.sock = Some(s),
            Err(_) => res.tally.io_errors += 1,
        }
        subs.push(sub);
    }
    let mut rbuf = vec![0u8; 256 * 1024];
    while !shared.stop.load(Ordering::Relaxed) {
        let n = poller.wait(Duration::from_millis(20)).expect("epoll_wait");
        for i in 0..n {
            let (token, ev) = poller.event(i);
            if ev & (READABLE | BROKEN) == 0 {
                continue;
            }
            let sub = &mut subs[token];
            let Some(sock) = sub.sock.as_mut() else { continue };
            let got = match sock.read(&mut rbuf) {
                Ok(0) => None,
                Ok(n) => Some(n),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) => continue,
                Err(_) => {
                    res.tally.io_errors += 1;
                    None
                }
            };
            let Some(n) = got else {
                poller.remove(sock.as_raw_fd());
                sub.sock = None;
                res.ended_early += 1;
                continue;
            };
            let now_ns = plan.base.elapsed().as_nanos() as u64;
            let record_from = shared.record_from_ns.load(Ordering::Relaxed);
            let mut status = 0;
            let mut found = 0u64;
            let (hist, sse) = (&mut res.hist, &mut sub.sse);
            let fed = sub.reader.feed(&rbuf[..n], &mut |p| match p {
                Part::Head(h) => status = h.status,
                Part::Body(b) => sse.feed(b, &mut |data| {
                    timestamps(data, |ts| {
                        found += 1;
                        if ts >= record_from {
                            stats::record(hist, now_ns.saturating_sub(ts));
                        }
                    })
                }),
            });
            if status != 0 {
                res.tally.status(status);
            }
            res.received += found;
            progress.done[t].add(found);
            if !sub.announced && sub.sse.control_events > 0 {
                sub.announced = true;
                shared.ready.fetch_add(1, Ordering::Relaxed);
            }
            if fed.is_err() || sub.reader.is_done() {
                // Malformed, or a non-streaming answer (an error status).
                progress.errors[t].add(1);
                poller.remove(sock.as_raw_fd());
                sub.sock = None;
                res.ended_early += 1;
            }
        }
    }
    for s in &subs {
        res.data_events += s.sse.data_events;
        res.control_events += s.sse.control_events;
    }
    res
}

fn subscribe(plan: &SubPlan, poller: &Poller, token: usize) -> io::Result<TcpStream> {
    let mut s = TcpStream::connect_timeout(&plan.addr, Duration::from_secs(5))?;
    s.set_nodelay(true)?;
    s.write_all(&plan.request)?;
    s.set_nonblocking(true)?;
    poller.add(s.as_raw_fd(), READABLE, token)?;
    Ok(s)
}
