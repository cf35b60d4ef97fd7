//! A minimal HTTP/1.1 GET for `http://host:port/path` metrics endpoints, with a timeout, so
//! no HTTP client library is needed.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Why a scrape failed.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    #[error("'{0}' is not an http://host:port/path URL")]
    Url(String),
    #[error("scraping {url}: {source}")]
    Io {
        url: String,
        #[source]
        source: std::io::Error,
    },
    #[error("scraping {url}: HTTP status {status}")]
    Status { url: String, status: String },
    #[error("scraping {url}: {message}")]
    Format { url: String, message: String },
}

/// Fetches the body at `url`.
pub fn scrape(url: &str, timeout: Duration) -> Result<String, ScrapeError> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| ScrapeError::Url(url.into()))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    let io = |source| ScrapeError::Io {
        url: url.to_string(),
        source,
    };
    let address = authority
        .to_socket_addrs()
        .map_err(io)?
        .next()
        .ok_or_else(|| ScrapeError::Url(url.into()))?;
    let mut stream = TcpStream::connect_timeout(&address, timeout).map_err(io)?;
    stream.set_read_timeout(Some(timeout)).map_err(io)?;
    stream.set_write_timeout(Some(timeout)).map_err(io)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: text/plain\r\nConnection: close\r\n\r\n"
    )
    .map_err(io)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(io)?;
    let response = String::from_utf8_lossy(&response);
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(ScrapeError::Status {
            url: url.to_string(),
            status: status.to_string(),
        });
    }
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return Ok(dechunk(body));
    }
    Ok(body.to_string())
}

/// Joins a chunked transfer-encoded body.
fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size_line, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
            .unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn serve_once(response: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                request.extend_from_slice(&buf[..n]);
            }
            s.write_all(response.as_bytes()).unwrap();
        });
        format!("http://{address}/metrics")
    }

    #[test]
    fn plain_and_chunked_bodies() {
        let url = serve_once("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\na 1\nb 2\n");
        assert_eq!(scrape(&url, Duration::from_secs(2)).unwrap(), "a 1\nb 2\n");
        let url = serve_once("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\na 1\n\r\n4\r\nb 2\n\r\n0\r\n\r\n");
        assert_eq!(scrape(&url, Duration::from_secs(2)).unwrap(), "a 1\nb 2\n");
    }

    #[test]
    fn errors_name_the_url() {
        let url = serve_once("HTTP/1.1 404 Not Found\r\n\r\n");
        let e = scrape(&url, Duration::from_secs(2))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&url) && e.contains("404"), "{e}");
        assert!(matches!(
            scrape("ftp://x", Duration::from_secs(1)),
            Err(ScrapeError::Url(_))
        ));
        let e = scrape("http://127.0.0.1:1/metrics", Duration::from_secs(1)).unwrap_err();
        assert!(matches!(e, ScrapeError::Io { .. }));
    }
}
