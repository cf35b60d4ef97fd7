//! MQTT control packets, 3.1.1 and 5: what the client writes (CONNECT, PUBLISH, the QoS 1 and
//! 2 answers, SUBSCRIBE, PINGREQ, DISCONNECT) and what it reads, cut out of a buffer as whole
//! packets or not at all.

/// The protocol levels brokerbench speaks: `protocol: 5` or `protocol: "3.1.1"` in a driver
/// file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// MQTT 3.1.1 (protocol level 4).
    V311,
    /// MQTT 5.0 (protocol level 5): properties, reason codes, shared subscriptions by spec.
    V5,
}

impl serde::Serialize for Version {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Version {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(VersionVisitor)
    }
}

struct VersionVisitor;

impl serde::de::Visitor<'_> for VersionVisitor {
    type Value = Version;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("5 or \"3.1.1\"")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Version, E> {
        match v {
            "5" | "5.0" => Ok(Version::V5),
            "3.1.1" => Ok(Version::V311),
            other => Err(E::custom(format!(
                "'{other}' is not an MQTT version brokerbench speaks: write 5 or \"3.1.1\""
            ))),
        }
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Version, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Version, E> {
        self.visit_str(&v.to_string())
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Version, E> {
        self.visit_str(&v.to_string())
    }
}

impl Version {
    pub fn level(self) -> u8 {
        match self {
            Version::V311 => 4,
            Version::V5 => 5,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Version::V311 => "3.1.1",
            Version::V5 => "5",
        }
    }
}

pub const CONNECT: u8 = 1;
pub const CONNACK: u8 = 2;
pub const PUBLISH: u8 = 3;
pub const PUBACK: u8 = 4;
pub const PUBREC: u8 = 5;
pub const PUBREL: u8 = 6;
pub const PUBCOMP: u8 = 7;
pub const SUBSCRIBE: u8 = 8;
pub const SUBACK: u8 = 9;
pub const PINGREQ: u8 = 12;
pub const PINGRESP: u8 = 13;
pub const DISCONNECT: u8 = 14;

/// MQTT 5 property identifiers brokerbench writes or reads.
pub mod property {
    pub const MESSAGE_EXPIRY: u8 = 0x02;
    pub const SESSION_EXPIRY: u8 = 0x11;
    pub const SERVER_KEEP_ALIVE: u8 = 0x13;
    pub const MAXIMUM_PACKET_SIZE: u8 = 0x27;
    pub const REASON_STRING: u8 = 0x1F;
    pub const RECEIVE_MAXIMUM: u8 = 0x21;
    pub const MAXIMUM_QOS: u8 = 0x24;
}

/// One packet read: its type, the flags of its first byte, and what follows the fixed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    pub kind: u8,
    pub flags: u8,
    pub body: &'a [u8],
}

/// A malformed packet, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

/// The next whole packet at the start of `buf` and the bytes it takes; None until all of it
/// has arrived.
pub fn next_packet(buf: &[u8]) -> Result<Option<(Packet<'_>, usize)>, Malformed> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    let Some((len, used)) = read_varint(&buf[1..])? else {
        return Ok(None);
    };
    let start = 1 + used;
    let end = start + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    let packet = Packet {
        kind: first >> 4,
        flags: first & 0x0F,
        body: &buf[start..end],
    };
    Ok(Some((packet, end)))
}

/// A variable byte integer at the start of `buf` and the bytes it takes; None while it is
/// incomplete.
pub fn read_varint(buf: &[u8]) -> Result<Option<(u32, usize)>, Malformed> {
    let mut value = 0u32;
    for (i, &b) in buf.iter().enumerate() {
        if i == 4 {
            return Err(Malformed("a length of more than four bytes".into()));
        }
        value |= ((b & 0x7F) as u32) << (7 * i);
        if b & 0x80 == 0 {
            return Ok(Some((value, i + 1)));
        }
    }
    if buf.len() >= 4 {
        return Err(Malformed("a length of more than four bytes".into()));
    }
    Ok(None)
}

pub fn push_varint(out: &mut Vec<u8>, mut value: u32) {
    loop {
        let byte = (value & 0x7F) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn push_str(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u16).to_be_bytes());
    out.extend_from_slice(s);
}

/// The fixed header of a packet of `kind` with `flags` and a body of `len` bytes.
fn push_header(out: &mut Vec<u8>, kind: u8, flags: u8, len: usize) {
    out.push(kind << 4 | flags);
    push_varint(out, len as u32);
}

/// What CONNECT asks for.
#[derive(Debug, Clone)]
pub struct Connect<'a> {
    pub version: Version,
    pub client_id: &'a str,
    /// Clean session (3.1.1) or clean start (5).
    pub clean: bool,
    pub keep_alive_s: u16,
    pub username: Option<&'a str>,
    pub password: Option<&'a str>,
    /// MQTT 5: how long the broker keeps the session after the connection ends.
    pub session_expiry_s: Option<u32>,
    /// MQTT 5: how many QoS 1 and 2 messages the broker may have in flight to this client.
    pub receive_maximum: Option<u16>,
}

pub fn write_connect(out: &mut Vec<u8>, c: &Connect<'_>) {
    let mut body = Vec::with_capacity(64);
    push_str(&mut body, b"MQTT");
    body.push(c.version.level());
    let mut flags = 0u8;
    if c.clean {
        flags |= 0x02;
    }
    if c.username.is_some() {
        flags |= 0x80;
    }
    if c.password.is_some() {
        flags |= 0x40;
    }
    body.push(flags);
    body.extend_from_slice(&c.keep_alive_s.to_be_bytes());
    if c.version == Version::V5 {
        let mut props = Vec::new();
        if let Some(s) = c.session_expiry_s {
            props.push(property::SESSION_EXPIRY);
            props.extend_from_slice(&s.to_be_bytes());
        }
        if let Some(r) = c.receive_maximum {
            props.push(property::RECEIVE_MAXIMUM);
            props.extend_from_slice(&r.to_be_bytes());
        }
        push_varint(&mut body, props.len() as u32);
        body.extend_from_slice(&props);
    }
    push_str(&mut body, c.client_id.as_bytes());
    if let Some(u) = c.username {
        push_str(&mut body, u.as_bytes());
    }
    if let Some(p) = c.password {
        push_str(&mut body, p.as_bytes());
    }
    push_header(out, CONNECT, 0, body.len());
    out.extend_from_slice(&body);
}

/// A PUBLISH of `payload` to `topic`; `id` for QoS 1 and 2; MQTT 5 with its (possibly empty)
/// properties: `expiry_s` as the message expiry interval.
pub fn write_publish(
    out: &mut Vec<u8>,
    version: Version,
    topic: &[u8],
    qos: u8,
    id: u16,
    expiry_s: Option<u32>,
    payload: &[u8],
) {
    let props_len = if expiry_s.is_some() { 5 } else { 0 };
    let mut len = 2 + topic.len() + payload.len();
    if qos > 0 {
        len += 2;
    }
    if version == Version::V5 {
        len += 1 + props_len;
    }
    push_header(out, PUBLISH, qos << 1, len);
    push_str(out, topic);
    if qos > 0 {
        out.extend_from_slice(&id.to_be_bytes());
    }
    if version == Version::V5 {
        out.push(props_len as u8);
        if let Some(s) = expiry_s {
            out.push(property::MESSAGE_EXPIRY);
            out.extend_from_slice(&s.to_be_bytes());
        }
    }
    out.extend_from_slice(payload);
}

/// The bytes of a PUBLISH of `payload` to `topic` at `qos` (as [`write_publish`] writes it).
pub fn publish_len(version: Version, topic: usize, qos: u8, expiry: bool, payload: usize) -> usize {
    let mut len = 2 + topic + payload;
    if qos > 0 {
        len += 2;
    }
    if version == Version::V5 {
        len += if expiry { 6 } else { 1 };
    }
    let mut header = Vec::with_capacity(5);
    push_varint(&mut header, len as u32);
    1 + header.len() + len
}

/// PUBACK, PUBREC, PUBREL or PUBCOMP of packet `id` (success: the reason code left out).
pub fn write_ack(out: &mut Vec<u8>, kind: u8, id: u16) {
    let flags = if kind == PUBREL { 0x02 } else { 0 };
    push_header(out, kind, flags, 2);
    out.extend_from_slice(&id.to_be_bytes());
}

/// SUBSCRIBE of packet `id` to `filters`, each at QoS `qos`.
pub fn write_subscribe(out: &mut Vec<u8>, version: Version, id: u16, filters: &[String], qos: u8) {
    let mut body = Vec::with_capacity(64);
    body.extend_from_slice(&id.to_be_bytes());
    if version == Version::V5 {
        body.push(0);
    }
    for filter in filters {
        push_str(&mut body, filter.as_bytes());
        body.push(qos);
    }
    push_header(out, SUBSCRIBE, 0x02, body.len());
    out.extend_from_slice(&body);
}

pub fn write_pingreq(out: &mut Vec<u8>) {
    push_header(out, PINGREQ, 0, 0);
}

/// DISCONNECT; in MQTT 5 with a session expiry of 0 when `end_session` (the broker then
/// forgets a persistent session at once).
pub fn write_disconnect(out: &mut Vec<u8>, version: Version, end_session: bool) {
    if version == Version::V5 && end_session {
        push_header(out, DISCONNECT, 0, 7);
        out.extend_from_slice(&[0, 5, property::SESSION_EXPIRY, 0, 0, 0, 0]);
    } else {
        push_header(out, DISCONNECT, 0, 0);
    }
}

/// A big-endian u16 at `at`.
pub fn u16_at(body: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(body.get(at..at + 2)?.try_into().ok()?))
}

/// An incoming PUBLISH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Publish<'a> {
    pub topic: &'a [u8],
    pub qos: u8,
    pub dup: bool,
    /// 0 at QoS 0.
    pub id: u16,
    pub payload: &'a [u8],
}

pub fn parse_publish<'a>(
    version: Version,
    flags: u8,
    body: &'a [u8],
) -> Result<Publish<'a>, Malformed> {
    let bad = || Malformed("a PUBLISH shorter than its header".into());
    let topic_len = u16_at(body, 0).ok_or_else(bad)? as usize;
    let mut at = 2 + topic_len;
    let topic = body.get(2..at).ok_or_else(bad)?;
    let qos = (flags >> 1) & 0x03;
    let mut id = 0;
    if qos > 0 {
        id = u16_at(body, at).ok_or_else(bad)?;
        at += 2;
    }
    if version == Version::V5 {
        let (len, used) = read_varint(body.get(at..).ok_or_else(bad)?)?.ok_or_else(bad)?;
        at += used + len as usize;
    }
    let payload = body.get(at..).ok_or_else(bad)?;
    Ok(Publish {
        topic,
        qos,
        dup: flags & 0x08 != 0,
        id,
        payload,
    })
}

/// What an acknowledgement packet (PUBACK, PUBREC, PUBREL, PUBCOMP) says: the packet id, and
/// the MQTT 5 reason code (0 when left out: success).
pub fn parse_ack(body: &[u8]) -> Result<(u16, u8), Malformed> {
    let id =
        u16_at(body, 0).ok_or_else(|| Malformed("an acknowledgement without its id".into()))?;
    Ok((id, body.get(2).copied().unwrap_or(0)))
}

/// What CONNACK says: the return (3.1.1) or reason (5) code, whether the broker had the
/// session, and the MQTT 5 properties brokerbench heeds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnAck {
    pub code: u8,
    pub session_present: bool,
    /// The most QoS 1 and 2 messages the client may have in flight to the broker.
    pub receive_maximum: Option<u16>,
    pub maximum_qos: Option<u8>,
    /// The keep-alive the broker wants instead of the client's.
    pub server_keep_alive: Option<u16>,
    /// The largest packet the broker takes.
    pub maximum_packet_size: Option<u32>,
    pub reason: Option<String>,
}

pub fn parse_connack(version: Version, body: &[u8]) -> Result<ConnAck, Malformed> {
    let (&flags, &code) = match body {
        [f, c, ..] => (f, c),
        _ => return Err(Malformed("a CONNACK shorter than two bytes".into())),
    };
    let mut ack = ConnAck {
        code,
        session_present: flags & 0x01 != 0,
        ..Default::default()
    };
    if version == Version::V5 && body.len() > 2 {
        for (id, value) in properties(&body[2..])? {
            match (id, value) {
                (property::RECEIVE_MAXIMUM, Prop::Number(n)) => {
                    ack.receive_maximum = Some(n as u16)
                }
                (property::MAXIMUM_QOS, Prop::Number(n)) => ack.maximum_qos = Some(n as u8),
                (property::SERVER_KEEP_ALIVE, Prop::Number(n)) => {
                    ack.server_keep_alive = Some(n as u16)
                }
                (property::MAXIMUM_PACKET_SIZE, Prop::Number(n)) => {
                    ack.maximum_packet_size = Some(n)
                }
                (property::REASON_STRING, Prop::Text(t)) => ack.reason = Some(t),
                _ => {}
            }
        }
    }
    Ok(ack)
}

/// The granted QoS (or failure code, 0x80 and up) of each filter of a SUBACK, after its id.
pub fn parse_suback(version: Version, body: &[u8]) -> Result<(u16, Vec<u8>), Malformed> {
    let bad = || Malformed("a SUBACK shorter than its header".into());
    let id = u16_at(body, 0).ok_or_else(bad)?;
    let mut at = 2;
    if version == Version::V5 {
        let (len, used) = read_varint(body.get(2..).ok_or_else(bad)?)?.ok_or_else(bad)?;
        at += used + len as usize;
    }
    Ok((id, body.get(at..).ok_or_else(bad)?.to_vec()))
}

/// An MQTT 5 property's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prop {
    Number(u32),
    Text(String),
    Bytes,
}

/// The properties of a block that starts with its length.
pub fn properties(block: &[u8]) -> Result<Vec<(u8, Prop)>, Malformed> {
    let bad = |what: &str| Malformed(format!("properties: {what}"));
    let (len, used) = read_varint(block)?.ok_or_else(|| bad("no length"))?;
    let body = block
        .get(used..used + len as usize)
        .ok_or_else(|| bad("shorter than their length"))?;
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let id = body[at];
        at += 1;
        let rest = &body[at..];
        let (value, used) = match id {
            0x01 | 0x17 | 0x19 | 0x24 | 0x25 | 0x28 | 0x29 | 0x2A => (
                Prop::Number(*rest.first().ok_or_else(|| bad("cut"))? as u32),
                1,
            ),
            0x13 | 0x21 | 0x22 | 0x23 => (
                Prop::Number(u16_at(rest, 0).ok_or_else(|| bad("cut"))? as u32),
                2,
            ),
            0x02 | 0x11 | 0x18 | 0x27 => {
                let n = rest.get(..4).ok_or_else(|| bad("cut"))?;
                (
                    Prop::Number(u32::from_be_bytes(n.try_into().expect("four bytes"))),
                    4,
                )
            }
            0x0B => {
                let (n, used) = read_varint(rest)?.ok_or_else(|| bad("cut"))?;
                (Prop::Number(n), used)
            }
            0x03 | 0x08 | 0x12 | 0x15 | 0x1A | 0x1C | 0x1F | 0x09 | 0x16 => {
                let n = u16_at(rest, 0).ok_or_else(|| bad("cut"))? as usize;
                let bytes = rest.get(2..2 + n).ok_or_else(|| bad("cut"))?;
                (
                    Prop::Text(String::from_utf8_lossy(bytes).into_owned()),
                    2 + n,
                )
            }
            0x26 => {
                let a = u16_at(rest, 0).ok_or_else(|| bad("cut"))? as usize;
                let b = u16_at(rest, 2 + a).ok_or_else(|| bad("cut"))? as usize;
                (Prop::Bytes, 4 + a + b)
            }
            other => return Err(bad(&format!("unknown property {other:#04x}"))),
        };
        if at + used > body.len() {
            return Err(bad("cut"));
        }
        at += used;
        out.push((id, value));
    }
    Ok(out)
}

/// Whether an MQTT 5 reason code of an acknowledgement is a failure (0x80 and up; 0x10 "no
/// matching subscribers" is a success).
pub fn is_failure(code: u8) -> bool {
    code >= 0x80
}

/// An MQTT 5 reason code as a kind of failure (`mqtt_quota_exceeded`).
pub fn reason_kind(code: u8) -> String {
    let name = match code {
        0x80 => "unspecified_error",
        0x83 => "implementation_specific_error",
        0x87 => "not_authorized",
        0x90 => "topic_name_invalid",
        0x91 => "packet_identifier_in_use",
        0x92 => "packet_identifier_not_found",
        0x93 => "receive_maximum_exceeded",
        0x95 => "packet_too_large",
        0x97 => "quota_exceeded",
        0x99 => "payload_format_invalid",
        _ => return format!("mqtt_reason_{code:#04x}"),
    };
    format!("mqtt_{name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_round_trip_and_wait_for_their_bytes() {
        for n in [0u32, 127, 128, 16_383, 16_384, 268_435_455] {
            let mut out = Vec::new();
            push_varint(&mut out, n);
            assert_eq!(read_varint(&out).unwrap(), Some((n, out.len())));
            assert_eq!(read_varint(&out[..out.len() - 1]).unwrap(), None);
        }
        assert!(read_varint(&[0xFF, 0xFF, 0xFF, 0xFF, 0x01]).is_err());
    }

    #[test]
    fn a_publish_reads_back_in_both_versions() {
        for version in [Version::V311, Version::V5] {
            let mut out = Vec::new();
            write_publish(&mut out, version, b"a/b", 1, 7, Some(3), b"hello");
            let (packet, used) = next_packet(&out).unwrap().unwrap();
            assert_eq!((packet.kind, used), (PUBLISH, out.len()));
            assert_eq!(publish_len(version, 3, 1, true, 5), out.len());
            let p = parse_publish(version, packet.flags, packet.body).unwrap();
            assert_eq!(
                (p.topic, p.qos, p.id, p.payload),
                (&b"a/b"[..], 1, 7, &b"hello"[..])
            );
            assert_eq!(next_packet(&out[..out.len() - 1]).unwrap(), None);
        }
    }

    #[test]
    fn a_connack_gives_its_properties() {
        // success, receive maximum 20, maximum QoS 1, a reason string, server keep-alive 30,
        // maximum packet size 1 MiB
        let body = [
            0, 0, 18, 0x21, 0, 20, 0x24, 1, 0x1F, 0, 2, b'o', b'k', 0x13, 0, 30, 0x27, 0, 0x10, 0,
            0,
        ];
        let ack = parse_connack(Version::V5, &body).unwrap();
        assert_eq!(ack.server_keep_alive, Some(30));
        assert_eq!(ack.maximum_packet_size, Some(1 << 20));
        assert_eq!(ack.receive_maximum, Some(20));
        assert_eq!(ack.maximum_qos, Some(1));
        assert_eq!(ack.reason.as_deref(), Some("ok"));
        assert_eq!(parse_connack(Version::V311, &[1, 5]).unwrap().code, 5);
        assert!(parse_connack(Version::V311, &[1]).is_err());
    }

    #[test]
    fn a_connect_has_its_flags_and_login() {
        let mut out = Vec::new();
        let c = Connect {
            version: Version::V5,
            client_id: "c1",
            clean: true,
            keep_alive_s: 60,
            username: Some("u"),
            password: Some("p"),
            session_expiry_s: Some(0),
            receive_maximum: Some(256),
        };
        write_connect(&mut out, &c);
        let (packet, _) = next_packet(&out).unwrap().unwrap();
        assert_eq!(packet.kind, CONNECT);
        assert_eq!(&packet.body[..7], b"\0\x04MQTT\x05");
        assert_eq!(packet.body[7], 0x80 | 0x40 | 0x02);
        assert!(packet.body.ends_with(b"\0\x02c1\0\x01u\0\x01p"));
    }
}
