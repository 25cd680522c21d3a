//! Two shards of one server and the messages between them, driven step by
//! step in one thread, without sockets (quinn-proto's `tests/util.rs` `Pair`
//! is the model). Both shards run on one glommio executor over stores in a
//! scratch directory, with their real request handling (`forward`, `serve`,
//! the handlers, `relay`) and their real receive path (`shard::on_message`);
//! every message one sends the other is held (`mesh::held`) until the test
//! delivers it, in the order the test picks. Real time passes only while
//! the store's I/O completes: which message arrives when is the test's
//! decision alone.

use crate::auth::Access;
use crate::config::{Cli, Command, Config};
use crate::ctx::Ctx;
use crate::handlers::Reply;
use crate::mesh::envelope::{Delivered, Envelope};
use crate::mesh::held::{Held, InFlight, Outlet};
use crate::mesh::relays::Subscription;
use crate::mesh::{Link, Message};
use crate::{forward, route, serve};
use glommio::{LocalExecutorBuilder, Placement, Task};
use sluice::http::cors::Cors;
use sluice::http::response::Rendered;
use sluice::http::url::parse_target;
use sluice::http::{headers as h, parse_head};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a test waits for a shard to do what it expects (its store's
/// I/O) before it fails.
const PATIENCE: Duration = Duration::from_secs(10);
/// How often a waiting test looks again.
const LOOK: Duration = Duration::from_millis(1);

/// Two shards whose messages to each other are held for the test.
pub struct Pair {
    pub shards: [Rc<Ctx>; 2],
    pub held: Rc<Held>,
}

/// What a request's accepting shard got: what its connection would do next.
pub enum Got {
    /// A whole response, as the wire carries it.
    Response(String),
    /// A relayed SSE read to follow.
    Live(Subscription),
    /// The connection moves to the owner.
    Move,
}

impl Got {
    /// The response's status line code and the whole response; fails on any other answer.
    pub fn response(self) -> (u16, String) {
        let Got::Response(wire) = self else { panic!("a whole response was expected") };
        let status = wire.get(9..12).and_then(|s| s.parse().ok()).expect("a status line");
        (status, wire)
    }
}

/// Runs `test` on two fresh shards, on a glommio executor of this thread,
/// in a scratch directory named by `name` (removed afterwards).
pub fn run<F: Future<Output = ()>>(name: &str, test: impl FnOnce(Rc<Pair>) -> F) {
    let dir = Scratch::new(name);
    let ex = LocalExecutorBuilder::new(Placement::Unbound).make().expect("a glommio executor starts");
    ex.run(async {
        sluice_shards::tick::spawn_reactor_tick();
        test(Pair::open(&dir.0).await).await;
    });
}

impl Pair {
    async fn open(dir: &Path) -> Rc<Pair> {
        let dir = dir.to_str().expect("scratch paths are UTF-8");
        let args = ["sluice", "serve", "--shards", "2", "--data-dir", dir, "--segment-bytes", "1MiB"];
        let cli = <Cli as clap::Parser>::try_parse_from(args).expect("the test configuration parses");
        let Command::Serve(cfg) = cli.command else { unreachable!("serve was asked for") };
        let cfg: Config = *cfg;
        let access = Arc::new(Access::from_config(&cfg).expect("open access"));
        let boots = crate::subscriptions::boot(&cfg.data_dir, 2, false).expect("subscription keys");
        let held = Rc::new(Held::default());
        let mut shards = Vec::new();
        for (id, boot) in boots.into_iter().enumerate() {
            let link = Link::Held(Outlet { from: id, held: held.clone() });
            shards
                .push(crate::shard::detached(id, cfg.clone(), link, access.clone(), boot).await.expect("shard opens"));
        }
        let shards = shards.try_into().unwrap_or_else(|_| unreachable!("two shards"));
        Rc::new(Pair { shards, held })
    }

    /// Starts `raw`, a whole HTTP/1.1 request, on shard `on` as its
    /// connection does: parsed, routed, admitted, and served there or
    /// forwarded to its owner. The task ends with the answer.
    pub fn request(&self, on: usize, raw: &str) -> Task<Got> {
        let ctx = self.shards[on].clone();
        let bytes = raw.as_bytes().to_vec();
        glommio::spawn_local(async move {
            let head = parse_head(&bytes, ctx.cfg.max_head_bytes, ctx.cfg.max_headers).expect("the head parses");
            let body = bytes[head.len..].to_vec();
            let target = parse_target(head.target()).expect("the target parses");
            let route = route::route(&head, &target);
            let cors: Cors = ctx.gate.cors(head.header(h::ORIGIN));
            if let Some(refused) = serve::admit(&ctx, true, &head, &route, &cors) {
                return Got::Response(wire(Rendered::new(refused, false)));
            }
            let started = Instant::now();
            match route.owner(ctx.shards).filter(|&o| o != ctx.id) {
                Some(owner) => match forward::submit(&ctx, owner, bytes[..head.len].to_vec(), body, started).await {
                    Delivered::Response(r) => Got::Response(wire(r)),
                    Delivered::Live(sub) => Got::Live(sub),
                    Delivered::Move => Got::Move,
                },
                None => match serve::respond(&ctx, &head, &target, route, &body).await {
                    Reply::Full(resp) => Got::Response(wire(Rendered::new(resp, false))),
                    Reply::Sse(_) | Reply::Catchup(_) => Got::Move,
                },
            }
        })
    }

    /// The answer of a request task, letting both shards run until it ends.
    pub async fn answer(&self, request: Task<Got>) -> Got {
        let late = async {
            glommio::timer::sleep(PATIENCE).await;
            panic!("a request got no answer (held: {:?})", self.pending());
        };
        futures_lite::future::or(request, late).await
    }

    /// Waits until `done` holds, letting both shards run.
    pub async fn until(&self, what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done() {
            assert!(Instant::now() < deadline, "waited in vain for {what} (held: {:?})", self.pending());
            glommio::timer::sleep(LOOK).await;
        }
    }

    /// The held messages, oldest first, as [`describe`] names them.
    pub fn pending(&self) -> Vec<String> {
        self.held.queue.borrow().iter().map(describe).collect()
    }

    /// Delivers the held message at `i` (0: the oldest) to its shard, and names it.
    pub fn deliver(&self, i: usize) -> String {
        let sent = self.held.queue.borrow_mut().remove(i).expect("a held message at that place");
        let name = describe(&sent);
        crate::shard::on_message(&self.shards[sent.to], sent.msg);
        name
    }

    /// Once a message is held, delivers the oldest, and names it.
    pub async fn step(&self) -> String {
        self.until("a message", || !self.held.queue.borrow().is_empty()).await;
        self.deliver(0)
    }

    /// Once `n` messages are held, names them, oldest first, without delivering any.
    pub async fn sent(&self, n: usize) -> Vec<String> {
        self.until(&format!("{n} messages"), || self.held.queue.borrow().len() >= n).await;
        self.pending()
    }

    /// Closes shard `id` to messages, as a stopping peer is.
    pub fn close(&self, id: usize) {
        self.held.closed.borrow_mut().push(id);
    }
}

/// A held message named as `"0->1 forward"`: sender, receiver, and what
/// it carries (a batch's envelopes joined by `+`, a bucket request's kind).
fn describe(m: &InFlight) -> String {
    let what = match &m.msg {
        Message::Batch { envelopes, .. } => envelopes
            .iter()
            .map(|e| match e {
                Envelope::Forward(_) => "forward",
                Envelope::Answer(_) => "answer",
                Envelope::Event { .. } => "event",
                Envelope::Gone { .. } => "gone",
                Envelope::Leave { .. } => "leave",
            })
            .collect::<Vec<_>>()
            .join("+"),
        Message::Handoff { .. } => "handoff".into(),
        Message::Request { req, .. } => {
            let req = format!("{req:?}");
            format!("request {}", req.split([' ', '(', '{']).next().unwrap_or_default())
        }
        Message::Reply { .. } => "reply".into(),
    };
    format!("{}->{} {what}", m.from, m.to)
}

/// Rendered response bytes as text.
fn wire(r: Rendered) -> String {
    String::from_utf8_lossy(&[r.head.as_slice(), r.body.as_slice()].concat()).into_owned()
}

/// An empty scratch directory for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let d = std::env::temp_dir().join(format!("sluice-pair-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("a scratch directory");
        Scratch(d)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
