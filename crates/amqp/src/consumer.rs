//! A consumer: one channel consuming one queue (a subscription), with basic.qos prefetch
//! and manual acknowledgements every n-th delivery (multiple=true), or no_ack consuming.
//! `poll` drives the connection while it waits for deliveries.

use std::sync::Arc;
use std::time::Duration;

use amqprs::channel::{
    BasicAckArguments, BasicConsumeArguments, BasicQosArguments, Channel, ConsumerMessage,
};
use brokerbench_driver::{Consumer, Delivery, DriverError};
use brokerbench_model::driver_config::{AckMode, RabbitMqDriverConfig};
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::UnboundedReceiver;

use crate::link::{field_table, ChannelEvents, Link, ADMIN_TIMEOUT, CLOSE_TIMEOUT};
use crate::link::{CHANNEL_CLOSED, CONNECTION_CLOSED};
use crate::naming::consume_arguments;

/// Deliveries handed over by one `poll` at most.
const MAX_BATCH: usize = 10_000;
/// Times `poll` lets the connection's tasks run again when its queue of deliveries is empty
/// before it returns (the next frames may already be in the socket buffer).
const REFILL_PASSES: usize = 2;

pub(crate) struct AmqpConsumer {
    /// None only while dropping.
    channel: Option<Channel>,
    deliveries: UnboundedReceiver<ConsumerMessage>,
    events: Arc<ChannelEvents>,
    /// The queue's index among its topic's queues: the `stream` of every delivery.
    queue_index: u32,
    manual: bool,
    multiple_every: u32,
    /// Deliveries handed over and not yet acknowledged (manual mode).
    unacknowledged: u32,
    /// Delivery tag of the last delivery handed over.
    last_tag: u64,
    /// Whether basic.consume-ok arrived and the consumer has not been cancelled or lost.
    consuming: bool,
    /// The failure already reported once; later polls only wait.
    reported: Option<&'static str>,
    /// Declared last: the channel above must close before the connection does.
    link: Arc<Link>,
}

impl AmqpConsumer {
    pub(crate) fn new(
        link: Arc<Link>,
        queue: &str,
        queue_index: u32,
        consumer_tag: &str,
        config: &RabbitMqDriverConfig,
    ) -> Result<Self, DriverError> {
        let events = Arc::new(ChannelEvents::default());
        let channel = link.channel(&events)?;
        let manual = config.ack.mode == AckMode::Manual;
        let arguments = BasicConsumeArguments::new(queue, consumer_tag)
            .manual_ack(manual)
            .arguments(field_table(&consume_arguments(&config.queue)))
            .finish();
        let prefetch = config.prefetch;
        let started = {
            let _entered = link.enter();
            link.block_on_for(ADMIN_TIMEOUT, async {
                if manual && prefetch > 0 {
                    channel
                        .basic_qos(BasicQosArguments::new(0, prefetch, false))
                        .await?;
                }
                channel.basic_consume_rx(arguments).await
            })
        };
        let deliveries = match started {
            Some(Ok((_tag, deliveries))) => deliveries,
            failed => {
                let reason = events.close_reason();
                link.close_channel(channel);
                return Err(DriverError::Other(match (failed, reason) {
                    (_, Some(reason)) => format!("consuming queue '{queue}': {reason}"),
                    (Some(Err(e)), None) => format!("consuming queue '{queue}': {e}"),
                    _ => {
                        format!("consuming queue '{queue}': no consume-ok within {ADMIN_TIMEOUT:?}")
                    }
                }));
            }
        };
        Ok(AmqpConsumer {
            channel: Some(channel),
            deliveries,
            events,
            queue_index,
            manual,
            multiple_every: config.ack.multiple_every.max(1),
            unacknowledged: 0,
            last_tag: 0,
            consuming: true,
            reported: None,
            link,
        })
    }

    /// Why the consumer cannot receive any more, if it cannot.
    fn failure(&self, queue_closed: bool) -> Option<&'static str> {
        let channel = self.channel.as_ref()?;
        if !channel.is_connection_open() {
            Some(CONNECTION_CLOSED)
        } else if !channel.is_open() || self.events.close_reason().is_some() {
            Some(CHANNEL_CLOSED)
        } else if self.events.cancelled() {
            Some("consumer_cancelled")
        } else if queue_closed {
            Some(CONNECTION_CLOSED)
        } else {
            None
        }
    }
}

/// What one `poll` hands over and still owes the broker.
struct Handover<'a> {
    deliveries: &'a mut dyn FnMut(Delivery<'_>),
    stream: u32,
    manual: bool,
    every: u32,
    unacknowledged: u32,
    last_tag: u64,
}

impl Handover<'_> {
    /// Hands one delivery over; true when an acknowledgement is due.
    fn hand_over(&mut self, message: ConsumerMessage) -> bool {
        let tag = message.deliver.as_ref().map_or(0, |d| d.delivery_tag());
        let payload = message.content.unwrap_or_default();
        (self.deliveries)(Delivery {
            stream: self.stream,
            payload: &payload,
        });
        self.last_tag = tag;
        self.unacknowledged += 1;
        self.manual && self.unacknowledged >= self.every
    }

    /// Acknowledges everything handed over so far (multiple=true when n > 1).
    async fn acknowledge(&mut self, channel: &Channel) -> Result<(), &'static str> {
        channel
            .basic_ack(BasicAckArguments::new(self.last_tag, self.every > 1))
            .await
            .map_err(|e| crate::link::error_kind(&e))?;
        self.unacknowledged = 0;
        Ok(())
    }
}

impl Consumer for AmqpConsumer {
    fn poll(
        &mut self,
        timeout: Duration,
        deliveries: &mut dyn FnMut(Delivery<'_>),
    ) -> Result<(), String> {
        if self.reported.is_some() {
            std::thread::sleep(timeout);
            return Ok(());
        }
        let mut handover = Handover {
            deliveries,
            stream: self.queue_index,
            manual: self.manual,
            every: self.multiple_every,
            unacknowledged: self.unacknowledged,
            last_tag: self.last_tag,
        };
        let channel = self.channel.as_ref().expect("open until dropped");
        let receiver = &mut self.deliveries;
        let (closed, ack_error) = self.link.block_on(async {
            let mut closed = false;
            let first = if timeout.is_zero() {
                receiver.try_recv().ok()
            } else {
                match tokio::time::timeout(timeout, receiver.recv()).await {
                    Ok(Some(message)) => Some(message),
                    Ok(None) => {
                        closed = true;
                        None
                    }
                    Err(_) => None,
                }
            };
            let Some(first) = first else {
                return (closed, None);
            };
            let mut ack_due = handover.hand_over(first);
            let mut handed = 1;
            let mut refills = 0;
            loop {
                if ack_due {
                    // Acknowledge as soon as the n-th delivery is handed over, so that the
                    // prefetch window never runs dry.
                    if let Err(kind) = handover.acknowledge(channel).await {
                        return (closed, Some(kind));
                    }
                    ack_due = false;
                }
                if handed >= MAX_BATCH {
                    break;
                }
                match receiver.try_recv() {
                    Ok(message) => {
                        ack_due = handover.hand_over(message);
                        handed += 1;
                    }
                    Err(TryRecvError::Empty) if refills < REFILL_PASSES => {
                        refills += 1;
                        tokio::task::yield_now().await;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        closed = true;
                        break;
                    }
                }
            }
            (closed, None)
        });
        self.unacknowledged = if self.manual {
            handover.unacknowledged
        } else {
            0
        };
        self.last_tag = handover.last_tag;
        match ack_error.or_else(|| self.failure(closed)) {
            Some(kind) => {
                self.consuming = false;
                self.reported = Some(kind);
                Err(kind.to_string())
            }
            None => Ok(()),
        }
    }

    fn assigned(&self) -> usize {
        usize::from(self.consuming)
    }
}

impl Drop for AmqpConsumer {
    fn drop(&mut self) {
        let Some(channel) = self.channel.take() else {
            return;
        };
        if self.manual && self.unacknowledged > 0 && channel.is_open() && self.link.is_open() {
            // What was handed over and not yet acknowledged; deliveries still buffered here
            // were never read and go back to the queue when the channel closes.
            let _entered = self.link.enter();
            let _ = self.link.block_on_for(
                CLOSE_TIMEOUT,
                channel.basic_ack(BasicAckArguments::new(self.last_tag, true)),
            );
        }
        self.link.close_channel(channel);
    }
}
