//! Process start-up and shutdown: data directory checks, listener sockets,
//! one pinned glommio executor per shard, signals (SIGTERM/SIGINT stop,
//! SIGHUP reloads), and the start/stop/refused log events.

use crate::auth::Access;
use crate::config::{Config, HostLimits};
use crate::dirlock::DirLock;
use crate::edge_limits::{BIND_RETRY, BIND_WAIT, MAX_SHARDS_PER_CORE, START_POLL, STOP_MARGIN};
use crate::mesh::Message;
use crate::notify::Notifier;
use crate::reload::Reloads;
use crate::shard;
use crate::start_error::StartError;
use crate::watchdog;
use glommio::channels::channel_mesh::MeshBuilder;
use glommio::{LocalExecutorBuilder, Placement};
use sluice_shards::log::FsyncMode;
use std::io::Write;
use std::os::fd::IntoRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// File in the data directory that pins the shard count.
const META_FILE: &str = "sluice.meta";

/// Runs the server until SIGTERM/SIGINT, logging start, refusal and stop.
/// Start-up problems are logged as one `refused to start` line; the error
/// is the process's exit status.
pub fn run(mut cfg: Config) -> Result<(), i32> {
    // glommio opens directories through io_uring, where a relative path does
    // not resolve: every path the shards use starts from an absolute one.
    cfg.data_dir = std::path::absolute(&cfg.data_dir)
        .map_err(|e| refused_to_start(format!("cannot resolve data dir {}: {e}", cfg.data_dir.display()).into()))?;
    crate::metrics::mark_start();
    sluice_shards::heap::configure();
    let host = HostLimits::read();
    let warnings = cfg.check(&host).map_err(refused_to_start)?;
    for w in warnings {
        tracing::warn!("{w}");
    }
    for name in crate::config::unknown_variables(std::env::vars().map(|(k, _)| k)) {
        tracing::warn!(variable = %name, "unknown setting ignored: no flag reads {name} (see sluice serve --help)");
    }
    sluice_shards::tick::set_time_scale(cfg.test_time_scale);
    if cfg.test_time_scale > 1 {
        tracing::warn!(scale = cfg.test_time_scale, "test-only time scale: periodic tasks run faster than in service");
    }
    let started = Instant::now();
    let backup = crate::tier::prepare(&cfg.tier, &cfg.data_dir, cfg.shards)
        .map_err(|e| refused_to_start(e.to_string().into()))?;
    let notifier = Arc::new(Notifier::from_env());
    let running = match start(&cfg, &host, &notifier).map_err(refused_to_start)? {
        Started::Running(r) => r,
        Started::Stopped(signal) => {
            // Every step of a start survives being cut short, as a crash
            // would cut it: the next start resumes from what is on disk.
            tracing::info!(signal, "stopped during start-up, before serving");
            return Ok(());
        }
    };
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        listen = %cfg.listen,
        shards = cfg.shards,
        data_dir = %cfg.data_dir.display(),
        fsync = if cfg.fsync == FsyncMode::Always { "always" } else { "never" },
        recovery_ms = running.recovered.replay.as_millis() as u64,
        ready_ms = started.elapsed().as_millis() as u64,
        torn_bytes_repaired = running.recovered.torn_bytes,
        "started"
    );
    running.access.log_mode(cfg.listen.ip().is_loopback());
    // After recovery: the backup reads the data dir only once the shards own it.
    let backup = backup.map(crate::tier::backup::Backup::start);
    notifier.ready();
    let signal = wait_for_stop(&running.signals, || {
        running.access.reload();
        running.reloads.request();
    });
    tracing::info!(
        signal,
        drain_timeout_ms = cfg.drain_timeout.as_millis() as u64,
        "stopping: live readers told to reconnect, finishing in-flight requests"
    );
    notifier.stopping();
    if let Some(b) = backup {
        b.stop();
    }
    let stopping = Instant::now();
    running.shutdown.store(true, Ordering::SeqCst);
    let (done_tx, done_rx) = mpsc::channel();
    let handles = running.handles;
    std::thread::spawn(move || {
        for h in handles {
            let _ = h.join();
        }
        let _ = done_tx.send(());
    });
    let limit = cfg.drain_timeout + STOP_MARGIN;
    if done_rx.recv_timeout(limit).is_err() {
        tracing::error!(limit_ms = limit.as_millis() as u64, "shards did not stop in time; exiting anyway");
        return Err(1);
    }
    tracing::info!(took_ms = stopping.elapsed().as_millis() as u64, "stopped");
    Ok(())
}

/// Logs the one `refused to start` line; the process's exit status.
fn refused_to_start(reason: StartError) -> i32 {
    tracing::error!(%reason, "refused to start");
    1
}

/// A started server: its executors and what stops them.
struct Running {
    handles: Vec<std::thread::JoinHandle<()>>,
    shutdown: Arc<AtomicBool>,
    signals: libc::sigset_t,
    access: Arc<Access>,
    reloads: Arc<Reloads>,
    /// The slowest shard's replay time and the torn bytes of all shards.
    recovered: shard::Recovered,
    /// Held until the process exits: no second sluice on this data dir.
    _lock: DirLock,
    /// The listening address, this process's alone ([`crate::port_claim`]).
    _claim: Option<crate::port_claim::Claim>,
}

/// How a start ended, when it was not refused.
enum Started {
    Running(Running),
    /// SIGTERM or SIGINT (named) arrived while the shards were recovering
    /// or preparing segments.
    Stopped(&'static str),
}

/// Prepares the data dir, binds, starts every shard and waits for their
/// recovery, or for SIGTERM/SIGINT, whichever comes first.
fn start(cfg: &Config, host: &HostLimits, notifier: &Arc<Notifier>) -> Result<Started, StartError> {
    let mut access = Access::from_config(cfg)?;
    let lock = prepare_data_dir(&cfg.data_dir, cfg.shards, host)?;
    access.load_read_key(&cfg.data_dir)?;
    let access = Arc::new(access);
    let claim = crate::port_claim::claim(cfg.listen)?;
    drop(bind_exclusive(cfg)?);
    let mut listeners = Vec::with_capacity(cfg.shards);
    for _ in 0..cfg.shards {
        listeners.push(bind(cfg, true).map_err(|e| bind_error(cfg, e))?);
    }
    let signals = block_signals();
    let cpus = allowed_cpus();
    let mesh = MeshBuilder::<Message, glommio::channels::channel_mesh::Full>::full(cfg.shards, 4096);
    let shutdown = Arc::new(AtomicBool::new(false));
    let synced = Arc::new(AtomicUsize::new(0));
    let drained = Arc::new(AtomicUsize::new(0));
    let reloads = Arc::new(Reloads::default());
    let (ready_tx, ready_rx) = mpsc::channel::<Result<shard::Recovered, StartError>>();
    let mut handles = Vec::new();
    let mut pulses = Vec::new();
    // Before the shards: the delivery threads must not inherit a shard's core.
    let mut subs = crate::subscriptions::boot(&cfg.data_dir, cfg.shards, cfg.allow_local_webhooks)?.into_iter();
    for (i, listener) in listeners.into_iter().enumerate() {
        let cfg = cfg.clone();
        let mesh = mesh.clone();
        let pulse = Arc::new(watchdog::Pulse::default());
        pulses.push(pulse.clone());
        let start = shard::Startup {
            ready: ready_tx.clone(),
            synced: synced.clone(),
            drained: drained.clone(),
            shutdown: shutdown.clone(),
            pulse,
            access: access.clone(),
            reloads: reloads.clone(),
            subs: subs.next().expect("one subscription boot per shard"),
        };
        let fd = listener.into_raw_fd();
        let builder = LocalExecutorBuilder::new(Placement::Fixed(cpus[i % cpus.len()])).io_memory(cfg.io_memory);
        let (made_tx, made_rx) = mpsc::channel::<()>();
        let h = std::thread::Builder::new()
            .name(format!("shard-{i}-exec"))
            .spawn(move || {
                // Registered before the executor exists: glommio's run loop
                // can park before it first polls the shard (a completion of
                // its preemption timer in the latency ring, under CPU
                // contention), and only the watchdog's kick wakes it then.
                start.pulse.register_current_thread();
                let made = builder.make();
                let _ = made_tx.send(());
                match made {
                    Ok(ex) => {
                        // This thread's rings exist now: cap their workers.
                        sluice_shards::iowq::cap_workers();
                        ex.run(shard::run(i, cfg, fd, mesh, start))
                    }
                    Err(e) => {
                        let why = format!("cannot start shard {i} executor (io_uring or locked memory): {e}");
                        let _ = start.ready.send(Err(why.into()));
                    }
                }
            })
            .map_err(|e| format!("cannot start shard {i} thread: {e}"))?;
        // One executor made at a time: glommio numbers executors in the
        // order they are made and the cross-shard mesh orders its peers by
        // that number, so shard i must be the i-th made.
        let _ = made_rx.recv();
        handles.push(h);
    }
    drop(ready_tx);
    let alive = notifier.clone();
    watchdog::start(pulses, move || alive.alive());
    let mut recovered = shard::Recovered { replay: Duration::ZERO, torn_bytes: 0 };
    let mut ready = 0;
    while ready < cfg.shards {
        if let Some(signal) = stop_requested() {
            return Ok(Started::Stopped(signal));
        }
        match ready_rx.recv_timeout(START_POLL) {
            Ok(Ok(r)) => {
                recovered.replay = recovered.replay.max(r.replay);
                recovered.torn_bytes += r.torn_bytes;
                ready += 1;
            }
            Ok(Err(e)) => return Err(e),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err("a shard stopped during start-up (io_uring or locked memory failure?)".into())
            }
        }
    }
    Ok(Started::Running(Running { handles, shutdown, signals, access, reloads, recovered, _lock: lock, _claim: claim }))
}

/// The CPUs this process may run on (taskset, systemd CPUAffinity=, a
/// container's cpuset), ascending: shard i is pinned to the i-th of them.
/// CPU 0 alone if the mask cannot be read.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity(2) fills the zeroed set we own; CPU_ISSET reads it.
    let cpus: Vec<usize> = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    };
    if cpus.is_empty() {
        vec![0]
    } else {
        cpus
    }
}

/// The shard count `sluice.meta` of `dir` records; `None` when there is no such file.
pub fn read_shard_count(dir: &Path) -> Result<Option<usize>, String> {
    let meta = dir.join(META_FILE);
    match std::fs::read_to_string(&meta) {
        Ok(text) => text
            .lines()
            .find_map(|l| l.strip_prefix("shards = "))
            .and_then(|v| v.trim().parse::<usize>().ok())
            .map(Some)
            .ok_or_else(|| format!("{} is damaged: no 'shards = N' line", meta.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", meta.display())),
    }
}

/// Creates or checks the data directory and locks it for this process.
fn prepare_data_dir(dir: &Path, shards: usize, host: &HostLimits) -> Result<DirLock, StartError> {
    let unwritable = |e: std::io::Error| format!("data dir {} is not writable: {e}", dir.display());
    if dir.exists() && !dir.is_dir() {
        return Err(format!("data dir {} is a file, not a directory", dir.display()).into());
    }
    std::fs::create_dir_all(dir).map_err(unwritable)?;
    let lock = DirLock::acquire(dir)?;
    // A start killed while preparing segments left them unfinished; on a
    // full disk they hold the space even the probe below needs.
    for i in 0..shards {
        let shard = dir.join(format!("shard-{i}"));
        if shard.is_dir() {
            sluice_shards::log::segment::remove_unfinished(&shard).map_err(unwritable)?;
        }
    }
    let probe = dir.join(".write-probe");
    std::fs::write(&probe, b"probe").map_err(unwritable)?;
    let _ = std::fs::remove_file(&probe);
    let meta = dir.join(META_FILE);
    match read_shard_count(dir) {
        Ok(Some(found)) => {
            if found > host.max_shards() {
                return Err(format!(
                    "data dir {} was created with {found} shards, but this host runs at most {} \
                     ({MAX_SHARDS_PER_CORE} per core, {}): start it where at least {} CPUs are usable",
                    dir.display(),
                    host.max_shards(),
                    host.cpus(),
                    found.div_ceil(MAX_SHARDS_PER_CORE)
                )
                .into());
            }
            if found != shards {
                return Err(format!(
                    "data dir {} was created with {found} shards; start with --shards {found} (asked for {shards})",
                    dir.display()
                )
                .into());
            }
        }
        Ok(None) => {
            let orphans = shard_dirs(dir).map_err(unwritable)?;
            if orphans > 0 {
                return Err(format!(
                    "data dir {} has {orphans} shard directories but no {META_FILE}: restore it \
                     (a line 'shards = {orphans}') instead of starting afresh, which would hide streams",
                    dir.display()
                )
                .into());
            }
            let tmp = dir.join(".sluice.meta.tmp");
            let mut f = std::fs::File::create(&tmp).map_err(unwritable)?;
            writeln!(f, "# written by sluice at first start; the shard count cannot change\nshards = {shards}")
                .map_err(unwritable)?;
            f.sync_all().map_err(unwritable)?;
            std::fs::rename(&tmp, &meta).map_err(unwritable)?;
            std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(unwritable)?;
        }
        Err(e) => return Err(e.into()),
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

/// Binds the port once without SO_REUSEPORT, which would let this process
/// share it with another sluice: a port in use is refused. A predecessor
/// killed a moment ago (SIGKILL, then a supervisor's restart) still holds
/// its listeners while the kernel tears down its io_uring rings (their
/// pending accepts hold the sockets: 5-11 ms here, 0.3 s reported in issue
/// #8), and SO_REUSEADDR does not cover a listening socket, so a port in
/// use is retried for [`BIND_WAIT`] before it is refused. Joining the dying
/// listeners with SO_REUSEPORT instead would hand connections to a dead
/// process.
fn bind_exclusive(cfg: &Config) -> Result<socket2::Socket, StartError> {
    let deadline = Instant::now() + BIND_WAIT;
    loop {
        match bind(cfg, false) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                std::thread::sleep(BIND_RETRY);
            }
            r => return r.map_err(|e| bind_error(cfg, e).into()),
        }
    }
}

fn bind(cfg: &Config, reuse_port: bool) -> std::io::Result<socket2::Socket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let addr = cfg.listen;
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(reuse_port)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s)
}

fn bind_error(cfg: &Config, e: std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => format!("cannot listen on {}: address already in use", cfg.listen),
        _ => format!("cannot listen on {}: {e}", cfg.listen),
    }
}

/// Blocks SIGTERM, SIGINT and SIGHUP in this thread and every thread
/// spawned after it, so only `wait_for_stop` sees them.
fn block_signals() -> libc::sigset_t {
    // SAFETY: plain signal-mask calls on a set we own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Waits for SIGTERM or SIGINT and names it. SIGHUP does not stop the
/// server: it is logged and runs `reload` (the tokens file, then every
/// shard's reload signal).
fn wait_for_stop(set: &libc::sigset_t, reload: impl Fn()) -> &'static str {
    loop {
        let mut sig = 0;
        // SAFETY: sigwait(3) on a set that is blocked in every thread.
        unsafe {
            libc::sigwait(set, &mut sig);
        }
        match stop_name(sig) {
            Some(name) => return name,
            None => {
                tracing::info!(signal = "SIGHUP", "reload requested; the server keeps running");
                reload();
            }
        }
    }
}

/// Takes a pending SIGTERM or SIGINT (blocked by [`block_signals`]) without
/// waiting, and names it; a pending SIGHUP stays for [`wait_for_stop`].
fn stop_requested() -> Option<&'static str> {
    // SAFETY: plain signal-set calls on a set we own; sigtimedwait(2) with a
    // zero timeout only takes a signal that is already pending.
    let sig = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        libc::sigtimedwait(&set, std::ptr::null_mut(), &now)
    };
    stop_name(sig)
}

fn stop_name(sig: libc::c_int) -> Option<&'static str> {
    match sig {
        libc::SIGTERM => Some("SIGTERM"),
        libc::SIGINT => Some("SIGINT"),
        _ => None,
    }
}
