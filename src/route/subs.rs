//! The reserved `/v1/stream/__ds/...` surface, routed: the JWK Set, a
//! subscription and its sub-resources (served by `handlers::subs::routes`).

use crate::subscriptions::bounds::MAX_SUBSCRIPTION_ID_BYTES;
use crate::subscriptions::owner_shard;
use std::borrow::Cow;

/// What a `__ds` request addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubRoute {
    /// `__ds/jwks.json`
    Jwks,
    /// `__ds/subscriptions/{id}[/...]`
    Sub { id: String, action: Action },
    /// Anything else under `__ds`: reserved, not a stream.
    Reserved,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Base,
    Streams,
    Stream(String),
    Callback,
    Claim,
    Ack,
    Release,
}

impl SubRoute {
    /// Routes the segments after `/v1/stream/__ds`.
    pub fn parse(rest: &[Cow<str>]) -> SubRoute {
        let rest: Vec<&str> = rest.iter().map(Cow::as_ref).collect();
        let (id, tail) = match rest.as_slice() {
            ["jwks.json"] => return SubRoute::Jwks,
            ["subscriptions", id, tail @ ..] if !id.is_empty() && id.len() <= MAX_SUBSCRIPTION_ID_BYTES => (id, tail),
            _ => return SubRoute::Reserved,
        };
        let action = match tail {
            [] => Action::Base,
            ["streams"] => Action::Streams,
            ["streams", path @ ..] => Action::Stream(path.join("/")),
            ["callback"] => Action::Callback,
            ["claim"] => Action::Claim,
            ["ack"] => Action::Ack,
            ["release"] => Action::Release,
            _ => return SubRoute::Reserved,
        };
        SubRoute::Sub { id: id.to_string(), action }
    }

    /// The shard that serves it (subscriptions live on their owner).
    pub fn owner(&self, shards: usize) -> Option<usize> {
        match self {
            SubRoute::Sub { id, .. } => Some(owner_shard(id, shards)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(path: &str) -> SubRoute {
        let segs: Vec<Cow<str>> = path.split('/').map(Cow::Borrowed).collect();
        SubRoute::parse(&segs)
    }

    #[test]
    fn routes() {
        assert_eq!(parse("jwks.json"), SubRoute::Jwks);
        assert_eq!(parse("subscriptions/s1"), SubRoute::Sub { id: "s1".into(), action: Action::Base });
        assert_eq!(
            parse("subscriptions/s1/streams/a/b"),
            SubRoute::Sub { id: "s1".into(), action: Action::Stream("a/b".into()) }
        );
        assert_eq!(parse("subscriptions/s1/claim"), SubRoute::Sub { id: "s1".into(), action: Action::Claim });
        assert_eq!(parse("subscriptions/s1/nope"), SubRoute::Reserved);
        assert_eq!(parse("anything"), SubRoute::Reserved);
    }
}
