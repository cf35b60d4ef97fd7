//! One MQTT connection: CONNECT and its CONNACK, packets out through one buffer, packets in
//! cut out of one buffer, a PINGREQ when the connection has been quiet for half its
//! keep-alive, and SUBSCRIBE waited for.

use brokerbench_driver::framed::{Framed, Framing};
use std::time::{Duration, Instant};

use crate::packet::{self, Connect, Packet, Version};
use crate::url::MqttUrl;

pub use brokerbench_driver::CONNECTION_CLOSED;

pub use brokerbench_driver::net::ConnectError;

/// How a client connects: its id and session.
#[derive(Debug, Clone)]
pub struct Session {
    pub version: Version,
    pub client_id: String,
    pub clean: bool,
    pub keep_alive_s: u16,
    /// MQTT 5: how long the broker keeps the session after the connection ends.
    pub session_expiry_s: Option<u32>,
    /// MQTT 5: the most QoS 1 and 2 messages the broker may have in flight to this client.
    pub receive_maximum: Option<u16>,
}

/// What a poll does with each packet that arrived: it may write packets (the QoS answers)
/// into the buffer it is given, and stop the poll with the kind of an error.
pub type OnPacket<'a> = dyn FnMut(Packet<'_>, &mut Vec<u8>) -> Result<(), String> + 'a;

/// MQTT's frames: packets.
pub struct Mqtt;

impl Framing for Mqtt {
    type Frame<'a> = Packet<'a>;

    fn next(bytes: &[u8]) -> Result<Option<(Packet<'_>, usize)>, String> {
        packet::next_packet(bytes).map_err(|e| format!("malformed_packet: {}", e.0))
    }
}

pub struct Conn {
    /// The connection's socket and buffers: frames are written into `link.out()`, sent by
    /// `link.flush()` or the next poll; `link.last_read()` stamps what a poll hands on.
    pub link: Framed,
    pub version: Version,
    /// What the broker said in its CONNACK.
    pub connack: packet::ConnAck,
    keep_alive: Duration,
    /// When a PINGREQ went that no PINGRESP has answered yet.
    ping_sent: Option<Instant>,
}

impl Conn {
    /// Connects and logs in within `timeout` in all.
    pub fn connect(
        url: &MqttUrl,
        session: &Session,
        timeout: Duration,
    ) -> Result<Conn, ConnectError> {
        let deadline = Instant::now() + timeout;
        let stream =
            brokerbench_driver::net::open(&url.host, url.port, url.tls.as_ref(), deadline)?;
        let mut conn = Conn {
            link: Framed::new(stream),
            version: session.version,
            connack: Default::default(),
            keep_alive: Duration::from_secs(session.keep_alive_s as u64),
            ping_sent: None,
        };
        let logging_in = |e| brokerbench_driver::net::while_logging_in(url.tls.as_ref(), e);
        conn.log_in(url, session, deadline).map_err(logging_in)?;
        Ok(conn)
    }

    fn log_in(
        &mut self,
        url: &MqttUrl,
        session: &Session,
        deadline: Instant,
    ) -> Result<(), ConnectError> {
        let connect = Connect {
            version: session.version,
            client_id: &session.client_id,
            clean: session.clean,
            keep_alive_s: session.keep_alive_s,
            username: url.user.as_deref(),
            password: url.password(),
            session_expiry_s: session.session_expiry_s,
            receive_maximum: session.receive_maximum,
        };
        packet::write_connect(self.link.out(), &connect);
        self.link
            .flush()
            .map_err(|e| ConnectError::Unreachable(e.to_string()))?;
        let left = deadline.saturating_duration_since(Instant::now());
        let body = self
            .wait_for(packet::CONNACK, left)
            .map_err(ConnectError::Unreachable)?;
        let ack = packet::parse_connack(self.version, &body)
            .map_err(|e| ConnectError::Protocol(format!("{}: is this an MQTT broker?", e.0)))?;
        if ack.code != 0 {
            return Err(refusal(&ack, self.version, url));
        }
        // The broker's keep-alive, when it says one, is the connection's (MQTT 5).
        if let Some(seconds) = ack.server_keep_alive {
            self.keep_alive = Duration::from_secs(seconds as u64);
        }
        self.connack = ack;
        Ok(())
    }

    /// Sends what is written, then hands every whole packet that has arrived to `on_packet`,
    /// waiting at most `timeout` for the first bytes; `on_packet` may write packets (the QoS
    /// answers), sent before it returns. Err with the kind once the connection is gone.
    pub fn poll(
        &mut self,
        timeout: Duration,
        on_packet: &mut OnPacket<'_>,
    ) -> Result<usize, String> {
        if self
            .ping_sent
            .is_some_and(|at| at.elapsed() > self.keep_alive)
        {
            return Err(format!(
                "{CONNECTION_CLOSED} (no PINGRESP within the keep-alive)"
            ));
        }
        if self.keep_alive_ping() {
            self.ping_sent.get_or_insert_with(Instant::now);
        }
        let (version, ping_sent) = (self.version, &mut self.ping_sent);
        self.link.poll::<Mqtt>(timeout, &mut |p, out| match p.kind {
            packet::PINGRESP => {
                *ping_sent = None;
                Ok(())
            }
            packet::DISCONNECT => Err(disconnected(version, p.body)),
            _ => on_packet(p, out),
        })
    }

    /// A PINGREQ when nothing was written for half the keep-alive (the broker closes a
    /// connection quiet for one and a half); whether one was written.
    fn keep_alive_ping(&mut self) -> bool {
        let due =
            !self.keep_alive.is_zero() && self.link.sent_at().elapsed() >= self.keep_alive / 2;
        if due {
            packet::write_pingreq(self.link.out());
        }
        due
    }

    /// Keeps a connection that is not read (a paused consumer's) alive: a PINGREQ when due,
    /// waiting up to `timeout` first. Its PINGRESP is read, and not waited for, once reading
    /// goes on.
    pub fn idle(&mut self, timeout: Duration) -> Result<(), String> {
        std::thread::sleep(timeout);
        self.keep_alive_ping();
        self.link.send()
    }

    /// The largest packet the broker takes, when it says (MQTT 5).
    pub fn maximum_packet_size(&self) -> Option<usize> {
        self.connack.maximum_packet_size.map(|n| n as usize)
    }

    /// SUBSCRIBE to `filters` at `qos`, and its SUBACK within `timeout`: the granted QoS of
    /// each. Messages that arrive meanwhile (a persistent session's) stay for the next poll.
    pub fn subscribe(
        &mut self,
        filters: &[String],
        qos: u8,
        timeout: Duration,
    ) -> Result<Vec<u8>, String> {
        packet::write_subscribe(self.link.out(), self.version, 1, filters, qos);
        self.link.send()?;
        let body = self.wait_for(packet::SUBACK, timeout)?;
        let (_, granted) = packet::parse_suback(self.version, &body).map_err(|e| e.0)?;
        Ok(granted)
    }

    /// Ends the connection politely (DISCONNECT), telling an MQTT 5 broker to forget the
    /// session when `end_session`.
    pub fn disconnect(&mut self, end_session: bool) {
        packet::write_disconnect(self.link.out(), self.version, end_session);
        let _ = self.link.flush();
    }

    /// The body of the first packet of `kind` to arrive within `timeout`, taken out of the
    /// buffer; the packets before it stay.
    fn wait_for(&mut self, kind: u8, timeout: Duration) -> Result<Vec<u8>, String> {
        let deadline = Instant::now() + timeout;
        // How far into the unread bytes the packets were looked at.
        let mut skipped = 0;
        loop {
            while let Some((p, used)) = packet::next_packet(&self.link.unread()[skipped..])
                .map_err(|e| format!("malformed_packet: {}", e.0))?
            {
                if p.kind == kind {
                    let body = p.body.to_vec();
                    self.link.remove(skipped, used);
                    return Ok(body);
                }
                if p.kind == packet::DISCONNECT {
                    return Err(disconnected(self.version, p.body));
                }
                skipped += used;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("no answer within {timeout:?}"));
            }
            match self.link.fill(left) {
                Ok(0) => return Err("the broker closed the connection".into()),
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// The kind of an MQTT 5 DISCONNECT from the broker (its reason code), or of a 3.1.1 one.
fn disconnected(version: Version, body: &[u8]) -> String {
    match (version, body.first()) {
        (Version::V5, Some(&code)) if code != 0 => {
            format!("disconnected_by_broker ({})", packet::reason_kind(code))
        }
        _ => "disconnected_by_broker".into(),
    }
}

/// A CONNACK that refuses: the credentials, the protocol version, or something else.
fn refusal(ack: &packet::ConnAck, version: Version, url: &MqttUrl) -> ConnectError {
    let code = ack.code;
    let said = ack
        .reason
        .as_deref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    let login = matches!(
        (version, code),
        (Version::V311, 4 | 5) | (Version::V5, 0x86 | 0x87)
    );
    if login {
        return ConnectError::Authentication(match url.user.as_deref() {
            None => format!("CONNACK code {code:#04x}{said} (no user given); the broker wants one: mqtt_url: mqtt://user:password@host:port"),
            Some(user) => format!("CONNACK code {code:#04x}{said} (user '{user}'); check the user and password in mqtt_url"),
        });
    }
    // A 3.1.1 broker answers an MQTT 5 CONNECT with its own code 1.
    if matches!((version, code), (_, 1) | (Version::V5, 0x84)) {
        return ConnectError::Protocol(format!(
            "the broker does not speak MQTT {} (CONNACK code {code:#04x}{said}): set protocol: \"3.1.1\" in the driver file",
            version.as_str()
        ));
    }
    ConnectError::Protocol(format!(
        "the broker refused the connection: CONNACK code {code:#04x}{said}"
    ))
}
