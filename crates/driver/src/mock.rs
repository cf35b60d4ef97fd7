//! An in-memory driver for testing the engine and the reports without a broker: messages go
//! into per-subscription queues in this process. It can drop or duplicate every n-th message
//! so that the delivery ledger can be checked. Never a substitute for the real drivers.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::{
    Ack, Consumer, ConsumerSlot, Deliveries, Delivery, Driver, DriverError, Envelope,
    OutgoingMessage, Producer, ProducerSlot, SendError, Topology, Unread,
};

/// Faults the mock injects on the way to consumers.
#[derive(Debug, Clone, Copy, Default)]
pub struct MockFaults {
    /// Acknowledge but never deliver every n-th message.
    pub drop_every: Option<u64>,
    /// Deliver every n-th message twice.
    pub duplicate_every: Option<u64>,
    /// Time each send takes, to imitate a client slower than the schedule.
    pub send_delay: Option<Duration>,
    /// Publish without confirmations (like AMQP without publisher confirms).
    pub unconfirmed: bool,
    /// Declare that dropped messages are the broker's policy (like a drop-head queue limit).
    pub drops_by_policy: bool,
    /// The broker says it dropped this many messages past its limits over the run
    /// ([`Driver::broker_dropped`]), as mosquitto counts them.
    pub counts_dropped: Option<u64>,
    /// Deliver at most this many messages per consumer poll, each poll taking at least 1 ms:
    /// a consumer slower than the producers.
    pub receive_per_poll: Option<usize>,
    /// The broker's capacity: at most this many messages per second are acknowledged over
    /// all producers; the rest wait (a saturated broker, for the throughput search).
    pub capacity: Option<f64>,
    /// Stamp each acknowledgement with its send time, as a client that stamps them on
    /// arrival would ([`Producer::stamps_acknowledgements`]).
    pub stamps_acknowledgements: bool,
    /// With stamped acknowledgements: the client writes what `send` took only when polled, as
    /// brokerbench's own clients do ([`Producer::sends_in_background`] false).
    pub sends_when_polled: bool,
    /// Unacknowledged messages a producer holds before it refuses sends with backpressure
    /// (default 100,000).
    pub buffer: Option<usize>,
    /// The broker goes away (start, length), counted from `prepare`: messages in flight then
    /// fail with `connection_lost`, sends meanwhile answer [`SendError::Unavailable`], and
    /// the client reconnects when it is back.
    pub outage: Option<(Duration, Duration)>,
    /// The broker refuses every message: each acknowledgement is a failure of kind
    /// `rejected` (as a wrong setting would make it).
    pub reject_all: bool,
    /// The broker stops acknowledging (start, length), counted from `prepare`, with the
    /// connection up: sends are taken until the buffer is full, acknowledgements come after.
    pub stall: Option<(Duration, Duration)>,
    /// Deliver every n-th message after the one that follows it (to every subscription): one
    /// message out of order per n, nothing lost or duplicated.
    pub swap_every: Option<u64>,
    /// The broker is slow (start, length, delay), counted from `prepare`: a message is
    /// acknowledged only `delay` after it was sent, while sends are taken as usual.
    pub slow: Option<(Duration, Duration, Duration)>,
    /// Consumers tell, once the drain is over, how many messages wait in their queue
    /// ([`Consumer::unread`]), as a broker that reports a queue's depth would.
    pub tells_unread: bool,
    /// The broker refuses the run's topics and queues (`prepare` fails), as a broker would a
    /// setting it does not take: the run fails before it sends anything.
    pub refuse_setup: bool,
}

/// Acknowledgements granted so far against the capacity, since the first send.
#[derive(Debug, Default)]
struct Capacity {
    started: Option<std::time::Instant>,
    granted: u64,
}

type Queues = Arc<Mutex<Vec<VecDeque<Vec<u8>>>>>;

/// The in-memory driver.
#[derive(Debug, Default)]
pub struct MockDriver {
    faults: MockFaults,
    subscriptions: u32,
    queues: Queues,
    capacity: Arc<Mutex<Capacity>>,
    prepared: Option<std::time::Instant>,
    /// The most messages any producer had in flight at once.
    most_in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

impl MockDriver {
    pub fn new(faults: MockFaults, subscriptions_per_topic: u32) -> Self {
        MockDriver {
            faults,
            subscriptions: subscriptions_per_topic.max(1),
            queues: Queues::default(),
            capacity: Arc::default(),
            prepared: None,
            most_in_flight: Arc::default(),
        }
    }

    /// The most messages any of its producers had in flight at once, so far.
    pub fn most_in_flight(&self) -> usize {
        self.most_in_flight
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Driver for MockDriver {
    fn name(&self) -> &'static str {
        "mock"
    }
    fn connect(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
    fn prepare(&mut self, topology: &Topology) -> Result<(), DriverError> {
        if self.faults.refuse_setup {
            return Err(DriverError::Other(
                "the mock broker refused the run's topics (refuse_setup: true in the mock's driver file)".into(),
            ));
        }
        // The workload's subscriptions, unless the mock was made with more.
        self.subscriptions = self.subscriptions.max(topology.subscriptions_per_topic);
        let n = (topology.topics * self.subscriptions) as usize;
        *self.queues.lock().expect("queues") = vec![VecDeque::new(); n];
        self.prepared = Some(std::time::Instant::now());
        Ok(())
    }
    fn subscriptions_per_topic(&self) -> u32 {
        self.subscriptions
    }
    fn producer(&self, slot: ProducerSlot) -> Result<Box<dyn Producer>, DriverError> {
        let ProducerSlot { topic, .. } = slot;
        Ok(Box::new(MockProducer {
            topic,
            subscriptions: self.subscriptions,
            faults: self.faults,
            queues: self.queues.clone(),
            capacity: self.capacity.clone(),
            most_in_flight: self.most_in_flight.clone(),
            pending: VecDeque::new(),
            count: 0,
            outage: self.faults.outage.map(|(start, length)| {
                let prepared = self.prepared.unwrap_or_else(std::time::Instant::now);
                (prepared + start, prepared + start + length)
            }),
            lost_at: None,
            stall: self.faults.stall.map(|(start, length)| {
                let prepared = self.prepared.unwrap_or_else(std::time::Instant::now);
                (prepared + start, prepared + start + length)
            }),
            slow: self.faults.slow.map(|(start, length, delay)| {
                let prepared = self.prepared.unwrap_or_else(std::time::Instant::now);
                (prepared + start, prepared + start + length, delay)
            }),
            held: None,
        }))
    }
    fn consumer(&self, slot: ConsumerSlot) -> Result<Box<dyn Consumer>, DriverError> {
        Ok(Box::new(MockConsumer {
            queue: (slot.topic * self.subscriptions + slot.subscription) as usize,
            queues: self.queues.clone(),
            per_poll: self.faults.receive_per_poll.unwrap_or(10_000),
            tells_unread: self.faults.tells_unread,
        }))
    }
    fn broker_drop_policy(&self) -> Option<String> {
        self.faults
            .drops_by_policy
            .then(|| "mock drop_every".to_string())
    }
    fn broker_dropped(&self) -> Option<(u64, String)> {
        let count = self.faults.counts_dropped?;
        Some((count, "the mock's queue limit".to_string()))
    }
    fn failure_settings(&self) -> &'static [(&'static str, &'static str)] {
        &[("rejected", "the mock's faults (reject_all)")]
    }
    fn cleanup(&mut self) -> Result<(), DriverError> {
        Ok(())
    }
}

struct MockProducer {
    topic: u32,
    subscriptions: u32,
    faults: MockFaults,
    queues: Queues,
    capacity: Arc<Mutex<Capacity>>,
    most_in_flight: Arc<std::sync::atomic::AtomicUsize>,
    pending: VecDeque<(Vec<u8>, u64)>,
    count: u64,
    /// When the broker is gone, from and to.
    outage: Option<(std::time::Instant, std::time::Instant)>,
    /// When this client found the broker gone (ns since the UNIX epoch), until it reconnects.
    lost_at: Option<u64>,
    /// When the broker acknowledges nothing, from and to.
    stall: Option<(std::time::Instant, std::time::Instant)>,
    /// When the broker is slow (from, to), and how long after its send a message is
    /// acknowledged meanwhile.
    slow: Option<(std::time::Instant, std::time::Instant, Duration)>,
    /// A message held back to be delivered after the next one (`swap_every`).
    held: Option<Vec<u8>>,
}

impl MockProducer {
    /// Whether the broker is gone now; finding it gone fails what is in flight.
    fn check_outage(&mut self, acks: Option<&mut dyn FnMut(Ack)>) -> bool {
        let Some((from, to)) = self.outage else {
            return false;
        };
        let now = std::time::Instant::now();
        if now < from {
            return false;
        }
        if now >= to {
            self.lost_at = None;
            self.outage = None;
            return false;
        }
        if self.lost_at.is_none() {
            self.lost_at = Some(crate::Clock::process().now_ns());
        }
        if let Some(acks) = acks {
            for (payload, sent_ns) in self.pending.drain(..) {
                acks(Ack {
                    envelope: Envelope::read(&payload).expect("the engine writes envelopes"),
                    sent_ns,
                    bytes: payload.len() as u32,
                    acknowledged_ns: None,
                    result: Err("connection_lost".into()),
                });
            }
        }
        true
    }
    /// How many pending messages the capacity lets through now.
    fn allowance(&self) -> usize {
        let Some(per_second) = self.faults.capacity else {
            return usize::MAX;
        };
        let mut c = self.capacity.lock().expect("capacity");
        let started = *c.started.get_or_insert_with(std::time::Instant::now);
        let due = (started.elapsed().as_secs_f64() * per_second) as u64;
        let n = due.saturating_sub(c.granted).min(self.pending.len() as u64);
        c.granted += n;
        n as usize
    }

    /// Whether the broker acknowledges nothing now.
    fn stalled(&self) -> bool {
        self.stall.is_some_and(|(from, to)| {
            let now = std::time::Instant::now();
            now >= from && now < to
        })
    }

    /// While the broker is slow, messages sent after this time (ns since the UNIX epoch) are
    /// not acknowledged yet; otherwise every message is ripe.
    fn ripe_before_ns(&self) -> u64 {
        let now = std::time::Instant::now();
        match self.slow {
            Some((from, to, delay)) if now >= from && now < to => crate::Clock::process()
                .now_ns()
                .saturating_sub(delay.as_nanos() as u64),
            _ => u64::MAX,
        }
    }

    /// Puts `copies` of a message into the queue of each subscription of its topic.
    fn deliver(&self, queues: &mut [VecDeque<Vec<u8>>], payload: &[u8], copies: usize) {
        for s in 0..self.subscriptions {
            for _ in 0..copies {
                queues[(self.topic * self.subscriptions + s) as usize].push_back(payload.to_vec());
            }
        }
    }

    /// The broker's answer for a message: stamped with its send time when the client stamps
    /// acknowledgements, a failure when the broker rejects everything.
    fn ack(&self, payload: &[u8], sent_ns: u64) -> Ack {
        Ack {
            envelope: Envelope::read(payload).expect("the engine writes envelopes"),
            sent_ns,
            bytes: payload.len() as u32,
            acknowledged_ns: self.faults.stamps_acknowledgements.then_some(sent_ns),
            result: if self.faults.reject_all {
                Err("rejected".into())
            } else {
                Ok(())
            },
        }
    }
}

/// What the faults make of one message on its way to the consumers.
struct Fate {
    /// Acknowledged but never delivered (`drop_every`).
    dropped: bool,
    /// How many times it is delivered (2 with `duplicate_every`).
    copies: usize,
    /// Delivered after the message that follows it (`swap_every`).
    swapped: bool,
}

impl Fate {
    /// The fate of the producer's `count`-th message.
    fn of(faults: &MockFaults, count: u64) -> Fate {
        let dropped = faults.drop_every.is_some_and(|n| count.is_multiple_of(n));
        let copies = if faults
            .duplicate_every
            .is_some_and(|n| count.is_multiple_of(n))
        {
            2
        } else {
            1
        };
        let swapped = faults.swap_every.is_some_and(|n| count.is_multiple_of(n));
        Fate {
            dropped,
            copies,
            swapped,
        }
    }
}

impl Producer for MockProducer {
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError> {
        if self.lost_at.is_some() || (self.pending.is_empty() && self.check_outage(None)) {
            return Err(SendError::Unavailable("connection_refused".into()));
        }
        if self.pending.len() >= self.faults.buffer.unwrap_or(100_000) {
            return Err(SendError::Backpressure);
        }
        if let Some(delay) = self.faults.send_delay {
            std::thread::sleep(delay);
        }
        self.pending
            .push_back((message.payload.to_vec(), message.sent_ns));
        self.most_in_flight
            .fetch_max(self.pending.len(), std::sync::atomic::Ordering::Relaxed);
        if self.faults.unconfirmed {
            // Nothing to wait for: the message goes to the broker now, not at a later poll
            // (after the last send, with nothing in flight, there may be none).
            self.poll(Duration::ZERO, &mut |_| {});
        }
        Ok(())
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        if self.stalled() || self.check_outage(Some(acks)) || self.pending.is_empty() {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            return;
        }
        let allowed = self.allowance();
        if allowed == 0 {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            return;
        }
        let ripe_before_ns = self.ripe_before_ns();
        let mut queues = self.queues.lock().expect("queues");
        for _ in 0..allowed {
            if self
                .pending
                .front()
                .is_some_and(|(_, sent_ns)| *sent_ns > ripe_before_ns)
            {
                break;
            }
            let Some((payload, sent_ns)) = self.pending.pop_front() else {
                break;
            };
            self.count += 1;
            let fate = Fate::of(&self.faults, self.count);
            if fate.swapped && self.held.is_none() {
                self.held = Some(payload.clone());
            } else if !fate.dropped {
                self.deliver(&mut queues, &payload, fate.copies);
                if let Some(held) = self.held.take() {
                    self.deliver(&mut queues, &held, 1);
                }
            }
            if !self.faults.unconfirmed {
                acks(self.ack(&payload, sent_ns));
            }
        }
    }

    fn in_flight(&self) -> usize {
        if self.faults.unconfirmed {
            0
        } else {
            self.pending.len()
        }
    }

    fn confirms(&self) -> bool {
        !self.faults.unconfirmed
    }

    fn stamps_acknowledgements(&self) -> bool {
        self.faults.stamps_acknowledgements
    }

    /// With stamped acknowledgements the mock stands for a Kafka producer, unless it stands for
    /// one of the own clients (`sends_when_polled`).
    fn sends_in_background(&self) -> bool {
        self.faults.stamps_acknowledgements && !self.faults.sends_when_polled
    }

    fn disconnected_since(&self) -> Option<u64> {
        self.lost_at
    }
}

struct MockConsumer {
    queue: usize,
    queues: Queues,
    /// Messages delivered per poll at most.
    per_poll: usize,
    tells_unread: bool,
}

impl Consumer for MockConsumer {
    fn poll(&mut self, timeout: Duration, deliveries: Deliveries<'_>) -> Result<(), String> {
        let batch: Vec<Vec<u8>> = {
            let mut queues = self.queues.lock().expect("queues");
            let q = &mut queues[self.queue];
            let n = q.len().min(self.per_poll);
            q.drain(..n).collect()
        };
        if batch.is_empty() || self.per_poll < 10_000 {
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
        }
        for payload in &batch {
            deliveries(Delivery {
                stream: 0,
                payload,
                received_ns: None,
                slot: 0,
            });
        }
        Ok(())
    }

    fn assigned(&self, _slot: usize) -> usize {
        1
    }

    fn unread(&mut self) -> Option<Vec<Unread>> {
        let waiting = self.queues.lock().expect("queues")[self.queue].len();
        self.tells_unread.then(|| {
            vec![Unread {
                slot: 0,
                place: format!("queue {}", self.queue),
                messages: waiting as u64,
                evidence: "the mock broker's queue length",
            }]
        })
    }
}

/// The driver-file schema of the mock, for tests that load workloads with it: `driver: mock`
/// and nothing else.
pub struct MockSchema;

impl brokerbench_model::DriverSchema for MockSchema {
    fn name(&self) -> &'static str {
        "mock"
    }
    fn fields(&self) -> &'static [&'static str] {
        &["driver"]
    }
    fn builtin_driver(&self) -> &'static str {
        "driver: mock\n"
    }
    fn check(
        &self,
        file: &str,
        map: &brokerbench_model::yaml::Value,
    ) -> Result<serde_json::Value, brokerbench_model::SpecError> {
        match map.as_object().and_then(|m| m.keys().next()) {
            None => Ok(serde_json::json!({"driver": "mock"})),
            Some(key) => Err(brokerbench_model::SpecError::Field {
                file: file.to_string(),
                field: format!("{key:?}"),
                message: "the mock driver has no settings".into(),
            }),
        }
    }
}
