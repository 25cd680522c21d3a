//! systemd's service notification protocol (`sd_notify`), without libsystemd:
//! datagrams to the socket `NOTIFY_SOCKET` names. `READY=1` once every shard
//! has recovered and serves, `STOPPING=1` when a stop begins, and, when the
//! unit sets `WatchdogSec=` (`WATCHDOG_USEC`), `WATCHDOG=1` only while every
//! shard's loop keeps beating (the executor watchdog's check), so systemd
//! restarts a server whose shard is stuck, not one that is merely idle.
//! Without `NOTIFY_SOCKET` (not under systemd) every call does nothing.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Where notifications go, and how often the watchdog wants to hear.
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    watchdog: Option<Duration>,
    last_ping: Mutex<Option<Instant>>,
}

impl Notifier {
    /// Reads `NOTIFY_SOCKET` and `WATCHDOG_USEC` (honoured when
    /// `WATCHDOG_PID` is unset or names this process).
    pub fn from_env() -> Notifier {
        let target = std::env::var_os("NOTIFY_SOCKET").and_then(|path| {
            let addr = match path.as_encoded_bytes().strip_prefix(b"@") {
                Some(name) => SocketAddr::from_abstract_name(name),
                None => SocketAddr::from_pathname(&path),
            };
            match (UnixDatagram::unbound(), addr) {
                (Ok(sock), Ok(addr)) => Some((sock, addr)),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::warn!(error = %e, "NOTIFY_SOCKET is set but unusable; no systemd notifications");
                    None
                }
            }
        });
        let ours = std::env::var("WATCHDOG_PID").map_or(true, |p| p.parse() == Ok(std::process::id()));
        let watchdog = std::env::var("WATCHDOG_USEC")
            .ok()
            .and_then(|u| u.parse::<u64>().ok())
            .filter(|&u| u > 0 && ours)
            .map(Duration::from_micros);
        Notifier { target, watchdog, last_ping: Mutex::new(None) }
    }

    /// Every shard serves.
    pub fn ready(&self) {
        self.send("READY=1\nSTATUS=serving");
    }

    /// A stop began (SIGTERM or SIGINT).
    pub fn stopping(&self) {
        self.send("STOPPING=1\nSTATUS=stopping: finishing in-flight requests");
    }

    /// Every shard beat since the last check: tells systemd's watchdog, at
    /// most twice per `WatchdogSec=`.
    pub fn alive(&self) {
        let Some(every) = self.watchdog else { return };
        let now = Instant::now();
        let mut last = self.last_ping.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_some_and(|at| now.duration_since(at) < every / 2) {
            return;
        }
        *last = Some(now);
        drop(last);
        self.send("WATCHDOG=1");
    }

    fn send(&self, msg: &str) {
        if let Some((sock, addr)) = &self.target {
            if let Err(e) = sock.send_to_addr(msg.as_bytes(), addr) {
                tracing::warn!(error = %e, "cannot notify systemd");
            }
        }
    }
}
