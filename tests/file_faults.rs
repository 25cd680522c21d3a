//! File faults against the real binary and `sluice check`.
//!
//! One log is written (with copies of every file taken half-way, the "older
//! copies"), then for every kind of file (a sealed segment, the newest
//! segment with records, `log-head`, the preallocated blank segment) and
//! every fault (deleted, truncated to zero, halved, replaced by an older
//! copy) a copy of the data dir is damaged. Each time the server either
//! refuses to start with the file named, or serves every acknowledged byte;
//! `sluice check` agrees (exit 1 naming the file, or exit 0) and changes
//! nothing.

mod common;

use common::{offset_pos, Launch, Server, TempDir};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// 64 KiB segments: a few hundred KiB of appends span several.
const SEGMENT: &str = "65536";
const STREAM: &str = "/v1/stream/faults";

fn launch(dir: &Path) -> Launch {
    Launch {
        shards: 1,
        io_timeout: Duration::from_secs(10),
        ..Launch::logged(&dir.join("server.log"), &["--segment-bytes", SEGMENT, "--flush-interval", "30s"])
    }
}

/// Every file under `dir` and its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.insert(p.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

fn restore(dir: &Path, files: &BTreeMap<PathBuf, Vec<u8>>) {
    let _ = std::fs::remove_dir_all(dir);
    for (rel, bytes) in files {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
}

/// Appends `n` records of 1000 B; returns what was acknowledged.
fn append(s: &Server, from: usize, n: usize, acked: &mut Vec<u8>) {
    append_to(s, STREAM, from, n, acked)
}

fn append_to(s: &Server, stream: &str, from: usize, n: usize, acked: &mut Vec<u8>) {
    for i in from..from + n {
        let body: Vec<u8> = format!("{i:06}").bytes().cycle().take(1000).collect();
        let r = s.req("POST", stream, &[("Content-Type", "text/plain")], &body).expect(204);
        acked.extend_from_slice(&body);
        assert_eq!(offset_pos(&r.next_offset()), acked.len() as u64);
    }
}

/// `sluice check` on `data`: exit code and output; asserts it changed nothing.
fn check(data: &Path) -> (i32, String) {
    let before = files(data);
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["check", "--data-dir"])
        .arg(data)
        .output()
        .expect("run sluice check");
    assert_eq!(files(data), before, "sluice check changed the data dir");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("exit code"), text)
}

/// A fault applied to one file: its path, and its older copy if it had one.
type Fault = fn(&Path, Option<&Vec<u8>>);

const FAULTS: [(&str, Fault); 4] = [
    ("deleted", |p, _| std::fs::remove_file(p).unwrap()),
    ("truncated", |p, _| std::fs::write(p, b"").unwrap()),
    ("halved", |p, _| {
        let b = std::fs::read(p).unwrap();
        std::fs::write(p, &b[..b.len() / 2]).unwrap()
    }),
    ("older copy", |p, old| {
        // Before the half-way copy existed, the file was its preallocated self.
        let b = old.cloned().unwrap_or_else(|| vec![0; std::fs::metadata(p).unwrap().len() as usize]);
        std::fs::write(p, b).unwrap()
    }),
];

#[test]
fn every_file_fault_is_refused_by_name_or_loses_nothing() {
    let tmp = TempDir::new("file-faults");
    let data = tmp.path().join("data");
    let mut s = Server::launch(&data, launch(tmp.path()));
    s.put(STREAM, "text/plain", b"").expect(201);
    let mut acked = Vec::new();
    append(&s, 0, 100, &mut acked);
    let half_way = files(&data);
    append(&s, 100, 200, &mut acked);
    s.kill();
    let clean = files(&data);
    assert_eq!(check(&data).0, 0, "a clean data dir: {}", check(&data).1);

    let segs: Vec<&PathBuf> = clean.keys().filter(|p| p.extension().is_some_and(|e| e == "seg")).collect();
    let written: Vec<&PathBuf> = segs.iter().copied().filter(|p| clean[*p].iter().any(|b| *b != 0)).collect();
    let blank = segs.iter().copied().find(|p| clean[*p].iter().all(|b| *b == 0)).expect("a preallocated segment");
    assert!(written.len() >= 4, "the log spans several segments: {written:?}");
    // Segment 2 was being written half-way and was sealed later.
    let sealed = written[1];
    let newest = *written.last().unwrap();
    let head = PathBuf::from("shard-0/log-head");
    assert!(half_way.contains_key(sealed) && half_way[sealed] != clean[sealed]);
    assert!(!half_way.get(newest).is_some_and(|b| b.iter().any(|x| *x != 0)), "newest had no records half-way");

    // (file, fault name) pairs that lose nothing: the server serves every byte.
    let harmless = |file: &Path, fault: &str| file == blank || (file == head && fault == "older copy");
    for file in [sealed, newest, &head, blank] {
        for (name, fault) in FAULTS {
            if file == blank && name == "older copy" {
                continue; // A blank segment has no older self.
            }
            let case = format!("{} {name}", file.display());
            restore(&data, &clean);
            fault(&data.join(file), half_way.get(file));
            let (code, out) = check(&data);
            match Server::try_launch(&data, launch(tmp.path())) {
                Ok(mut s) => {
                    assert!(harmless(file, name), "{case}: the server started: {out}");
                    let (got, tail) = s.read_all(STREAM);
                    assert_eq!(tail, acked.len() as u64, "{case}: tail");
                    assert!(got == acked, "{case}: bytes differ");
                    s.kill();
                    assert_eq!(code, 0, "{case}: check: {out}");
                }
                Err((status, refusal)) => {
                    assert!(!harmless(file, name), "{case}: refused: {refusal}");
                    assert_ne!(status.code(), Some(0), "{case}");
                    let named = file.file_name().unwrap().to_str().unwrap();
                    assert!(refusal.contains(named), "{case}: the refusal does not name the file: {refusal}");
                    assert_eq!(code, 1, "{case}: check: {out}");
                    assert!(out.contains(named), "{case}: check does not name the file: {out}");
                }
            }
        }
    }
}

/// A server that flushes to stream files every 100 ms.
fn flushing(dir: &Path) -> Launch {
    Launch {
        shards: 1,
        io_timeout: Duration::from_secs(10),
        ..Launch::logged(&dir.join("server.log"), &["--segment-bytes", SEGMENT, "--flush-interval", "100ms"])
    }
}

/// The same for the checkpoint and the stream files behind it (a large
/// stream's own files, and the bundle a small stream is in): each kind
/// deleted, truncated, halved, or replaced by an older copy (a zero-filled
/// one where no older copy exists) is refused by name, or nothing is lost.
/// The journal since the last checkpoint mostly names no stream here, so
/// after the crash a damaged stream file that is there is found by the
/// first read of what it holds (500 naming it), as after a clean stop; when
/// the journal still holds what the file lacks (a checkpoint is written only
/// when due), every byte must be served.
#[test]
fn every_stream_file_fault_is_refused_by_name_or_loses_nothing() {
    const BUCKETED: &str = "/faults/s";
    const SMALL: &str = "/faults/small";
    let tmp = TempDir::new("stream-file-faults");
    let data = tmp.path().join("data");
    let mut s = Server::launch(&data, flushing(tmp.path()));
    s.req("PUT", "/faults", &[], b"").expect(201);
    s.put(BUCKETED, "text/plain", b"").expect(201);
    s.put(SMALL, "text/plain", b"small").expect(201);
    let snapshot = |s: &Server, at: usize, body: &[u8]| {
        let path = format!("{BUCKETED}/snapshot/{}", common::offset(at as u64));
        s.req("PUT", &path, &[("Content-Type", "text/plain")], body).expect(204);
    };
    let mut acked = Vec::new();
    append_to(&s, BUCKETED, 0, 100, &mut acked);
    snapshot(&s, 50_000, b"first state");
    s.post(SMALL, "text/plain", b" stream").expect(204);
    s.wait_flushed();
    let half_way = files(&data);
    append_to(&s, BUCKETED, 100, 100, &mut acked);
    snapshot(&s, 150_000, b"second state");
    s.post(SMALL, "text/plain", b", grown").expect(204);
    s.wait_flushed();
    s.kill();
    let clean = files(&data);
    assert_eq!(check(&data).0, 0, "a clean data dir: {}", check(&data).1);
    let kind = |suffix: &str| -> PathBuf {
        clean
            .keys()
            .find(|p| p.to_string_lossy().ends_with(suffix))
            .unwrap_or_else(|| panic!("no {suffix} file"))
            .clone()
    };
    let checkpoint = PathBuf::from("shard-0/checkpoint");
    assert!(clean.contains_key(&checkpoint) && half_way[&checkpoint] != clean[&checkpoint]);
    for file in [checkpoint.clone(), kind(".data"), kind(".idx"), kind(".snap"), kind(".bundle")] {
        for (name, fault) in FAULTS {
            let case = format!("{} {name}", file.display());
            restore(&data, &clean);
            fault(&data.join(&file), half_way.get(&file));
            let (code, out) = check(&data);
            match Server::try_launch(&data, flushing(tmp.path())) {
                Ok(mut s) if file == checkpoint => {
                    // Only an older checkpoint whose journal is still whole may start.
                    assert_eq!(name, "older copy", "{case}: the server started: {out}");
                    let (got, tail) = s.read_all(BUCKETED);
                    assert!(tail == acked.len() as u64 && got == acked, "{case}: bytes differ");
                    assert_eq!(s.read_all(SMALL).0, b"small stream, grown", "{case}");
                    let snap = s.get(&format!("{BUCKETED}/snapshot/{}", common::offset(150_000))).expect(200);
                    assert_eq!(snap.body, b"second state", "{case}");
                    s.kill();
                    assert_eq!(code, 0, "{case}: check: {out}");
                }
                Ok(mut s) => {
                    // A missing file is refused by the listing.
                    assert_ne!(name, "deleted", "{case}: the server started: {out}");
                    let named = file.file_name().unwrap().to_str().unwrap();
                    let kind = file.extension().unwrap().to_str().unwrap();
                    let read = match kind {
                        "snap" => s.get(&format!("{BUCKETED}/snapshot/{}", common::offset(150_000))),
                        "bundle" => s.get(SMALL),
                        _ => s.get(BUCKETED),
                    };
                    if read.status == 200 && !out.contains(" 0 records since the checkpoint") {
                        // A checkpoint is written only when due: on a busy box
                        // the last flush's came before the last records, and
                        // the journal since it holds what the file lacks.
                        // Then nothing may be lost.
                        match kind {
                            "snap" => assert_eq!(read.body, b"second state", "{case}"),
                            "bundle" => assert_eq!(read.body, b"small stream, grown", "{case}"),
                            _ => assert!(
                                s.read_all(BUCKETED) == (acked.clone(), acked.len() as u64),
                                "{case}: bytes differ"
                            ),
                        }
                        s.kill();
                        assert_eq!(code, 0, "{case}: check: {out}");
                        continue;
                    }
                    assert_eq!(read.status, 500, "{case}: {}", read.text());
                    assert!(read.text().contains(named), "{case}: the error does not name the file: {}", read.text());
                    s.kill();
                    assert!(code == 1 && out.contains(named), "{case}: check: {out}");
                }
                Err((status, refusal)) => {
                    assert_ne!(status.code(), Some(0), "{case}");
                    let named = file.file_name().unwrap().to_str().unwrap();
                    assert!(refusal.contains(named), "{case}: the refusal does not name the file: {refusal}");
                    assert_eq!(code, 1, "{case}: check: {out}");
                    assert!(out.contains(named), "{case}: check does not name the file: {out}");
                }
            }
        }
    }
}

#[test]
fn check_rejects_a_dir_without_meta_and_bad_usage() {
    let tmp = TempDir::new("check-usage");
    let (code, out) = check(tmp.path());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no sluice.meta"), "{out}");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(["check"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// A burst can roll into several preallocated segments before a crash lets
/// any of their records reach the disk: every blank segment after the newest
/// written one is set aside at start, so none is left between written ones
/// (a later start would take it for a segment that lost its records).
#[test]
fn several_unwritten_segments_after_a_crash_are_set_aside() {
    let tmp = TempDir::new("blank-run");
    let data = tmp.path().join("data");
    let mut s = Server::launch(&data, launch(tmp.path()));
    s.put(STREAM, "text/plain", b"").expect(201);
    let mut acked = Vec::new();
    append(&s, 0, 100, &mut acked);
    s.kill();
    let shard = data.join("shard-0");
    let newest =
        files(&shard).keys().filter_map(|p| p.to_str()?.strip_suffix(".seg")?.parse::<u32>().ok()).max().unwrap();
    for no in newest + 1..newest + 4 {
        std::fs::write(shard.join(format!("{no:010}.seg")), vec![0u8; SEGMENT.parse().unwrap()]).unwrap();
    }
    for round in 0..2 {
        let s = Server::try_launch(&data, launch(tmp.path()))
            .unwrap_or_else(|(_, out)| panic!("round {round}: refused after unwritten segments: {out}"));
        let (got, tail) = s.read_all(STREAM);
        assert!(tail == acked.len() as u64 && got == acked, "round {round}: bytes differ");
        append(&s, 1000 * (round + 1), 150, &mut acked);
        drop(s);
    }
}

/// Issue #9: a first start that failed while preparing its segments (out
/// of space, or killed while zero-filling) leaves what it was preparing
/// behind: a segment cut short (an earlier binary prepared it under its
/// own name) or a temporary file. The next start succeeds, prepares whole
/// segments again and removes the leftovers, and `sluice check` accepts
/// the dir; a real segment the journal needs is still refused when missing.
#[test]
fn a_failed_first_start_leaves_nothing_that_stops_the_next() {
    let tmp = TempDir::new("failed-first");
    let data = tmp.path().join("data");
    let mut s = Server::launch(&data, launch(tmp.path()));
    s.terminate();
    // What a first start that failed during preparation leaves behind.
    let shard = data.join("shard-0");
    for e in std::fs::read_dir(&shard).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            std::fs::remove_file(p).unwrap();
        }
    }
    std::fs::write(shard.join("0000000001.seg"), b"").unwrap();
    std::fs::write(shard.join("0000000002.seg.tmp"), vec![0u8; 8192]).unwrap();
    let size = SEGMENT.parse::<u64>().unwrap();
    let mut acked = Vec::new();
    for round in 0..2 {
        let mut s = Server::try_launch(&data, launch(tmp.path())).unwrap_or_else(|(status, out)| {
            panic!("round {round}: refused after a failed first start ({status}): {out}")
        });
        if round == 0 {
            s.put(STREAM, "text/plain", b"").expect(201);
        }
        append(&s, 100 * round, 10, &mut acked);
        s.terminate();
        let names: Vec<String> =
            files(&shard).keys().map(|p| p.to_str().unwrap().to_string()).filter(|n| n.contains(".seg")).collect();
        for n in &names {
            assert_eq!(std::fs::metadata(shard.join(n)).unwrap().len(), size, "round {round}: {n} is not whole");
        }
        assert!(names.iter().all(|n| n.ends_with(".seg")), "round {round}: leftovers {names:?}");
        let (code, out) = check(&data);
        assert_eq!(code, 0, "round {round}: {out}");
    }
    let s = Server::try_launch(&data, launch(tmp.path())).unwrap_or_else(|(_, out)| panic!("{out}"));
    assert_eq!(s.read_all(STREAM).0, acked);
    drop(s);
    // The segment holding the records is no leftover: missing, it is refused.
    std::fs::remove_file(shard.join("0000000001.seg")).unwrap();
    let (_, out) = Server::try_launch(&data, launch(tmp.path())).err().expect("started without its records");
    assert!(out.contains("0000000001.seg") && out.contains("missing"), "{out}");
}

/// Retention over a stream of small records gives back index pages too (a
/// prefix of zeros): `sluice check` accepts them, a restart serves the
/// retained records by ordinal; a zeroed last page is found by name by
/// `sluice check` and by the first read of a record on it, a zeroed page
/// behind the retained one by `sluice check`.
#[test]
fn retention_punches_index_pages_that_check_and_restart_accept() {
    const J: &str = "/punch/j";
    const JSON: &str = "application/json";
    let tmp = TempDir::new("index-punch");
    let data = tmp.path().join("data");
    let mut s = Server::launch(&data, flushing(tmp.path()));
    s.req("PUT", "/punch", &[], b"").expect(201);
    s.put(J, JSON, b"").expect(201);
    // 64k records of 2-6 bytes ("n\n"): an index of about 17 pages.
    let mut starts = vec![0u64];
    for batch in 0..64 {
        let values: Vec<String> = (batch * 1000..batch * 1000 + 1000).map(|i: u64| i.to_string()).collect();
        s.post(J, JSON, format!("[{}]", values.join(",")).as_bytes()).expect(204);
        for v in &values {
            starts.push(starts.last().unwrap() + v.len() as u64 + 1);
        }
    }
    let find_index = || -> Option<PathBuf> {
        let mut e = std::fs::read_dir(data.join("shard-0/streams")).ok()?.map(|e| e.unwrap().path());
        e.find(|p| p.extension().is_some_and(|x| x == "idx"))
    };
    common::eventually("the records are in the stream files", || {
        find_index().is_some_and(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 16 * 4096))
    });
    let index = || find_index().expect("an index file");
    use std::os::unix::fs::MetadataExt;
    let at = common::offset(starts[60_000]);
    s.req("PUT", &format!("{J}/snapshot/{at}"), &[("Content-Type", "text/plain")], b"state").expect(204);
    s.req("PUT", &format!("{J}/retention/{at}"), &[], b"").expect(204);
    common::eventually("the index pages before the retention are punched", || {
        let m = std::fs::metadata(index()).unwrap();
        m.blocks() * 512 < m.len() / 2
    });
    let read = |s: &Server, r: u64| s.get(&format!("{J}?record={r}&max_records=2")).expect(200).text();
    assert_eq!(read(&s, 60_000), "60000\n60001\n");
    assert_eq!(read(&s, 63_998), "63998\n63999\n");
    s.kill();
    let (code, out) = check(&data);
    assert_eq!(code, 0, "a punched index checks clean: {out}");
    let mut s = Server::launch(&data, flushing(tmp.path()));
    assert_eq!(read(&s, 61_234), "61234\n61235\n", "after a restart");
    s.get(&format!("{J}?record=10&max_records=1")).expect(410);
    s.kill();
    let clean = files(&data);
    let (idx, len) = (index(), std::fs::metadata(index()).unwrap().len());
    let zero_page = |page: u64| {
        let f = std::fs::OpenOptions::new().write(true).open(&idx).unwrap();
        let n = (len - page * 4096).min(4096) as usize;
        std::os::unix::fs::FileExt::write_all_at(&f, &vec![0; n], page * 4096).unwrap();
    };
    let named = idx.file_name().unwrap().to_str().unwrap().to_string();
    zero_page((len - 1) / 4096);
    let (code, out) = check(&data);
    assert!(code == 1 && out.contains(&named), "a zeroed last page: {out}");
    // The journal since the checkpoint names no stream: the start after
    // the crash leaves the page to the first read of a record on it.
    let s = Server::launch(&data, flushing(tmp.path()));
    let r = s.get(&format!("{J}?record=63998&max_records=2"));
    assert!(r.status == 500 && r.text().contains(&named), "the read names the index: {}", r.text());
    drop(s);
    restore(&data, &clean);
    zero_page((len - 1) / 4096 - 1);
    let (code, out) = check(&data);
    assert!(code == 1 && out.contains(&named), "a zeroed page behind the retained one: {out}");
}

/// After a clean stop (SIGTERM) the next start trusts the stream files the
/// checkpoint records (`clean-stop`) and does not list them: a stream file
/// damaged or deleted while the server was down is found by the first read
/// of its stream (an error naming the file, never its bytes), while the
/// other streams serve everything; `sluice check` names it. A snapshot file
/// is checked against its digest when read (one flipped byte is found).
/// The mark is gone once the server started; the crash after it wrote
/// nothing, so the next start refuses only a missing file (it lists the
/// directory) and the first read finds any other damage again.
#[test]
fn after_a_clean_stop_damage_is_found_by_the_first_read_and_by_check() {
    const VICTIM: &str = "/trusted/victim";
    const WITNESS: &str = "/trusted/witness";
    let tmp = TempDir::new("clean-stop-faults");
    let data = tmp.path().join("data");
    let mut s = Server::launch(&data, flushing(tmp.path()));
    s.req("PUT", "/trusted", &[], b"").expect(201);
    s.put(VICTIM, "text/plain", b"").expect(201);
    s.put(WITNESS, "text/plain", b"").expect(201);
    let (mut victim, mut witness) = (Vec::new(), Vec::new());
    append_to(&s, VICTIM, 0, 50, &mut victim);
    append_to(&s, WITNESS, 0, 50, &mut witness);
    let snapshot = format!("{VICTIM}/snapshot/{}", common::offset(victim.len() as u64));
    s.req("PUT", &snapshot, &[("Content-Type", "text/plain")], b"the victim's state").expect(204);
    s.wait_flushed();
    assert!(s.terminate().success(), "a clean stop");
    let mark = data.join("shard-0/clean-stop");
    assert!(mark.exists(), "a clean stop leaves its mark");
    let clean = files(&data);
    assert_eq!(check(&data).0, 0, "a clean data dir: {}", check(&data).1);
    // The victim was created first: its files carry the lower handle.
    let mut streams: Vec<&PathBuf> = clean.keys().filter(|p| p.starts_with("shard-0/streams")).collect();
    // Named by handle (16 hex digits) first: the victim's files sort first of their kind.
    streams.sort();
    let ends = |p: &PathBuf, e: &str| p.extension().unwrap() == e;
    let first = |e: &str| streams.iter().find(|p| ends(p, e)).map(|p| (*p).clone()).expect("a file of each kind");
    let (data_file, index_file, snap_file) = (first("data"), first("idx"), first("snap"));
    let flipped: Fault = |p, _| {
        let mut b = std::fs::read(p).unwrap();
        b[0] ^= 1;
        std::fs::write(p, b).unwrap()
    };
    for file in [data_file, index_file, snap_file] {
        let named = file.file_name().unwrap().to_str().unwrap();
        let read = if ends(&file, "snap") { snapshot.as_str() } else { VICTIM };
        let extra = ends(&file, "snap").then_some(("flipped", flipped));
        for (name, fault) in FAULTS.into_iter().chain(extra) {
            let case = format!("{} {name}", file.display());
            restore(&data, &clean);
            // The older copy of a clean stop's stream file: its first half.
            let half = clean[&file][..clean[&file].len() / 2].to_vec();
            fault(&data.join(&file), Some(&half));
            let (code, out) = check(&data);
            assert!(code == 1 && out.contains(named), "{case}: check: {out}");
            let mut s = Server::try_launch(&data, flushing(tmp.path()))
                .unwrap_or_else(|(_, refusal)| panic!("{case}: refused after a clean stop: {refusal}"));
            assert!(!mark.exists(), "{case}: the mark is removed before serving");
            assert_eq!(s.read_all(WITNESS).0, witness, "{case}: the other stream");
            let r = s.get(read);
            assert_eq!(r.status, 500, "{case}: {}", r.text());
            assert!(r.text().contains(named), "{case}: the error does not name the file: {}", r.text());
            s.kill();
            match Server::try_launch(&data, flushing(tmp.path())) {
                // The listing after a crash finds a missing file.
                Err((_, refusal)) => assert!(name == "deleted" && refusal.contains(named), "{case}: {refusal}"),
                Ok(s) => {
                    assert_ne!(name, "deleted", "{case}: started after a crash");
                    let r = s.get(read);
                    assert!(r.status == 500 && r.text().contains(named), "{case}: after a crash: {}", r.text());
                }
            }
        }
    }
    restore(&data, &clean);
    let mut s = Server::launch(&data, flushing(tmp.path()));
    assert_eq!(s.read_all(VICTIM).0, victim, "undamaged, every byte");
    s.kill();
}

/// After a crash the start checks the files of the streams the journal
/// since the last checkpoint names (a flush may have been cut off in them)
/// and refuses their damage by name; another stream's damaged file is
/// found by its first read, as after a clean stop.
#[test]
fn after_a_crash_the_streams_the_journal_names_are_checked_at_start() {
    const NAMED: &str = "/crashed/named";
    const QUIET: &str = "/crashed/quiet";
    let tmp = TempDir::new("crash-checks");
    let data = tmp.path().join("data");
    let mut s = Server::launch(&data, flushing(tmp.path()));
    s.req("PUT", "/crashed", &[], b"").expect(201);
    // Streams created and deleted first (no bytes, so no files): most
    // handles are of deleted streams, and the start's table of found files
    // is a hash table rather than one indexed by handle.
    for i in 0..20 {
        let gone = format!("/crashed/gone-{i}");
        s.put(&gone, "text/plain", b"").expect(201);
        s.req("DELETE", &gone, &[], b"").expect(204);
    }
    s.put(NAMED, "text/plain", b"").expect(201);
    s.put(QUIET, "text/plain", b"").expect(201);
    let (mut named, mut quiet) = (Vec::new(), Vec::new());
    append_to(&s, NAMED, 0, 50, &mut named);
    append_to(&s, QUIET, 0, 50, &mut quiet);
    s.wait_flushed();
    s.kill();
    // Appends the journal holds and no flush stored: only NAMED is named.
    let mut s = Server::launch(&data, launch(tmp.path()));
    append_to(&s, NAMED, 50, 10, &mut named);
    s.kill();
    let clean = files(&data);
    let mut datas: Vec<&PathBuf> = clean.keys().filter(|p| p.extension().is_some_and(|e| e == "data")).collect();
    // Named by handle: NAMED was created first.
    datas.sort();
    let (named_file, quiet_file) = (datas[0].clone(), datas[1].clone());
    for (file, fault_name, fault) in FAULTS.iter().flat_map(|&(n, f)| [(&named_file, n, f), (&quiet_file, n, f)]) {
        let case = format!("{} {fault_name}", file.display());
        let file_name = file.file_name().unwrap().to_str().unwrap();
        restore(&data, &clean);
        fault(&data.join(file), None);
        match Server::try_launch(&data, flushing(tmp.path())) {
            Err((_, refusal)) => {
                assert!(file == &named_file || fault_name == "deleted", "{case}: refused: {refusal}");
                assert!(refusal.contains(file_name), "{case}: the refusal does not name the file: {refusal}");
            }
            Ok(s) => {
                assert!(file == &quiet_file && fault_name != "deleted", "{case}: started");
                assert_eq!(s.read_all(NAMED).0, named, "{case}: the named stream");
                let r = s.get(QUIET);
                assert!(r.status == 500 && r.text().contains(file_name), "{case}: {}", r.text());
            }
        }
    }
    restore(&data, &clean);
    let s = Server::launch(&data, flushing(tmp.path()));
    assert_eq!(s.read_all(NAMED).0, named, "undamaged, every byte");
    assert_eq!(s.read_all(QUIET).0, quiet, "undamaged, every byte");
}
