//! A producer: each message one PUBLISH to its topic (to one of the topic's partition topics,
//! by key or in turn), sent without waiting (the PUBLISHes of a burst in one write, at the
//! next poll). At QoS 1 the broker's PUBACK is the acknowledgement; at QoS 2 its PUBREC is
//! answered with PUBREL and its PUBCOMP is the acknowledgement; at QoS 0 nothing is
//! acknowledged (the engine then compares deliveries with what was sent).

use std::collections::HashMap;
use std::time::Duration;

use brokerbench_driver::arrival::LastRead;
use brokerbench_driver::{fail_all, Ack, OutgoingMessage, Producer, SendError, Sent};

use crate::conn::{Conn, CONNECTION_CLOSED};
use crate::packet::{self, Packet};
use crate::reconnect::Reconnector;

/// The kind of a send larger than the broker takes (its CONNACK's maximum packet size).
pub const PACKET_TOO_LARGE: &str = "mqtt_packet_too_large";

/// Bytes of PUBLISHes written before they are sent without waiting for the next poll.
const FLUSH_AT: usize = 64 * 1024;

/// How a producer publishes.
#[derive(Debug, Clone)]
pub struct Publishing {
    /// The topic's partition topics, partition 0 first.
    pub topics: Vec<String>,
    pub qos: u8,
    pub expiry_s: Option<u32>,
    pub max_outstanding: u32,
}

pub struct MqttProducer {
    conn: Conn,
    topics: Vec<Vec<u8>>,
    /// The next partition for a message without a key.
    turn: usize,
    qos: u8,
    expiry_s: Option<u32>,
    /// QoS 1 and 2 PUBLISHes by packet identifier.
    pending: HashMap<u16, Sent>,
    next_id: u16,
    /// In flight at most: `max_outstanding`, and no more than the broker's receive maximum.
    limit: usize,
    max_outstanding: usize,
    reconnector: Reconnector,
}

impl MqttProducer {
    pub fn new(conn: Conn, reconnector: Reconnector, publishing: Publishing) -> Self {
        let max_outstanding = publishing.max_outstanding as usize;
        let mut producer = MqttProducer {
            conn,
            topics: publishing
                .topics
                .iter()
                .map(|t| t.as_bytes().to_vec())
                .collect(),
            turn: 0,
            qos: publishing.qos,
            expiry_s: publishing.expiry_s,
            pending: HashMap::with_capacity(max_outstanding.min(65_535)),
            next_id: 0,
            limit: max_outstanding,
            max_outstanding,
            reconnector,
        };
        producer.heed_broker();
        producer
    }

    /// The broker's receive maximum (MQTT 5) bounds what is in flight.
    fn heed_broker(&mut self) {
        let broker = self.conn.connack.receive_maximum.unwrap_or(u16::MAX) as usize;
        self.limit = self.max_outstanding.min(broker).max(1);
    }

    /// The partition of a message: by its key's hash, else the next in turn.
    fn partition_for(&mut self, key: Option<&[u8]>) -> usize {
        let n = self.topics.len();
        match key {
            Some(key) => brokerbench_driver::naming::key_partition(key, n),
            None => {
                self.turn = (self.turn + 1) % n;
                self.turn
            }
        }
    }

    /// A packet identifier not in flight.
    fn take_id(&mut self) -> u16 {
        loop {
            self.next_id = self.next_id.wrapping_add(1).max(1);
            if !self.pending.contains_key(&self.next_id) {
                return self.next_id;
            }
        }
    }

    /// The connection is gone: what is in flight fails; later sends wait for a new one, or
    /// fail at once without reconnecting.
    fn lose(&mut self, kind: &str, acks: &mut dyn FnMut(Ack)) {
        self.conn.link.out().clear();
        fail_pending(&mut self.pending, kind, acks);
        self.reconnector.lose(kind);
    }
}

/// Fails everything in flight with `kind`.
fn fail_pending(pending: &mut HashMap<u16, Sent>, kind: &str, acks: &mut dyn FnMut(Ack)) {
    fail_all(pending.drain().map(|(_, sent)| sent), kind, acks);
}

/// What one packet from the broker does to what is in flight: an acknowledgement (PUBACK,
/// PUBCOMP, or a PUBREC that refuses), a PUBREL for a PUBREC, or nothing.
fn on_packet(
    p: Packet<'_>,
    out: &mut Vec<u8>,
    pending: &mut HashMap<u16, Sent>,
    arrived: &LastRead,
    acks: &mut dyn FnMut(Ack),
) -> Result<(), String> {
    let (id, code) = match p.kind {
        packet::PUBACK | packet::PUBREC | packet::PUBCOMP => {
            packet::parse_ack(p.body).map_err(|e| format!("malformed_packet: {}", e.0))?
        }
        _ => return Ok(()),
    };
    if p.kind == packet::PUBREC && !packet::is_failure(code) {
        packet::write_ack(out, packet::PUBREL, id);
        return Ok(());
    }
    let Some(entry) = pending.remove(&id) else {
        return Err("unexpected_acknowledgement".into());
    };
    let result = if packet::is_failure(code) {
        Err(packet::reason_kind(code))
    } else {
        Ok(())
    };
    acks(entry.settled(Some(arrived.get()), result));
    Ok(())
}

impl Producer for MqttProducer {
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError> {
        // At QoS 0 nothing waits for an acknowledgement.
        let in_flight = if self.qos > 0 { self.pending.len() } else { 0 };
        let envelope = self
            .reconnector
            .admit(in_flight, self.limit, message.payload)?;
        let partition = self.partition_for(message.key);
        if let Some(max) = self.conn.maximum_packet_size() {
            let topic = self.topics[partition].len();
            let expiry = self.expiry_s.is_some();
            let len = packet::publish_len(
                self.conn.version,
                topic,
                self.qos,
                expiry,
                message.payload.len(),
            );
            if len > max {
                return Err(SendError::Failed(PACKET_TOO_LARGE.into()));
            }
        }
        let id = if self.qos > 0 { self.take_id() } else { 0 };
        let (version, qos, expiry_s) = (self.conn.version, self.qos, self.expiry_s);
        let topic = &self.topics[partition];
        packet::write_publish(
            self.conn.link.out(),
            version,
            topic,
            qos,
            id,
            expiry_s,
            message.payload,
        );
        // Written with the next poll (the engine polls before it waits for a next send time,
        // and every 64 sends at the maximum rate): the PUBLISHes of a burst in one system call.
        if self.conn.link.out().len() >= FLUSH_AT && self.conn.link.flush().is_err() {
            self.conn.link.out().clear();
            self.reconnector.lose(CONNECTION_CLOSED);
            return Err(self.reconnector.unavailable(CONNECTION_CLOSED));
        }
        if qos > 0 {
            self.pending.insert(id, Sent::of(envelope, &message));
        }
        Ok(())
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        if let Some(kind) = self.reconnector.lost_as() {
            fail_pending(&mut self.pending, kind, acks);
            if self.reconnector.recover_into(&mut self.conn, timeout) {
                self.heed_broker();
            }
            return;
        }
        let (pending, arrived) = (&mut self.pending, self.conn.link.last_read());
        let result = self.conn.poll(timeout, &mut |p, out| {
            on_packet(p, out, pending, &arrived, acks)
        });
        if let Err(kind) = result {
            self.lose(&kind, acks);
        }
    }

    /// What awaits its acknowledgement; at QoS 0, a burst still to be written counts as one
    /// (so that the drain polls it out).
    fn in_flight(&self) -> usize {
        let unsent = self.qos == 0 && !self.reconnector.is_lost() && self.conn.link.unsent();
        self.pending.len() + usize::from(unsent)
    }

    fn abandon(&mut self) {
        self.pending.clear();
        self.conn.link.out().clear();
    }

    fn confirms(&self) -> bool {
        self.qos > 0
    }

    fn stamps_acknowledgements(&self) -> bool {
        // A PUBACK keeps the time it reached the socket, however late `poll` reads it. At
        // QoS 2 the PUBREC must be answered (PUBREL) for the PUBCOMP to come: the producer
        // keeps waking for it.
        self.qos == 1
    }

    fn ack_note(&self) -> Option<String> {
        match self.qos {
            0 => Some("QoS 0 (at most once): the broker acknowledges nothing".into()),
            1 => Some("QoS 1: an acknowledgement is the broker's PUBACK (at least once)".into()),
            _ => Some("QoS 2: an acknowledgement is the broker's PUBCOMP, after PUBREC and PUBREL (exactly once)".into()),
        }
    }

    fn disconnected_since(&self) -> Option<u64> {
        self.reconnector.redial.since_ns()
    }
}

/// The connection ends with DISCONNECT (and what is written before it), as a client that
/// means to go.
impl Drop for MqttProducer {
    fn drop(&mut self) {
        if !self.reconnector.is_lost() {
            self.conn.disconnect(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brokerbench_driver::Envelope;

    #[test]
    fn qos_2_answers_pubrec_and_acknowledges_at_pubcomp() {
        let mut pending = HashMap::new();
        let envelope = Envelope {
            producer: 0,
            sequence: 3,
            intended_ns: 1,
        };
        pending.insert(
            9,
            Sent {
                envelope,
                sent_ns: 1,
                bytes: 40,
            },
        );
        let (mut out, mut got) = (Vec::new(), Vec::new());
        let rec = [0, 9];
        let p = Packet {
            kind: packet::PUBREC,
            flags: 0,
            body: &rec,
        };
        on_packet(p, &mut out, &mut pending, &LastRead::default(), &mut |a| {
            got.push(a)
        })
        .unwrap();
        assert_eq!(out, [0x62, 2, 0, 9]);
        assert!(got.is_empty() && pending.contains_key(&9));
        let p = Packet {
            kind: packet::PUBCOMP,
            ..p
        };
        on_packet(p, &mut out, &mut pending, &LastRead::default(), &mut |a| {
            got.push(a)
        })
        .unwrap();
        assert!(got.len() == 1 && got[0].result.is_ok() && pending.is_empty());
        let refused = [0, 9, 0x97];
        let p = Packet {
            kind: packet::PUBACK,
            flags: 0,
            body: &refused,
        };
        assert!(on_packet(p, &mut out, &mut pending, &LastRead::default(), &mut |_| {}).is_err());
    }
}
