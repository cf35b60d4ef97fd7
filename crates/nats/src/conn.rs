//! A blocking NATS protocol connection, one per producer, consumer or admin task, so nothing
//! is shared and nothing locks. Writes are buffered and flushed when the owner polls (or the
//! buffer grows); reads parse whole frames from one buffer without copying message bodies.
//! The protocol is text control lines (`MSG`, `HMSG`, `PING`, `+OK`, `-ERR`, `INFO`) followed
//! by sized bodies; see the NATS client protocol documentation.

use std::time::{Duration, Instant};

use brokerbench_driver::framed::{Framed, Framing};
use brokerbench_driver::net::open;

use crate::config::NatsUrl;

/// A message the server delivered.
#[derive(Debug, Clone, Copy)]
pub struct Msg<'a> {
    pub subject: &'a [u8],
    pub reply: Option<&'a [u8]>,
    /// The header block (`NATS/1.0 ...` through the blank line) of an `HMSG`.
    pub headers: Option<&'a [u8]>,
    pub payload: &'a [u8],
    /// When it reached the socket (the kernel's stamp of the read that brought it, in
    /// [`brokerbench_driver::Clock`] ns; the read's own time when the kernel gave none).
    pub arrived_ns: u64,
}

pub use brokerbench_driver::net::ConnectError;

/// What the server sends: a message, a control line.
pub enum Frame<'a> {
    /// `MSG` or `HMSG`, its arrival not yet stamped.
    Msg(Msg<'a>),
    Ping,
    /// `-ERR`'s text.
    Error(&'a [u8]),
    /// Another control line (`+OK`, `PONG`, `INFO`).
    Line(&'a [u8]),
}

/// The NATS protocol's frames: control lines, `MSG` and `HMSG` with their sized bodies.
pub struct Nats;

impl Framing for Nats {
    type Frame<'a> = Frame<'a>;

    fn next(bytes: &[u8]) -> Result<Option<(Frame<'_>, usize)>, String> {
        let Some(end) = find_crlf(bytes) else {
            return Ok(None);
        };
        let line = &bytes[..end];
        let body_at = end + 2;
        if !(line.starts_with(b"MSG ") || line.starts_with(b"HMSG ")) {
            let frame = match line.strip_prefix(b"-ERR ") {
                Some(error) => Frame::Error(error),
                None if line == b"PING" => Frame::Ping,
                None => Frame::Line(line),
            };
            return Ok(Some((frame, body_at)));
        }
        let (subject, reply, header_len, total) = msg_line(line)?;
        if bytes.len() < body_at + total + 2 {
            return Ok(None);
        }
        let body = &bytes[body_at..body_at + total];
        let msg = Msg {
            subject,
            reply,
            headers: (line[0] == b'H').then(|| &body[..header_len]),
            payload: &body[header_len..],
            arrived_ns: 0,
        };
        Ok(Some((Frame::Msg(msg), body_at + total + 2)))
    }
}

/// A `MSG` or `HMSG` line's subject, reply, header size and total size.
type MsgLine<'a> = (&'a [u8], Option<&'a [u8]>, usize, usize);

/// A `MSG` or `HMSG` line's fields; Err(`protocol_error`) for a line that is neither.
fn msg_line(line: &[u8]) -> Result<MsgLine<'_>, String> {
    let headered = line[0] == b'H';
    let (fields, count_of_fields) = split_fields(line);
    let fields = &fields[..count_of_fields];
    let count = |f: &[u8]| -> Result<usize, String> {
        std::str::from_utf8(f)
            .ok()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| "protocol_error".to_string())
    };
    let (reply, header_len, total) = match (headered, fields.len()) {
        (false, 4) => (None, 0, count(fields[3])?),
        (false, 5) => (Some(fields[3]), 0, count(fields[4])?),
        (true, 5) => (None, count(fields[3])?, count(fields[4])?),
        (true, 6) => (Some(fields[3]), count(fields[4])?, count(fields[5])?),
        _ => return Err("protocol_error".into()),
    };
    if header_len > total {
        return Err("protocol_error".into());
    }
    Ok((fields[1], reply, header_len, total))
}

/// One connection.
pub struct Conn {
    /// The socket and its buffers: writes go out when the owner polls (or the buffer grows).
    pub link: Framed,
    /// The server's INFO JSON.
    pub info: serde_json::Value,
}

const FLUSH_AT: usize = 64 * 1024;

impl Conn {
    /// Connects, sends CONNECT, and waits for the server's PONG.
    pub fn connect(url: &NatsUrl, timeout: Duration) -> Result<Conn, ConnectError> {
        let mut conn = Conn {
            link: Framed::new(open(&url.host, url.port, None, Instant::now() + timeout)?),
            info: serde_json::Value::Null,
        };
        let deadline = Instant::now() + timeout;
        let line = conn
            .read_line(deadline)
            .map_err(|e| ConnectError::Unreachable(format!("no INFO from the server: {e}")))?;
        let info = line
            .strip_prefix("INFO ")
            .ok_or_else(|| ConnectError::Protocol(format!("expected INFO, got {line:?}")))?;
        conn.info = serde_json::from_str(info)
            .map_err(|e| ConnectError::Protocol(format!("INFO is not JSON: {e}")))?;
        conn.upgrade(url, deadline)?;
        let mut connect = serde_json::json!({
            "verbose": false, "pedantic": false, "headers": true, "no_responders": true,
            "protocol": 1, "lang": "rust-brokerbench", "version": env!("CARGO_PKG_VERSION"),
        });
        if let Some(user) = &url.user {
            connect["user"] = user.clone().into();
            if let Some(password) = url.password() {
                connect["pass"] = password.into();
            }
        }
        conn.link
            .out()
            .extend_from_slice(format!("CONNECT {connect}\r\nPING\r\n").as_bytes());
        conn.link
            .flush()
            .map_err(|e| ConnectError::Unreachable(e.to_string()))?;
        loop {
            let line = conn
                .read_line(deadline)
                .map_err(|e| ConnectError::Unreachable(format!("no PONG: {e}")))?;
            if line == "PONG" {
                return Ok(conn);
            }
            if let Some(error) = line.strip_prefix("-ERR ") {
                let error = error.trim_matches('\'').to_string();
                return Err(if error.to_ascii_lowercase().contains("authorization") {
                    ConnectError::Authentication(error)
                } else {
                    ConnectError::Protocol(error)
                });
            }
        }
    }

    /// Goes over to TLS after the server's INFO when the URL asks for it (`tls://`, or the
    /// driver file's `tls:` block); refuses a server that requires TLS when it does not. The
    /// server says nothing more before the client's CONNECT: the TLS connection starts with
    /// empty buffers.
    fn upgrade(&mut self, url: &NatsUrl, deadline: Instant) -> Result<(), ConnectError> {
        let offered = |key: &str| self.info[key].as_bool().unwrap_or(false);
        let required = offered("tls_required");
        let Some(settings) = &url.tls else {
            if required {
                return Err(ConnectError::Protocol(
                    "the server requires TLS: write servers: tls://host:port, and give the CA that signed its certificate as tls: {ca_file: …} in the driver file".into(),
                ));
            }
            return Ok(());
        };
        if !required && !offered("tls_available") {
            return Err(ConnectError::Protocol(
                "the server does not offer TLS (its INFO has neither tls_required nor tls_available): write servers: nats://host:port for a plain connection".into(),
            ));
        }
        let failed = |e: brokerbench_driver::tls::TlsError| {
            ConnectError::Tls(e.with_hint(
                "tls: {ca_file: …} in the driver file",
                "tls: {cert_file: …, key_file: …} in the driver file",
            ))
        };
        let config = settings.client_config().map_err(failed)?;
        let raw = self
            .link
            .stream()
            .try_clone()
            .map_err(|e| ConnectError::Unreachable(e.to_string()))?;
        let stream = brokerbench_driver::tls::connect(
            raw,
            config,
            &url.host,
            settings.server_name.as_deref(),
            deadline,
        )
        .map_err(failed)?;
        brokerbench_driver::net::stamped(&stream);
        self.link = Framed::new(stream);
        Ok(())
    }

    /// Reads one control line before `deadline` (during the handshake only).
    fn read_line(&mut self, deadline: Instant) -> Result<String, String> {
        loop {
            let unread = self.link.unread();
            if let Some(end) = find_crlf(unread) {
                let line = String::from_utf8_lossy(&unread[..end]).into_owned();
                self.link.consume(end + 2);
                return Ok(line);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("timed out".into());
            }
            if self.link.fill(left).map_err(|e| e.to_string())? == 0 {
                return Err("the server closed the connection".into());
            }
        }
    }

    /// Subscribes `sid` to `subject`.
    pub fn subscribe(&mut self, subject: &str, sid: u32) {
        self.link
            .out()
            .extend_from_slice(format!("SUB {subject} {sid}\r\n").as_bytes());
    }

    /// Queues a publish; flushes when the buffer is large.
    pub fn publish(
        &mut self,
        subject: &[u8],
        reply: Option<&[u8]>,
        headers: Option<&[u8]>,
        payload: &[u8],
    ) -> std::io::Result<()> {
        write_publish(self.link.out(), subject, reply, headers, payload);
        if self.link.out().len() >= FLUSH_AT {
            self.link.flush()?;
        }
        Ok(())
    }

    /// Flushes, then hands every message that has arrived to `on_msg`, waiting at most
    /// `timeout` for the first bytes. `on_msg` may queue publishes (acks) in the buffer it
    /// gets. Answers PINGs. A `-ERR` from the server is returned as an error, once (what came
    /// with it is handed on); Err([`CONNECTION_CLOSED`]) once the connection is gone. How many
    /// messages it handed on.
    pub fn poll(
        &mut self,
        timeout: Duration,
        on_msg: &mut dyn FnMut(Msg<'_>, &mut Vec<u8>),
    ) -> Result<usize, String> {
        let arrived = self.link.last_read();
        let mut refused = None;
        let mut messages = 0;
        self.link.poll::<Nats>(timeout, &mut |frame, out| {
            match frame {
                Frame::Msg(msg) => {
                    on_msg(
                        Msg {
                            arrived_ns: arrived.get(),
                            ..msg
                        },
                        out,
                    );
                    messages += 1;
                }
                Frame::Ping => out.extend_from_slice(b"PONG\r\n"),
                Frame::Error(error) => {
                    let text = String::from_utf8_lossy(error);
                    refused.get_or_insert_with(|| kind_of(text.trim_matches('\'')));
                }
                Frame::Line(_) => {}
            }
            Ok(())
        })?;
        refused.map_or(Ok(messages), Err)
    }
}

/// Most fields a `MSG` or `HMSG` line has: the verb, subject, sid, reply, header size and
/// total size.
const MAX_FIELDS: usize = 6;

/// The space-separated fields of a control line, without allocating: the first
/// [`MAX_FIELDS`] + 1 (one more than any valid line has, so that too many is seen) and how
/// many of them there are.
fn split_fields(line: &[u8]) -> ([&[u8]; MAX_FIELDS + 1], usize) {
    let mut fields: [&[u8]; MAX_FIELDS + 1] = [&[]; MAX_FIELDS + 1];
    let mut n = 0;
    for field in line.split(|&b| b == b' ').filter(|f| !f.is_empty()) {
        if n == fields.len() {
            break;
        }
        fields[n] = field;
        n += 1;
    }
    (fields, n)
}

/// Appends a `PUB` or `HPUB`.
pub fn write_publish(
    out: &mut Vec<u8>,
    subject: &[u8],
    reply: Option<&[u8]>,
    headers: Option<&[u8]>,
    payload: &[u8],
) {
    out.extend_from_slice(if headers.is_some() { b"HPUB " } else { b"PUB " });
    out.extend_from_slice(subject);
    out.push(b' ');
    if let Some(reply) = reply {
        out.extend_from_slice(reply);
        out.push(b' ');
    }
    let header_len = headers.map_or(0, <[u8]>::len);
    if headers.is_some() {
        push_number(out, header_len as u64);
        out.push(b' ');
    }
    push_number(out, (header_len + payload.len()) as u64);
    out.extend_from_slice(b"\r\n");
    if let Some(headers) = headers {
        out.extend_from_slice(headers);
    }
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\r\n");
}

/// Numbers are written in decimal as every family writes them.
pub use brokerbench_driver::push_number;

pub use brokerbench_driver::CONNECTION_CLOSED;

/// A server error text as a `snake_case` kind, e.g. `maximum_messages_exceeded`.
pub fn kind_of(text: &str) -> String {
    let mut kind = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            kind.push(c.to_ascii_lowercase());
        } else if !kind.ends_with('_') && !kind.is_empty() {
            kind.push('_');
        }
    }
    kind.trim_end_matches('_').to_string()
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that closes the connection during the handshake fails it at once, instead of
    /// reading the closed socket over and over until the timeout.
    #[test]
    fn a_connection_closed_in_the_handshake_fails_at_once() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            std::io::Write::write_all(&mut socket, b"INFO {\"server_id\":\"x\"}\r\n").unwrap();
            // Reads CONNECT and PING (so that closing sends an end of stream, not a reset), and
            // closes without answering.
            let mut seen = Vec::new();
            let mut chunk = [0u8; 1024];
            while !seen.ends_with(b"PING\r\n") {
                let n = std::io::Read::read(&mut socket, &mut chunk).unwrap();
                assert!(n > 0, "the client closed first");
                seen.extend_from_slice(&chunk[..n]);
            }
        });
        let url = NatsUrl::parse(&format!("nats://127.0.0.1:{port}")).unwrap();
        let started = Instant::now();
        let error = match Conn::connect(&url, Duration::from_secs(20)) {
            Ok(_) => panic!("connected to a server that closed the connection"),
            Err(error) => format!("{error:?}"),
        };
        assert!(error.contains("closed the connection"), "{error}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        server.join().unwrap();
    }

    #[test]
    fn messages_are_handed_on_pings_answered_and_an_error_said_once() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let mut conn = Conn {
            link: Framed::new(ours),
            info: serde_json::Value::Null,
        };
        server
            .write_all(b"MSG a 1 5\r\nhello\r\nPING\r\n-ERR 'Permissions Violation'\r\nHMSG b 1 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\nMSG c 1 2\r\nh")
            .unwrap();
        let mut got = Vec::new();
        let poll = |conn: &mut Conn, got: &mut Vec<String>| {
            conn.poll(Duration::from_secs(5), &mut |m, _| {
                assert!(m.arrived_ns > 0, "stamped");
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                let reply = m.reply.map(text).unwrap_or_default();
                let headers = m.headers.map_or(0, <[u8]>::len);
                got.push(format!(
                    "{} {reply} {headers} {}",
                    text(m.subject),
                    text(m.payload)
                ));
            })
        };
        let first = poll(&mut conn, &mut got);
        assert_eq!(first, Err("permissions_violation".to_string()));
        let mut pong = [0u8; 6];
        server.read_exact(&mut pong).unwrap();
        assert_eq!(&pong, b"PONG\r\n");
        server.write_all(b"a\r\n").unwrap();
        let second = poll(&mut conn, &mut got);
        assert_eq!(second, Ok(1), "the error is said once, the poll goes on");
        assert_eq!(got, ["a  0 hello", "b r 12 hi", "c  0 ha"]);
        assert!(
            Nats::next(b"MSG a 1 x\r\n").is_err(),
            "a size that is no number"
        );
    }

    #[test]
    fn publishes_are_framed_and_kinds_are_snake_case() {
        let mut out = Vec::new();
        write_publish(&mut out, b"s.0", Some(b"_I.1"), None, b"hello");
        write_publish(
            &mut out,
            b"s.1",
            None,
            Some(b"NATS/1.0\r\nA: b\r\n\r\n"),
            b"xy",
        );
        assert_eq!(
            out,
            b"PUB s.0 _I.1 5\r\nhello\r\nHPUB s.1 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nxy\r\n"
        );
        assert_eq!(
            kind_of("maximum messages exceeded"),
            "maximum_messages_exceeded"
        );
        assert_eq!(
            kind_of("'Authorization Violation'"),
            "authorization_violation"
        );
    }
}
