//! One librdkafka consumer that reads every topic of the run for one member of one
//! subscription (`consumer_clients: shared`), and hands each topic's messages to the consumer
//! task of that topic. A run with 100 topics then has one consumer client per member instead
//! of 100: its threads, connections and fetch requests do not grow with the topics.
//!
//! Messages are stamped when the client hands them over, so end-to-end latency still ends at
//! arrival, not when the task's thread wakes; each task keeps its own recorder and ledger.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::Message;

use brokerbench_driver::{Clock, Consumer, Delivery};

use crate::error_kind;
use crate::mailbox::Mailbox;

/// How long the hub waits for a message before it looks at its stop flag again.
const POLL_WAIT: Duration = Duration::from_millis(100);
/// How often the hub reads its assignment.
const ASSIGNMENT_EVERY: Duration = Duration::from_millis(100);
/// Payload bytes an inbox holds at most before the hub waits for its task: a task slower
/// than its messages then leaves them in the client, where their wait counts in end-to-end
/// latency (they are stamped when handed over), instead of in memory without a bound.
const INBOX_CAP_BYTES: usize = 4 << 20;

/// What has arrived for one topic and not been taken by its task yet: payloads back to
/// back in one buffer, reused from poll to poll.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    /// (partition, arrival ns, end of the payload in `bytes`)
    messages: Vec<(u32, u64, usize)>,
    error: Option<String>,
}

impl crate::mailbox::Batch for Batch {
    fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.error.is_none()
    }
}

/// Where one topic's messages wait for its task.
type Inbox = Mailbox<Batch>;

/// The shared client of one (subscription, member) and its polling thread.
pub(crate) struct Hub {
    inboxes: Vec<Inbox>,
    /// Partitions of each topic assigned to this member.
    assigned: Vec<AtomicUsize>,
    stop: AtomicBool,
    /// Tasks that still hold the hub; the last one stops it.
    users: AtomicUsize,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Hub {
    /// Starts polling `consumer`, already subscribed to `topics` (in topic-index order).
    pub(crate) fn start(consumer: BaseConsumer, topics: &[String]) -> std::io::Result<Arc<Hub>> {
        let hub = Arc::new(Hub {
            inboxes: topics.iter().map(|_| Inbox::default()).collect(),
            assigned: topics.iter().map(|_| AtomicUsize::new(0)).collect(),
            stop: AtomicBool::new(false),
            users: AtomicUsize::new(0),
            thread: Mutex::new(None),
        });
        let index: HashMap<String, usize> = topics
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i))
            .collect();
        let polling = hub.clone();
        let thread = std::thread::Builder::new()
            .name("consumer-hub".into())
            .spawn(move || polling.serve(consumer, index))?;
        *hub.thread.lock().unwrap_or_else(|e| e.into_inner()) = Some(thread);
        Ok(hub)
    }

    /// A consumer task's view of the hub: the messages of topic `topic`.
    pub(crate) fn consumer(self: &Arc<Hub>, topic: u32) -> HubConsumer {
        self.users.fetch_add(1, Ordering::Relaxed);
        HubConsumer {
            hub: self.clone(),
            topic: topic as usize,
            taken: Batch::default(),
        }
    }

    fn serve(&self, consumer: BaseConsumer, index: HashMap<String, usize>) {
        let clock = Clock::process();
        let mut assignment_read: Option<Instant> = None;
        while !self.stop.load(Ordering::Relaxed) {
            let mut wait = POLL_WAIT;
            // Up to a batch of messages per round, then a look at the stop flag.
            for _ in 0..10_000 {
                match consumer.poll(wait) {
                    None => break,
                    Some(Ok(message)) => {
                        let Some(&topic) = index.get(message.topic()) else {
                            continue;
                        };
                        let payload = message.payload().unwrap_or_default();
                        self.hand_over(topic, message.partition() as u32, payload, clock.now_ns());
                    }
                    Some(Err(e)) => {
                        // An error of the client is the member's, not a topic's: it is counted
                        // once, by the task of the first topic.
                        self.inboxes[0].put(|batch| {
                            batch.error.get_or_insert_with(|| error_kind(&e));
                        });
                        break;
                    }
                }
                wait = Duration::ZERO;
            }
            if assignment_read.is_none_or(|t| t.elapsed() > ASSIGNMENT_EVERY) {
                let mut counts = vec![0usize; self.assigned.len()];
                if let Ok(list) = consumer.assignment() {
                    for element in list.elements() {
                        if let Some(&topic) = index.get(element.topic()) {
                            counts[topic] += 1;
                        }
                    }
                }
                for (count, assigned) in counts.into_iter().zip(&self.assigned) {
                    assigned.store(count, Ordering::Relaxed);
                }
                assignment_read = Some(Instant::now());
            }
        }
        // Leaves the group here, on the hub's thread.
        drop(consumer);
    }

    fn hand_over(&self, topic: usize, partition: u32, payload: &[u8], arrived_ns: u64) {
        let full = |batch: &Batch| batch.bytes.len() >= INBOX_CAP_BYTES;
        self.inboxes[topic].put_bounded(full, &self.stop, POLL_WAIT, |batch| {
            batch.bytes.extend_from_slice(payload);
            let end = batch.bytes.len();
            batch.messages.push((partition, arrived_ns, end));
        });
    }
}

/// One consumer task's share of a hub.
pub(crate) struct HubConsumer {
    hub: Arc<Hub>,
    topic: usize,
    /// The batch last taken from the inbox, kept for its buffers.
    taken: Batch,
}

impl Consumer for HubConsumer {
    fn poll(
        &mut self,
        timeout: Duration,
        deliveries: &mut dyn FnMut(Delivery<'_>),
    ) -> Result<(), String> {
        self.hub.inboxes[self.topic].take(timeout, &mut self.taken);
        let Batch {
            bytes,
            messages,
            error,
        } = &mut self.taken;
        let mut start = 0;
        for (partition, arrived_ns, end) in messages.drain(..) {
            deliveries(Delivery {
                stream: partition,
                payload: &bytes[start..end],
                received_ns: Some(arrived_ns),
            });
            start = end;
        }
        bytes.clear();
        error.take().map_or(Ok(()), Err)
    }

    fn assigned(&self) -> usize {
        self.hub.assigned[self.topic].load(Ordering::Relaxed)
    }
}

impl Drop for HubConsumer {
    fn drop(&mut self) {
        if self.hub.users.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.hub.stop.store(true, Ordering::Relaxed);
            let thread = self
                .hub
                .thread
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take();
            if let Some(thread) = thread {
                let _ = thread.join();
            }
        }
    }
}
