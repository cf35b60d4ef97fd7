//! A plain HTTP/1.0 GET on loopback, for the monitoring and management endpoints of the
//! managed brokers (health, who leads what): a few local requests need no client library.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// GET `path` from 127.0.0.1:`port`, with `Authorization: Basic <basic_auth>` when given: the
/// body of a 200 answer; None for another status or no answer within `timeout`.
pub fn get(port: u16, path: &str, basic_auth: Option<&str>, timeout: Duration) -> Option<String> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&address, timeout).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    let auth = basic_auth
        .map(|a| format!("Authorization: Basic {a}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n{auth}\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    (head.split_whitespace().nth(1) == Some("200")).then(|| body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server on a free port that answers one request with `answer`; the request it read.
    fn serve_once(answer: &'static str) -> (u16, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        let thread = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut request = [0u8; 1024];
            let n = stream.read(&mut request).unwrap();
            stream.write_all(answer.as_bytes()).unwrap();
            String::from_utf8_lossy(&request[..n]).into_owned()
        });
        (port, thread)
    }

    #[test]
    fn a_200_gives_its_body_and_the_request_carries_the_credentials() {
        let (port, server) = serve_once("HTTP/1.1 200 OK\r\nContent-Type: x\r\n\r\n{\"a\":1}");
        let body = get(port, "/api/x", Some("Z3Vlc3Q="), Duration::from_secs(2));
        assert_eq!(body.as_deref(), Some("{\"a\":1}"));
        let request = server.join().unwrap();
        assert!(request.starts_with("GET /api/x HTTP/1.0\r\n"), "{request}");
        assert!(
            request.contains("Authorization: Basic Z3Vlc3Q=\r\n"),
            "{request}"
        );
    }

    #[test]
    fn another_status_or_no_server_gives_none() {
        let (port, server) = serve_once("HTTP/1.1 503 Service Unavailable\r\n\r\n{}");
        assert_eq!(get(port, "/healthz", None, Duration::from_secs(2)), None);
        server.join().unwrap();
        let free = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = free.local_addr().unwrap().port();
        drop(free);
        assert_eq!(get(port, "/", None, Duration::from_secs(1)), None);
    }
}
