//! Append-batch (extension section 4): many small appends in one request,
//! each acknowledged on its own, all made durable by one group commit.

use super::lookup::json_stream;
use super::refusal::refusal;
use crate::ctx::Ctx;
use serde_json::{json, Value};
use sluice::http::error::stream_status;
use sluice::http::error::HttpError;
use sluice::http::headers as h;
use sluice::http::{Head, Method, Response};
use sluice_shards::core::batch::decode_frames;
use sluice_shards::core::Error;
use sluice_shards::offset::Offset;
use sluice_shards::store::StreamKey;
use std::rc::Rc;

/// Per-append controls the batch endpoint cannot carry.
const UNSUPPORTED: [&str; 6] =
    [h::STREAM_CLOSED, h::PRODUCER_ID, h::PRODUCER_EPOCH, h::PRODUCER_SEQ, h::STREAM_RECORD_MATCH, h::STREAM_SEQ];

pub async fn append_batch(ctx: &Rc<Ctx>, head: &Head, key: &StreamKey, body: &[u8]) -> Response {
    if head.method != Method::Post {
        return HttpError::MethodNotAllowed.into();
    }
    acknowledge(ctx, head, key, body).await.unwrap_or_else(|e| refusal(ctx, key, e))
}

async fn acknowledge(ctx: &Rc<Ctx>, head: &Head, key: &StreamKey, body: &[u8]) -> Result<Response, Error> {
    let content_type = head
        .header(h::CONTENT_TYPE)
        .filter(|c| !c.is_empty())
        .ok_or(Error::Invalid("append-batch needs a Content-Type"))?;
    if let Some(h) = UNSUPPORTED.iter().find(|h| head.header(h).is_some()) {
        return Err(Error::UnsupportedHeader(h));
    }
    let frames = decode_frames(body, ctx.cfg.max_batch_frames)?;
    let results = ctx.shard.append_batch(key, content_type, &frames, ctx.now_ms()).await?;
    let json_records = json_stream(ctx, key);
    let tail = ctx.shard.store.borrow().streams.get(key).map(|e| e.state.visible.tail);
    let acks: Vec<Value> = results
        .iter()
        .map(|r| match r {
            Ok(out) => {
                let mut ack = json!({ "status": 204, "stream_next_offset": Offset(out.next_offset).to_string() });
                if json_records {
                    ack["stream_record_start"] = json!(out.records.0);
                    ack["stream_record_next"] = json!(out.records.1);
                }
                ack
            }
            Err(e) => {
                let mut ack = json!({ "status": stream_status(e), "error_code": e.code(), "error": e.reason() });
                if let Some(t) = tail {
                    ack["stream_next_offset"] = json!(Offset(t).to_string());
                }
                if *e == Error::Closed {
                    ack["stream_closed"] = json!(true);
                }
                ack
            }
        })
        .collect();
    Ok(Response::new(200)
        .header(h::CONTENT_TYPE, "application/json")
        .with_body(serde_json::to_vec(&acks).expect("serializable")))
}
