//! The collector: one-second rows as tasks report, the phases, the end of the drain, and
//! the client's own CPU and memory.

use super::*;

/// Everything the collector gathered.
pub(super) struct Collected {
    pub(super) producers: Vec<ProducerResult>,
    pub(super) consumers: Vec<ConsumerResult>,
    /// Max schedule lag per measurement second, ns.
    pub(super) lag_per_second: Vec<u64>,
    pub(super) cpu: Option<(Rusage, Rusage)>,
    /// When the measurement window actually ended (earlier than planned after Ctrl-C).
    pub(super) measurement_end_ns: u64,
    /// Set when the drain ended at its timeout before consumers had received every
    /// acknowledged message: how many they received in the drain's last one to two seconds
    /// (more than 0: still receiving, so some of what is missing may only be late).
    pub(super) drain_cut_off: Option<u64>,
    pub(super) backlog: Option<BacklogReport>,
    /// Set when the run was stopped early because every message of its first seconds failed:
    /// (seconds run, messages sent).
    pub(super) failed_fast: Option<(f64, u64)>,
    /// Per second of warm-up and measurement: (second, sent, acknowledged, producers
    /// disconnected), to find the seconds the broker acknowledged nothing.
    pub(super) seconds: Vec<SecondCounts>,
}

impl Collected {
    /// Every producer's spans without acknowledgements, sorted by their start.
    pub(super) fn ack_gaps(&self) -> Vec<(u64, u64)> {
        let mut gaps: Vec<(u64, u64)> = self
            .producers
            .iter()
            .flat_map(|p| p.ack_gaps.iter().copied())
            .collect();
        gaps.sort_unstable();
        gaps
    }
}

/// What one second's row says about acknowledgements (for the stall notes).
#[derive(Debug, Clone, Copy)]
pub(super) struct SecondCounts {
    pub(super) second: u64,
    /// In the measurement window (else warm-up).
    pub(super) measuring: bool,
    pub(super) sent: u64,
    pub(super) acknowledged: u64,
    pub(super) disconnected: u64,
    pub(super) blocked: u64,
    /// Publish latency of the second's acknowledgements, p50 and p99, ns.
    pub(super) publish_p50_ns: u64,
    pub(super) publish_p99_ns: u64,
    /// Schedule lag of the second's sends, p99, ns.
    pub(super) lag_p99_ns: u64,
}

/// A run whose first this-many seconds acknowledged nothing and failed at least half of the
/// messages sent (the rest may still be in flight), and at least FAIL_FAST_MESSAGES, stops: a
/// setting is wrong, and more of the same measures nothing.
const FAIL_FAST_SECONDS: u64 = 2;
const FAIL_FAST_MESSAGES: u64 = 100;

/// Messages received (unique, all consumers) at one-second marks during the drain, to tell
/// at its timeout whether consumers were still receiving.
#[derive(Debug, Default)]
pub(super) struct DrainProgress {
    /// (time, received) of the mark before the last, and of the last.
    pub(super) marks: [(u64, u64); 2],
}

impl DrainProgress {
    fn observe(&mut self, now: u64, received: u64) {
        if self.marks[1].0 == 0 {
            self.marks = [(now, received); 2];
        } else if now >= self.marks[1].0 + SECOND_NS {
            self.marks = [self.marks[1], (now, received)];
        }
    }

    /// Received since the older mark (one to two seconds ago).
    fn recent(&self, received: u64) -> u64 {
        received.saturating_sub(self.marks[0].1)
    }
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Rusage {
    pub(super) user_s: f64,
    pub(super) system_s: f64,
    pub(super) max_rss_bytes: u64,
}

pub(super) fn rusage() -> Rusage {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Rusage {
        user_s: seconds(usage.ru_utime),
        system_s: seconds(usage.ru_stime),
        max_rss_bytes: usage.ru_maxrss as u64 * 1024,
    }
}

/// Builds and emits one-second rows as tasks report, moves through the phases and ends the
/// drain; what it gathered once every task is done and every row emitted.
pub(super) fn collect(
    workload: &Workload,
    shared: &Shared,
    times: Times,
    (producer_count, slots, subscriptions): (usize, &[ConsumerSlot], u32),
    reports: mpsc::Receiver<Report>,
    observer: &mut dyn RunObserver,
    gate: Option<&mut (dyn Gate + '_)>,
) -> Collected {
    let mut collector = Collector {
        workload,
        shared,
        times,
        slots,
        subscriptions,
        observer,
        gate,
        progress: vec![0u64; producer_count + slots.len()],
        pending: BTreeMap::new(),
        next_row: 0,
        producers: (0..producer_count).map(|_| None).collect(),
        consumers: Vec::new(),
        acknowledged_per_topic: vec![0u64; workload.topics as usize],
        phase: Phase::Warmup,
        drain_started_ns: None,
        cpu: CpuWindow::default(),
        totals: Totals::default(),
        seconds: Vec::new(),
        failed_fast: None,
        lag_per_second: Vec::new(),
        measurement_end_ns: times.measure_end_ns,
        window_end_ns: times.measure_end_ns,
        drain_progress: DrainProgress::default(),
        drain_cut_off: None,
        backlog: BacklogControl::new(workload, times.start_ns),
    };
    collector
        .observer
        .phase_started(Phase::Warmup, times.start_ns);
    collector.cpu.read(shared.clock.now_ns());
    loop {
        if !collector.all_done() {
            collector.receive(reports.recv_timeout(Duration::from_millis(20)));
        }
        let now = shared.clock.now_ns();
        let producers_done = collector.advance_phase(now);
        if producers_done && !shared.consumers_stop.load(Ordering::Relaxed) {
            collector.stop_consumers_once_drained(now);
        }
        collector.emit_ready_rows(now);
        collector.cpu.read(now);
        if collector.all_done() && collector.pending.is_empty() {
            return collector.finish();
        }
    }
}

/// Running sums over the rows emitted so far.
#[derive(Default)]
struct Totals {
    sent: u64,
    acknowledged: u64,
    failed: u64,
    received: u64,
    meter: OneMinuteRate,
}

/// The collector's state between reports.
struct Collector<'a, 'g> {
    workload: &'a Workload,
    shared: &'a Shared,
    times: Times,
    slots: &'a [ConsumerSlot],
    subscriptions: u32,
    observer: &'a mut dyn RunObserver,
    gate: Option<&'a mut (dyn Gate + 'g)>,
    /// Per task: the next row it has not reported, or u64::MAX once it is done.
    progress: Vec<u64>,
    /// Rows some task has reported and that are not emitted yet.
    pending: BTreeMap<u64, Interval>,
    next_row: u64,
    producers: Vec<Option<ProducerResult>>,
    consumers: Vec<ConsumerResult>,
    acknowledged_per_topic: Vec<u64>,
    phase: Phase,
    drain_started_ns: Option<u64>,
    cpu: CpuWindow,
    totals: Totals,
    seconds: Vec<SecondCounts>,
    failed_fast: Option<(f64, u64)>,
    lag_per_second: Vec<u64>,
    measurement_end_ns: u64,
    /// The window's planned end as last read from [`Shared::measure_end`] (backlog mode moves
    /// it), for the rows' phases.
    window_end_ns: u64,
    drain_progress: DrainProgress,
    drain_cut_off: Option<u64>,
    backlog: Option<BacklogControl>,
}

impl Collector<'_, '_> {
    fn all_done(&self) -> bool {
        self.progress.iter().all(|&p| p == u64::MAX)
    }

    /// Takes one report: a task's row, or a task's end with its result.
    fn receive(&mut self, report: Result<Report, RecvTimeoutError>) {
        match report {
            Ok(Report::Interval { task, interval }) => {
                self.progress[task] = self.progress[task].max(interval.index + 1);
                let index = interval.index.max(self.next_row);
                match self.pending.get_mut(&index) {
                    Some(row) => row.merge(&interval),
                    None => {
                        let mut row = *interval;
                        row.index = index;
                        self.pending.insert(index, row);
                    }
                }
            }
            Ok(Report::ProducerDone { task, result }) => {
                self.progress[task] = u64::MAX;
                self.acknowledged_per_topic[result.ledger.topic as usize] +=
                    result.ledger.acknowledged.len();
                self.producers[task] = Some(*result);
            }
            Ok(Report::ConsumerDone { task, result }) => {
                self.progress[task] = u64::MAX;
                self.consumers.push(*result);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                self.progress.iter_mut().for_each(|p| *p = u64::MAX);
            }
        }
    }

    /// Opens the measurement window at the end of the warm-up, and the drain at the window's
    /// end or when every producer is done; whether every producer is done.
    fn advance_phase(&mut self, now: u64) -> bool {
        let shared = self.shared;
        if self.phase == Phase::Warmup && now >= self.times.warmup_end_ns {
            self.phase = Phase::Measurement;
            self.cpu.opened(self.times.warmup_end_ns, now);
            if let Some(backlog) = &mut self.backlog {
                backlog.window_opened(shared, now);
            }
            self.observer
                .phase_started(self.phase, self.times.warmup_end_ns);
        }
        let measure_end_ns = shared.measure_end();
        self.window_end_ns = measure_end_ns;
        // A shard may have no producers: it measures until the window's end (or Ctrl-C).
        let producers_done = self.producers.iter().all(Option::is_some)
            && (!self.producers.is_empty()
                || now >= measure_end_ns
                || shared.stop.load(Ordering::Relaxed));
        if self.phase != Phase::Drain && (now >= measure_end_ns || producers_done) {
            self.measurement_end_ns = now.min(measure_end_ns).max(self.times.warmup_end_ns);
            if self.phase == Phase::Measurement {
                self.cpu.closed(self.measurement_end_ns, now);
            }
            if let Some(backlog) = &mut self.backlog {
                backlog.window_closed(shared);
            }
            self.phase = Phase::Drain;
            self.drain_started_ns = Some(now);
            self.observer.phase_started(self.phase, now);
        }
        if self.phase == Phase::Drain && !shared.consumers_stop.load(Ordering::Relaxed) {
            self.drain_progress.observe(now, received_unique(shared));
        }
        producers_done
    }

    /// Tells consumers to stop once they have received every acknowledged message (with
    /// shards: every shard's consumers, through the gate) or the drain's deadline passed.
    fn stop_consumers_once_drained(&mut self, now: u64) {
        let shared = self.shared;
        let received: Vec<u64> = (0..self.workload.topics)
            .map(|topic| {
                self.slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.topic == topic)
                    .map(|(i, _)| shared.unique[i].load(Ordering::Relaxed))
                    .sum()
            })
            .collect();
        let expected: Vec<u64> = self
            .acknowledged_per_topic
            .iter()
            .map(|&a| a * self.subscriptions as u64)
            .collect();
        let caught_up = match self.gate.as_mut() {
            // Consumers of one shard receive what others' producers sent.
            Some(gate) => gate.drained(true, &expected, &received),
            None => received.iter().zip(&expected).all(|(&r, &e)| r >= e),
        };
        let deadline = shared.drain_deadline(self.drain_started_ns.unwrap_or(now));
        if caught_up || now >= deadline {
            if !caught_up && !self.slots.is_empty() {
                self.drain_cut_off = Some(self.drain_progress.recent(received_unique(shared)));
            }
            shared
                .consumers_caught_up
                .store(caught_up, Ordering::SeqCst);
            shared.consumers_stop.store(true, Ordering::SeqCst);
        }
    }

    /// Emits every row that is complete: every task reported it and its second is over, or
    /// its grace passed; once every task is done, every row left.
    fn emit_ready_rows(&mut self, now: u64) {
        let all_done = self.all_done();
        loop {
            let row_end = self.times.start_ns + (self.next_row + 1) * SECOND_NS;
            let reported = self.progress.iter().all(|&p| p > self.next_row);
            let ready = if all_done {
                self.pending
                    .keys()
                    .next_back()
                    .is_some_and(|&last| self.next_row <= last)
            } else {
                (reported && now >= row_end) || now >= row_end + ROW_GRACE_NS
            };
            if !ready {
                return;
            }
            self.emit_row(now, row_end);
            self.next_row += 1;
        }
    }

    /// The phase row `next_row` belongs to, by when it started.
    fn row_phase(&self, row_start: u64) -> Phase {
        let measure_end_ns = self.window_end_ns;
        if row_start < self.times.warmup_end_ns {
            Phase::Warmup
        } else if row_start
            < self
                .drain_started_ns
                .unwrap_or(u64::MAX)
                .min(measure_end_ns)
        {
            Phase::Measurement
        } else {
            Phase::Drain
        }
    }

    /// Emits row `next_row`: its counts for the stall notes, the running sums (and the fail-fast
    /// check), the backlog control, and the row itself to the observer.
    fn emit_row(&mut self, now: u64, row_end: u64) {
        let second = self.next_row;
        let interval = self
            .pending
            .remove(&second)
            .unwrap_or_else(|| Interval::new(second));
        let row_start = self.times.start_ns + second * SECOND_NS;
        let row_phase = self.row_phase(row_start);
        if row_phase == Phase::Measurement {
            self.lag_per_second.push(interval.schedule_lag_max_ns);
        }
        if row_phase != Phase::Drain {
            self.seconds
                .push(second_counts(second, row_phase, &interval));
        }
        self.add_to_totals(second, &interval);
        let subscriptions = self.subscriptions as u64;
        let totals = &self.totals;
        let row = IntervalRow {
            second,
            phase: row_phase,
            start_ns: row_start,
            sent: interval.sent,
            acknowledged: interval.acknowledged,
            failed: interval.failed,
            received: interval.received,
            bytes_acknowledged: interval.bytes_acknowledged,
            bytes_received: interval.bytes_received,
            backlog: (subscriptions > 0)
                .then(|| (totals.acknowledged * subscriptions) as i64 - totals.received as i64),
            acknowledged_rate_1m: totals.meter.rate(),
            publish: interval.publish.into_histogram(),
            end_to_end: interval.end_to_end.into_histogram(),
            schedule_lag: interval.schedule_lag.into_histogram(),
            schedule_lag_max_ns: interval.schedule_lag_max_ns,
            disconnected_producers: interval.disconnected,
            blocked_producers: interval.blocked,
        };
        if let (Some(backlog), Phase::Measurement, Some(waiting)) =
            (&mut self.backlog, row_phase, row.backlog)
        {
            backlog.row(self.shared, waiting, totals.received, row_end, now);
        }
        self.observer.interval(&row);
    }

    /// Adds a row to the running sums; stops the run when its first seconds acknowledged
    /// nothing and failed at least half of what they sent.
    fn add_to_totals(&mut self, second: u64, interval: &Interval) {
        let totals = &mut self.totals;
        totals.acknowledged += interval.acknowledged;
        totals.received += interval.received;
        totals.sent += interval.sent;
        totals.failed += interval.failed;
        totals.meter.add_second(interval.acknowledged);
        let stop = &self.shared.stop;
        if self.failed_fast.is_none()
            && second + 1 >= FAIL_FAST_SECONDS
            && totals.acknowledged == 0
            && totals.failed >= FAIL_FAST_MESSAGES
            && totals.failed * 2 >= totals.sent
            && !stop.load(Ordering::Relaxed)
        {
            self.failed_fast = Some(((second + 1) as f64, totals.sent));
            stop.store(true, Ordering::Relaxed);
        }
    }

    fn finish(mut self) -> Collected {
        let now = self.shared.clock.now_ns();
        self.cpu.closed(now, now);
        Collected {
            producers: self.producers.into_iter().flatten().collect(),
            consumers: self.consumers,
            lag_per_second: self.lag_per_second,
            cpu: self.cpu.window(),
            measurement_end_ns: self.measurement_end_ns,
            drain_cut_off: self.drain_cut_off,
            backlog: self.backlog.map(BacklogControl::report),
            failed_fast: self.failed_fast,
            seconds: self.seconds,
        }
    }
}

/// A warm-up or measurement second's counts, for the stall notes.
fn second_counts(second: u64, phase: Phase, interval: &Interval) -> SecondCounts {
    SecondCounts {
        second,
        measuring: phase == Phase::Measurement,
        sent: interval.sent,
        acknowledged: interval.acknowledged,
        disconnected: interval.disconnected,
        blocked: interval.blocked,
        publish_p50_ns: interval.publish.quantile(0.5),
        publish_p99_ns: interval.publish.quantile(0.99),
        lag_p99_ns: interval.schedule_lag.quantile(0.99),
    }
}

/// Distinct messages received so far by all consumers.
pub(super) fn received_unique(shared: &Shared) -> u64 {
    shared
        .unique
        .iter()
        .map(|u| u.load(Ordering::Relaxed))
        .sum()
}

/// Client-bound when the schedule lag at the end of the window is large and has grown.
pub(super) fn client_bound(lag_per_second: &[u64]) -> bool {
    if lag_per_second.len() < 2 {
        return lag_per_second.first().is_some_and(|&l| l >= 1_000_000_000);
    }
    let quarter = (lag_per_second.len() / 4).max(1);
    let first = lag_per_second[..quarter].iter().copied().max().unwrap_or(0);
    let last = lag_per_second[lag_per_second.len() - quarter..]
        .iter()
        .copied()
        .max()
        .unwrap_or(0);
    last >= 100_000_000 && last > first.saturating_mul(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_bound_needs_large_and_growing_lag() {
        let ms = 1_000_000;
        assert!(!client_bound(&[0, 0, 0, 0, 0, 0, 0, 0]));
        assert!(!client_bound(&[500 * ms; 8]), "large but steady");
        assert!(client_bound(&[
            ms,
            50 * ms,
            100 * ms,
            200 * ms,
            300 * ms,
            400 * ms,
            500 * ms,
            600 * ms
        ]));
        assert!(
            !client_bound(&[0, 0, 0, 1000 * ms, 0, 0, 0, 0]),
            "one stall that recovered"
        );
    }
}
