//! What the delivery ledger found, by the second of the run in which each message was to be
//! sent: so that a fault's seconds can say which acknowledged messages were then lost,
//! duplicated or delivered out of order.

use std::collections::BTreeMap;

/// Messages intended for one second of the run that were acknowledged and never received,
/// received more than once, or received out of order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecondIntegrity {
    pub lost: u64,
    pub duplicated: u64,
    pub out_of_order: u64,
}

impl std::ops::AddAssign for SecondIntegrity {
    fn add_assign(&mut self, other: SecondIntegrity) {
        self.lost += other.lost;
        self.duplicated += other.duplicated;
        self.out_of_order += other.out_of_order;
    }
}

/// The ledger's findings by second of the run (0 = the first second of warm-up, as in
/// timeseries.csv); seconds with nothing to report are absent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntegrityBySecond {
    seconds: BTreeMap<u64, SecondIntegrity>,
    /// False when no consumer ran: nothing was checked.
    pub checked: bool,
}

impl IntegrityBySecond {
    /// Nothing found yet; `checked`: whether consumers ran.
    pub fn new(checked: bool) -> IntegrityBySecond {
        IntegrityBySecond {
            seconds: BTreeMap::new(),
            checked,
        }
    }

    /// The counts of `second`, to add to.
    pub fn at(&mut self, second: u64) -> &mut SecondIntegrity {
        self.seconds.entry(second).or_default()
    }

    /// Adds every second of `other`.
    pub fn add(&mut self, other: &IntegrityBySecond) {
        for (&second, &counts) in &other.seconds {
            *self.at(second) += counts;
        }
    }

    /// Takes `count` lost messages off the latest seconds: the messages the broker still held
    /// beyond the consumers' positions, or dropped by policy, are not lost; what is not read
    /// yet is the newest.
    pub fn unlose_latest(&mut self, mut count: u64) {
        for counts in self.seconds.values_mut().rev() {
            let taken = counts.lost.min(count);
            counts.lost -= taken;
            count -= taken;
            if count == 0 {
                break;
            }
        }
    }

    /// Lost messages over all seconds.
    pub fn lost(&self) -> u64 {
        self.seconds.values().map(|c| c.lost).sum()
    }

    /// The sum over the seconds `within` picks; None when nothing was checked.
    pub fn over(&self, within: impl Fn(u64) -> bool) -> Option<SecondIntegrity> {
        self.checked.then(|| {
            let mut sum = SecondIntegrity::default();
            for (_, &c) in self.seconds.iter().filter(|(&s, _)| within(s)) {
                sum += c;
            }
            sum
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_seconds_give_up_their_losses_first_and_sums_pick_seconds() {
        let mut by = IntegrityBySecond::new(true);
        by.at(3).lost = 5;
        by.at(7).lost = 2;
        by.at(7).duplicated = 1;
        by.at(9).out_of_order = 4;
        by.unlose_latest(3);
        assert_eq!((by.at(3).lost, by.at(7).lost), (4, 0));
        assert_eq!(by.lost(), 4);
        let sum = by.over(|s| s >= 5).unwrap();
        assert_eq!((sum.lost, sum.duplicated, sum.out_of_order), (0, 1, 4));
        assert_eq!(IntegrityBySecond::default().over(|_| true), None);
    }
}
