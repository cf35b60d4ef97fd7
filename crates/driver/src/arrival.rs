//! Reading a socket together with the time the kernel received what was read, so that a
//! client can leave replies (confirms, PubAcks) in the socket while its thread sleeps until
//! the next send and still time each one from its arrival, with no reader thread awake for
//! them.
//!
//! The kernel stamps each segment as it reaches the socket (`SO_TIMESTAMPNS`, wall-clock
//! time); a read reports the stamp of the newest segment it took. Replies read together are
//! stamped alike, at the newest one's arrival: each is stamped no earlier than it arrived, and
//! an earlier one among them late by the time between them. A producer at a fixed rate that
//! reads after each sleep mostly finds one reply, stamped exactly; over TLS the stamp is when
//! the TLS thread passed the bytes on, after decrypting them. The first socket on the host to ask
//! for stamps switches them on a moment later (the kernel defers it): until then reads come
//! unstamped, and the caller stamps them itself.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::Clock;

/// Asks the kernel to stamp what arrives on `fd`.
pub fn stamp_arrivals(fd: RawFd) -> io::Result<()> {
    let on: libc::c_int = 1;
    // SAFETY: `on` lives for the call, and its size is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// When the bytes of a connection's last read arrived (ns of [`Clock`]), shared between the
/// connection that reads and the code its frames are handed to while it does.
#[derive(Debug, Clone, Default)]
pub struct LastRead(Arc<AtomicU64>);

impl LastRead {
    pub fn set(&self, at_ns: u64) {
        self.0.store(at_ns, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What one read took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// Bytes read; 0 at the end of the stream.
    pub bytes: usize,
    /// When the newest of them reached the socket, in `clock`'s ns; None when the kernel
    /// gave no stamp (stamping not asked for, or not done for this socket).
    pub at_ns: Option<u64>,
}

/// Reads what is there without blocking (`MSG_DONTWAIT`): Some(what was read), or None when
/// nothing is.
pub fn recv_now(fd: RawFd, into: &mut [u8], clock: Clock) -> io::Result<Option<Received>> {
    // Room for one cmsg holding a timespec (a u64-aligned buffer, as cmsghdr needs).
    let mut control = [0u64; 8];
    loop {
        let mut iov = libc::iovec {
            iov_base: into.as_mut_ptr().cast(),
            iov_len: into.len(),
        };
        // SAFETY: an all-zero msghdr is valid; the fields set below point at live buffers.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: `msg` describes `into` and `control`, both writable for the call.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
        if n >= 0 {
            return Ok(Some(Received {
                bytes: n as usize,
                at_ns: stamp(&msg).map(|wall| clock_ns(wall, clock)),
            }));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock => return Ok(None),
            io::ErrorKind::Interrupted => continue,
            _ => return Err(e),
        }
    }
}

/// The kernel's receive stamp in `msg`'s control data, ns since the UNIX epoch.
fn stamp(msg: &libc::msghdr) -> Option<u64> {
    // SAFETY: `msg` was filled by recvmsg; the CMSG macros walk its control buffer within
    // `msg_controllen`, and a SCM_TIMESTAMPNS cmsg holds one timespec.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let t = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                return Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64);
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// A wall-clock stamp as `clock`'s ns: now on `clock`, less how long ago the stamp was (never
/// after now: the two clocks may be stepped apart).
fn clock_ns(wall_ns: u64, clock: Clock) -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass; CLOCK_REALTIME always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut t) };
    let wall_now = t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64;
    clock
        .now_ns()
        .saturating_sub(wall_now.saturating_sub(wall_ns))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    use crate::test_support::loopback_pair as pair;

    #[test]
    fn a_read_is_stamped_when_its_bytes_arrived_not_when_it_was_made() {
        let (client, mut server) = pair();
        stamp_arrivals(client.as_raw_fd()).unwrap();
        // The first socket to ask switches stamping on a moment later (a deferred kernel
        // work item): until then segments come unstamped.
        std::thread::sleep(Duration::from_millis(20));
        let clock = Clock::process();
        let before = clock.now_ns();
        server.write_all(b"confirm").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let read_at = clock.now_ns();
        let mut buf = [0u8; 64];
        let got = recv_now(client.as_raw_fd(), &mut buf, clock)
            .unwrap()
            .expect("the bytes are there");
        assert_eq!(&buf[..got.bytes], b"confirm");
        let at = got.at_ns.expect("the kernel stamped the segment");
        assert!(
            at >= before.saturating_sub(1_000_000),
            "stamp {at} before the write {before}"
        );
        assert!(
            read_at - at >= 40_000_000,
            "stamped {} ms before the read, not at its arrival 50 ms before",
            (read_at - at) as f64 / 1e6
        );
    }

    #[test]
    fn nothing_there_is_none_and_no_stamping_asked_is_no_stamp() {
        let (client, mut server) = pair();
        let mut buf = [0u8; 64];
        let clock = Clock::process();
        assert_eq!(recv_now(client.as_raw_fd(), &mut buf, clock).unwrap(), None);
        server.write_all(b"x").unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let got = recv_now(client.as_raw_fd(), &mut buf, clock)
            .unwrap()
            .unwrap();
        assert_eq!((got.bytes, got.at_ns), (1, None));
        drop(server);
        std::thread::sleep(Duration::from_millis(5));
        let end = recv_now(client.as_raw_fd(), &mut buf, clock)
            .unwrap()
            .unwrap();
        assert_eq!(end.bytes, 0);
    }
}
