//! One workload from many processes: which producers and consumers a shard runs, the gate
//! the shards pass together, and the ledger a shard writes for `brokerbench merge`.
//!
//! Producer `id` (topic × producers_per_topic + n) goes to shard `id % N`; consumer slot `s`
//! (topics × subscriptions × members, in that order) to shard `s % N`. Producer ids stay
//! global, so a message carries the same producer id whichever shard sent it, and a ledger
//! joined across shards counts it once.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use serde::{Deserialize, Serialize};

use crate::ledger::{
    ConsumerLedger, ProducerLedger, SequenceSet, SubscriptionLedger, UnreadPlaces,
};

/// Shard `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Parses `I/N` (0 ≤ I < N).
    pub fn parse(text: &str) -> Result<Shard, String> {
        let usage = "give it as I/N: shard I of N, counted from 0 (e.g. --shard 0/4)";
        let (i, n) = text
            .split_once('/')
            .ok_or_else(|| format!("'{text}' is not a shard; {usage}"))?;
        let parse = |s: &str| s.trim().parse::<u32>().ok();
        match (parse(i), parse(n)) {
            (Some(index), Some(count)) if count > 0 && index < count => Ok(Shard { index, count }),
            (Some(index), Some(count)) if count > 0 => Err(format!(
                "shard {index} of {count} does not exist: shards are counted from 0 to {}; {usage}",
                count - 1
            )),
            _ => Err(format!("'{text}' is not a shard; {usage}")),
        }
    }

    /// Whether item `n` (a producer id or a consumer slot number) is this shard's.
    pub fn takes(&self, n: usize) -> bool {
        n % self.count as usize == self.index as usize
    }

    /// How many of `total` items are this shard's.
    pub fn share_of(&self, total: usize) -> usize {
        (0..total).filter(|&n| self.takes(n)).count()
    }

    /// (producers, consumers) of this shard for a workload whose driver makes
    /// `subscriptions` subscriptions per topic.
    pub fn share(
        &self,
        workload: &brokerbench_model::Workload,
        subscriptions: u32,
    ) -> (usize, usize) {
        (
            self.share_of(workload.producer_count() as usize),
            self.share_of(consumer_slots(workload, subscriptions)),
        )
    }

    pub fn is_coordinator(&self) -> bool {
        self.index == 0
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Consumer slots of a workload whose driver makes `subscriptions` subscriptions per topic
/// (its own setting, e.g. RabbitMQ's queues_per_topic, may ask for more than the workload).
pub fn consumer_slots(workload: &brokerbench_model::Workload, subscriptions: u32) -> usize {
    workload.topics as usize
        * subscriptions.max(workload.subscriptions_per_topic).max(1) as usize
        * workload.consumers_per_topic as usize
}

/// Assigned partitions or queues per consumer, by (topic, subscription).
pub type Assignments = BTreeMap<(u32, u32), Vec<usize>>;

/// How shards meet: before warm-up (every shard's consumers ready, one start time), during
/// the drain (every shard's consumers caught up with every shard's producers) and at the end
/// (every shard finished, so that one of them may remove what the run created).
pub trait Gate: Send {
    /// Returns the common start, ns since the UNIX epoch on this process's clock, once every
    /// shard has arrived and `ready(topic, assigned)` holds for every subscription's
    /// consumers of all shards. `local` gives this shard's consumers' assignments now.
    fn start(
        &mut self,
        local: &mut dyn FnMut() -> Assignments,
        ready: &dyn Fn(u32, &[usize]) -> bool,
        stop: &AtomicBool,
    ) -> Result<u64, String>;

    /// This shard's progress in the drain: whether its producers are done, and per topic
    /// the messages its consumers are to receive for what its producers had acknowledged
    /// (acknowledged × subscriptions) and what they received (distinct). Returns
    /// whether every shard's consumers have received what every shard's producers had
    /// acknowledged. Called often; it must not block.
    fn drained(&mut self, producers_done: bool, acknowledged: &[u64], received: &[u64]) -> bool;

    /// This shard's tasks have ended. Returns once every shard's have, or at a timeout.
    fn finish(&mut self);
}

/// A set of sequence numbers in ledger.json: sequences below `full × 64` are all there;
/// `words` is base64 of the 64-bit words after them, little-endian, bit i of word k standing
/// for sequence (full + k) × 64 + i. One bit per sequence where a set has gaps (a consumer
/// sharing partitions or a queue with others), a few bytes where it has none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EncodedSet {
    pub full: u64,
    pub words: String,
}

impl EncodedSet {
    pub fn of(set: &SequenceSet) -> EncodedSet {
        use base64::Engine;
        let (full, words) = set.parts();
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        EncodedSet {
            full,
            words: base64::engine::general_purpose::STANDARD.encode(bytes),
        }
    }

    pub fn decode(&self) -> Result<SequenceSet, String> {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.words)
            .map_err(|e| format!("a sequence set's words are not base64: {e}"))?;
        if bytes.len() % 8 != 0 {
            return Err("a sequence set's words are not whole 64-bit words".into());
        }
        let words = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        Ok(SequenceSet::from_parts(self.full, words))
    }
}

/// What `brokerbench merge` needs of one shard's ledger (ledger.json).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerFile {
    pub producers: Vec<ProducerEntry>,
    pub consumers: Vec<ConsumerEntry>,
    /// Messages read that no producer of the run sent.
    pub foreign: u64,
    /// The driver's reason the broker may drop messages by policy, if it may: what is lost
    /// is then dropped by the broker.
    #[serde(default)]
    pub drop_policy: Option<String>,
    /// The shard's drain ended at its timeout with consumers still receiving this many in its
    /// last seconds (0: they had stopped).
    #[serde(default)]
    pub drain_cut_off: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProducerEntry {
    /// Global producer id (the one in each message's envelope).
    pub id: u32,
    pub topic: u32,
    pub acknowledged: EncodedSet,
    /// Sent and neither acknowledged nor failed when the producer gave up.
    pub unacknowledged: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConsumerEntry {
    pub topic: u32,
    pub subscription: u32,
    pub member: u32,
    /// Received sequences by producer id (only producers it received from).
    pub received: BTreeMap<u32, EncodedSet>,
    /// Repeats this consumer saw itself.
    pub duplicated: u64,
    /// Sequences older than one already received from the same producer on the same
    /// partition or queue.
    pub out_of_order: u64,
    /// What the broker held beyond the consumer's positions when the drain ended.
    #[serde(default)]
    pub unread: Option<UnreadPlaces>,
}

impl LedgerFile {
    pub(crate) fn producer(id: u32, ledger: &ProducerLedger) -> ProducerEntry {
        ProducerEntry {
            id,
            topic: ledger.topic,
            acknowledged: EncodedSet::of(&ledger.acknowledged),
            unacknowledged: ledger.unacknowledged,
        }
    }

    pub(crate) fn consumer(
        (topic, subscription, member): (u32, u32, u32),
        ledger: &ConsumerLedger,
    ) -> ConsumerEntry {
        ConsumerEntry {
            topic,
            subscription,
            member,
            received: ledger
                .received
                .iter()
                .enumerate()
                .filter(|(_, set)| !set.is_empty())
                .map(|(p, set)| (p as u32, EncodedSet::of(set)))
                .collect(),
            duplicated: ledger.duplicated,
            out_of_order: ledger.out_of_order,
            unread: ledger.unread.clone(),
        }
    }

    /// The ledgers of many shards as one run's: producers by id (a producer missing from
    /// every file acknowledged nothing), consumers grouped by subscription.
    pub fn join(
        files: &[LedgerFile],
    ) -> Result<(Vec<ProducerLedger>, Vec<SubscriptionLedger>, u64), String> {
        let count = files
            .iter()
            .flat_map(|f| f.producers.iter().map(|p| p.id as usize + 1))
            .max()
            .unwrap_or(0);
        let mut producers = vec![ProducerLedger::default(); count];
        let mut subscriptions: BTreeMap<(u32, u32), SubscriptionLedger> = BTreeMap::new();
        let mut foreign = 0;
        for file in files {
            foreign += file.foreign;
            for p in &file.producers {
                producers[p.id as usize] = ProducerLedger {
                    topic: p.topic,
                    acknowledged: p.acknowledged.decode()?,
                    unacknowledged: p.unacknowledged,
                    marks: Default::default(),
                };
            }
            for c in &file.consumers {
                let mut ledger = ConsumerLedger::default();
                ledger.duplicated = c.duplicated;
                ledger.out_of_order = c.out_of_order;
                ledger.unread = c.unread.clone();
                for (&producer, set) in &c.received {
                    let producer = producer as usize;
                    if ledger.received.len() <= producer {
                        ledger
                            .received
                            .resize_with(producer + 1, SequenceSet::default);
                    }
                    ledger.received[producer] = set.decode()?;
                }
                SubscriptionLedger::add_member(
                    &mut subscriptions,
                    (c.topic, c.subscription),
                    ledger,
                );
            }
        }
        // Every producer id is in some file when every shard's is given (merge checks).
        Ok((producers, subscriptions.into_values().collect(), foreign))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::reconcile;
    use brokerbench_driver::Envelope;

    #[test]
    fn shards_parse_and_split_every_item_once() {
        assert_eq!(Shard::parse("1/4").unwrap(), Shard { index: 1, count: 4 });
        for bad in ["4/4", "1", "a/2", "0/0", "-1/2"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        assert!(Shard::parse("4/4").unwrap_err().contains("from 0 to 3"));
        // 10 producers over 4 shards: 3, 3, 2, 2; each exactly once.
        let shards: Vec<Shard> = (0..4).map(|index| Shard { index, count: 4 }).collect();
        assert_eq!(
            shards.iter().map(|s| s.share_of(10)).collect::<Vec<_>>(),
            [3, 3, 2, 2]
        );
        for n in 0..10 {
            assert_eq!(shards.iter().filter(|s| s.takes(n)).count(), 1);
        }
    }

    #[test]
    fn sets_survive_their_encoding() {
        let mut set = SequenceSet::default();
        for q in (0..1000).chain(1001..1003).chain([5000, 5001, 7000]) {
            set.insert(q);
        }
        let encoded = EncodedSet::of(&set);
        assert_eq!(encoded.full, 15, "0..960 as a count");
        assert_eq!(encoded.decode().unwrap(), set);
        // In order: a count and nothing more, however long the run.
        let mut long = SequenceSet::default();
        for q in 0..1_000_000 {
            long.insert(q);
        }
        assert!(EncodedSet::of(&long).words.len() <= 12);
        assert_eq!(EncodedSet::of(&long).decode().unwrap(), long);
        assert!(EncodedSet {
            full: 0,
            words: "AAA".into()
        }
        .decode()
        .is_err());
    }

    fn env(producer: u32, sequence: u64) -> Envelope {
        Envelope {
            producer,
            sequence,
            intended_ns: 0,
        }
    }

    #[test]
    fn a_message_sent_on_one_shard_and_received_on_another_counts_once() {
        // Producer 0 on shard 0, producer 1 on shard 1; one subscription of two members,
        // member 0 on shard 0 receiving producer 1's messages, member 1 on shard 1 receiving
        // producer 0's — and one of producer 0's twice (after a rebalance), one never.
        let acked = |topic, n: u64| {
            let mut p = ProducerLedger {
                topic,
                ..Default::default()
            };
            for q in 0..n {
                p.acknowledged.insert(q);
            }
            p
        };
        let (mut m0, mut m1) = (ConsumerLedger::default(), ConsumerLedger::default());
        for q in 0..100 {
            m0.record(1, &env(1, q), 0);
        }
        for q in 0..99 {
            m1.record(0, &env(0, q), 0);
        }
        m0.record(0, &env(0, 7), 0);
        let shard0 = LedgerFile {
            producers: vec![LedgerFile::producer(0, &acked(0, 100))],
            consumers: vec![LedgerFile::consumer((0, 0, 0), &m0)],
            foreign: 1,
            ..Default::default()
        };
        let shard1 = LedgerFile {
            producers: vec![LedgerFile::producer(1, &acked(0, 100))],
            consumers: vec![LedgerFile::consumer((0, 0, 1), &m1)],
            ..Default::default()
        };
        let text = serde_json::to_string(&shard1).unwrap();
        let shard1: LedgerFile = serde_json::from_str(&text).unwrap();
        let (producers, subscriptions, foreign) = LedgerFile::join(&[shard1, shard0]).unwrap();
        let i = reconcile(&producers, &subscriptions, foreign);
        assert_eq!(
            (
                i.lost,
                i.duplicated,
                i.out_of_order,
                i.foreign,
                i.received_unacknowledged
            ),
            (1, 1, 0, 1, 0),
            "{i:?}"
        );
    }
}
