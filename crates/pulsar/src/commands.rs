//! Pulsar's binary protocol: the commands brokerbench sends, framed, and the frames it
//! receives, cut out of a buffer. A frame is `[total size][command size][BaseCommand]`, a
//! message-carrying one (SEND, MESSAGE) followed by `[metadata size][MessageMetadata][payload]`
//! (a checksum before it is optional: brokerbench sends none and skips one it receives).
//! BaseCommand holds its type in field 1 and the command in the field of the same number.

use crate::proto::{self, put_bytes, put_message, put_u64};

/// The protocol version brokerbench speaks (Pulsar 2.8's: producer access modes, ack
/// receipts); the broker answers with the lower of its own and this.
pub const PROTOCOL_VERSION: u64 = 17;
/// The largest frame brokerbench accepts (Pulsar's default `maxMessageSize`, 5 MiB, and room
/// for the command).
pub const MAX_FRAME: usize = 5 * 1024 * 1024 + 64 * 1024;

/// Command types (BaseCommand.Type).
pub mod kind {
    pub const CONNECT: u32 = 2;
    pub const CONNECTED: u32 = 3;
    pub const SUBSCRIBE: u32 = 4;
    pub const PRODUCER: u32 = 5;
    pub const SEND: u32 = 6;
    pub const SEND_RECEIPT: u32 = 7;
    pub const SEND_ERROR: u32 = 8;
    pub const MESSAGE: u32 = 9;
    pub const ACK: u32 = 10;
    pub const FLOW: u32 = 11;
    pub const SUCCESS: u32 = 13;
    pub const ERROR: u32 = 14;
    pub const CLOSE_PRODUCER: u32 = 15;
    pub const CLOSE_CONSUMER: u32 = 16;
    pub const PRODUCER_SUCCESS: u32 = 17;
    pub const PING: u32 = 18;
    pub const PONG: u32 = 19;
    pub const PARTITIONED_METADATA_RESPONSE: u32 = 22;
    pub const LOOKUP: u32 = 23;
    pub const LOOKUP_RESPONSE: u32 = 24;
    pub const ACTIVE_CONSUMER_CHANGE: u32 = 31;
}

/// A subscription's type (CommandSubscribe.SubType).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubType {
    Exclusive = 0,
    Shared = 1,
    Failover = 2,
    KeyShared = 3,
}

/// Appends a command without a payload.
pub fn simple(out: &mut Vec<u8>, kind: u32, write: impl FnOnce(&mut Vec<u8>)) {
    let mut command = Vec::with_capacity(64);
    put_u64(&mut command, 1, u64::from(kind));
    put_message(&mut command, kind, write);
    out.extend_from_slice(&(command.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(&(command.len() as u32).to_be_bytes());
    out.extend_from_slice(&command);
}

/// CONNECT: the client, the protocol version and, when given, an authentication method and
/// its data (`token` and the token).
pub fn connect(out: &mut Vec<u8>, auth: Option<(&str, &[u8])>) {
    simple(out, kind::CONNECT, |c| {
        put_bytes(
            c,
            1,
            concat!("brokerbench ", env!("CARGO_PKG_VERSION")).as_bytes(),
        );
        if let Some((method, data)) = auth {
            put_bytes(c, 3, data);
            put_bytes(c, 5, method.as_bytes());
        }
        put_u64(c, 4, PROTOCOL_VERSION);
    });
}

pub fn lookup(out: &mut Vec<u8>, topic: &str, request_id: u64, authoritative: bool) {
    simple(out, kind::LOOKUP, |c| {
        put_bytes(c, 1, topic.as_bytes());
        put_u64(c, 2, request_id);
        put_u64(c, 3, u64::from(authoritative));
    });
}

pub fn producer(out: &mut Vec<u8>, topic: &str, producer_id: u64, request_id: u64) {
    simple(out, kind::PRODUCER, |c| {
        put_bytes(c, 1, topic.as_bytes());
        put_u64(c, 2, producer_id);
        put_u64(c, 3, request_id);
    });
}

/// What SUBSCRIBE asks for.
pub struct Subscribe<'a> {
    pub topic: &'a str,
    pub subscription: &'a str,
    pub sub_type: SubType,
    pub consumer_id: u64,
    pub consumer_name: &'a str,
}

/// SUBSCRIBE to a durable subscription; a new one starts at the earliest message (a run's
/// topics are new, so nothing sent before a consumer subscribed is missed).
pub fn subscribe(out: &mut Vec<u8>, s: &Subscribe<'_>, request_id: u64) {
    simple(out, kind::SUBSCRIBE, |c| {
        put_bytes(c, 1, s.topic.as_bytes());
        put_bytes(c, 2, s.subscription.as_bytes());
        put_u64(c, 3, s.sub_type as u64);
        put_u64(c, 4, s.consumer_id);
        put_u64(c, 5, request_id);
        put_bytes(c, 6, s.consumer_name.as_bytes());
        put_u64(c, 8, 1);
        put_u64(c, 13, 1);
    });
}

pub fn flow(out: &mut Vec<u8>, consumer_id: u64, permits: u32) {
    simple(out, kind::FLOW, |c| {
        put_u64(c, 1, consumer_id);
        put_u64(c, 2, u64::from(permits));
    });
}

/// A message's id: ledger and entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct MessageId {
    pub ledger: u64,
    pub entry: u64,
}

/// ACK of `ids` (several in one command when individual; the last one when cumulative).
pub fn ack(out: &mut Vec<u8>, consumer_id: u64, cumulative: bool, ids: &[MessageId]) {
    simple(out, kind::ACK, |c| {
        put_u64(c, 1, consumer_id);
        put_u64(c, 2, u64::from(cumulative));
        for id in ids {
            put_message(c, 3, |m| {
                put_u64(m, 1, id.ledger);
                put_u64(m, 2, id.entry);
            });
        }
    });
}

pub fn pong(out: &mut Vec<u8>) {
    simple(out, kind::PONG, |_| {});
}

/// A SEND of `count` messages (one, or a batch) starting at `sequence_id`, whose metadata
/// `metadata` wrote; the payload follows.
pub fn send(
    out: &mut Vec<u8>,
    producer_id: u64,
    sequence_id: u64,
    count: u32,
    metadata: &[u8],
    payload: &[u8],
) {
    let mut command = Vec::with_capacity(32);
    put_u64(&mut command, 1, u64::from(kind::SEND));
    put_message(&mut command, kind::SEND, |c| {
        put_u64(c, 1, producer_id);
        put_u64(c, 2, sequence_id);
        if count != 1 {
            put_u64(c, 3, u64::from(count));
        }
    });
    let total = 4 + command.len() + 4 + metadata.len() + payload.len();
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&(command.len() as u32).to_be_bytes());
    out.extend_from_slice(&command);
    out.extend_from_slice(&(metadata.len() as u32).to_be_bytes());
    out.extend_from_slice(metadata);
    out.extend_from_slice(payload);
}

/// A received frame: its type, the command's fields, and what follows the command (a
/// MESSAGE's metadata and payload).
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    pub kind: u32,
    pub command: &'a [u8],
    pub rest: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Field `field` of the command as a number.
    pub fn number(&self, field: u32) -> Option<u64> {
        proto::field(self.command, field)?.as_u64()
    }

    /// Field `field` of the command as text.
    pub fn text(&self, field: u32) -> String {
        proto::field(self.command, field)
            .map(|v| v.as_text())
            .unwrap_or_default()
    }

    /// The request id an answer carries (its field `field`).
    pub fn request_id(&self) -> Option<u64> {
        let field = match self.kind {
            kind::LOOKUP_RESPONSE => 4,
            kind::PARTITIONED_METADATA_RESPONSE => 2,
            _ => 1,
        };
        self.number(field)
    }

    /// An ERROR's or a failed answer's words: `ServerError code: message`.
    pub fn error(&self) -> String {
        let (code_field, message_field) = match self.kind {
            kind::ERROR => (2, 3),
            kind::SEND_ERROR => (3, 4),
            kind::LOOKUP_RESPONSE => (6, 7),
            kind::PARTITIONED_METADATA_RESPONSE => (4, 5),
            _ => return String::new(),
        };
        let code = self.number(code_field).unwrap_or(0);
        format!("{}: {}", server_error(code), self.text(message_field))
    }
}

/// A frame cut from the front of `buf`, and its length; None until a whole one is there.
pub fn next_frame(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, String> {
    let Some(total) = buf.get(..4) else {
        return Ok(None);
    };
    let total = u32::from_be_bytes(total.try_into().expect("4 bytes")) as usize;
    if !(4..=MAX_FRAME).contains(&total) {
        return Err(format!("frame of {total} bytes"));
    }
    let Some(frame) = buf.get(4..4 + total) else {
        return Ok(None);
    };
    let size = u32::from_be_bytes(frame[..4].try_into().expect("4 bytes")) as usize;
    let base = frame
        .get(4..4 + size)
        .ok_or_else(|| format!("command of {size} bytes in a frame of {total}"))?;
    let kind = proto::field(base, 1)
        .and_then(|v| v.as_u64())
        .ok_or("a command without its type")? as u32;
    let command = proto::field(base, kind)
        .and_then(|v| v.as_bytes())
        .unwrap_or_default();
    let frame = Frame {
        kind,
        command,
        rest: &frame[4 + size..],
    };
    Ok(Some((frame, 4 + total)))
}

/// ServerError's name for `code`.
pub fn server_error(code: u64) -> &'static str {
    const NAMES: [&str; 26] = [
        "UnknownError",
        "MetadataError",
        "PersistenceError",
        "AuthenticationError",
        "AuthorizationError",
        "ConsumerBusy",
        "ServiceNotReady",
        "ProducerBlockedQuotaExceededError",
        "ProducerBlockedQuotaExceededException",
        "ChecksumError",
        "UnsupportedVersionError",
        "TopicNotFound",
        "SubscriptionNotFound",
        "ConsumerNotFound",
        "TooManyRequests",
        "TopicTerminatedError",
        "ProducerBusy",
        "InvalidTopicName",
        "IncompatibleSchema",
        "ConsumerAssignError",
        "TransactionCoordinatorNotFound",
        "InvalidTxnStatus",
        "NotAllowedError",
        "TransactionConflict",
        "TransactionNotFound",
        "ProducerFenced",
    ];
    NAMES.get(code as usize).copied().unwrap_or("ServerError")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_framed_command_is_cut_back_out() {
        let mut out = Vec::new();
        flow(&mut out, 7, 1000);
        send(&mut out, 1, 2, 1, b"meta", b"payload");
        let (frame, used) = next_frame(&out).unwrap().unwrap();
        assert_eq!(
            (frame.kind, frame.number(1), frame.number(2)),
            (kind::FLOW, Some(7), Some(1000))
        );
        let (send, rest) = next_frame(&out[used..]).unwrap().unwrap();
        assert_eq!((send.kind, send.number(2)), (kind::SEND, Some(2)));
        assert_eq!(send.rest, b"\0\0\0\x04metapayload");
        assert_eq!(used + rest, out.len());
        assert!(next_frame(&out[..used - 1]).unwrap().is_none());
    }
}
