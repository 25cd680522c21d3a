//! Shared harness for the integration tests: starts the real `sluice` binary
//! on a free port with its own data directory, and talks to it with a tiny
//! hand-written HTTP/1.1 client over `std::net::TcpStream`.

#![allow(dead_code)]

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long any single socket read may block before the test fails.
pub const IO_TIMEOUT: Duration = Duration::from_secs(8);
/// How long a server may take to answer /v1/healthz after spawning.
const START_TIMEOUT: Duration = Duration::from_secs(5);
/// Log segment size for test servers unless a test picks its own: the 64 MiB
/// default preallocates (zero-fills and syncs) 256 MiB per 2-shard start,
/// which makes parallel tests slow for no extra coverage.
const TEST_SEGMENT_BYTES: &str = "4194304";

static DIR_COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A temporary directory, removed when the last clone of it is dropped (a
/// [`Server`] may hold one, so the directory outlives the server using it).
#[derive(Clone)]
pub struct TempDir(std::sync::Arc<DirGuard>);

/// Removes its directory on drop.
struct DirGuard(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let n = DIR_COUNTER.fetch_add(1, Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("sluice-it-{tag}-{}-{n}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(std::sync::Arc::new(DirGuard(p)))
    }

    pub fn path(&self) -> &Path {
        &self.0 .0
    }
}

impl Drop for DirGuard {
    fn drop(&mut self) {
        if std::env::var_os("KEEP_TMP").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Finds a currently free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().expect("local addr").port()
}

fn sluice_bin() -> &'static str {
    env!("CARGO_BIN_EXE_sluice")
}

/// How a server is started; kept so that a restart uses the same settings.
#[derive(Clone, Debug)]
pub struct Launch {
    pub shards: usize,
    /// Extra command-line flags.
    pub extra: Vec<String>,
    /// Adds `--long-poll-timeout 1s` and `--segment-bytes` [`TEST_SEGMENT_BYTES`]
    /// unless `extra` sets them; without it the server's own defaults apply.
    pub quick_defaults: bool,
    /// Where the server's stdout and stderr go (the file is created afresh
    /// on every start). Without one, stdout is discarded and stderr is kept
    /// for start-up errors.
    pub log: Option<PathBuf>,
    /// How long a start may take to answer /v1/healthz before it counts as
    /// stalled (see STALLS below).
    pub start_timeout: Duration,
    /// Read timeout of the connections `Server::connect` and `Server::req` open.
    pub io_timeout: Duration,
    /// Extra environment variables (e.g. `SLUICE_*` settings).
    pub env: Vec<(String, String)>,
    /// The address given to `--listen` (the port is picked at start);
    /// clients connect to it, or to 127.0.0.1 when it is unspecified (0.0.0.0).
    pub listen_ip: IpAddr,
    /// The open-files limit (soft and hard) the server starts with, if not inherited.
    pub open_files: Option<u64>,
}

impl Launch {
    /// The protocol tests' setup: `shards` shards, a 1 s long-poll timeout and
    /// 4 MiB log segments unless `extra` says otherwise, stderr kept only for
    /// start-up errors, 5 s to start, [`IO_TIMEOUT`] reads.
    pub fn quick(shards: usize, extra: &[&str]) -> Launch {
        Launch {
            shards,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            quick_defaults: true,
            log: None,
            start_timeout: START_TIMEOUT,
            io_timeout: IO_TIMEOUT,
            env: Vec::new(),
            listen_ip: Ipv4Addr::LOCALHOST.into(),
            open_files: None,
        }
    }

    /// The operational tests' setup: 2 shards and the server's own defaults
    /// for whatever `extra` leaves out, stdout and stderr to `log`, 15 s to
    /// start, 15 s reads.
    pub fn logged(log: &Path, extra: &[&str]) -> Launch {
        Launch {
            shards: 2,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            quick_defaults: false,
            log: Some(log.to_path_buf()),
            start_timeout: Duration::from_secs(15),
            io_timeout: Duration::from_secs(15),
            env: Vec::new(),
            listen_ip: Ipv4Addr::LOCALHOST.into(),
            open_files: None,
        }
    }

    /// Where clients reach a server started with this launch on `port`.
    fn client_addr(&self, port: u16) -> SocketAddr {
        let ip = if self.listen_ip.is_unspecified() { Ipv4Addr::LOCALHOST.into() } else { self.listen_ip };
        SocketAddr::new(ip, port)
    }
}

/// A running sluice process, killed (SIGKILL) on drop.
pub struct Server {
    child: Option<Child>,
    pub addr: SocketAddr,
    pub data_dir: PathBuf,
    launch: Launch,
    own_dir: Option<TempDir>,
}

impl Server {
    /// A server with 2 shards, a 1 s long-poll timeout, 4 MiB log segments
    /// and its own data dir.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// As `start`, with extra command-line flags.
    pub fn start_with(extra: &[&str]) -> Server {
        let dir = TempDir::new("srv");
        let mut s = Server::start_in(dir.path(), 2, extra);
        s.own_dir = Some(dir);
        s
    }

    /// Starts on `data_dir` (not removed on drop) with `shards` shards.
    pub fn start_in(data_dir: &Path, shards: usize, extra: &[&str]) -> Server {
        Server::launch(data_dir, Launch::quick(shards, extra))
    }

    /// A [`Launch::logged`] server in its own temporary directory: data in
    /// `DIR/data`, output in `DIR/server.log`.
    pub fn start_logged(extra: &[&str]) -> Server {
        let dir = TempDir::new("logged");
        let mut s = Server::launch(&dir.path().join("data"), Launch::logged(&dir.path().join("server.log"), extra));
        s.own_dir = Some(dir);
        s
    }

    /// Starts on `data_dir` (not removed on drop) as `launch` says; panics
    /// if the server exits instead of starting.
    pub fn launch(data_dir: &Path, launch: Launch) -> Server {
        Server::try_launch(data_dir, launch)
            .unwrap_or_else(|(status, out)| panic!("sluice did not start: exited with {status}: {out}"))
    }

    /// As `launch`; a server that exits instead of starting gives its exit
    /// status and output.
    pub fn try_launch(data_dir: &Path, launch: Launch) -> Result<Server, (ExitStatus, String)> {
        // The port is free when probed but could be taken before sluice binds
        // it; retry with a fresh port if that happens. A start that never
        // answers /v1/healthz is a failure (see `Spawn::Stalled`).
        let mut errors = Vec::new();
        for _ in 0..4 {
            let port = free_port();
            match spawn_ready(data_dir, port, &launch) {
                Ok(child) => return Ok(Server::running(child, data_dir, port, launch)),
                Err(Spawn::Stalled(e)) => panic!("sluice did not start: {e}"),
                Err(Spawn::Exited(status, out)) if out.contains("address already in use") => {
                    errors.push(format!("exited with {status}: {out}"))
                }
                Err(Spawn::Exited(status, out)) => return Err((status, out)),
            }
        }
        panic!("sluice did not start: {errors:#?}");
    }

    /// As `try_launch`, on `port` exactly: a port in use is an error here,
    /// not a reason to try another.
    pub fn try_launch_on(data_dir: &Path, port: u16, launch: Launch) -> Result<Server, (ExitStatus, String)> {
        match spawn_ready(data_dir, port, &launch) {
            Ok(child) => Ok(Server::running(child, data_dir, port, launch)),
            Err(Spawn::Stalled(e)) => panic!("sluice did not start: {e}"),
            Err(Spawn::Exited(status, out)) => Err((status, out)),
        }
    }

    fn running(child: Child, data_dir: &Path, port: u16, launch: Launch) -> Server {
        Server {
            child: Some(child),
            addr: launch.client_addr(port),
            data_dir: data_dir.to_path_buf(),
            launch,
            own_dir: None,
        }
    }

    /// SIGKILLs the process (no graceful shutdown) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends SIGTERM and waits (at most 10 s) for the process to exit.
    pub fn terminate(&mut self) -> ExitStatus {
        self.sigterm(Duration::from_secs(10)).0
    }

    /// Sends SIGTERM and waits at most `limit` for the process to exit;
    /// returns its exit status and how long the exit took.
    pub fn sigterm(&mut self, limit: Duration) -> (ExitStatus, Duration) {
        let mut c = self.child.take().expect("server is running");
        let pid = libc::pid_t::try_from(c.id()).expect("pid fits");
        let started = Instant::now();
        // SAFETY: plain kill(2) on our own child, which has not been reaped.
        let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(sent, 0, "kill -TERM {pid}: {}", std::io::Error::last_os_error());
        loop {
            if let Some(status) = c.try_wait().expect("try_wait") {
                return (status, started.elapsed());
            }
            if started.elapsed() > limit {
                let _ = c.kill();
                let _ = c.wait();
                panic!("sluice did not exit within {limit:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `sig` (e.g. `libc::SIGHUP`) to the running process.
    pub fn signal(&self, sig: libc::c_int) {
        let c = self.child.as_ref().expect("server is running");
        let pid = libc::pid_t::try_from(c.id()).expect("pid fits");
        // SAFETY: plain kill(2) on our own child, which has not been reaped.
        let sent = unsafe { libc::kill(pid, sig) };
        assert_eq!(sent, 0, "kill -{sig} {pid}: {}", std::io::Error::last_os_error());
    }

    /// Kills the process (SIGKILL) and starts a new one on the same data
    /// dir with the same settings (on a new port).
    pub fn restart_after_kill(&mut self) {
        self.kill();
        self.start_again();
    }

    /// Starts a new process on the same data dir after this one stopped.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the old process is still running");
        let mut next = Server::launch(&self.data_dir, self.launch.clone());
        self.addr = next.addr;
        self.child = next.child.take();
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => c.try_wait().ok().flatten().is_none(),
            None => false,
        }
    }

    /// Keeps `dir` (e.g. the one holding its data dir and log) until this
    /// server is dropped, however the test binds or drops its own handle:
    /// a directory removed under a running server fails its writes (503).
    pub fn hold(&mut self, dir: &TempDir) {
        assert!(self.own_dir.is_none(), "the server already holds a directory");
        self.own_dir = Some(dir.clone());
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("server is running").id()
    }

    /// What the server wrote to its log so far (empty without a log).
    pub fn output(&self) -> String {
        self.launch.log.as_deref().map(read_output).unwrap_or_default()
    }

    /// A new keep-alive connection.
    pub fn connect(&self) -> Conn {
        Conn::open_with_timeout(self.addr, self.launch.io_timeout)
    }

    /// One request on a fresh connection.
    pub fn req(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        self.connect().request(method, path, headers, body)
    }

    /// As `req`, with connection and read errors returned instead of panicking.
    pub fn try_req(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> std::io::Result<Resp> {
        let sock = TcpStream::connect(self.addr)?;
        sock.set_read_timeout(Some(self.launch.io_timeout))?;
        Conn::from_stream(sock).try_request(method, path, headers, body)
    }

    pub fn get(&self, path: &str) -> Resp {
        self.req("GET", path, &[], b"")
    }

    /// Waits until every shard's flusher has moved everything appended so
    /// far into stream files behind a checkpoint (`sluice_unflushed_bytes`
    /// is 0 on every shard), so reads come from those files.
    pub fn wait_flushed(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = self.get("/v1/metrics").expect(200).text();
            let unflushed: Vec<f64> = text
                .lines()
                .filter_map(|l| l.strip_prefix("sluice_unflushed_bytes{"))
                .map(|l| l.rsplit(' ').next().unwrap().parse().expect("numeric sample"))
                .collect();
            assert!(!unflushed.is_empty(), "no sluice_unflushed_bytes in:\n{text}");
            if unflushed.iter().all(|&v| v == 0.0) {
                return;
            }
            assert!(Instant::now() < deadline, "the flusher never caught up: {unflushed:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn head(&self, path: &str) -> Resp {
        self.req("HEAD", path, &[], b"")
    }

    pub fn delete(&self, path: &str) -> Resp {
        self.req("DELETE", path, &[], b"")
    }

    /// PUT with a Content-Type and optional initial body.
    pub fn put(&self, path: &str, content_type: &str, body: &[u8]) -> Resp {
        self.req("PUT", path, &[("Content-Type", content_type)], body)
    }

    /// POST with a Content-Type.
    pub fn post(&self, path: &str, content_type: &str, body: &[u8]) -> Resp {
        self.req("POST", path, &[("Content-Type", content_type)], body)
    }

    /// Creates an empty stream; 200 (it already exists alike) is fine too.
    #[track_caller]
    pub fn create(&self, path: &str, content_type: &str) {
        let r = self.put(path, content_type, b"");
        assert!(r.status == 201 || r.status == 200, "PUT {path}: {} {}", r.status, r.text());
    }

    /// The whole stream and the byte position of its tail, following
    /// Stream-Next-Offset until the server says it is up to date.
    #[track_caller]
    pub fn read_all(&self, path: &str) -> (Vec<u8>, u64) {
        self.read_from(path, 0)
    }

    /// [`Server::read_all`] from byte `from` on.
    #[track_caller]
    pub fn read_from(&self, path: &str, from: u64) -> (Vec<u8>, u64) {
        let mut out = Vec::new();
        let mut at = from;
        loop {
            let r = self.get(&format!("{path}?offset={}", offset(at)));
            assert_eq!(r.status, 200, "GET {path}: {}", r.text());
            out.extend_from_slice(&r.body);
            at = offset_pos(&r.next_offset());
            if r.header("stream-up-to-date") == Some("true") {
                return (out, at);
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.child.as_ref().map(Child::id);
        self.kill();
        // A failing test shows what its server logged last: the log file
        // goes with the test's temporary directory.
        if let Some(log) = self.launch.log.as_deref().filter(|_| std::thread::panicking()) {
            let out = read_output(log);
            let lines: Vec<&str> = out.lines().collect();
            let mut tail = lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n");
            if !log.exists() {
                tail = "(the log file is gone: its directory was removed while the server ran)".into();
            }
            eprintln!("--- the last lines of {} (sluice pid {pid:?}) ---\n{tail}\n---", log.display());
        }
    }
}

/// Lines of its server's log a failing test prints.
const LOG_TAIL_LINES: usize = 60;

/// Why a spawn attempt failed.
enum Spawn {
    /// The process never answered /v1/healthz in time: what its threads
    /// were doing (see [`thread_states`]) and its output. A server bug, never
    /// retried: it once hid a start-up hang (an executor parked before the
    /// watchdog could kick it).
    Stalled(String),
    /// The process exited on its own: its status and output.
    Exited(ExitStatus, String),
}

/// Spawns sluice and waits until /v1/healthz answers 200. On an early exit
/// the error carries the process's output.
fn spawn_ready(data_dir: &Path, port: u16, launch: &Launch) -> Result<Child, Spawn> {
    let mut cmd = Command::new(sluice_bin());
    cmd.arg("serve")
        .arg("--listen")
        .arg(SocketAddr::new(launch.listen_ip, port).to_string())
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--shards")
        .arg(launch.shards.to_string());
    let extra = &launch.extra;
    if launch.quick_defaults && !extra.iter().any(|a| a == "--long-poll-timeout") {
        cmd.arg("--long-poll-timeout").arg("1s");
    }
    if launch.quick_defaults && !extra.iter().any(|a| a == "--segment-bytes") {
        cmd.arg("--segment-bytes").arg(TEST_SEGMENT_BYTES);
    }
    cmd.args(extra).envs(launch.env.iter().cloned()).stdin(Stdio::null());
    if let Some(n) = launch.open_files {
        let limit = libc::rlimit { rlim_cur: n, rlim_max: n };
        // SAFETY: between fork and exec, setrlimit only (async-signal-safe).
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    match &launch.log {
        Some(log) => {
            let out = std::fs::File::create(log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
            cmd.stdout(out.try_clone().expect("clone the log handle")).stderr(out);
        }
        None => {
            cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        }
    }
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("sluice did not start: spawn: {e}"));
    let addr = launch.client_addr(port);
    let deadline = Instant::now() + launch.start_timeout;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Err(Spawn::Exited(status, take_output(&mut child, launch)));
        }
        if health_ok(addr) {
            // Keep stderr drained so a chatty server never blocks on the pipe.
            if let Some(mut s) = child.stderr.take() {
                std::thread::spawn(move || {
                    let mut sink = Vec::new();
                    let _ = s.read_to_end(&mut sink);
                });
            }
            return Ok(child);
        }
        if Instant::now() > deadline {
            let threads = thread_states(child.id());
            let _ = child.kill();
            let _ = child.wait();
            let out = take_output(&mut child, launch);
            let limit = launch.start_timeout;
            let msg =
                format!("no 200 from /v1/healthz on port {port} within {limit:?}; threads:{threads}\noutput: {out}");
            return Err(Spawn::Stalled(msg));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What each thread of process `pid` is doing, one line each: its name,
/// scheduler state, kernel wait channel and system call number (426 is
/// `io_uring_enter`), for the failure of a start that stalled.
fn thread_states(pid: u32) -> String {
    let mut out = String::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return out };
    for task in tasks.flatten() {
        let dir = task.path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default().trim().to_string();
        let stat = read("stat");
        let state = stat.rsplit(") ").next().and_then(|s| s.split(' ').next()).unwrap_or("?").to_string();
        let syscall = read("syscall");
        let nr = syscall.split(' ').next().unwrap_or("?");
        let (tid, comm, wchan) = (task.file_name().to_string_lossy().into_owned(), read("comm"), read("wchan"));
        out.push_str(&format!("\n  {tid} {comm}: state {state}, wchan {wchan}, syscall {nr}"));
    }
    out
}

/// The output of a process that has exited: its log, or its piped stderr.
fn take_output(child: &mut Child, launch: &Launch) -> String {
    if let Some(log) = &launch.log {
        return read_output(log);
    }
    let mut err = String::new();
    if let Some(mut s) = child.stderr.take() {
        let _ = s.read_to_string(&mut err);
    }
    err
}

/// A log file's text; at most 1 MiB of it, so that a log on a device such
/// as /dev/full reads as a bounded run of zeros.
fn read_output(log: &Path) -> String {
    let mut out = Vec::new();
    if let Ok(f) = std::fs::File::open(log) {
        let _ = f.take(1 << 20).read_to_end(&mut out);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn health_ok(addr: SocketAddr) -> bool {
    let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    matches!(Conn::from_stream(s).try_request("GET", "/v1/healthz", &[], b""), Ok(r) if r.status == 200)
}

/// Runs sluice to completion (it must exit within 10 s) and returns its
/// exit status and stderr.
pub fn run_to_exit(args: &[&str]) -> (ExitStatus, String) {
    let mut child = Command::new(sluice_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sluice");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            let mut err = String::new();
            if let Some(mut s) = child.stderr.take() {
                let _ = s.read_to_string(&mut err);
            }
            return (status, err);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sluice {args:?} was expected to exit but kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Renders one request. Content-Length is sent for any body, and for POST
/// and PUT even when the body is empty.
pub fn build(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n").into_bytes();
    let mut has_len = false;
    for (n, v) in headers {
        if n.eq_ignore_ascii_case("content-length") || n.eq_ignore_ascii_case("transfer-encoding") {
            has_len = true;
        }
        out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
    }
    if !has_len && (!body.is_empty() || method == "POST" || method == "PUT") {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// A parsed response.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    pub reason: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    pub fn has(&self, name: &str) -> bool {
        self.header(name).is_some()
    }

    /// Header value that must be present.
    pub fn h(&self, name: &str) -> &str {
        self.header(name).unwrap_or_else(|| panic!("missing header {name} in {self:?}"))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("body is not JSON ({e}): {:?}", self.text()))
    }

    /// The Stream-Next-Offset header.
    pub fn next_offset(&self) -> String {
        self.h("stream-next-offset").to_string()
    }

    /// Asserts the status, printing the whole response otherwise.
    #[track_caller]
    pub fn expect(self, status: u16) -> Resp {
        assert_eq!(self.status, status, "unexpected status; headers {:?}, body {:?}", self.headers, self.text());
        self
    }
}

/// One client connection with its own read buffer (for pipelining).
pub struct Conn {
    pub sock: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub fn open(addr: SocketAddr) -> Conn {
        Conn::open_with_timeout(addr, IO_TIMEOUT)
    }

    /// As `open`, with reads that block at most `read_timeout`.
    pub fn open_with_timeout(addr: SocketAddr, read_timeout: Duration) -> Conn {
        let s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        s.set_read_timeout(Some(read_timeout)).expect("timeout");
        s.set_nodelay(true).expect("nodelay");
        Conn::from_stream(s)
    }

    pub fn from_stream(sock: TcpStream) -> Conn {
        Conn { sock, buf: Vec::new() }
    }

    pub fn set_read_timeout(&self, t: Duration) {
        self.sock.set_read_timeout(Some(t)).expect("timeout");
    }

    /// Writes raw bytes.
    pub fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.sock.write_all(bytes)?;
        self.sock.flush()
    }

    /// Sends one request and reads its response.
    #[track_caller]
    pub fn request(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
        self.send(&build(method, path, headers, body)).expect("write request");
        self.read_response(method == "HEAD")
    }

    /// As `request`, with write and read errors returned instead of panicking.
    pub fn try_request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<Resp> {
        self.send(&build(method, path, headers, body))?;
        self.try_read_response(method == "HEAD")
    }

    /// Reads one response; panics on error.
    #[track_caller]
    pub fn read_response(&mut self, head_request: bool) -> Resp {
        match self.try_read_response(head_request) {
            Ok(r) => r,
            Err(e) => panic!("reading response failed: {e}; buffered: {:?}", String::from_utf8_lossy(&self.buf)),
        }
    }

    /// Reads one response. A body is read by Content-Length, or to EOF when
    /// the response has neither a length nor a bodyless status.
    pub fn try_read_response(&mut self, head_request: bool) -> std::io::Result<Resp> {
        let end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i;
            }
            if self.fill()? == 0 {
                return Err(std::io::Error::new(
                    ErrorKind::UnexpectedEof,
                    "connection closed before a full response head",
                ));
            }
        };
        let head = String::from_utf8(self.buf[..end].to_vec()).map_err(|_| bad_data("response head is not UTF-8"))?;
        self.buf.drain(..end + 4);
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("");
        if version != "HTTP/1.1" {
            return Err(bad_data(&format!("bad status line {status_line:?}")));
        }
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad_data(&format!("bad status line {status_line:?}")))?;
        let reason = parts.next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        for line in lines {
            let (n, v) = line.split_once(':').ok_or_else(|| bad_data(&format!("bad header line {line:?}")))?;
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
        let mut resp = Resp { status, reason, headers, body: Vec::new() };
        let bodyless = head_request || status < 200 || status == 204 || status == 304;
        if bodyless {
            return Ok(resp);
        }
        match resp.header("content-length") {
            Some(len) => {
                let len: usize = len.parse().map_err(|_| bad_data("bad content-length"))?;
                while self.buf.len() < len {
                    if self.fill()? == 0 {
                        return Err(std::io::Error::new(ErrorKind::UnexpectedEof, "connection closed mid-body"));
                    }
                }
                resp.body = self.buf.drain(..len).collect();
            }
            None => {
                while self.fill()? > 0 {}
                resp.body = std::mem::take(&mut self.buf);
            }
        }
        Ok(resp)
    }

    /// Reads until `pat` has arrived; returns everything up to and including it.
    pub fn read_until(&mut self, pat: &[u8]) -> std::io::Result<Vec<u8>> {
        loop {
            if let Some(i) = find(&self.buf, pat) {
                return Ok(self.buf.drain(..i + pat.len()).collect());
            }
            if self.fill()? == 0 {
                return Err(std::io::Error::new(
                    ErrorKind::UnexpectedEof,
                    format!(
                        "closed before {:?}; got {:?}",
                        String::from_utf8_lossy(pat),
                        String::from_utf8_lossy(&self.buf)
                    ),
                ));
            }
        }
    }

    /// Reads until the peer closes; returns whatever was still buffered plus the rest.
    pub fn read_to_eof(&mut self) -> std::io::Result<Vec<u8>> {
        while self.fill()? > 0 {}
        Ok(std::mem::take(&mut self.buf))
    }

    /// Bytes received but not yet consumed.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// One read into the buffer. A read interrupted by a signal (the root
    /// tests' `mount` and `chattr` children end with SIGCHLD) is retried.
    fn fill(&mut self) -> std::io::Result<usize> {
        let mut chunk = [0u8; 16 * 1024];
        let n = loop {
            match self.sock.read(&mut chunk) {
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(n)
    }
}

fn bad_data(msg: &str) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, msg.to_string())
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Renders a byte position as an offset token.
pub fn offset(n: u64) -> String {
    format!("0000000000000000_{n:016}")
}

/// The byte position inside an offset token.
pub fn offset_pos(token: &str) -> u64 {
    let (epoch, pos) = token.split_once('_').unwrap_or_else(|| panic!("bad offset token {token:?}"));
    assert_eq!(epoch, "0000000000000000", "offset epoch in {token:?}");
    assert_eq!(pos.len(), 16, "offset width in {token:?}");
    pos.parse().expect("offset digits")
}

/// Every byte value once, in order.
pub fn all_bytes() -> Vec<u8> {
    (0..=255u8).collect()
}

/// Parses SSE events (event name, data joined with '\n') from raw bytes.
pub fn sse_events(raw: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8(raw.to_vec()).expect("SSE is UTF-8");
    let mut out = Vec::new();
    for block in text.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut event = String::new();
        let mut data: Vec<&str> = Vec::new();
        for line in block.lines() {
            if let Some(e) = line.strip_prefix("event:") {
                event = e.trim().to_string();
            } else if let Some(d) = line.strip_prefix("data:") {
                data.push(d.strip_prefix(' ').unwrap_or(d));
            }
        }
        out.push((event, data.join("\n")));
    }
    out
}

/// Waits until `ok` holds, or fails after 10 s naming `what`.
#[track_caller]
pub fn eventually(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The hex SHA-256 of a bearer token, as the tokens file holds it.
pub fn sha256_hex(token: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(token.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes a tokens file (mode 0600) holding the hashes of `scopes`'
/// tokens: (token, bucket pattern, actions).
pub fn write_tokens(path: &Path, scopes: &[(&str, &str, &str)]) {
    let mut text = String::from("# sha256(token)  bucket-pattern  actions\n");
    for (token, pattern, actions) in scopes {
        text.push_str(&format!("{}  {pattern}  {actions}\n", sha256_hex(token)));
    }
    std::fs::write(path, text).expect("write tokens file");
    set_mode(path, 0o600);
}

pub fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}
