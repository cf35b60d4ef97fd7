//! A producer task's recorder: what was sent, acknowledged or failed and when, the spans
//! without acknowledgements, and the outages and blocks its client reported.

use std::collections::HashMap;
use std::sync::mpsc::Sender;

use brokerbench_driver::Ack;
use brokerbench_model::Counts;

use super::interval::Times;
use super::latencies::Latencies;
use super::report::{
    count_error, BlockSpan, IntervalState, OutageSpan, ProducerResult, Report, ACK_GAP_NS,
};
use crate::ledger::ProducerLedger;

/// Error kind for messages due in the window that a producer behind schedule never sent.
pub(crate) const NOT_SENT: &str = "not_sent_behind_schedule";

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
