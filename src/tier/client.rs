//! The object-store client: `object_store`'s S3 implementation on a tokio
//! runtime owned by the caller's thread (the backup thread, or `sluice
//! restore`), never a shard's. Every call blocks that thread only, with a
//! timeout; keys are relative to the URL's prefix. Credentials come from the
//! credentials file or the AWS_* variables and are never logged nor put in
//! an error (object_store's errors name the request, not the signature).

use super::args::{StoreArgs, TierUrl, DOWNLOAD_TIMEOUT, PROBE_TIMEOUT, REQUEST_TIMEOUT};
use crate::tier::error::TierError;
use bytes::Bytes;
use futures_lite::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{ObjectStore, PutPayload, RetryConfig};
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

pub struct Remote {
    rt: tokio::runtime::Runtime,
    store: Arc<dyn ObjectStore>,
    prefix: String,
    pub url: TierUrl,
}

/// The access key id and secret: from `file` (two lines) or the environment.
fn credentials(args: &StoreArgs) -> Result<(String, String), TierError> {
    if let Some(file) = &args.tier_credentials_file {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("credentials file {}: cannot read: {e}", file.display()))?;
        let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
        return match (lines.next(), lines.next()) {
            (Some(id), Some(secret)) => Ok((id.to_string(), secret.to_string())),
            _ => {
                Err(format!("credentials file {}: expected the key id and the secret on two lines", file.display())
                    .into())
            }
        };
    }
    match (std::env::var("AWS_ACCESS_KEY_ID"), std::env::var("AWS_SECRET_ACCESS_KEY")) {
        (Ok(id), Ok(secret)) if !id.is_empty() && !secret.is_empty() => Ok((id, secret)),
        _ => Err("no object-store credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, \
                  or --tier-credentials-file"
            .into()),
    }
}

impl Remote {
    /// A client for `url`; `retries` is object_store's own retry count per
    /// request (the backup retries whole steps itself, with backoff).
    pub fn new(url: &TierUrl, args: &StoreArgs, retries: usize) -> Result<Remote, TierError> {
        let (id, secret) = credentials(args)?;
        let retry = RetryConfig { max_retries: retries, retry_timeout: REQUEST_TIMEOUT, ..Default::default() };
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(&url.bucket)
            .with_region(&args.tier_region)
            .with_access_key_id(id)
            .with_secret_access_key(secret)
            .with_retry(retry);
        if let Some(endpoint) = &args.tier_endpoint {
            b = b.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
        }
        let store = b.build().map_err(|e| format!("object store {url}: {}", first_line(&e.to_string())))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("object-store runtime: {e}"))?;
        let prefix = if url.prefix.is_empty() { String::new() } else { format!("{}/", url.prefix) };
        Ok(Remote { rt, store: Arc::new(store), prefix, url: url.clone() })
    }

    fn path(&self, key: &str) -> Path {
        Path::from(format!("{}{key}", self.prefix))
    }

    fn run<T>(
        &self,
        limit: Duration,
        what: &str,
        f: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> Result<T, TierError> {
        self.rt.block_on(timed(limit, what, f))
    }

    /// Runs `f` to its end on this client's runtime (its tasks too).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// A range GET for a tiered read, awaited on a task of this client's
    /// runtime; gives up after [`DOWNLOAD_TIMEOUT`].
    pub async fn read_range(&self, key: &str, range: Range<u64>) -> Result<Bytes, TierError> {
        timed(DOWNLOAD_TIMEOUT, &format!("GET {key}"), self.store.get_range(&self.path(key), range)).await
    }

    /// Writes a small object to the prefix, reads it back and deletes it:
    /// refuses wrong credentials, a missing bucket or an unreachable store.
    pub fn probe(&self) -> Result<(), TierError> {
        let key = "probe";
        let body = Bytes::from_static(b"sluice probe\n");
        let what = format!("object store {} unusable", self.url);
        self.run(PROBE_TIMEOUT, &what, self.store.put(&self.path(key), PutPayload::from(body.clone())))?;
        let got = self.run(PROBE_TIMEOUT, &what, async { self.store.get(&self.path(key)).await?.bytes().await })?;
        if got != body {
            return Err(format!("{what}: a probe object read back different bytes").into());
        }
        self.run(PROBE_TIMEOUT, &what, self.store.delete(&self.path(key)))
    }

    pub fn put(&self, key: &str, body: Bytes) -> Result<(), TierError> {
        self.run(REQUEST_TIMEOUT, &format!("PUT {key}"), self.store.put(&self.path(key), PutPayload::from(body)))
            .map(drop)
    }

    pub fn get(&self, key: &str) -> Result<Bytes, TierError> {
        let p = self.path(key);
        self.run(REQUEST_TIMEOUT, &format!("GET {key}"), async { self.store.get(&p).await?.bytes().await })
    }

    pub fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes, TierError> {
        self.run(REQUEST_TIMEOUT, &format!("GET {key}"), self.store.get_range(&self.path(key), range))
    }

    pub fn delete(&self, key: &str) -> Result<(), TierError> {
        self.run(REQUEST_TIMEOUT, &format!("DELETE {key}"), self.store.delete(&self.path(key)))
    }

    /// Keys under `dir/` (relative to the prefix), sorted.
    pub fn list(&self, dir: &str) -> Result<Vec<String>, TierError> {
        Ok(self.list_sized(dir)?.into_iter().map(|(k, _)| k).collect())
    }

    /// Keys under `dir/` (relative to the prefix) and their sizes, sorted.
    pub fn list_sized(&self, dir: &str) -> Result<Vec<(String, u64)>, TierError> {
        let p = self.path(dir);
        let metas = self.run(REQUEST_TIMEOUT, &format!("LIST {dir}/"), async {
            let mut out = Vec::new();
            let mut s = self.store.list(Some(&p));
            while let Some(m) = s.next().await {
                let m = m?;
                out.push((m.location.to_string(), m.size));
            }
            Ok(out)
        })?;
        let mut keys: Vec<(String, u64)> = metas
            .into_iter()
            .filter_map(|(k, size)| k.strip_prefix(&self.prefix).map(|k| (k.to_string(), size)))
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// Uploads `parts` in order as one object (multipart when more than one).
    pub fn put_parts(&self, key: &str, parts: Vec<Bytes>) -> Result<(), TierError> {
        if parts.len() <= 1 {
            return self.put(key, parts.into_iter().next().unwrap_or_default());
        }
        let p = self.path(key);
        self.run(REQUEST_TIMEOUT * parts.len() as u32, &format!("PUT {key} (multipart)"), async {
            let mut up = self.store.put_multipart(&p).await?;
            for part in parts {
                if let Err(e) = up.put_part(PutPayload::from(part)).await {
                    let _ = up.abort().await;
                    return Err(e);
                }
            }
            up.complete().await
        })
        .map(drop)
    }
}

/// `f` within `limit`, its error or timeout named by `what` (one line).
async fn timed<T>(
    limit: Duration,
    what: &str,
    f: impl std::future::Future<Output = object_store::Result<T>>,
) -> Result<T, TierError> {
    match tokio::time::timeout(limit, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{what}: {}", first_line(&e.to_string())).into()),
        Err(_) => Err(format!("{what}: no answer within {} s", limit.as_secs()).into()),
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").chars().take(300).collect()
}
