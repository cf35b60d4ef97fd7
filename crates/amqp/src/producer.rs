//! A producer: one channel (in confirm mode unless confirms are off) publishing to its
//! topic's exchange. `send` only queues the frames, never waiting for the broker; `poll`
//! drives the connection (writes what is queued, reads confirms) and turns basic.ack /
//! basic.nack / basic.return into acknowledgements through the [`ConfirmBook`].

use std::sync::Arc;
use std::time::Duration;

use amqprs::channel::{BasicPublishArguments, Channel, ConfirmSelectArguments};
use amqprs::BasicProperties;
use brokerbench_driver::{Ack, DriverError, Envelope, OutgoingMessage, Producer, SendError};
use brokerbench_model::driver_config::{Overflow, RabbitMqDriverConfig};

use crate::confirms::ConfirmBook;
use crate::link::{
    error_kind, field_table, poll_once, ChannelEvent, ChannelEvents, Link, ADMIN_TIMEOUT,
    CHANNEL_CLOSED, CONNECTION_CLOSED,
};
use crate::naming::TopicNames;

/// Scheduler passes `poll` gives the connection's tasks. A pass runs every task that is
/// ready and then checks the socket once (a zero-timeout epoll), which wakes the reader for
/// frames that have arrived; the second pass lets the reader and the channel's dispatcher
/// hand them over. With one pass a confirm that arrived while the producer slept between
/// sends would wait for the next `poll`, adding up to one gap between sends (up to 3 ms at
/// moderate rates) to publish latency.
const DRIVE_PASSES: usize = 2;

pub(crate) struct AmqpProducer {
    /// None only while dropping.
    channel: Option<Channel>,
    events: Arc<ChannelEvents>,
    publish: BasicPublishArguments,
    properties: BasicProperties,
    /// None when confirms are off.
    book: Option<ConfirmBook>,
    max_outstanding: usize,
    /// Reused buffer the channel's events are swapped into.
    batch: Vec<ChannelEvent>,
    /// Set once the connection or channel is gone; every later send fails with it.
    lost: Option<&'static str>,
    /// Declared last: the channel above must close before the connection does.
    link: Arc<Link>,
}

impl AmqpProducer {
    pub(crate) fn new(
        link: Arc<Link>,
        topic: &TopicNames,
        config: &RabbitMqDriverConfig,
    ) -> Result<Self, DriverError> {
        let events = Arc::new(ChannelEvents::default());
        let channel = link.channel(&events)?;
        if config.confirms.enabled {
            let _entered = link.enter();
            match link.block_on_for(
                ADMIN_TIMEOUT,
                channel.confirm_select(ConfirmSelectArguments::default()),
            ) {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    link.close_channel(channel);
                    return Err(DriverError::Other(format!(
                        "switching a channel to confirm mode: {e}"
                    )));
                }
                None => {
                    link.close_channel(channel);
                    return Err(DriverError::Other(format!(
                        "switching a channel to confirm mode took longer than {ADMIN_TIMEOUT:?}"
                    )));
                }
            }
        }
        // mandatory: a message no queue takes comes back as basic.return, reported as
        // `unroutable` rather than silently counted as acknowledged and then lost.
        let publish = BasicPublishArguments::new(&topic.exchange, topic.routing.publish_key())
            .mandatory(true)
            .finish();
        let mut properties = BasicProperties::default();
        properties.with_delivery_mode(if config.persistent { 2 } else { 1 });
        let headers = topic.routing.publish_headers();
        if !headers.is_empty() {
            properties.with_headers(field_table(&headers));
        }
        let nack_kind = match config.queue.overflow {
            Overflow::RejectPublish => "rejected",
            Overflow::DropHead => "nacked",
        };
        Ok(AmqpProducer {
            channel: Some(channel),
            events,
            publish,
            properties: properties.finish(),
            book: config.confirms.enabled.then(|| ConfirmBook::new(nack_kind)),
            max_outstanding: config.confirms.max_outstanding as usize,
            batch: Vec::with_capacity(256),
            lost: None,
            link,
        })
    }

    fn channel(&self) -> &Channel {
        self.channel.as_ref().expect("open until dropped")
    }

    /// Whether the connection or channel is gone: two atomic loads, as amqprs marks both
    /// closed when the broker closes them or the socket fails.
    fn check_lost(&mut self) -> Option<&'static str> {
        if self.lost.is_none() {
            let channel = self.channel();
            if !channel.is_connection_open() {
                self.lost = Some(CONNECTION_CLOSED);
            } else if !channel.is_open() {
                self.lost = Some(CHANNEL_CLOSED);
            }
        }
        self.lost
    }
}

impl Producer for AmqpProducer {
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError> {
        if let Some(kind) = self.check_lost() {
            return Err(SendError::Failed(kind.into()));
        }
        if self
            .book
            .as_ref()
            .is_some_and(|b| b.in_flight() >= self.max_outstanding)
        {
            return Err(SendError::Backpressure);
        }
        let envelope = Envelope::read(message.payload)
            .map_err(|_| SendError::Failed("bad_envelope".into()))?;
        let publish = self.channel().basic_publish(
            self.properties.clone(),
            message.payload.to_vec(),
            self.publish.clone(),
        );
        match poll_once(publish) {
            Some(Ok(())) => {
                if let Some(book) = self.book.as_mut() {
                    book.record(envelope, message.sent_ns, message.payload.len() as u32);
                }
                Ok(())
            }
            Some(Err(e)) => {
                let kind = error_kind(&e);
                if kind == CONNECTION_CLOSED {
                    self.lost = Some(kind);
                }
                Err(SendError::Failed(kind.into()))
            }
            // The connection's outgoing queue is full: the writer is behind (a slow or
            // blocked broker). Polling lets it catch up.
            None => Err(SendError::Backpressure),
        }
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        let events = &self.events;
        let lost = self.lost.is_some();
        self.link.block_on(async {
            if !timeout.is_zero() && !lost && events.is_empty() {
                let _ = tokio::time::timeout(timeout, events.arrived.notified()).await;
            }
            for _ in 0..DRIVE_PASSES {
                tokio::task::yield_now().await;
            }
        });
        if lost && !timeout.is_zero() {
            // Nothing can arrive any more; do not spin.
            std::thread::sleep(timeout.min(Duration::from_millis(10)));
        }
        self.events.take(&mut self.batch);
        if let Some(book) = self.book.as_mut() {
            for event in self.batch.drain(..) {
                match event {
                    ChannelEvent::Confirm { tag, multiple, ack } => {
                        book.confirm(tag, multiple, ack, acks)
                    }
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

    fn ack_note(&self) -> Option<String> {
        // Without confirms the engine says itself that delivery was not confirmed.
        if self.book.is_some() && self.properties.delivery_mode() != Some(2) {
            Some("persistent: false: a confirm means the broker accepted the message, not that it reached disk".into())
        } else {
            None
        }
    }
}

impl Drop for AmqpProducer {
    fn drop(&mut self) {
        // Closing the channel sends whatever is still queued first (it matters when confirms
        // are off: nothing else waits for those frames).
        if let Some(channel) = self.channel.take() {
            self.link.close_channel(channel);
        }
    }
}
