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

/// Builds and emits one-second rows as tasks report, moves through the phases and ends the drain.
pub(super) fn collect(
    workload: &Workload,
    shared: &Shared,
    times: Times,
    (producer_count, slots, subscriptions): (usize, &[ConsumerSlot], u32),
    reports: mpsc::Receiver<Report>,
    observer: &mut dyn RunObserver,
    mut gate: Option<&mut (dyn Gate + '_)>,
) -> Collected {
    let clock = shared.clock;
    let tasks = producer_count + slots.len();
    let mut progress = vec![0u64; tasks];
    let mut pending: BTreeMap<u64, Interval> = BTreeMap::new();
    let mut next_row = 0u64;
    let mut producers: Vec<Option<ProducerResult>> = (0..producer_count).map(|_| None).collect();
    let mut consumers = Vec::new();
    let mut acknowledged_per_topic = vec![0u64; workload.topics as usize];
    let mut phase = Phase::Warmup;
    let mut drain_started_ns = None;
    let mut cpu_start = None;
    let mut cpu = None;
    let mut meter = OneMinuteRate::default();
    let mut acknowledged_so_far = 0u64;
    let mut received_so_far = 0u64;
    let (mut sent_so_far, mut failed_so_far) = (0u64, 0u64);
    let mut seconds = Vec::new();
    let mut failed_fast = None;
    let mut lag_per_second = Vec::new();
    let mut measurement_end_ns = times.measure_end_ns;
    let mut drain_progress = DrainProgress::default();
    let mut drain_cut_off = None;
    let mut backlog = BacklogControl::new(workload, times.start_ns);
    observer.phase_started(Phase::Warmup, times.start_ns);
    loop {
        let all_done = progress.iter().all(|&p| p == u64::MAX);
        if !all_done {
            match reports.recv_timeout(Duration::from_millis(20)) {
                Ok(Report::Interval { task, interval }) => {
                    progress[task] = progress[task].max(interval.index + 1);
                    let index = interval.index.max(next_row);
                    match pending.get_mut(&index) {
                        Some(row) => row.merge(&interval),
                        None => {
                            let mut row = *interval;
                            row.index = index;
                            pending.insert(index, row);
                        }
                    }
                }
                Ok(Report::ProducerDone { task, result }) => {
                    progress[task] = u64::MAX;
                    acknowledged_per_topic[result.ledger.topic as usize] +=
                        result.ledger.acknowledged.len();
                    producers[task] = Some(*result);
                }
                Ok(Report::ConsumerDone { task, result }) => {
                    progress[task] = u64::MAX;
                    consumers.push(*result);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    progress.iter_mut().for_each(|p| *p = u64::MAX);
                }
            }
        }
        let now = clock.now_ns();
        if phase == Phase::Warmup && now >= times.warmup_end_ns {
            phase = Phase::Measurement;
            cpu_start = Some(rusage());
            if let Some(backlog) = &mut backlog {
                backlog.window_opened(shared, now);
            }
            observer.phase_started(phase, times.warmup_end_ns);
        }
        let measure_end_ns = shared.measure_end();
        // A shard may have no producers: it measures until the window's end (or Ctrl-C).
        let producers_done = producers.iter().all(Option::is_some)
            && (!producers.is_empty()
                || now >= measure_end_ns
                || shared.stop.load(Ordering::Relaxed));
        if phase != Phase::Drain && (now >= measure_end_ns || producers_done) {
            if phase == Phase::Measurement {
                cpu = cpu_start.map(|start| (start, rusage()));
            }
            if let Some(backlog) = &mut backlog {
                backlog.window_closed(shared);
            }
            measurement_end_ns = now.min(measure_end_ns).max(times.warmup_end_ns);
            phase = Phase::Drain;
            drain_started_ns = Some(now);
            observer.phase_started(phase, now);
        }
        if phase == Phase::Drain && !shared.consumers_stop.load(Ordering::Relaxed) {
            drain_progress.observe(now, received_unique(shared));
        }
        if producers_done && !shared.consumers_stop.load(Ordering::Relaxed) {
            let received: Vec<u64> = (0..workload.topics)
                .map(|topic| {
                    slots
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.topic == topic)
                        .map(|(i, _)| shared.unique[i].load(Ordering::Relaxed))
                        .sum()
                })
                .collect();
            let caught_up = match gate.as_mut() {
                // Consumers of one shard receive what others' producers sent.
                Some(gate) => {
                    let expected: Vec<u64> = acknowledged_per_topic
                        .iter()
                        .map(|&a| a * subscriptions as u64)
                        .collect();
                    gate.drained(true, &expected, &received)
                }
                None => received
                    .iter()
                    .zip(&acknowledged_per_topic)
                    .all(|(&r, &a)| r >= a * subscriptions as u64),
            };
            let deadline = shared.drain_deadline(drain_started_ns.unwrap_or(now));
            if caught_up || now >= deadline {
                if !caught_up && !slots.is_empty() {
                    drain_cut_off = Some(drain_progress.recent(received_unique(shared)));
                }
                shared.consumers_stop.store(true, Ordering::Relaxed);
            }
        }
        let all_done = progress.iter().all(|&p| p == u64::MAX);
        loop {
            let row_end = times.start_ns + (next_row + 1) * SECOND_NS;
            let reported = progress.iter().all(|&p| p > next_row);
            let ready = if all_done {
                pending
                    .keys()
                    .next_back()
                    .is_some_and(|&last| next_row <= last)
            } else {
                (reported && now >= row_end) || now >= row_end + ROW_GRACE_NS
            };
            if !ready {
                break;
            }
            let interval = pending
                .remove(&next_row)
                .unwrap_or_else(|| Interval::new(next_row));
            let row_start = times.start_ns + next_row * SECOND_NS;
            let row_phase = if row_start < times.warmup_end_ns {
                Phase::Warmup
            } else if row_start < drain_started_ns.unwrap_or(u64::MAX).min(measure_end_ns) {
                Phase::Measurement
            } else {
                Phase::Drain
            };
            if row_phase == Phase::Measurement {
                lag_per_second.push(interval.schedule_lag_max_ns);
            }
            if row_phase != Phase::Drain {
                seconds.push(SecondCounts {
                    second: next_row,
                    measuring: row_phase == Phase::Measurement,
                    sent: interval.sent,
                    acknowledged: interval.acknowledged,
                    disconnected: interval.disconnected,
                    blocked: interval.blocked,
                    publish_p50_ns: interval.publish.quantile(0.5),
                    publish_p99_ns: interval.publish.quantile(0.99),
                    lag_p99_ns: interval.schedule_lag.quantile(0.99),
                });
            }
            acknowledged_so_far += interval.acknowledged;
            received_so_far += interval.received;
            sent_so_far += interval.sent;
            failed_so_far += interval.failed;
            if failed_fast.is_none()
                && next_row + 1 >= FAIL_FAST_SECONDS
                && acknowledged_so_far == 0
                && failed_so_far >= FAIL_FAST_MESSAGES
                && failed_so_far * 2 >= sent_so_far
                && !shared.stop.load(Ordering::Relaxed)
            {
                failed_fast = Some(((next_row + 1) as f64, sent_so_far));
                shared.stop.store(true, Ordering::Relaxed);
            }
            meter.add_second(interval.acknowledged);
            let row = IntervalRow {
                second: next_row,
                phase: row_phase,
                start_ns: row_start,
                sent: interval.sent,
                acknowledged: interval.acknowledged,
                failed: interval.failed,
                received: interval.received,
                bytes_acknowledged: interval.bytes_acknowledged,
                bytes_received: interval.bytes_received,
                backlog: (subscriptions > 0).then(|| {
                    (acknowledged_so_far * subscriptions as u64) as i64 - received_so_far as i64
                }),
                acknowledged_rate_1m: meter.rate(),
                publish: interval.publish.into_histogram(),
                end_to_end: interval.end_to_end.into_histogram(),
                schedule_lag: interval.schedule_lag.into_histogram(),
                schedule_lag_max_ns: interval.schedule_lag_max_ns,
                disconnected_producers: interval.disconnected,
            };
            if let (Some(backlog), Phase::Measurement, Some(waiting)) =
                (&mut backlog, row_phase, row.backlog)
            {
                backlog.row(shared, waiting, received_so_far, row_end, now);
            }
            observer.interval(&row);
            next_row += 1;
        }
        if all_done && pending.is_empty() {
            break;
        }
    }
    if cpu.is_none() {
        cpu = cpu_start.map(|start| (start, rusage()));
    }
    Collected {
        producers: producers.into_iter().flatten().collect(),
        consumers,
        lag_per_second,
        cpu,
        measurement_end_ns,
        drain_cut_off,
        backlog: backlog.map(BacklogControl::report),
        failed_fast,
        seconds,
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
