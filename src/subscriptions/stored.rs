//! A subscription's durable form: its whole state as JSON, the payload of
//! the journal's `SubscriptionPut` record (the latest one for an id wins;
//! `SubscriptionDelete` is its tombstone). Tails are not trusted after a
//! restart: recovery asks the streams' shards again.

use super::model::{Config, Delivery, Link, Subscription, Wake};
use serde_json::{json, Value};

/// Format of the state payload.
const FORMAT: u64 = 1;

pub fn encode(s: &Subscription) -> Vec<u8> {
    let links: Vec<Value> = s.links.iter().map(|(p, l)| json!([p, l.explicit, l.glob, l.acked, l.tail])).collect();
    let wake = s.wake.as_ref().map(|w| {
        let snapshot: Vec<Value> = w.snapshot.iter().map(|(p, t)| json!([p, t])).collect();
        json!({ "id": w.id, "snapshot": snapshot, "holder": w.holder, "lease_until": w.lease_until })
    });
    json!({
        "format": FORMAT,
        "id": s.id,
        "config": s.config.canonical(),
        "base_url": s.base_url,
        "created_ms": s.created_ms,
        "incarnation": s.incarnation,
        "generation": s.generation,
        "links": links,
        "wake": wake,
        "retries": s.retries,
        "retry_at": s.retry_at,
    })
    .to_string()
    .into_bytes()
}

fn string(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

fn config(v: &Value) -> Option<Config> {
    let delivery = match v["type"].as_str()? {
        "webhook" => Delivery::Webhook { url: string(&v["webhook_url"])? },
        "pull-wake" => Delivery::PullWake { wake_stream: string(&v["wake_stream"])? },
        _ => return None,
    };
    let streams = v["streams"].as_array()?.iter().map(string).collect::<Option<Vec<String>>>()?;
    Some(Config {
        delivery,
        pattern: string(&v["pattern"]),
        streams,
        lease_ttl_ms: v["lease_ttl_ms"].as_u64()?,
        description: string(&v["description"]),
    })
}

fn wake(v: &Value) -> Option<Option<Wake>> {
    if v.is_null() {
        return Some(None);
    }
    let mut snapshot = std::collections::BTreeMap::new();
    for e in v["snapshot"].as_array()? {
        snapshot.insert(string(&e[0])?, e[1].as_u64()?);
    }
    Some(Some(Wake {
        id: string(&v["id"])?,
        snapshot,
        holder: string(&v["holder"]),
        lease_until: v["lease_until"].as_u64(),
    }))
}

/// Decodes what [`encode`] wrote (None: not a subscription state this build writes).
pub fn decode(bytes: &[u8]) -> Option<Subscription> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    if v["format"].as_u64()? != FORMAT {
        return None;
    }
    let config = config(&v["config"])?;
    let mut s = Subscription::new(
        v["id"].as_str()?,
        config,
        string(&v["base_url"])?,
        v["created_ms"].as_u64()?,
        v["incarnation"].as_u64()?,
    );
    for l in v["links"].as_array()? {
        let link =
            Link { explicit: l[1].as_bool()?, glob: l[2].as_bool()?, acked: l[3].as_u64(), tail: l[4].as_u64()? };
        s.links.insert(string(&l[0])?, link);
    }
    s.generation = v["generation"].as_u64()?;
    s.wake = wake(&v["wake"])?;
    s.retries = u32::try_from(v["retries"].as_u64()?).ok()?;
    s.retry_at = v["retry_at"].as_u64();
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips() {
        let body = br#"{"type":"webhook","pattern":"a/*","streams":["x"],"webhook":{"url":"https://h.example/w"},"description":"d"}"#;
        let mut s = Subscription::new("s1", Config::parse(body, false).unwrap(), "http://h".into(), 5, 9);
        s.link("a/b", false, Some(3), 7);
        s.link("x", true, None, 2);
        s.open_wake("w_1".into());
        s.extend_lease(100);
        s.retries = 2;
        s.retry_at = Some(1_234);
        let back = decode(&encode(&s)).unwrap();
        assert_eq!(encode(&back), encode(&s));
        assert_eq!(back.config, s.config);
        assert_eq!(back.config_hash, s.config_hash);
        assert_eq!(back.links, s.links);
        assert_eq!(back.wake, s.wake);
        assert_eq!((back.generation, back.retries, back.retry_at, back.incarnation), (1, 2, Some(1_234), 9));
        assert!(decode(b"{}").is_none());
    }
}
