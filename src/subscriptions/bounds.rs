//! Every bound on subscriptions, named once (PROTOCOL.md sections 6-7 leave
//! them to the server; the README's Subscriptions section lists them), with
//! the relations between them checked at compile time.

use std::time::Duration;

/// Subscriptions one shard owns (ids hash over the shards like streams).
pub const MAX_SUBSCRIPTIONS_PER_SHARD: usize = 100_000;
/// Bytes of a subscription id.
pub const MAX_SUBSCRIPTION_ID_BYTES: usize = 128;
/// Bytes of a `pattern`.
pub const MAX_PATTERN_BYTES: usize = 256;
/// Segments of a `pattern`.
pub const MAX_PATTERN_SEGMENTS: usize = 32;
/// Streams one request may name, and explicit members one subscription may hold.
pub const MAX_EXPLICIT_STREAMS: usize = 1_000;
/// Bytes of a `description`.
pub const MAX_DESCRIPTION_BYTES: usize = 1_024;
/// Bytes of a webhook URL.
pub const MAX_WEBHOOK_URL_BYTES: usize = 2_048;
/// Bytes of a pull-wake worker name.
pub const MAX_WORKER_BYTES: usize = 256;
/// Acks one callback may carry.
pub const MAX_ACKS: usize = 1_000;
/// Bytes of a subscription request body.
pub const MAX_BODY_BYTES: usize = 256 * 1024;

/// `lease_ttl_ms` bounds and default.
pub const MIN_LEASE_TTL_MS: u64 = 1_000;
pub const MAX_LEASE_TTL_MS: u64 = 600_000;
pub const DEFAULT_LEASE_TTL_MS: u64 = 30_000;

/// Webhook retry backoff: first delay, cap, and the jitter (a fraction of the delay, either way).
pub const RETRY_FIRST_MS: u64 = 1_000;
pub const RETRY_MAX_MS: u64 = 60_000;
pub const RETRY_JITTER: f64 = 0.2;

/// One webhook attempt: connect, and the whole exchange.
pub const WEBHOOK_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
pub const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a webhook response read (for `{ "done": true }`).
pub const MAX_WEBHOOK_RESPONSE_BYTES: u64 = 64 * 1024;
/// Threads delivering webhooks (off the shard cores).
pub const DELIVERY_THREADS: usize = 4;
/// Deliveries queued at most per server; past it a wake waits for its retry.
pub const MAX_QUEUED_DELIVERIES: usize = 10_000;

/// How often a shard with deliveries out looks for their outcomes.
pub const OUTCOME_POLL: Duration = Duration::from_millis(2);

const _: () = {
    assert!(MIN_LEASE_TTL_MS <= DEFAULT_LEASE_TTL_MS && DEFAULT_LEASE_TTL_MS <= MAX_LEASE_TTL_MS);
    assert!(RETRY_FIRST_MS <= RETRY_MAX_MS, "the backoff grows up to its cap");
    assert!(RETRY_JITTER >= 0.0 && RETRY_JITTER < 1.0, "a jittered delay stays positive");
    assert!(WEBHOOK_CONNECT_TIMEOUT.as_millis() <= WEBHOOK_TIMEOUT.as_millis(), "the connect is part of the exchange");
    assert!(OUTCOME_POLL.as_millis() < WEBHOOK_TIMEOUT.as_millis(), "outcomes are looked for within an attempt");
    assert!(MAX_PATTERN_SEGMENTS <= MAX_PATTERN_BYTES, "a segment is at least a byte");
    assert!(
        MAX_SUBSCRIPTION_ID_BYTES
            + MAX_PATTERN_BYTES
            + MAX_DESCRIPTION_BYTES
            + MAX_WEBHOOK_URL_BYTES
            + MAX_WORKER_BYTES
            <= MAX_BODY_BYTES,
        "a subscription with every field at its longest fits in a request body"
    );
    assert!(DELIVERY_THREADS >= 1 && MAX_QUEUED_DELIVERIES >= DELIVERY_THREADS, "every delivery thread can be busy");
};
