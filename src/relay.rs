//! Live SSE fan-out across shards. A subscriber stays on the shard that
//! accepted its connection; the stream's owner runs one pump per stream that
//! reads each new batch once, encodes it once as an SSE event, and sends it
//! once to every shard with subscribers, where every local subscriber writes
//! the same bytes. Only readers of the plain view starting at the tail join a
//! relay; any other SSE read moves its connection to the owner.

use crate::ctx::Ctx;
use crate::edge_limits::RECENT_BYTES;
use crate::handlers::read::SseRequest;
use crate::handlers::read::{read_batch, Limit, View};
use crate::mesh::envelope::Envelope;
use crate::mesh::relays::{Event, Feed, Pump, Subscription};
use crate::outbox::push;
use crate::send::send;
use crate::sse;
use glommio::net::TcpStream;
use sluice::sse_wire::{encode_control, Control};
use sluice_shards::core::cursor::next_cursor;
use sluice_shards::signal::Signal;
use sluice_shards::store::StreamKey;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

/// What the owner answers a forwarded SSE read.
pub enum Start {
    /// Joined the relay: the response head and first control event, and the
    /// offset and stream incarnation the events follow.
    Live { key: Box<StreamKey>, handle: u64, pump: u64, bytes: Vec<u8>, from: u64 },
    /// Not relayable (catch-up, another view, a cursor ahead): move the connection here.
    Move,
}

/// Owner: registers shard `from` for `req`'s live events if the read starts
/// at the tail of the plain view; otherwise asks for the connection.
pub fn join(ctx: &Rc<Ctx>, from: usize, req: SseRequest) -> Start {
    let interval = next_cursor(ctx.now_ms(), None, 0);
    let cursor = next_cursor(ctx.now_ms(), req.cursor.as_deref(), ctx.random());
    let live = ctx.shard.store.borrow().streams.get(&*req.key).and_then(|e| {
        let s = &e.state;
        (s.visible.tail == req.from && !s.visible.closed && !s.deleted).then_some(s.handle)
    });
    let Some(handle) = live.filter(|_| req.view == View::Bytes && !req.limit.exact && cursor == interval) else {
        return Start::Move;
    };
    let Some((mut bytes, _, _)) = sse::start(ctx, &req) else {
        return Start::Move;
    };
    let control = Control { next: req.from, cursor: Some(cursor), up_to_date: true, ..Control::default() };
    encode_control(control, &mut bytes);
    let existing = ctx.relays.pumps.borrow().get(&req.key).filter(|p| p.handle == handle).cloned();
    let pump = existing.unwrap_or_else(|| {
        // A pump of an earlier incarnation of the key sees it was replaced and stops.
        let id = ctx.relays.next_pump.get();
        ctx.relays.next_pump.set(id + 1);
        let pump = Rc::new(Pump {
            id,
            handle,
            pos: Cell::new(req.from),
            subscribers: RefCell::new(vec![0; ctx.shards]),
            cuts: RefCell::default(),
        });
        ctx.relays.pumps.borrow_mut().insert(req.key.clone(), pump.clone());
        // In the mesh queue, not behind this shard's own subscribers: other
        // shards start writing an event while this one still does.
        let task = run_pump(ctx.clone(), req.key.clone(), pump.clone());
        sluice_shards::tasks::spawn_into(task, ctx.mesh_queue).detach();
        pump
    });
    pump.subscribers.borrow_mut()[from] += 1;
    if req.from > pump.pos.get() {
        pump.cuts.borrow_mut().insert(req.from);
    }
    Start::Live { key: req.key, handle, pump: pump.id, bytes, from: req.from }
}

/// Owner: a subscriber on shard `from` of pump `pump` has ended (a pump
/// that has ended since counts nobody: its subscribers were told `Gone`).
pub fn leave(ctx: &Ctx, from: usize, key: &StreamKey, handle: u64, pump: u64) {
    if let Some(p) = ctx.relays.pumps.borrow().get(key).filter(|p| p.handle == handle && p.id == pump) {
        let mut subs = p.subscribers.borrow_mut();
        debug_assert!(subs[from] > 0, "shard {from} leaves pump {pump} more often than it joined");
        subs[from] = subs[from].saturating_sub(1);
    }
}

/// Owner: reads each new batch once and sends its encoded event to every
/// subscribing shard, until none remain or the stream ends.
async fn run_pump(ctx: Rc<Ctx>, key: Box<StreamKey>, pump: Rc<Pump>) {
    let current = |ctx: &Ctx| ctx.relays.pumps.borrow().get(&key).is_some_and(|p| Rc::ptr_eq(p, &pump));
    loop {
        let shards: Vec<usize> =
            pump.subscribers.borrow().iter().enumerate().filter(|(_, n)| **n > 0).map(|(s, _)| s).collect();
        let state =
            ctx.shard.store.borrow_mut().streams.get_mut(&key).filter(|e| e.state.handle == pump.handle).map(|e| {
                let (signal, seen) = e.park();
                let s = &e.state;
                (signal, seen, s.visible.tail, s.visible.closed, s.deleted, s.content_type.clone())
            });
        let live = state.filter(|st| !st.4 && !shards.is_empty() && current(&ctx));
        let Some((signal, seen, tail, closed, _, content_type)) = live else {
            if current(&ctx) {
                ctx.relays.pumps.borrow_mut().remove(&key);
            }
            for s in shards {
                push(&ctx, s, Envelope::Gone { key: key.clone(), handle: pump.handle });
            }
            return;
        };
        let pos = pump.pos.get();
        let event = if tail > pos {
            let cut = pump.cuts.borrow().range(pos + 1..).next().copied().unwrap_or(tail).min(tail);
            let limit = Limit {
                bytes: (cut - pos).min(ctx.cfg.max_read_bytes),
                exact: false,
                whole_json: false,
                records: None,
            };
            let Ok(mut b) = read_batch(&ctx, &key, pos, limit).await else {
                // A failed read (logged by read_batch): the relayed responses
                // end, and their clients resume from their last offsets.
                if current(&ctx) {
                    ctx.relays.pumps.borrow_mut().remove(&key);
                }
                for s in shards {
                    push(&ctx, s, Envelope::Gone { key: key.clone(), handle: pump.handle });
                }
                return;
            };
            let mut bytes = Vec::with_capacity(b.data.len() + 128);
            sse::encode_data(&mut b, View::Bytes, sluice::sse_wire::is_binary(&content_type), &mut bytes);
            let cursor = (!b.closed).then(|| next_cursor(ctx.now_ms(), None, 0));
            encode_control(
                Control { next: b.end, cursor, up_to_date: b.up_to_date, closed: b.closed, records: None },
                &mut bytes,
            );
            Event { from: pos, end: b.end, closed: b.closed, bytes }
        } else if closed {
            let mut bytes = Vec::new();
            encode_control(Control { next: pos, up_to_date: true, closed: true, ..Control::default() }, &mut bytes);
            Event { from: pos, end: pos, closed: true, bytes }
        } else {
            futures_lite::future::or(signal.changed(seen), ctx.stopping.changed(0)).await;
            if ctx.stopping() {
                if current(&ctx) {
                    ctx.relays.pumps.borrow_mut().remove(&key);
                }
                return;
            }
            continue;
        };
        pump.pos.set(event.end);
        pump.cuts.borrow_mut().retain(|c| *c > event.end);
        for &s in &shards {
            let ev = Event { from: event.from, end: event.end, closed: event.closed, bytes: event.bytes.clone() };
            push(&ctx, s, Envelope::Event { key: key.clone(), handle: pump.handle, event: ev });
        }
        if event.closed {
            if current(&ctx) {
                ctx.relays.pumps.borrow_mut().remove(&key);
            }
            return;
        }
    }
}

/// Subscriber shard: a subscriber joins the feed of a remote stream
/// incarnation (counted before any event that follows its answer).
pub fn subscribe(ctx: &Ctx, key: &StreamKey, handle: u64, pump: u64) -> Rc<Feed> {
    let mut feeds = ctx.relays.feeds.borrow_mut();
    let current = |f: &&Rc<Feed>| f.handle == handle && f.pump == pump && !f.gone.get();
    let feed = feeds.get(key).filter(current).cloned().unwrap_or_else(|| {
        // A feed of an earlier incarnation (or pump) keeps serving its own subscribers.
        let feed = Rc::new(Feed {
            handle,
            pump,
            events: RefCell::default(),
            held: Cell::new(0),
            signal: Rc::new(Signal::default()),
            subscribers: Cell::new(0),
            gone: Cell::new(false),
        });
        feeds.insert(key.to_owned(), feed.clone());
        feed
    });
    feed.subscribers.set(feed.subscribers.get() + 1);
    feed
}

/// Subscriber shard: a subscriber of `feed` (stream `key` on `owner`) has ended.
pub fn unsubscribe(ctx: &Rc<Ctx>, owner: usize, key: &StreamKey, feed: &Rc<Feed>) {
    let left = feed.subscribers.get();
    debug_assert!(left > 0, "a relayed subscriber unsubscribes once");
    feed.subscribers.set(left - 1);
    let mut feeds = ctx.relays.feeds.borrow_mut();
    if feed.subscribers.get() == 0 && feeds.get(key).is_some_and(|f| Rc::ptr_eq(f, feed)) {
        feeds.remove(key);
    }
    drop(feeds);
    push(ctx, owner, Envelope::Leave { from: ctx.id, key: key.to_owned(), handle: feed.handle, pump: feed.pump });
}

/// Subscriber shard: an event (None: the end) of a remote stream arrived.
pub fn deliver(ctx: &Ctx, key: &StreamKey, handle: u64, event: Option<Event>) {
    let Some(feed) = ctx.relays.feeds.borrow().get(key).filter(|f| f.handle == handle).cloned() else {
        return;
    };
    match event {
        Some(ev) => {
            let mut events = feed.events.borrow_mut();
            let mut held = feed.held.get() + ev.bytes.len();
            events.push_back(Rc::new(ev));
            while held > RECENT_BYTES && events.len() > 1 {
                held -= events.pop_front().map_or(0, |e| e.bytes.len());
            }
            feed.held.set(held);
        }
        None => feed.gone.set(true),
    }
    feed.signal.notify();
}

/// Subscriber shard: serves one relayed SSE response on its connection.
pub async fn follow(ctx: &Rc<Ctx>, sock: &mut TcpStream, sub: Subscription) {
    stream_events(ctx, sock, &sub.feed, sub.start, sub.from).await;
    unsubscribe(ctx, sub.owner, &sub.key, &sub.feed);
}

async fn stream_events(ctx: &Ctx, sock: &mut TcpStream, feed: &Feed, start: Vec<u8>, mut offset: u64) {
    if !send(sock, &start, ctx.cfg.idle_timeout).await {
        return;
    }
    let _ = sock.set_read_timeout(None);
    let deadline = Instant::now() + ctx.cfg.sse_reconnect;
    let mut out = Vec::new();
    loop {
        let seen = feed.signal.generation();
        // Every kept event from `offset` on, in one write: a subscriber that
        // fell behind catches up with one system call, not one per event.
        let mut ready: Vec<Rc<Event>> = Vec::new();
        {
            let events = feed.events.borrow();
            let mut at = offset;
            for e in events.range(events.partition_point(|e| e.from < offset)..) {
                if e.from != at {
                    break;
                }
                at = e.end;
                ready.push(e.clone());
            }
        }
        if let Some(last) = ready.last().cloned() {
            let bytes = if ready.len() == 1 {
                &last.bytes
            } else {
                out.clear();
                ready.iter().for_each(|e| out.extend_from_slice(&e.bytes));
                &out
            };
            if !send(sock, bytes, ctx.cfg.idle_timeout).await || last.closed {
                return;
            }
            offset = last.end;
            continue;
        }
        // Gone, or fallen behind the kept events: end the response.
        if feed.gone.get() || feed.events.borrow().back().is_some_and(|e| e.end > offset) {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || !sse::wait(ctx, sock, &feed.signal, seen, left).await {
            return;
        }
    }
}
