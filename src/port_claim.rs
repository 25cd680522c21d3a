//! A claim on the listening address for the process's whole life, so two
//! sluice processes never share a port. The shards' listeners use
//! `SO_REUSEPORT`, which lets any process of the same user join a port, and
//! the exclusive bind that checks the port is free (`server::bind_exclusive`)
//! is closed before they bind: two servers starting together could both
//! pass it and split the connections between them. The claim is a Unix
//! socket in the abstract namespace named after the address: scoped to the
//! network namespace as the port is, and released by the kernel when the
//! process ends, however it ends. It is taken before the check.

use crate::edge_limits::{BIND_RETRY, BIND_WAIT};
use crate::start_error::StartError;
use std::net::SocketAddr;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener};
use std::time::Instant;

/// Held while the process serves `listen`; dropping it gives the address back.
pub struct Claim {
    _socket: UnixListener,
}

/// The abstract socket name that stands for `listen`.
pub fn name(listen: SocketAddr) -> String {
    format!("sluice-listen-{listen}")
}

/// Claims `listen`, waiting up to [`BIND_WAIT`] for a predecessor that is
/// still exiting; `None` for port 0 (every such server gets its own port).
pub fn claim(listen: SocketAddr) -> Result<Option<Claim>, StartError> {
    if listen.port() == 0 {
        return Ok(None);
    }
    let addr =
        UnixAddr::from_abstract_name(name(listen).as_bytes()).map_err(|e| format!("cannot claim {listen}: {e}"))?;
    let deadline = Instant::now() + BIND_WAIT;
    loop {
        match UnixListener::bind_addr(&addr) {
            Ok(socket) => return Ok(Some(Claim { _socket: socket })),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < deadline => {
                std::thread::sleep(BIND_RETRY);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                return Err(format!(
                    "cannot listen on {listen}: address already in use (another sluice process serves it)"
                )
                .into())
            }
            Err(e) => return Err(format!("cannot claim {listen}: {e}").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One claim per address: a second is refused (after the wait) while
    /// the first is held, and granted once it is dropped; other ports and
    /// port 0 are not affected.
    #[test]
    fn one_claim_per_address() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let first = claim(a).unwrap().expect("a claim");
        let err = claim(a).err().expect("refused while held").to_string();
        assert!(err.contains("another sluice process"), "{err}");
        assert!(claim("127.0.0.1:2".parse().unwrap()).unwrap().is_some(), "another port");
        assert!(claim("127.0.0.1:0".parse().unwrap()).unwrap().is_none(), "port 0 claims nothing");
        drop(first);
        assert!(claim(a).unwrap().is_some(), "given back");
    }
}
