//! `brokerbench run`: validate, reach the broker, create the results folder, then start the
//! clock; write results as the run goes; print the summary; exit by what happened.

use std::process::ExitCode;

use anyhow::Context;
use brokerbench_engine::{Clock, RunControl};
use brokerbench_model::{RunObserver, RunStatus};
use brokerbench_report::{ResultsFolder, Tee};

use super::run_broker::{broker_target, metrics_scraper, uses_managed};
use super::run_inputs::{check_inputs, load, run_id};
use super::run_results::{
    create_folder, default_folder, described, print_outcome, write_json, write_omb_result,
    write_report, write_window_histograms,
};
use super::run_shard::{
    check_share, engine_sharding, open_gate, resolve_sharding, ShardPlan, LEDGER_FILE, SHARD_FILE,
};
use super::run_watchers::{
    announce, measure, start_exposition, start_monitoring, stop_on_signals, watched_broker,
    Observers,
};
use crate::cli::RunArgs;
use crate::exit;
use crate::monitoring::Monitoring;

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(refusal) = super::find_study::rate_find_is_a_study(&args) {
        return Err(refusal.into());
    }
    let specs = load(&args)?;
    let workload = specs.workload.clone();
    check_inputs(&args, &specs)?;
    crate::dashboard::check(&args.dashboard)?;
    let sharding = resolve_sharding(&args, &workload, &specs.workload_source)?;
    // Before the managed broker is started: a fault it cannot take starts nothing.
    super::run_faults::check(&specs, uses_managed(&specs.driver)?, sharding.is_some())?;
    let target = broker_target(&specs.driver, &args)?;
    let managed = target.broker.managed;
    let mut driver = target.driver;
    if let Some(s) = &sharding {
        check_share(s.shard, &workload, driver.subscriptions_per_topic())?;
    }
    let metrics = metrics_scraper(&specs, &args, target.metrics_urls, target.metrics)?;
    driver.connect()?;
    let mut gate = open_gate(sharding.as_ref(), &args, &workload, driver.name())?;
    let clock = Clock::process();
    let started_ns = clock.now_ns();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_folder(started_ns, &workload.name, sharding.as_ref()));
    // Before the folder is made, so that a port already taken leaves nothing behind.
    let live = crate::dashboard::start(&args.dashboard, &out)?;
    let run_id = args.run_id.clone().unwrap_or_else(|| run_id(started_ns));
    let led = driver.leader_object(&run_id, &workload.name);
    let faults = super::run_faults::injector(&specs, managed, &out, led);
    let broker = described(target.broker, driver.as_ref());
    let mut folder = create_folder(&out, &specs, broker, &run_id, started_ns)?;
    if let Some(injector) = &faults {
        folder.mark_faults(injector.marks());
    }
    if let Some(s) = &sharding {
        // At once, so that the folder of a shard that fails is known as one.
        write_json(&folder, SHARD_FILE, &s.file(&run_id))?;
    }
    let broker = target.processes.into_iter().map(watched_broker).collect();
    let monitoring = start_monitoring(&args, &out, broker, metrics)?;
    let exposition = start_exposition(&args, monitoring.as_ref())?;
    let control = RunControl {
        run_id,
        stop: stop_on_signals()?,
    };
    announce(&args, &workload, driver.name(), &out);
    let mut watchers = Watchers {
        observers: Observers::new(&args, &workload, driver.name()),
        exposition,
        monitoring,
        folder,
        faults,
    };
    if args.count_allocations {
        crate::allocations::enable();
    }
    let result = {
        let mut tee = Tee::new(watchers.list());
        let sharding = engine_sharding(sharding.as_ref(), gate.as_mut());
        brokerbench_engine::run_shard(&workload, driver.as_mut(), &mut tee, &control, sharding)
    };
    watchers.observers.live.finish();
    let recorded = match result {
        Ok(outcome) => record(
            &args,
            outcome,
            watchers,
            sharding.as_ref(),
            gate.as_ref(),
            &control.run_id,
            &out,
        ),
        Err(error) => Err(record_failure(watchers.folder, &out, &clock, error)),
    };
    if let Some(live) = live {
        let (outcome, good) = match &recorded {
            Ok(code) if *code == ExitCode::from(exit::CLEAN) => ("The run is over.", true),
            Ok(_) => (
                "The run is over, with problems: its notes say which.",
                false,
            ),
            Err(_) => (
                "The run failed; the terminal and manifest.json say why.",
                false,
            ),
        };
        live.dashboard.end(outcome, good);
    }
    recorded
}

/// Everything that watches the run: the results folder, the observers, the monitoring, the
/// live endpoint and the fault injector. The fields are in the order they are dropped in:
/// the reverse of the order they started in.
struct Watchers {
    observers: Observers,
    exposition: Option<crate::monitoring::LiveExposition>,
    monitoring: Option<Monitoring>,
    folder: ResultsFolder,
    faults: Option<brokerbench_faults::Injector>,
}

impl Watchers {
    /// All of them as the observers of the engine's tee, the results folder first.
    fn list(&mut self) -> Vec<&mut dyn RunObserver> {
        let mut list: Vec<&mut dyn RunObserver> = vec![
            &mut self.folder,
            &mut self.observers.live,
            &mut self.observers.allocation_window,
            &mut self.observers.phases,
            &mut self.observers.omb,
        ];
        if let Some(e) = self.exposition.as_mut() {
            list.push(e);
        }
        if let Some(m) = self.monitoring.as_mut() {
            list.push(m);
        }
        if let Some(f) = self.faults.as_mut() {
            list.push(f);
        }
        list
    }
}

/// A run the engine could not carry out: its folder marked failed (with a report of what
/// there is), and the error to return.
fn record_failure(
    folder: ResultsFolder,
    out: &std::path::Path,
    clock: &Clock,
    error: brokerbench_engine::EngineError,
) -> anyhow::Error {
    let message = crate::error_text(&error);
    let _ = folder.mark_failed(&message, clock.now_ns());
    write_report(out);
    error.into()
}

/// After the engine's run: the summary completed with what was measured outside the engine,
/// the rest of the results folder written, the summary printed, and the exit code by how the
/// run went.
fn record(
    args: &RunArgs,
    mut outcome: brokerbench_engine::RunOutcome,
    mut watchers: Watchers,
    sharding: Option<&ShardPlan>,
    gate: Option<&crate::shards::TcpGate>,
    run_id: &str,
    out: &std::path::Path,
) -> anyhow::Result<ExitCode> {
    let sharded = sharding.is_some();
    let measured = measure(
        args,
        &outcome,
        watchers.monitoring,
        &watchers.observers,
        sharded,
    );
    brokerbench_engine::complete(&mut outcome.summary, measured);
    super::run_faults::measure_into(watchers.faults, &mut outcome);
    drop(watchers.exposition);
    write_window_histograms(&mut watchers.folder, &outcome, &watchers.observers.phases);
    if let (Some(s), Some(gate)) = (sharding, gate) {
        let phases = &watchers.observers.phases;
        let file = s.finished_file(gate, &outcome, phases.window(), run_id);
        write_json(&watchers.folder, LEDGER_FILE, &outcome.ledger)?;
        write_json(&watchers.folder, SHARD_FILE, &file)?;
    }
    let omb_result = args.omb_result.as_deref();
    let omb = &watchers.observers.omb;
    write_omb_result(&watchers.folder, omb, &outcome.histograms, omb_result);
    let summary = &outcome.summary;
    watchers
        .folder
        .finish(summary, outcome.ended_ns)
        .with_context(|| format!("writing results to '{}'", out.display()))?;
    let report = write_report(out);
    print_outcome(args, summary, out, report)?;
    Ok(ExitCode::from(match summary.status {
        RunStatus::Interrupted => exit::INTERRUPTED,
        _ if summary.is_clean() || args.exit_zero_on_errors => exit::CLEAN,
        _ => exit::WITH_ERRORS,
    }))
}
