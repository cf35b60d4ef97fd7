//! A consumer: one channel consuming one queue (a subscription), with basic.qos prefetch
//! and manual acknowledgements every n-th delivery (multiple=true when n > 1), or no_ack
//! consuming. `poll` reads the connection's socket itself while it waits (see
//! [`crate::session`]), hands over every delivery that read brought, and writes their
//! acknowledgements with one system call.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest a delivery waits for its acknowledgement when `ack.multiple_every` > 1.
const ACK_AT_LEAST_EVERY: Duration = Duration::from_millis(100);

use crate::config::{AckMode, RabbitMqDriverConfig};
use brokerbench_driver::{Consumer, Delivery, DriverError, Redial, Unread};

use crate::naming::{consume_arguments, TopicNames};
use crate::session::{Channel, Deliveries, Session, ADMIN_TIMEOUT, CONNECTION_CLOSED};
use crate::wire::{self, id};
use crate::Dialer;

pub(crate) struct AmqpConsumer {
    channel: Channel,
    /// Deliveries taken from the channel's inbox (swapped, so both arenas are reused).
    batch: Deliveries,
    /// Acknowledgements encoded and not yet written.
    out: Vec<u8>,
    /// The queue's index among its topic's queues: the `stream` of every delivery.
    queue_index: u32,
    manual: bool,
    multiple_every: u32,
    /// Deliveries handed over and not yet acknowledged (manual mode).
    unacknowledged: u32,
    /// Delivery tag of the last delivery handed over.
    last_tag: u64,
    /// When nothing was left unacknowledged last (manual mode).
    acked_at: Instant,
    /// The failure already reported once; later polls only wait (or reconnect).
    reported: Option<&'static str>,
    dialer: Arc<Dialer>,
    topic: TopicNames,
    queue: String,
    consumer_tag: String,
    redial: Redial,
    /// Backlog mode paused the consumer: its basic.consume is cancelled until resumed, and
    /// `poll` goes on (heartbeats, the few deliveries already on their way).
    paused: bool,
}

/// A channel consuming `queue` on `session`, with the configured prefetch and ack mode.
fn consuming_channel(
    session: Arc<Session>,
    queue: &str,
    consumer_tag: &str,
    config: &RabbitMqDriverConfig,
) -> Result<Channel, DriverError> {
    let mut channel = session.channel()?;
    let manual = config.ack.mode == AckMode::Manual;
    let failed = |e: String| DriverError::Other(format!("consuming queue '{queue}': {e}"));
    if manual && config.prefetch > 0 {
        let mut qos = Vec::new();
        wire::method(&mut qos, channel.number(), id::BASIC_QOS, |out| {
            out.extend_from_slice(&0u32.to_be_bytes());
            out.extend_from_slice(&config.prefetch.to_be_bytes());
            out.push(0);
        });
        channel
            .call(qos, id::BASIC_QOS_OK, ADMIN_TIMEOUT)
            .map_err(failed)?;
    }
    channel
        .call(
            consume_frame(channel.number(), queue, consumer_tag, config),
            id::BASIC_CONSUME_OK,
            ADMIN_TIMEOUT,
        )
        .map_err(failed)?;
    Ok(channel)
}

/// basic.consume of `queue` as `consumer_tag` on channel `number`, with the ack mode and the
/// queue type's arguments of `config`.
fn consume_frame(
    number: u16,
    queue: &str,
    consumer_tag: &str,
    config: &RabbitMqDriverConfig,
) -> Vec<u8> {
    let manual = config.ack.mode == AckMode::Manual;
    let mut consume = Vec::new();
    wire::method(&mut consume, number, id::BASIC_CONSUME, |out| {
        out.extend_from_slice(&0u16.to_be_bytes());
        wire::put_short_string(out, queue);
        wire::put_short_string(out, consumer_tag);
        // no-local, no-ack, exclusive, no-wait
        out.push(if manual { 0 } else { 0b10 });
        wire::put_arguments(out, &consume_arguments(&config.queue));
    });
    consume
}

impl AmqpConsumer {
    pub(crate) fn new(
        dialer: Arc<Dialer>,
        topic: &TopicNames,
        queue: &str,
        queue_index: u32,
        consumer_tag: String,
    ) -> Result<Self, DriverError> {
        let config = &dialer.config;
        let channel = consuming_channel(dialer.consumer_session()?, queue, &consumer_tag, config)?;
        Ok(AmqpConsumer {
            channel,
            batch: Deliveries::default(),
            out: Vec::with_capacity(16 * 1024),
            queue_index,
            manual: config.ack.mode == AckMode::Manual,
            multiple_every: config.ack.multiple_every.max(1),
            unacknowledged: 0,
            last_tag: 0,
            acked_at: Instant::now(),
            reported: None,
            topic: topic.clone(),
            queue: queue.to_string(),
            consumer_tag,
            dialer,
            redial: Redial::default(),
            paused: false,
        })
    }

    /// basic.cancel (the broker stops delivering; what is on its way still comes) or
    /// basic.consume again.
    fn set_consuming(&mut self, consuming: bool) -> Result<(), String> {
        let number = self.channel.number();
        let mut frame = Vec::new();
        let reply = if consuming {
            frame = consume_frame(number, &self.queue, &self.consumer_tag, &self.dialer.config);
            id::BASIC_CONSUME_OK
        } else {
            let tag = &self.consumer_tag;
            wire::method(&mut frame, number, id::BASIC_CANCEL, |out| {
                wire::put_short_string(out, tag);
                out.push(0);
            });
            id::BASIC_CANCEL_OK
        };
        self.channel.call(frame, reply, ADMIN_TIMEOUT).map(|_| ())
    }

    /// Why the consumer cannot receive any more, if it cannot.
    fn failure(&self) -> Option<&'static str> {
        if let Some((kind, _)) = self.channel.ended() {
            Some(kind)
        } else if self.channel.state().inbox().cancelled {
            Some("consumer_cancelled")
        } else {
            None
        }
    }

    /// One attempt, when due, to consume again on a new connection after the old one was
    /// lost. Deliveries handed over and not acknowledged on the old one are the broker's to
    /// deliver again (the ledger counts them as duplicates when they come back).
    fn redial(&mut self, timeout: Duration) {
        if !self.redial.due() {
            std::thread::sleep(timeout.min(self.redial.wait()));
            return;
        }
        let attempt = self.dialer.consumer_session().and_then(|session| {
            self.dialer.redeclare(&session, &self.topic)?;
            consuming_channel(
                session,
                &self.queue,
                &self.consumer_tag,
                &self.dialer.config,
            )
        });
        match attempt {
            Ok(channel) => {
                self.channel = channel;
                self.out.clear();
                self.unacknowledged = 0;
                self.last_tag = 0;
                self.reported = None;
                self.redial.succeeded();
                if self.paused {
                    let _ = self.set_consuming(false);
                }
            }
            Err(_) => self.redial.failed(&self.dialer.config.reconnect),
        }
    }
}

impl AmqpConsumer {
    /// A quorum queue keeps messages checked out to a cancelled consumer without sending them
    /// (measured: with prefetch 5, 5 neither ready nor delivered after the cancel), so they
    /// are returned first: what was handed over is acknowledged, the channel closed (its
    /// unacknowledged messages go back to the queue, applied through the queue's log, so
    /// later), and the depth read on a new channel until two reads 100 ms apart agree.
    fn quorum_unread(&mut self) -> Option<Vec<Unread>> {
        if self.unacknowledged > 0 {
            wire::basic_ack(&mut self.out, self.channel.number(), self.last_tag, true);
            self.channel.write(&mut self.out).ok()?;
            self.unacknowledged = 0;
        }
        self.channel.state().inbox().deliveries.clear();
        let session = self.channel.session_handle();
        // The old channel closes (channel.close, close-ok) as the new one replaces it.
        self.channel = session.channel().ok()?;
        let mut ready = crate::unread::ready_messages(&mut self.channel, &self.queue).ok()?;
        for _ in 0..QUORUM_SETTLE_READS {
            std::thread::sleep(Duration::from_millis(100));
            let again = crate::unread::ready_messages(&mut self.channel, &self.queue).ok()?;
            if again == ready {
                break;
            }
            ready = again;
        }
        Some(crate::unread::of_queue(&self.queue, ready))
    }
}

/// Reads of a quorum queue's depth at most while the returns of a closed channel land.
const QUORUM_SETTLE_READS: u32 = 20;

impl Consumer for AmqpConsumer {
    fn poll(
        &mut self,
        timeout: Duration,
        deliveries: brokerbench_driver::Deliveries<'_>,
    ) -> Result<(), String> {
        if let Some(kind) = self.reported {
            if kind == CONNECTION_CLOSED && self.dialer.config.reconnect.enabled {
                self.redial(timeout);
            } else {
                std::thread::sleep(timeout);
            }
            return Ok(());
        }
        let session = self.channel.session();
        session.heartbeat();
        session.wait(self.channel.state(), timeout, &|inbox| {
            !inbox.deliveries.is_empty() || inbox.ended.is_some() || inbox.cancelled
        });
        {
            let mut inbox = self.channel.state().inbox();
            std::mem::swap(&mut inbox.deliveries, &mut self.batch);
        }
        let number = self.channel.number();
        for (tag, payload) in self.batch.iter() {
            deliveries(Delivery {
                stream: self.queue_index,
                payload,
                received_ns: None,
                slot: 0,
            });
            self.last_tag = tag;
            if self.manual {
                self.unacknowledged += 1;
                if self.unacknowledged >= self.multiple_every {
                    wire::basic_ack(&mut self.out, number, tag, self.multiple_every > 1);
                    self.unacknowledged = 0;
                }
            }
        }
        self.batch.clear();
        // A few deliveries short of `multiple_every` are not held back for long: a slow
        // trickle (or the end of a run) would keep them unacknowledged at the broker.
        if self.manual && self.unacknowledged > 0 {
            let now = Instant::now();
            if now.duration_since(self.acked_at) >= ACK_AT_LEAST_EVERY {
                wire::basic_ack(&mut self.out, number, self.last_tag, true);
                self.unacknowledged = 0;
            }
        }
        if self.unacknowledged == 0 {
            self.acked_at = Instant::now();
        }
        let written = if self.out.is_empty() && session.backlog() == 0 {
            Ok(())
        } else {
            // Nothing is written once the broker closed the channel; failure() names why.
            self.channel.write(&mut self.out).map(|_| ())
        };
        match written.err().or_else(|| self.failure()) {
            Some(kind) => {
                self.reported = Some(kind);
                Err(kind.to_string())
            }
            None => Ok(()),
        }
    }

    /// Backlog mode: cancels the consumer (resumes with basic.consume) and is polled on, so
    /// the connection keeps its heartbeats and its deliveries on their way are acknowledged.
    fn pause(&mut self, paused: bool) -> bool {
        if self.dialer.config.queue.kind == crate::config::QueueKind::Stream {
            // A stream consumer that consumed again would start over at its `first` offset:
            // the engine stops polling it instead (its prefetch bounds what arrives).
            return false;
        }
        if paused != self.paused {
            self.paused = paused;
            if self.reported.is_none() {
                // A failure here shows as the channel's end on the next poll.
                let _ = self.set_consuming(!paused);
            }
        }
        true
    }

    fn assigned(&self, _slot: usize) -> usize {
        // consume-ok arrived (or `new` failed), and the consumer was not cancelled or lost.
        usize::from(self.reported.is_none() && self.failure().is_none())
    }

    /// The queue's ready messages once this consumer is cancelled, plus the deliveries then
    /// on their way to it (see [`crate::unread`] for the order and why); None for a stream
    /// queue, or when the channel is gone or the broker does not answer.
    fn unread(&mut self) -> Option<Vec<Unread>> {
        if self.dialer.config.queue.kind == crate::config::QueueKind::Stream
            || self.reported.is_some()
            || self.failure().is_some()
        {
            return None;
        }
        self.set_consuming(false).ok()?;
        if self.manual && self.dialer.config.queue.kind == crate::config::QueueKind::Quorum {
            return self.quorum_unread();
        }
        let ready = crate::unread::ready_messages(&mut self.channel, &self.queue).ok()?;
        // Counted after the declare-ok: a quorum queue's deliveries may follow the cancel-ok,
        // but not the answer the channel gave after them.
        let on_their_way = {
            let mut inbox = self.channel.state().inbox();
            let arrived = inbox.deliveries.len() as u64;
            // Never handed over now that the drain is over; their tags stay unacknowledged
            // (Drop acknowledges only up to `last_tag`), so closing the channel requeues them.
            inbox.deliveries.clear();
            arrived
        };
        let held = if self.manual { on_their_way } else { 0 };
        Some(crate::unread::of_queue(&self.queue, ready + held))
    }
}

impl Drop for AmqpConsumer {
    fn drop(&mut self) {
        if self.manual && self.unacknowledged > 0 && self.failure().is_none() {
            // What was handed over and not yet acknowledged; deliveries not handed over go
            // back to the queue when the channel closes.
            wire::basic_ack(&mut self.out, self.channel.number(), self.last_tag, true);
            let _ = self.channel.write(&mut self.out);
        }
    }
}
