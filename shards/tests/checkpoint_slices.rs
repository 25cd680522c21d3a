//! A flush visits the streams it captured, and encodes its checkpoint, a
//! slice of streams at a time (`FlushConfig::slice`), requests running
//! between slices. It still takes the one instant of its capture: appends,
//! attributes, deletes, creates and creates under a deleted name that land
//! while it visits and encodes are, after a crash, in the store exactly
//! once (neither the stream files' recorded bytes nor the checkpoint hold
//! them, the journal after it replays them), and a clean stop and start
//! after that keeps them.

mod sim;

use sim::{append_input, crash, key, one_shard, NO_BACKGROUND_FLUSH};
use sluice_shards::core::create::CreateInput;
use sluice_shards::store::{FlushConfig, Shard, ShardConfig};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

const OCTET: &str = "application/octet-stream";
const STREAMS: u64 = 150;

fn config(root: &Path) -> ShardConfig {
    one_shard(root, 1 << 20, FlushConfig { slice: 1, free_spacing: 0, ..NO_BACKGROUND_FLUSH })
}

/// Every stream of `want` reads back as its bytes and holds the attributes
/// noted; no other stream is there.
async fn holds(s: &Shard, want: &BTreeMap<String, (Vec<u8>, Vec<u8>)>) {
    for (name, (bytes, attrs)) in want {
        let got = s.bytes(&key(name), 0, bytes.len() as u64).await.unwrap();
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(bytes), "stream {name}");
        let st = s.store.borrow();
        let state = &st.streams.get(&*key(name)).unwrap().state;
        assert_eq!((state.tail(), state.attrs()), (bytes.len() as u64, &attrs[..]), "stream {name}");
    }
    let names: Vec<String> = s.store.borrow().streams.keys().map(|k| k.stream().to_string()).collect();
    assert_eq!(names, want.keys().cloned().collect::<Vec<_>>(), "the streams held");
}

#[test]
fn changes_between_a_flushs_slices_are_kept_once_through_a_crash() {
    sim::in_scratch("sluice-checkpoint-slices", |dir| async move {
        let s = Rc::new(Shard::open(0, config(&dir)).await.unwrap());
        let mut want = BTreeMap::new();
        for i in 0..STREAMS {
            let (name, first) = (format!("s{i:03}"), format!("s{i:03};"));
            s.create(&key(&name), &CreateInput::plain(OCTET), first.as_bytes(), None, 0).await.unwrap();
            want.insert(name, (first.into_bytes(), Vec::new()));
        }
        s.flush().await.unwrap();
        // A delete gives space back: the next flush writes a checkpoint.
        s.delete(&key("s000"), 0).await.unwrap();
        want.remove("s000");
        // Every stream has a tail for the next flush's pass to take.
        for (name, (bytes, _)) in want.iter_mut() {
            let tail = format!("{name}:tail;");
            s.append(&key(name), &append_input(tail.as_bytes()), 0).await.unwrap();
            bytes.extend_from_slice(tail.as_bytes());
        }
        let done = Rc::new(Cell::new(false));
        let flush = {
            let (s, done) = (s.clone(), done.clone());
            sluice_shards::tasks::spawn(async move {
                s.flush().await.unwrap();
                done.set(true);
            })
        };
        let mut during = 0;
        for step in 1..=90u64 {
            let name = format!("s{:03}", (step * 37) % STREAMS);
            let there = want.contains_key(&name);
            match step % 5 {
                0 | 3 if there => {
                    let more = format!("+{step}");
                    s.append(&key(&name), &append_input(more.as_bytes()), 0).await.unwrap();
                    want.get_mut(&name).unwrap().0.extend_from_slice(more.as_bytes());
                }
                1 if there => {
                    let attrs = format!("{{\"step\":{step}}}").into_bytes();
                    s.set_attrs(&key(&name), attrs.clone(), 0).await.unwrap();
                    want.get_mut(&name).unwrap().1 = attrs;
                }
                2 if there => {
                    s.delete(&key(&name), 0).await.unwrap();
                    want.remove(&name);
                }
                _ => {
                    // A new name, or one deleted before: a new stream.
                    let name = if there { format!("{name}-{step}") } else { name };
                    let first = format!("{name}@{step};");
                    s.create(&key(&name), &CreateInput::plain(OCTET), first.as_bytes(), None, 0).await.unwrap();
                    want.insert(name, (first.into_bytes(), Vec::new()));
                }
            }
            during += !done.get() as usize;
        }
        flush.await;
        assert!(during >= 30, "only {during} changes landed while the flush passed and encoded");
        holds(&s, &want).await;
        let s = Rc::into_inner(s).expect("the flush is done");
        crash(s).await;

        let s = Shard::open(0, config(&dir)).await.unwrap();
        holds(&s, &want).await;
        s.stop_clean().await.unwrap();
        drop(s);
        let s = Shard::open(0, config(&dir)).await.unwrap();
        holds(&s, &want).await;
    });
}
