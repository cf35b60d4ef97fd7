//! The socket calls: non-blocking send and receive, and waiting for readiness with poll(2).

use super::*;

/// Sends what the socket takes without blocking: bytes taken (0 when it is full).
pub(super) fn send_now(stream: &TcpStream, bytes: &[u8]) -> io::Result<usize> {
    let mut sent = 0;
    while sent < bytes.len() {
        // SAFETY: the pointer and length describe the live slice `bytes[sent..]`.
        let n = unsafe {
            libc::send(
                stream.as_raw_fd(),
                bytes[sent..].as_ptr().cast(),
                bytes.len() - sent,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            sent += n as usize;
            continue;
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => break,
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
    Ok(sent)
}

/// Reads what is there without blocking: Some(bytes read, 0 at the end of the stream) or None
/// when nothing is.
pub(super) fn recv_now(fd: i32, into: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: the pointer and length describe the live, writable slice `into`.
        let n = unsafe { libc::recv(fd, into.as_mut_ptr().cast(), into.len(), libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
}

/// Waits until `fd` is ready for `events` or `timeout` passes (None: no limit); whether it is
/// ready (or in error, which the next read or write reports).
pub(super) fn wait_fd(fd: i32, events: i16, timeout: Option<Duration>) -> bool {
    let millis = match timeout {
        None => -1,
        Some(t) => t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32,
    };
    let mut poll = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut poll, 1, millis) };
    n > 0
}
