//! The RabbitMQ driver (AMQP 0-9-1): an exchange per topic, queues as
//! subscriptions, publisher confirms as acknowledgements, consumers with prefetch and manual
//! or automatic acknowledgements.
//!
//! # How a workload maps onto RabbitMQ
//!
//! - **Topic → exchange.** Workload topic *i* is the exchange
//!   `<exchange.name>-<workload>-<run id>-<i>` of the configured type (direct, fanout, topic
//!   or headers). The name is new for every run, so a run never reads another run's messages.
//! - **Subscription → queue.** Each topic has `queues_per_topic` queues `<exchange>-q<j>`
//!   (j = 0, 1, ...), declared with the configured type (`x-queue-type` classic, quorum or
//!   stream), durability, lazy mode (`x-queue-mode: lazy`, classic only; RabbitMQ 3.12 and
//!   later ignore it), length limits (`x-max-length`, `x-max-length-bytes`) and overflow
//!   (`x-overflow` drop-head or reject-publish). Every queue is bound to its topic's exchange:
//!   - direct and topic exchanges: binding key = the topic's name (its exchange name), and
//!     messages are published with that routing key;
//!   - fanout: the routing key is ignored;
//!   - headers: bound with `x-match: any, topic: <name>`, and every message carries the
//!     header `topic: <name>`.
//!
//!   So each queue receives every message of its topic: a queue is one *subscription*
//!   (`subscriptions_per_topic() = queues_per_topic`), and the delivery ledger checks that
//!   every queue received every message exactly once. A delivery's `stream` is the queue's
//!   index *j*, for the per-queue order check.
//! - **Consumers.** `consumers_per_topic` consumers per queue, each on its own channel with
//!   `basic.qos(prefetch)`; they share the queue's messages (competing consumers). A consumer
//!   counts as assigned (`assigned() = 1`) once the broker sent basic.consume-ok, and a
//!   subscription is ready when all of its consumers are. Stream queues are read from their
//!   first offset (the queue is new, so that is the run's first message).
//! - **Partitions.** RabbitMQ queues are not partitioned: `partitions_per_topic` must be 1
//!   (the workload check and `prepare` say so otherwise). Use `consumers_per_topic` for
//!   parallel consumers and `queues_per_topic` for copies.
//! - **Keys.** Message keys from the workload are not used; routing is by topic only.
//! - **Connections.** Every producer and every consumer has its own channel;
//!   `channels_per_connection` of them share one AMQP connection (producers and consumers
//!   never share one).
//! - **Cleanup.** With `delete_queues: true` the run's queues and exchanges are deleted
//!   after the run (and when `prepare` fails half-way).
//!
//! # What the numbers mean
//!
//! - With `confirms.enabled` (the default) every producer channel is in confirm mode and an
//!   acknowledgement is the broker's basic.ack: publish latency = confirm time − intended send
//!   time. `multiple` confirms acknowledge every earlier message; a basic.nack is a failure of
//!   kind `nacked`, or `rejected` with `overflow: reject-publish` (a full queue refusing the
//!   message). Messages are published `mandatory`, so one that no queue takes is reported as
//!   `unroutable`. At most `confirms.max_outstanding` messages per producer wait for their
//!   confirm; beyond that `send` answers backpressure.
//! - With confirms off `Producer::confirms()` is false: nothing is acknowledged, the engine
//!   counts sent messages only, and the summary says delivery was not confirmed.
//! - End-to-end latency comes from the envelope in the payload, never from the AMQP
//!   timestamp property.
//! - Manual acknowledgements: every `ack.multiple_every`-th delivery is acknowledged with
//!   multiple=true (and whatever remains when the consumer closes); a delivery waits at most
//!   100 ms for its acknowledgement, however few follow it. `ack.mode: auto` consumes with
//!   no_ack.
//! - A queue with a length limit and `overflow: drop-head` discards its oldest messages when
//!   full; `broker_drop_policy()` says so, and messages acknowledged and never received are
//!   then reported as dropped by the broker, not as lost by brokerbench.
//!
//! # Connections and threads
//!
//! The engine's traits are synchronous: one thread per producer and per consumer. Everything
//! travels on brokerbench's own AMQP 0-9-1 connections ([`session`], [`wire`]): no client
//! library, no async runtime. Declaring, binding and deleting use a separate admin connection.
//!
//! - A producer encodes each message's frames into its own buffer (`send` never waits for the
//!   broker) and writes the buffer with one non-blocking system call per `poll` (the engine
//!   polls before every wait and at least every 64 sends) or per 64 KiB. The same `poll`
//!   reads the confirms that came meanwhile, each with the time the kernel received it
//!   (publish latency = that time − intended send time), so no thread wakes for them while
//!   the producer sleeps between sends. `confirms.max_outstanding` unconfirmed messages, or
//!   4 MiB the socket has not taken, is backpressure.
//! - A consumer reads its connection's socket itself inside `poll`, hands over every
//!   delivery one read brought, and writes all their acknowledgements with one system call.
//!   Consumers sharing a connection take turns reading for each other.
//!
//! Why not a client library (amqprs was used at first; lapin was measured and cost more):
//! both send every publish and every basic.ack with a system call of its own and hand each
//! frame across tasks. Against RabbitMQ PerfTest (`bench/rabbitmq_perftest.py`) amqprs-based
//! producing and consuming cost about 24 µs of client CPU per message at 23k msg/s with
//! confirms; this client costs about 9 µs at 33k msg/s and leaves the broker the CPU to go
//! faster (figures in docs/src/benchmarks.md).

pub mod config;
mod confirms;
mod consumer;
mod failover;
mod family;
pub mod managed;
pub mod metrics;
pub mod naming;
pub mod omb;
pub mod probe;
mod producer;
pub mod session;
mod unread;
pub mod wire;

pub use family::{RabbitMqFamily, FAMILY};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::{AmqpUri, RabbitMqDriverConfig};
use crate::failover::Failover;
use brokerbench_driver::{Consumer, ConsumerSlot, Driver, DriverError, Led, Topology};
use brokerbench_driver::{Producer, ProducerSlot};

pub use naming::TopicNames;

use crate::naming::{queue_arguments as queue_arguments_of, MAX_NAME_LEN};
use crate::session::{Channel, Session, ADMIN_TIMEOUT};
use crate::wire::id;

/// How long `connect` may take at most.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// What to do about an unreachable broker.
pub(crate) const HINT: &str = "start a local broker with `brokerbench broker up rabbitmq`, or leave uri out of the driver file to use the managed one";

/// The settings behind a queue's refusals (overflow reject-publish, or drop-head nacks).
const QUEUE_LIMITS: &str = "the queue's length limits (queue.max_length, queue.overflow)";

/// The RabbitMQ driver.
pub struct AmqpDriver {
    config: RabbitMqDriverConfig,
    uri: AmqpUri,
    /// `uri`, then the cluster's other nodes.
    failover: Arc<Failover>,
    broker: Option<String>,
    run_id: String,
    topics: Vec<TopicNames>,
    /// Exchanges and queues this run declared (and so deletes).
    created_exchanges: Vec<String>,
    created_queues: Vec<String>,
    /// Connections for producers and consumers, from `prepare` on.
    dialer: Option<Arc<Dialer>>,
    /// Whether `cleanup` may delete what the run declared (false on shards other than 0).
    removes: bool,
}

impl std::fmt::Debug for AmqpDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpDriver")
            .field("uri", &self.uri)
            .field("topics", &self.topics)
            .finish_non_exhaustive()
    }
}

impl AmqpDriver {
    /// A driver for the broker at `uri` (the driver file's, or the managed broker's).
    pub fn new(config: RabbitMqDriverConfig, uri: AmqpUri) -> Self {
        AmqpDriver {
            failover: Arc::new(Failover::new(&uri, &config.failover_uris)),
            config,
            uri,
            broker: None,
            run_id: String::new(),
            topics: Vec::new(),
            created_exchanges: Vec::new(),
            created_queues: Vec::new(),
            dialer: None,
            removes: true,
        }
    }

    fn dialer(&self) -> Result<&Arc<Dialer>, DriverError> {
        self.dialer
            .as_ref()
            .ok_or_else(|| DriverError::Other("producers and consumers come after prepare".into()))
    }

    /// Names of the run's exchanges and queues, in topic-index order (after `prepare`).
    pub fn topic_names(&self) -> &[TopicNames] {
        &self.topics
    }

    /// A connection for declaring or deleting (role `admin` or `cleanup`).
    fn admin_session(&self, role: &str) -> Result<Arc<Session>, DriverError> {
        let name = format!("brokerbench-{}-{role}", self.run_id);
        self.failover
            .open(|uri| Session::open(uri, &name))
            .map(Arc::new)
    }

    fn topic(&self, topic: u32) -> Result<&TopicNames, DriverError> {
        self.topics.get(topic as usize).ok_or_else(|| {
            DriverError::Other(format!(
                "topic {topic} does not exist (prepare created {})",
                self.topics.len()
            ))
        })
    }

    /// Declares every exchange and queue and binds them, recording what was created.
    fn declare_all(&mut self, session: &Arc<Session>) -> Result<(), DriverError> {
        let mut channel = session.channel()?;
        let (exchanges, queues) = (&mut self.created_exchanges, &mut self.created_queues);
        for topic in &self.topics {
            declare_topic(&mut channel, topic, &self.config, &mut |is_queue, name| {
                if is_queue {
                    queues.push(name.to_string())
                } else {
                    exchanges.push(name.to_string())
                }
            })?;
        }
        Ok(())
    }

    /// Deletes what this run created; the names of what could not be deleted, with why.
    fn delete_all(&mut self, session: &Arc<Session>) -> Vec<String> {
        let mut failures = Vec::new();
        let mut channel = match session.channel() {
            Ok(c) => c,
            Err(e) => return vec![e.to_string()],
        };
        let queues = std::mem::take(&mut self.created_queues);
        let exchanges = std::mem::take(&mut self.created_exchanges);
        let queues = queues.into_iter().map(|q| (true, q));
        let exchanges = exchanges.into_iter().map(|e| (false, e));
        for (is_queue, name) in queues.chain(exchanges) {
            let mut frame = Vec::new();
            let (method, reply, doing) = if is_queue {
                (id::QUEUE_DELETE, id::QUEUE_DELETE_OK, "deleting queue")
            } else {
                (
                    id::EXCHANGE_DELETE,
                    id::EXCHANGE_DELETE_OK,
                    "deleting exchange",
                )
            };
            wire::method(&mut frame, channel.number(), method, |out| {
                out.extend_from_slice(&0u16.to_be_bytes());
                wire::put_short_string(out, &name);
                out.push(0);
            });
            if let Err(e) = admin(&mut channel, frame, reply, doing, &name) {
                failures.push(e.to_string());
                // A failed operation closes the channel; go on with a new one.
                match session.channel() {
                    Ok(c) => channel = c,
                    Err(e) => {
                        failures.push(e.to_string());
                        return failures;
                    }
                }
            }
        }
        failures
    }
}

/// Declares `topic`'s exchange and queues and binds them (again, after a reconnect: the same
/// declarations are a no-op for what survived a broker restart), telling `created` each
/// object (true for a queue) as it exists.
pub(crate) fn declare_topic(
    channel: &mut Channel,
    topic: &TopicNames,
    config: &RabbitMqDriverConfig,
    created: &mut dyn FnMut(bool, &str),
) -> Result<(), DriverError> {
    let queue = &config.queue;
    // durable (bit 1); not passive, auto-delete, internal or exclusive; wait for the answer.
    let flags = if queue.durable { 0b10 } else { 0 };
    let mut queue_arguments = Vec::new();
    wire::put_arguments(&mut queue_arguments, &queue_arguments_of(queue));
    let kind = config.exchange.kind.as_str();
    let n = channel.number();
    let mut frame = Vec::new();
    wire::method(&mut frame, n, id::EXCHANGE_DECLARE, |out| {
        out.extend_from_slice(&0u16.to_be_bytes());
        wire::put_short_string(out, &topic.exchange);
        wire::put_short_string(out, kind);
        out.push(flags);
        wire::put_table(out, &[]);
    });
    admin(
        channel,
        frame,
        id::EXCHANGE_DECLARE_OK,
        "declaring exchange",
        &topic.exchange,
    )?;
    created(false, &topic.exchange);
    for name in &topic.queues {
        let mut frame = Vec::new();
        wire::method(&mut frame, n, id::QUEUE_DECLARE, |out| {
            out.extend_from_slice(&0u16.to_be_bytes());
            wire::put_short_string(out, name);
            out.push(flags);
            out.extend_from_slice(&queue_arguments);
        });
        admin(
            channel,
            frame,
            id::QUEUE_DECLARE_OK,
            "declaring queue",
            name,
        )?;
        created(true, name);
        let mut frame = Vec::new();
        wire::method(&mut frame, n, id::QUEUE_BIND, |out| {
            out.extend_from_slice(&0u16.to_be_bytes());
            wire::put_short_string(out, name);
            wire::put_short_string(out, &topic.exchange);
            wire::put_short_string(out, topic.routing.binding_key());
            out.push(0);
            wire::put_arguments(out, &topic.routing.binding_arguments());
        });
        admin(channel, frame, id::QUEUE_BIND_OK, "binding queue", name)?;
    }
    Ok(())
}

/// Runs one admin method within [`ADMIN_TIMEOUT`], naming the object and the broker's reason
/// when it fails.
fn admin(
    channel: &mut Channel,
    frame: Vec<u8>,
    reply: (u16, u16),
    doing: &str,
    name: &str,
) -> Result<(), DriverError> {
    match channel.call(frame, reply, ADMIN_TIMEOUT) {
        Ok(_) => Ok(()),
        Err(reason) if reason.starts_with("406") => Err(DriverError::Conflict(format!(
            "{doing} '{name}': the broker refused it: {reason}; delete the existing object or choose another exchange.name"
        ))),
        Err(reason) => Err(DriverError::Other(format!("{doing} '{name}': {reason}"))),
    }
}

impl Driver for AmqpDriver {
    fn leader_object(&self, run_id: &str, workload: &str) -> Option<Led> {
        let mut config = self.config.clone();
        config.queues_per_topic = config.queues_per_topic.max(1);
        let queues = TopicNames::new(&config, workload, run_id, 0).queues;
        queues.into_iter().next().map(|name| Led {
            kind: "queue",
            name,
        })
    }

    fn name(&self) -> &'static str {
        "rabbitmq"
    }

    fn failure_settings(&self) -> &'static [(&'static str, &'static str)] {
        &[
            (
                confirms::UNROUTABLE,
                "the exchange and its bindings (exchange.type, queues_per_topic)",
            ),
            ("rejected", QUEUE_LIMITS),
            ("nacked", QUEUE_LIMITS),
            (
                session::CHANNEL_CLOSED,
                "the broker's reason for closing the channel, in the notes",
            ),
        ]
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        let info =
            probe::probe(&self.uri, CONNECT_TIMEOUT).map_err(|e| probe_error(&self.uri, e))?;
        self.broker = Some(info.describe());
        Ok(())
    }

    fn broker_version(&self) -> Option<String> {
        self.broker.clone()
    }

    fn prepare(&mut self, topology: &Topology) -> Result<(), DriverError> {
        if topology.partitions_per_topic != 1 {
            return Err(DriverError::Other(format!(
                "partitions_per_topic: {} has no meaning for RabbitMQ, whose queues are not partitioned; set partitions_per_topic: 1 (more consumers per queue: consumers_per_topic; more queues per topic: queues_per_topic)",
                topology.partitions_per_topic
            )));
        }
        match (self.config.queues_per_topic, topology.subscriptions_per_topic) {
            (_, 1) => {}
            (1, n) => self.config.queues_per_topic = n,
            (q, n) if q == n => {}
            (q, n) => {
                return Err(DriverError::Unsatisfiable(format!(
                    "the workload asks for subscriptions_per_topic: {n} and the driver file for queues_per_topic: {q}; each subscription is a queue, so give one of them (--set queues_per_topic=1, or --set subscriptions_per_topic=1)"
                )))
            }
        }
        self.run_id = topology.run_id.clone();
        self.removes = topology.removes();
        self.topics = (0..topology.topics)
            .map(|i| TopicNames::new(&self.config, &topology.workload, &topology.run_id, i))
            .collect();
        if let Some(long) = self.topics.iter().find(|t| t.longest() > MAX_NAME_LEN) {
            return Err(DriverError::Other(format!(
                "exchange or queue names such as '{}' would be longer than {MAX_NAME_LEN} bytes; shorten exchange.name or the workload name",
                long.exchange
            )));
        }
        let per_connection = self.config.channels_per_connection.max(1);
        self.dialer = Some(Arc::new(Dialer {
            failover: self.failover.clone(),
            run_id: self.run_id.clone(),
            config: self.config.clone(),
            producers: Pool::new("producer", per_connection),
            consumers: Pool::new("consumer", per_connection),
        }));
        let session = self.admin_session("admin")?;
        let declared = self.declare_all(&session);
        if declared.is_err() && self.config.delete_queues {
            // Leave nothing behind from a half-prepared run.
            let _ = self.delete_all(&session);
        }
        declared
    }

    fn subscriptions_per_topic(&self) -> u32 {
        self.config.queues_per_topic
    }

    fn producer(&self, slot: ProducerSlot) -> Result<Box<dyn Producer>, DriverError> {
        let ProducerSlot { topic, .. } = slot;
        let names = self.topic(topic)?;
        Ok(Box::new(producer::AmqpProducer::new(
            self.dialer()?.clone(),
            names,
        )?))
    }

    fn consumer(&self, slot: ConsumerSlot) -> Result<Box<dyn Consumer>, DriverError> {
        let names = self.topic(slot.topic)?;
        let queue = names
            .queues
            .get(slot.subscription as usize)
            .ok_or_else(|| {
                DriverError::Other(format!(
                    "subscription {} of topic {} does not exist (queues_per_topic: {})",
                    slot.subscription, slot.topic, self.config.queues_per_topic
                ))
            })?;
        let tag = format!(
            "brokerbench-{}-{}-{}-{}",
            self.run_id, slot.topic, slot.subscription, slot.member
        );
        Ok(Box::new(consumer::AmqpConsumer::new(
            self.dialer()?.clone(),
            names,
            queue,
            slot.subscription,
            tag,
        )?))
    }

    fn broker_drop_policy(&self) -> Option<String> {
        self.config.drop_policy()
    }

    fn cleanup(&mut self) -> Result<(), DriverError> {
        if let Some(dialer) = &self.dialer {
            dialer.producers.release();
            dialer.consumers.release();
        }
        if !self.config.delete_queues
            || !self.removes
            || (self.created_queues.is_empty() && self.created_exchanges.is_empty())
        {
            return Ok(());
        }
        let session = self.admin_session("cleanup")?;
        let failures = self.delete_all(&session);
        DriverError::unless_failed(failures)
    }
}

/// The driver's error for a failed handshake with the broker at `uri`.
pub(crate) fn probe_error(uri: &AmqpUri, error: probe::ProbeError) -> DriverError {
    match error {
        probe::ProbeError::Unreachable(reason) => DriverError::Unreachable {
            broker: "rabbitmq",
            address: uri.address(),
            reason,
            hint: HINT.into(),
        },
        probe::ProbeError::Authentication(reason) => DriverError::Authentication {
            broker: "rabbitmq",
            address: uri.address(),
            reason,
        },
        probe::ProbeError::Refused(reason) => DriverError::Other(format!(
            "rabbitmq at {} refused the connection: {reason}",
            uri.address()
        )),
        probe::ProbeError::Tls(reason) => DriverError::Unreachable {
            broker: "rabbitmq",
            address: uri.address(),
            reason,
            hint: "check the amqps:// URI's cacertfile, certfile and keyfile (`brokerbench broker status rabbitmq --driver-file` prints a working one for the managed broker started with --tls)".into(),
        },
    }
}

/// Opens producers' and consumers' connections, and again after one is lost.
pub(crate) struct Dialer {
    failover: Arc<Failover>,
    run_id: String,
    pub(crate) config: RabbitMqDriverConfig,
    producers: Pool,
    consumers: Pool,
}

impl Dialer {
    /// A connection for a producer: the pool's current one while it has room and is open.
    pub(crate) fn producer_session(&self) -> Result<Arc<Session>, DriverError> {
        let run_id = &self.run_id;
        self.failover
            .open(|uri| self.producers.session(uri, run_id))
    }

    pub(crate) fn consumer_session(&self) -> Result<Arc<Session>, DriverError> {
        let run_id = &self.run_id;
        self.failover
            .open(|uri| self.consumers.session(uri, run_id))
    }

    /// Declares `topic`'s exchange, queues and bindings again on `session` (after a
    /// reconnect: a restarted broker has lost whatever was not durable).
    pub(crate) fn redeclare(
        &self,
        session: &Arc<Session>,
        topic: &TopicNames,
    ) -> Result<(), DriverError> {
        let mut channel = session.channel()?;
        declare_topic(&mut channel, topic, &self.config, &mut |_, _| {})
    }
}

/// Connections handed to producers (or consumers), `per_connection` channels each.
struct Pool {
    role: &'static str,
    per_connection: u32,
    /// The connection being filled and how many channels it has.
    current: Mutex<Option<(Arc<Session>, u32)>>,
    /// Connections opened so far, for their names.
    opened: std::sync::atomic::AtomicU32,
}

impl Pool {
    fn new(role: &'static str, per_connection: u32) -> Self {
        Pool {
            role,
            per_connection,
            current: Mutex::new(None),
            opened: Default::default(),
        }
    }

    fn session(&self, uri: &AmqpUri, run_id: &str) -> Result<Arc<Session>, DriverError> {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((link, used)) = current.as_mut() {
            if *used < self.per_connection && link.is_open() {
                *used += 1;
                return Ok(link.clone());
            }
        }
        let index = self
            .opened
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let session = Arc::new(Session::open(
            uri,
            &format!("brokerbench-{run_id}-{}-{index}", self.role),
        )?);
        *current = (self.per_connection > 1).then(|| (session.clone(), 1));
        Ok(session)
    }

    /// Lets go of the connection being filled, so that it closes with its last channel.
    fn release(&self) {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }
}

#[cfg(test)]
mod tests;
