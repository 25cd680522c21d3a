//! The object layout under `s3://BUCKET/PREFIX/`, readable by any node:
//!
//! - `packs/<seq>-<n>`: immutable; the changed byte ranges of the data
//!   dir's files that backup cycle `seq` shipped, back to back (pack `n` of
//!   the cycle, each at most `MAX_PACK_BYTES`).
//! - `manifests/<seq>.json`: immutable; written only after every pack it
//!   names is confirmed, so the newest manifest always describes a whole,
//!   restorable data dir: for every file its size and the extents that
//!   build it (pack key, offset in the pack, offset in the file, length;
//!   later extents overwrite earlier ones, bytes no extent covers are
//!   zeros), and for every shard the journal position it holds (segment,
//!   byte) and its `log-head`. `seq` is zero-padded to 20 digits, so
//!   listing order is cycle order.
//!
//! Older manifests, and packs no kept manifest names, are deleted once a
//! newer manifest is confirmed (the newest `KEEP_MANIFESTS + 1` stay). A
//! compaction step (see [`super::compact`]) writes pack `<seq>-0` holding
//! live bytes of older packs and manifest `seq` naming it instead of them,
//! describing the same data dir as the manifest before it.

use crate::tier::error::TierError;
use serde_json::{json, Value};
use std::collections::BTreeMap;

pub const FORMAT: u64 = 1;
pub const MANIFESTS: &str = "manifests";
pub const PACKS: &str = "packs";
/// Bytes one pack holds at most (a cycle with more ships several).
pub const MAX_PACK_BYTES: u64 = 64 << 20;

pub fn manifest_key(seq: u64) -> String {
    format!("{MANIFESTS}/{seq:020}.json")
}

pub fn pack_key(seq: u64, n: u32) -> String {
    format!("{PACKS}/{seq:020}-{n:04}")
}

/// The cycle number of a manifest key, when it is one.
pub fn manifest_seq(key: &str) -> Option<u64> {
    key.strip_prefix(MANIFESTS)?.strip_prefix('/')?.strip_suffix(".json")?.parse().ok()
}

/// The cycle number of a pack key, when it is one.
pub fn pack_seq(key: &str) -> Option<u64> {
    key.strip_prefix(PACKS)?.strip_prefix('/')?.split_once('-')?.0.parse().ok()
}

/// Bytes of a file found in a pack.
#[derive(Clone, Debug, PartialEq)]
pub struct Extent {
    pub pack: String,
    pub pack_offset: u64,
    pub file_offset: u64,
    pub len: u64,
}

/// One file of the data dir.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FileEntry {
    pub size: u64,
    pub extents: Vec<Extent>,
    /// The writer's own file identity, so a restarted writer ships only
    /// what changed (other readers ignore it).
    pub local: Option<Local>,
}

/// A file's identity on the writer's disk and how much of it is shipped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Local {
    pub ino: u64,
    pub mtime_ns: i128,
    pub shipped: u64,
}

/// One shard's journal as the manifest holds it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Journal {
    pub position: (u32, u64),
    pub head: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Manifest {
    pub seq: u64,
    /// When the shards' journal positions were taken (Unix ms): every
    /// append acknowledged before it is in this manifest.
    pub taken_unix_ms: u64,
    /// By shard number.
    pub journals: Vec<Journal>,
    /// By path relative to the data dir.
    pub files: BTreeMap<String, FileEntry>,
}

impl Manifest {
    pub fn encode(&self) -> Vec<u8> {
        let files: serde_json::Map<String, Value> = self
            .files
            .iter()
            .map(|(path, f)| {
                let extents: Vec<Value> =
                    f.extents.iter().map(|e| json!([e.pack, e.pack_offset, e.file_offset, e.len])).collect();
                let local = f.local.map(|l| json!([l.ino, l.mtime_ns.to_string(), l.shipped]));
                (path.clone(), json!({"size": f.size, "extents": extents, "local": local}))
            })
            .collect();
        let journals: Vec<Value> = self
            .journals
            .iter()
            .map(|j| json!({"segment": j.position.0, "byte": j.position.1, "head": j.head}))
            .collect();
        let v = json!({"format": FORMAT, "seq": self.seq, "taken_unix_ms": self.taken_unix_ms,
                       "journals": journals, "files": files});
        serde_json::to_vec(&v).expect("a JSON value encodes")
    }

    pub fn decode(bytes: &[u8]) -> Result<Manifest, TierError> {
        let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("manifest is not JSON: {e}"))?;
        let bad = |what: &str| format!("manifest: missing or bad {what}");
        if v["format"].as_u64() != Some(FORMAT) {
            return Err(format!("manifest: format {} (this sluice reads {FORMAT})", v["format"]).into());
        }
        let u = |x: &Value, what: &str| x.as_u64().ok_or_else(|| bad(what));
        let mut journals = Vec::new();
        for j in v["journals"].as_array().ok_or_else(|| bad("journals"))? {
            let segment = u32::try_from(u(&j["segment"], "segment")?).map_err(|_| bad("segment"))?;
            let head = u32::try_from(u(&j["head"], "head")?).map_err(|_| bad("head"))?;
            journals.push(Journal { position: (segment, u(&j["byte"], "byte")?), head });
        }
        let mut files = BTreeMap::new();
        for (path, f) in v["files"].as_object().ok_or_else(|| bad("files"))? {
            if path.starts_with('/') || path.split('/').any(|p| p.is_empty() || p == "." || p == "..") {
                return Err(format!("manifest: unsafe path {path:?}").into());
            }
            let mut extents = Vec::new();
            for e in f["extents"].as_array().ok_or_else(|| bad("extents"))? {
                let pack = e[0].as_str().ok_or_else(|| bad("extent pack"))?.to_string();
                extents.push(Extent {
                    pack,
                    pack_offset: u(&e[1], "extent")?,
                    file_offset: u(&e[2], "extent")?,
                    len: u(&e[3], "extent")?,
                });
            }
            let local = match &f["local"] {
                Value::Null => None,
                l => Some(Local {
                    ino: u(&l[0], "local")?,
                    mtime_ns: l[1].as_str().and_then(|t| t.parse().ok()).ok_or_else(|| bad("local"))?,
                    shipped: u(&l[2], "local")?,
                }),
            };
            files.insert(path.clone(), FileEntry { size: u(&f["size"], "size")?, extents, local });
        }
        Ok(Manifest {
            seq: u(&v["seq"], "seq")?,
            taken_unix_ms: u(&v["taken_unix_ms"], "taken_unix_ms")?,
            journals,
            files,
        })
    }

    /// Every pack the manifest names.
    pub fn packs(&self) -> std::collections::BTreeSet<&str> {
        self.files.values().flat_map(|f| f.extents.iter().map(|e| e.pack.as_str())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_round_trip_and_keys_sort_by_cycle() {
        let mut files = BTreeMap::new();
        let e = Extent { pack: pack_key(7, 0), pack_offset: 3, file_offset: 4096, len: 10 };
        let local = Some(Local { ino: 9, mtime_ns: -1_700_000_000_123_456_789, shipped: 4106 });
        files.insert("shard-0/checkpoint".to_string(), FileEntry { size: 4106, extents: vec![e], local });
        files.insert("sluice.meta".to_string(), FileEntry { size: 0, extents: vec![], local: None });
        let m = Manifest { seq: 7, taken_unix_ms: 5, journals: vec![Journal { position: (2, 8192), head: 2 }], files };
        assert_eq!(Manifest::decode(&m.encode()).unwrap(), m);
        assert_eq!(manifest_seq(&manifest_key(42)), Some(42));
        assert_eq!(pack_seq(&pack_key(42, 3)), Some(42));
        assert!(manifest_key(9) < manifest_key(10));
        assert_eq!(m.packs().len(), 1);
    }

    #[test]
    fn damaged_or_unsafe_manifests_are_refused() {
        assert!(Manifest::decode(b"nope").unwrap_err().to_string().contains("not JSON"));
        assert!(Manifest::decode(br#"{"format":9}"#).unwrap_err().to_string().contains("format"));
        let evil = br#"{"format":1,"seq":1,"taken_unix_ms":1,"journals":[],"files":{"../x":{"size":1,"extents":[]}}}"#;
        assert!(Manifest::decode(evil).unwrap_err().to_string().contains("unsafe"));
        let short = br#"{"format":1,"seq":1,"taken_unix_ms":1,"journals":[{"segment":1}],"files":{}}"#;
        assert!(Manifest::decode(short).unwrap_err().to_string().contains("head"));
    }
}
