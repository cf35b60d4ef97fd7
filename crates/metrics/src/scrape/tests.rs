use super::*;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;

/// Serves one canned response and hands back the request head it got.
fn serve_once(response: Vec<u8>) -> (String, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let head = read_head(&mut s);
        s.write_all(&response).unwrap();
        let _ = tx.send(head);
    });
    (format!("http://{address}/metrics"), rx)
}

fn read_head(s: &mut impl Read) -> String {
    let mut request = Vec::new();
    let mut buf = [0u8; 1];
    while !request.ends_with(b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => request.push(buf[0]),
        }
    }
    String::from_utf8_lossy(&request).into_owned()
}

/// A header's value in a request head; names are case-insensitive.
fn header(head: &str, name: &str) -> Option<String> {
    head.lines().find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

fn ok(body: &str) -> Vec<u8> {
    format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
}

#[test]
fn plain_and_chunked_bodies() {
    let (url, _) = serve_once(ok("a 1\nb 2\n"));
    assert_eq!(scrape(&url, Duration::from_secs(2)).unwrap(), "a 1\nb 2\n");
    let (url, _) = serve_once(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n4\r\na 1\n\r\n4\r\nb 2\n\r\n0\r\n\r\n".to_vec());
    assert_eq!(scrape(&url, Duration::from_secs(2)).unwrap(), "a 1\nb 2\n");
}

#[test]
fn gzip_bodies_are_asked_for_and_decoded() {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(b"kafka_server_x 42\n").unwrap();
    let body = gz.finish().unwrap();
    let mut response = format!(
            "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
    response.extend_from_slice(&body);
    let (url, head) = serve_once(response);
    assert_eq!(
        scrape(&url, Duration::from_secs(2)).unwrap(),
        "kafka_server_x 42\n"
    );
    let head = head.recv().unwrap().to_ascii_lowercase();
    assert!(head.contains("accept-encoding: gzip"), "{head}");
}

#[test]
fn redirects_are_followed() {
    let (target, _) = serve_once(ok("moved 1\n"));
    let (url, _) = serve_once(
            format!("HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .into_bytes(),
        );
    assert_eq!(scrape(&url, Duration::from_secs(2)).unwrap(), "moved 1\n");
}

#[test]
fn credentials_go_in_a_header_never_in_a_message() {
    let (url, head) = serve_once(ok("x 1\n"));
    let with_user = url.replace("http://", "http://scraper:p%40ss@");
    let endpoint = Endpoint::new(&with_user).unwrap();
    assert_eq!(endpoint.url(), url);
    assert!(!format!("{endpoint:?}").contains("p@ss"));
    Scraper::new(endpoint).unwrap().fetch().unwrap();
    // "scraper:p@ss" in base64.
    assert_eq!(
        header(&head.recv().unwrap(), "authorization").as_deref(),
        Some("Basic c2NyYXBlcjpwQHNz"),
        "basic auth, user scraper, password p@ss"
    );

    let (url, head) = serve_once(ok("x 1\n"));
    let endpoint = Endpoint::new(&url).unwrap().bearer_token("tok-123\n");
    Scraper::new(endpoint).unwrap().fetch().unwrap();
    assert_eq!(
        header(&head.recv().unwrap(), "authorization").as_deref(),
        Some("Bearer tok-123")
    );

    let (url, _) = serve_once(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".to_vec());
    let e = scrape(
        &url.replace("http://", "http://u:hunter2@"),
        Duration::from_secs(2),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("401 Unauthorized") && e.contains("broker_metrics.username"),
        "{e}"
    );
    assert!(!e.contains("hunter2") && e.contains(&url), "{e}");
    let odd = Endpoint::new("https://u:a#b?c@d@[::1]:9404/metrics?x=1").unwrap();
    assert_eq!(odd.url(), "https://[::1]:9404/metrics?x=1");
    assert_eq!(
        odd.auth(),
        &Auth::Basic {
            username: "u".into(),
            password: "a#b?c@d".into()
        }
    );
    assert!(odd.has_path() && !Endpoint::new("http://h:1").unwrap().has_path());
    let e = Endpoint::new("ftp://u:hunter2@host/x")
        .unwrap_err()
        .to_string();
    assert!(!e.contains("hunter2"), "{e}");
}

#[test]
fn the_environment_fills_what_is_not_given() {
    let vars = |name: &str| match name {
        ENV_USERNAME => Some("env-user".to_string()),
        ENV_PASSWORD => Some("env-pass".to_string()),
        ENV_CA_FILE => Some("/tmp/ca.pem".to_string()),
        _ => None,
    };
    let e = Endpoint::new("https://h:1/metrics")
        .unwrap()
        .with_variables(vars);
    assert_eq!(
        e.auth(),
        &Auth::Basic {
            username: "env-user".into(),
            password: "env-pass".into()
        }
    );
    assert_eq!(e.ca_file.as_deref(), Some(Path::new("/tmp/ca.pem")));
    let given = Endpoint::new("https://h:1/metrics")
        .unwrap()
        .bearer_token("t")
        .with_variables(vars);
    assert_eq!(given.auth(), &Auth::Bearer("t".into()));
    let user_only = Endpoint::new("https://file-user@h:1/metrics")
        .unwrap()
        .with_variables(vars);
    assert_eq!(
        user_only.auth(),
        &Auth::Basic {
            username: "file-user".into(),
            password: "env-pass".into()
        }
    );
}

#[test]
fn errors_name_the_url() {
    let (url, _) = serve_once(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_vec());
    let e = scrape(&url, Duration::from_secs(2))
        .unwrap_err()
        .to_string();
    assert!(e.contains(&url) && e.contains("404"), "{e}");
    assert!(matches!(
        scrape("ftp://x", Duration::from_secs(1)),
        Err(ScrapeError::Url { .. })
    ));
    let e = scrape("http://127.0.0.1:1/metrics", Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, ScrapeError::Request { .. }), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("ca.pem");
    std::fs::write(&bad, "not a certificate").unwrap();
    let e = Scraper::new(Endpoint::new("https://127.0.0.1:1/").unwrap().ca_file(&bad))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ca.pem") && e.contains("no PEM certificate"),
        "{e}"
    );
}
