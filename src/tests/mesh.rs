//! Two shards exchanging requests, answers, bucket messages and relayed SSE
//! events, in an order each test picks (see [`super::pair`]).

use super::pair::{run, Got, Pair};
use sluice_shards::ids::{bucket_shard, stream_shard, BUILTIN_BUCKET};
use sluice_shards::store::StreamKey;

/// A stream id of the base surface whose owner is shard `owner`.
fn owned_by(owner: usize, prefix: &str) -> String {
    (0..).map(|i| format!("{prefix}-{i}")).find(|s| stream_shard(BUILTIN_BUCKET, s, 2) == owner).expect("some id")
}

/// A bucket id whose home is shard `home`.
fn homed_on(home: usize, prefix: &str) -> String {
    (0..).map(|i| format!("{prefix}-{i}")).find(|b| bucket_shard(b, 2) == home).expect("some id")
}

fn key(stream: &str) -> Box<StreamKey> {
    StreamKey::boxed(BUILTIN_BUCKET, stream)
}

fn create(stream: &str) -> String {
    format!("PUT /v1/stream/{stream} HTTP/1.1\r\nContent-Type: text/plain\r\n\r\n")
}

fn append(stream: &str, seq: Option<&str>, body: &str) -> String {
    let seq = seq.map_or(String::new(), |s| format!("Stream-Seq: {s}\r\n"));
    format!(
        "POST /v1/stream/{stream} HTTP/1.1\r\nContent-Type: text/plain\r\n{seq}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn read(stream: &str) -> String {
    format!("GET /v1/stream/{stream}?offset=-1 HTTP/1.1\r\n\r\n")
}

/// The response to `raw` started on shard `on`, with no message delivered
/// on its way (it is served there, or its peer is closed).
async fn undelivered(p: &Pair, on: usize, raw: &str) -> (u16, String) {
    p.answer(p.request(on, raw)).await.response()
}

/// The visible tail of `stream` on shard `on` (`None`: not there).
fn tail(p: &Pair, on: usize, stream: &str) -> Option<u64> {
    p.shards[on].shard.store.borrow().streams.get(&*key(stream)).map(|e| e.state.visible.tail)
}

/// Subscribers per shard of the owner's pump for `stream`.
fn pumped(p: &Pair, owner: usize, stream: &str) -> Option<Vec<usize>> {
    p.shards[owner].relays.pumps.borrow().get(&key(stream)).map(|pump| pump.subscribers.borrow().clone())
}

/// Subscribers of the feed of `stream` on shard `on`.
fn fed(p: &Pair, on: usize, stream: &str) -> Option<usize> {
    p.shards[on].relays.feeds.borrow().get(&key(stream)).map(|f| f.subscribers.get())
}

#[test]
fn a_forwarded_append_and_read_are_served_by_the_owner() {
    run("forward", |p| async move {
        let s = owned_by(1, "fwd");
        let put = p.request(0, &create(&s));
        assert_eq!(p.step().await, "0->1 forward");
        assert_eq!(p.step().await, "1->0 answer");
        assert_eq!(p.answer(put).await.response().0, 201);
        let post = p.request(0, &append(&s, None, "hello"));
        assert_eq!(p.step().await, "0->1 forward");
        assert_eq!(p.step().await, "1->0 answer");
        assert_eq!(p.answer(post).await.response().0, 204);
        assert_eq!(tail(&p, 1, &s), Some(5), "the owner holds the bytes");
        assert_eq!(tail(&p, 0, &s), None, "the accepting shard holds nothing");
        let get = p.request(0, &read(&s));
        assert_eq!(p.step().await, "0->1 forward");
        assert_eq!(p.step().await, "1->0 answer");
        let (status, wire) = p.answer(get).await.response();
        assert_eq!(status, 200);
        assert!(wire.ends_with("\r\n\r\nhello"), "{wire}");
        // Served where it lives, the same read sends nothing.
        let (status, wire) = undelivered(&p, 1, &read(&s)).await;
        assert_eq!((status, wire.ends_with("hello")), (200, true));
        assert!(p.pending().is_empty());
    });
}

#[test]
fn forwarded_appends_delivered_out_of_order_are_decided_in_arrival_order() {
    run("reorder", |p| async move {
        let s = owned_by(1, "seq");
        assert_eq!(undelivered(&p, 1, &create(&s)).await.0, 201);
        let first = p.request(0, &append(&s, Some("0001"), "a"));
        assert_eq!(p.sent(1).await, ["0->1 forward"]);
        let second = p.request(0, &append(&s, Some("0002"), "b"));
        assert_eq!(p.sent(2).await, ["0->1 forward", "0->1 forward"]);
        // The later request reaches the owner first.
        assert_eq!(p.deliver(1), "0->1 forward");
        assert_eq!(p.sent(2).await, ["0->1 forward", "1->0 answer"]);
        assert_eq!(p.deliver(1), "1->0 answer");
        assert_eq!(p.deliver(0), "0->1 forward");
        assert_eq!(p.step().await, "1->0 answer");
        assert_eq!(p.answer(second).await.response().0, 204);
        assert_eq!(p.answer(first).await.response().0, 409, "Stream-Seq 0001 after 0002 conflicts");
        assert_eq!(tail(&p, 1, &s), Some(1));
    });
}

#[test]
fn an_answer_after_the_requester_gave_up_is_let_go() {
    run("gave-up", |p| async move {
        let s = owned_by(1, "late");
        assert_eq!(undelivered(&p, 1, &create(&s)).await.0, 201);
        let post = p.request(0, &append(&s, None, "kept"));
        assert_eq!(p.step().await, "0->1 forward");
        assert_eq!(p.sent(1).await, ["1->0 answer"]);
        post.cancel().await;
        assert_eq!(p.deliver(0), "1->0 answer");
        assert_eq!(tail(&p, 1, &s), Some(4), "the append stands though nobody reads its answer");
        let (status, wire) = undelivered(&p, 1, &read(&s)).await;
        assert_eq!((status, wire.ends_with("kept")), (200, true));
        assert!(p.pending().is_empty());
    });
}

#[test]
fn a_bucket_request_is_answered_by_its_home_shard() {
    run("bucket", |p| async move {
        let b = homed_on(1, "bkt");
        let put = p.request(0, &format!("PUT /{b} HTTP/1.1\r\n\r\n"));
        assert_eq!(p.step().await, "0->1 request Create");
        // The home logs the bucket and tells every shard before it answers.
        assert_eq!(p.step().await, "1->0 request Added");
        assert_eq!(p.step().await, "0->1 reply");
        assert_eq!(p.step().await, "1->0 reply");
        assert_eq!(p.answer(put).await.response().0, 201);
        for shard in &p.shards {
            assert!(shard.shard.store.borrow().bucket_exists(&b), "shard {} knows the bucket", shard.id);
        }
        let again = p.request(0, &format!("PUT /{b} HTTP/1.1\r\n\r\n"));
        assert_eq!(p.step().await, "0->1 request Create");
        assert_eq!(p.step().await, "1->0 reply");
        assert_eq!(p.answer(again).await.response().0, 409);
        let get = p.request(0, &format!("GET /{b} HTTP/1.1\r\n\r\n"));
        assert_eq!(p.step().await, "0->1 request Count");
        assert_eq!(p.step().await, "1->0 reply");
        let (status, wire) = p.answer(get).await.response();
        assert_eq!(status, 200);
        assert!(wire.contains("\"streams\":0"), "{wire}");
    });
}

#[test]
fn a_request_to_a_stopping_peer_is_answered_unavailable() {
    run("stopping", |p| async move {
        p.close(1);
        let b = homed_on(1, "gone");
        assert_eq!(undelivered(&p, 0, &format!("PUT /{b} HTTP/1.1\r\n\r\n")).await.0, 503);
        let s = owned_by(1, "gone");
        assert_eq!(undelivered(&p, 0, &create(&s)).await.0, 503);
        assert!(p.pending().is_empty());
        assert_eq!(tail(&p, 1, &s), None);
    });
}

#[test]
fn a_relayed_sse_subscriber_joins_receives_and_leaves() {
    run("relay", |p| async move {
        let s = owned_by(1, "sse");
        assert_eq!(undelivered(&p, 1, &create(&s)).await.0, 201);
        let read = p.request(0, &format!("GET /v1/stream/{s}?offset=-1&live=sse HTTP/1.1\r\n\r\n"));
        assert_eq!(p.step().await, "0->1 forward");
        assert_eq!(p.sent(1).await, ["1->0 answer"]);
        assert_eq!(pumped(&p, 1, &s), Some(vec![1, 0]), "the owner counts shard 0's subscriber");
        assert_eq!(p.deliver(0), "1->0 answer");
        let Got::Live(sub) = p.answer(read).await else { panic!("a relayed read") };
        assert_eq!(fed(&p, 0, &s), Some(1));
        assert_eq!(undelivered(&p, 1, &append(&s, None, "ping")).await.0, 204);
        assert_eq!(p.step().await, "1->0 event");
        let event = sub.feed.events.borrow().back().cloned().expect("the event arrived");
        assert_eq!((event.from, event.end), (0, 4));
        assert!(String::from_utf8_lossy(&event.bytes).contains("data:ping"), "{:?}", event.bytes);
        crate::relay::unsubscribe(&p.shards[0], sub.owner, &sub.key, &sub.feed);
        assert_eq!(fed(&p, 0, &s), None, "the last subscriber's feed is gone");
        assert_eq!(p.step().await, "0->1 leave");
        assert_eq!(pumped(&p, 1, &s), Some(vec![0, 0]), "the owner counts nobody");
        // Its next append ends the pump, which sends nothing.
        assert_eq!(undelivered(&p, 1, &append(&s, None, "pong")).await.0, 204);
        p.until("the pump ends", || pumped(&p, 1, &s).is_none()).await;
        assert!(p.pending().is_empty());
    });
}

#[test]
fn a_live_answer_after_the_subscriber_gave_up_leaves_the_owner_again() {
    run("relay-late", |p| async move {
        let s = owned_by(1, "sse-late");
        assert_eq!(undelivered(&p, 1, &create(&s)).await.0, 201);
        let read = p.request(0, &format!("GET /v1/stream/{s}?offset=-1&live=sse HTTP/1.1\r\n\r\n"));
        assert_eq!(p.step().await, "0->1 forward");
        assert_eq!(p.sent(1).await, ["1->0 answer"]);
        assert_eq!(pumped(&p, 1, &s), Some(vec![1, 0]));
        read.cancel().await;
        assert_eq!(p.deliver(0), "1->0 answer");
        assert_eq!(fed(&p, 0, &s), None, "nobody follows the feed");
        assert_eq!(p.step().await, "0->1 leave");
        assert_eq!(pumped(&p, 1, &s), Some(vec![0, 0]), "the owner counts nobody");
        // The stream's next append reaches no shard, and ends the pump.
        assert_eq!(undelivered(&p, 1, &append(&s, None, "x")).await.0, 204);
        p.until("the pump ends", || pumped(&p, 1, &s).is_none()).await;
        assert!(p.pending().is_empty());
    });
}
