//! AMQP 0-9-1 on the wire: frame layout, field tables and the methods brokerbench speaks
//! (see [`crate::session`]). Encoding writes straight into a caller's
//! buffer, so publishing a message or acknowledging a delivery allocates nothing.
//!
//! A frame is `type:u8 channel:u16 size:u32 payload[size] 0xCE`; a method payload starts with
//! `class:u16 method:u16`; a content header is `class:u16 weight:u16 body_size:u64
//! flags:u16 properties`, followed by body frames of at most `frame_max - 8` bytes.

use crate::naming::Argument;

pub const PROTOCOL_HEADER: &[u8; 8] = b"AMQP\x00\x00\x09\x01";
pub const FRAME_METHOD: u8 = 1;
pub const FRAME_HEADER: u8 = 2;
pub const FRAME_BODY: u8 = 3;
pub const FRAME_HEARTBEAT: u8 = 8;
pub const FRAME_END: u8 = 0xCE;
/// Frame header (type, channel, size) plus the frame-end byte.
pub const FRAME_OVERHEAD: usize = 8;
/// The frame size brokerbench asks for (RabbitMQ's default).
pub const FRAME_MAX: u32 = 131_072;

/// The basic class's content-header property flags used here.
const FLAG_HEADERS: u16 = 1 << 13;
const FLAG_DELIVERY_MODE: u16 = 1 << 12;

/// Class and method ids.
pub mod id {
    pub const CONNECTION_START: (u16, u16) = (10, 10);
    pub const CONNECTION_START_OK: (u16, u16) = (10, 11);
    pub const CONNECTION_TUNE: (u16, u16) = (10, 30);
    pub const CONNECTION_TUNE_OK: (u16, u16) = (10, 31);
    pub const CONNECTION_OPEN: (u16, u16) = (10, 40);
    pub const CONNECTION_OPEN_OK: (u16, u16) = (10, 41);
    pub const CONNECTION_CLOSE: (u16, u16) = (10, 50);
    pub const CONNECTION_CLOSE_OK: (u16, u16) = (10, 51);
    pub const CONNECTION_BLOCKED: (u16, u16) = (10, 60);
    pub const CONNECTION_UNBLOCKED: (u16, u16) = (10, 61);
    pub const EXCHANGE_DECLARE: (u16, u16) = (40, 10);
    pub const EXCHANGE_DECLARE_OK: (u16, u16) = (40, 11);
    pub const EXCHANGE_DELETE: (u16, u16) = (40, 20);
    pub const EXCHANGE_DELETE_OK: (u16, u16) = (40, 21);
    pub const QUEUE_DECLARE: (u16, u16) = (50, 10);
    pub const QUEUE_DECLARE_OK: (u16, u16) = (50, 11);
    pub const QUEUE_BIND: (u16, u16) = (50, 20);
    pub const QUEUE_BIND_OK: (u16, u16) = (50, 21);
    pub const QUEUE_DELETE: (u16, u16) = (50, 40);
    pub const QUEUE_DELETE_OK: (u16, u16) = (50, 41);
    pub const CHANNEL_OPEN: (u16, u16) = (20, 10);
    pub const CHANNEL_OPEN_OK: (u16, u16) = (20, 11);
    pub const CHANNEL_CLOSE: (u16, u16) = (20, 40);
    pub const CHANNEL_CLOSE_OK: (u16, u16) = (20, 41);
    pub const BASIC_QOS: (u16, u16) = (60, 10);
    pub const BASIC_QOS_OK: (u16, u16) = (60, 11);
    pub const BASIC_CONSUME: (u16, u16) = (60, 20);
    pub const BASIC_CONSUME_OK: (u16, u16) = (60, 21);
    pub const BASIC_CANCEL: (u16, u16) = (60, 30);
    pub const BASIC_CANCEL_OK: (u16, u16) = (60, 31);
    pub const BASIC_PUBLISH: (u16, u16) = (60, 40);
    pub const BASIC_RETURN: (u16, u16) = (60, 50);
    pub const BASIC_DELIVER: (u16, u16) = (60, 60);
    pub const BASIC_ACK: (u16, u16) = (60, 80);
    pub const BASIC_NACK: (u16, u16) = (60, 120);
    pub const CONFIRM_SELECT: (u16, u16) = (85, 10);
    pub const CONFIRM_SELECT_OK: (u16, u16) = (85, 11);
}

/// A value written into a field table.
pub enum Field<'a> {
    Text(&'a str),
    Bool(bool),
    Long(i64),
    Table(&'a [(&'a str, Field<'a>)]),
}

pub fn put_short_string(out: &mut Vec<u8>, s: &str) {
    let bytes = &s.as_bytes()[..s.len().min(255)];
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

pub fn put_long_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
}

pub fn put_table(out: &mut Vec<u8>, fields: &[(&str, Field<'_>)]) {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    for (name, value) in fields {
        put_short_string(out, name);
        match value {
            Field::Text(t) => {
                out.push(b'S');
                put_long_bytes(out, t.as_bytes());
            }
            Field::Bool(b) => {
                out.push(b't');
                out.push(u8::from(*b));
            }
            Field::Long(n) => {
                out.push(b'l');
                out.extend_from_slice(&n.to_be_bytes());
            }
            Field::Table(inner) => {
                out.push(b'F');
                put_table(out, inner);
            }
        }
    }
    let size = (out.len() - start - 4) as u32;
    out[start..start + 4].copy_from_slice(&size.to_be_bytes());
}

/// Writes queue, binding, consume or header arguments as a field table.
pub fn put_arguments(out: &mut Vec<u8>, arguments: &[(&'static str, Argument)]) {
    let fields: Vec<(&str, Field<'_>)> = arguments
        .iter()
        .map(|(name, value)| {
            let value = match value {
                Argument::Text(t) => Field::Text(t),
                Argument::Integer(n) => Field::Long(*n),
            };
            (*name, value)
        })
        .collect();
    put_table(out, &fields);
}

/// Starts a frame in `out`; returns where it starts, for [`end_frame`].
#[inline]
pub fn begin_frame(out: &mut Vec<u8>, kind: u8, channel: u16) -> usize {
    let start = out.len();
    out.push(kind);
    out.extend_from_slice(&channel.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    start
}

/// Fills in the size of the frame begun at `start` and ends it.
#[inline]
pub fn end_frame(out: &mut Vec<u8>, start: usize) {
    let size = (out.len() - start - 7) as u32;
    out[start + 3..start + 7].copy_from_slice(&size.to_be_bytes());
    out.push(FRAME_END);
}

/// Appends a method frame whose arguments `arguments` writes.
pub fn method(
    out: &mut Vec<u8>,
    channel: u16,
    (class, method): (u16, u16),
    arguments: impl FnOnce(&mut Vec<u8>),
) {
    let start = begin_frame(out, FRAME_METHOD, channel);
    out.extend_from_slice(&class.to_be_bytes());
    out.extend_from_slice(&method.to_be_bytes());
    arguments(out);
    end_frame(out, start);
}

/// A heartbeat frame.
pub const HEARTBEAT: [u8; 8] = [FRAME_HEARTBEAT, 0, 0, 0, 0, 0, 0, FRAME_END];

/// basic.ack of delivery `tag` (and every earlier one when `multiple`).
#[inline]
pub fn basic_ack(out: &mut Vec<u8>, channel: u16, tag: u64, multiple: bool) {
    method(out, channel, id::BASIC_ACK, |out| {
        out.extend_from_slice(&tag.to_be_bytes());
        out.push(u8::from(multiple));
    });
}

/// A channel.close or connection.close with reply code 200.
pub fn close(out: &mut Vec<u8>, channel: u16, which: (u16, u16), text: &str) {
    method(out, channel, which, |out| {
        out.extend_from_slice(&200u16.to_be_bytes());
        put_short_string(out, text);
        out.extend_from_slice(&[0; 4]);
    });
}

/// The constant parts of every basic.publish of one producer channel, encoded once.
#[derive(Debug, Clone)]
pub struct Publisher {
    channel: u16,
    /// The whole basic.publish method frame.
    method: Vec<u8>,
    /// Property flags and properties of the content header.
    properties: Vec<u8>,
    /// Largest body frame payload.
    body_max: usize,
}

impl Publisher {
    /// `headers` are the message headers (empty for none); `persistent` sets delivery mode 2.
    pub fn new(
        channel: u16,
        exchange: &str,
        routing_key: &str,
        mandatory: bool,
        persistent: bool,
        headers: &[(&'static str, Argument)],
        frame_max: u32,
    ) -> Self {
        let mut frame = Vec::new();
        method(&mut frame, channel, id::BASIC_PUBLISH, |out| {
            out.extend_from_slice(&0u16.to_be_bytes());
            put_short_string(out, exchange);
            put_short_string(out, routing_key);
            out.push(u8::from(mandatory));
        });
        let mut flags = FLAG_DELIVERY_MODE;
        if !headers.is_empty() {
            flags |= FLAG_HEADERS;
        }
        let mut properties = flags.to_be_bytes().to_vec();
        if !headers.is_empty() {
            put_arguments(&mut properties, headers);
        }
        properties.push(if persistent { 2 } else { 1 });
        Publisher {
            channel,
            method: frame,
            properties,
            body_max: frame_max as usize - FRAME_OVERHEAD,
        }
    }

    /// Appends the frames publishing `body` (method, content header, body frames).
    #[inline]
    pub fn publish(&self, out: &mut Vec<u8>, body: &[u8]) {
        out.reserve(self.method.len() + self.properties.len() + body.len() + 40);
        out.extend_from_slice(&self.method);
        let start = begin_frame(out, FRAME_HEADER, self.channel);
        out.extend_from_slice(&60u16.to_be_bytes());
        out.extend_from_slice(&0u16.to_be_bytes());
        out.extend_from_slice(&(body.len() as u64).to_be_bytes());
        out.extend_from_slice(&self.properties);
        end_frame(out, start);
        for chunk in body.chunks(self.body_max) {
            let start = begin_frame(out, FRAME_BODY, self.channel);
            out.extend_from_slice(chunk);
            end_frame(out, start);
        }
    }
}

/// One frame at the front of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFrame {
    pub kind: u8,
    pub channel: u16,
    /// Where the payload lies in the buffer.
    pub payload: (usize, usize),
    /// Bytes the whole frame takes.
    pub len: usize,
}

/// Why bytes are not AMQP 0-9-1 frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// The frame at the front of `buffer`, None if it is not complete yet. `max` bounds the
/// payload size (the negotiated frame_max).
pub fn next_frame(buffer: &[u8], max: usize) -> Result<Option<RawFrame>, Malformed> {
    if buffer.len() < 7 {
        return Ok(None);
    }
    if &buffer[..4] == b"AMQP" {
        return Err(Malformed("the server answered with the header of another AMQP protocol version; it does not speak 0-9-1"));
    }
    let kind = buffer[0];
    let channel = u16::from_be_bytes([buffer[1], buffer[2]]);
    let size = u32::from_be_bytes([buffer[3], buffer[4], buffer[5], buffer[6]]) as usize;
    if !matches!(
        kind,
        FRAME_METHOD | FRAME_HEADER | FRAME_BODY | FRAME_HEARTBEAT
    ) {
        return Err(Malformed(
            "the answer is not an AMQP 0-9-1 frame: not an AMQP broker",
        ));
    }
    if size > max {
        return Err(Malformed(
            "a frame larger than the frame_max agreed in the handshake: the broker broke the protocol",
        ));
    }
    let len = size + FRAME_OVERHEAD;
    if buffer.len() < len {
        return Ok(None);
    }
    if buffer[len - 1] != FRAME_END {
        return Err(Malformed(
            "a frame without the frame-end byte: not an AMQP broker",
        ));
    }
    Ok(Some(RawFrame {
        kind,
        channel,
        payload: (7, 7 + size),
        len,
    }))
}

/// Reads AMQP wire types from a payload.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, at: 0 }
    }

    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let slice = self.bytes.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(slice)
    }

    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.at.min(self.bytes.len())..]
    }

    pub fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    pub fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    pub fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }

    /// Class and method ids at the start of a method payload.
    pub fn method_id(&mut self) -> Option<(u16, u16)> {
        Some((self.u16()?, self.u16()?))
    }

    pub fn short_string(&mut self) -> Option<String> {
        let n = self.u8()? as usize;
        self.take(n)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    pub fn skip_short_string(&mut self) -> Option<()> {
        let n = self.u8()? as usize;
        self.take(n).map(|_| ())
    }

    pub fn long_string(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        self.take(n)
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// The string-valued entries of a field table; other values are skipped.
    ///
    /// A value of a type it does not know, or one cut short, ends the table there: what came
    /// before is kept (a table has no other way to skip it, and a server's properties should
    /// not fail a connection over a field brokerbench does not read).
    pub fn table_strings(&mut self) -> Option<Vec<(String, String)>> {
        let n = self.u32()? as usize;
        let mut table = Reader::new(self.take(n)?);
        let mut out = Vec::new();
        while table.at < table.bytes.len() {
            let entry = (|| {
                let name = table.short_string()?;
                let kind = table.u8()?;
                if kind == b'S' {
                    Some(Some((name, table.long_string()?)))
                } else {
                    table.skip_value(kind).map(|_| None)
                }
            })();
            match entry {
                Some(Some(pair)) => out.push(pair),
                Some(None) => {}
                None => break,
            }
        }
        Some(out)
    }

    fn skip_value(&mut self, kind: u8) -> Option<()> {
        let fixed = match kind {
            b't' | b'b' | b'B' => 1,
            b's' | b'u' => 2,
            b'I' | b'i' | b'f' => 4,
            b'l' | b'L' | b'd' | b'T' => 8,
            b'D' => 5,
            b'V' => 0,
            b'S' | b'x' | b'A' | b'F' => self.u32()? as usize,
            _ => return None,
        };
        self.take(fixed).map(|_| ())
    }

    /// Reply code and text of a connection.close or channel.close.
    pub fn close_reason(&mut self) -> String {
        let code = self.u16().unwrap_or(0);
        let text = self.short_string().unwrap_or_default();
        format!("{code} {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator for the random-bytes tests (xorshift64*).
    struct Bytes(u64);

    impl Bytes {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn fill(&mut self, n: usize) -> Vec<u8> {
            (0..n).map(|_| self.next() as u8).collect()
        }
    }

    #[test]
    fn the_frame_reader_takes_any_bytes_without_panicking_or_overreaching() {
        let max = 4096;
        let mut random = Bytes(0x9e37_79b9_7f4a_7c15);
        for round in 0..20_000 {
            let len = (random.next() % 9000) as usize;
            let mut buffer = random.fill(len);
            // Half the rounds start with a plausible header, so that sizes and frame-ends
            // are exercised, not only the first checks.
            if round % 2 == 0 && buffer.len() >= 7 {
                buffer[0] = [FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT]
                    [(random.next() % 4) as usize];
                let size = (random.next() % (max as u64 + 200)) as u32;
                buffer[3..7].copy_from_slice(&size.to_be_bytes());
            }
            match next_frame(&buffer, max) {
                Ok(Some(frame)) => {
                    assert!(frame.len <= buffer.len(), "round {round}");
                    let (start, end) = frame.payload;
                    assert!(start <= end && end < frame.len && end - start <= max);
                    assert_eq!(buffer[frame.len - 1], FRAME_END);
                }
                Ok(None) => assert!(
                    buffer.len() < 7 + max + 1,
                    "round {round}: waits for more only while a frame could still fit"
                ),
                Err(_) => {}
            }
        }
    }

    fn frames(bytes: &[u8]) -> Vec<(u8, u16, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = 0;
        while let Some(f) = next_frame(&bytes[at..], FRAME_MAX as usize).unwrap() {
            out.push((
                f.kind,
                f.channel,
                bytes[at + f.payload.0..at + f.payload.1].to_vec(),
            ));
            at += f.len;
        }
        assert_eq!(at, bytes.len(), "trailing bytes");
        out
    }

    #[test]
    fn field_tables_round_trip_through_the_reader() {
        let mut out = Vec::new();
        put_table(
            &mut out,
            &[
                ("product", Field::Text("RabbitMQ")),
                ("capabilities", Field::Table(&[("x", Field::Bool(true))])),
                ("n", Field::Long(-5)),
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
    fn a_publish_is_method_header_and_body_frames_split_at_frame_max() {
        let p = Publisher::new(
            3,
            "ex",
            "key",
            true,
            true,
            &[("topic", Argument::Text("t".into()))],
            4096 + FRAME_OVERHEAD as u32,
        );
        let body: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let mut out = Vec::new();
        p.publish(&mut out, &body);
        let f = frames(&out);
        assert_eq!(f.len(), 5, "method, header, 3 body frames");
        assert!(f.iter().all(|(_, channel, _)| *channel == 3));
        let mut m = Reader::new(&f[0].2);
        assert_eq!(m.method_id(), Some(id::BASIC_PUBLISH));
        assert_eq!(m.u16(), Some(0));
        assert_eq!(m.short_string().as_deref(), Some("ex"));
        assert_eq!(m.short_string().as_deref(), Some("key"));
        assert_eq!(m.u8(), Some(1), "mandatory");
        assert_eq!(f[1].0, FRAME_HEADER);
        let mut h = Reader::new(&f[1].2);
        assert_eq!(
            (h.u16(), h.u16(), h.u64()),
            (Some(60), Some(0), Some(10_000))
        );
        assert_eq!(h.u16(), Some(FLAG_HEADERS | FLAG_DELIVERY_MODE));
        let headers = h.table_strings().unwrap();
        assert_eq!(headers, vec![("topic".to_string(), "t".to_string())]);
        assert_eq!(h.u8(), Some(2), "persistent");
        assert!(h.rest().is_empty());
        let sizes: Vec<usize> = f[2..]
            .iter()
            .map(|(k, _, p)| {
                assert_eq!(*k, FRAME_BODY);
                p.len()
            })
            .collect();
        assert_eq!(sizes, vec![4096, 4096, 1808]);
        let joined: Vec<u8> = f[2..].iter().flat_map(|(_, _, p)| p.clone()).collect();
        assert_eq!(joined, body);
        // An empty body has no body frame.
        out.clear();
        p.publish(&mut out, &[]);
        assert_eq!(frames(&out).len(), 2);
    }

    #[test]
    fn incomplete_and_foreign_bytes_are_told_apart() {
        let mut out = Vec::new();
        basic_ack(&mut out, 1, 42, true);
        for cut in 0..out.len() {
            assert_eq!(next_frame(&out[..cut], 1024), Ok(None), "cut at {cut}");
        }
        let f = next_frame(&out, 1024).unwrap().unwrap();
        let mut r = Reader::new(&out[f.payload.0..f.payload.1]);
        assert_eq!(r.method_id(), Some(id::BASIC_ACK));
        assert_eq!((r.u64(), r.u8()), (Some(42), Some(1)));
        assert!(next_frame(b"HTTP/1.1 400 Bad", 1024).is_err());
        assert!(next_frame(b"AMQP\x00\x00\x09\x01", 1024).is_err());
        let mut bad = out.clone();
        *bad.last_mut().unwrap() = 0;
        assert!(next_frame(&bad, 1024).is_err());
        assert!(next_frame(&out, 4).is_err(), "larger than frame_max");
        assert_eq!(frames(&HEARTBEAT), vec![(FRAME_HEARTBEAT, 0, vec![])]);
    }
}
