//! What stream handlers ask of the store before they act: whether a
//! stream's bucket exists, and whether the stream is in JSON mode.

use crate::ctx::Ctx;
use sluice_shards::core::Error;
use sluice_shards::store::StreamKey;

/// Refuses a request to a bucket that does not exist.
pub fn bucket_exists(ctx: &Ctx, key: &StreamKey) -> Result<(), Error> {
    if ctx.shard.store.borrow().bucket_exists(key.bucket()) {
        Ok(())
    } else {
        Err(Error::NoBucket)
    }
}

/// Whether stream `key` exists here in JSON mode.
pub fn json_stream(ctx: &Ctx, key: &StreamKey) -> bool {
    ctx.shard.store.borrow().streams.get(key).is_some_and(|e| e.state.json)
}
