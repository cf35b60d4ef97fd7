//! A JetStream publisher: each message is published with its own reply subject, and the
//! server's `PubAck` on that subject is its acknowledgement.

use std::collections::VecDeque;
use std::time::Duration;

use brokerbench_driver::naming::key_partition;
use brokerbench_driver::{fail_all, Ack, OutgoingMessage, Producer, SendError, Sent};

use crate::config::{NatsDriverConfig, NatsUrl};
use crate::conn::{push_number, Conn};
use crate::reconnect::{self, reconnector, Reconnector};

struct Pending {
    n: u64,
    sent: Sent,
}

pub struct NatsProducer {
    conn: Conn,
    subjects: Vec<Vec<u8>>,
    next_subject: usize,
    inbox: Vec<u8>,
    reply: Vec<u8>,
    next: u64,
    pending: VecDeque<Pending>,
    max_outstanding: usize,
    msg_id: bool,
    headers: Vec<u8>,
    reconnector: Reconnector,
}

impl NatsProducer {
    pub fn new(
        mut conn: Conn,
        url: &NatsUrl,
        stream: &str,
        partitions: u32,
        id: u32,
        config: &NatsDriverConfig,
    ) -> Self {
        let inbox = crate::unique_inbox();
        conn.subscribe(&format!("{inbox}.*"), 1);
        let reconnector = reconnector(url, config.reconnect, &conn.info);
        NatsProducer {
            conn,
            subjects: (0..partitions)
                .map(|p| format!("{stream}.{p}").into_bytes())
                .collect(),
            next_subject: id as usize,
            inbox: format!("{inbox}.").into_bytes(),
            reply: Vec::with_capacity(64),
            next: 0,
            pending: VecDeque::new(),
            max_outstanding: config.max_outstanding as usize,
            msg_id: config.msg_id,
            headers: Vec::new(),
            reconnector,
        }
    }

    /// Fails everything in flight with `kind`.
    fn fail_pending(&mut self, kind: &str, acks: &mut dyn FnMut(Ack)) {
        fail_all(self.pending.drain(..).map(|p| p.sent), kind, acks);
    }

    /// While the connection is lost: one attempt on the pool's next server, whose new
    /// connection listens on the producer's inbox again.
    fn recover(&mut self, timeout: Duration) {
        let inbox = format!("{}*", String::from_utf8_lossy(&self.inbox));
        reconnect::recover(&mut self.reconnector, &mut self.conn, timeout, &inbox);
    }
}

impl Producer for NatsProducer {
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError> {
        let envelope =
            self.reconnector
                .admit(self.pending.len(), self.max_outstanding, message.payload)?;
        let partition = match message.key {
            Some(key) => key_partition(key, self.subjects.len()),
            None => {
                self.next_subject = self.next_subject.wrapping_add(1);
                self.next_subject % self.subjects.len()
            }
        };
        self.next += 1;
        self.reply.clear();
        self.reply.extend_from_slice(&self.inbox);
        push_number(&mut self.reply, self.next);
        let headers = if self.msg_id {
            self.headers.clear();
            self.headers.extend_from_slice(b"NATS/1.0\r\nNats-Msg-Id: ");
            push_number(&mut self.headers, envelope.producer as u64);
            self.headers.push(b':');
            push_number(&mut self.headers, envelope.sequence);
            self.headers.extend_from_slice(b"\r\n\r\n");
            Some(self.headers.as_slice())
        } else {
            None
        };
        self.conn
            .publish(
                &self.subjects[partition],
                Some(&self.reply),
                headers,
                message.payload,
            )
            .map_err(|_| {
                // Failed in `poll` with what is in flight; this one waits or fails now.
                let kind = crate::conn::CONNECTION_CLOSED;
                self.reconnector.lose(kind);
                self.reconnector.unavailable(kind)
            })?;
        self.pending.push_back(Pending {
            n: self.next,
            sent: Sent::of(envelope, &message),
        });
        Ok(())
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        if let Some(kind) = self.reconnector.lost_as().map(str::to_string) {
            self.fail_pending(&kind, acks);
            self.recover(timeout);
            return;
        }
        let pending = &mut self.pending;
        let inbox = &self.inbox;
        let result = self.conn.poll(timeout, &mut |msg, _| {
            let Some(n) = msg
                .subject
                .strip_prefix(inbox.as_slice())
                .and_then(|tail| std::str::from_utf8(tail).ok()?.parse::<u64>().ok())
            else {
                return;
            };
            let position = if pending.front().is_some_and(|p| p.n == n) {
                Some(0)
            } else {
                pending.iter().position(|p| p.n == n)
            };
            let Some(entry) = position.and_then(|i| pending.remove(i)) else {
                return;
            };
            let result = if msg
                .headers
                .is_some_and(|h| h.windows(3).any(|w| w == b"503"))
            {
                Err("no_responders".to_string())
            } else if msg.payload.windows(7).any(|w| w == b"\"error\"") {
                let text = serde_json::from_slice::<serde_json::Value>(msg.payload)
                    .ok()
                    .and_then(|v| v["error"]["description"].as_str().map(str::to_string))
                    .unwrap_or_else(|| "publish_error".into());
                Err(crate::conn::kind_of(&text))
            } else {
                Ok(())
            };
            acks(entry.sent.settled(Some(msg.arrived_ns), result));
        });
        if let Err(kind) = result {
            // The connection is gone: everything in flight fails; later sends wait for the
            // reconnect, or fail at once without it.
            self.fail_pending(&kind, acks);
            self.reconnector.lose(&kind);
        }
    }

    fn in_flight(&self) -> usize {
        self.pending.len()
    }

    fn abandon(&mut self) {
        self.pending.clear();
    }

    fn stamps_acknowledgements(&self) -> bool {
        // Each PubAck keeps the time it reached the socket, however late `poll` reads it.
        true
    }

    fn disconnected_since(&self) -> Option<u64> {
        self.reconnector.redial.since_ns()
    }
}
