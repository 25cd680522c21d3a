//! Refusals of stream requests: the error's own response (status, reason and
//! headers from `sluice::http::error`) plus what the protocol asks a refusal
//! to report about the stream's current state (see ARCHITECTURE.md,
//! "Refusals").

use crate::ctx::Ctx;
use sluice::http::error::HttpError;
use sluice::http::headers as h;
use sluice::http::Response;
use sluice_shards::core::Error;
use sluice_shards::log::LogError;
use sluice_shards::offset::Offset;
use sluice_shards::store::StreamKey;

/// The response to `e` for a request about stream `key`.
pub fn refusal(ctx: &Ctx, key: &StreamKey, e: impl Into<HttpError>) -> Response {
    // The edge's own refusals say nothing about the stream.
    let e = match e.into() {
        HttpError::Stream(e) => e,
        edge => return edge.into(),
    };
    let e = match e {
        // A stream deleted while forks still read it is gone, not missing.
        Error::NoStream if ctx.shard.store.borrow().is_tombstone(key) => Error::Gone,
        Error::Log(LogError::Failed(ref why)) => {
            // The log reported the fail-stop once; this is per request.
            tracing::debug!(shard = ctx.id, reason = %why, "write refused after fail-stop");
            e
        }
        e => e,
    };
    let state = ctx.shard.store.borrow().streams.get(key).filter(|e| !e.state.deleted).map(|e| {
        let s = &e.state;
        (s.visible.tail, s.json, s.first_message, s.visible.messages)
    });
    let mut r = Response::from(e.clone());
    let Some((tail, json, first, next)) = state else { return r };
    match e {
        Error::Closed => r.set(h::STREAM_NEXT_OFFSET, Offset(tail)),
        Error::RecordMismatch => {
            r.set(h::STREAM_RECORD_NEXT, next);
            r.set(h::STREAM_NEXT_OFFSET, Offset(tail));
        }
        Error::RecordBeyondTail => r.set(h::STREAM_RECORD_NEXT, next),
        Error::Trimmed(_) if json => {
            r.set(h::STREAM_RECORD_FIRST, first);
            r.set(h::STREAM_RECORD_NEXT, next);
        }
        _ => {}
    }
    r
}

/// Logs a failed read of stored data and names it as the protocol error:
/// data that fails its checks (`InvalidData`) is named with its stream and
/// the damage, anything else may be retried.
pub fn read_failed(ctx: &Ctx, key: &StreamKey, e: std::io::Error) -> Error {
    tracing::error!(shard = ctx.id, key = %key, error = %e, "read failed");
    match e.kind() {
        std::io::ErrorKind::InvalidData => Error::Damaged(format!("stream {key} is damaged: {e}")),
        _ => Error::ReadFailed,
    }
}
