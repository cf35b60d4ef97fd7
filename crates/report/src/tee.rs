//! Forwards a run's progress to several observers at once (results folder + live line).

use brokerbench_model::{IntervalRow, Phase, RunObserver};

/// Passes every phase change and interval row to each observer, in order.
pub struct Tee<'a> {
    observers: Vec<&'a mut dyn RunObserver>,
}

impl<'a> Tee<'a> {
    /// A tee over the given observers.
    pub fn new(observers: Vec<&'a mut dyn RunObserver>) -> Self {
        Tee { observers }
    }
}

impl RunObserver for Tee<'_> {
    fn phase_started(&mut self, phase: Phase, at_ns: u64) {
        for observer in &mut self.observers {
            observer.phase_started(phase, at_ns);
        }
    }

    fn interval(&mut self, row: &IntervalRow) {
        for observer in &mut self.observers {
            observer.interval(row);
        }
    }

    fn drained(&mut self, at_ns: u64) {
        for observer in &mut self.observers {
            observer.drained(at_ns);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::row;

    #[derive(Default)]
    struct Count {
        phases: usize,
        rows: usize,
    }

    impl RunObserver for Count {
        fn phase_started(&mut self, _phase: Phase, _at_ns: u64) {
            self.phases += 1;
        }
        fn interval(&mut self, _row: &IntervalRow) {
            self.rows += 1;
        }
    }

    #[test]
    fn forwards_to_all() {
        let (mut a, mut b) = (Count::default(), Count::default());
        {
            let mut tee = Tee::new(vec![&mut a, &mut b]);
            tee.phase_started(Phase::Measurement, 0);
            tee.interval(&row(0, 0));
            tee.interval(&row(1, 0));
        }
        assert_eq!((a.phases, a.rows, b.phases, b.rows), (1, 2, 1, 2));
    }
}
