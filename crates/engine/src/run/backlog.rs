//! Backlog mode, driven by the collector: pause consumers when the window opens, resume them
//! once the backlog asked for waits, and end the window `duration` after it is drained — the
//! order of OMB's `consumerBacklogSizeGB` runs. Producers keep their rate throughout.
//!
//! The backlog is read from the one-second rows (acknowledged × subscriptions − received,
//! cumulative), so each decision comes up to two seconds after the moment it describes; the
//! report gives what was actually built.

use super::*;
use brokerbench_model::Backlog;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Stage {
    /// Warm-up: consumers run.
    Before,
    Building,
    /// Consumers resumed at this row end with this many received so far.
    Draining {
        row_end_ns: u64,
        received: u64,
    },
    Drained,
}

pub(super) struct BacklogControl {
    backlog: Backlog,
    message_size: u64,
    duration_ns: u64,
    start_ns: u64,
    stage: Stage,
    report: BacklogReport,
}

impl BacklogControl {
    pub(super) fn new(workload: &Workload, start_ns: u64) -> Option<Self> {
        let backlog = workload.backlog?;
        Some(BacklogControl {
            backlog,
            message_size: workload.message_size,
            duration_ns: workload.duration.as_nanos() as u64,
            start_ns,
            stage: Stage::Before,
            report: BacklogReport {
                size_bytes: backlog.size_bytes,
                drained_at_messages: backlog.drained_at(workload.message_size),
                ..BacklogReport::default()
            },
        })
    }

    fn seconds(&self, at_ns: u64) -> f64 {
        at_ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    /// The window opened: consumers pause.
    pub(super) fn window_opened(&mut self, shared: &Shared, now_ns: u64) {
        shared.consumers_paused.store(true, Ordering::Relaxed);
        self.report.paused_s = self.seconds(now_ns);
        self.stage = Stage::Building;
    }

    /// A row of the window was written: resume consumers or close the window when due.
    pub(super) fn row(
        &mut self,
        shared: &Shared,
        backlog: i64,
        received_so_far: u64,
        row_end_ns: u64,
        now_ns: u64,
    ) {
        let waiting = backlog.max(0) as u64;
        match self.stage {
            Stage::Building
                if waiting.saturating_mul(self.message_size) >= self.backlog.size_bytes =>
            {
                shared.consumers_paused.store(false, Ordering::Relaxed);
                self.report.resumed_s = Some(self.seconds(now_ns));
                self.report.built_messages = waiting;
                self.report.built_bytes = waiting * self.message_size;
                self.stage = Stage::Draining {
                    row_end_ns,
                    received: received_so_far,
                };
            }
            Stage::Draining {
                row_end_ns: resumed_row_end,
                received,
            } if !self.backlog.waits_for_drain() || waiting <= self.report.drained_at_messages => {
                self.report.drained_s = Some(self.seconds(now_ns));
                let seconds = row_end_ns.saturating_sub(resumed_row_end) as f64 / 1e9;
                if seconds > 0.0 {
                    self.report.drain_received_per_s =
                        Some(received_so_far.saturating_sub(received) as f64 / seconds);
                }
                shared
                    .measure_end_ns
                    .store(now_ns + self.duration_ns, Ordering::Relaxed);
                self.stage = Stage::Drained;
            }
            _ => {}
        }
    }

    /// The window closed (at its end, or early): consumers must take part in the drain.
    pub(super) fn window_closed(&mut self, shared: &Shared) {
        shared.consumers_paused.store(false, Ordering::Relaxed);
    }

    pub(super) fn report(self) -> BacklogReport {
        self.report
    }
}
