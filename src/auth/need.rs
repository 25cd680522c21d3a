//! What a request needs from access control, read off its route and method:
//! reads are GET and HEAD, deletes of buckets and streams and bucket creation
//! are admin, every other change is write.

use super::scope::Action;
use super::verdict::Need;
use crate::route::subs::{Action as SubAction, SubRoute};
use crate::route::{route, Page, Route};
use sluice::http::url::parse_target;
use sluice::http::{headers as h, Head, Method};
use sluice_shards::ids::BUILTIN_BUCKET;

/// Classifies a routed request; `fork_source` is the bucket named by its
/// `Stream-Forked-From` header (see [`fork_source`]).
pub fn classify<'a>(method: Method, route: &'a Route, fork_source: Option<&'a str>) -> Need<'a> {
    if method == Method::Options {
        return Need::Public;
    }
    let safe = matches!(method, Method::Get | Method::Head);
    let bucket = |bucket: &'a str, action| Need::Bucket { bucket, action, fork_source: None };
    match route {
        Route::Health => Need::Public,
        Route::Metrics => Need::Operator,
        // The page holds nothing secret; the data it shows is the operator's.
        Route::Ui(Page::Console) => Need::Public,
        Route::Ui(Page::Streams) => Need::Operator,
        // Minting needs read on what the token will read.
        Route::Tokens(scope) => bucket(&scope.bucket, Action::Read),
        Route::Bad(_) | Route::NotFound => Need::Authenticated,
        Route::Subs(r) => subscription(r),
        Route::Bucket(b) if safe => bucket(b, Action::Read),
        Route::Bucket(b) => bucket(b, Action::Admin),
        Route::BucketList(b) => bucket(b, if safe { Action::Read } else { Action::Write }),
        Route::Stream(k, _) if safe => bucket(k.bucket(), Action::Read),
        Route::Stream(k, sub) if sub.is_empty() && method == Method::Delete => bucket(k.bucket(), Action::Admin),
        Route::Stream(k, sub) => {
            let forking = sub.is_empty() && method == Method::Put;
            Need::Bucket { bucket: k.bucket(), action: Action::Write, fork_source: fork_source.filter(|_| forking) }
        }
    }
}

/// Subscriptions cover the base surface (`v1-stream`): managing them and
/// their membership is admin there, claiming a pull-wake is a write (of the
/// wake stream); webhook callbacks, acks and releases carry the token of
/// the wake they settle instead, and the JWK Set is public.
fn subscription(r: &SubRoute) -> Need<'static> {
    let action = match r {
        SubRoute::Jwks => return Need::Public,
        SubRoute::Reserved => return Need::Authenticated,
        SubRoute::Sub { action: SubAction::Callback | SubAction::Ack | SubAction::Release, .. } => return Need::Public,
        SubRoute::Sub { action: SubAction::Claim, .. } => Action::Write,
        SubRoute::Sub { .. } => Action::Admin,
    };
    Need::Bucket { bucket: BUILTIN_BUCKET, action, fork_source: None }
}

/// The bucket of the stream a `Stream-Forked-From` header names, if it
/// names one (a malformed header is the fork handler's 400 to give).
pub fn fork_source(head: &Head) -> Option<String> {
    let target = parse_target(head.header(h::STREAM_FORKED_FROM)?).ok()?;
    match route(head, &target) {
        Route::Stream(k, _) => Some(k.bucket().to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice::http::parse_head;

    fn need_of(raw: &str) -> String {
        let head = parse_head(raw.as_bytes(), 4096, 16).unwrap();
        let route = route(&head, &parse_target(head.target()).unwrap());
        let source = fork_source(&head);
        format!("{:?}", classify(head.method, &route, source.as_deref()))
    }

    fn req(method: &str, path: &str) -> String {
        need_of(&format!("{method} {path} HTTP/1.1\r\n\r\n"))
    }

    fn on(bucket: &str, action: &str) -> String {
        format!("Bucket {{ bucket: \"{bucket}\", action: {action}, fork_source: None }}")
    }

    #[test]
    fn actions_by_route_and_method() {
        let cases = [
            ("GET", "/v1/stream/a/b", on("v1-stream", "Read")),
            ("HEAD", "/v1/stream/a", on("v1-stream", "Read")),
            ("POST", "/v1/stream/a", on("v1-stream", "Write")),
            ("PUT", "/v1/stream/a", on("v1-stream", "Write")),
            ("DELETE", "/v1/stream/a", on("v1-stream", "Admin")),
            ("PATCH", "/v1/stream/a", on("v1-stream", "Write")),
            ("GET", "/orders", on("orders", "Read")),
            ("HEAD", "/orders", on("orders", "Read")),
            ("PUT", "/orders", on("orders", "Admin")),
            ("DELETE", "/orders", on("orders", "Admin")),
            ("GET", "/orders/streams?prefix=a", on("orders", "Read")),
            ("POST", "/orders/streams", on("orders", "Write")),
            ("GET", "/orders/s1", on("orders", "Read")),
            ("DELETE", "/orders/s1", on("orders", "Admin")),
            ("GET", "/orders/s1/attrs", on("orders", "Read")),
            ("PUT", "/orders/s1/attrs", on("orders", "Write")),
            ("GET", "/orders/s1/snapshot", on("orders", "Read")),
            ("GET", "/orders/s1/snapshot/0000000000000001", on("orders", "Read")),
            ("PUT", "/orders/s1/snapshot/0000000000000001", on("orders", "Write")),
            ("DELETE", "/orders/s1/snapshot/0000000000000001", on("orders", "Write")),
            ("PUT", "/orders/s1/retention/0000000000000001", on("orders", "Write")),
            ("GET", "/orders/s1/bootstrap", on("orders", "Read")),
            ("POST", "/orders/s1/append-batch", on("orders", "Write")),
            ("GET", "/v1/healthz", "Public".into()),
            ("GET", "/v1/metrics", "Operator".into()),
            ("GET", "/v1/ui", "Public".into()),
            ("GET", "/v1/ui/streams", "Operator".into()),
            ("GET", "/v1/ui/other", "Authenticated".into()),
            ("POST", "/v1/tokens?stream=/orders/s1", on("orders", "Read")),
            ("POST", "/v1/tokens?stream=/v1/stream/a", on("v1-stream", "Read")),
            ("POST", "/v1/tokens?bucket=orders", on("orders", "Read")),
            ("POST", "/v1/tokens?stream=/orders", "Authenticated".into()),
            ("OPTIONS", "/orders/s1", "Public".into()),
            ("GET", "/", "Authenticated".into()),
            ("GET", "/v1/nothing", "Authenticated".into()),
            ("PUT", "/v1/stream/__ds/subscriptions/s1", on("v1-stream", "Admin")),
            ("GET", "/v1/stream/__ds/subscriptions/s1", on("v1-stream", "Admin")),
            ("POST", "/v1/stream/__ds/subscriptions/s1/streams", on("v1-stream", "Admin")),
            ("POST", "/v1/stream/__ds/subscriptions/s1/claim", on("v1-stream", "Write")),
            ("POST", "/v1/stream/__ds/subscriptions/s1/ack", "Public".into()),
            ("POST", "/v1/stream/__ds/subscriptions/s1/callback", "Public".into()),
            ("GET", "/v1/stream/__ds/jwks.json", "Public".into()),
            ("PUT", "/v1/stream/__ds/other", "Authenticated".into()),
            ("GET", "/BAD", "Authenticated".into()),
        ];
        for (method, path, want) in cases {
            assert_eq!(req(method, path), want, "{method} {path}");
        }
    }

    #[test]
    fn forks_name_their_source_bucket() {
        let fork = |from: &str| need_of(&format!("PUT /logs-1/f HTTP/1.1\r\nStream-Forked-From: {from}\r\n\r\n"));
        let with =
            |source: &str| format!("Bucket {{ bucket: \"logs-1\", action: Write, fork_source: Some(\"{source}\") }}");
        assert_eq!(fork("/orders/s1"), with("orders"));
        assert_eq!(fork("/v1/stream/a/b"), with("v1-stream"));
        // Not a stream path: no source, the handler answers 400.
        assert_eq!(fork("/orders"), on("logs-1", "Write"));
        assert_eq!(fork("%zz"), on("logs-1", "Write"));
        // Only a stream create forks.
        let post = need_of("POST /logs-1/f HTTP/1.1\r\nStream-Forked-From: /orders/s1\r\n\r\n");
        assert_eq!(post, on("logs-1", "Write"));
    }
}
