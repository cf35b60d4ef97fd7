//! A producer of one topic: a Pulsar producer on each of its partitions, over one connection.
//! Messages go out one per SEND, or batched (several in one entry) when batching is on; the
//! broker's SEND_RECEIPT for an entry, sent once the entry is stored (written to the bookies'
//! quorum, for a persistent topic), acknowledges every message in it.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use brokerbench_driver::{Ack, Clock, OutgoingMessage, Producer, SendError, Sent};

use crate::commands::{self, kind};
use crate::conn::Reconnector;
use crate::conn::{Conn, CONNECTION_CLOSED};
use crate::message;
use crate::topic::REQUEST_TIMEOUT;
use brokerbench_driver::REDIAL_TIMEOUT;

/// One message in flight.
type Member = Sent;

/// One SEND: a message, or a batch.
struct Entry {
    sequence_id: u64,
    members: Vec<Member>,
}

/// A batch being filled.
#[derive(Default)]
struct Batch {
    payload: Vec<u8>,
    members: Vec<Member>,
    started: Option<Instant>,
}

/// The producer on one partition (or the unpartitioned topic).
struct Part {
    topic: String,
    /// The name the broker gave the producer.
    name: String,
    next_sequence: u64,
    pending: VecDeque<Entry>,
    batch: Batch,
}

/// The driver file's batching settings.
#[derive(Debug, Clone, Copy)]
pub struct Batching {
    pub enabled: bool,
    pub max_delay: Duration,
    pub max_messages: usize,
    pub max_bytes: usize,
}

pub struct PulsarProducer {
    conn: Conn,
    parts: Vec<Part>,
    batching: Batching,
    /// The partition a message without a key goes to (the next one after each entry).
    next_part: usize,
    in_flight: usize,
    max_pending: usize,
    metadata: Vec<u8>,
    clock: Clock,
    reconnector: Reconnector,
}

/// Creates a producer on each of `topics` over `conn`, each request waiting at most
/// `timeout`: their names.
fn create_all(
    conn: &mut Conn,
    topics: &[String],
    timeout: Duration,
) -> Result<Vec<String>, String> {
    topics
        .iter()
        .enumerate()
        .map(|(i, topic)| crate::topic::create_producer(conn, topic, i as u64, timeout))
        .collect()
}

impl PulsarProducer {
    /// Producers on `topics` (a topic's partitions, in order) over `conn`.
    pub fn new(
        mut conn: Conn,
        reconnector: Reconnector,
        topics: Vec<String>,
        batching: Batching,
        max_pending: u32,
    ) -> Result<Self, String> {
        let names = create_all(&mut conn, &topics, REQUEST_TIMEOUT)?;
        let parts = topics
            .into_iter()
            .zip(names)
            .map(|(topic, name)| Part {
                topic,
                name,
                next_sequence: 0,
                pending: VecDeque::new(),
                batch: Batch::default(),
            })
            .collect();
        Ok(PulsarProducer {
            conn,
            parts,
            batching,
            next_part: 0,
            in_flight: 0,
            max_pending: max_pending as usize,
            metadata: Vec::with_capacity(128),
            clock: Clock::process(),
            reconnector,
        })
    }

    /// The partition of a message: by its key's hash, else the current one.
    fn part_for(&self, key: Option<&[u8]>) -> usize {
        match key {
            Some(key) if self.parts.len() > 1 => {
                brokerbench_driver::naming::key_partition(key, self.parts.len())
            }
            _ => self.next_part,
        }
    }

    /// Writes the SEND of one message to partition `i`.
    fn send_single(&mut self, i: usize, message: &OutgoingMessage<'_>, member: Member) {
        let part = &mut self.parts[i];
        let sequence_id = part.next_sequence;
        part.next_sequence += 1;
        self.metadata.clear();
        let publish_ms = message.sent_ns / 1_000_000;
        message::single_metadata(
            &mut self.metadata,
            &part.name,
            sequence_id,
            publish_ms,
            message.key,
        );
        commands::send(
            self.conn.link.out(),
            i as u64,
            sequence_id,
            1,
            &self.metadata,
            message.payload,
        );
        part.pending.push_back(Entry {
            sequence_id,
            members: vec![member],
        });
        self.next_part = (i + 1) % self.parts.len();
    }

    /// Writes partition `i`'s batch as one SEND, if it has messages.
    fn send_batch(&mut self, i: usize) {
        let part = &mut self.parts[i];
        let batch = std::mem::take(&mut part.batch);
        if batch.members.is_empty() {
            return;
        }
        let count = batch.members.len() as u32;
        let sequence_id = part.next_sequence;
        part.next_sequence += u64::from(count);
        self.metadata.clear();
        let publish_ms = self.clock.now_ns() / 1_000_000;
        message::batch_metadata(
            &mut self.metadata,
            &part.name,
            sequence_id,
            publish_ms,
            count,
            batch.payload.len(),
        );
        commands::send(
            self.conn.link.out(),
            i as u64,
            sequence_id,
            count,
            &self.metadata,
            &batch.payload,
        );
        part.pending.push_back(Entry {
            sequence_id,
            members: batch.members,
        });
        if i == self.next_part {
            self.next_part = (i + 1) % self.parts.len();
        }
    }

    /// Sends the batches whose delay is over; how long until the next one is due.
    fn send_due(&mut self) -> Option<Duration> {
        let now = Instant::now();
        let mut next = None::<Duration>;
        for i in 0..self.parts.len() {
            let Some(started) = self.parts[i].batch.started else {
                continue;
            };
            let age = now.duration_since(started);
            if age >= self.batching.max_delay {
                self.send_batch(i);
            } else {
                let left = self.batching.max_delay - age;
                next = Some(next.map_or(left, |n| n.min(left)));
            }
        }
        next
    }

    /// The connection is gone: what is in flight or batched fails; later sends wait for a
    /// new one, or fail at once without reconnecting.
    fn lose(&mut self, kind: &str, acks: &mut dyn FnMut(Ack)) {
        self.fail_all(kind, acks);
        self.reconnector.lose(kind);
    }

    fn fail_all(&mut self, kind: &str, acks: &mut dyn FnMut(Ack)) {
        for part in &mut self.parts {
            let batch = std::mem::take(&mut part.batch);
            let entries = part.pending.drain(..).flat_map(|e| e.members);
            for member in entries.chain(batch.members) {
                acks(member.failed(kind));
            }
        }
        self.in_flight = 0;
    }

    /// Connects again when due and creates the producers anew.
    fn recover(&mut self, timeout: Duration) {
        let topics: Vec<String> = self.parts.iter().map(|p| p.topic.clone()).collect();
        let mut names = Vec::new();
        let made = self
            .reconnector
            .recover_then(&mut self.conn, timeout, |conn| {
                names = create_all(conn, &topics, REDIAL_TIMEOUT)?;
                Ok::<(), String>(())
            });
        if made {
            for (part, name) in self.parts.iter_mut().zip(names) {
                part.name = name;
            }
        }
    }
}

/// The outcome of `member`'s send: acknowledged at `acknowledged_ns` (as the client saw it),
/// or failed.
/// The entry with `sequence_id`, taken out of `pending` (receipts come in order: the first,
/// as a rule).
fn settle(pending: &mut VecDeque<Entry>, sequence_id: u64) -> Option<Entry> {
    let position = if pending
        .front()
        .is_some_and(|e| e.sequence_id == sequence_id)
    {
        Some(0)
    } else {
        pending.iter().position(|e| e.sequence_id == sequence_id)
    };
    position.and_then(|i| pending.remove(i))
}

/// A ServerError as a kind of failure: `PersistenceError` → `persistence_error`.
pub(crate) fn kind_of(code: u64) -> String {
    let mut kind = String::new();
    for (i, c) in commands::server_error(code).chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            kind.push('_');
        }
        kind.push(c.to_ascii_lowercase());
    }
    kind
}

impl Producer for PulsarProducer {
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError> {
        let envelope = self
            .reconnector
            .admit(self.in_flight, self.max_pending, message.payload)?;
        let member = Sent::of(envelope, &message);
        self.in_flight += 1;
        let i = self.part_for(message.key);
        if !self.batching.enabled {
            self.send_single(i, &message, member);
        } else {
            let batch = &mut self.parts[i].batch;
            message::push_batched(&mut batch.payload, message.key, message.payload);
            batch.members.push(member);
            batch.started.get_or_insert_with(Instant::now);
            let full = batch.members.len() >= self.batching.max_messages
                || batch.payload.len() >= self.batching.max_bytes;
            if full {
                self.send_batch(i);
            }
        }
        if self.conn.link.flush().is_err() {
            // Failed in `poll` with what is in flight.
            self.reconnector.lose(CONNECTION_CLOSED);
        }
        Ok(())
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        if let Some(kind) = self.reconnector.lost_as().map(str::to_owned) {
            self.fail_all(&kind, acks);
            self.recover(timeout);
            return;
        }
        let wait = self.send_due().map_or(timeout, |due| due.min(timeout));
        let (parts, in_flight) = (&mut self.parts, &mut self.in_flight);
        // A receipt keeps the time it reached the socket. (The producer still wakes when a
        // batch is due, so it does not claim `stamps_acknowledgements`.)
        let arrived = self.conn.link.last_read();
        let mut lost = None;
        let result = self.conn.poll(wait, &mut |frame, _| {
            let outcome = match frame.kind {
                kind::SEND_RECEIPT => Ok(()),
                kind::SEND_ERROR => Err(kind_of(frame.number(3).unwrap_or(0))),
                kind::CLOSE_PRODUCER => return lost = Some("closed_by_broker".to_string()),
                kind::ERROR => return lost = Some(frame.error()),
                _ => return,
            };
            let (Some(pid), Some(sequence_id)) = (frame.number(1), frame.number(2)) else {
                return;
            };
            let Some(entry) = parts
                .get_mut(pid as usize)
                .and_then(|p| settle(&mut p.pending, sequence_id))
            else {
                return;
            };
            let at = arrived.get();
            *in_flight -= entry.members.len();
            for member in entry.members {
                acks(member.settled(Some(at), outcome.clone()));
            }
        });
        if let Some(kind) = result.err().or(lost) {
            return self.lose(&kind, acks);
        }
        self.send_due();
        if self.conn.link.flush().is_err() {
            self.lose(CONNECTION_CLOSED, acks);
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn abandon(&mut self) {
        for part in &mut self.parts {
            part.pending.clear();
            part.batch = Batch::default();
        }
        self.in_flight = 0;
    }

    fn disconnected_since(&self) -> Option<u64> {
        self.reconnector.redial.since_ns()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_are_kinds() {
        assert_eq!(kind_of(2), "persistence_error");
        assert_eq!(kind_of(7), "producer_blocked_quota_exceeded_error");
        let partition = |key: &[u8]| brokerbench_driver::naming::key_partition(key, usize::MAX);
        assert_ne!(partition(b"a"), partition(b"b"));
    }
}
