//! The socket calls: a non-blocking send, and waiting for readiness with ppoll(2), to the ns
//! (a wait shorter than 1 ms lasts its length; reads are
//! [`brokerbench_driver::arrival::recv_now`], stamped with their arrival).

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

/// Waits until `fd` is ready for `events` or `timeout` passes (None: no limit); whether it is
/// ready (or in error, which the next read or write reports).
pub(super) fn wait_fd(fd: i32, events: i16, timeout: Option<Duration>) -> bool {
    let limit = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: t.subsec_nanos() as libc::c_long,
    });
    let mut poll = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let limit_ptr = limit
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: one valid pollfd; the timespec (when given) lives for the call; no signal mask.
    let n = unsafe { libc::ppoll(&mut poll, 1, limit_ptr, std::ptr::null()) };
    n > 0
}
