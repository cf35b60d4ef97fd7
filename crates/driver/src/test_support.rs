//! What the crate's unit tests share.

use std::net::{TcpListener, TcpStream};

/// Two ends of one loopback TCP connection: the one that connected, and the one accepted.
pub fn loopback_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let connected = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (accepted, _) = listener.accept().unwrap();
    (connected, accepted)
}
