//! What a task sends to the collector: each finished second as it rolls over, and at the end
//! its final result, with the outages and blocks its producer went through.

use std::collections::HashMap;
use std::sync::mpsc::Sender;

use brokerbench_model::Counts;

use super::interval::{Interval, Times};
use super::latencies::Latencies;
use crate::ledger::{ConsumerLedger, ProducerLedger};

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
pub(super) struct IntervalState {
    pub(super) task: usize,
    pub(super) times: Times,
    pub(super) current: Interval,
    reports: Sender<Report>,
}

impl IntervalState {
    pub(super) fn new(task: usize, times: Times, reports: Sender<Report>) -> Self {
        IntervalState {
            task,
            times,
            current: Interval::new(0),
            reports,
        }
    }

    #[inline]
    pub(super) fn roll(&mut self, now_ns: u64) -> &mut Interval {
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

    pub(super) fn finish(mut self) -> Sender<Report> {
        let last = std::mem::replace(&mut self.current, Interval::new(0));
        let _ = self.reports.send(Report::Interval {
            task: self.task,
            interval: Box::new(last),
        });
        self.reports
    }
}

pub(super) fn count_error(errors: &mut HashMap<String, u64>, kind: &str) {
    match errors.get_mut(kind) {
        Some(n) => *n += 1,
        None => {
            errors.insert(kind.to_string(), 1);
        }
    }
}
