//! Response bytes to a client, under the limits contract's progress
//! deadline: the peer must take each piece of at most [`SEND_PIECE`] bytes
//! within `--idle-timeout`, however the kernel trickles them out.
//!
//! A peer that does not is reset (`SO_LINGER` 0), not closed: a close queues
//! the FIN behind the bytes the peer never takes, so the connection stays
//! established for the client, and the kernel keeps its send queue (up to
//! the socket's send buffer) in an orphaned socket for minutes.

use crate::edge_limits::SEND_PIECE;
use futures_lite::AsyncWriteExt;
use glommio::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Writes all of `bytes`; false (and the connection reset) when the peer
/// is gone or took less than a piece within `idle`.
pub async fn send(sock: &mut TcpStream, bytes: &[u8], idle: Duration) -> bool {
    for piece in bytes.chunks(SEND_PIECE) {
        let write = async { sock.write_all(piece).await.is_ok() };
        let stalled = async {
            glommio::timer::sleep(idle).await;
            false
        };
        if !futures_lite::future::or(write, stalled).await {
            reset(sock);
            return false;
        }
    }
    true
}

/// Makes the socket's close a reset that discards its send queue.
pub fn reset(sock: &TcpStream) {
    let off = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt on a descriptor the stream owns, with a valid linger struct.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&off as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
}
