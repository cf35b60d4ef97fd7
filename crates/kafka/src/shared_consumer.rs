//! One librdkafka consumer serving the consumer slots of one or more topics from one task:
//! a topic's own consumer (one slot), or one that reads every topic of the run for one member
//! of one subscription (`consumer_clients: shared`). A run with 100 topics then has one consumer client and one consumer thread
//! per member instead of 100 of each: threads, connections, fetch requests and wake-ups do not
//! grow with the topics.
//!
//! Each message is handed to the engine as the client returns it, marked with its topic's
//! slot, so end-to-end latency ends when the client gives the message over, as with a
//! consumer of one topic, and each slot keeps its own recorder and ledger.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer as _, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::{ClientContext, Offset};

use brokerbench_driver::{Consumer, Deliveries, Delivery, Unread};

use crate::error_kinds::error_kind;
use crate::seen_offsets::SeenOffsets;

/// How often the consumer reads its assignment.
const ASSIGNMENT_EVERY: Duration = Duration::from_millis(100);

/// The longest the end-of-run count of unread messages may ask the broker for watermarks.
const UNREAD_WITHIN: Duration = Duration::from_secs(5);

/// What `unread` reads from the broker.
const UNREAD_EVIDENCE: &str = "Kafka: each partition's high watermark less the offset after the last message brokerbench received from it, or the consumer's position where it received none";

/// A consumer client's context: it notes when the group took partitions away from it (a
/// rebalance, which can deliver messages again and out of their order).
pub(crate) struct Rebalances(pub(crate) std::sync::Arc<std::sync::Mutex<Vec<u64>>>);

impl ClientContext for Rebalances {}

impl ConsumerContext for Rebalances {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(partitions) = rebalance {
            if partitions.count() > 0 {
                if let Ok(mut revoked) = self.0.lock() {
                    revoked.push(brokerbench_driver::Clock::process().now_ns());
                }
            }
        }
    }
}

/// A consumer of many topics, one slot per topic.
pub(crate) struct SharedConsumer {
    consumer: BaseConsumer<Rebalances>,
    /// Topic name → the slot (index into this consumer's slots) that receives it.
    slots: HashMap<String, usize>,
    /// Slot → its topic's name.
    topics: Vec<String>,
    /// Where brokerbench got to in each partition it received from.
    seen: SeenOffsets,
    /// Partitions of each slot's topic assigned to this member.
    assigned: Vec<usize>,
    assignment_read: Option<Instant>,
    /// Backlog mode: fetching is paused for every partition assigned, also those assigned
    /// after the pause (a rebalance).
    paused: bool,
    start: Start,
}

/// Where a consumer starts, and how to ask the broker what each partition holds.
pub(crate) struct Start {
    /// Whether the consumer starts at each partition's start (auto.offset.reset earliest):
    /// then a partition it never fetched from holds everything stored there for it.
    pub(crate) from_start: bool,
    /// A client of its own asks for the watermarks: the consumer's connection may hold a
    /// fetch the broker answers only after fetch.wait.max.ms, and requests on one
    /// connection are answered in order.
    pub(crate) watermarks: rdkafka::ClientConfig,
}

impl SharedConsumer {
    /// `consumer`, already subscribed to `topics`; topic `topics[i]` is served as slot `i`.
    pub(crate) fn new(
        consumer: BaseConsumer<Rebalances>,
        topics: &[&str],
        start: Start,
    ) -> SharedConsumer {
        SharedConsumer {
            consumer,
            slots: topics
                .iter()
                .enumerate()
                .map(|(i, t)| (t.to_string(), i))
                .collect(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            seen: SeenOffsets::default(),
            assigned: vec![0; topics.len()],
            assignment_read: None,
            paused: false,
            start,
        }
    }

    fn read_assignment(&mut self) {
        self.assigned.iter_mut().for_each(|a| *a = 0);
        if let Ok(list) = self.consumer.assignment() {
            for element in list.elements() {
                if let Some(&slot) = self.slots.get(element.topic()) {
                    self.assigned[slot] += 1;
                }
            }
            if self.paused && list.count() > 0 {
                // Pausing a paused partition changes nothing; a newly assigned one stops.
                let _ = self.consumer.pause(&list);
            }
        }
        self.assignment_read = Some(Instant::now());
    }

    /// Messages stored beyond `next` in one partition: its high watermark (the offset the
    /// next message written gets) less `next`, the offset after the last message received
    /// there, or else the consumer's position (the offset of the next message it would fetch).
    /// A partition with neither: a consumer that starts at the start is behind all it holds
    /// (high less low watermark), one that starts at the end cannot tell (None). None too when
    /// the broker does not answer in time.
    fn unread_in(
        &self,
        watermarks: &BaseConsumer,
        (topic, partition): (&str, i32),
        next: Option<i64>,
        deadline: Instant,
    ) -> Option<u64> {
        let left = deadline.checked_duration_since(Instant::now())?;
        let (low, high) = watermarks.fetch_watermarks(topic, partition, left).ok()?;
        let next = match next {
            Some(next) => next,
            None if self.start.from_start => low,
            None => return None,
        };
        Some(high.saturating_sub(next).max(0) as u64)
    }

    /// Every partition this consumer received from or holds now, with the offset after the
    /// last message received there, or else its position. A member whose partitions the group
    /// has just taken away holds none, but still knows where it got to in them.
    fn places(&self) -> Option<BTreeMap<(usize, i32), Option<i64>>> {
        let mut places: BTreeMap<(usize, i32), Option<i64>> = self
            .seen
            .places()
            .map(|(place, next)| (place, Some(next)))
            .collect();
        for element in self.consumer.position().ok()?.elements() {
            if let Some(&slot) = self.slots.get(element.topic()) {
                let position = match element.offset() {
                    Offset::Offset(position) => Some(position),
                    _ => None,
                };
                places
                    .entry((slot, element.partition()))
                    .or_insert(position);
            }
        }
        Some(places)
    }
}

impl Consumer for SharedConsumer {
    fn poll(&mut self, timeout: Duration, deliveries: Deliveries<'_>) -> Result<(), String> {
        let mut first_error = None;
        let mut wait = timeout;
        // Up to a batch of messages per call, then the engine's bookkeeping.
        for _ in 0..10_000 {
            match self.consumer.poll(wait) {
                None => break,
                Some(Ok(message)) => {
                    let slot = if self.slots.len() == 1 {
                        0
                    } else {
                        match self.slots.get(message.topic()) {
                            Some(&slot) => slot,
                            None => continue,
                        }
                    };
                    self.seen.note(slot, message.partition(), message.offset());
                    deliveries(Delivery {
                        stream: message.partition() as u32,
                        payload: message.payload().unwrap_or_default(),
                        received_ns: None,
                        slot,
                    });
                }
                Some(Err(e)) => {
                    first_error.get_or_insert_with(|| error_kind(&e));
                    break;
                }
            }
            wait = Duration::ZERO;
        }
        if self
            .assignment_read
            .is_none_or(|t| t.elapsed() > ASSIGNMENT_EVERY)
        {
            self.read_assignment();
        }
        first_error.map_or(Ok(()), Err)
    }

    fn assigned(&self, slot: usize) -> usize {
        self.assigned.get(slot).copied().unwrap_or(0)
    }

    fn unread(&mut self) -> Option<Vec<Unread>> {
        let deadline = Instant::now() + UNREAD_WITHIN;
        let places = self.places()?;
        let watermarks: BaseConsumer = self.start.watermarks.create().ok()?;
        let mut unread = Vec::new();
        for ((slot, partition), next) in places {
            let topic = self.topics.get(slot)?.as_str();
            unread.push(Unread {
                slot,
                place: format!("{topic}/{partition}"),
                messages: self.unread_in(&watermarks, (topic, partition), next, deadline)?,
                evidence: UNREAD_EVIDENCE,
            });
        }
        Some(unread)
    }

    /// librdkafka's pause: fetching stops, what was prefetched is dropped from the client's
    /// queue and fetched again from the next position when resumed. The consumer is still
    /// polled, so it stays in its group however long the backlog takes to build.
    fn pause(&mut self, paused: bool) -> bool {
        self.paused = paused;
        if let Ok(list) = self.consumer.assignment() {
            let _ = if paused {
                self.consumer.pause(&list)
            } else {
                self.consumer.resume(&list)
            };
        }
        true
    }
}
