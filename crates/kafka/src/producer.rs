//! A Kafka producer task: sends through its librdkafka client (its own or a shared one) and
//! hands on the acknowledgements the client's router stamped as they arrived.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::error::RDKafkaErrorCode;

use brokerbench_driver::{Ack, Envelope, OutgoingMessage, Producer, SendError};

use crate::error_kinds::kind_of;
use crate::in_flight::{self, InFlight};
use crate::producer_client::{AckSlot, ProducerClient, RawAck};
use crate::topic_handle::TopicHandle;

/// A producer task serves its client's queue at most this often after acknowledgements...
const SERVE_AT_MOST: Duration = Duration::from_millis(1);
/// ... and at least this often (errors, logs).
const SERVE_AT_LEAST: Duration = Duration::from_millis(100);

pub(crate) struct KafkaProducer {
    /// Declared before `client` so that it is dropped first, as librdkafka requires (a
    /// shared client is destroyed with the last task's handle already gone).
    topic: TopicHandle,
    client: Arc<ProducerClient>,
    /// Whether other tasks send through `client` too.
    shared: bool,
    slot: Arc<AckSlot>,
    /// Run-wide producer id.
    id: u32,
    /// Send times of the messages in flight.
    times: InFlight,
    /// When this task last served the client's queue.
    served: Instant,
    acknowledged_since_served: bool,
    in_flight: usize,
    /// Reused buffer the collected acknowledgements are swapped into.
    batch: Vec<RawAck>,
    acks: Option<String>,
}

impl KafkaProducer {
    /// Producer `id`'s task, sending to `topic` through `client` (`shared` with other tasks);
    /// its acknowledgements arrive in `slot`. `acks` is the driver file's, for the note on them.
    pub(crate) fn new(
        topic: TopicHandle,
        client: Arc<ProducerClient>,
        shared: bool,
        slot: Arc<AckSlot>,
        id: u32,
        acks: Option<String>,
    ) -> Self {
        KafkaProducer {
            topic,
            client,
            shared,
            slot,
            id,
            times: InFlight::default(),
            served: Instant::now(),
            acknowledged_since_served: false,
            in_flight: 0,
            batch: Vec::with_capacity(1024),
            acks,
        }
    }
}

impl Producer for KafkaProducer {
    #[inline]
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError> {
        let envelope =
            Envelope::read(message.payload).map_err(|_| SendError::Failed("no_envelope".into()))?;
        let opaque = in_flight::opaque(self.id, envelope.sequence);
        match self
            .topic
            .produce(message.payload, message.key, opaque as usize)
        {
            Ok(()) => {
                self.in_flight += 1;
                self.times
                    .sent(envelope.sequence, envelope.intended_ns, message.sent_ns);
                Ok(())
            }
            // A full queue while a broker is unreachable is the outage's doing.
            Err(RDKafkaErrorCode::QueueFull) => Err(match self.client.router().lost_since() {
                Some(_) => SendError::Unavailable("broker_unreachable".into()),
                None => SendError::Backpressure,
            }),
            Err(code) => Err(SendError::Failed(kind_of(code))),
        }
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        // The client's queue holds the acknowledged messages to free (and errors and logs):
        // served after acknowledgements came, at most once a millisecond (tasks sharing a
        // client share the queue), and at least every SERVE_AT_LEAST.
        let since = self.served.elapsed();
        if since >= SERVE_AT_LEAST || (since >= SERVE_AT_MOST && self.acknowledged_since_served) {
            self.client.serve();
            self.served = Instant::now();
            self.acknowledged_since_served = false;
        }
        // A task that waits wants room for more messages, or the last ones of its drain:
        // woken by a share of what is in flight, not by every response (the wake-up costs
        // librdkafka's broker thread a system call).
        let want = (self.in_flight / 64).clamp(1, 1024);
        self.slot.take(timeout, want, &mut self.batch);
        if self.batch.is_empty() {
            return;
        }
        self.in_flight -= self.batch.len().min(self.in_flight);
        self.acknowledged_since_served = true;
        for raw in self.batch.drain(..) {
            let Some((sequence, intended_ns, sent_ns)) = self.times.acknowledged(raw.opaque) else {
                continue;
            };
            acks(Ack {
                envelope: Envelope {
                    producer: self.id,
                    sequence,
                    intended_ns,
                },
                sent_ns,
                bytes: raw.bytes,
                acknowledged_ns: Some(raw.arrived_ns),
                result: raw.error.map_or(Ok(()), |code| Err(kind_of(code))),
            });
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn abandon(&mut self) {
        // A purge covers the whole client and would fail other tasks' messages still within
        // their drain: a shared client is purged when the last task drops it.
        if self.shared {
            return;
        }
        self.client.purge();
    }

    fn stamps_acknowledgements(&self) -> bool {
        true
    }

    fn sends_in_background(&self) -> bool {
        true
    }

    fn disconnected_since(&self) -> Option<u64> {
        self.client.router().lost_since()
    }

    fn ack_note(&self) -> Option<String> {
        match self.acks.as_deref() {
            Some("0") => Some(
                "acks=0: an acknowledgement means librdkafka wrote the message to the socket; the broker confirmed nothing, so publish latency is not broker latency".into(),
            ),
            _ => None,
        }
    }
}
