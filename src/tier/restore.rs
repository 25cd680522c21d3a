//! `sluice restore --from s3://BUCKET/PREFIX --data-dir NEW`: rebuilds a data
//! dir from the newest manifest alone (see [`super::layout`]), into a
//! temporary directory beside NEW that is renamed to NEW once every file is
//! written and synced, so an interrupted restore leaves no data dir a
//! server would start on. The server's own recovery then runs as after a
//! crash at the moment the manifest's journal positions were taken.

use super::args::RestoreArgs;
use super::client::Remote;
use super::layout::{self, Manifest, MANIFESTS};
use crate::tier::error::TierError;
use sluice_shards::log::marks;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// object_store's retries per request during a restore (nothing else waits on it).
const RESTORE_RETRIES: usize = 10;

/// Runs the command; returns the process's exit status.
pub fn run(args: &RestoreArgs) -> i32 {
    match restore(args) {
        Ok(summary) => {
            let _ = writeln!(std::io::stdout(), "{summary}");
            0
        }
        Err(why) => {
            let _ = writeln!(std::io::stderr(), "sluice restore: {why}");
            1
        }
    }
}

fn restore(args: &RestoreArgs) -> Result<String, TierError> {
    let target = std::path::absolute(&args.data_dir).map_err(|e| format!("{}: {e}", args.data_dir.display()))?;
    match std::fs::read_dir(&target).map(|mut entries| entries.next().is_some()) {
        Ok(true) => {
            return Err(format!("{}: exists and is not empty (restore makes a new data dir)", target.display()).into())
        }
        Ok(false) => std::fs::remove_dir(&target).map_err(|e| format!("{}: {e}", target.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", target.display()).into()),
    }
    let started = std::time::Instant::now();
    let remote = Remote::new(&args.from, &args.store, RESTORE_RETRIES)?;
    let newest = remote.list(MANIFESTS)?.iter().filter_map(|k| layout::manifest_seq(k)).max();
    let seq = newest.ok_or_else(|| format!("no backup at {}: no manifest under {MANIFESTS}/", args.from))?;
    let manifest = Manifest::decode(&remote.get(&layout::manifest_key(seq))?)?;
    let name = target.file_name().ok_or("the data dir needs a name")?.to_string_lossy().to_string();
    let temp = target.with_file_name(format!(".{name}.restoring-{}", std::process::id()));
    let result = write_all(&remote, &manifest, &temp).and_then(|bytes| {
        std::fs::rename(&temp, &target).map_err(|e| format!("{}: {e}", target.display()))?;
        sync_dir(target.parent().unwrap_or(Path::new("/")))?;
        Ok(bytes)
    });
    match result {
        Ok(bytes) => Ok(format!(
            "restored {} files ({bytes} bytes) into {} from {} in {} ms (cycle {seq}, taken at Unix ms {}: every \
             append acknowledged before then is back)",
            manifest.files.len(),
            target.display(),
            args.from,
            started.elapsed().as_millis(),
            manifest.taken_unix_ms
        )),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&temp);
            Err(e)
        }
    }
}

/// Writes every file of `m` under `dir`; returns the bytes downloaded.
fn write_all(remote: &Remote, m: &Manifest, dir: &Path) -> Result<u64, TierError> {
    let mut open: HashMap<&str, File> = HashMap::new();
    for (rel, f) in &m.files {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("a file has a parent")).map_err(|e| format!("{rel}: {e}"))?;
        let file = File::create(&path).map_err(|e| format!("{rel}: {e}"))?;
        file.set_len(f.size).map_err(|e| format!("{rel}: {e}"))?;
        open.insert(rel.as_str(), file);
    }
    // Packs in cycle order, each downloaded once; a file's extents are in
    // cycle order too, so later bytes land over earlier ones.
    let mut by_pack: BTreeMap<&str, Vec<(&str, &layout::Extent)>> = BTreeMap::new();
    for (rel, f) in &m.files {
        for e in &f.extents {
            by_pack.entry(e.pack.as_str()).or_default().push((rel.as_str(), e));
        }
    }
    let mut downloaded = 0;
    for (pack, extents) in by_pack {
        let body = remote.get(pack)?;
        downloaded += body.len() as u64;
        for (rel, e) in extents {
            let end = e.pack_offset.checked_add(e.len).filter(|&end| end <= body.len() as u64);
            let end = end.ok_or_else(|| format!("{pack}: shorter than the manifest says"))?;
            // A file cut back after an extent was shipped (a torn flush
            // undone) keeps only what lies below its size.
            let keep = e.len.min(m.files[rel].size.saturating_sub(e.file_offset));
            let bytes = &body[e.pack_offset as usize..(end - e.len + keep) as usize];
            open[rel].write_all_at(bytes, e.file_offset).map_err(|err| format!("{rel}: {err}"))?;
        }
    }
    for (i, j) in m.journals.iter().enumerate() {
        let shard = dir.join(format!("shard-{i}"));
        if shard.is_dir() {
            // The head as of the journal positions, not of the later moment its file was copied.
            std::fs::write(shard.join(marks::LOG_HEAD), marks::head_file(j.head))
                .map_err(|e| format!("log-head: {e}"))?;
        }
    }
    for (rel, f) in open {
        f.sync_all().map_err(|e| format!("{rel}: {e}"))?;
    }
    let mut dirs: Vec<PathBuf> = m.files.keys().filter_map(|r| dir.join(r).parent().map(Path::to_path_buf)).collect();
    dirs.sort();
    dirs.dedup();
    for d in dirs {
        sync_dir(&d)?;
    }
    sync_dir(dir)?;
    Ok(downloaded)
}

fn sync_dir(d: &Path) -> Result<(), TierError> {
    File::open(d).and_then(|f| f.sync_all()).map_err(|e| format!("{}: {e}", d.display()).into())
}
