//! A bounded, synchronous AMQP 0-9-1 handshake used by `connect()` before any real client
//! connects: TCP, protocol header, Start/StartOk (PLAIN), Tune/TuneOk, Open, Close. It tells
//! an absent broker, a wrong password (the client advertises `authentication_failure_close`,
//! so RabbitMQ answers ACCESS_REFUSED instead of dropping the socket) and a missing virtual
//! host apart, and reads the broker's product and version. amqprs does not advertise that
//! capability, so through it a wrong password looks like a reset connection.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use brokerbench_model::driver_config::AmqpUri;

const PROTOCOL_HEADER: &[u8; 8] = b"AMQP\x00\x00\x09\x01";
const FRAME_METHOD: u8 = 1;
const FRAME_HEARTBEAT: u8 = 8;
const FRAME_END: u8 = 0xCE;
/// A handshake frame larger than this is not from an AMQP broker.
const MAX_FRAME: usize = 1 << 20;
/// How long one TCP connection attempt may take.
const TCP_TIMEOUT: Duration = Duration::from_secs(3);

/// What the broker said about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// `product` server property, e.g. RabbitMQ.
    pub product: String,
    /// `version` server property, e.g. 3.10.8.
    pub version: String,
}

impl BrokerInfo {
    /// e.g. "RabbitMQ 3.10.8".
    pub fn describe(&self) -> String {
        format!("{} {}", self.product, self.version)
            .trim()
            .to_string()
    }
}

/// Why the handshake failed. Messages never contain the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeError {
    /// No TCP connection, no answer, or not an AMQP 0-9-1 broker.
    Unreachable(String),
    /// The broker refused the user name and password (ACCESS_REFUSED), or access to the vhost.
    Authentication(String),
    /// The broker closed the connection for another reason (e.g. the vhost does not exist).
    Refused(String),
}

/// Runs the handshake against `uri` within `limit`.
pub fn probe(uri: &AmqpUri, limit: Duration) -> Result<BrokerInfo, ProbeError> {
    let deadline = Instant::now() + limit;
    let mut stream = connect_tcp(uri, deadline)?;
    let _ = stream.set_nodelay(true);
    let mut conversation = Conversation {
        stream: &mut stream,
        deadline,
        limit,
    };
    conversation.handshake(uri)
}

fn connect_tcp(uri: &AmqpUri, deadline: Instant) -> Result<TcpStream, ProbeError> {
    let addrs: Vec<SocketAddr> = (uri.host.as_str(), uri.port)
        .to_socket_addrs()
        .map_err(|e| ProbeError::Unreachable(format!("cannot resolve host '{}': {e}", uri.host)))?
        .collect();
    let mut reasons = Vec::new();
    for addr in addrs {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        match TcpStream::connect_timeout(&addr, left.min(TCP_TIMEOUT)) {
            Ok(stream) => return Ok(stream),
            Err(e) => reasons.push(format!("{addr}: {e}")),
        }
    }
    Err(ProbeError::Unreachable(if reasons.is_empty() {
        format!("host '{}' resolves to no address", uri.host)
    } else {
        reasons.join("; ")
    }))
}

struct Conversation<'a> {
    stream: &'a mut TcpStream,
    deadline: Instant,
    limit: Duration,
}

/// A method frame's class and method ids and its arguments.
struct Method {
    class: u16,
    method: u16,
    arguments: Vec<u8>,
}

impl Method {
    fn is(&self, class: u16, method: u16) -> bool {
        self.class == class && self.method == method
    }

    /// Reply code and text of a connection.close.
    fn close_reason(&self) -> (u16, String) {
        let mut r = Reader::new(&self.arguments);
        let code = r.u16().unwrap_or(0);
        let text = r.short_string().unwrap_or_default();
        (code, text)
    }
}

impl Conversation<'_> {
    fn handshake(&mut self, uri: &AmqpUri) -> Result<BrokerInfo, ProbeError> {
        self.write(PROTOCOL_HEADER)
            .map_err(|e| self.unreachable("sending the protocol header", e))?;
        let start = self.read_method("the protocol header")?;
        if !start.is(10, 10) {
            return Err(ProbeError::Unreachable(format!(
                "expected connection.start, got method {}.{}: not an AMQP 0-9-1 broker",
                start.class, start.method
            )));
        }
        let info = parse_start(&start.arguments)?;

        let mut response = Vec::new();
        response.push(0);
        response.extend_from_slice(uri.username.as_bytes());
        response.push(0);
        response.extend_from_slice(uri.password().as_bytes());
        let mut start_ok = method_header(10, 11);
        put_table(
            &mut start_ok,
            &[
                ("product", Field::Text("brokerbench")),
                (
                    "capabilities",
                    Field::Table(&[("authentication_failure_close", Field::Bool(true))]),
                ),
            ],
        );
        put_short_string(&mut start_ok, "PLAIN");
        put_long_bytes(&mut start_ok, &response);
        put_short_string(&mut start_ok, "en_US");
        self.write_method(&start_ok)?;

        let tune = self.read_method("logging in")?;
        if tune.is(10, 50) {
            let (code, text) = tune.close_reason();
            return Err(if code == 403 {
                ProbeError::Authentication(format!(
                    "{text} (user '{}'); check the user name and password in the uri",
                    uri.username
                ))
            } else {
                ProbeError::Refused(format!("{code} {text}"))
            });
        }
        if !tune.is(10, 30) {
            return Err(ProbeError::Unreachable(format!(
                "expected connection.tune, got method {}.{}",
                tune.class, tune.method
            )));
        }
        let mut r = Reader::new(&tune.arguments);
        let channel_max = r.u16().unwrap_or(0);
        let frame_max = r.u32().unwrap_or(131_072);
        let mut tune_ok = method_header(10, 31);
        tune_ok.extend_from_slice(&channel_max.to_be_bytes());
        tune_ok.extend_from_slice(&frame_max.to_be_bytes());
        tune_ok.extend_from_slice(&0u16.to_be_bytes());
        self.write_method(&tune_ok)?;
        let mut open = method_header(10, 40);
        put_short_string(&mut open, &uri.vhost);
        put_short_string(&mut open, "");
        open.push(0);
        self.write_method(&open)?;

        let open_ok = self.read_method("opening the virtual host")?;
        if open_ok.is(10, 50) {
            let (code, text) = open_ok.close_reason();
            return Err(if text.contains("refused") {
                ProbeError::Authentication(format!(
                    "{code} {text}; give user '{}' permissions on vhost '{}' or use another vhost in the uri",
                    uri.username, uri.vhost
                ))
            } else {
                ProbeError::Refused(format!(
                    "{code} {text}; check the virtual host in the uri (the path: %2f for /)"
                ))
            });
        }
        if !open_ok.is(10, 41) {
            return Err(ProbeError::Unreachable(format!(
                "expected connection.open-ok, got method {}.{}",
                open_ok.class, open_ok.method
            )));
        }
        let mut close = method_header(10, 50);
        close.extend_from_slice(&200u16.to_be_bytes());
        put_short_string(&mut close, "brokerbench connect check");
        close.extend_from_slice(&[0, 0, 0, 0]);
        // A polite close; the answer does not matter.
        if self.write_method(&close).is_ok() {
            let _ = self.read_method("closing");
        }
        Ok(info)
    }

    fn unreachable(&self, doing: &str, e: std::io::Error) -> ProbeError {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => ProbeError::Unreachable(
                format!("no answer within {:?} while {doing}", self.limit),
            ),
            std::io::ErrorKind::UnexpectedEof => ProbeError::Unreachable(format!(
                "the server closed the connection while {doing}: not an AMQP 0-9-1 broker, or one that refuses this client"
            )),
            _ => ProbeError::Unreachable(format!("{doing}: {e}")),
        }
    }

    fn arm(&mut self) -> std::io::Result<()> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.stream.set_read_timeout(Some(left))?;
        self.stream.set_write_timeout(Some(left))
    }

    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.arm()?;
        self.stream.write_all(bytes)
    }

    fn write_method(&mut self, payload: &[u8]) -> Result<(), ProbeError> {
        let mut frame = Vec::with_capacity(payload.len() + 8);
        frame.push(FRAME_METHOD);
        frame.extend_from_slice(&0u16.to_be_bytes());
        frame.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        frame.extend_from_slice(payload);
        frame.push(FRAME_END);
        self.write(&frame)
            .map_err(|e| self.unreachable("logging in", e))
    }

    fn read_exact(&mut self, buffer: &mut [u8]) -> std::io::Result<()> {
        self.arm()?;
        self.stream.read_exact(buffer)
    }

    /// Reads the next method frame on channel 0, skipping heartbeats. `after` says what was
    /// sent last, for the error message.
    fn read_method(&mut self, after: &str) -> Result<Method, ProbeError> {
        let doing = format!("waiting for the answer to {after}");
        loop {
            let mut header = [0u8; 7];
            self.read_exact(&mut header)
                .map_err(|e| self.unreachable(&doing, e))?;
            if &header[..4] == b"AMQP" {
                return Err(ProbeError::Unreachable(
                    "the server answered with the header of another AMQP protocol version; it does not speak 0-9-1".into(),
                ));
            }
            let kind = header[0];
            let size = u32::from_be_bytes([header[3], header[4], header[5], header[6]]) as usize;
            if size > MAX_FRAME || !(kind == FRAME_METHOD || kind == FRAME_HEARTBEAT) {
                return Err(ProbeError::Unreachable(
                    "the answer is not an AMQP 0-9-1 frame: not an AMQP broker".into(),
                ));
            }
            let mut payload = vec![0u8; size + 1];
            self.read_exact(&mut payload)
                .map_err(|e| self.unreachable(&doing, e))?;
            if payload[size] != FRAME_END {
                return Err(ProbeError::Unreachable(
                    "a frame without the frame-end byte: not an AMQP broker".into(),
                ));
            }
            if kind == FRAME_HEARTBEAT {
                continue;
            }
            if size < 4 {
                return Err(ProbeError::Unreachable("a truncated method frame".into()));
            }
            return Ok(Method {
                class: u16::from_be_bytes([payload[0], payload[1]]),
                method: u16::from_be_bytes([payload[2], payload[3]]),
                arguments: payload[4..size].to_vec(),
            });
        }
    }
}

fn parse_start(arguments: &[u8]) -> Result<BrokerInfo, ProbeError> {
    let bad = || ProbeError::Unreachable("a malformed connection.start".into());
    let mut r = Reader::new(arguments);
    let (major, minor) = (r.u8().ok_or_else(bad)?, r.u8().ok_or_else(bad)?);
    if (major, minor) != (0, 9) {
        return Err(ProbeError::Unreachable(format!(
            "the server speaks AMQP {major}-{minor}, not 0-9-1"
        )));
    }
    let properties = r.table_strings().ok_or_else(bad)?;
    let mechanisms = r.long_string().ok_or_else(bad)?;
    if !mechanisms.split(' ').any(|m| m == "PLAIN") {
        return Err(ProbeError::Refused(format!(
            "the broker offers the login mechanisms '{mechanisms}', not PLAIN (user name and password)"
        )));
    }
    let find = |key: &str| {
        properties
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    Ok(BrokerInfo {
        product: find("product"),
        version: find("version"),
    })
}

/// A value written into a field table.
enum Field<'a> {
    Text(&'a str),
    Bool(bool),
    Table(&'a [(&'a str, Field<'a>)]),
}

fn method_header(class: u16, method: u16) -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(&class.to_be_bytes());
    v.extend_from_slice(&method.to_be_bytes());
    v
}

fn put_short_string(out: &mut Vec<u8>, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(255)];
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

fn put_long_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn put_table(out: &mut Vec<u8>, fields: &[(&str, Field<'_>)]) {
    let mut body = Vec::new();
    for (name, value) in fields {
        put_short_string(&mut body, name);
        match value {
            Field::Text(t) => {
                body.push(b'S');
                put_long_bytes(&mut body, t.as_bytes());
            }
            Field::Bool(b) => {
                body.push(b't');
                body.push(u8::from(*b));
            }
            Field::Table(inner) => {
                body.push(b'F');
                put_table(&mut body, inner);
            }
        }
    }
    put_long_bytes(out, &body);
}

/// Reads AMQP wire types from a method's arguments.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn short_string(&mut self) -> Option<String> {
        let n = self.u8()? as usize;
        self.take(n)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    fn long_string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        self.take(n)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// The string-valued entries of a field table; other values are skipped.
    fn table_strings(&mut self) -> Option<Vec<(String, String)>> {
        let n = self.u32()? as usize;
        let mut table = Reader::new(self.take(n)?);
        let mut out = Vec::new();
        while table.at < table.bytes.len() {
            let name = table.short_string()?;
            let kind = table.u8()?;
            if kind == b'S' {
                out.push((name, table.long_string()?));
            } else {
                table.skip_value(kind)?;
            }
        }
        Some(out)
    }

    fn skip_value(&mut self, kind: u8) -> Option<()> {
        let fixed = match kind {
            b't' | b'b' | b'B' => 1,
            b's' | b'u' => 2,
            b'I' | b'i' | b'f' => 4,
            b'l' | b'd' | b'T' => 8,
            b'D' => 5,
            b'V' => 0,
            b'S' | b'x' | b'A' | b'F' => self.u32()? as usize,
            _ => return None,
        };
        self.take(fixed).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn field_tables_round_trip_through_the_reader() {
        let mut out = Vec::new();
        put_table(
            &mut out,
            &[
                ("product", Field::Text("RabbitMQ")),
                ("capabilities", Field::Table(&[("x", Field::Bool(true))])),
                ("version", Field::Text("3.10.8")),
            ],
        );
        let strings = Reader::new(&out).table_strings().unwrap();
        assert_eq!(
            strings,
            vec![
                ("product".to_string(), "RabbitMQ".to_string()),
                ("version".to_string(), "3.10.8".to_string())
            ]
        );
    }

    #[test]
    fn start_without_plain_or_with_another_version_is_refused() {
        let mut start = vec![0, 9];
        put_table(&mut start, &[("product", Field::Text("X"))]);
        put_long_bytes(&mut start, b"EXTERNAL");
        put_long_bytes(&mut start, b"en_US");
        assert!(matches!(parse_start(&start), Err(ProbeError::Refused(m)) if m.contains("PLAIN")));
        start[1] = 8;
        assert!(matches!(
            parse_start(&start),
            Err(ProbeError::Unreachable(_))
        ));
    }

    #[test]
    fn a_refused_port_is_unreachable_at_once() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let uri = AmqpUri::parse(&format!("amqp://u:pw@127.0.0.1:{port}/%2f")).unwrap();
        let started = Instant::now();
        let err = probe(&uri, Duration::from_secs(10)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            matches!(err, ProbeError::Unreachable(ref m) if m.contains("127.0.0.1")),
            "{err:?}"
        );
    }

    #[test]
    fn a_silent_server_times_out_and_a_foreign_one_is_not_amqp() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let (_silent, _) = listener.accept().unwrap();
            let (mut http, _) = listener.accept().unwrap();
            let _ = http.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n");
            std::thread::sleep(Duration::from_millis(1500));
        });
        let uri = AmqpUri::parse(&format!("amqp://127.0.0.1:{port}")).unwrap();
        let started = Instant::now();
        let err = probe(&uri, Duration::from_millis(500)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(
            matches!(err, ProbeError::Unreachable(ref m) if m.contains("no answer")),
            "{err:?}"
        );
        let err = probe(&uri, Duration::from_secs(5)).unwrap_err();
        assert!(
            matches!(err, ProbeError::Unreachable(ref m) if m.contains("not an AMQP")),
            "{err:?}"
        );
        server.join().unwrap();
    }
}
