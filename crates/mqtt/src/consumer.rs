//! A member of a subscription: one client subscribed to its topic's filter (through a shared
//! subscription, `$share/<group>/<filter>`, when the subscription has several members). A
//! QoS 1 message is answered with PUBACK, a QoS 2 one with PUBREC (and the broker's PUBREL
//! with PUBCOMP), written at once and sent with the next read.

use std::collections::HashSet;
use std::time::Duration;

use brokerbench_driver::{Consumer, Deliveries, Delivery, Unread};

use crate::conn::Conn;
use crate::packet::{self, Packet, Version};
use crate::reconnect::Reconnector;
use crate::store_count::StoreCount;

pub struct MqttConsumer {
    conn: Conn,
    /// The topic's partition topics, partition 0 first (a delivery's stream is its index).
    topics: Vec<Vec<u8>>,
    /// QoS 2 messages delivered whose PUBREL has not come: a PUBLISH sent again with one of
    /// these identifiers is not delivered twice.
    received: HashSet<u16>,
    /// A clean session forgets what `received` holds when the connection ends.
    clean: bool,
    /// Backlog mode: the connection is kept alive and not read, so the broker queues.
    paused: bool,
    reconnector: Reconnector,
    /// Where the broker says how many messages it stores (a run of one subscription).
    store: Option<StoreCount>,
}

impl MqttConsumer {
    /// `clean`: whether the session is clean; `store`: where to count what the broker still
    /// holds for it when the drain ends.
    pub fn new(
        conn: Conn,
        reconnector: Reconnector,
        topics: &[String],
        (clean, store): (bool, Option<StoreCount>),
    ) -> Self {
        MqttConsumer {
            conn,
            topics: topics.iter().map(|t| t.as_bytes().to_vec()).collect(),
            received: HashSet::new(),
            clean,
            paused: false,
            reconnector,
            store,
        }
    }

    fn recover(&mut self, timeout: Duration) {
        if self.reconnector.recover_into(&mut self.conn, timeout) {
            // A session the broker no longer has (a clean one, or one a restarted broker lost)
            // starts its packet identifiers again: what was received under the old is forgotten.
            if self.clean || !self.conn.connack.session_present {
                self.received.clear();
            }
        }
    }
}

/// What one packet from the broker does: a PUBLISH is delivered (unless it repeats a QoS 2
/// message not yet released) and answered; a PUBREL is answered with PUBCOMP.
fn on_packet(
    p: Packet<'_>,
    out: &mut Vec<u8>,
    version: Version,
    topics: &[Vec<u8>],
    received: &mut HashSet<u16>,
    deliveries: Deliveries<'_>,
) -> Result<(), String> {
    let malformed = |e: packet::Malformed| format!("malformed_packet: {}", e.0);
    match p.kind {
        packet::PUBLISH => {
            let message = packet::parse_publish(version, p.flags, p.body).map_err(malformed)?;
            let repeat = message.qos == 2 && !received.insert(message.id);
            if !repeat {
                let stream = topics.iter().position(|t| t == message.topic).unwrap_or(0);
                deliveries(Delivery {
                    stream: stream as u32,
                    payload: message.payload,
                    received_ns: None,
                    slot: 0,
                });
            }
            match message.qos {
                1 => packet::write_ack(out, packet::PUBACK, message.id),
                2 => packet::write_ack(out, packet::PUBREC, message.id),
                _ => {}
            }
        }
        packet::PUBREL => {
            let (id, _) = packet::parse_ack(p.body).map_err(malformed)?;
            received.remove(&id);
            packet::write_ack(out, packet::PUBCOMP, id);
        }
        _ => {}
    }
    Ok(())
}

impl Consumer for MqttConsumer {
    fn poll(&mut self, timeout: Duration, deliveries: Deliveries<'_>) -> Result<(), String> {
        if self.reconnector.is_lost() {
            self.recover(timeout);
            return Ok(());
        }
        if self.paused {
            return self
                .conn
                .idle(timeout)
                .inspect_err(|kind| self.reconnector.lose(kind));
        }
        let (version, topics, received) = (self.conn.version, &self.topics, &mut self.received);
        let result = self.conn.poll(timeout, &mut |p, out| {
            on_packet(p, out, version, topics, received, deliveries)
        });
        match result {
            Ok(_) => Ok(()),
            Err(kind) => {
                self.reconnector.lose(&kind);
                Err(kind)
            }
        }
    }

    fn assigned(&self, _slot: usize) -> usize {
        self.topics.len()
    }

    /// Paused, the consumer reads nothing (the broker queues what comes, in its session) and
    /// keeps its connection alive with PINGREQ, so that a backlog may take longer to build than
    /// the keep-alive.
    fn pause(&mut self, paused: bool) -> bool {
        self.paused = paused;
        true
    }

    fn unread(&mut self) -> Option<Vec<Unread>> {
        self.store.as_ref()?.unread()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_2_is_delivered_once_and_answered() {
        let topics = vec![b"t/0".to_vec(), b"t/1".to_vec()];
        let mut publish = Vec::new();
        packet::write_publish(&mut publish, Version::V5, b"t/1", 2, 5, None, b"payload");
        let (p, _) = packet::next_packet(&publish).unwrap().unwrap();
        let (mut out, mut received, mut got) = (Vec::new(), HashSet::new(), Vec::new());
        for _ in 0..2 {
            on_packet(p, &mut out, Version::V5, &topics, &mut received, &mut |d| {
                got.push((d.stream, d.payload.to_vec()))
            })
            .unwrap();
        }
        assert_eq!(got, vec![(1, b"payload".to_vec())]);
        assert_eq!(out, [0x50, 2, 0, 5, 0x50, 2, 0, 5]);
        let rel = [0, 5];
        let p = Packet {
            kind: packet::PUBREL,
            flags: 2,
            body: &rel,
        };
        on_packet(
            p,
            &mut out,
            Version::V5,
            &topics,
            &mut received,
            &mut |_| {},
        )
        .unwrap();
        assert!(received.is_empty() && out.ends_with(&[0x70, 2, 0, 5]));
    }
}
