//! Per-task measurement state. Each producer and consumer task owns one recorder (no shared
//! counters on the hot path), rolls its one-second interval over by itself and sends finished
//! intervals and its final result to the collector.

use std::collections::HashMap;
use std::sync::mpsc::Sender;

use hdrhistogram::Histogram;

use brokerbench_driver::{Ack, ConsumerSlot, Delivery, Envelope};
use brokerbench_model::{new_histogram, record_clamped, Counts};

use crate::ledger::{ConsumerLedger, ProducerLedger, UnreadPlaces};

const SECOND_NS: u64 = 1_000_000_000;
/// Error kind for messages due in the window that a producer behind schedule never sent.
pub(crate) const NOT_SENT: &str = "not_sent_behind_schedule";

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

/// A task's latencies of one second, or of its measurement window: the values themselves
/// while they are few, a histogram once they are many. A task of a many-topic run records a
/// hundred values a second; a histogram of brokerbench's range and precision is a quarter of a
/// megabyte, and sending and merging two of them per task per second cost more than the
/// messages did at 100 topics and ran a 1,000-topic run out of memory; four of them per task
/// for the window made the client's memory grow with the topics (128 MiB at 100). The values
/// go into the same histograms in the end.
#[derive(Debug, Clone)]
pub(crate) enum Latencies {
    /// Clamped values, at most [`FEW_LATENCIES`].
    Few(Vec<u64>),
    Many(Box<Histogram<u64>>),
}

/// How many values a second's latencies keep as they are before they become a histogram.
const FEW_LATENCIES: usize = 2048;

impl Default for Latencies {
    fn default() -> Self {
        Latencies::Few(Vec::new())
    }
}

impl Latencies {
    #[inline]
    pub fn record(&mut self, nanos: u64) {
        match self {
            Latencies::Many(histogram) => record_clamped(histogram, nanos),
            Latencies::Few(values) if values.len() < FEW_LATENCIES => values.push(nanos.clamp(
                brokerbench_model::HISTOGRAM_LOW,
                brokerbench_model::HISTOGRAM_HIGH,
            )),
            Latencies::Few(_) => record_clamped(self.histogram(), nanos),
        }
    }

    /// Number of values recorded.
    #[cfg(test)]
    pub fn len(&self) -> u64 {
        match self {
            Latencies::Few(values) => values.len() as u64,
            Latencies::Many(histogram) => histogram.len(),
        }
    }

    /// The value at quantile `q` (0 to 1); 0 when there is none.
    pub fn quantile(&self, q: f64) -> u64 {
        match self {
            Latencies::Few(values) if values.is_empty() => 0,
            Latencies::Few(values) => {
                let mut sorted = values.clone();
                sorted.sort_unstable();
                let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
                sorted[rank - 1]
            }
            Latencies::Many(histogram) => histogram.value_at_quantile(q),
        }
    }

    /// Adds every value of `other`.
    pub fn add(&mut self, other: &Latencies) {
        match (&mut *self, other) {
            (Latencies::Few(values), Latencies::Few(more))
                if values.len() + more.len() <= FEW_LATENCIES =>
            {
                values.extend_from_slice(more)
            }
            (_, Latencies::Few(more)) => {
                let histogram = self.histogram();
                for &v in more {
                    record_clamped(histogram, v);
                }
            }
            (_, Latencies::Many(more)) => self
                .histogram()
                .add(&**more)
                .expect("same histogram bounds"),
        }
    }

    /// Adds every value to `histogram`.
    pub fn add_to(&self, histogram: &mut Histogram<u64>) {
        match self {
            Latencies::Few(values) => {
                for &v in values {
                    record_clamped(histogram, v);
                }
            }
            Latencies::Many(more) => histogram.add(&**more).expect("same histogram bounds"),
        }
    }

    /// The values as a histogram.
    pub fn into_histogram(mut self) -> Histogram<u64> {
        self.histogram();
        match self {
            Latencies::Many(histogram) => *histogram,
            Latencies::Few(_) => unreachable!("made a histogram above"),
        }
    }

    /// The histogram, made from the values first if there is none yet.
    fn histogram(&mut self) -> &mut Histogram<u64> {
        if let Latencies::Few(values) = self {
            let mut histogram = new_histogram();
            for &v in values.iter() {
                record_clamped(&mut histogram, v);
            }
            *self = Latencies::Many(Box::new(histogram));
        }
        match self {
            Latencies::Many(histogram) => histogram,
            Latencies::Few(_) => unreachable!("made a histogram above"),
        }
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

/// A time the broker blocked one producer's publishing (from the broker's own notice to the
/// one that lifted it; None when it was still blocked when the producer finished).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockSpan {
    pub start_ns: u64,
    pub end_ns: Option<u64>,
    pub reason: String,
}

/// One producer's outage: from when its client found the broker gone to its first successful
/// acknowledgement after that (None when none came before the producer finished).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutageSpan {
    pub start_ns: u64,
    pub first_ack_ns: Option<u64>,
    /// Messages that failed from the start to the first acknowledgement.
    pub failed: u64,
}

/// A producer's final measurements.
#[derive(Debug)]
pub(crate) struct ProducerResult {
    pub publish: Latencies,
    pub service_time: Latencies,
    pub schedule_lag: Latencies,
    pub window: Counts,
    pub total: Counts,
    pub errors: HashMap<String, u64>,
    pub ledger: ProducerLedger,
    pub ack_note: Option<String>,
    /// Why the broker closed the producer's channel or connection, in its words.
    pub closed_by_broker: Option<String>,
    /// Time in the window spent waiting for room in the client's buffer of unacknowledged
    /// messages (sends refused with backpressure), ns.
    pub buffer_full_ns: u64,
    /// Time in the window sends waited for the client to reconnect, ns.
    pub unavailable_ns: u64,
    /// Max rate: messages whose send was under way (the client's buffer full, or the client
    /// reconnecting) when the window and its grace ended; never handed to the client.
    pub unsent_at_window_end: u64,
    /// The client's outages, in order.
    pub outages: Vec<OutageSpan>,
    /// Times the broker blocked publishing, in order.
    pub blocks: Vec<BlockSpan>,
    /// Spans longer than [`ACK_GAP_NS`] in which a message was due and no acknowledgement
    /// came, (from, to) in ns since the UNIX epoch, in order: what a fault cost this producer.
    pub ack_gaps: Vec<(u64, u64)>,
}

/// Shorter spans without an acknowledgement are not kept (at any rate worth measuring,
/// acknowledgements come far more often when the broker is well).
pub const ACK_GAP_NS: u64 = 100_000_000;

/// A consumer's final measurements.
#[derive(Debug)]
pub(crate) struct ConsumerResult {
    pub topic: u32,
    pub subscription: u32,
    pub member: u32,
    pub end_to_end: Latencies,
    pub window: Counts,
    pub total: Counts,
    pub errors: HashMap<String, u64>,
    pub ledger: ConsumerLedger,
    pub foreign: u64,
}

/// What tasks send to the collector.
#[derive(Debug)]
pub(crate) enum Report {
    Interval {
        task: usize,
        interval: Box<Interval>,
    },
    ProducerDone {
        task: usize,
        result: Box<ProducerResult>,
    },
    ConsumerDone {
        task: usize,
        result: Box<ConsumerResult>,
    },
}

/// Rolls a task's interval over when a new second starts.
struct IntervalState {
    task: usize,
    times: Times,
    current: Interval,
    reports: Sender<Report>,
}

impl IntervalState {
    fn new(task: usize, times: Times, reports: Sender<Report>) -> Self {
        IntervalState {
            task,
            times,
            current: Interval::new(0),
            reports,
        }
    }

    #[inline]
    fn roll(&mut self, now_ns: u64) -> &mut Interval {
        let index = self.times.interval_of(now_ns);
        if index > self.current.index {
            let finished = std::mem::replace(&mut self.current, Interval::new(index));
            // The collector may already be gone when a run is torn down; nothing to do then.
            let _ = self.reports.send(Report::Interval {
                task: self.task,
                interval: Box::new(finished),
            });
        }
        &mut self.current
    }

    fn finish(mut self) -> Sender<Report> {
        let last = std::mem::replace(&mut self.current, Interval::new(0));
        let _ = self.reports.send(Report::Interval {
            task: self.task,
            interval: Box::new(last),
        });
        self.reports
    }
}

fn count_error(errors: &mut HashMap<String, u64>, kind: &str) {
    match errors.get_mut(kind) {
        Some(n) => *n += 1,
        None => {
            errors.insert(kind.to_string(), 1);
        }
    }
}

/// A producer task's recorder.
pub(crate) struct ProducerRecorder {
    interval: IntervalState,
    times: Times,
    /// False when the broker sends no confirmations: a sent message is then what the ledger
    /// expects consumers to receive.
    confirms: bool,
    /// When the last acknowledgement came (0 before the first).
    last_ack_ns: u64,
    /// The earliest intended send time of the messages sent since then (u64::MAX: none);
    /// a message whose send failed stays due.
    first_due_ns: u64,
    result: ProducerResult,
}

impl ProducerRecorder {
    /// The window's end as the run knows it now: backlog mode learns it as it goes.
    #[inline]
    pub fn follow_end(&mut self, measure_end_ns: u64) {
        if self.times.measure_end_ns != measure_end_ns {
            self.times.end_at(measure_end_ns);
        }
    }

    pub fn new(
        task: usize,
        topic: u32,
        confirms: bool,
        times: Times,
        reports: Sender<Report>,
    ) -> Self {
        ProducerRecorder {
            interval: IntervalState::new(task, times, reports),
            times,
            confirms,
            last_ack_ns: 0,
            first_due_ns: u64::MAX,
            result: ProducerResult {
                publish: Latencies::default(),
                service_time: Latencies::default(),
                schedule_lag: Latencies::default(),
                window: Counts::default(),
                total: Counts::default(),
                errors: HashMap::new(),
                ledger: ProducerLedger {
                    topic,
                    ..ProducerLedger::default()
                },
                ack_note: None,
                closed_by_broker: None,
                buffer_full_ns: 0,
                unavailable_ns: 0,
                unsent_at_window_end: 0,
                outages: Vec::new(),
                blocks: Vec::new(),
                ack_gaps: Vec::new(),
            },
        }
    }

    /// Keeps the span before an acknowledgement at `now_ns` in which a message was due (the
    /// one acknowledged since `due_ns`, or one sent since the last acknowledgement, failed
    /// ones included) and none came, when it is long.
    #[inline]
    fn note_gap(&mut self, due_ns: u64, now_ns: u64) {
        let from = self.last_ack_ns.max(due_ns.min(self.first_due_ns));
        if now_ns > from.saturating_add(ACK_GAP_NS) {
            self.result.ack_gaps.push((from, now_ns));
        }
        self.last_ack_ns = self.last_ack_ns.max(now_ns);
        self.first_due_ns = u64::MAX;
    }

    /// The open outage, if the client is disconnected now.
    #[inline]
    fn open_outage(&mut self) -> Option<&mut OutageSpan> {
        self.result
            .outages
            .last_mut()
            .filter(|o| o.first_ack_ns.is_none())
    }

    /// Whether a block is open (the broker has not lifted it yet).
    #[inline]
    pub fn is_blocked(&self) -> bool {
        self.result
            .blocks
            .last()
            .is_some_and(|b| b.end_ns.is_none())
    }

    /// What the client says of the broker blocking publishing, now: opens a block when it
    /// starts, closes it when it has been lifted.
    pub fn blocked(&mut self, blocked: Option<(u64, String)>, now_ns: u64) {
        let open = self.result.blocks.last_mut().filter(|b| b.end_ns.is_none());
        match (blocked, open) {
            (Some(_), Some(_)) => self.interval.roll(now_ns).blocked = 1,
            (Some((since_ns, reason)), None) => {
                self.interval.roll(now_ns).blocked = 1;
                self.result.blocks.push(BlockSpan {
                    start_ns: since_ns.min(now_ns),
                    end_ns: None,
                    reason,
                });
            }
            (None, Some(block)) => block.end_ns = Some(now_ns),
            (None, None) => {}
        }
    }

    /// The client has known since `since_ns` that the broker is gone (said again while it
    /// lasts): opens an outage unless one is open. `failed_at_loss` messages failed in the
    /// poll that found it (those in flight when the connection went).
    pub fn disconnected(&mut self, since_ns: u64, now_ns: u64, failed_at_loss: u64) {
        self.interval.roll(now_ns).disconnected = 1;
        if self.open_outage().is_none() {
            let start_ns = since_ns.min(now_ns);
            // A client that reports the same loss again after an acknowledgement (Kafka's
            // error arrives late) does not open a second outage for it.
            if self.result.outages.last().map(|o| o.start_ns) != Some(start_ns) {
                self.result.outages.push(OutageSpan {
                    start_ns,
                    first_ack_ns: None,
                    failed: failed_at_loss,
                });
            }
        }
    }

    #[inline]
    pub fn roll(&mut self, now_ns: u64) {
        self.interval.roll(now_ns);
    }

    /// A message was handed to the client at `sent_ns`, intended for `intended_ns`.
    #[inline]
    pub fn sent(&mut self, sequence: u64, intended_ns: u64, sent_ns: u64, bytes: usize) {
        if !self.confirms {
            self.result.ledger.acknowledged.insert(sequence);
        }
        let second = self.times.interval_of(intended_ns);
        self.result.ledger.marks.note(second, sequence);
        self.first_due_ns = self.first_due_ns.min(intended_ns);
        let lag = sent_ns.saturating_sub(intended_ns);
        let interval = self.interval.roll(sent_ns);
        interval.sent += 1;
        interval.schedule_lag.record(lag);
        interval.schedule_lag_max_ns = interval.schedule_lag_max_ns.max(lag);
        let r = &mut self.result;
        r.total.sent += 1;
        r.total.bytes_sent += bytes as u64;
        if self.times.in_window(sent_ns) {
            r.window.sent += 1;
            r.window.bytes_sent += bytes as u64;
        }
        if self.times.in_window(intended_ns) {
            r.schedule_lag.record(lag);
        }
    }

    /// A send failed before reaching the broker.
    pub fn send_failed(&mut self, kind: &str, now_ns: u64) {
        self.interval.roll(now_ns).failed += 1;
        self.result.total.failed += 1;
        if self.times.in_window(now_ns) {
            self.result.window.failed += 1;
        }
        count_error(&mut self.result.errors, kind);
        if let Some(outage) = self.open_outage() {
            outage.failed += 1;
        }
    }

    /// The part of `from_ns..to_ns` in the measurement window, ns.
    fn in_window_ns(&self, from_ns: u64, to_ns: u64) -> u64 {
        let from = from_ns.max(self.times.warmup_end_ns);
        let to = to_ns.min(self.times.measure_end_ns);
        to.saturating_sub(from)
    }

    /// A send waited for room in the client's buffer from `from_ns` to `to_ns`.
    pub fn buffer_full(&mut self, from_ns: u64, to_ns: u64) {
        self.result.buffer_full_ns += self.in_window_ns(from_ns, to_ns);
    }

    /// A send waited for the client to reconnect from `from_ns` to `to_ns`.
    pub fn unavailable(&mut self, from_ns: u64, to_ns: u64) {
        self.result.unavailable_ns += self.in_window_ns(from_ns, to_ns);
    }

    /// Messages the schedule had due in the window that the producer never got to send.
    pub fn not_sent(&mut self, count: u64) {
        *self.result.errors.entry(NOT_SENT.to_string()).or_default() += count;
    }

    /// Max rate: the window closed while a message's send was under way; it is not sent, and
    /// is no error (there was no schedule to be behind).
    pub fn unsent_at_window_end(&mut self) {
        self.result.unsent_at_window_end += 1;
    }

    /// The broker's answer for one message arrived at `now_ns`.
    #[inline]
    pub fn acknowledged(&mut self, ack: &Ack, now_ns: u64) {
        if let Err(kind) = &ack.result {
            self.send_failed(kind, now_ns);
            return;
        }
        if let Some(outage) = self.open_outage() {
            outage.first_ack_ns = Some(now_ns.max(outage.start_ns));
        }
        let intended = ack.envelope.intended_ns;
        self.note_gap(intended, now_ns);
        let publish = now_ns.saturating_sub(intended);
        let interval = self.interval.roll(now_ns);
        interval.acknowledged += 1;
        interval.bytes_acknowledged += ack.bytes as u64;
        interval.publish.record(publish);
        let r = &mut self.result;
        r.total.acknowledged += 1;
        r.total.bytes_acknowledged += ack.bytes as u64;
        if self.times.in_window(now_ns) {
            r.window.acknowledged += 1;
            r.window.bytes_acknowledged += ack.bytes as u64;
        }
        if self.times.in_window(intended) {
            r.publish.record(publish);
            r.service_time.record(now_ns.saturating_sub(ack.sent_ns));
        }
        r.ledger.acknowledged.insert(ack.envelope.sequence);
    }

    /// Sends the last interval and the final result to the collector; messages still
    /// unacknowledged at `now_ns`, failed since the last acknowledgement or not sent for want
    /// of a connection close a last span without acknowledgements.
    pub fn finish(
        mut self,
        unacknowledged: u64,
        ack_note: Option<String>,
        closed_by_broker: Option<String>,
        now_ns: u64,
    ) {
        let due =
            unacknowledged > 0 || self.first_due_ns != u64::MAX || self.open_outage().is_some();
        if due && self.confirms && self.last_ack_ns > 0 {
            self.note_gap(0, now_ns);
        }
        self.result.ledger.unacknowledged = unacknowledged;
        self.result.ack_note = ack_note;
        self.result.closed_by_broker = closed_by_broker;
        let task = self.interval.task;
        let reports = self.interval.finish();
        let _ = reports.send(Report::ProducerDone {
            task,
            result: Box::new(self.result),
        });
    }
}

/// A consumer task's recorder.
pub(crate) struct ConsumerRecorder {
    interval: IntervalState,
    times: Times,
    producers: u32,
    result: ConsumerResult,
}

impl ConsumerRecorder {
    pub fn new(
        task: usize,
        slot: ConsumerSlot,
        producers: u32,
        times: Times,
        reports: Sender<Report>,
    ) -> Self {
        ConsumerRecorder {
            interval: IntervalState::new(task, times, reports),
            times,
            producers,
            result: ConsumerResult {
                topic: slot.topic,
                subscription: slot.subscription,
                member: slot.member,
                end_to_end: Latencies::default(),
                window: Counts::default(),
                total: Counts::default(),
                errors: HashMap::new(),
                ledger: ConsumerLedger::default(),
                foreign: 0,
            },
        }
    }

    /// Times are not known while consumers wait for their partitions; set them before load starts.
    pub fn set_times(&mut self, times: Times) {
        self.times = times;
        self.interval.times = times;
        self.interval.current = Interval::new(0);
    }

    #[inline]
    pub fn roll(&mut self, now_ns: u64) {
        self.interval.roll(now_ns);
    }

    /// See [`ProducerRecorder::follow_end`].
    pub fn follow_end(&mut self, measure_end_ns: u64) {
        if self.times.measure_end_ns != measure_end_ns && self.times.start_ns != u64::MAX {
            self.times.end_at(measure_end_ns);
        }
    }

    /// Distinct messages of this run received so far.
    pub fn unique(&self) -> u64 {
        self.result.ledger.unique
    }

    /// One message arrived at `now_ns`. Messages not sent by this run (older data in a
    /// reused topic, or not brokerbench's at all) are counted as foreign and otherwise ignored.
    #[inline]
    pub fn received(&mut self, delivery: &Delivery<'_>, now_ns: u64, run_floor_ns: u64) {
        let envelope = match Envelope::read(delivery.payload) {
            Ok(e) if e.producer < self.producers && e.intended_ns >= run_floor_ns => e,
            _ => {
                self.result.foreign += 1;
                return;
            }
        };
        let bytes = delivery.payload.len() as u64;
        let e2e = now_ns.saturating_sub(envelope.intended_ns);
        let interval = self.interval.roll(now_ns);
        interval.received += 1;
        interval.bytes_received += bytes;
        interval.end_to_end.record(e2e);
        let r = &mut self.result;
        r.total.received += 1;
        r.total.bytes_received += bytes;
        if self.times.in_window(now_ns) {
            r.window.received += 1;
            r.window.bytes_received += bytes;
        }
        if self.times.in_window(envelope.intended_ns) {
            r.end_to_end.record(e2e);
        }
        r.ledger
            .record(delivery.stream, &envelope, self.times.start_ns);
    }

    pub fn error(&mut self, kind: &str) {
        count_error(&mut self.result.errors, kind);
    }

    /// What the broker held beyond this slot's positions when the drain ended.
    pub fn unread(&mut self, unread: Option<UnreadPlaces>) {
        self.result.ledger.unread = unread;
    }

    pub fn finish(self) {
        let task = self.interval.task;
        let reports = self.interval.finish();
        let _ = reports.send(Report::ConsumerDone {
            task,
            result: Box::new(self.result),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn values_beyond_the_range_are_clamped_not_dropped() {
        let mut h = new_histogram();
        record_clamped(&mut h, 0);
        record_clamped(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
    }
}
