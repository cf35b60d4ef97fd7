//! A producer: one channel (in confirm mode unless confirms are off) publishing to its
//! topic's exchange. The connection's I/O runs on its own background thread
//! ([`crate::link::Io::Background`]), which publishes what `send` queued and reads confirms
//! as they arrive, timestamping each then; so a confirm that arrives while the producer
//! thread sleeps between sends is not late by the rest of that sleep. `send` only puts the
//! message in the producer's [`Outbox`], never waiting for the broker, and wakes the I/O
//! thread only if it has run out of work (so at high rates one wake-up takes many messages);
//! `poll` waits for confirms (without driving anything) and turns basic.ack / basic.nack /
//! basic.return into acknowledgements through the [`ConfirmBook`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

use amqprs::channel::{BasicPublishArguments, Channel, ConfirmSelectArguments};
use amqprs::BasicProperties;
use brokerbench_driver::{Ack, DriverError, Envelope, OutgoingMessage, Producer, SendError};
use brokerbench_model::driver_config::{Overflow, RabbitMqDriverConfig};

use crate::confirms::ConfirmBook;
use crate::link::{
    error_kind, field_table, ChannelEvent, ChannelEvents, Link, ADMIN_TIMEOUT, CHANNEL_CLOSED,
    CLOSE_TIMEOUT, CONNECTION_CLOSED,
};
use crate::naming::TopicNames;

/// Messages a producer may have queued for its I/O task before `send` answers backpressure
/// (with confirms, `max_outstanding` usually binds first).
const OUTBOX_CAPACITY: usize = 16_384;

/// Payloads `send` queued for the connection's I/O thread, which publishes them in order.
#[derive(Default)]
struct Outbox {
    state: Mutex<OutboxState>,
    /// Wakes the publishing task.
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct OutboxState {
    payloads: Vec<Vec<u8>>,
    /// The publishing task found nothing to do and waits for `wake`.
    idle: bool,
    /// The producer is closing: publish what is queued and stop.
    closing: bool,
    /// Why publishing failed, if it did.
    failed: Option<&'static str>,
}

fn lock(outbox: &Outbox) -> std::sync::MutexGuard<'_, OutboxState> {
    outbox.state.lock().unwrap_or_else(|e| e.into_inner())
}

/// The I/O task of one producer: publishes every queued payload per wake-up, in order (so
/// delivery tags follow the order of `send`).
async fn publish_queued(
    channel: Channel,
    outbox: Arc<Outbox>,
    properties: BasicProperties,
    publish: BasicPublishArguments,
) {
    let mut batch = Vec::new();
    loop {
        {
            let mut state = lock(&outbox);
            std::mem::swap(&mut state.payloads, &mut batch);
            if batch.is_empty() {
                if state.closing {
                    return;
                }
                state.idle = true;
            }
        }
        if batch.is_empty() {
            // A wake-up given between the check above and here is kept as a permit.
            outbox.wake.notified().await;
            continue;
        }
        for payload in batch.drain(..) {
            if let Err(e) = channel
                .basic_publish(properties.clone(), payload, publish.clone())
                .await
            {
                lock(&outbox).failed.get_or_insert(error_kind(&e));
            }
        }
    }
}

pub(crate) struct AmqpProducer {
    /// None only while dropping.
    channel: Option<Channel>,
    events: Arc<ChannelEvents>,
    outbox: Arc<Outbox>,
    /// The task publishing what `outbox` holds; None only while dropping.
    publisher: Option<tokio::task::JoinHandle<()>>,
    /// Whether messages are persistent (for the note on what an acknowledgement means).
    persistent: bool,
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
        let outbox = Arc::new(Outbox::default());
        let publisher = link.spawn(publish_queued(
            channel.clone(),
            outbox.clone(),
            properties.finish(),
            publish,
        ));
        Ok(AmqpProducer {
            channel: Some(channel),
            events,
            outbox,
            publisher: Some(publisher),
            persistent: config.persistent,
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
        let wake = {
            let mut state = lock(&self.outbox);
            if let Some(kind) = state.failed {
                if kind == CONNECTION_CLOSED {
                    self.lost = Some(kind);
                }
                return Err(SendError::Failed(kind.into()));
            }
            if state.payloads.len() >= OUTBOX_CAPACITY {
                // The I/O thread is behind (a slow or blocked broker).
                return Err(SendError::Backpressure);
            }
            state.payloads.push(message.payload.to_vec());
            std::mem::take(&mut state.idle)
        };
        if wake {
            self.outbox.wake.notify_one();
        }
        if let Some(book) = self.book.as_mut() {
            book.record(envelope, message.sent_ns, message.payload.len() as u32);
        }
        Ok(())
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        let lost = self.lost.is_some();
        if !lost {
            // The connection's I/O thread reads confirms meanwhile and signals their arrival.
            self.events.wait(timeout);
        } else if !timeout.is_zero() {
            // Nothing can arrive any more; do not spin.
            std::thread::sleep(timeout.min(Duration::from_millis(10)));
        }
        self.events.take(&mut self.batch);
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
        if self.book.is_some() && !self.persistent {
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
        lock(&self.outbox).closing = true;
        self.outbox.wake.notify_one();
        if let Some(publisher) = self.publisher.take() {
            let _entered = self.link.enter();
            // Publishes what is still queued (it matters when confirms are off: nothing else
            // waits for those messages); a blocked broker gets CLOSE_TIMEOUT.
            let _ = self.link.block_on_for(CLOSE_TIMEOUT, publisher);
        }
        if let Some(channel) = self.channel.take() {
            self.link.close_channel(channel);
        }
    }
}
