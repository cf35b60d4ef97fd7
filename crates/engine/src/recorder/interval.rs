//! A task's one second: its counts and latencies, and the run's fixed times that say which
//! second a moment falls in.

use super::latencies::Latencies;

const SECOND_NS: u64 = 1_000_000_000;

/// The fixed times of a run, ns since the UNIX epoch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Times {
    /// Start of warm-up; interval 0 starts here.
    pub start_ns: u64,
    /// Start of the measurement window.
    pub warmup_end_ns: u64,
    /// End of the measurement window: producers stop here.
    pub measure_end_ns: u64,
}

impl Times {
    #[inline]
    pub fn in_window(&self, t: u64) -> bool {
        t >= self.warmup_end_ns && t < self.measure_end_ns
    }

    /// Moves the end of the window (backlog mode learns it as the run goes).
    pub fn end_at(&mut self, measure_end_ns: u64) {
        self.measure_end_ns = measure_end_ns;
    }

    #[inline]
    pub fn interval_of(&self, t: u64) -> u64 {
        t.saturating_sub(self.start_ns) / SECOND_NS
    }
}

/// One task's counts and latencies for one second.
#[derive(Debug, Clone)]
pub(crate) struct Interval {
    pub index: u64,
    pub sent: u64,
    pub acknowledged: u64,
    pub failed: u64,
    pub received: u64,
    pub bytes_acknowledged: u64,
    pub bytes_received: u64,
    pub publish: Latencies,
    pub end_to_end: Latencies,
    /// Schedule lag of the messages sent in this second.
    pub schedule_lag: Latencies,
    pub schedule_lag_max_ns: u64,
    /// Producers that were disconnected from the broker at some time in this second.
    pub disconnected: u64,
    /// Producers the broker blocked (connection.blocked) at some time in this second.
    pub blocked: u64,
}

impl Interval {
    pub fn new(index: u64) -> Self {
        Interval {
            index,
            sent: 0,
            acknowledged: 0,
            failed: 0,
            received: 0,
            bytes_acknowledged: 0,
            bytes_received: 0,
            publish: Latencies::default(),
            end_to_end: Latencies::default(),
            schedule_lag: Latencies::default(),
            schedule_lag_max_ns: 0,
            disconnected: 0,
            blocked: 0,
        }
    }

    pub fn merge(&mut self, other: &Interval) {
        self.sent += other.sent;
        self.acknowledged += other.acknowledged;
        self.failed += other.failed;
        self.received += other.received;
        self.bytes_acknowledged += other.bytes_acknowledged;
        self.bytes_received += other.bytes_received;
        self.publish.add(&other.publish);
        self.end_to_end.add(&other.end_to_end);
        self.schedule_lag.add(&other.schedule_lag);
        self.schedule_lag_max_ns = self.schedule_lag_max_ns.max(other.schedule_lag_max_ns);
        self.disconnected += other.disconnected;
        self.blocked += other.blocked;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use brokerbench_model::{new_histogram, record_clamped};

    #[test]
    fn merged_intervals_hold_every_value_of_both() {
        let mut a = Interval::new(3);
        let mut b = Interval::new(3);
        let mut all = new_histogram();
        // Enough values that one side becomes a histogram and the other stays a list.
        for v in 1..=3000u64 {
            let target = if v % 5 == 0 { &mut a } else { &mut b };
            target.publish.record(v * 1000);
            record_clamped(&mut all, v * 1000);
        }
        assert!(matches!(a.publish, Latencies::Few(_)));
        assert!(matches!(b.publish, Latencies::Many(_)));
        a.acknowledged = 333;
        b.acknowledged = 667;
        a.schedule_lag_max_ns = 5;
        b.schedule_lag_max_ns = 9;
        let mut c = a.clone();
        a.merge(&b);
        b.merge(&c);
        assert_eq!(a.acknowledged, 1000);
        assert_eq!(a.schedule_lag_max_ns, 9);
        assert_eq!(a.publish.len(), 3000);
        let (a, b) = (a.publish.into_histogram(), b.publish.into_histogram());
        for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(a.value_at_quantile(q), all.value_at_quantile(q), "q={q}");
            assert_eq!(b.value_at_quantile(q), all.value_at_quantile(q), "q={q}");
        }
        assert!(all.equivalent(a.value_at_quantile(0.99), 2_970_000));
        // Few and few stay a list while they fit, and keep every value.
        c.merge(&Interval::new(3));
        assert!(matches!(c.publish, Latencies::Few(_)));
        assert_eq!(c.publish.len(), 600);
    }
}
