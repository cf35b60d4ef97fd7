//! A member of a subscription: a Pulsar consumer on each partition of its topic, over one
//! connection, on the run's durable subscription (`s<subscription>`, every member with the
//! same name shares it as the subscription type says). The broker sends at most
//! `receiver_queue_size` messages ahead (permits, granted again as they are handed on);
//! deliveries are acknowledged individually (all of a poll's in one ACK per partition) or
//! cumulatively (the last of a poll's per partition).

use std::time::Duration;

use brokerbench_driver::{Consumer, Deliveries, Delivery, Unread};

use crate::admin::Admin;

use crate::commands::{self, kind, MessageId, SubType, Subscribe};
use crate::config::AckMode;
use crate::conn::Conn;
use crate::conn::Reconnector;
use crate::message;

/// What a member subscribes to.
#[derive(Debug, Clone)]
pub struct Subscription {
    /// The topic's partitions (or the topic itself).
    pub topics: Vec<String>,
    pub name: String,
    pub consumer_name: String,
    pub sub_type: SubType,
    pub queue: u32,
    pub ack: AckMode,
    /// Whether the run's producers batch: the broker counts a subscription's backlog in
    /// entries, a batch one, so what is left unread is then not known in messages.
    pub batched: bool,
}

impl Subscription {
    /// Subscribes consumer `i` to every partition on `conn`, each granted a full queue, each
    /// request waiting at most `timeout`.
    fn subscribe_all(&self, conn: &mut Conn, timeout: Duration) -> Result<(), String> {
        for (i, topic) in self.topics.iter().enumerate() {
            let s = Subscribe {
                topic,
                subscription: &self.name,
                sub_type: self.sub_type,
                consumer_id: i as u64,
                consumer_name: &self.consumer_name,
            };
            crate::topic::subscribe(conn, &s, self.queue, timeout)?;
        }
        Ok(())
    }
}

/// One partition's consumer.
#[derive(Debug, Default, Clone)]
struct Part {
    /// Whether the broker sends it the partition's messages (Failover: the active one, as
    /// the broker last said).
    active: bool,
    /// Messages handed on since permits were last granted.
    used: u32,
    /// Entries to acknowledge.
    acks: Vec<MessageId>,
}

pub struct PulsarConsumer {
    conn: Conn,
    subscription: Subscription,
    parts: Vec<Part>,
    /// Backlog mode's pause: no permits are granted (the broker stops once the queue's
    /// worth is sent), PINGs are still answered.
    paused: bool,
    reconnector: Reconnector,
    /// The admin API, asked what the subscription still holds when the drain ends.
    admin: Admin,
}

impl PulsarConsumer {
    pub fn new(
        mut conn: Conn,
        reconnector: Reconnector,
        subscription: Subscription,
        admin: Admin,
    ) -> Result<Self, String> {
        subscription.subscribe_all(&mut conn, crate::topic::REQUEST_TIMEOUT)?;
        // The broker tells the members of a Failover subscription on a persistent topic which
        // one is active on each partition (not those of a non-persistent one): until it does,
        // none is; everyone else receives from the start.
        let told = subscription.sub_type == SubType::Failover
            && subscription
                .topics
                .iter()
                .all(|t| t.starts_with("persistent://"));
        let parts = vec![
            Part {
                active: !told,
                ..Part::default()
            };
            subscription.topics.len()
        ];
        Ok(PulsarConsumer {
            conn,
            subscription,
            parts,
            paused: false,
            reconnector,
            admin,
        })
    }

    /// Connects and subscribes again when due: what was delivered and not acknowledged
    /// before the loss comes again.
    fn recover(&mut self, timeout: Duration) {
        let subscription = &self.subscription;
        if self
            .reconnector
            .recover_then(&mut self.conn, timeout, |conn| {
                subscription.subscribe_all(conn, brokerbench_driver::REDIAL_TIMEOUT)
            })
        {
            for part in &mut self.parts {
                part.used = 0;
                part.acks.clear();
            }
        }
    }

    /// Writes the acknowledgements collected, and grants permits for what was handed on
    /// once half the queue is used (unless paused).
    fn settle(&mut self) {
        let cumulative = self.subscription.ack == AckMode::Cumulative;
        let half = (self.subscription.queue / 2).max(1);
        let out = self.conn.link.out();
        for (i, part) in self.parts.iter_mut().enumerate() {
            if !part.acks.is_empty() {
                let ids = if cumulative {
                    &part.acks[part.acks.len() - 1..]
                } else {
                    &part.acks[..]
                };
                commands::ack(out, i as u64, cumulative, ids);
                part.acks.clear();
            }
            if !self.paused && part.used >= half {
                commands::flow(out, i as u64, part.used);
                part.used = 0;
            }
        }
    }
}

impl Consumer for PulsarConsumer {
    fn poll(&mut self, timeout: Duration, deliveries: Deliveries<'_>) -> Result<(), String> {
        if self.reconnector.is_lost() {
            self.recover(timeout);
            return Ok(());
        }
        let parts = &mut self.parts;
        let mut error = None;
        let mut closed = false;
        let result = self.conn.poll(timeout, &mut |frame, _| match frame.kind {
            kind::MESSAGE => {
                if let Err(e) = deliver(frame, parts, deliveries) {
                    error = error.take().or(Some(e));
                }
            }
            kind::ACTIVE_CONSUMER_CHANGE => {
                if let Some(part) = frame.number(1).and_then(|i| parts.get_mut(i as usize)) {
                    part.active = frame.number(2) == Some(1);
                }
            }
            kind::CLOSE_CONSUMER => closed = true,
            kind::ERROR => error = error.take().or(Some(frame.error())),
            _ => {}
        });
        self.settle();
        let flushed = self.conn.link.flush();
        if closed {
            // The broker closed a consumer of ours (its topic moved or was unloaded):
            // everything is set up again on a new connection.
            self.reconnector.lose("closed_by_broker");
            return Err("closed_by_broker".into());
        }
        match (result, error) {
            (Err(kind), _) => {
                self.reconnector.lose(&kind);
                Err(kind)
            }
            (Ok(_), Some(kind)) => Err(kind),
            (Ok(_), None) if flushed.is_err() => {
                self.reconnector.lose(crate::conn::CONNECTION_CLOSED);
                Err(crate::conn::CONNECTION_CLOSED.into())
            }
            (Ok(_), None) => Ok(()),
        }
    }

    fn assigned(&self, _slot: usize) -> usize {
        self.parts.iter().filter(|p| p.active).count()
    }

    fn pause(&mut self, paused: bool) -> bool {
        self.paused = paused;
        true
    }

    /// The subscription's backlog in each partition, from the admin API (also when this
    /// member's connection was lost: the durable subscription outlives it); unknown when the
    /// run batches.
    fn unread(&mut self) -> Option<Vec<Unread>> {
        let s = &self.subscription;
        if s.batched {
            return None;
        }
        crate::unread::unread(&self.admin, &s.topics, &s.name)
    }
}

/// Hands a MESSAGE's payloads on and notes its entry for acknowledgement.
fn deliver(
    frame: commands::Frame<'_>,
    parts: &mut [Part],
    deliveries: Deliveries<'_>,
) -> Result<(), String> {
    let i = frame.number(1).unwrap_or(0) as usize;
    let id = crate::proto::field(frame.command, 2)
        .and_then(|v| v.as_bytes())
        .map(|m| MessageId {
            ledger: crate::proto::field(m, 1)
                .and_then(|v| v.as_u64())
                .unwrap_or(0),
            entry: crate::proto::field(m, 2)
                .and_then(|v| v.as_u64())
                .unwrap_or(0),
        })
        .ok_or("malformed_message")?;
    let part = parts.get_mut(i).ok_or("message_for_unknown_consumer")?;
    let count = message::payloads(frame.rest, &mut |payload| {
        deliveries(Delivery {
            stream: i as u32,
            payload,
            received_ns: None,
            slot: 0,
        })
    })?;
    part.used += count;
    part.acks.push(id);
    Ok(())
}
