//! Which second of the run each of a producer's messages was due: the first sequence number
//! of every second, so that a lost message found by its sequence number is placed in time.

/// (second of the run, its first sequence number), in order; a producer's sequence numbers
/// follow its schedule, so a second's messages run from its first to the next second's.
/// Sixteen bytes a second, whatever the rate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecondMarks(Vec<(u64, u64)>);

impl SecondMarks {
    /// Message `sequence` was due in `second`.
    #[inline]
    pub fn note(&mut self, second: u64, sequence: u64) {
        if self.0.last().is_none_or(|&(last, _)| second > last) {
            self.0.push((second, sequence));
        }
    }

    /// The second message `sequence` was due in; None before the first mark.
    pub fn second_of(&self, sequence: u64) -> Option<u64> {
        let after = self.0.partition_point(|&(_, first)| first <= sequence);
        after.checked_sub(1).map(|i| self.0[i].0)
    }
}

/// Places sequence numbers, handed over in ascending order, in their seconds: a cursor on the
/// marks, and a count of the run in the current second, handed to `add(second, count)` once the
/// run ends (a lost stretch of a million messages is a few calls, not a million).
pub struct Placer<'a> {
    marks: &'a [(u64, u64)],
    /// Index of the mark of the current second.
    at: usize,
    run: Option<(u64, u64)>,
}

impl<'a> Placer<'a> {
    pub fn new(marks: &'a SecondMarks) -> Placer<'a> {
        Placer {
            marks: &marks.0,
            at: 0,
            run: None,
        }
    }

    /// Counts `sequence` (not below the last one placed) in its second.
    #[inline]
    pub fn place(&mut self, sequence: u64, add: impl FnMut(u64, u64)) {
        let marks = self.marks;
        if marks.first().is_none_or(|&(_, first)| sequence < first) {
            return;
        }
        while self.at + 1 < marks.len() && marks[self.at + 1].1 <= sequence {
            self.at += 1;
        }
        let second = marks[self.at].0;
        match &mut self.run {
            Some((current, count)) if *current == second => *count += 1,
            _ => {
                self.finish(add);
                self.run = Some((second, 1));
            }
        }
    }

    /// Hands the current run, if any, to `add(second, count)`.
    pub fn finish(&mut self, mut add: impl FnMut(u64, u64)) {
        if let Some((second, count)) = self.run.take() {
            add(second, count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use brokerbench_driver::Envelope;

    #[test]
    fn a_sequence_belongs_to_the_latest_second_that_began_at_or_before_it() {
        let mut marks = SecondMarks::default();
        for (second, first) in [(2, 0), (2, 5), (3, 10), (5, 30)] {
            marks.note(second, first);
        }
        let seconds: Vec<_> = [0, 9, 10, 29, 30, 99]
            .iter()
            .map(|&q| marks.second_of(q))
            .collect();
        assert_eq!(seconds, [2, 2, 3, 3, 5, 5].map(Some));
        assert_eq!(SecondMarks::default().second_of(0), None);
        // The placer agrees, counting runs.
        let mut placed = Vec::new();
        let mut placer = Placer::new(&marks);
        for q in [0, 9, 10, 29, 30, 99] {
            placer.place(q, |second, n| placed.push((second, n)));
        }
        placer.finish(|second, n| placed.push((second, n)));
        assert_eq!(placed, [(2, 2), (3, 2), (5, 2)]);
        let none = SecondMarks::default();
        let mut placer = Placer::new(&none);
        placer.place(7, |_, _| panic!("no marks, no second"));
        placer.finish(|_, _| panic!("nothing placed"));
    }

    /// Producer 0 sends 10 messages a second for 4 seconds; the consumers lose second 1's
    /// last three, receive one of second 2 twice (once in each member) and one of second 3
    /// after a later one; the broker still holds two of second 3.
    #[test]
    fn losses_duplicates_and_reorders_are_placed_in_the_second_they_were_due() {
        let mut producer = ProducerLedger::default();
        for q in 0..40 {
            producer.marks.note(q / 10, q);
            producer.acknowledged.insert(q);
        }
        let envelope = |sequence: u64| Envelope {
            producer: 0,
            sequence,
            intended_ns: sequence / 10 * 1_000_000_000 + 7,
        };
        let (mut a, mut b) = (ConsumerLedger::default(), ConsumerLedger::default());
        let order = (0..17).chain(20..31).chain([32, 31]).chain(33..38);
        for q in order {
            a.record(0, &envelope(q), 0);
        }
        b.record(1, &envelope(25), 0);
        b.unread = Some(UnreadPlaces::default());
        a.unread = Some(UnreadPlaces {
            evidence: "test".into(),
            places: [("t/0".to_string(), 2)].into(),
        });
        let subscription = SubscriptionLedger {
            topic: 0,
            members: vec![a, b],
        };
        let (integrity, mut by) = reconcile_by_second(&[&producer], &[subscription], 0);
        assert_eq!(
            (integrity.lost, integrity.unconsumed, integrity.duplicated),
            (3, 2, 1)
        );
        assert_eq!(integrity.out_of_order, 1);
        let at = |by: &mut IntegrityBySecond, s| {
            let c = *by.at(s);
            (c.lost, c.duplicated, c.out_of_order)
        };
        assert_eq!(at(&mut by, 1), (3, 0, 0), "17, 18 and 19 were lost");
        assert_eq!(at(&mut by, 2), (0, 1, 0));
        assert_eq!(at(&mut by, 3), (0, 0, 1), "38 and 39 are unread, not lost");
    }
}
