//! Webhook signing keys and callback tokens: Ed25519 keys kept in the data
//! dir (mode 0600), published as a JWK Set with RFC 7638 thumbprint `kid`s
//! (every key in the directory stays published, so a rotation keeps old
//! signatures verifiable); the `Webhook-Signature` header; HMAC-SHA256
//! callback tokens bound to a subscription incarnation and wake generation.

use crate::start_error::StartError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Where the keys live, under the data dir.
pub const KEYS_DIR: &str = "webhook-keys";
const SECRET_FILE: &str = "callback-token.secret";
const KEY_PREFIX: &str = "signing-";
const KEY_SUFFIX: &str = ".ed25519";

/// One published key.
pub struct Published {
    pub kid: String,
    pub x: String,
}

/// The server's signing keys (the newest signs) and token secret; read-only after start.
pub struct Keys {
    signing: SigningKey,
    pub kid: String,
    pub published: Vec<Published>,
    secret: [u8; 32],
}

/// 32 fresh random bytes.
pub fn random32() -> [u8; 32] {
    let mut b = [0u8; 32];
    getrandom::getrandom(&mut b).expect("the OS random source is available");
    b
}

fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

fn read32(path: &Path) -> Result<[u8; 32], String> {
    let b = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    b.try_into().map_err(|_| format!("{} is not 32 bytes", path.display()))
}

fn thumbprint_kid(x: &str) -> String {
    let canonical = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{x}"}}"#);
    format!("ds_{}", B64.encode(Sha256::digest(canonical.as_bytes())))
}

impl Keys {
    /// Loads the keys under `data_dir`, creating the first key and the
    /// token secret on a new data dir (before any shard starts).
    pub fn prepare(data_dir: &Path) -> Result<Keys, StartError> {
        let dir = data_dir.join(KEYS_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let secret_path = dir.join(SECRET_FILE);
        if !secret_path.exists() {
            write_new(&secret_path, &random32()).map_err(|e| format!("cannot write {}: {e}", secret_path.display()))?;
        }
        let mut numbers = key_numbers(&dir)?;
        if numbers.is_empty() {
            let first = dir.join(format!("{KEY_PREFIX}1{KEY_SUFFIX}"));
            write_new(&first, &random32()).map_err(|e| format!("cannot write {}: {e}", first.display()))?;
            numbers.push(1);
        }
        let mut published = Vec::new();
        let mut newest = None;
        for n in numbers {
            let key = SigningKey::from_bytes(&read32(&dir.join(format!("{KEY_PREFIX}{n}{KEY_SUFFIX}")))?);
            let x = B64.encode(key.verifying_key().as_bytes());
            published.push(Published { kid: thumbprint_kid(&x), x });
            newest = Some(key);
        }
        let signing = newest.expect("at least one key");
        let kid = published.last().expect("at least one key").kid.clone();
        Ok(Keys { signing, kid, published, secret: read32(&secret_path)? })
    }

    /// The JWK Set document.
    pub fn jwks(&self) -> serde_json::Value {
        let keys: Vec<serde_json::Value> = self
            .published
            .iter()
            .rev()
            .map(|k| {
                serde_json::json!({"kty": "OKP", "crv": "Ed25519", "x": k.x, "kid": k.kid, "use": "sig", "alg": "EdDSA"})
            })
            .collect();
        serde_json::json!({ "keys": keys })
    }

    /// The `Webhook-Signature` header value for `body` sent at `unix_secs`.
    pub fn sign(&self, body: &[u8], unix_secs: u64) -> String {
        let mut signed = format!("{unix_secs}.").into_bytes();
        signed.extend_from_slice(body);
        let sig = self.signing.sign(&signed);
        format!("t={unix_secs},kid={},ed25519={}", self.kid, B64.encode(sig.to_bytes()))
    }

    fn mac(&self, id: &str, incarnation: u64, generation: u64) -> String {
        let mut m = Hmac::<Sha256>::new_from_slice(&self.secret).expect("HMAC takes any key length");
        m.update(id.as_bytes());
        m.update(&[0]);
        m.update(&incarnation.to_be_bytes());
        m.update(&generation.to_be_bytes());
        B64.encode(m.finalize().into_bytes())
    }

    /// A callback token for wake `generation` of subscription `id` (incarnation `incarnation`).
    pub fn token(&self, id: &str, incarnation: u64, generation: u64) -> String {
        format!("{generation}.{}", self.mac(id, incarnation, generation))
    }

    /// The generation a token was issued for, if this server issued it for this subscription.
    pub fn token_generation(&self, token: &str, id: &str, incarnation: u64) -> Option<u64> {
        let (g, mac) = token.split_once('.')?;
        let generation: u64 = g.parse().ok()?;
        let want = self.mac(id, incarnation, generation);
        // Constant time: both are 43 base64 characters when valid.
        let same = want.len() == mac.len() && want.bytes().zip(mac.bytes()).fold(0u8, |a, (x, y)| a | (x ^ y)) == 0;
        same.then_some(generation)
    }
}

fn key_numbers(dir: &Path) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))? {
        let name = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?.file_name();
        let name = name.to_string_lossy();
        if let Some(n) = name.strip_prefix(KEY_PREFIX).and_then(|r| r.strip_suffix(KEY_SUFFIX)) {
            out.push(n.parse().map_err(|_| format!("{name}: a signing key file is named signing-<number>.ed25519"))?);
        }
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::{Signature, Verifier, VerifyingKey};

    #[test]
    fn keys_persist_sign_and_tokens_fence() {
        let dir = std::env::temp_dir().join(format!("sluice-keys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let k = Keys::prepare(&dir).unwrap();
        let again = Keys::prepare(&dir).unwrap();
        assert_eq!(k.kid, again.kid, "the key persists");
        assert!(k.kid.starts_with("ds_"));
        let mode = std::fs::metadata(dir.join(KEYS_DIR).join("signing-1.ed25519")).unwrap();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777, 0o600);
        // A second key: both published, the newest signs.
        std::fs::write(dir.join(KEYS_DIR).join("signing-2.ed25519"), random32()).unwrap();
        let rotated = Keys::prepare(&dir).unwrap();
        assert_eq!(rotated.published.len(), 2);
        assert_ne!(rotated.kid, k.kid);
        let header = rotated.sign(b"{}", 1_700_000_000);
        let sig = header.split("ed25519=").nth(1).unwrap();
        let x = B64.decode(&rotated.published[1].x).unwrap();
        let vk = VerifyingKey::from_bytes(&x.try_into().unwrap()).unwrap();
        let sig = Signature::from_slice(&B64.decode(sig).unwrap()).unwrap();
        assert!(vk.verify(b"1700000000.{}", &sig).is_ok());
        // Tokens: bound to id, incarnation and generation.
        let t = k.token("s", 7, 3);
        assert_eq!(k.token_generation(&t, "s", 7), Some(3));
        assert_eq!(k.token_generation(&t, "s", 8), None);
        assert_eq!(k.token_generation(&t, "u", 7), None);
        assert_eq!(k.token_generation("3.AAAA", "s", 7), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
