//! The delivery ledger: which sequence numbers each producer had acknowledged and each
//! subscription received, to count lost, duplicated and out-of-order messages.

use std::collections::HashMap;

use brokerbench_driver::Envelope;
use brokerbench_model::faults::IntegrityBySecond;
use brokerbench_model::Integrity;

mod seconds;
pub use seconds::{Placer, SecondMarks};

/// A growable set of sequence numbers: one bit each, except that a run of leading words
/// whose 64 bits are all set is kept as a count. Sequences mostly arrive in order, so a set
/// holds only the words around its newest members and does not grow with the run's length
/// (one bit per message and set made a 5-minute run at 50,000 msg/s hold megabytes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SequenceSet {
    /// Leading words that are full: sequences below `full * 64` are all members.
    full: u64,
    /// Words from `full` on.
    words: std::collections::VecDeque<u64>,
}

impl SequenceSet {
    /// Adds `sequence`; returns false if it was already there.
    #[inline]
    pub fn insert(&mut self, sequence: u64) -> bool {
        let word = sequence / 64;
        if word < self.full {
            return false;
        }
        let index = (word - self.full) as usize;
        if index >= self.words.len() {
            self.words.resize(index + 1, 0);
        }
        let bit = 1u64 << (sequence % 64);
        let fresh = self.words[index] & bit == 0;
        self.words[index] |= bit;
        if index == 0 && self.words[0] == u64::MAX {
            self.compact();
        }
        fresh
    }

    /// The set as (leading full words, the words after them).
    pub fn parts(&self) -> (u64, Vec<u64>) {
        (self.full, self.words.iter().copied().collect())
    }

    /// The set of [`SequenceSet::parts`].
    pub fn from_parts(full: u64, words: Vec<u64>) -> SequenceSet {
        let mut set = SequenceSet {
            full,
            words: words.into(),
        };
        set.compact();
        set
    }

    /// Moves full leading words into the count.
    fn compact(&mut self) {
        while self.words.front() == Some(&u64::MAX) {
            self.words.pop_front();
            self.full += 1;
        }
    }

    /// Word `i` of the bitmap.
    fn word(&self, i: u64) -> u64 {
        if i < self.full {
            u64::MAX
        } else {
            self.words
                .get((i - self.full) as usize)
                .copied()
                .unwrap_or(0)
        }
    }

    /// Words up to the last one stored.
    fn word_count(&self) -> u64 {
        self.full + self.words.len() as u64
    }

    pub fn contains(&self, sequence: u64) -> bool {
        self.word(sequence / 64) & (1u64 << (sequence % 64)) != 0
    }

    pub fn len(&self) -> u64 {
        self.full * 64
            + self
                .words
                .iter()
                .map(|w| w.count_ones() as u64)
                .sum::<u64>()
    }

    pub fn is_empty(&self) -> bool {
        self.full == 0 && self.words.iter().all(|&w| w == 0)
    }

    /// Adds all of `other`; returns how many of them were already here.
    pub fn union_counting_overlap(&mut self, other: &SequenceSet) -> u64 {
        self.union_noting_overlap(other, |_| ())
    }

    /// Adds all of `other`, handing each member that was already here to `noted`; returns
    /// how many were.
    pub fn union_noting_overlap(&mut self, other: &SequenceSet, mut noted: impl FnMut(u64)) -> u64 {
        // Below both counts every bit is in both sets.
        let both_full = self.full.min(other.full);
        (0..both_full * 64).for_each(&mut noted);
        let mut overlap = both_full * 64;
        let words = self.word_count().max(other.word_count());
        let merged: std::collections::VecDeque<u64> = (both_full..words)
            .map(|i| {
                let (mine, theirs) = (self.word(i), other.word(i));
                overlap += (mine & theirs).count_ones() as u64;
                each_bit(i, mine & theirs, &mut noted);
                mine | theirs
            })
            .collect();
        self.full = both_full;
        self.words = merged;
        self.compact();
        overlap
    }

    /// How many members of `self` are not in `other`.
    pub fn count_missing_from(&self, other: &SequenceSet) -> u64 {
        self.missing_from(other, |_| ())
    }

    /// Hands each member of `self` that is not in `other` to `noted`; returns how many.
    pub fn missing_from(&self, other: &SequenceSet, mut noted: impl FnMut(u64)) -> u64 {
        (self.full.min(other.full)..self.word_count())
            .map(|i| {
                let missing = self.word(i) & !other.word(i);
                each_bit(i, missing, &mut noted);
                missing.count_ones() as u64
            })
            .sum()
    }
}

/// Hands the sequence of each bit set in `bits`, word `word` of a set, to `noted`.
#[inline]
fn each_bit(word: u64, mut bits: u64, noted: &mut impl FnMut(u64)) {
    while bits != 0 {
        noted(word * 64 + bits.trailing_zeros() as u64);
        bits &= bits - 1;
    }
}

/// What one consumer saw.
#[derive(Debug, Clone, Default)]
pub struct ConsumerLedger {
    /// Received sequence numbers per producer id.
    pub received: Vec<SequenceSet>,
    /// Highest sequence seen per (stream, producer), for the order check.
    last: HashMap<(u32, u32), u64>,
    pub duplicated: u64,
    pub out_of_order: u64,
    /// Distinct messages received.
    pub unique: u64,
    /// What the broker still held beyond this consumer's positions when the drain ended;
    /// None when the client could not tell.
    pub unread: Option<UnreadPlaces>,
    /// Duplicates and reorders by the second of the run each message was due.
    pub by_second: IntegrityBySecond,
}

/// Messages stored beyond a consumer's positions, by the place it reads (`topic/partition`,
/// a queue), and what the broker said that shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UnreadPlaces {
    pub evidence: String,
    pub places: std::collections::BTreeMap<String, u64>,
}

impl ConsumerLedger {
    /// Records one received message (the run started at `start_ns`, ns since the UNIX epoch);
    /// returns true if this consumer had not seen it before.
    #[inline]
    pub fn record(&mut self, stream: u32, envelope: &Envelope, start_ns: u64) -> bool {
        let second = || envelope.intended_ns.saturating_sub(start_ns) / 1_000_000_000;
        let producer = envelope.producer as usize;
        if producer >= self.received.len() {
            self.received
                .resize_with(producer + 1, SequenceSet::default);
        }
        let fresh = self.received[producer].insert(envelope.sequence);
        if fresh {
            self.unique += 1;
        } else {
            self.duplicated += 1;
            self.by_second.at(second()).duplicated += 1;
        }
        match self.last.entry((stream, envelope.producer)) {
            std::collections::hash_map::Entry::Occupied(mut e) => {
                if envelope.sequence < *e.get() {
                    self.out_of_order += 1;
                    self.by_second.at(second()).out_of_order += 1;
                } else {
                    e.insert(envelope.sequence);
                }
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(envelope.sequence);
            }
        }
        fresh
    }
}

/// What one producer had acknowledged, and what became of the rest.
#[derive(Debug, Clone, Default)]
pub struct ProducerLedger {
    /// Topic index the producer sent to.
    pub topic: u32,
    pub acknowledged: SequenceSet,
    /// Sent but neither acknowledged nor failed when the producer gave up.
    pub unacknowledged: u64,
    /// The second of the run each message was due.
    pub marks: SecondMarks,
}

/// One subscription's consumers (e.g. one Kafka consumer group).
#[derive(Debug, Clone, Default)]
pub struct SubscriptionLedger {
    pub topic: u32,
    pub members: Vec<ConsumerLedger>,
}

impl SubscriptionLedger {
    /// Adds `member` to the ledger of its (topic, subscription) in `all`.
    pub fn add_member(
        all: &mut std::collections::BTreeMap<(u32, u32), SubscriptionLedger>,
        (topic, subscription): (u32, u32),
        member: ConsumerLedger,
    ) {
        all.entry((topic, subscription))
            .or_insert_with(|| SubscriptionLedger {
                topic,
                members: Vec::new(),
            })
            .members
            .push(member);
    }

    /// What the broker held beyond this subscription's positions when the drain ended: each
    /// place counted once, as the member that got furthest in it says (members that both read
    /// a place, before and after a rebalance: the one that gave it up saw less), with the
    /// evidence; None unless every member could tell.
    pub fn unread(&self) -> Option<(u64, &str)> {
        let mut places: std::collections::BTreeMap<&str, u64> = Default::default();
        let mut evidence = "";
        for member in &self.members {
            let unread = member.unread.as_ref()?;
            if !unread.evidence.is_empty() {
                evidence = &unread.evidence;
            }
            for (place, &messages) in &unread.places {
                let held = places.entry(place).or_insert(messages);
                *held = (*held).min(messages);
            }
        }
        Some((places.values().sum(), evidence))
    }
}

/// Compares what was acknowledged with what every subscription received.
/// `foreign` counts messages read that this run did not send.
pub fn reconcile(
    producers: &[ProducerLedger],
    subscriptions: &[SubscriptionLedger],
    foreign: u64,
) -> Integrity {
    let producers: Vec<&ProducerLedger> = producers.iter().collect();
    reconcile_by_second(&producers, subscriptions, foreign).0
}

/// [`reconcile`], and what it found by the second of the run each message was due (where the
/// producers' marks tell).
pub fn reconcile_by_second(
    producers: &[&ProducerLedger],
    subscriptions: &[SubscriptionLedger],
    foreign: u64,
) -> (Integrity, IntegrityBySecond) {
    let mut integrity = Integrity {
        checked: !subscriptions.is_empty(),
        unacknowledged: producers.iter().map(|p| p.unacknowledged).sum(),
        foreign,
        ..Integrity::default()
    };
    let mut by_second = IntegrityBySecond::new(integrity.checked);
    for subscription in subscriptions {
        reconcile_subscription(producers, subscription, &mut integrity, &mut by_second);
    }
    (integrity, by_second)
}

/// Adds what one subscription received, against what its topic's producers had acknowledged,
/// to `integrity` and `by_second`.
fn reconcile_subscription(
    producers: &[&ProducerLedger],
    subscription: &SubscriptionLedger,
    integrity: &mut Integrity,
    by_second: &mut IntegrityBySecond,
) {
    let mut received: Vec<SequenceSet> = vec![SequenceSet::default(); producers.len()];
    for member in &subscription.members {
        integrity.duplicated += member.duplicated;
        integrity.out_of_order += member.out_of_order;
        by_second.add(&member.by_second);
        for (producer, set) in member.received.iter().enumerate() {
            let Some(marks) = producers.get(producer).map(|p| &p.marks) else {
                continue;
            };
            let mut placer = Placer::new(marks);
            let mut add = |second, n| by_second.at(second).duplicated += n;
            integrity.duplicated +=
                received[producer].union_noting_overlap(set, |q| placer.place(q, &mut add));
            placer.finish(&mut add);
        }
    }
    let mut missing = 0;
    let mut missing_by_second = IntegrityBySecond::default();
    for (id, producer) in producers.iter().enumerate() {
        if producer.topic != subscription.topic {
            continue;
        }
        let mut placer = Placer::new(&producer.marks);
        let mut add = |second, n| missing_by_second.at(second).lost += n;
        missing += producer
            .acknowledged
            .missing_from(&received[id], |q| placer.place(q, &mut add));
        placer.finish(&mut add);
        integrity.received_unacknowledged +=
            received[id].count_missing_from(&producer.acknowledged);
    }
    // What the broker still holds beyond the subscription's positions was not consumed
    // yet; only what is missing beyond that was lost (the consumers moved past it).
    let unconsumed = match subscription.unread() {
        Some((held, evidence)) if missing > 0 => {
            integrity.unconsumed_evidence = Some(evidence.to_string());
            held.min(missing)
        }
        _ => 0,
    };
    integrity.unconsumed += unconsumed;
    integrity.lost += missing - unconsumed;
    missing_by_second.unlose_latest(unconsumed);
    by_second.add(&missing_by_second);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(producer: u32, sequence: u64) -> Envelope {
        Envelope {
            producer,
            sequence,
            intended_ns: 0,
        }
    }

    fn acked(topic: u32, sequences: impl IntoIterator<Item = u64>) -> ProducerLedger {
        let mut p = ProducerLedger {
            topic,
            ..Default::default()
        };
        for s in sequences {
            p.acknowledged.insert(s);
        }
        p
    }

    #[test]
    fn sets() {
        let mut s = SequenceSet::default();
        assert!(s.insert(3) && s.insert(700) && !s.insert(3));
        assert!(s.contains(700) && !s.contains(4));
        assert_eq!(s.len(), 2);
        let mut t = SequenceSet::default();
        t.insert(3);
        t.insert(5);
        assert_eq!(s.count_missing_from(&t), 1);
        assert_eq!(s.union_counting_overlap(&t), 1);
        assert_eq!(s.len(), 3);
    }

    #[test]
    fn sets_compact_what_is_complete_and_agree_with_a_plain_set() {
        // In order: a million sequences keep a word or two, not 15,625.
        let mut s = SequenceSet::default();
        for q in 0..1_000_000 {
            assert!(s.insert(q));
        }
        assert_eq!(s.len(), 1_000_000);
        assert!(s.words.len() <= 1, "{} words", s.words.len());
        assert!(!s.insert(5) && s.contains(999_999) && !s.contains(1_000_000));
        // Random sequences, some repeated, some sets with gaps: every operation agrees with
        // a BTreeSet.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..50 {
            let (mut a, mut b) = (SequenceSet::default(), SequenceSet::default());
            let (mut a2, mut b2) = (
                std::collections::BTreeSet::new(),
                std::collections::BTreeSet::new(),
            );
            let span = 64 * (1 + round % 7) * 10;
            // A dense prefix in one or both, then random members.
            for q in 0..(next() % span) {
                a.insert(q);
                a2.insert(q);
                if round % 2 == 0 {
                    b.insert(q);
                    b2.insert(q);
                }
            }
            for _ in 0..500 {
                let q = next() % span;
                assert_eq!(a.insert(q), a2.insert(q));
                let q = next() % span;
                assert_eq!(b.insert(q), b2.insert(q));
            }
            assert_eq!(a.len(), a2.len() as u64);
            assert_eq!(a.count_missing_from(&b), a2.difference(&b2).count() as u64);
            let mut noted = Vec::new();
            a.missing_from(&b, |q| noted.push(q));
            assert!(noted.iter().eq(a2.difference(&b2)), "round {round}");
            assert_eq!(b.count_missing_from(&a), b2.difference(&a2).count() as u64);
            let overlap = a2.intersection(&b2).count() as u64;
            let mut noted = Vec::new();
            assert_eq!(a.union_noting_overlap(&b, |q| noted.push(q)), overlap);
            assert!(noted.iter().eq(a2.intersection(&b2)), "round {round}");
            a2.extend(b2.iter().copied());
            assert_eq!(a.len(), a2.len() as u64);
            for q in 0..span {
                assert_eq!(a.contains(q), a2.contains(&q), "round {round}, {q}");
            }
        }
    }

    #[test]
    fn clean_delivery() {
        let mut c = ConsumerLedger::default();
        for i in 0..100 {
            assert!(c.record(0, &env(0, i), 0));
        }
        let subs = [SubscriptionLedger {
            topic: 0,
            members: vec![c],
        }];
        let i = reconcile(&[acked(0, 0..100)], &subs, 0);
        assert!(i.is_clean() && i.checked, "{i:?}");
    }

    #[test]
    fn loss_duplicate_and_reorder() {
        let mut c = ConsumerLedger::default();
        for s in [0, 1, 3, 2, 3, 5] {
            c.record(0, &env(0, s), 0);
        }
        let subs = [SubscriptionLedger {
            topic: 0,
            members: vec![c],
        }];
        let i = reconcile(&[acked(0, 0..6)], &subs, 0);
        assert_eq!(i.lost, 1, "4 never arrived");
        assert_eq!(i.duplicated, 1, "3 arrived twice");
        assert_eq!(
            i.out_of_order, 1,
            "2 arrived after 3; the repeated 3 is a duplicate, not a reorder"
        );
    }

    #[test]
    fn order_is_per_stream_and_duplicates_across_members_count() {
        let mut a = ConsumerLedger::default();
        let mut b = ConsumerLedger::default();
        a.record(0, &env(0, 1), 0);
        a.record(1, &env(0, 0), 0); // other partition: not out of order
        b.record(2, &env(0, 1), 0); // redelivered to another member after a rebalance
        let subs = [SubscriptionLedger {
            topic: 0,
            members: vec![a, b],
        }];
        let i = reconcile(&[acked(0, 0..2)], &subs, 3);
        assert_eq!(
            (i.out_of_order, i.duplicated, i.lost, i.foreign),
            (0, 1, 0, 3)
        );
    }

    #[test]
    fn subscriptions_only_answer_for_their_topic() {
        let mut c = ConsumerLedger::default();
        c.record(0, &env(1, 0), 0);
        let subs = [SubscriptionLedger {
            topic: 1,
            members: vec![c],
        }];
        let i = reconcile(&[acked(0, 0..5), acked(1, 0..1)], &subs, 0);
        assert_eq!(
            i.lost, 0,
            "producer 0 writes to topic 0, which nobody consumes"
        );
        let i = reconcile(&[acked(0, 0..5), acked(1, 0..2)], &subs, 0);
        assert_eq!(i.lost, 1);
    }

    #[test]
    fn received_but_not_acknowledged() {
        let mut c = ConsumerLedger::default();
        c.record(0, &env(0, 0), 0);
        c.record(0, &env(0, 1), 0);
        let mut p = acked(0, [0]);
        p.unacknowledged = 1;
        let subs = [SubscriptionLedger {
            topic: 0,
            members: vec![c],
        }];
        let i = reconcile(&[p], &subs, 0);
        assert_eq!(
            (i.received_unacknowledged, i.unacknowledged, i.lost),
            (1, 1, 0)
        );
        assert!(!i.is_clean());
    }

    #[test]
    fn a_place_two_members_read_is_as_far_as_the_furthest_got() {
        // Partition 0 moved from a (received 0..10, 40 beyond it) to b (received 10..30, 20
        // beyond); partition 1 is b's alone. 60 acknowledged, 30 received: 20 + 10 unread.
        let unread = |places: &[(&str, u64)]| {
            Some(UnreadPlaces {
                evidence: "offsets".into(),
                places: places.iter().map(|&(p, n)| (p.to_string(), n)).collect(),
            })
        };
        let (mut a, mut b) = (ConsumerLedger::default(), ConsumerLedger::default());
        (0..10).for_each(|q| _ = a.record(0, &env(0, q), 0));
        (10..30).for_each(|q| _ = b.record(0, &env(0, q), 0));
        a.unread = unread(&[("t/0", 40)]);
        b.unread = unread(&[("t/0", 20), ("t/1", 10)]);
        let subs = [SubscriptionLedger {
            topic: 0,
            members: vec![a, b],
        }];
        assert_eq!(subs[0].unread(), Some((30, "offsets")));
        let i = reconcile(&[acked(0, 0..60)], &subs, 0);
        assert_eq!((i.unconsumed, i.lost), (30, 0), "{i:?}");
    }
}
