//! What the families' own clients share to reach a broker: one TCP connection, over TLS when
//! the driver file asks for it.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::arrival::Received;
use crate::tls::{TlsError, TlsSettings};
use crate::Clock;

/// Why an own client's connection could not be made (opened and logged in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectError {
    /// No TCP connection, or it ended while logging in: why, in words.
    Unreachable(String),
    /// The broker refused the credentials.
    Authentication(String),
    /// The TLS handshake failed: why, and what in the driver file's `tls:` block to check.
    Tls(String),
    /// The broker answered, but not as the protocol says.
    Protocol(String),
}

/// A connection to `host`:`port` before `deadline` ([`dial`]), over TLS when `tls` is given
/// (the plain-text side of [`crate::tls::connect`]), whose reads are stamped with their
/// arrival ([`read_within`]).
pub fn open(
    host: &str,
    port: u16,
    tls: Option<&TlsSettings>,
    deadline: Instant,
) -> Result<TcpStream, ConnectError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let tcp = dial(&format!("{host}:{port}"), left).map_err(ConnectError::Unreachable)?;
    let Some(settings) = tls else {
        stamped(&tcp);
        return Ok(tcp);
    };
    let failed = |e: TlsError| {
        ConnectError::Tls(e.with_hint(
            "tls: {ca_file: …} in the driver file",
            "tls: {cert_file: …, key_file: …} in the driver file",
        ))
    };
    let config = settings.client_config().map_err(failed)?;
    let name = settings.server_name.as_deref();
    let plain = crate::tls::connect(tcp, config, host, name, deadline).map_err(failed)?;
    stamped(&plain);
    Ok(plain)
}

/// Asks for arrival stamps on `stream`; without them reads are stamped when made.
pub fn stamped(stream: &TcpStream) {
    use std::os::fd::AsRawFd;
    let _ = crate::arrival::stamp_arrivals(stream.as_raw_fd());
}

/// An error while logging in (before the broker's answer to the client's first frame): a
/// connection that ended then is, over TLS with a client certificate, how a TLS 1.3 broker
/// refuses one it does not trust (its alert comes after the handshake), said so; else
/// unreachable. Other errors stay as they are.
pub fn while_logging_in(tls: Option<&TlsSettings>, error: ConnectError) -> ConnectError {
    let ConnectError::Unreachable(reason) = error else {
        return error;
    };
    if tls.is_some_and(|t| t.cert_file.is_some()) {
        return ConnectError::Tls(format!("{reason} while logging in, after the TLS handshake: does the broker trust the client certificate (tls: {{cert_file: …, key_file: …}} in the driver file)?"));
    }
    ConnectError::Unreachable(format!("{reason} while logging in"))
}

/// A TCP connection to `address` (`host:port`) within `timeout` per address it resolves to,
/// without Nagle's delay; why not, in words.
pub fn dial(address: &str, timeout: Duration) -> Result<TcpStream, String> {
    let addresses: Vec<_> = address
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .collect();
    let mut last = format!("{address} resolves to no address");
    for socket in addresses {
        match TcpStream::connect_timeout(&socket, timeout) {
            Ok(stream) => {
                stream.set_nodelay(true).map_err(|e| e.to_string())?;
                return Ok(stream);
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

/// Reads what `stream` has into `buf`, waiting up to `timeout` for it to the microsecond
/// (`ppoll`, then a read that does not wait): a socket's receive timeout would be rounded up
/// to the kernel's tick, 4 ms here, for every read that finds nothing. Nothing within the
/// timeout is `WouldBlock`; a closed connection reads 0 bytes. The read comes with the time
/// its newest bytes arrived ([`crate::arrival`]), or the time it was made when the kernel gave
/// no stamp.
pub fn read_within(
    stream: &TcpStream,
    buf: &mut [u8],
    timeout: Duration,
) -> std::io::Result<Received> {
    use std::os::fd::AsRawFd;
    if !timeout.is_zero() && !wait_readable(stream, timeout)? {
        return Err(std::io::ErrorKind::WouldBlock.into());
    }
    let clock = Clock::process();
    match crate::arrival::recv_now(stream.as_raw_fd(), buf, clock)? {
        Some(read) => Ok(Received {
            at_ns: Some(read.at_ns.unwrap_or_else(|| clock.now_ns())),
            ..read
        }),
        None => Err(std::io::ErrorKind::WouldBlock.into()),
    }
}

/// Waits until `stream` has something to read (or was closed), at most `timeout`: whether it
/// has.
fn wait_readable(stream: &TcpStream, timeout: Duration) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut fd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let limit = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let ready = unsafe { libc::ppoll(&mut fd, 1, &limit, std::ptr::null()) };
    if ready < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ready > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_port_and_a_bad_address_say_why() {
        let refused = dial("127.0.0.1:1", Duration::from_secs(1)).unwrap_err();
        assert!(refused.to_lowercase().contains("refused"), "{refused}");
        assert!(dial("no port", Duration::from_secs(1)).is_err());
    }

    #[test]
    fn a_read_that_finds_nothing_waits_its_timeout_not_a_tick() {
        // A socket's receive timeout is rounded up to the kernel's tick (4 ms here): a NATS
        // producer that waited so for PubAcks slept through its next sends (schedule lag p99
        // 6 ms on an idle host). ppoll waits to the microsecond. The quickest of many reads
        // is what the wait itself costs: a busy host delays some of them, not all.
        let (_writer, reader) = crate::test_support::loopback_pair();
        let mut buf = [0u8; 64];
        let quickest = (0..200)
            .map(|_| {
                let started = std::time::Instant::now();
                let read = read_within(&reader, &mut buf, Duration::from_micros(100));
                assert_eq!(read.unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
                started.elapsed()
            })
            .min()
            .unwrap();
        assert!(
            quickest >= Duration::from_micros(100) && quickest < Duration::from_millis(2),
            "the quickest of 200 reads that found nothing took {quickest:?} for a 100 µs wait"
        );
    }
}
