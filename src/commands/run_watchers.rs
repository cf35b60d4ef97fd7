//! What watches a run besides its results folder: the resource sampling, the live endpoint,
//! the signals that end it early, the live line and the phases' times, and what they measured.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use brokerbench_metrics::MetricsServer;
use brokerbench_model::{Phase, RunObserver};
use brokerbench_report::{LiveLine, OmbHeader, OmbResult};

use crate::allocations::AllocationWindow;
use crate::cli::RunArgs;
use crate::monitoring::Monitoring;
use crate::{exit, BadInput};

/// A broker process to sample, found again after a restart where that is known.
pub(super) fn watched_broker(
    process: super::run_broker::WatchedProcess,
) -> brokerbench_monitor::Target {
    let mut target = brokerbench_monitor::Target::broker(process.pid);
    if let Some(id) = process.node {
        target = target.of_node(id);
    }
    match process.refind {
        Some(refind) => target.following(refind),
        None => target,
    }
}

/// Resource sampling and the broker's metrics, unless `--no-monitor`.
pub(super) fn start_monitoring(
    args: &RunArgs,
    out: &std::path::Path,
    broker: Vec<brokerbench_monitor::Target>,
    metrics: Option<brokerbench_metrics::BrokerMetrics>,
) -> anyhow::Result<Option<Monitoring>> {
    if args.no_monitor {
        return Ok(None);
    }
    Ok(Some(Monitoring::start(
        out,
        args.sample_interval,
        broker,
        metrics,
    )?))
}

/// The live endpoint of `--metrics-listen`, fed by the monitoring.
pub(super) fn start_exposition(
    args: &RunArgs,
    monitoring: Option<&Monitoring>,
) -> anyhow::Result<Option<crate::monitoring::LiveExposition>> {
    match (args.metrics_listen, monitoring) {
        (Some(address), Some(m)) => {
            let server = MetricsServer::start(address)
                .with_context(|| format!("--metrics-listen {address}: cannot listen there"))?;
            eprintln!(
                "serving live metrics at http://{}/metrics",
                server.address()
            );
            Ok(Some(m.live_exposition(server)))
        }
        (Some(_), None) => {
            Err(BadInput("--metrics-listen needs monitoring; drop --no-monitor".into()).into())
        }
        _ => Ok(None),
    }
}

/// The flag a first Ctrl-C or SIGTERM sets to end the run early; a second one while the run
/// drains ends the process at once.
pub(super) fn stop_on_signals() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(
            signal,
            exit::INTERRUPTED as i32,
            stop.clone(),
        )?;
        signal_hook::flag::register(signal, stop.clone())?;
    }
    Ok(stop)
}

/// One line on what is about to run, and where its results go (unless `--quiet` or
/// `--json`).
pub(super) fn announce(
    args: &RunArgs,
    workload: &brokerbench_model::Workload,
    driver: &str,
    out: &std::path::Path,
) {
    if args.quiet || args.json {
        return;
    }
    let measurement = match &workload.backlog {
        None => format!("{:?}", workload.duration),
        Some(b) => format!(
            "from when consumers pause until {} wait for them, through the drain of {}% of it, and {:?} more",
            brokerbench_model::units::format_bytes_given(b.size_bytes),
            b.drain_ratio * 100.0,
            workload.duration
        ),
    };
    eprintln!(
        "running '{}' on {driver}: warm-up {:?}, measurement {measurement}; results in {}",
        workload.name,
        workload.warmup,
        out.display()
    );
}

/// What watches the run besides the results folder, the monitoring and the live endpoint.
pub(super) struct Observers {
    pub(super) live: LiveLine,
    pub(super) allocation_window: AllocationWindow,
    pub(super) phases: PhaseTimes,
    pub(super) omb: OmbResult,
}

impl Observers {
    pub(super) fn new(
        args: &RunArgs,
        workload: &brokerbench_model::Workload,
        driver: &str,
    ) -> Self {
        Observers {
            live: LiveLine::new(!args.quiet),
            allocation_window: AllocationWindow::default(),
            phases: PhaseTimes::default(),
            omb: OmbResult::new(OmbHeader {
                workload: workload.name.clone(),
                driver: driver.to_string(),
                message_size: workload.message_size,
                topics: workload.topics,
                partitions: workload.partitions_per_topic,
                producers_per_topic: workload.producers_per_topic,
                consumers_per_topic: workload.consumers_per_topic,
            }),
        }
    }
}

/// What was measured outside the engine: allocations, resources and the broker's metrics.
pub(super) fn measure(
    args: &RunArgs,
    outcome: &brokerbench_engine::RunOutcome,
    monitoring: Option<Monitoring>,
    observers: &Observers,
    sharded: bool,
) -> brokerbench_engine::Measured {
    let mut measured = brokerbench_engine::Measured {
        sharded,
        ..Default::default()
    };
    let summary = &outcome.summary;
    if args.count_allocations {
        let messages = summary.window.acknowledged.max(summary.window.sent);
        measured.allocations_per_message = observers.allocation_window.per_message(messages);
    }
    if let Some(monitoring) = monitoring {
        let total = &summary.total;
        let counted = if total.acknowledged > 0 {
            total.acknowledged
        } else {
            total.sent
        };
        let window = observers
            .phases
            .window()
            .unwrap_or(outcome.started_ns..outcome.ended_ns);
        (measured.resources, measured.broker_metrics) =
            monitoring.finish(window, outcome.started_ns, counted);
    }
    measured
}

/// Notes when the measurement window opened and closed.
#[derive(Debug, Default)]
pub(super) struct PhaseTimes {
    measurement: Option<u64>,
    drain: Option<u64>,
}

impl PhaseTimes {
    pub(super) fn window(&self) -> Option<std::ops::Range<u64>> {
        Some(self.measurement?..self.drain?)
    }
}

impl RunObserver for PhaseTimes {
    fn phase_started(&mut self, phase: Phase, at_ns: u64) {
        match phase {
            Phase::Measurement => self.measurement = Some(at_ns),
            Phase::Drain => self.drain = Some(at_ns),
            Phase::Warmup => {}
        }
    }
    fn interval(&mut self, _row: &brokerbench_model::IntervalRow) {}
}
