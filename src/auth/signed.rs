//! Signed read tokens, for browsers: `EventSource` cannot send an
//! `Authorization` header, so a client that may read a bucket mints a
//! short-lived token for one of its streams or for the whole bucket
//! (`POST /v1/tokens`), and a page passes it as `?token=` on GET and HEAD
//! reads, like a pre-signed object-store URL.
//!
//! A token is `sr1.<claims>.<mac>`: base64url of `expires_ms\nbucket\nstream`
//! (stream empty for a bucket) and of its HMAC-SHA256 under a 32-byte key
//! kept in the data dir (mode 0600, created at first start). Nothing is
//! stored per token: one lives until its expiry, or until the key file is
//! deleted (which revokes every token at the next start).

use super::scope::Action;
use super::verdict::{Denial, Need};
use crate::route::{ReadScope, Route};
use crate::start_error::StartError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use sluice::http::Method;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The key file in the data dir.
pub const KEY_FILE: &str = "read-tokens.key";

const KEY_LEN: usize = 32;
const PREFIX: &str = "sr1";
const BAD: &str = "invalid read token";
const EXPIRED: &str = "read token expired";

impl ReadScope {
    /// Whether the scope covers a read of `bucket` through `route`.
    fn covers(&self, bucket: &str, route: &Route) -> bool {
        match (&self.stream, route) {
            (None, _) => self.bucket == bucket,
            (Some(stream), Route::Stream(k, _)) => k.bucket() == self.bucket && k.stream() == stream,
            (Some(_), _) => false,
        }
    }
}

/// The server's signing key.
pub struct ReadKey([u8; KEY_LEN]);

impl ReadKey {
    /// Reads `dir/KEY_FILE`, or creates it (random, mode 0600) if missing.
    pub fn load_or_create(dir: &Path) -> Result<ReadKey, StartError> {
        let path = dir.join(KEY_FILE);
        let failed = |e: std::io::Error| format!("read-token key {}: {e}", path.display());
        match std::fs::read(&path) {
            Ok(bytes) => {
                let mode = std::fs::metadata(&path).map_err(failed)?.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    return Err(format!(
                        "read-token key {} is open to group or others (mode {mode:o}): chmod 600 it",
                        path.display()
                    )
                    .into());
                }
                let key = bytes.try_into().map_err(|_| {
                    format!(
                        "read-token key {} is damaged: not {KEY_LEN} bytes (delete it to make a new one)",
                        path.display()
                    )
                })?;
                Ok(ReadKey(key))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut key = [0u8; KEY_LEN];
                std::fs::File::open("/dev/urandom")
                    .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut key))
                    .map_err(failed)?;
                let tmp = dir.join(format!(".{KEY_FILE}.tmp"));
                let _ = std::fs::remove_file(&tmp);
                let mut f =
                    std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp).map_err(failed)?;
                f.write_all(&key).and_then(|()| f.sync_all()).map_err(failed)?;
                std::fs::rename(&tmp, &path).map_err(failed)?;
                std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(failed)?;
                Ok(ReadKey(key))
            }
            Err(e) => Err(failed(e).into()),
        }
    }

    fn mac(&self, claims: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(claims);
        mac
    }

    /// A token for `scope` valid until `expires_ms` (Unix milliseconds).
    pub fn mint(&self, scope: &ReadScope, expires_ms: u64) -> String {
        let claims = format!("{expires_ms}\n{}\n{}", scope.bucket, scope.stream.as_deref().unwrap_or(""));
        let tag = self.mac(claims.as_bytes()).finalize().into_bytes();
        format!("{PREFIX}.{}.{}", B64.encode(claims), B64.encode(tag))
    }

    /// The scope of a genuine token that has not expired at `now_ms`.
    pub fn verify(&self, token: &str, now_ms: u64) -> Result<ReadScope, &'static str> {
        let mut parts = token.split('.');
        let (Some(PREFIX), Some(claims), Some(tag), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(BAD);
        };
        let claims = B64.decode(claims).map_err(|_| BAD)?;
        let tag = B64.decode(tag).map_err(|_| BAD)?;
        self.mac(&claims).verify_slice(&tag).map_err(|_| BAD)?;
        let claims = String::from_utf8(claims).map_err(|_| BAD)?;
        let mut fields = claims.split('\n');
        let (Some(expires), Some(bucket), Some(stream), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(BAD);
        };
        if expires.parse::<u64>().map_err(|_| BAD)? <= now_ms {
            return Err(EXPIRED);
        }
        Ok(ReadScope { bucket: bucket.to_string(), stream: (!stream.is_empty()).then(|| stream.to_string()) })
    }
}

/// The `?token=` of a request, if it has one.
pub fn from_query(target: &str) -> Option<String> {
    let t = sluice::http::url::parse_target(target).ok()?;
    t.param("token").map(str::to_string)
}

/// Decides a request that carries a read token and no `Authorization`:
/// a forged or expired token is 401, a write or a read outside the
/// token's scope 403.
pub fn decide(
    key: &ReadKey,
    token: &str,
    now_ms: u64,
    method: Method,
    need: &Need,
    route: &Route,
) -> Result<(), Denial> {
    let scope = key.verify(token, now_ms).map_err(Denial::BadToken)?;
    if !matches!(method, Method::Get | Method::Head) {
        return Err(Denial::ReadToken("a ?token= read token only reads (GET, HEAD): send writes with Authorization"));
    }
    match need {
        Need::Public | Need::Authenticated => Ok(()),
        Need::Bucket { bucket, action: Action::Read, fork_source: None } if scope.covers(bucket, route) => Ok(()),
        _ => Err(Denial::ReadToken("the read token is for another stream or bucket")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_shards::store::StreamKey;

    fn key() -> ReadKey {
        ReadKey([7; KEY_LEN])
    }

    fn stream(b: &str, s: &str) -> Route {
        Route::Stream(StreamKey::boxed(b, s), Vec::new())
    }

    fn read(bucket: &str) -> Need<'_> {
        Need::Bucket { bucket, action: Action::Read, fork_source: None }
    }

    #[test]
    fn a_token_reads_its_scope_until_it_expires() {
        let one = ReadScope { bucket: "orders".into(), stream: Some("s1".into()) };
        let t = key().mint(&one, 2_000);
        assert_eq!(key().verify(&t, 1_999), Ok(one));
        assert_eq!(key().verify(&t, 2_000), Err(EXPIRED));
        let d = |need: &Need, route: &Route, m| decide(&key(), &t, 1_000, m, need, route);
        assert_eq!(d(&read("orders"), &stream("orders", "s1"), Method::Get), Ok(()));
        assert_eq!(d(&read("orders"), &stream("orders", "s1"), Method::Head), Ok(()));
        assert!(matches!(d(&read("orders"), &stream("orders", "s2"), Method::Get), Err(Denial::ReadToken(_))));
        assert!(matches!(d(&read("billing"), &stream("billing", "s1"), Method::Get), Err(Denial::ReadToken(_))));
        assert!(matches!(
            d(&read("orders"), &Route::BucketList("orders".into()), Method::Get),
            Err(Denial::ReadToken(_))
        ));
        let write = Need::Bucket { bucket: "orders", action: Action::Write, fork_source: None };
        assert!(matches!(d(&write, &stream("orders", "s1"), Method::Post), Err(Denial::ReadToken(_))));
        assert!(matches!(d(&Need::Operator, &Route::Metrics, Method::Get), Err(Denial::ReadToken(_))));
        let all = key().mint(&ReadScope { bucket: "orders".into(), stream: None }, 2_000);
        let d = |need: &Need, route: &Route| decide(&key(), &all, 1_000, Method::Get, need, route);
        assert_eq!(d(&read("orders"), &Route::BucketList("orders".into())), Ok(()));
        assert_eq!(d(&read("orders"), &stream("orders", "any")), Ok(()));
        assert!(d(&read("orders-2"), &stream("orders-2", "any")).is_err());
    }

    #[test]
    fn forged_tokens_are_refused() {
        let t = key().mint(&ReadScope { bucket: "orders".into(), stream: None }, u64::MAX);
        let other = ReadKey([8; KEY_LEN]);
        assert_eq!(other.verify(&t, 0), Err(BAD));
        let (head, tag) = t.rsplit_once('.').unwrap();
        let wider = B64.encode(format!("{}\nbilling\n", u64::MAX));
        for forged in [
            format!("{head}.{}", B64.encode([0u8; 32])),
            format!("sr1.{wider}.{tag}"),
            format!("{t}x"),
            format!("{t}.x"),
            "sr1..".to_string(),
            String::new(),
        ] {
            assert_eq!(key().verify(&forged, 0), Err(BAD), "{forged}");
        }
    }
}
