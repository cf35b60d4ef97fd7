//! `brokerbench run`: validate, reach the broker, create the results folder, then start the
//! clock; write results as the run goes; print the summary; exit by what happened.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use brokerbench_engine::{Clock, RunControl};
use brokerbench_metrics::MetricsServer;
use brokerbench_model::redact::redact_assignment;
use brokerbench_model::{load_specs_from, Payload, RunStatus, SpecInput, WindowHistograms};
use brokerbench_model::{Phase, RunObserver};
use brokerbench_report::{
    folder_name, terminal_summary, BrokerInfo, LiveLine, Manifest, OmbHeader, OmbResult,
    ResultsFolder, Tee, OMB_RESULT_FILE,
};

use super::run_broker::{broker_target, metrics_scraper, uses_managed};
use super::run_shard::{check_share, resolve_sharding, ShardPlan, LEDGER_FILE, SHARD_FILE};
use crate::allocations::AllocationWindow;
use crate::cli::RunArgs;
use crate::families::REGISTRY;
use crate::monitoring::Monitoring;
use crate::{exit, BadInput};

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

/// What the engine needs of a shard of a run: its place, and the gate where the shards meet.
fn engine_sharding<'a>(
    sharding: Option<&ShardPlan>,
    gate: Option<&'a mut crate::shards::TcpGate>,
) -> Option<brokerbench_engine::Sharding<'a>> {
    match (sharding, gate) {
        (Some(s), Some(gate)) => Some(brokerbench_engine::Sharding {
            shard: s.shard,
            gate,
        }),
        _ => None,
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

/// The workload and driver files (or the driver from standard input), with `--set` applied
/// and everything validated.
fn load(args: &RunArgs) -> anyhow::Result<brokerbench_model::Specs> {
    let from_stdin = match &args.driver {
        Some(path) if path.as_os_str() == STDIN_DRIVER => Some(driver_from_stdin()?),
        _ => None,
    };
    let driver = match (&from_stdin, &args.driver) {
        (Some(value), _) => SpecInput::Inline {
            name: STDIN_DRIVER_NAME,
            value,
        },
        (None, path) => path.as_deref().into(),
    };
    let mut overrides = args.overrides.clone();
    overrides.extend(faults_override(&args.faults)?);
    Ok(load_specs_from(
        &REGISTRY.schemas(),
        args.workload.as_deref().into(),
        driver,
        &overrides,
    )?)
}

/// `--fault` flags as one `faults=[…]` override: they replace the workload file's faults.
fn faults_override(flags: &[String]) -> anyhow::Result<Option<String>> {
    if flags.is_empty() {
        return Ok(None);
    }
    let faults = flags
        .iter()
        .map(|flag| brokerbench_model::faults::fault_from_flag(flag))
        .collect::<Result<Vec<_>, _>>()
        .map_err(BadInput)?;
    Ok(Some(format!("faults={}", serde_json::Value::Array(faults))))
}

/// What the files name outside themselves: the folder of `--omb-result` and the payload
/// file; prints the notes reading the files left.
fn check_inputs(args: &RunArgs, specs: &brokerbench_model::Specs) -> anyhow::Result<()> {
    if let Some(path) = &args.omb_result {
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        if !parent.is_dir() {
            return Err(BadInput(format!(
                "--omb-result {}: the folder '{}' does not exist; create it or choose another file",
                path.display(),
                parent.display()
            ))
            .into());
        }
    }
    if !args.quiet && !args.json {
        for note in &specs.notes {
            eprintln!("note: {note}");
        }
    }
    check_payload(&specs.workload, &specs.workload_source)
}

/// A payload file must be readable, and a binary one exactly one message long.
fn check_payload(workload: &brokerbench_model::Workload, source: &str) -> anyhow::Result<()> {
    if let Payload::Binary { path } = &workload.payload {
        let length = std::fs::metadata(path)
            .map_err(|e| {
                BadInput(format!(
                    "{source}: field `payload.path`: cannot read '{}': {e}",
                    path.display()
                ))
            })?
            .len();
        if length != workload.message_size {
            return Err(BadInput(format!(
                "{source}: field `payload.path`: '{}' is {length} bytes, and every message is that file: set message_size: {length}B (it is {}B)",
                path.display(),
                workload.message_size
            ))
            .into());
        }
    }
    if let Payload::File { path, .. } = &workload.payload {
        std::fs::metadata(path).map_err(|e| {
            BadInput(format!(
                "{source}: field `payload.path`: cannot read '{}': {e}; give the path of a file with one record per line (brokerbench data generate writes one)",
                path.display()
            ))
        })?;
    }
    Ok(())
}

/// A shard meets the others at the start line through the coordinator.
fn open_gate(
    sharding: Option<&ShardPlan>,
    args: &RunArgs,
    workload: &brokerbench_model::Workload,
    driver: &str,
) -> anyhow::Result<Option<crate::shards::TcpGate>> {
    let Some(s) = sharding else {
        return Ok(None);
    };
    let settings = crate::shards::GateSettings {
        shard: s.shard,
        run_id: s.run_id.clone(),
        coordinator: s.coordinator.clone(),
        timeout: args.shard_timeout,
        identity: crate::shards::identity(&serde_json::to_value(workload)?, driver),
    };
    Ok(Some(crate::shards::TcpGate::new(settings, None)?))
}

/// `results/<time>-<workload>` (with the shard's place), free.
fn default_folder(started_ns: u64, workload: &str, sharding: Option<&ShardPlan>) -> PathBuf {
    let mut name = folder_name(started_ns, workload);
    if let Some(s) = sharding {
        name.push_str(&format!("-shard-{}-of-{}", s.shard.index, s.shard.count));
    }
    free_folder(&PathBuf::from("results"), &name)
}

/// The results folder with its manifest: what runs, from which files, against which broker.
/// The broker as the manifest gives it: the version the connected driver reports where the
/// broker is not managed (no version otherwise), or where it says more than the managed
/// broker's (Redis: `7.0.15 (appendonly yes, appendfsync always)`).
fn described(mut broker: BrokerInfo, driver: &dyn brokerbench_driver::Driver) -> BrokerInfo {
    let told = driver.broker_version();
    let adds = match (&broker.version, &told) {
        (None, Some(_)) => true,
        (Some(known), Some(told)) => told.len() > known.len() && told.starts_with(known.as_str()),
        _ => false,
    };
    if adds {
        broker.version = told;
    }
    broker
}

fn create_folder(
    out: &std::path::Path,
    specs: &brokerbench_model::Specs,
    broker: BrokerInfo,
    run_id: &str,
    started_ns: u64,
) -> anyhow::Result<ResultsFolder> {
    let mut manifest = Manifest::new(env!("CARGO_PKG_VERSION"), run_id.to_string(), started_ns);
    manifest.command = std::env::args().map(|a| redact_assignment(&a)).collect();
    manifest.workload = serde_json::to_value(&specs.workload)?;
    manifest.driver = specs.driver.redacted();
    manifest.workload_source = specs.workload_source.clone();
    manifest.driver_source = specs.driver_source.clone();
    manifest.input_notes = specs.notes.clone();
    manifest.broker = Some(broker);
    ResultsFolder::create(out, manifest)
        .with_context(|| format!("creating the results folder '{}'", out.display()))
}

/// A broker process to sample, found again after a restart where that is known.
fn watched_broker(process: super::run_broker::WatchedProcess) -> brokerbench_monitor::Target {
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
fn start_monitoring(
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
fn start_exposition(
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
fn stop_on_signals() -> anyhow::Result<Arc<AtomicBool>> {
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
fn announce(
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
struct Observers {
    live: LiveLine,
    allocation_window: AllocationWindow,
    phases: PhaseTimes,
    omb: OmbResult,
}

impl Observers {
    fn new(args: &RunArgs, workload: &brokerbench_model::Workload, driver: &str) -> Self {
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
fn measure(
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

/// window.hlog: the whole window's histograms.
fn write_window_histograms(
    folder: &mut ResultsFolder,
    outcome: &brokerbench_engine::RunOutcome,
    phases: &PhaseTimes,
) {
    let Some(window) = phases.window() else {
        return;
    };
    let length = window.end.saturating_sub(window.start);
    if let Err(e) = folder.write_window_histograms(&outcome.histograms, window.start, length) {
        eprintln!("warning: {e}");
    }
}

/// The summary on the terminal (or as JSON), and where the results and report are.
fn print_outcome(
    args: &RunArgs,
    summary: &brokerbench_model::Summary,
    out: &std::path::Path,
    report: Option<PathBuf>,
) -> anyhow::Result<()> {
    if args.json {
        println!("{}", serde_json::to_string_pretty(summary)?);
    } else {
        print!("{}", terminal_summary(summary));
        println!("results: {}", out.display());
        if let Some(report) = report {
            println!("report:  {}", report.display());
        }
    }
    Ok(())
}

/// Writes `value` as one line of JSON into the results folder.
fn write_json(
    folder: &ResultsFolder,
    name: &str,
    value: &impl serde::Serialize,
) -> anyhow::Result<()> {
    let mut bytes = serde_json::to_vec(value)?;
    bytes.push(b'\n');
    folder.write_file(name, &bytes)?;
    Ok(())
}

/// `--driver -`: the driver file is read from standard input.
pub const STDIN_DRIVER: &str = "-";
/// How a driver read from standard input is named in messages and in the manifest.
const STDIN_DRIVER_NAME: &str = "driver file on standard input";

/// Reads the driver file's text from standard input. A study hands a driver that holds
/// credentials to its runs this way, so that they are never written to a file.
fn driver_from_stdin() -> anyhow::Result<brokerbench_model::yaml::Value> {
    use std::io::Read as _;
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .context("--driver -: reading the driver file from standard input")?;
    brokerbench_model::yaml::from_str(&text).map_err(|e| {
        BadInput(format!(
            "--driver -: the {STDIN_DRIVER_NAME} is not valid YAML: {e}"
        ))
        .into()
    })
}

/// Writes omb-result.json into the results folder, and to `copy` when given; a file that
/// cannot be written is a warning, never a failed run.
fn write_omb_result(
    folder: &ResultsFolder,
    omb: &OmbResult,
    histograms: &WindowHistograms,
    copy: Option<&std::path::Path>,
) {
    let mut bytes = serde_json::to_vec_pretty(&omb.to_json(histograms)).unwrap_or_default();
    bytes.push(b'\n');
    if let Err(e) = folder.write_file(OMB_RESULT_FILE, &bytes) {
        eprintln!("warning: {e}");
    }
    if let Some(path) = copy {
        if let Err(e) = std::fs::write(path, &bytes) {
            eprintln!("warning: --omb-result {}: {e}", path.display());
        }
    }
}

/// Writes report.html into the results folder; a report that cannot be built is a warning,
/// never a failed run.
fn write_report(out: &std::path::Path) -> Option<PathBuf> {
    brokerbench_report::html::write_folder_report(out)
        .map_err(|e| eprintln!("warning: no report.html: {e}"))
        .ok()
}

/// Notes when the measurement window opened and closed.
#[derive(Debug, Default)]
struct PhaseTimes {
    measurement: Option<u64>,
    drain: Option<u64>,
}

impl PhaseTimes {
    fn window(&self) -> Option<std::ops::Range<u64>> {
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

/// `parent/name`, or `parent/name-2`, `-3`, … when runs started in the same second.
fn free_folder(parent: &std::path::Path, name: &str) -> PathBuf {
    let taken = |p: &PathBuf| std::fs::read_dir(p).is_ok_and(|mut d| d.next().is_some());
    let first = parent.join(name);
    if !taken(&first) {
        return first;
    }
    (2..)
        .map(|n| parent.join(format!("{name}-{n}")))
        .find(|p| !taken(p))
        .expect("some suffix is free")
}

/// A short id that differs between runs (time and process id mixed).
pub(super) fn run_id(now_ns: u64) -> String {
    let mut x = now_ns ^ ((std::process::id() as u64) << 32);
    // splitmix64 finalizer: spreads nearby inputs over the whole range.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d049bb133111eb);
    x ^= x >> 31;
    format!("{:08x}", x as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_default_folder_gets_the_next_free_suffix() {
        let parent = tempfile::tempdir().unwrap();
        let first = free_folder(parent.path(), "20261124-003122-quickstart");
        assert_eq!(first, parent.path().join("20261124-003122-quickstart"));
        // An empty folder of that name is still free; one with a file in it is taken.
        std::fs::create_dir_all(&first).unwrap();
        assert_eq!(
            free_folder(parent.path(), "20261124-003122-quickstart"),
            first
        );
        std::fs::write(first.join("manifest.json"), "{}").unwrap();
        let second = free_folder(parent.path(), "20261124-003122-quickstart");
        assert_eq!(second, parent.path().join("20261124-003122-quickstart-2"));
        std::fs::create_dir_all(&second).unwrap();
        std::fs::write(second.join("manifest.json"), "{}").unwrap();
        assert_eq!(
            free_folder(parent.path(), "20261124-003122-quickstart"),
            parent.path().join("20261124-003122-quickstart-3")
        );
    }
}
