//! The reserved `/v1/stream/__ds/...` surface: serving its routes, reading
//! a subscription, and the JWK Set of the webhook signing keys. Changes are in
//! `manage` (subscriptions, membership) and `settle` (callbacks, pull-wake).

use super::answers::{json, refusal, render};
use super::manage::{add_streams, create, delete, remove_stream};
use super::settle::{claim, release, settle};
use crate::ctx::Ctx;
use crate::route::subs::{Action, SubRoute};
use crate::subscriptions::model::SubError;
use sluice::http::{headers as h, Head, Method, Response};
use std::rc::Rc;

pub async fn serve(ctx: &Rc<Ctx>, head: &Head, route: SubRoute, body: &[u8]) -> Response {
    let (id, action) = match route {
        SubRoute::Jwks => return jwks(ctx, head.method),
        SubRoute::Reserved => {
            return refusal(SubError::invalid(
                "stream ids starting with '__ds/' are reserved for the subscription APIs",
            ))
        }
        SubRoute::Sub { id, action } => (id, action),
    };
    let done = match (action, head.method) {
        (Action::Base, Method::Put) => create(ctx, head, &id, body).await,
        (Action::Base, Method::Get) => read(ctx, head, &id),
        (Action::Base, Method::Delete) => delete(ctx, &id).await,
        (Action::Streams, Method::Post) => add_streams(ctx, &id, body).await,
        (Action::Stream(path), Method::Delete) => remove_stream(ctx, &id, &path).await,
        (Action::Callback, Method::Post) => settle(ctx, head, &id, body, false).await,
        (Action::Ack, Method::Post) => settle(ctx, head, &id, body, true).await,
        (Action::Claim, Method::Post) => claim(ctx, &id, body).await,
        (Action::Release, Method::Post) => release(ctx, head, &id, body).await,
        _ => Err(SubError::new(405, "INVALID_REQUEST", "method not allowed on this resource")),
    };
    done.unwrap_or_else(refusal)
}

fn jwks(ctx: &Ctx, method: Method) -> Response {
    if !matches!(method, Method::Get | Method::Head) {
        return refusal(SubError::new(405, "INVALID_REQUEST", "method not allowed on this resource"));
    }
    Response::new(200)
        .header(h::CONTENT_TYPE, "application/jwk-set+json")
        .header(h::CACHE_CONTROL, "public, max-age=300")
        .with_body(ctx.subs.keys.jwks().to_string().into_bytes())
}

/// A subscription as GET and PUT show it.
fn read(ctx: &Ctx, head: &Head, id: &str) -> Result<Response, SubError> {
    let owned = ctx.subs.owned.borrow();
    let sub = owned.get(id).ok_or_else(SubError::not_found)?;
    Ok(json(200, render(ctx, head, sub)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn percent_encoding() {
        assert_eq!(crate::subscriptions::model::percent_encode("a/b c"), "a%2Fb%20c");
    }
}
