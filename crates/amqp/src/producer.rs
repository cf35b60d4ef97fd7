//! A producer: one channel (in confirm mode unless confirms are off) publishing to its
//! topic's exchange. Its `poll` reads the confirms that came while it slept between sends;
//! each keeps the time the kernel received it (see [`crate::session`]), so the producer's
//! thread need not wake for them.
//!
//! `send` encodes the message's frames into the producer's buffer and never waits for the
//! broker; the buffer is written with one system call by the next `poll` (which the engine
//! calls before it waits for anything, and at least every 64 sends) or as soon as it holds
//! [`FLUSH_AT`] bytes. `poll` waits for confirms and turns basic.ack / basic.nack /
//! basic.return into acknowledgements through the [`ConfirmBook`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::{Overflow, RabbitMqDriverConfig};
use brokerbench_driver::{
    Ack, DriverError, Envelope, OutgoingMessage, Producer, Redial, SendError,
};

use crate::confirms::ConfirmBook;
use crate::naming::TopicNames;
use crate::session::{
    Channel, ChannelEvent, Session, ADMIN_TIMEOUT, CHANNEL_CLOSED, CLOSE_TIMEOUT,
    CONNECTION_CLOSED, FLUSH_AT,
};
use crate::wire::{self, id, Publisher};
use crate::Dialer;

/// Bytes a producer may have written and not yet taken by the socket (a slow or blocked
/// broker) before `send` answers backpressure.
const BACKLOG_LIMIT: usize = 4 << 20;
/// How long `poll` waits at a time while the socket has not taken everything.
const BACKLOG_RETRY: Duration = Duration::from_millis(1);

pub(crate) struct AmqpProducer {
    channel: Channel,
    publisher: Publisher,
    /// Frames encoded and not yet written.
    out: Vec<u8>,
    /// Whether messages are persistent (for the note on what an acknowledgement means).
    persistent: bool,
    /// None when confirms are off.
    book: Option<ConfirmBook>,
    nack_kind: &'static str,
    max_outstanding: usize,
    /// Reused buffer the channel's events are swapped into.
    batch: Vec<ChannelEvent>,
    /// Set once the connection or channel is gone; every later send fails with it (or
    /// waits for the reconnect, when the connection was lost and `reconnect` is on).
    lost: Option<&'static str>,
    dialer: Arc<Dialer>,
    topic: TopicNames,
    redial: Redial,
}

/// A channel for publishing to `topic` on `session`, in confirm mode when confirms are on.
fn publishing_channel(
    session: Arc<Session>,
    topic: &TopicNames,
    config: &RabbitMqDriverConfig,
) -> Result<(Channel, Publisher), DriverError> {
    let mut channel = session.channel()?;
    if config.confirms.enabled {
        let mut select = Vec::new();
        wire::method(&mut select, channel.number(), id::CONFIRM_SELECT, |out| {
            out.push(0)
        });
        channel
            .call(select, id::CONFIRM_SELECT_OK, ADMIN_TIMEOUT)
            .map_err(|e| DriverError::Other(format!("switching a channel to confirm mode: {e}")))?;
    }
    // mandatory: a message no queue takes comes back as basic.return, reported as
    // `unroutable` rather than silently counted as acknowledged and then lost.
    let publisher = Publisher::new(
        channel.number(),
        &topic.exchange,
        topic.routing.publish_key(),
        true,
        config.persistent,
        &topic.routing.publish_headers(),
        session.frame_max(),
    );
    Ok((channel, publisher))
}

impl AmqpProducer {
    pub(crate) fn new(dialer: Arc<Dialer>, topic: &TopicNames) -> Result<Self, DriverError> {
        let config = &dialer.config;
        let (channel, publisher) = publishing_channel(dialer.producer_session()?, topic, config)?;
        let nack_kind = match config.queue.overflow {
            Overflow::RejectPublish => "rejected",
            Overflow::DropHead => "nacked",
        };
        Ok(AmqpProducer {
            channel,
            publisher,
            out: Vec::with_capacity(FLUSH_AT * 2),
            persistent: config.persistent,
            book: config.confirms.enabled.then(|| ConfirmBook::new(nack_kind)),
            nack_kind,
            max_outstanding: config.confirms.max_outstanding as usize,
            batch: Vec::with_capacity(256),
            lost: None,
            topic: topic.clone(),
            dialer,
            redial: Redial::default(),
        })
    }

    /// Whether the connection or channel is gone (one atomic load while it is not).
    fn check_lost(&mut self) -> Option<&'static str> {
        if self.lost.is_none() {
            if let Some((kind, _)) = self.channel.ended() {
                self.lost = Some(kind);
                if self.reconnects(kind) {
                    self.redial.lost();
                }
            }
        }
        self.lost
    }

    /// Whether a loss of this kind is waited out: the connection went, and `reconnect` is on.
    fn reconnects(&self, kind: &str) -> bool {
        kind == CONNECTION_CLOSED && self.dialer.config.reconnect.enabled
    }

    /// One attempt to get a connection and channel back (after the messages in flight on the
    /// lost one were failed): declares the topic again, opens a channel, starts a new book.
    fn redial(&mut self) {
        if !self.redial.due() {
            return;
        }
        let attempt = self.dialer.producer_session().and_then(|session| {
            self.dialer.redeclare(&session, &self.topic)?;
            publishing_channel(session, &self.topic, &self.dialer.config)
        });
        match attempt {
            Ok((channel, publisher)) => {
                self.channel = channel;
                self.publisher = publisher;
                self.out.clear();
                if self.book.is_some() {
                    self.book = Some(ConfirmBook::new(self.nack_kind));
                }
                self.lost = None;
                self.redial.succeeded();
            }
            Err(_) => self.redial.failed(&self.dialer.config.reconnect),
        }
    }

    /// Writes what `send` encoded; a failed write means the connection is gone.
    fn flush(&mut self) {
        if self.out.is_empty() && self.channel.session().backlog() == 0 {
            return;
        }
        if let Err(kind) = self.channel.write(&mut self.out) {
            if self.check_lost().is_none() {
                self.lost = Some(kind);
            }
        }
    }
}

impl Producer for AmqpProducer {
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError> {
        if let Some(kind) = self.check_lost() {
            // Waiting out a lost connection: `poll` fails what was in flight and reconnects.
            return Err(if self.reconnects(kind) {
                SendError::Unavailable(kind.into())
            } else {
                SendError::Failed(kind.into())
            });
        }
        if self
            .book
            .as_ref()
            .is_some_and(|b| b.in_flight() >= self.max_outstanding)
        {
            return Err(SendError::Backpressure);
        }
        if self.channel.session().backlog() >= BACKLOG_LIMIT {
            // The socket is not taking what was written (a slow or blocked broker).
            self.flush();
            if self.channel.session().backlog() >= BACKLOG_LIMIT {
                return Err(SendError::Backpressure);
            }
        }
        let envelope = Envelope::read(message.payload)
            .map_err(|_| SendError::Failed("bad_envelope".into()))?;
        self.publisher.publish(&mut self.out, message.payload);
        if let Some(book) = self.book.as_mut() {
            book.record(envelope, message.sent_ns, message.payload.len() as u32);
        }
        if self.out.len() >= FLUSH_AT {
            self.flush();
        }
        Ok(())
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        // A loss found in this poll is reconnected from the next one, so that the engine
        // sees it (`disconnected_since`) however soon the broker is back.
        let lost_before = self.lost.is_some();
        self.flush();
        let session = self.channel.session();
        session.heartbeat();
        if self.lost.is_none() {
            // While the socket holds back part of what was written, wait in short steps and
            // write again.
            let timeout = if session.backlog() > 0 {
                timeout.min(BACKLOG_RETRY)
            } else {
                timeout
            };
            // The socket is read even when nothing is awaited (with a zero timeout, without
            // waiting): the broker's heartbeats, and the end of the channel, come there.
            let wait_for_confirms = self.book.as_ref().is_some_and(|b| b.in_flight() > 0);
            if wait_for_confirms {
                session.wait(self.channel.state(), timeout, &|inbox| {
                    !inbox.events.is_empty() || inbox.ended.is_some()
                });
            } else {
                session.wait(self.channel.state(), timeout, &|inbox| {
                    inbox.ended.is_some()
                });
            }
        } else if !timeout.is_zero() {
            // Nothing can arrive on this connection any more; do not spin.
            let mut wait = timeout.min(Duration::from_millis(10));
            if self.redial.since_ns().is_some() {
                wait = wait.min(self.redial.wait());
            }
            std::thread::sleep(wait);
        }
        {
            let mut inbox = self.channel.state().inbox();
            if !inbox.events.is_empty() {
                std::mem::swap(&mut inbox.events, &mut self.batch);
            }
        }
        if let Some(book) = self.book.as_mut() {
            for event in self.batch.drain(..) {
                match event {
                    ChannelEvent::Confirm {
                        tag,
                        multiple,
                        ack,
                        at_ns,
                    } => book.confirm(tag, multiple, ack, at_ns, acks),
                    ChannelEvent::Returned(envelope) => book.returned(&envelope),
                }
            }
        } else {
            self.batch.clear();
        }
        if let Some(kind) = self.check_lost() {
            if let Some(book) = self.book.as_mut() {
                book.fail_all(kind, acks);
            }
            if self.reconnects(kind) && lost_before {
                self.redial();
            }
        }
    }

    fn in_flight(&self) -> usize {
        self.book.as_ref().map_or(0, ConfirmBook::in_flight)
    }

    fn abandon(&mut self) {
        if let Some(book) = self.book.as_mut() {
            book.abandon();
        }
    }

    fn confirms(&self) -> bool {
        self.book.is_some()
    }

    fn stamps_acknowledgements(&self) -> bool {
        // Not while the socket holds back part of what was written: `poll` then writes the
        // rest every millisecond, which the engine's longer sleeps would delay.
        self.book.is_some() && self.channel.session().backlog() == 0
    }

    fn disconnected_since(&self) -> Option<u64> {
        self.redial.since_ns()
    }

    fn blocked_since(&self) -> Option<(u64, String)> {
        self.channel.session().blocked()
    }

    fn closed_by_broker(&self) -> Option<String> {
        // A channel the broker closed (404, 406, ...), not a lost connection (an outage).
        match self.channel.ended()? {
            (CHANNEL_CLOSED, reason) => Some(reason),
            _ => None,
        }
    }

    fn ack_note(&self) -> Option<String> {
        // Without confirms the engine says itself that delivery was not confirmed.
        if self.book.is_some() && !self.persistent {
            Some("persistent: false: a confirm means the broker accepted the message, not that it reached disk".into())
        } else {
            None
        }
    }
}

impl Drop for AmqpProducer {
    fn drop(&mut self) {
        // Everything sent goes out before the channel closes (it matters when confirms are
        // off: nothing else waits for those messages); a blocked broker gets CLOSE_TIMEOUT.
        self.flush();
        self.channel
            .session()
            .flush_until(Instant::now() + CLOSE_TIMEOUT);
    }
}
