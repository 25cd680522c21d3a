//! Small streams share bundle files (`store::bundles`): a shard of many
//! small streams holds a few bundles and no stream files; their bytes read
//! back after a clean stop and after a crash; a stream that outgrows its
//! extent, or is forked, moves into files of its own; rewritten and
//! deleted streams give their bundles' space back (compaction), within
//! twice what they store; a flipped byte in a bundle is reported, never
//! served, by a read and by `sluice check`'s verification.

mod sim;

use sim::{append_input, crash, in_scratch, key, one_shard, NO_BACKGROUND_FLUSH};
use sluice_shards::core::create::CreateInput;
use sluice_shards::log::recovery::Mode;
use sluice_shards::storage::Storage;
use sluice_shards::store::files::{BUNDLES_DIR, STREAMS_DIR};
use sluice_shards::store::restore::restore;
use sluice_shards::store::{FlushConfig, Shard, ShardConfig};
use sluice_shards::tuning::{BUNDLE_FILE_BYTES, BUNDLE_MAX};
use std::collections::BTreeMap;
use std::path::Path;

const OCTET: &str = "application/octet-stream";

fn config(root: &Path) -> ShardConfig {
    one_shard(root, 4 << 20, FlushConfig { free_spacing: 0, ..NO_BACKGROUND_FLUSH })
}

/// The names in `dir` under the shard's directory.
fn names(root: &Path, dir: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(root.join("shard-0").join(dir))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Bytes the shard's bundles take on disk (allocated blocks).
fn bundle_disk_bytes(root: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let dir = root.join("shard-0").join(BUNDLES_DIR);
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().metadata().unwrap().blocks() * 512).sum()
}

async fn create(s: &Shard, name: &str, body: &[u8]) {
    s.create(&key(name), &CreateInput::plain(OCTET), body, None, 0).await.unwrap();
}

async fn append(s: &Shard, name: &str, body: &[u8]) {
    s.append(&key(name), &append_input(body), 0).await.unwrap();
}

/// Every stream of `want` reads back whole.
async fn reads_back(s: &Shard, want: &BTreeMap<String, Vec<u8>>) {
    for (name, bytes) in want {
        let got = s.bytes(&key(name), 0, bytes.len() as u64).await.unwrap();
        assert!(&got == bytes, "stream {name}: {} bytes read back differ", got.len());
    }
}

#[test]
fn small_streams_share_a_bundle_and_read_back_after_a_stop_and_a_crash() {
    in_scratch("sluice-bundles-small", |dir| async move {
        let s = Shard::open(0, config(&dir)).await.unwrap();
        let mut want = BTreeMap::new();
        for i in 0..500 {
            let (name, first) = (format!("s{i}"), format!("first {i}").into_bytes());
            create(&s, &name, &first).await;
            want.insert(name, first);
        }
        s.flush().await.unwrap();
        for i in (0..500).step_by(3) {
            let (name, more) = (format!("s{i}"), format!(" more {i}").into_bytes());
            append(&s, &name, &more).await;
            want.get_mut(&name).unwrap().extend_from_slice(&more);
        }
        s.flush().await.unwrap();
        assert!(names(&dir, STREAMS_DIR).is_empty(), "no stream has files of its own");
        assert_eq!(names(&dir, BUNDLES_DIR), ["00000001.bundle"]);
        reads_back(&s, &want).await;
        s.stop_clean().await.unwrap();
        drop(s);

        let s = Shard::open(0, config(&dir)).await.unwrap();
        reads_back(&s, &want).await;
        // Flushed without a checkpoint, then a crash: the new extents are
        // in a new bundle the checkpoint does not name; the journal has them.
        append(&s, "s1", b" after").await;
        want.get_mut("s1").unwrap().extend_from_slice(b" after");
        s.flush().await.unwrap();
        append(&s, "s2", b" unflushed").await;
        want.get_mut("s2").unwrap().extend_from_slice(b" unflushed");
        crash(s).await;
        let s = Shard::open(0, config(&dir)).await.unwrap();
        reads_back(&s, &want).await;
        let restored = restore(&Storage::Real, &dir.join("shard-0"), 0, 16, Mode::Verify);
        assert!(restored.is_ok(), "sluice check finds the bundles sound: {:?}", restored.err());
    });
}

#[test]
fn a_stream_that_outgrows_its_extent_or_is_forked_gets_files_of_its_own() {
    in_scratch("sluice-bundles-leave", |dir| async move {
        let s = Shard::open(0, config(&dir)).await.unwrap();
        let mut want = BTreeMap::new();
        for name in ["grows", "forked", "stays"] {
            create(&s, name, name.as_bytes()).await;
            want.insert(name.to_string(), name.as_bytes().to_vec());
        }
        s.flush().await.unwrap();
        assert!(names(&dir, STREAMS_DIR).is_empty());
        // 64 appends of 200 bytes, flushed as they come: past the limit.
        for i in 0..64u8 {
            let more = vec![b'a' + i % 26; 200];
            append(&s, "grows", &more).await;
            want.get_mut("grows").unwrap().extend_from_slice(&more);
            if i % 8 == 0 {
                s.flush().await.unwrap();
            }
        }
        s.flush().await.unwrap();
        assert!(want["grows"].len() > BUNDLE_MAX as usize);
        let handle = |name: &str| s.store.borrow().streams.get(&*key(name)).unwrap().state.handle;
        let own = |h: u64| [format!("{h:016x}.data"), format!("{h:016x}.idx")];
        assert_eq!(names(&dir, STREAMS_DIR), own(handle("grows")));
        // A fork reads its parent's files, by stream: the parent moves first.
        let grant = s.grant_fork(&key("forked"), None, 0, 0).await.unwrap();
        assert_eq!(grant.ancestors.len(), 1);
        let mut files = own(handle("grows")).to_vec();
        files.extend(own(handle("forked")));
        files.sort();
        assert_eq!(names(&dir, STREAMS_DIR), files);
        let plan = grant.plan(0, "/v1/stream/forked".into(), None, 0);
        s.create(&key("child"), &CreateInput::plain(OCTET), b"", Some(plan), 0).await.unwrap();
        want.insert("child".into(), b"forked".to_vec());
        reads_back(&s, &want).await;
        crash(s).await;
        let s = Shard::open(0, config(&dir)).await.unwrap();
        reads_back(&s, &want).await;
        let st = s.store.borrow();
        let bundled = |name: &str| st.streams.get(&*key(name)).unwrap().state.body.bundle.is_some();
        assert_eq!((bundled("grows"), bundled("forked"), bundled("stays")), (false, false, true));
    });
}

#[test]
fn rewritten_and_deleted_streams_give_their_bundles_space_back() {
    in_scratch("sluice-bundles-compaction", |dir| async move {
        let s = Shard::open(0, config(&dir)).await.unwrap();
        let mut want = BTreeMap::new();
        // 1,500 idle streams of 2 KB, in bundle 1.
        for i in 0..1500 {
            let (name, body) = (format!("idle{i}"), vec![b'i'; 2000]);
            create(&s, &name, &body).await;
            want.insert(name, body);
        }
        s.flush().await.unwrap();
        let bundle_of = |s: &Shard, name: &str| {
            let st = s.store.borrow();
            st.streams.get(&*key(name)).unwrap().state.body.bundle.map(|b| b.no.get())
        };
        assert_eq!(bundle_of(&s, "idle0"), Some(1));
        // 500 busy streams rewritten by every flush up to 7.5 KB each: more
        // than two bundles written, bundle 1 left mostly dead.
        for round in 0..15u8 {
            for i in 0..500 {
                let (name, more) = (format!("busy{i}"), vec![b'a' + round; 500]);
                match round {
                    0 => create(&s, &name, &more).await,
                    _ => append(&s, &name, &more).await,
                }
                want.entry(name).or_insert_with(Vec::new).extend_from_slice(&more);
            }
            s.flush().await.unwrap();
        }
        assert!(names(&dir, BUNDLES_DIR).len() >= 2, "bundles: {:?}", names(&dir, BUNDLES_DIR));
        // The next flushes move the idle streams out of bundle 1 (at most
        // half live), and bundles nothing lives in go.
        for _ in 0..4 {
            append(&s, "busy0", b"!").await;
            want.get_mut("busy0").unwrap().push(b'!');
            s.flush().await.unwrap();
        }
        assert_ne!(bundle_of(&s, "idle0"), Some(1), "an idle stream moved out of the mostly dead bundle");
        assert!(!names(&dir, BUNDLES_DIR).contains(&"00000001.bundle".to_string()), "bundle 1 was deleted");
        let live: u64 = want.values().map(|v| v.len() as u64).sum();
        let disk = bundle_disk_bytes(&dir);
        assert!(disk <= 2 * live + BUNDLE_FILE_BYTES, "bundles take {disk} bytes for {live} stored");
        reads_back(&s, &want).await;
        crash(s).await;
        let s = Shard::open(0, config(&dir)).await.unwrap();
        reads_back(&s, &want).await;
        // Every stream deleted: every bundle goes (after a clean stop, the
        // one being filled too: a start fills a new one).
        for name in want.keys() {
            s.delete(&key(name), 0).await.unwrap();
        }
        s.flush().await.unwrap();
        s.flush().await.unwrap();
        assert!(names(&dir, BUNDLES_DIR).len() <= 1, "bundles left: {:?}", names(&dir, BUNDLES_DIR));
        s.stop_clean().await.unwrap();
        drop(s);
        let s = Shard::open(0, config(&dir)).await.unwrap();
        s.flush().await.unwrap();
        s.flush().await.unwrap();
        assert!(names(&dir, BUNDLES_DIR).is_empty(), "bundles left: {:?}", names(&dir, BUNDLES_DIR));
    });
}

#[test]
fn a_flipped_byte_in_a_bundle_is_reported_not_served() {
    in_scratch("sluice-bundles-damage", |dir| async move {
        let s = Shard::open(0, config(&dir)).await.unwrap();
        create(&s, "a", b"the quick brown fox").await;
        create(&s, "b", b"jumps over the lazy dog").await;
        s.stop_clean().await.unwrap();
        drop(s);
        let bundle = dir.join("shard-0").join(BUNDLES_DIR).join("00000001.bundle");
        let mut bytes = std::fs::read(&bundle).unwrap();
        let at = bytes.windows(5).position(|w| w == b"quick").unwrap();
        bytes[at] ^= 0x20;
        std::fs::write(&bundle, &bytes).unwrap();
        let verified = restore(&Storage::Real, &dir.join("shard-0"), 0, 16, Mode::Verify).map(|_| ());
        let why = verified.expect_err("sluice check finds the damage").to_string();
        assert!(why.contains("00000001.bundle") && why.contains("checksum"), "{why}");
        let s = Shard::open(0, config(&dir)).await.unwrap();
        let read = s.bytes(&key("a"), 0, 19).await;
        let why = read.expect_err("a damaged extent is not served").to_string();
        assert!(why.contains("00000001.bundle") && why.contains("checksum"), "{why}");
        assert_eq!(s.bytes(&key("b"), 0, 23).await.unwrap(), b"jumps over the lazy dog");
    });
}
