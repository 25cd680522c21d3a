//! Webhook delivery threads: a small pool off the shard cores takes jobs
//! from every shard over one crossbeam channel, POSTs each signed
//! notification with a blocking HTTPS client (ureq on rustls; redirects
//! never followed; resolved addresses checked against the SSRF rules) and
//! sends the outcome back to the shard that owns the subscription. A slow
//! or dead receiver holds one of these threads, never a shard.

use super::bounds::{
    DELIVERY_THREADS, MAX_QUEUED_DELIVERIES, MAX_WEBHOOK_RESPONSE_BYTES, WEBHOOK_CONNECT_TIMEOUT, WEBHOOK_TIMEOUT,
};
use super::signing::Keys;
use super::target;
use crossbeam_channel::{bounded, unbounded, Receiver, Sender, TrySendError};
use std::io::Read;
use std::sync::Arc;

/// One notification to send.
pub struct Job {
    pub shard: usize,
    pub id: String,
    pub incarnation: u64,
    pub generation: u64,
    pub url: String,
    pub body: Vec<u8>,
}

/// How a delivery went: `Ok(done)` on a 2xx (with `done` from its JSON
/// body), `Err(reason)` otherwise.
pub struct Outcome {
    pub id: String,
    pub incarnation: u64,
    pub generation: u64,
    pub result: Result<bool, DeliveryError>,
}

sluice_shards::core::line_error! {
    /// Why a webhook delivery failed: its receiver's answer, or the
    /// transport (logged with the retry).
    pub struct DeliveryError;
}

/// A shard's ends of the delivery pool.
pub struct Link {
    jobs: Sender<Job>,
    pub outcomes: Receiver<Outcome>,
}

impl Link {
    /// Queues a job; false when the queue is full (the caller retries later).
    pub fn submit(&self, job: Job) -> bool {
        match self.jobs.try_send(job) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }
}

/// Starts the pool (from the main thread, so its threads are not pinned to
/// a shard's core) and returns one link per shard.
pub fn start(shards: usize, keys: Arc<Keys>, allow_local: bool) -> Vec<Link> {
    let (jobs, queue) = bounded::<Job>(MAX_QUEUED_DELIVERIES);
    let mut replies = Vec::with_capacity(shards);
    let mut links = Vec::with_capacity(shards);
    for _ in 0..shards {
        let (tx, rx) = unbounded();
        replies.push(tx);
        links.push(Link { jobs: jobs.clone(), outcomes: rx });
    }
    let agent = ureq::AgentBuilder::new()
        .timeout_connect(WEBHOOK_CONNECT_TIMEOUT)
        .timeout(WEBHOOK_TIMEOUT)
        .redirects(0)
        .user_agent(concat!("sluice/", env!("CARGO_PKG_VERSION")))
        .resolver(move |netloc: &str| target::resolve(netloc, allow_local))
        .build();
    for i in 0..DELIVERY_THREADS {
        let (queue, replies, keys, agent) = (queue.clone(), replies.clone(), keys.clone(), agent.clone());
        std::thread::Builder::new()
            .name(format!("webhooks-{i}"))
            .spawn(move || {
                while let Ok(job) = queue.recv() {
                    let result = post(&agent, &keys, &job);
                    let outcome =
                        Outcome { id: job.id, incarnation: job.incarnation, generation: job.generation, result };
                    // A stopped shard no longer listens: nothing to tell.
                    let _ = replies[job.shard].send(outcome);
                }
            })
            .expect("cannot start a webhook delivery thread");
    }
    links
}

fn post(agent: &ureq::Agent, keys: &Keys, job: &Job) -> Result<bool, DeliveryError> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let response = agent
        .post(&job.url)
        .set("content-type", "application/json")
        .set("webhook-signature", &keys.sign(&job.body, now))
        .send_bytes(&job.body)
        .map_err(|e| match e {
            ureq::Error::Status(code, _) => DeliveryError(format!("receiver answered {code}")),
            ureq::Error::Transport(t) => DeliveryError(format!("transport: {t}")),
        })?;
    if !(200..300).contains(&response.status()) {
        return Err(DeliveryError(format!("receiver answered {} (redirects are not followed)", response.status())));
    }
    let mut text = String::new();
    // A body that is not JSON (or too long) just means "not done".
    let _ = response.into_reader().take(MAX_WEBHOOK_RESPONSE_BYTES).read_to_string(&mut text);
    let done = serde_json::from_str::<serde_json::Value>(&text).is_ok_and(|v| v["done"] == serde_json::json!(true));
    Ok(done)
}
