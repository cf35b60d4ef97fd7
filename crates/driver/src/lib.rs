//! The boundary between the engine and a broker family. A driver creates what a run needs
//! (topics, queues), and hands out producers and consumers that send, acknowledge and
//! receive. Drivers know nothing about schedules, phases or histograms.

pub mod arrival;
mod clock;
mod decimal;
mod dialed;
mod envelope;
pub mod framed;
pub mod lateness;
pub mod mock;
pub mod naming;
pub mod net;
mod read_buf;
mod reconnector;
mod redial;
mod sent;
#[cfg(test)]
mod test_support;
pub mod tls;
pub mod url;

use std::time::Duration;

pub use clock::{set_precise_sleep, Clock};
pub use decimal::push_number;
pub use dialed::Dialed;
pub use envelope::{Envelope, EnvelopeError, ENVELOPE_HEADER_LEN, ENVELOPE_VERSION};
pub use read_buf::ReadBuf;
pub use reconnector::{Reconnector, REDIAL_TIMEOUT};
pub use redial::Redial;
pub use sent::{fail_all, Sent};

/// The error kind of a send or poll that failed because the connection was lost, as every
/// family's own client names it.
pub const CONNECTION_CLOSED: &str = "connection_closed";

/// Errors a driver reports while setting up or tearing down.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The broker could not be reached; the CLI maps this to exit code 3.
    #[error("cannot reach {broker} at {address}: {reason}\nhint: {hint}")]
    Unreachable {
        broker: &'static str,
        address: String,
        reason: String,
        hint: String,
    },
    /// The broker refused the credentials; also exit code 3. Never includes the secret.
    #[error("{broker} at {address} refused the credentials: {reason}")]
    Authentication {
        broker: &'static str,
        address: String,
        reason: String,
    },
    /// A topic or queue exists with settings other than the run asks for.
    #[error("{0}")]
    Conflict(String),
    /// The files ask for what this broker cannot give (more replicas than it has brokers);
    /// found before anything is created, and said with the setting that fixes it. Exit 2.
    #[error("{0}")]
    Unsatisfiable(String),
    /// Anything else, with context.
    #[error("{0}")]
    Other(String),
}

impl DriverError {
    /// Ok when nothing failed, else every failure (a clean-up's, say) in one error.
    pub fn unless_failed(failed: Vec<String>) -> Result<(), DriverError> {
        if failed.is_empty() {
            Ok(())
        } else {
            Err(DriverError::Other(failed.join("; ")))
        }
    }
}

/// What the run needs from the broker. The driver chooses broker-side names.
#[derive(Debug, Clone)]
pub struct Topology {
    /// Short id of this run, unique enough to name groups and topics.
    pub run_id: String,
    /// Workload name.
    pub workload: String,
    /// Number of topics (Kafka topics, RabbitMQ exchanges, ...).
    pub topics: u32,
    /// Partitions per topic (Kafka) or the broker family's equivalent.
    pub partitions_per_topic: u32,
    /// Consumers per subscription.
    pub consumers_per_topic: u32,
    /// Subscriptions per topic the workload asks for (a driver may have its own setting, e.g.
    /// RabbitMQ's `queues_per_topic`); [`Driver::subscriptions_per_topic`] says what it made.
    pub subscriptions_per_topic: u32,
    /// (index, count) when this process is one shard of a run: every shard prepares the same
    /// names (what another shard created already is the run's own), and only shard 0 removes
    /// them at the end, after every shard has finished.
    pub shard: Option<(u32, u32)>,
}

impl Topology {
    /// Whether this process removes what the run created (the only process, or shard 0).
    pub fn removes(&self) -> bool {
        self.shard.is_none_or(|(index, _)| index == 0)
    }
}

/// What a `node: leader` fault asks the broker about: a topic, queue or stream of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Led {
    /// "topic", "queue", "stream".
    pub kind: &'static str,
    pub name: String,
}

impl std::fmt::Display for Led {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// Identifies a producer: which topic it sends to, its run-wide id, and the engine's producer
/// thread that serves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerSlot {
    pub topic: u32,
    /// Run-wide, 0 to the workload's producers − 1.
    pub producer: u32,
    /// 0 to the workload's `producer_threads` − 1.
    pub thread: u32,
}

/// Identifies a consumer: which topic, which subscription of it, and its number inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerSlot {
    pub topic: u32,
    /// Subscriptions of a topic each receive every message (Kafka: consumer groups).
    pub subscription: u32,
    /// Index of the consumer within its subscription.
    pub member: u32,
}

/// A message to send. The payload already starts with the envelope header.
#[derive(Debug, Clone, Copy)]
pub struct OutgoingMessage<'a> {
    pub key: Option<&'a [u8]>,
    pub payload: &'a [u8],
    /// Actual send time, ns since the UNIX epoch; returned unchanged in the [`Ack`].
    pub sent_ns: u64,
}

/// The outcome the broker reported for one sent message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    /// Envelope of the acknowledged message.
    pub envelope: Envelope,
    /// Actual send time given in [`OutgoingMessage::sent_ns`].
    pub sent_ns: u64,
    /// Payload length in bytes.
    pub bytes: u32,
    /// When the acknowledgement arrived, ns since the UNIX epoch ([`Clock::process`]), for
    /// drivers that see it arrive; None lets the engine use the time it was handed over.
    pub acknowledged_ns: Option<u64>,
    /// Ok, or the kind of failure (`snake_case`, e.g. `msg_timed_out`).
    pub result: Result<(), String>,
}

/// Why a send did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The client's buffer is full: poll for acknowledgements and try again.
    Backpressure,
    /// The send failed for good; the kind names why.
    Failed(String),
    /// The client has lost its connection to the broker and is reconnecting: wait (serving
    /// acknowledgements) and try again, like backpressure, but the time is an outage, not a
    /// full buffer. The kind names why (e.g. `connection_refused`).
    Unavailable(String),
}

/// Sends messages and reports acknowledgements. Owned by one producer task.
pub trait Producer: Send {
    /// Hands one message to the client library without waiting for the broker.
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError>;
    /// Collects acknowledgements that have arrived, waiting at most `timeout` for the first.
    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack));
    /// Messages sent and not yet acknowledged or failed.
    fn in_flight(&self) -> usize;
    /// Gives up on messages still in flight (called at the end of the drain).
    fn abandon(&mut self) {}
    /// Whether the broker confirms messages. When false (e.g. AMQP without publisher
    /// confirms) `poll` reports no acknowledgements: a successful `send` is all there is,
    /// publish latency is not measured, and the delivery ledger expects every sent message.
    fn confirms(&self) -> bool {
        true
    }
    /// Whether every acknowledgement comes with the time it arrived (`acknowledged_ns`),
    /// stamped by the client library's own threads or by the kernel as it received them
    /// ([`arrival`]): the task then need not wake for
    /// acknowledgements while it waits for its next send, and sleeps instead.
    fn stamps_acknowledgements(&self) -> bool {
        false
    }
    /// Whether what `send` took goes out without `poll`: the client library's own threads
    /// write it (librdkafka). Only such producers may share a thread that polls each of them
    /// every few milliseconds; one whose `poll` writes what `send` buffered keeps a thread of
    /// its own, so that its messages leave at their send times.
    fn sends_in_background(&self) -> bool {
        false
    }
    /// A note for the summary on what an acknowledgement means with this configuration
    /// (e.g. Kafka's acks=0), or None.
    fn ack_note(&self) -> Option<String> {
        None
    }
    /// While the client knows it has lost the broker (a closed connection, every broker
    /// down), when it found out, ns since the UNIX epoch ([`Clock::process`]); None while
    /// connected or when the client cannot tell. The engine reads it after every `poll`: an
    /// outage lasts from this time to the first successful acknowledgement after it.
    fn disconnected_since(&self) -> Option<u64> {
        None
    }
    /// While the broker, still connected, refuses to take messages (AMQP connection.blocked:
    /// a memory or disk alarm): since when (ns since the UNIX epoch) and the broker's reason.
    /// The engine reads it after every `poll`.
    fn blocked_since(&self) -> Option<(u64, String)> {
        None
    }
    /// Why the broker ended this producer's channel or connection, in its own words (e.g.
    /// AMQP's "404 NOT_FOUND - no exchange …"), for the summary; None when it did not.
    fn closed_by_broker(&self) -> Option<String> {
        None
    }
}

/// A received message, borrowed from the client library.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    /// The partition or queue it came from, for the per-stream order check.
    pub stream: u32,
    pub payload: &'a [u8],
    /// When the message arrived, ns since the UNIX epoch ([`Clock::process`]), for drivers
    /// that hand messages over later than they see them arrive; None lets the engine use the
    /// time it is handed over.
    pub received_ns: Option<u64>,
    /// Which of the consumer's slots it is for: the index into [`ConsumerGroup::slots`]
    /// (0 for a consumer of one slot).
    pub slot: usize,
}

/// What a consumer hands each message it receives to.
pub type Deliveries<'a> = &'a mut dyn FnMut(Delivery<'_>);

/// Receives messages for one consumer slot, or for several ([`Driver::consumers`]). Owned by
/// one consumer task, on one thread.
pub trait Consumer: Send {
    /// Delivers messages that have arrived, waiting at most `timeout` for the first one.
    /// Errors are returned as kinds and counted; they do not stop the consumer.
    fn poll(&mut self, timeout: Duration, deliveries: Deliveries<'_>) -> Result<(), String>;
    /// Number of partitions or queues currently assigned to slot `slot` of this consumer
    /// (an index as in [`Delivery::slot`]).
    fn assigned(&self, slot: usize) -> usize;
    /// Stops (`true`) or resumes (`false`) fetching, for backlog mode. Returns true when the
    /// consumer does it itself and is polled as usual meanwhile (a paused consumer delivers
    /// little or nothing, and a group keeps its members); false (the default) has the engine
    /// stop polling until resumed, which bounds what arrives by the client's own prefetch.
    fn pause(&mut self, _paused: bool) -> bool {
        false
    }
    /// Once the drain is over: what the broker still holds beyond this consumer's position,
    /// per slot and place it reads, as the broker tells the client (a partition's high
    /// watermark less the consumer's position, a queue's depth). None (the default) when the
    /// client cannot tell. Acknowledged messages a subscription never received are then
    /// unconsumed (a backlog, up to what its places hold), not lost.
    fn unread(&mut self) -> Option<Vec<Unread>> {
        None
    }
}

/// What the broker still stores beyond a consumer's position in one place it reads, when the
/// drain ends ([`Consumer::unread`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unread {
    /// Which of the consumer's slots reads the place (as in [`Delivery::slot`]).
    pub slot: usize,
    /// The place, named so that the members of one subscription that read it name it alike
    /// (e.g. `topic/partition`): it is counted once per subscription.
    pub place: String,
    /// Messages stored there beyond the consumer's position.
    pub messages: u64,
    /// What the broker said, for the summary (e.g. "Kafka high watermarks less the consumer's
    /// positions").
    pub evidence: &'static str,
}

/// [`Driver::consumers`] as most drivers do it: [`Driver::consumer`] for each slot.
pub fn one_consumer_per_slot<D: Driver + ?Sized>(
    driver: &D,
    slots: &[ConsumerSlot],
) -> Result<Vec<ConsumerGroup>, DriverError> {
    slots
        .iter()
        .enumerate()
        .map(|(i, &slot)| {
            Ok(ConsumerGroup {
                slots: vec![i],
                consumer: driver.consumer(slot)?,
            })
        })
        .collect()
}

/// One consumer serving some of a run's consumer slots.
pub struct ConsumerGroup {
    /// Indices into the slots given to [`Driver::consumers`].
    pub slots: Vec<usize>,
    pub consumer: Box<dyn Consumer>,
}

/// A broker family: sets up the run and hands out producers and consumers.
pub trait Driver: Send + Sync {
    /// Short name, e.g. "kafka".
    fn name(&self) -> &'static str;
    /// Checks the broker answers, within a bounded time.
    fn connect(&mut self) -> Result<(), DriverError>;
    /// Broker version or description for the manifest, when known.
    fn broker_version(&self) -> Option<String> {
        None
    }
    /// Creates (or checks) the topics the run needs.
    fn prepare(&mut self, topology: &Topology) -> Result<(), DriverError>;
    /// Subscriptions per topic, each of which receives every message once.
    fn subscriptions_per_topic(&self) -> u32 {
        1
    }
    /// A producer for a slot: its topic, its run-wide id, the engine's thread that will
    /// serve it (a driver may give the producers of one thread one client).
    fn producer(&self, slot: ProducerSlot) -> Result<Box<dyn Producer>, DriverError>;
    /// A consumer for a slot.
    fn consumer(&self, slot: ConsumerSlot) -> Result<Box<dyn Consumer>, DriverError>;
    /// Consumers for all of a run's slots: each slot in exactly one group. By default one
    /// consumer per slot; a driver whose client can serve many slots at once (one Kafka
    /// consumer reading many topics) groups them, so that threads and clients do not grow
    /// with the topics. Each slot keeps its own recorder and ledger either way.
    fn consumers(&self, slots: &[ConsumerSlot]) -> Result<Vec<ConsumerGroup>, DriverError> {
        one_consumer_per_slot(self, slots)
    }
    /// Whether a subscription's consumers, with the given assigned counts, can start to
    /// receive everything sent from now on.
    fn subscription_ready(&self, topic: u32, assigned: &[usize]) -> bool {
        let _ = topic;
        assigned.iter().all(|&a| a > 0)
    }
    /// When the broker is configured to discard messages by policy (e.g. a RabbitMQ queue
    /// length limit with overflow drop-head), the reason; messages acknowledged and never
    /// received are then reported as dropped by the broker, not as lost.
    fn broker_drop_policy(&self) -> Option<String> {
        None
    }
    /// How many messages the broker itself counted as discarded by its limits over the run,
    /// and which limits, when it counts them (mosquitto's `$SYS/broker/publish/messages/dropped`:
    /// `max_queued_messages`); asked once the tasks are done. Up to that many of the messages
    /// acknowledged and never received are then dropped by the broker, not lost.
    fn broker_dropped(&self) -> Option<(u64, String)> {
        None
    }
    /// The driver-file settings to check when the broker refuses every message with an error
    /// of a kind (the kinds the driver counts sends under), as (kind, settings in prose); a
    /// run that stops early names the setting of its commonest error's kind.
    fn failure_settings(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
    /// The broker-side object whose leader a `node: leader` fault hits: the run's first topic
    /// as the broker names it (a topic, its first subscription's queue, a stream). Names follow
    /// from the run id and the workload's name, so this is known before `prepare`. None: the
    /// family has no leaders to find.
    fn leader_object(&self, run_id: &str, workload: &str) -> Option<Led> {
        let _ = (run_id, workload);
        None
    }
    /// What the client library did on its own during the run that can reorder or repeat
    /// messages — requests it retried, consumer group rebalances — for the summary to name
    /// beside the ledger's out-of-order and duplicate counts. None: nothing to tell.
    fn client_events(&self) -> Option<ClientEvents> {
        None
    }
    /// Removes what `prepare` created, if the driver file asks for it.
    fn cleanup(&mut self) -> Result<(), DriverError>;
}

/// See [`Driver::client_events`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientEvents {
    /// Requests the client retried, by when it said so: (ns since the UNIX epoch, how many).
    pub retries: Vec<(u64, u64)>,
    /// What a retry is, for the note (e.g. "produce requests retried (librdkafka txretries)").
    pub retried: &'static str,
    /// Messages the client transmitted again (after an error answer or a timeout: some with
    /// no request retried), by when it said so: (ns since the UNIX epoch, how many).
    pub resends: Vec<(u64, u64)>,
    /// What a resend is, for the note.
    pub resent: &'static str,
    /// When a consumer had partitions taken away after its first assignment (a rebalance), ns
    /// since the UNIX epoch.
    pub rebalances: Vec<u64>,
}
