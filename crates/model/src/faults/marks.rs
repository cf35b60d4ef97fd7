//! When each fault of a run was under way, as it happens: the injector writes it, the results
//! folder reads it to mark timeseries.csv's seconds (written one by one as the run goes).

use std::sync::{Arc, Mutex};

/// A fault's number (from 1), when it was injected, and when it ended (None: still under way,
/// or never: a node killed and not started again). Times in ns since the UNIX epoch.
type Span = (usize, u64, Option<u64>);

/// The faults under way, shared between threads; a clone is the same record.
#[derive(Debug, Clone, Default)]
pub struct FaultMarks(Arc<Mutex<Vec<Span>>>);

impl FaultMarks {
    /// Fault `number` was injected at `at_ns`.
    pub fn begin(&self, number: usize, at_ns: u64) {
        self.spans().push((number, at_ns, None));
    }

    /// Fault `number` ended at `at_ns` (undone, or its node started again and answering).
    pub fn end(&self, number: usize, at_ns: u64) {
        for span in self.spans().iter_mut().filter(|s| s.0 == number) {
            span.2.get_or_insert(at_ns);
        }
    }

    /// The numbers of the faults under way at some time in [from_ns, to_ns), space-separated
    /// ("" when none).
    pub fn during(&self, from_ns: u64, to_ns: u64) -> String {
        let numbers: Vec<String> = self
            .spans()
            .iter()
            .filter(|(_, start, end)| *start < to_ns && end.is_none_or(|end| end > from_ns))
            .map(|(number, _, _)| number.to_string())
            .collect();
        numbers.join(" ")
    }

    fn spans(&self) -> std::sync::MutexGuard<'_, Vec<Span>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_is_marked_with_every_fault_under_way_in_it() {
        let marks = FaultMarks::default();
        let seen = marks.clone();
        marks.begin(1, 1_500);
        marks.begin(2, 2_200);
        marks.end(1, 3_100);
        let second = |s: u64| seen.during(s * 1_000, (s + 1) * 1_000);
        assert_eq!(
            [0, 1, 2, 3, 4].map(second),
            ["", "1", "1 2", "1 2", "2"].map(String::from),
            "fault 2 never ended: under way to the end"
        );
    }
}
