//! The bounded, synchronous AMQP 0-9-1 handshake: TCP, protocol header, Start/StartOk
//! (PLAIN), Tune/TuneOk, Open. `connect()` runs it once and closes ([`probe`]); every
//! connection of a run opens with it ([`open`], see [`crate::session`]). It tells an absent
//! broker, a wrong password (the client advertises `authentication_failure_close`, so
//! RabbitMQ answers ACCESS_REFUSED instead of dropping the socket, which would look like a
//! reset connection) and a missing virtual host apart, and reads the broker's product and
//! version.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use crate::config::AmqpUri;

use crate::wire::{
    self, id, next_frame, put_long_bytes, put_short_string, put_table, Field, Reader,
    FRAME_HEARTBEAT, FRAME_METHOD, PROTOCOL_HEADER,
};

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
    /// amqps://: the TLS settings could not be read, or the handshake failed.
    Tls(String),
}

/// Runs the handshake against `uri` within `limit`, then closes the connection.
pub fn probe(uri: &AmqpUri, limit: Duration) -> Result<BrokerInfo, ProbeError> {
    let mut opened = open(uri, limit, "brokerbench-connect-check", 0)?;
    let mut conversation = Conversation {
        stream: &mut opened.stream,
        deadline: Instant::now() + limit,
        limit,
    };
    let mut close = Vec::new();
    wire::close(
        &mut close,
        0,
        id::CONNECTION_CLOSE,
        "brokerbench connect check",
    );
    // A polite close; the answer does not matter.
    if conversation.write(&close).is_ok() {
        let _ = conversation.read_method("closing");
    }
    Ok(opened.info)
}

/// The string server properties a broker at `address` announces in its `Connection.Start`
/// (`product`, `version`, RabbitMQ's `cluster_name`, ...), read without logging in, then the
/// connection is dropped: for telling which broker holds a port.
pub fn server_properties(
    address: SocketAddr,
    limit: Duration,
) -> Result<Vec<(String, String)>, ProbeError> {
    let mut stream = TcpStream::connect_timeout(&address, limit)
        .map_err(|e| ProbeError::Unreachable(format!("{address}: {e}")))?;
    let mut conversation = Conversation {
        stream: &mut stream,
        deadline: Instant::now() + limit,
        limit,
    };
    conversation
        .write(PROTOCOL_HEADER)
        .map_err(|e| conversation.unreachable("sending the protocol header", e))?;
    let start = conversation.read_method("the protocol header")?;
    if !start.is(id::CONNECTION_START) {
        return Err(ProbeError::Unreachable(format!(
            "expected connection.start, got method {}.{}: not an AMQP 0-9-1 broker",
            start.class, start.method
        )));
    }
    start_properties(&start.arguments)
        .ok_or_else(|| ProbeError::Unreachable("a malformed connection.start".into()))
}

/// The string server properties of `Connection.Start` arguments (after the method id).
pub fn start_properties(arguments: &[u8]) -> Option<Vec<(String, String)>> {
    let mut r = Reader::new(arguments);
    r.u8()?;
    r.u8()?;
    r.table_strings()
}

/// An open AMQP connection (handshake done, no channel yet) and what was negotiated.
#[derive(Debug)]
pub struct Opened {
    pub stream: TcpStream,
    pub info: BrokerInfo,
    /// Largest frame either side may send.
    pub frame_max: u32,
    /// Highest channel number, 0 for no limit.
    pub channel_max: u16,
    /// Heartbeat interval in seconds, 0 for none.
    pub heartbeat: u16,
}

/// Connects and logs in to `uri` within `limit`, naming the connection `name` (shown in the
/// management UI) and asking for `heartbeat` seconds (0 = none; the broker's lower value wins).
pub fn open(
    uri: &AmqpUri,
    limit: Duration,
    name: &str,
    heartbeat: u16,
) -> Result<Opened, ProbeError> {
    let deadline = Instant::now() + limit;
    let mut stream = connect_tcp(uri, deadline)?;
    let _ = stream.set_nodelay(true);
    let mut conversation = Conversation {
        stream: &mut stream,
        deadline,
        limit,
    };
    let (info, frame_max, channel_max, heartbeat) = conversation.handshake(uri, name, heartbeat)?;
    let _ = stream.set_read_timeout(None);
    let _ = stream.set_write_timeout(None);
    Ok(Opened {
        stream,
        info,
        frame_max,
        channel_max,
        heartbeat,
    })
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
            Ok(stream) => return secure(stream, uri, deadline),
            Err(e) => reasons.push(format!("{addr}: {e}")),
        }
    }
    Err(ProbeError::Unreachable(if reasons.is_empty() {
        format!("host '{}' resolves to no address", uri.host)
    } else {
        reasons.join("; ")
    }))
}

/// The connection as the AMQP conversation sees it: `stream` itself, or for amqps:// the plain
/// side of a TLS connection made on it.
fn secure(stream: TcpStream, uri: &AmqpUri, deadline: Instant) -> Result<TcpStream, ProbeError> {
    let Some(tls) = &uri.tls else {
        return Ok(stream);
    };
    let config = tls
        .client_config()
        .map_err(|e| ProbeError::Tls(e.to_string()))?;
    brokerbench_driver::tls::connect(
        stream,
        config,
        &uri.host,
        tls.server_name.as_deref(),
        deadline,
    )
    .map_err(|e| {
        ProbeError::Tls(e.with_hint(
            "cacertfile=… in the URI",
            "certfile=… and keyfile=… in the URI",
        ))
    })
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
    fn is(&self, (class, method): (u16, u16)) -> bool {
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
    /// Logs in and opens the virtual host: the broker's description, frame_max, channel_max
    /// and heartbeat.
    fn handshake(
        &mut self,
        uri: &AmqpUri,
        name: &str,
        heartbeat: u16,
    ) -> Result<(BrokerInfo, u32, u16, u16), ProbeError> {
        let info = self.start(uri, name)?;
        let (frame_max, channel_max, heartbeat) = self.tune(uri, heartbeat)?;
        self.read_open_ok(uri)?;
        Ok((info, frame_max, channel_max, heartbeat))
    }

    /// Sends the protocol header, reads connection.start and answers with
    /// connection.start-ok, logging in as `uri` says; the broker's description.
    fn start(&mut self, uri: &AmqpUri, name: &str) -> Result<BrokerInfo, ProbeError> {
        self.write(PROTOCOL_HEADER)
            .map_err(|e| self.unreachable("sending the protocol header", e))?;
        let start = self.read_method("the protocol header")?;
        if !start.is(id::CONNECTION_START) {
            return Err(ProbeError::Unreachable(format!(
                "expected connection.start, got method {}.{}: not an AMQP 0-9-1 broker",
                start.class, start.method
            )));
        }
        let mechanism = if uri.external { "EXTERNAL" } else { "PLAIN" };
        let info = parse_start(&start.arguments, mechanism)?;
        self.write_frame(&start_ok(uri, name, mechanism))?;
        Ok(info)
    }

    /// Reads connection.tune (or the broker's refusal of the login), agrees on the limits,
    /// asking for `heartbeat` seconds, and answers with connection.tune-ok and
    /// connection.open of `uri`'s virtual host: the agreed frame_max, channel_max and
    /// heartbeat.
    fn tune(&mut self, uri: &AmqpUri, heartbeat: u16) -> Result<(u32, u16, u16), ProbeError> {
        let tune = self.read_method("logging in")?;
        if tune.is(id::CONNECTION_CLOSE) {
            return Err(login_refused(&tune, uri));
        }
        if !tune.is(id::CONNECTION_TUNE) {
            return Err(ProbeError::Unreachable(format!(
                "expected connection.tune, got method {}.{}",
                tune.class, tune.method
            )));
        }
        let mut r = Reader::new(&tune.arguments);
        let channel_max = r.u16().unwrap_or(0);
        let frame_max = match r.u32().unwrap_or(0) {
            0 => wire::FRAME_MAX,
            n => n.clamp(4096, wire::FRAME_MAX),
        };
        let heartbeat = match (r.u16().unwrap_or(0), heartbeat) {
            (_, 0) => 0,
            (0, ours) => ours,
            (theirs, ours) => theirs.min(ours),
        };
        let mut reply = Vec::new();
        wire::method(&mut reply, 0, id::CONNECTION_TUNE_OK, |out| {
            out.extend_from_slice(&channel_max.to_be_bytes());
            out.extend_from_slice(&frame_max.to_be_bytes());
            out.extend_from_slice(&heartbeat.to_be_bytes());
        });
        wire::method(&mut reply, 0, id::CONNECTION_OPEN, |out| {
            put_short_string(out, &uri.vhost);
            put_short_string(out, "");
            out.push(0);
        });
        self.write_frame(&reply)?;
        Ok((frame_max, channel_max, heartbeat))
    }

    /// Reads the answer to connection.open: Ok when the virtual host of `uri` is open, else
    /// why the broker refused it.
    fn read_open_ok(&mut self, uri: &AmqpUri) -> Result<(), ProbeError> {
        let open_ok = self.read_method("opening the virtual host")?;
        if open_ok.is(id::CONNECTION_CLOSE) {
            let (code, text) = open_ok.close_reason();
            // 403 ACCESS_REFUSED: the user may not use the vhost; 530 NOT_ALLOWED (and
            // others): the vhost does not exist or cannot be opened.
            return Err(if code == 403 {
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
        if !open_ok.is(id::CONNECTION_OPEN_OK) {
            return Err(ProbeError::Unreachable(format!(
                "expected connection.open-ok, got method {}.{}",
                open_ok.class, open_ok.method
            )));
        }
        Ok(())
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

    fn write_frame(&mut self, frame: &[u8]) -> Result<(), ProbeError> {
        self.write(frame)
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
        let malformed = |wire::Malformed(why)| ProbeError::Unreachable(why.into());
        loop {
            let mut frame = vec![0u8; 7];
            self.read_exact(&mut frame)
                .map_err(|e| self.unreachable(&doing, e))?;
            // Checks the frame type and size before reading the rest.
            next_frame(&frame, MAX_FRAME).map_err(malformed)?;
            let size = u32::from_be_bytes([frame[3], frame[4], frame[5], frame[6]]) as usize;
            frame.resize(size + wire::FRAME_OVERHEAD, 0);
            self.read_exact(&mut frame[7..])
                .map_err(|e| self.unreachable(&doing, e))?;
            let whole = next_frame(&frame, MAX_FRAME)
                .map_err(malformed)?
                .expect("a whole frame was read");
            match whole.kind {
                FRAME_HEARTBEAT => continue,
                FRAME_METHOD if size >= 4 => {}
                _ => {
                    return Err(ProbeError::Unreachable(
                        "a truncated or unexpected frame during the handshake".into(),
                    ))
                }
            }
            let mut r = Reader::new(&frame[whole.payload.0..whole.payload.1]);
            let (class, method) = r.method_id().expect("four bytes");
            return Ok(Method {
                class,
                method,
                arguments: r.rest().to_vec(),
            });
        }
    }
}

/// connection.start-ok: brokerbench's client properties, the connection named `name`, and
/// the login by `mechanism`: `uri`'s user name and password for PLAIN.
fn start_ok(uri: &AmqpUri, name: &str, mechanism: &str) -> Vec<u8> {
    // EXTERNAL: the broker takes the user from the client certificate; nothing to send.
    let mut response = Vec::new();
    if !uri.external {
        response.push(0);
        response.extend_from_slice(uri.username.as_bytes());
        response.push(0);
        response.extend_from_slice(uri.password().as_bytes());
    }
    let mut start_ok = Vec::new();
    wire::method(&mut start_ok, 0, id::CONNECTION_START_OK, |out| {
        put_table(
            out,
            &[
                ("product", Field::Text("brokerbench")),
                ("connection_name", Field::Text(name)),
                (
                    "capabilities",
                    Field::Table(&[
                        ("authentication_failure_close", Field::Bool(true)),
                        ("publisher_confirms", Field::Bool(true)),
                        ("basic.nack", Field::Bool(true)),
                        ("consumer_cancel_notify", Field::Bool(true)),
                        // The broker says when a resource alarm blocks publishing.
                        ("connection.blocked", Field::Bool(true)),
                    ]),
                ),
            ],
        );
        put_short_string(out, mechanism);
        put_long_bytes(out, &response);
        put_short_string(out, "en_US");
    });
    start_ok
}

/// Why the broker closed the connection (`close`) instead of tuning it: a login it refused
/// (403; with SASL EXTERNAL the certificate's subject), or its reason.
fn login_refused(close: &Method, uri: &AmqpUri) -> ProbeError {
    let (code, text) = close.close_reason();
    if code == 403 && uri.external {
        ProbeError::Authentication(format!(
            "{text} (SASL EXTERNAL: the user is the client certificate's subject); the broker must know that user and take it from the certificate (RabbitMQ: ssl_cert_login_from = common_name, and the user added)"
        ))
    } else if code == 403 {
        ProbeError::Authentication(format!(
            "{text} (user '{}'); check the user name and password in the uri",
            uri.username
        ))
    } else {
        ProbeError::Refused(format!("{code} {text}"))
    }
}

fn parse_start(arguments: &[u8], mechanism: &str) -> Result<BrokerInfo, ProbeError> {
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
    if !mechanisms.split(' ').any(|m| m == mechanism) {
        return Err(ProbeError::Refused(if mechanism == "EXTERNAL" {
            format!("the broker offers the login mechanisms '{mechanisms}', not EXTERNAL (a client certificate): on RabbitMQ enable the rabbitmq_auth_mechanism_ssl plugin and list EXTERNAL in auth_mechanisms")
        } else {
            format!("the broker offers the login mechanisms '{mechanisms}', not {mechanism} (user name and password)")
        }));
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn start_without_plain_or_with_another_version_is_refused() {
        let mut start = vec![0, 9];
        put_table(&mut start, &[("product", Field::Text("X"))]);
        put_long_bytes(&mut start, b"EXTERNAL");
        put_long_bytes(&mut start, b"en_US");
        assert!(
            matches!(parse_start(&start, "PLAIN"), Err(ProbeError::Refused(m)) if m.contains("PLAIN"))
        );
        assert!(parse_start(&start, "EXTERNAL").is_ok());
        let mut plain_only = vec![0, 9];
        put_table(&mut plain_only, &[("product", Field::Text("X"))]);
        put_long_bytes(&mut plain_only, b"PLAIN AMQPLAIN");
        put_long_bytes(&mut plain_only, b"en_US");
        assert!(matches!(
            parse_start(&plain_only, "EXTERNAL"),
            Err(ProbeError::Refused(m)) if m.contains("rabbitmq_auth_mechanism_ssl")
        ));
        start[1] = 8;
        assert!(matches!(
            parse_start(&start, "PLAIN"),
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
