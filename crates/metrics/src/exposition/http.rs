//! The part of HTTP/1.1 (RFC 9110, RFC 9112) that serving metrics needs: reading one request
//! head within a size and time bound, weighing `Accept` media ranges, and writing a response
//! that closes the connection.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Largest request head accepted, request line and header fields together, in bytes: far
/// above what a browser or Prometheus sends, small enough that 32 connections cost little.
pub(super) const MAX_HEAD_BYTES: usize = 64 * 1024;

/// The statuses this server answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    Ok,
    BadRequest,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    RequestTimeout,
    HeaderFieldsTooLarge,
    ServiceUnavailable,
    VersionNotSupported,
}

impl Status {
    pub(super) fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::BadRequest => 400,
            Status::Forbidden => 403,
            Status::NotFound => 404,
            Status::MethodNotAllowed => 405,
            Status::RequestTimeout => 408,
            Status::HeaderFieldsTooLarge => 431,
            Status::ServiceUnavailable => 503,
            Status::VersionNotSupported => 505,
        }
    }

    pub(super) fn reason(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::BadRequest => "Bad Request",
            Status::Forbidden => "Forbidden",
            Status::NotFound => "Not Found",
            Status::MethodNotAllowed => "Method Not Allowed",
            Status::RequestTimeout => "Request Timeout",
            Status::HeaderFieldsTooLarge => "Request Header Fields Too Large",
            Status::ServiceUnavailable => "Service Unavailable",
            Status::VersionNotSupported => "HTTP Version Not Supported",
        }
    }
}

/// Why no request head could be read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum HeadError {
    /// The peer closed, timed out or failed before sending a byte (a port probe, or the
    /// server waking its own acceptor): there is nobody to answer.
    Silent,
    /// Answer with this status, then close.
    Answer(Status),
}

/// What the server needs from a request head.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Request {
    pub method: String,
    /// The path of the request target; the query string is dropped, since no page here
    /// takes parameters.
    pub path: String,
    /// Every `Accept` field line joined by commas (RFC 9110 §5.3 makes them one list);
    /// `None` when the client sent none.
    pub accept: Option<String>,
    /// The `Host` field's value, when there was one.
    pub host: Option<String>,
}

/// Reads up to the blank line that ends a request head, giving up at `deadline` so that a
/// client that trickles bytes cannot hold its thread for longer than one that sends nothing.
/// Bytes after the head (a body, a pipelined request) are dropped: the connection closes
/// after one response.
pub(super) fn read_head(stream: &mut TcpStream, deadline: Instant) -> Result<Vec<u8>, HeadError> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let started = !head.is_empty();
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return Err(give_up(started, Status::RequestTimeout));
        }
        let n = match stream.read(&mut chunk) {
            Ok(0) => return Err(give_up(started, Status::BadRequest)),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(give_up(started, Status::RequestTimeout))
            }
            Err(_) => return Err(HeadError::Silent),
        };
        let searched = head.len();
        head.extend_from_slice(&chunk[..n]);
        // RFC 9112 §2.2: empty lines before the request line are to be ignored, and they
        // would otherwise look like the end of the head.
        let empty_lines = head
            .iter()
            .take_while(|b| matches!(b, b'\r' | b'\n'))
            .count();
        head.drain(..empty_lines);
        match end_of_head(&head, searched.saturating_sub(empty_lines)) {
            Some(end) if end <= MAX_HEAD_BYTES => {
                head.truncate(end);
                return Ok(head);
            }
            Some(_) => return Err(HeadError::Answer(Status::HeaderFieldsTooLarge)),
            None if head.len() >= MAX_HEAD_BYTES => {
                return Err(HeadError::Answer(Status::HeaderFieldsTooLarge))
            }
            None => {}
        }
    }
}

fn give_up(started: bool, status: Status) -> HeadError {
    if started {
        HeadError::Answer(status)
    } else {
        HeadError::Silent
    }
}

/// The index just past the blank line ending the head, looking for its final LF from
/// `from` on (earlier bytes were searched before). A bare LF ends lines too, as RFC 9112
/// §2.2 allows.
fn end_of_head(head: &[u8], from: usize) -> Option<usize> {
    (from..head.len())
        .find(|&i| head[i] == b'\n' && (head[..i].ends_with(b"\n") || head[..i].ends_with(b"\n\r")))
        .map(|i| i + 1)
}

/// Parses a request head as `read_head` returns it.
pub(super) fn parse_head(head: &[u8]) -> Result<Request, Status> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let request_line = lines.next().ok_or(Status::BadRequest)?;
    let mut parts = request_line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Status::BadRequest);
    };
    if method.is_empty() || !method.iter().all(|&b| is_token_byte(b)) {
        return Err(Status::BadRequest);
    }
    if target.is_empty() || !target.iter().all(|b| b.is_ascii_graphic()) {
        return Err(Status::BadRequest);
    }
    let minor_version = match version {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor] if minor.is_ascii_digit() => minor - b'0',
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            return Err(Status::VersionNotSupported)
        }
        _ => return Err(Status::BadRequest),
    };

    let mut accept: Option<String> = None;
    let mut host: Option<String> = None;
    let mut hosts = 0;
    for line in lines {
        if line.is_empty() {
            break;
        }
        // Folded continuation lines are obsolete, and a stray CR or NUL could smuggle a
        // different reading of the head past a proxy: RFC 9112 §5 lets a server reject them.
        if matches!(line[0], b' ' | b'\t') || line.iter().any(|&b| b == b'\r' || b == 0) {
            return Err(Status::BadRequest);
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or(Status::BadRequest)?;
        let (name, value) = (&line[..colon], trim_whitespace(&line[colon + 1..]));
        if name.is_empty() || !name.iter().all(|&b| is_token_byte(b)) {
            return Err(Status::BadRequest);
        }
        if name.eq_ignore_ascii_case(b"host") {
            hosts += 1;
            host = Some(String::from_utf8_lossy(value).into_owned());
        } else if name.eq_ignore_ascii_case(b"accept") {
            let value = String::from_utf8_lossy(value);
            match &mut accept {
                Some(list) => {
                    list.push(',');
                    list.push_str(&value);
                }
                None => accept = Some(value.into_owned()),
            }
        }
    }
    // RFC 9112 §3.2: an HTTP/1.1 request without exactly one Host is to be answered 400.
    if minor_version >= 1 && hosts != 1 {
        return Err(Status::BadRequest);
    }

    let target = String::from_utf8_lossy(target);
    let path = origin_path(&target);
    Ok(Request {
        method: String::from_utf8_lossy(method).into_owned(),
        path: path
            .split(['?', '#'])
            .next()
            .unwrap_or_default()
            .to_string(),
        accept,
        host,
    })
}

/// The path and query of a request target: servers must accept the absolute form
/// (`http://host/metrics`) as well as the usual origin form (`/metrics`).
fn origin_path(target: &str) -> &str {
    match target.split_once("://") {
        Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => {
            match rest.find(['/', '?']) {
                Some(i) if rest[i..].starts_with('/') => &rest[i..],
                _ => "/",
            }
        }
        _ => target,
    }
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn trim_whitespace(mut value: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = value {
        value = rest;
    }
    value
}

/// One entry of an `Accept` list, with names lowercased.
#[derive(Debug, PartialEq)]
pub(super) struct MediaRange {
    /// `text`, `application` or `*`.
    pub kind: String,
    /// `plain`, `openmetrics-text` or `*`.
    pub subtype: String,
    /// The `version` parameter, which is how Prometheus tells its formats apart.
    pub version: Option<String>,
    /// The weight, 0 to 1.
    pub quality: f32,
}

/// Parses an `Accept` list, skipping malformed entries rather than failing the request:
/// a scrape should get some answer.
pub(super) fn media_ranges(accept: &str) -> Vec<MediaRange> {
    split_unquoted(accept, ',')
        .into_iter()
        .filter_map(|entry| {
            let mut fields = split_unquoted(entry, ';').into_iter();
            let (kind, subtype) = fields.next()?.trim().split_once('/')?;
            let mut range = MediaRange {
                kind: kind.trim().to_ascii_lowercase(),
                subtype: subtype.trim().to_ascii_lowercase(),
                version: None,
                quality: 1.0,
            };
            if range.kind.is_empty() || range.subtype.is_empty() {
                return None;
            }
            for parameter in fields.filter(|p| !p.trim().is_empty()) {
                let (name, value) = parameter.split_once('=')?;
                let value = unquote(value.trim());
                match name.trim().to_ascii_lowercase().as_str() {
                    "q" => {
                        range.quality = value
                            .parse()
                            .ok()
                            .filter(|q: &f32| (0.0..=1.0).contains(q))?
                    }
                    "version" => range.version = Some(value),
                    _ => {}
                }
            }
            Some(range)
        })
        .collect()
}

/// How much the client wants `kind/subtype; version=…`: the weight of the most specific
/// range that matches it (RFC 9110 §12.5.1), 0 when none does.
pub(super) fn quality(ranges: &[MediaRange], kind: &str, subtype: &str, version: &str) -> f32 {
    ranges
        .iter()
        .filter_map(|range| {
            let specificity = match (range.kind.as_str(), range.subtype.as_str()) {
                ("*", "*") => 0,
                (k, "*") if k == kind => 1,
                (k, s) if k == kind && s == subtype => match &range.version {
                    None => 2,
                    Some(v) if v == version => 3,
                    Some(_) => return None,
                },
                _ => return None,
            };
            Some((specificity, range.quality))
        })
        .fold(None, |best: Option<(u8, f32)>, candidate| match best {
            Some(b) if b >= candidate => Some(b),
            _ => Some(candidate),
        })
        .map_or(0.0, |(_, q)| q)
}

/// Splits on `separator` outside double-quoted strings, where it may legitimately appear.
fn split_unquoted(text: &str, separator: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == separator && !quoted => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn unquote(value: &str) -> String {
    match value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        Some(inner) => {
            let mut out = String::with_capacity(inner.len());
            let mut chars = inner.chars();
            while let Some(c) = chars.next() {
                out.push(if c == '\\' {
                    chars.next().unwrap_or('\\')
                } else {
                    c
                });
            }
            out
        }
        None => value.to_string(),
    }
}

/// A complete response; each one closes its connection, so one request costs one
/// short-lived thread and nothing stays open between scrapes.
#[derive(Debug)]
pub(super) struct Response {
    pub status: Status,
    pub content_type: String,
    /// Header lines beyond the ones every response has, such as `Allow`.
    pub headers: Vec<(&'static str, &'static str)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A short plain-text answer, for errors: the status line again and a hint.
    pub(super) fn text(status: Status, hint: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8".into(),
            headers: Vec::new(),
            body: format!("{} {}: {hint}\n", status.code(), status.reason()).into_bytes(),
        }
    }

    /// Writes status line, headers and, unless answering HEAD, the body, in one write so
    /// the response leaves in as few packets as it fits in.
    pub(super) fn write_to(&self, out: &mut impl Write, with_body: bool) -> io::Result<()> {
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nDate: {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\
             Connection: close\r\n",
            self.status.code(),
            self.status.reason(),
            http_date(SystemTime::now()),
            self.content_type,
            self.body.len(),
        );
        for (name, value) in &self.headers {
            head.push_str(name);
            head.push_str(": ");
            head.push_str(value);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        if with_body {
            bytes.extend_from_slice(&self.body);
        }
        out.write_all(&bytes)?;
        out.flush()
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT`, the form RFC 9110 §5.6.7 asks for in `Date`.
pub(super) fn http_date(time: SystemTime) -> String {
    let seconds = time
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (days, second_of_day) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (year, month, day) = brokerbench_model::calendar::civil_from_days(days);
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[days.rem_euclid(7) as usize],
        MONTHS[(month - 1) as usize],
        second_of_day / 3_600,
        second_of_day / 60 % 60,
        second_of_day % 60,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn parse(head: &str) -> Result<Request, Status> {
        parse_head(head.as_bytes())
    }

    #[test]
    fn request_heads() {
        let request = parse(
            "GET /metrics?name[]=x HTTP/1.1\r\nHost: a\r\n\
             accept: text/plain\r\nAccept:  */*;q=0.1 \r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            request,
            Request {
                method: "GET".into(),
                path: "/metrics".into(),
                accept: Some("text/plain,*/*;q=0.1".into()),
                host: Some("a".into()),
            }
        );
        let absolute = parse("HEAD http://127.0.0.1:9464/metrics HTTP/1.1\nHost: x\n\n").unwrap();
        assert_eq!(
            (absolute.method.as_str(), absolute.path.as_str()),
            ("HEAD", "/metrics")
        );
        assert_eq!(parse("GET http://h?x HTTP/1.0\r\n\r\n").unwrap().path, "/");
        // HTTP/1.0 needs no Host.
        assert_eq!(parse("GET / HTTP/1.0\r\n\r\n").unwrap().accept, None);
    }

    #[test]
    fn malformed_heads_are_refused() {
        for head in [
            "GET /metrics\r\n\r\n",
            "GET  /metrics HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /metrics HTTP/1.1 extra\r\nHost: a\r\n\r\n",
            "GET /metrics HTTP/1\r\nHost: a\r\n\r\n",
            "GET /metrics http/1.1\r\nHost: a\r\n\r\n",
            "G(T /metrics HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /met\x01rics HTTP/1.1\r\nHost: a\r\n\r\n",
            "GET /metrics HTTP/1.1\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nHost : a\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nHost: a\r\nAccept: text/plain\r\n  folded\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nHost: a\r\nno colon\r\n\r\n",
            "GET /metrics HTTP/1.1\r\nHost: a\rb\r\n\r\n",
        ] {
            assert_eq!(parse(head), Err(Status::BadRequest), "{head:?}");
        }
        assert_eq!(
            parse("PRI * HTTP/2.0\r\n\r\n"),
            Err(Status::VersionNotSupported)
        );
    }

    #[test]
    fn head_ends_at_the_first_blank_line() {
        assert_eq!(
            end_of_head(b"GET / HTTP/1.0\r\nA: b\r\n\r\nbody", 0),
            Some(24)
        );
        assert_eq!(end_of_head(b"GET / HTTP/1.0\n\nbody", 0), Some(16));
        assert_eq!(end_of_head(b"GET / HTTP/1.0\r\nA: b\r\n", 0), None);
    }

    #[test]
    fn accept_weights_the_most_specific_range() {
        let ranges = media_ranges(
            "application/openmetrics-text; version=\"1.0.0\"; q=0.5, application/*;q=0.2,\
             text/plain;q=0.3;charset=\"a,b\", */*;q=0.1, broken, x/y;q=2",
        );
        assert_eq!(ranges.len(), 4, "{ranges:?}");
        assert_eq!(
            quality(&ranges, "application", "openmetrics-text", "1.0.0"),
            0.5
        );
        assert_eq!(
            quality(&ranges, "application", "openmetrics-text", "0.0.1"),
            0.2
        );
        assert_eq!(quality(&ranges, "text", "plain", "0.0.4"), 0.3);
        assert_eq!(quality(&ranges, "image", "png", ""), 0.1);
        assert_eq!(
            quality(&media_ranges("text/html"), "text", "plain", ""),
            0.0
        );
    }

    #[test]
    fn dates_in_imf_fixdate() {
        let at = |s| http_date(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(at(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(at(4_107_542_400), "Mon, 01 Mar 2100 00:00:00 GMT");
    }

    #[test]
    fn responses_to_head_keep_the_length_and_drop_the_body() {
        let response = Response::text(Status::NotFound, "try /metrics");
        let mut written = Vec::new();
        response.write_to(&mut written, false).unwrap();
        let written = String::from_utf8(written).unwrap();
        assert!(
            written.starts_with("HTTP/1.1 404 Not Found\r\n"),
            "{written}"
        );
        assert!(written.contains(&format!("Content-Length: {}\r\n", response.body.len())));
        assert!(written.ends_with("\r\n\r\n"), "{written}");
    }
}
