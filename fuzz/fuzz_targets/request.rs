//! Whole requests through the real server: the input is a run of pipelined
//! HTTP/1.1 requests. Each is parsed (`parse_head`, `parse_target`), framed
//! (Content-Length or chunked, under the server's limits), routed, admitted
//! and answered by the server's own handlers (`route::route`,
//! `serve::admit`, `serve::respond`, as `conn::serve` calls them) on one real
//! shard whose log lives in a temporary directory (`shard::alone`). One
//! glommio executor and one shard serve every input of a run; the store is
//! flushed every few requests, and after each input every stream and bucket
//! is deleted again.
//!
//! For any input: nothing panics; every response renders as a well-formed
//! HTTP/1.1 response (httparse reads it back: 1xx-5xx status, one
//! Content-Length that frames the body exactly); a 4xx/5xx answer leaves
//! the addressed stream's reader-visible tail and closed state as they were
//! (an expiry in between aside); and no stream's visible tail ever shrinks
//! nor does a closed stream reopen.
#![no_main]

use glommio::{LocalExecutor, LocalExecutorBuilder, Placement};
use libfuzzer_sys::fuzz_target;
use sluice::config::{Cli, Command};
use sluice::ctx::Ctx;
use sluice::handlers::Reply;
use sluice::route::{self, Route};
use sluice::http::chunked::{ChunkedDecoder, BODY_TOO_LARGE};
use sluice::http::request::BodyKind;
use sluice::http::url::parse_target;
use sluice::http::{headers as h, parse_head, Head, HeadError, Method, Response};
use sluice::shard;
use sluice::{config::Config, serve};
use sluice_shards::core::ttl::Lifetime;
use sluice_shards::core::Error;
use sluice_shards::store::StreamKey;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::OnceLock;

/// Flush the store (stream files, checkpoint, journal deletion) after every
/// this many requests of an input, so later requests also read and write
/// streams whose bytes are in stream files.
const FLUSH_EVERY: usize = 4;
/// Scheduler turns a reset waits for fork releases before it calls the
/// shard stuck.
const RELEASE_TURNS: usize = 10_000;

/// The data directory of this process's shard, removed at exit.
static DATA_DIR: OnceLock<PathBuf> = OnceLock::new();

/// Data directories are named this plus the fuzzing process's id.
const DIR_PREFIX: &str = "sluice-fuzz-";

/// Removes the data directories of runs that crashed (a crash skips `atexit`).
fn remove_dead_runs(base: &std::path::Path) {
    for entry in std::fs::read_dir(base).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX));
        if pid.is_some_and(|pid| !std::path::Path::new("/proc").join(pid).exists()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

extern "C" fn remove_data_dir() {
    if let Some(dir) = DATA_DIR.get() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

struct Server {
    ex: LocalExecutor,
    ctx: Rc<Ctx>,
}

thread_local! {
    static SERVER: Server = start();
}

fn start() -> Server {
    let base = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    remove_dead_runs(&base);
    let dir = DATA_DIR.get_or_init(|| base.join(format!("{DIR_PREFIX}{}", std::process::id())));
    let _ = std::fs::remove_dir_all(dir);
    unsafe { libc::atexit(remove_data_dir) };
    let dir = dir.to_str().expect("temporary paths are UTF-8");
    // The server's own defaults, but one shard, small segments (deleted as
    // inputs delete their streams) and the shortest long-poll. The harness
    // flushes every few requests itself; the shard's flusher, whose timing
    // would make inputs replay differently, only steps in for a backlog.
    let args = ["sluice", "serve", "--shards", "1", "--data-dir", dir, "--segment-bytes", "1MiB"];
    let fast = ["--flush-bytes", "1MiB", "--flush-interval", "30s", "--long-poll-timeout", "10ms"];
    let cli = <Cli as clap::Parser>::try_parse_from(args.into_iter().chain(fast)).expect("fuzz configuration parses");
    let Command::Serve(cfg) = cli.command else { unreachable!("serve was asked for") };
    let cfg: Config = *cfg;
    let ex = LocalExecutorBuilder::new(Placement::Unbound).make().expect("glommio executor starts");
    let ctx = ex.run(shard::alone(cfg)).expect("the fuzz shard opens");
    Server { ex, ctx }
}

/// A stream's reader-visible state, as tests observe it.
#[derive(Clone, Copy, Debug)]
struct Seen {
    handle: u64,
    tail: u64,
    closed: bool,
    lifetime: Lifetime,
}

fn observe(ctx: &Ctx, key: &StreamKey) -> Option<Seen> {
    let store = ctx.shard.store.borrow();
    let e = store.streams.get(key).filter(|e| !e.state.deleted)?;
    let s = &e.state;
    Some(Seen { handle: s.handle, tail: s.visible.tail, closed: s.visible.closed, lifetime: s.lifetime })
}

/// Every stream's visible tail and closed state, by handle, never shrinks.
fn check_monotonic(ctx: &Ctx, seen: &mut HashMap<u64, (u64, bool)>) {
    for e in ctx.shard.store.borrow().streams.values() {
        let v = (e.state.visible.tail, e.state.visible.closed);
        if let Some(&(tail, closed)) = seen.get(&e.state.handle) {
            assert!(v.0 >= tail, "stream {} tail shrank from {tail} to {}", e.state.key.stream(), v.0);
            assert!(v.1 || !closed, "stream {} reopened", e.state.key.stream());
        }
        seen.insert(e.state.handle, v);
    }
}

/// Renders `resp` as `conn` does and reads it back as a client would.
fn check_wire(resp: &Response, method: Method, close: bool) {
    let mut out = Vec::new();
    resp.render(&mut out, close);
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut parsed = httparse::Response::new(&mut headers);
    let head_len = match parsed.parse(&out) {
        Ok(httparse::Status::Complete(n)) => n,
        other => panic!("response head does not parse ({other:?}): {:?}", String::from_utf8_lossy(&out)),
    };
    assert_eq!(parsed.version, Some(1), "HTTP/1.1");
    let status = parsed.code.expect("status code");
    assert!((100..600).contains(&status), "status {status}");
    let lengths: Vec<&[u8]> =
        parsed.headers.iter().filter(|x| x.name.eq_ignore_ascii_case("content-length")).map(|x| x.value).collect();
    assert!(lengths.len() <= 1, "several Content-Length headers");
    let body = out.len() - head_len;
    let bodyless = matches!(status, 204 | 304) || status < 200;
    match lengths.first() {
        None => assert!(bodyless && body == 0, "a {status} response without Content-Length"),
        Some(_) if bodyless => panic!("a {status} response with Content-Length"),
        Some(v) => {
            let n: usize = std::str::from_utf8(v).ok().and_then(|v| v.parse().ok()).expect("numeric Content-Length");
            let sent = if method == Method::Head { 0 } else { n };
            assert_eq!(body, sent, "the body does not match its Content-Length");
        }
    }
}

/// How one request ended.
enum Next {
    /// Its bytes were used; the connection goes on unless it asked to close.
    Used(usize),
    /// The connection ends here (refusal, closed-by-request or partial input).
    End,
}

/// The body of a request, framed as `conn` frames it; `Ok(None)` when the
/// input ends before it does.
fn frame_body(ctx: &Ctx, head: &Head, data: &[u8]) -> Result<Option<(Vec<u8>, usize)>, Error> {
    let rest = &data[head.len..];
    match head.body {
        BodyKind::None => Ok(Some((Vec::new(), head.len))),
        BodyKind::Length(n) if n > ctx.cfg.max_body_bytes => Err(BODY_TOO_LARGE),
        BodyKind::Length(n) => {
            Ok((n as usize <= rest.len()).then(|| (rest[..n as usize].to_vec(), head.len + n as usize)))
        }
        BodyKind::Chunked => {
            let mut dec = ChunkedDecoder::new(ctx.cfg.max_body_bytes);
            let mut body = Vec::new();
            let used = dec.feed(rest, &mut body)?;
            Ok(dec.is_done().then_some((body, head.len + used)))
        }
    }
}

/// Serves the request at the start of `data`, checking what it changed.
async fn one_request(ctx: &Rc<Ctx>, data: &[u8], seen: &mut HashMap<u64, (u64, bool)>) -> Next {
    let head = match parse_head(data, ctx.cfg.max_head_bytes, ctx.cfg.max_headers) {
        Ok(head) => head,
        Err(HeadError::Partial) => return Next::End,
        Err(HeadError::Refused(e)) => {
            check_wire(&Response::from(e), Method::Get, true);
            return Next::End;
        }
    };
    let target = match parse_target(head.target()) {
        Ok(t) => t,
        Err(e) => {
            check_wire(&serve::refusal(&head, e), head.method, true);
            return Next::End;
        }
    };
    let route = route::route(&head, &target);
    let cors = ctx.gate.cors(head.header(h::ORIGIN));
    if let Some(answer) = serve::admit(ctx, true, &head, &route, &cors) {
        let close = head.close || head.body != BodyKind::None;
        check_wire(&answer, head.method, close);
        return if close { Next::End } else { Next::Used(head.len) };
    }
    let (body, used) = match frame_body(ctx, &head, data) {
        Ok(Some(framed)) => framed,
        // The connection closed mid-body: `conn` answers 400 and closes.
        Ok(None) => return Next::End,
        Err(e) => {
            check_wire(&serve::refusal(&head, e), head.method, true);
            return Next::End;
        }
    };
    let key = match &route {
        Route::Stream(key, _) => Some(key.clone()),
        _ => None,
    };
    let before = key.as_ref().and_then(|k| observe(ctx, k));
    let reply = serve::respond(ctx, &head, &target, route, &body).await;
    let status = match &reply {
        Reply::Full(resp) => {
            check_wire(resp, head.method, head.close);
            resp.status
        }
        // A live SSE response or a long catch-up starts streaming: nothing more to render here.
        Reply::Sse(_) | Reply::Catchup(_) => 200,
    };
    if let (Some(key), true) = (&key, status >= 400) {
        let after = observe(ctx, key);
        let same = |a: &Seen, b: &Seen| (a.handle, a.tail, a.closed) == (b.handle, b.tail, b.closed);
        match (&before, &after) {
            (Some(b), Some(a)) => assert!(same(b, a), "a {status} changed {key:?}: {b:?} -> {a:?}"),
            (Some(b), None) => assert!(b.lifetime.expired(ctx.now_ms()), "a {status} removed {key:?}"),
            (None, Some(a)) => panic!("a {status} created {key:?}: {a:?}"),
            (None, None) => {}
        }
    }
    check_monotonic(ctx, seen);
    if head.close {
        Next::End
    } else {
        Next::Used(used)
    }
}

/// Has the shard flush (every stream's new bytes into its stream files, then
/// a checkpoint) when the newest stream has unflushed bytes, as a read that
/// needs them does: `flush_through` waits for a flush the shard's own
/// flusher has in progress instead of starting a second one.
async fn flush(ctx: &Ctx) {
    let newest = ctx
        .shard
        .store
        .borrow()
        .streams
        .iter()
        .next_back()
        .map(|(k, e)| (Rc::clone(k), e.state.handle, e.state.tail()));
    if let Some((key, handle, tail)) = newest {
        ctx.shard.flush_through(&key, handle, tail).await.expect("a flush on tmpfs succeeds");
    }
}

/// Deletes every stream and bucket the input made, through the store and
/// the bucket handler, and waits for fork releases to drain the tombstones.
async fn reset(ctx: &Rc<Ctx>, seen: &mut HashMap<u64, (u64, bool)>) {
    let keys: Vec<Rc<StreamKey>> = ctx
        .shard
        .store
        .borrow()
        .streams
        .iter()
        .filter(|(_, e)| !e.state.deleted)
        .map(|(k, _)| Rc::clone(k))
        .collect();
    for key in keys {
        // Refused only for a stream that expired meanwhile (gone already).
        let _ = ctx.shard.delete(&key, ctx.now_ms()).await;
    }
    let mut turns = 0;
    while !ctx.shard.store.borrow().streams.is_empty() {
        turns += 1;
        assert!(turns < RELEASE_TURNS, "tombstones outlive every fork: {:?}", ctx.shard.store.borrow().streams.keys());
        glommio::executor().yield_now().await;
    }
    let buckets: Vec<String> = ctx.shard.store.borrow().buckets.keys().cloned().collect();
    for b in buckets {
        let request = format!("DELETE /{b} HTTP/1.1\r\n\r\n");
        one_request(ctx, request.as_bytes(), seen).await;
        assert!(!ctx.shard.store.borrow().buckets.contains_key(&b), "bucket {b} survives its DELETE");
    }
}

fuzz_target!(|data: &[u8]| {
    SERVER.with(|server| {
        let ctx = &server.ctx;
        server.ex.run(async {
            let mut seen = HashMap::new();
            let mut at = 0;
            for served in 1.. {
                match one_request(ctx, &data[at..], &mut seen).await {
                    Next::Used(used) if used > 0 && at + used < data.len() => at += used,
                    _ => break,
                }
                if served % FLUSH_EVERY == 0 {
                    flush(ctx).await;
                    check_monotonic(ctx, &mut seen);
                }
            }
            reset(ctx, &mut seen).await;
        })
    })
});
