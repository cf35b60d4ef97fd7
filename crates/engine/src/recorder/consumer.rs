//! A consumer task's recorder: what arrived and when, its end-to-end latency, and the ledger
//! of the run's messages it received.

use std::collections::HashMap;
use std::sync::mpsc::Sender;

use brokerbench_driver::{ConsumerSlot, Delivery, Envelope};
use brokerbench_model::Counts;

use super::interval::{Interval, Times};
use super::latencies::Latencies;
use super::report::{count_error, ConsumerResult, IntervalState, Report};
use crate::ledger::{ConsumerLedger, UnreadPlaces};

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

    /// See [`ProducerRecorder::follow_end`](super::producer::ProducerRecorder::follow_end).
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
