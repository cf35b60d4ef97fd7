//! What the families' own clients share to reach a broker: one TCP connection, over TLS when
//! the driver file asks for it.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::tls::{TlsError, TlsSettings};

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
/// (the plain-text side of [`crate::tls::connect`]).
pub fn open(
    host: &str,
    port: u16,
    tls: Option<&TlsSettings>,
    deadline: Instant,
) -> Result<TcpStream, ConnectError> {
    let left = deadline.saturating_duration_since(Instant::now());
    let tcp = dial(&format!("{host}:{port}"), left).map_err(ConnectError::Unreachable)?;
    let Some(settings) = tls else {
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
    crate::tls::connect(tcp, config, host, name, deadline).map_err(failed)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_port_and_a_bad_address_say_why() {
        let refused = dial("127.0.0.1:1", Duration::from_secs(1)).unwrap_err();
        assert!(refused.to_lowercase().contains("refused"), "{refused}");
        assert!(dial("no port", Duration::from_secs(1)).is_err());
    }
}
