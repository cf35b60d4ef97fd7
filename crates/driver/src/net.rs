//! What the families' own clients share to reach a broker: one TCP connection.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

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
