//! One subscription's state and its rules, without I/O or clock (times come
//! in as arguments): the configuration and its hash, stream links with
//! acked and tail offsets, the current wake (generation, wake id, snapshot,
//! holder, lease) and the fencing of callbacks, acks and releases.

use super::bounds::*;
use super::glob;
use super::target;
use sluice_shards::ids::{validate_stream_id, BUILTIN_BUCKET};
use sluice_shards::offset::Offset;
use std::collections::BTreeMap;

/// A refusal: HTTP status, the protocol's error code and a short reason.
#[derive(Debug, PartialEq, Eq)]
pub struct SubError {
    pub status: u16,
    pub code: &'static str,
    pub message: String,
    /// `ALREADY_CLAIMED`: who holds the wake.
    pub holder: Option<String>,
}

impl SubError {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> SubError {
        SubError { status, code, message: message.into(), holder: None }
    }
    pub fn invalid(message: impl Into<String>) -> SubError {
        SubError::new(400, "INVALID_REQUEST", message)
    }
    pub fn not_found() -> SubError {
        SubError::new(404, "SUBSCRIPTION_NOT_FOUND", "subscription not found")
    }
    fn fenced() -> SubError {
        SubError::new(409, "FENCED", "wake id or generation is stale")
    }
    fn offset(message: &str) -> SubError {
        SubError::new(409, "INVALID_OFFSET", message)
    }
}

/// How a subscription wakes its consumer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    Webhook { url: String },
    PullWake { wake_stream: String },
}

/// A subscription's configuration, normalized (its hash decides idempotent re-creation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub delivery: Delivery,
    pub pattern: Option<String>,
    /// Explicit streams, sorted and without duplicates.
    pub streams: Vec<String>,
    pub lease_ttl_ms: u64,
    pub description: Option<String>,
}

/// A stream path relative to `/v1/stream/`, without leading or trailing '/'.
pub fn normalize_path(raw: &str) -> Result<String, SubError> {
    let p = raw.trim_matches('/');
    if p == "__ds" || p.starts_with("__ds/") {
        return Err(SubError::invalid("stream paths under '__ds/' are reserved"));
    }
    validate_stream_id(BUILTIN_BUCKET, p).map_err(|_| SubError::invalid(format!("invalid stream path '{p}'")))?;
    Ok(p.to_string())
}

/// The `streams` member: non-empty strings, at most `MAX_EXPLICIT_STREAMS`.
pub fn parse_streams(v: &serde_json::Value) -> Result<Vec<String>, SubError> {
    let list = v.as_array().ok_or_else(|| SubError::invalid("streams must be an array of stream paths"))?;
    if list.len() > MAX_EXPLICIT_STREAMS {
        return Err(SubError::invalid("streams names more than 1000 streams"));
    }
    let mut out = Vec::with_capacity(list.len());
    for s in list {
        let s = s.as_str().filter(|s| !s.is_empty()).ok_or_else(|| SubError::invalid("streams must be strings"))?;
        out.push(normalize_path(s)?);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

fn optional_str<'a>(v: &'a serde_json::Value, name: &str) -> Result<Option<&'a str>, SubError> {
    match &v[name] {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some(s)),
        _ => Err(SubError::invalid(format!("{name} must be a string"))),
    }
}

impl Config {
    /// Parses and checks a create request body.
    pub fn parse(body: &[u8], allow_local: bool) -> Result<Config, SubError> {
        let v: serde_json::Value =
            serde_json::from_slice(body).map_err(|_| SubError::invalid("body must be a JSON object"))?;
        if !v.is_object() {
            return Err(SubError::invalid("body must be a JSON object"));
        }
        let pattern = match optional_str(&v, "pattern")?.filter(|p| !p.is_empty()) {
            Some(p) => {
                let p = p.trim_matches('/');
                glob::parse_pattern(p).map_err(SubError::invalid)?;
                if p == "__ds" || p.starts_with("__ds/") {
                    return Err(SubError::invalid("patterns under '__ds/' are reserved"));
                }
                Some(p.to_string())
            }
            None => None,
        };
        let streams = if v["streams"].is_null() { Vec::new() } else { parse_streams(&v["streams"])? };
        if pattern.is_none() && streams.is_empty() {
            return Err(SubError::invalid("at least one of pattern or streams is required"));
        }
        let lease_ttl_ms = match &v["lease_ttl_ms"] {
            serde_json::Value::Null => DEFAULT_LEASE_TTL_MS,
            n => n
                .as_u64()
                .filter(|n| (MIN_LEASE_TTL_MS..=MAX_LEASE_TTL_MS).contains(n))
                .ok_or_else(|| SubError::invalid("lease_ttl_ms must be an integer from 1000 to 600000"))?,
        };
        let description = optional_str(&v, "description")?.map(str::to_string);
        if description.as_ref().is_some_and(|d| d.len() > MAX_DESCRIPTION_BYTES) {
            return Err(SubError::invalid("description is longer than 1024 bytes"));
        }
        let delivery = match optional_str(&v, "type")? {
            Some("webhook") => {
                let url = optional_str(&v["webhook"], "url")?
                    .filter(|u| !u.is_empty())
                    .ok_or_else(|| SubError::invalid("webhook subscriptions require webhook.url"))?;
                target::check_url(url, allow_local).map_err(|m| SubError::new(400, "WEBHOOK_URL_REJECTED", m))?;
                Delivery::Webhook { url: url.to_string() }
            }
            Some("pull-wake") => {
                let wake = optional_str(&v, "wake_stream")?
                    .filter(|w| !w.is_empty())
                    .ok_or_else(|| SubError::invalid("pull-wake subscriptions require wake_stream"))?;
                Delivery::PullWake { wake_stream: normalize_path(wake)? }
            }
            _ => return Err(SubError::invalid("type must be \"webhook\" or \"pull-wake\"")),
        };
        Ok(Config { delivery, pattern, streams, lease_ttl_ms, description })
    }

    /// The configuration as canonical JSON (what the hash covers).
    pub fn canonical(&self) -> serde_json::Value {
        let (kind, url, wake) = match &self.delivery {
            Delivery::Webhook { url } => ("webhook", Some(url), None),
            Delivery::PullWake { wake_stream } => ("pull-wake", None, Some(wake_stream)),
        };
        serde_json::json!({
            "type": kind, "pattern": self.pattern, "streams": self.streams, "webhook_url": url,
            "wake_stream": wake, "lease_ttl_ms": self.lease_ttl_ms, "description": self.description,
        })
    }

    /// SHA-256 of the canonical JSON, hex.
    pub fn hash(&self) -> String {
        use sha2::Digest;
        let d = sha2::Sha256::digest(self.canonical().to_string().as_bytes());
        d.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// A stream the subscription follows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Link {
    pub explicit: bool,
    pub glob: bool,
    /// Acknowledged up to here; `None` is before the first byte (`-1`).
    pub acked: Option<u64>,
    /// The stream's tail as last reported by its shard.
    pub tail: u64,
}

impl Link {
    pub fn pending(&self) -> bool {
        self.tail > self.acked.unwrap_or(0)
    }
}

/// The wake in progress.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wake {
    pub id: String,
    /// Tails at wake time: what `{ "done": true }` acknowledges.
    pub snapshot: BTreeMap<String, u64>,
    /// Pull-wake: the worker holding the claim.
    pub holder: Option<String>,
    /// Lease end (unix ms) while a consumer holds the wake.
    pub lease_until: Option<u64>,
}

/// A subscription on its owner shard.
#[derive(Clone, Debug)]
pub struct Subscription {
    pub id: String,
    pub config: Config,
    pub config_hash: String,
    /// `http://host` the subscription was created through (callback URLs).
    pub base_url: String,
    pub created_ms: u64,
    /// Random per creation: tokens of a deleted namesake never verify.
    pub incarnation: u64,
    pub links: BTreeMap<String, Link>,
    pub generation: u64,
    pub wake: Option<Wake>,
    /// Webhook: failed attempts in a row, and when the next one is due (unix ms).
    pub retries: u32,
    pub retry_at: Option<u64>,
    /// Webhook: a delivery is on a delivery thread.
    pub in_flight: bool,
}

/// An ack in a callback or ack request.
pub struct Ack {
    pub stream: String,
    pub offset: String,
}

impl Subscription {
    pub fn new(id: &str, config: Config, base_url: String, now_ms: u64, incarnation: u64) -> Subscription {
        Subscription {
            id: id.to_string(),
            config_hash: config.hash(),
            config,
            base_url,
            created_ms: now_ms,
            incarnation,
            links: BTreeMap::new(),
            generation: 0,
            wake: None,
            retries: 0,
            retry_at: None,
            in_flight: false,
        }
    }

    /// Links a stream (explicitly or by pattern); a new link starts acked at `acked`.
    pub fn link(&mut self, path: &str, explicit: bool, acked: Option<u64>, tail: u64) {
        let l = self.links.entry(path.to_string()).or_insert(Link { acked, ..Link::default() });
        l.tail = l.tail.max(tail);
        if explicit {
            l.explicit = true;
        } else {
            l.glob = true;
        }
    }

    /// Drops the explicit link of `path`; the stream stays if the pattern links it.
    pub fn unlink_explicit(&mut self, path: &str) {
        if let Some(l) = self.links.get_mut(path) {
            l.explicit = false;
            if !l.glob {
                self.links.remove(path);
            }
        }
    }

    /// A stream's shard reported a new tail. Returns whether the stream is (now) linked.
    pub fn appended(&mut self, path: &str, tail: u64) -> bool {
        if let Some(l) = self.links.get_mut(path) {
            l.tail = l.tail.max(tail);
            return true;
        }
        if self.config.pattern.as_deref().is_some_and(|p| glob::matches(p, path)) {
            // A stream that appeared after the subscription: everything in it is new.
            self.link(path, false, None, tail);
            return true;
        }
        false
    }

    /// A linked stream was deleted: a pattern link goes, an explicit member
    /// stays and starts over (a stream created again under its name is all new).
    pub fn stream_deleted(&mut self, path: &str) {
        match self.links.get_mut(path) {
            Some(l) if l.explicit => *l = Link { explicit: true, ..Link::default() },
            Some(_) => {
                self.links.remove(path);
            }
            None => {}
        }
    }

    pub fn pending(&self) -> bool {
        self.links.values().any(Link::pending)
    }

    /// The first stream with unacknowledged data.
    pub fn first_pending(&self) -> Option<&str> {
        self.links.iter().find(|(_, l)| l.pending()).map(|(p, _)| p.as_str())
    }

    /// Opens a wake (none may be open): the next generation, with the tails as its snapshot.
    pub fn open_wake(&mut self, wake_id: String) -> u64 {
        assert!(self.wake.is_none(), "one wake at a time");
        self.generation += 1;
        let snapshot = self.links.iter().map(|(p, l)| (p.clone(), l.tail)).collect();
        self.wake = Some(Wake { id: wake_id, snapshot, holder: None, lease_until: None });
        self.generation
    }

    /// Ends the current wake (done, released, lease expired, or superseded).
    pub fn close_wake(&mut self) {
        self.wake = None;
        self.retries = 0;
        self.retry_at = None;
    }

    /// `{ "done": true }` from the receiver: ack the wake's snapshot.
    pub fn ack_snapshot(&mut self) {
        let Some(w) = &self.wake else { return };
        for (path, tail) in &w.snapshot {
            if let Some(l) = self.links.get_mut(path) {
                l.acked = Some(l.acked.unwrap_or(0).max(*tail));
            }
        }
    }

    /// Checks a callback, ack or release against the current wake:
    /// `token_generation` is what the token verified to (None: not ours).
    pub fn fence(
        &self,
        token_generation: Option<u64>,
        wake_id: Option<&str>,
        generation: Option<u64>,
    ) -> Result<(), SubError> {
        let Some(token_generation) = token_generation else {
            return Err(SubError::new(401, "TOKEN_INVALID", "callback token is not valid for this subscription"));
        };
        let Some(w) = &self.wake else { return Err(SubError::fenced()) };
        if token_generation != self.generation || generation != Some(self.generation) || wake_id != Some(w.id.as_str())
        {
            return Err(SubError::fenced());
        }
        Ok(())
    }

    /// Applies acks atomically: every one is checked before any moves a cursor.
    pub fn apply_acks(&mut self, acks: &[Ack]) -> Result<(), SubError> {
        let mut moves = Vec::with_capacity(acks.len());
        for a in acks {
            let l = self
                .links
                .get(&a.stream)
                .ok_or_else(|| SubError::offset("ack names a stream the subscription does not follow"))?;
            let off = Offset::parse(&a.offset)
                .ok_or_else(|| SubError::offset("ack offset is not an offset this server issued"))?
                .0;
            if l.acked.is_some_and(|acked| off < acked) {
                return Err(SubError::offset("ack offset regresses the acknowledged cursor"));
            }
            if off > l.tail {
                return Err(SubError::offset("ack offset is beyond the stream's tail"));
            }
            moves.push((a.stream.clone(), off));
        }
        for (stream, off) in moves {
            self.links.get_mut(&stream).expect("checked above").acked = Some(off);
        }
        Ok(())
    }

    /// Starts or extends the lease of the current wake.
    pub fn extend_lease(&mut self, now_ms: u64) {
        let ttl = self.config.lease_ttl_ms;
        if let Some(w) = &mut self.wake {
            w.lease_until = Some(now_ms + ttl);
        }
    }

    /// Whether the current wake's lease ran out.
    pub fn lease_expired(&self, now_ms: u64) -> bool {
        self.wake.as_ref().and_then(|w| w.lease_until).is_some_and(|until| now_ms >= until)
    }

    /// The streams as the protocol shows them; `tails` adds tail offsets and pending flags.
    pub fn stream_infos(&self, tails: bool) -> Vec<serde_json::Value> {
        self.links
            .iter()
            .map(|(path, l)| {
                let acked = l.acked.map_or_else(|| "-1".to_string(), |a| Offset(a).to_string());
                let kind = if l.explicit { "explicit" } else { "glob" };
                let mut v = serde_json::json!({ "path": path, "link_type": kind, "acked_offset": acked });
                if tails {
                    v["tail_offset"] = Offset(l.tail).to_string().into();
                    v["has_pending"] = l.pending().into();
                }
                v
            })
            .collect()
    }

    /// `http://host/v1/stream/__ds/subscriptions/{id}/{action}`.
    pub fn action_url(&self, action: &str) -> String {
        format!("{}/v1/stream/__ds/subscriptions/{}/{action}", self.base_url, percent_encode(&self.id))
    }
}

/// Percent-encodes everything but unreserved characters (a path segment).
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(body: &str) -> Subscription {
        Subscription::new("s", Config::parse(body.as_bytes(), true).unwrap(), "http://h".into(), 0, 1)
    }

    fn pull() -> Subscription {
        sub(r#"{"type":"pull-wake","pattern":"events/*","wake_stream":"wake/w","lease_ttl_ms":1000}"#)
    }

    #[test]
    fn configs_are_checked_and_hashed_canonically() {
        let a = Config::parse(br#"{"type":"pull-wake","streams":["b","a","a"],"wake_stream":"w"}"#, false).unwrap();
        let b = Config::parse(br#"{"type":"pull-wake","streams":["/a","b"],"wake_stream":"w/"}"#, false).unwrap();
        assert_eq!(a.streams, ["a", "b"]);
        assert_eq!(a.hash(), b.hash());
        let c = Config::parse(br#"{"type":"pull-wake","streams":["a"],"wake_stream":"w"}"#, false).unwrap();
        assert_ne!(a.hash(), c.hash());
        for bad in [
            r#"{"type":"webhook","pattern":"a/*"}"#,
            r#"{"type":"pull-wake","pattern":"a/*"}"#,
            r#"{"type":"poll","pattern":"a/*"}"#,
            r#"{"type":"pull-wake","wake_stream":"w"}"#,
            r#"{"type":"pull-wake","pattern":"a*","wake_stream":"w"}"#,
            r#"{"type":"pull-wake","pattern":"__ds/*","wake_stream":"w"}"#,
            r#"{"type":"pull-wake","pattern":"a","wake_stream":"w","lease_ttl_ms":999}"#,
            r#"{"type":"pull-wake","pattern":"a","wake_stream":"w","lease_ttl_ms":600001}"#,
            r#"[]"#,
        ] {
            assert_eq!(Config::parse(bad.as_bytes(), false).unwrap_err().status, 400, "{bad}");
        }
        let e = Config::parse(br#"{"type":"webhook","pattern":"a","webhook":{"url":"http://10.0.0.1/h"}}"#, true);
        assert_eq!(e.unwrap_err().code, "WEBHOOK_URL_REJECTED");
    }

    #[test]
    fn new_streams_are_pending_from_the_start_backfilled_ones_from_their_tail() {
        let mut s = pull();
        s.link("events/old", false, Some(50), 50);
        assert!(!s.pending());
        assert!(s.appended("events/new", 10));
        assert!(!s.appended("other/x", 10));
        assert_eq!(s.first_pending(), Some("events/new"));
        assert_eq!(s.links["events/new"].acked, None);
    }

    #[test]
    fn fencing_refuses_stale_generations_and_wake_ids() {
        let mut s = pull();
        s.appended("events/a", 10);
        let g = s.open_wake("w_1".into());
        assert_eq!(g, 1);
        assert!(s.fence(Some(1), Some("w_1"), Some(1)).is_ok());
        assert_eq!(s.fence(None, Some("w_1"), Some(1)).unwrap_err().status, 401);
        assert_eq!(s.fence(Some(1), Some("w_0"), Some(1)).unwrap_err().code, "FENCED");
        assert_eq!(s.fence(Some(1), Some("w_1"), Some(0)).unwrap_err().code, "FENCED");
        s.close_wake();
        s.open_wake("w_2".into());
        // The first wake's token and ids are stale now.
        assert_eq!(s.fence(Some(1), Some("w_1"), Some(1)).unwrap_err().code, "FENCED");
        assert_eq!(s.fence(Some(1), Some("w_2"), Some(2)).unwrap_err().code, "FENCED");
        s.close_wake();
        assert_eq!(s.fence(Some(2), Some("w_2"), Some(2)).unwrap_err().code, "FENCED");
    }

    #[test]
    fn acks_are_checked_together_and_never_regress() {
        let mut s = pull();
        s.appended("events/a", 10);
        s.appended("events/b", 20);
        let at = |o: u64| Offset(o).to_string();
        let ack = |stream: &str, o: String| Ack { stream: stream.into(), offset: o };
        // One bad ack: nothing moves.
        let e = s.apply_acks(&[ack("events/a", at(10)), ack("events/b", at(21))]).unwrap_err();
        assert_eq!(e.code, "INVALID_OFFSET");
        assert_eq!(s.links["events/a"].acked, None);
        s.apply_acks(&[ack("events/a", at(10)), ack("events/b", at(5))]).unwrap();
        assert_eq!(s.apply_acks(&[ack("events/b", at(4))]).unwrap_err().code, "INVALID_OFFSET");
        assert_eq!(s.apply_acks(&[ack("events/z", at(0))]).unwrap_err().code, "INVALID_OFFSET");
        assert_eq!(s.apply_acks(&[ack("events/a", "-1".into())]).unwrap_err().code, "INVALID_OFFSET");
        assert_eq!(s.first_pending(), Some("events/b"));
    }

    #[test]
    fn done_acks_the_snapshot_not_later_data() {
        let mut s = pull();
        s.appended("events/a", 10);
        s.open_wake("w".into());
        s.appended("events/a", 15);
        s.ack_snapshot();
        s.close_wake();
        assert_eq!(s.links["events/a"].acked, Some(10));
        assert!(s.pending());
    }

    #[test]
    fn deleted_streams_unlink_or_start_over() {
        let mut s = pull();
        s.link("m", true, Some(8), 8);
        s.appended("events/a", 4);
        s.stream_deleted("events/a");
        s.stream_deleted("m");
        assert!(!s.links.contains_key("events/a"));
        assert_eq!(s.links["m"], Link { explicit: true, ..Link::default() });
        assert!(s.appended("m", 3) && s.pending());
    }

    #[test]
    fn leases_expire() {
        let mut s = pull();
        s.appended("events/a", 1);
        s.open_wake("w".into());
        assert!(!s.lease_expired(5_000));
        s.extend_lease(1_000);
        assert!(!s.lease_expired(1_999));
        assert!(s.lease_expired(2_000));
    }
}
