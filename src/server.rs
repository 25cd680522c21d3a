//! Process start-up and shutdown: data directory checks, listener sockets,
//! one pinned glommio executor per shard, and SIGTERM/SIGINT handling.

use crate::config::Config;
use crate::dirlock::DirLock;
use crate::mesh::Message;
use crate::shard;
use crate::watchdog;
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::{LocalExecutorBuilder, Placement};
use std::io::Write;
use std::os::fd::IntoRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// File in the data directory that pins the shard count.
const META_FILE: &str = "sluice.meta";

/// Runs the server until SIGTERM/SIGINT. Start-up problems come back as one line.
pub fn run(cfg: Config) -> Result<(), String> {
    let _lock = prepare_data_dir(&cfg.data_dir, cfg.shards)?;
    // SO_REUSEPORT would let this process share a port with another sluice:
    // bind once without it first, so a port in use is refused.
    drop(bind(&cfg, false)?);
    let mut listeners = Vec::with_capacity(cfg.shards);
    for _ in 0..cfg.shards {
        listeners.push(bind(&cfg, true)?);
    }
    let signals = block_signals();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mesh = MeshBuilder::<Message, glommio::channels::channel_mesh::Full>::full(cfg.shards, 4096);
    let shutdown = Arc::new(AtomicBool::new(false));
    let synced = Arc::new(AtomicUsize::new(0));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let mut handles = Vec::new();
    let mut pulses = Vec::new();
    for (i, listener) in listeners.into_iter().enumerate() {
        let cfg = cfg.clone();
        let mesh = mesh.clone();
        let pulse = Arc::new(watchdog::Pulse::default());
        pulses.push(pulse.clone());
        let start =
            shard::Startup { ready: ready_tx.clone(), synced: synced.clone(), shutdown: shutdown.clone(), pulse };
        let fd = listener.into_raw_fd();
        let h = LocalExecutorBuilder::new(Placement::Fixed(i % cores))
            .name(&format!("shard-{i}"))
            .io_memory(cfg.io_memory)
            .spawn(move || shard::run(i, cfg, fd, mesh, start))
            .map_err(|e| format!("cannot start shard {i} executor (io_uring or locked memory): {e}"))?;
        handles.push(h);
    }
    drop(ready_tx);
    watchdog::start(pulses);
    for _ in 0..cfg.shards {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err("a shard stopped during start-up (io_uring or locked memory failure?)".into()),
        }
    }
    // Not println!/eprintln!: they panic when the output is a closed pipe or a
    // full disk, and the shards are already serving.
    let _ = writeln!(
        std::io::stdout(),
        "sluice listening on http://{} with {} shards, data in {} (fsync {:?})",
        cfg.listen,
        cfg.shards,
        cfg.data_dir.display(),
        cfg.fsync
    );
    let _ = std::io::stdout().flush();
    wait_for_signal(&signals);
    let _ = writeln!(std::io::stderr(), "sluice: shutting down (finishing in-flight requests)");
    shutdown.store(true, Ordering::SeqCst);
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for h in handles {
            let _ = h.join();
        }
        let _ = done_tx.send(());
    });
    if done_rx.recv_timeout(Duration::from_secs(30)).is_err() {
        return Err("shards did not stop within 30s".into());
    }
    Ok(())
}

/// Creates or checks the data directory and locks it for this process.
fn prepare_data_dir(dir: &Path, shards: usize) -> Result<DirLock, String> {
    let unwritable = |e: std::io::Error| format!("data dir {} is not writable: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(unwritable)?;
    let lock = DirLock::acquire(dir)?;
    let probe = dir.join(".write-probe");
    std::fs::write(&probe, b"probe").map_err(unwritable)?;
    let _ = std::fs::remove_file(&probe);
    let meta = dir.join(META_FILE);
    match std::fs::read_to_string(&meta) {
        Ok(text) => {
            let found = text
                .lines()
                .find_map(|l| l.strip_prefix("shards = "))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .ok_or_else(|| format!("{} is damaged: no 'shards = N' line", meta.display()))?;
            if found != shards {
                return Err(format!(
                    "data dir {} was created with {found} shards; start with --shards {found} (asked for {shards})",
                    dir.display()
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let orphans = shard_dirs(dir).map_err(unwritable)?;
            if orphans > 0 {
                return Err(format!(
                    "data dir {} has {orphans} shard directories but no {META_FILE}: restore it \
                     (a line 'shards = {orphans}') instead of starting afresh, which would hide streams",
                    dir.display()
                ));
            }
            let tmp = dir.join(".sluice.meta.tmp");
            let mut f = std::fs::File::create(&tmp).map_err(unwritable)?;
            writeln!(f, "# written by sluice at first start; the shard count cannot change\nshards = {shards}")
                .map_err(unwritable)?;
            f.sync_all().map_err(unwritable)?;
            std::fs::rename(&tmp, &meta).map_err(unwritable)?;
            std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(unwritable)?;
        }
        Err(e) => return Err(unwritable(e)),
    }
    for i in 0..shards {
        std::fs::create_dir_all(dir.join(format!("shard-{i}"))).map_err(unwritable)?;
    }
    Ok(lock)
}

/// How many `shard-N` directories `dir` holds.
fn shard_dirs(dir: &Path) -> std::io::Result<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let numbered = name.to_str().and_then(|s| s.strip_prefix("shard-")).is_some_and(|i| i.parse::<usize>().is_ok());
        if numbered && entry.file_type()?.is_dir() {
            n += 1;
        }
    }
    Ok(n)
}

fn bind(cfg: &Config, reuse_port: bool) -> Result<socket2::Socket, String> {
    use socket2::{Domain, Protocol, Socket, Type};
    let addr = cfg.listen;
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| format!("cannot create socket: {e}"))?;
    s.set_reuse_address(true).map_err(|e| format!("SO_REUSEADDR: {e}"))?;
    s.set_reuse_port(reuse_port).map_err(|e| format!("SO_REUSEPORT: {e}"))?;
    s.bind(&addr.into()).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => format!("cannot listen on {addr}: address already in use"),
        _ => format!("cannot listen on {addr}: {e}"),
    })?;
    s.listen(1024).map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    Ok(s)
}

/// Blocks SIGTERM/SIGINT in this thread and every thread spawned after it.
fn block_signals() -> libc::sigset_t {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_for_signal(set: &libc::sigset_t) {
    let mut sig = 0;
    unsafe {
        libc::sigwait(set, &mut sig);
    }
}
