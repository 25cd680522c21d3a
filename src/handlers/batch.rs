//! Append-batch (extension section 4): many small appends in one request,
//! each acknowledged on its own, all made durable by one group commit.

use super::stream::{json_stream, store_error};
use crate::shard::Ctx;
use serde_json::{json, Value};
use sluice::http::{Head, Method, Response};
use sluice_shards::core::append::AppendError;
use sluice_shards::core::batch::{decode_frames, BatchError};
use sluice_shards::offset::Offset;
use sluice_shards::store::StreamKey;
use std::rc::Rc;

/// Per-append controls the batch endpoint cannot carry.
const UNSUPPORTED: [&str; 6] =
    ["stream-closed", "producer-id", "producer-epoch", "producer-seq", "stream-record-match", "stream-seq"];

/// A frame-level failure as the acknowledgement array reports it.
fn frame_error(e: &AppendError) -> (u16, &'static str, &'static str) {
    match e {
        AppendError::Bad(why) => (400, "bad_request", why),
        AppendError::Closed => (409, "stream_closed", "stream is closed"),
        AppendError::ContentType => (409, "content_type_mismatch", "Content-Type does not match the stream"),
        AppendError::SeqRegression => (409, "seq_regression", "Stream-Seq must increase"),
        AppendError::StaleEpoch(_) => (403, "stale_epoch", "stale producer epoch"),
        AppendError::Gap { .. } => (409, "sequence_gap", "producer sequence gap"),
        AppendError::RecordMismatch => (412, "record_mismatch", "record tail differs"),
    }
}

pub async fn append_batch(ctx: &Rc<Ctx>, head: &Head, key: &StreamKey, body: &[u8]) -> Response {
    if head.method != Method::Post {
        return Response::error(405, "method not allowed");
    }
    let Some(content_type) = head.header("content-type").filter(|c| !c.is_empty()) else {
        return Response::error(400, "append-batch needs a Content-Type");
    };
    if let Some(h) = UNSUPPORTED.iter().find(|h| head.header(h).is_some()) {
        return Response::error(400, &format!("append-batch does not support the {h} header"));
    }
    let frames = match decode_frames(body, ctx.cfg.max_batch_frames) {
        Ok(f) => f,
        Err(BatchError::Malformed(why)) => return Response::error(400, why),
        Err(BatchError::TooManyFrames) => return Response::error(413, "more frames than --max-batch-frames"),
    };
    let results = match ctx.shard.append_batch(key, content_type, &frames, ctx.now_ms()).await {
        Ok(r) => r,
        Err(e) => return store_error(ctx, key, e),
    };
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
                let (status, code, why) = frame_error(e);
                let mut ack = json!({ "status": status, "error_code": code, "error": why });
                if let Some(t) = tail {
                    ack["stream_next_offset"] = json!(Offset(t).to_string());
                }
                if matches!(e, AppendError::Closed) {
                    ack["stream_closed"] = json!(true);
                }
                ack
            }
        })
        .collect();
    Response::new(200)
        .header("content-type", "application/json")
        .with_body(serde_json::to_vec(&acks).expect("serializable"))
}
