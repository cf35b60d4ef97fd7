//! `brokerbench run`: validate, reach the broker, create the results folder, then start the
//! clock; write results as the run goes; print the summary; exit by what happened.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;
use brokerbench_driver::Driver;
use brokerbench_engine::{Clock, RunControl};
use brokerbench_metrics::{Endpoint, EndpointSettings, MetricSet, Scraper};
use brokerbench_model::redact::redact_assignment;
use brokerbench_model::{
    load_specs_from, DriverConfig, Payload, RunStatus, SpecInput, WindowHistograms,
};
use brokerbench_report::{
    folder_name, terminal_summary, BrokerInfo, LiveLine, Manifest, OmbHeader, OmbResult,
    ResultsFolder, Tee, OMB_RESULT_FILE,
};

use crate::allocations::AllocationWindow;
use crate::cli::RunArgs;
use crate::families::REGISTRY;
use crate::monitoring::Monitoring;
use crate::{exit, BadInput};
use brokerbench_metrics::MetricsServer;
use brokerbench_model::{Phase, RunObserver};

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(refusal) = super::find_study::rate_find_is_a_study(&args) {
        return Err(refusal.into());
    }
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
    let specs = load_specs_from(
        &REGISTRY.schemas(),
        args.workload.as_deref().into(),
        driver,
        &args.overrides,
    )?;
    let workload = specs.workload.clone();
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
    if let Payload::Binary { path } = &workload.payload {
        let length = std::fs::metadata(path)
            .map_err(|e| {
                BadInput(format!(
                    "{}: field `payload.path`: cannot read '{}': {e}",
                    specs.workload_source,
                    path.display()
                ))
            })?
            .len();
        if length != workload.message_size {
            return Err(BadInput(format!(
                "{}: field `payload.path`: '{}' is {length} bytes, and every message is that file: set message_size: {length}B (it is {}B)",
                specs.workload_source,
                path.display(),
                workload.message_size
            ))
            .into());
        }
    }
    if let Payload::File { path, .. } = &workload.payload {
        std::fs::metadata(path).map_err(|e| {
            BadInput(format!(
                "{}: field `payload.path`: cannot read '{}': {e}; give the path of a file with one record per line (brokerbench data generate writes one)",
                specs.workload_source,
                path.display()
            ))
        })?;
    }

    let sharding = resolve_sharding(&args, &workload, &specs.workload_source)?;

    let BrokerTarget {
        mut driver,
        broker,
        broker_pid,
        refind,
        metrics_url,
        metrics,
    } = broker_target(&specs.driver, &args)?;
    if let Some(s) = &sharding {
        check_share(s.shard, &workload, driver.subscriptions_per_topic())?;
    }
    let metrics = metrics_scraper(&specs, &args, metrics_url, metrics)?;
    driver.connect()?;
    let mut gate = match &sharding {
        Some(s) => Some(crate::shards::TcpGate::new(
            crate::shards::GateSettings {
                shard: s.shard,
                run_id: s.run_id.clone(),
                coordinator: s.coordinator.clone(),
                timeout: args.shard_timeout,
                identity: crate::shards::identity(&serde_json::to_value(&workload)?, driver.name()),
            },
            None,
        )?),
        None => None,
    };

    let clock = Clock::process();
    let started_ns = clock.now_ns();
    let out = args.out.clone().unwrap_or_else(|| {
        let mut name = folder_name(started_ns, &workload.name);
        if let Some(s) = &sharding {
            name.push_str(&format!("-shard-{}-of-{}", s.shard.index, s.shard.count));
        }
        free_folder(&PathBuf::from("results"), &name)
    });
    let run_id = match &args.run_id {
        Some(id) => id.clone(),
        None => run_id(started_ns),
    };
    let mut manifest = Manifest::new(env!("CARGO_PKG_VERSION"), run_id.clone(), started_ns);
    manifest.command = std::env::args().map(|a| redact_assignment(&a)).collect();
    manifest.workload = serde_json::to_value(&workload)?;
    manifest.driver = specs.driver.redacted();
    manifest.workload_source = specs.workload_source.clone();
    manifest.driver_source = specs.driver_source.clone();
    manifest.input_notes = specs.notes.clone();
    manifest.broker = Some(broker);
    let mut folder = ResultsFolder::create(&out, manifest)
        .with_context(|| format!("creating the results folder '{}'", out.display()))?;
    if let Some(s) = &sharding {
        // At once, so that the folder of a shard that fails is known as one.
        write_json(&folder, SHARD_FILE, &s.file(&run_id))?;
    }

    let mut monitoring = if args.no_monitor {
        None
    } else {
        let broker = broker_pid.map(|pid| {
            let target = brokerbench_monitor::Target::broker(pid);
            match refind {
                Some(refind) => target.following(refind),
                None => target,
            }
        });
        Some(Monitoring::start(
            &out,
            args.sample_interval,
            broker,
            metrics,
        )?)
    };
    let mut exposition = match (args.metrics_listen, &monitoring) {
        (Some(address), Some(m)) => {
            let server = MetricsServer::start(address)
                .with_context(|| format!("--metrics-listen {address}: cannot listen there"))?;
            eprintln!(
                "serving live metrics at http://{}/metrics",
                server.address()
            );
            Some(m.live_exposition(server))
        }
        (Some(_), None) => {
            return Err(
                BadInput("--metrics-listen needs monitoring; drop --no-monitor".into()).into(),
            )
        }
        _ => None,
    };

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second Ctrl-C while draining ends the process at once.
        signal_hook::flag::register_conditional_shutdown(
            signal,
            exit::INTERRUPTED as i32,
            stop.clone(),
        )?;
        signal_hook::flag::register(signal, stop.clone())?;
    }
    let control = RunControl { run_id, stop };
    if !args.quiet && !args.json {
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
            "running '{}' on {}: warm-up {:?}, measurement {measurement}; results in {}",
            workload.name,
            driver.name(),
            workload.warmup,
            out.display()
        );
    }
    let mut live = LiveLine::new(!args.quiet);
    let mut allocation_window = AllocationWindow::default();
    let mut phases = PhaseTimes::default();
    let mut omb = OmbResult::new(OmbHeader {
        workload: workload.name.clone(),
        driver: driver.name().to_string(),
        message_size: workload.message_size,
        topics: workload.topics,
        partitions: workload.partitions_per_topic,
        producers_per_topic: workload.producers_per_topic,
        consumers_per_topic: workload.consumers_per_topic,
    });
    if args.count_allocations {
        crate::allocations::enable();
    }
    let result = {
        let mut observers: Vec<&mut dyn RunObserver> = vec![
            &mut folder,
            &mut live,
            &mut allocation_window,
            &mut phases,
            &mut omb,
        ];
        if let Some(e) = exposition.as_mut() {
            observers.push(e);
        }
        if let Some(m) = monitoring.as_mut() {
            observers.push(m);
        }
        let mut tee = Tee::new(observers);
        let sharding = match (&sharding, gate.as_mut()) {
            (Some(s), Some(gate)) => Some(brokerbench_engine::Sharding {
                shard: s.shard,
                gate,
            }),
            _ => None,
        };
        brokerbench_engine::run_shard(&workload, driver.as_mut(), &mut tee, &control, sharding)
    };
    live.finish();
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(error) => {
            let message = crate::error_text(&error);
            let _ = folder.mark_failed(&message, clock.now_ns());
            write_report(&out);
            return Err(error.into());
        }
    };
    let mut outcome = outcome;
    let mut measured = brokerbench_engine::Measured {
        sharded: sharding.is_some(),
        ..Default::default()
    };
    if args.count_allocations {
        let summary = &outcome.summary;
        measured.allocations_per_message =
            allocation_window.per_message(summary.window.acknowledged.max(summary.window.sent));
    }
    if let Some(monitoring) = monitoring {
        let total = &outcome.summary.total;
        let counted = if total.acknowledged > 0 {
            total.acknowledged
        } else {
            total.sent
        };
        let window = phases
            .window()
            .unwrap_or(outcome.started_ns..outcome.ended_ns);
        (measured.resources, measured.broker_metrics) =
            monitoring.finish(window, outcome.started_ns, counted);
    }
    brokerbench_engine::complete(&mut outcome.summary, measured);
    drop(exposition);
    let summary = &outcome.summary;
    if let Some(window) = phases.window() {
        if let Err(e) = folder.write_window_histograms(
            &outcome.histograms,
            window.start,
            window.end.saturating_sub(window.start),
        ) {
            eprintln!("warning: {e}");
        }
    }
    if let (Some(s), Some(gate)) = (&sharding, &gate) {
        let window = phases.window();
        let shard_file = ShardFile {
            clock: gate.clock(),
            producers: outcome.ledger.producers.iter().map(|p| p.id).collect(),
            consumers: outcome
                .ledger
                .consumers
                .iter()
                .map(|c| [c.topic, c.subscription, c.member])
                .collect(),
            started_ns: outcome.started_ns,
            window_start_ns: window.as_ref().map(|w| w.start),
            window_end_ns: window.as_ref().map(|w| w.end),
            lost_shards: gate.lost(),
            ..s.file(&control.run_id)
        };
        write_json(&folder, LEDGER_FILE, &outcome.ledger)?;
        write_json(&folder, SHARD_FILE, &shard_file)?;
    }
    write_omb_result(
        &folder,
        &omb,
        &outcome.histograms,
        args.omb_result.as_deref(),
    );
    folder
        .finish(summary, outcome.ended_ns)
        .with_context(|| format!("writing results to '{}'", out.display()))?;
    let report = write_report(&out);
    if args.json {
        println!("{}", serde_json::to_string_pretty(summary)?);
    } else {
        print!("{}", terminal_summary(summary));
        println!("results: {}", out.display());
        if let Some(report) = report {
            println!("report:  {}", report.display());
        }
    }
    Ok(ExitCode::from(match summary.status {
        RunStatus::Interrupted => exit::INTERRUPTED,
        _ if summary.is_clean() || args.exit_zero_on_errors => exit::CLEAN,
        _ => exit::WITH_ERRORS,
    }))
}

/// shard.json: which shard a folder is, and what `brokerbench merge` needs beside the
/// ordinary files.
pub const SHARD_FILE: &str = "shard.json";
/// ledger.json: a shard's delivery ledger (acknowledged and received sequences, as bits).
pub const LEDGER_FILE: &str = "ledger.json";

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ShardFile {
    pub shard: u32,
    pub shards: u32,
    pub run_id: String,
    pub coordinator: String,
    /// This shard's clock against shard 0's.
    pub clock: crate::shards::ClockEstimate,
    pub host: String,
    /// Global producer ids this shard ran.
    pub producers: Vec<u32>,
    /// (topic, subscription, member) of each consumer this shard ran.
    pub consumers: Vec<[u32; 3]>,
    /// Start of warm-up, ns since the UNIX epoch on this shard's clock.
    pub started_ns: u64,
    /// The measurement window on this shard's clock.
    pub window_start_ns: Option<u64>,
    pub window_end_ns: Option<u64>,
    /// Shards that left before they finished (written by shard 0).
    #[serde(default)]
    pub lost_shards: Vec<u32>,
}

/// The shard this run is, from the flags and the environment; None for a whole run.
struct ShardPlan {
    shard: brokerbench_engine::shard::Shard,
    run_id: String,
    coordinator: String,
}

impl ShardPlan {
    /// shard.json as known before the run.
    fn file(&self, run_id: &str) -> ShardFile {
        ShardFile {
            shard: self.shard.index,
            shards: self.shard.count,
            run_id: run_id.to_string(),
            coordinator: self.coordinator.clone(),
            clock: Default::default(),
            host: brokerbench_report::Host::detect().hostname,
            producers: Vec::new(),
            consumers: Vec::new(),
            started_ns: 0,
            window_start_ns: None,
            window_end_ns: None,
            lost_shards: Vec::new(),
        }
    }
}

/// A shard with no producer and no consumer of the workload is a mistake in N.
fn check_share(
    shard: brokerbench_engine::shard::Shard,
    workload: &brokerbench_model::Workload,
    subscriptions: u32,
) -> anyhow::Result<()> {
    let (producers, consumers) = shard.share(workload, subscriptions);
    if producers == 0 && consumers == 0 {
        let slots = brokerbench_engine::shard::consumer_slots(workload, subscriptions);
        let most = (workload.producer_count() as usize).max(slots);
        return Err(BadInput(format!(
            "--shard {shard}: this shard would have nothing to do: the workload has {} producer(s) and {slots} consumer(s), shared out one by one over {} shards; use at most {most} shard(s)",
            workload.producer_count(),
            shard.count,
        ))
        .into());
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

fn resolve_sharding(
    args: &RunArgs,
    workload: &brokerbench_model::Workload,
    source: &str,
) -> anyhow::Result<Option<ShardPlan>> {
    use brokerbench_engine::shard::Shard;
    if let Some(id) = &args.run_id {
        let fine = !id.is_empty()
            && id.len() <= 40
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !fine {
            return Err(BadInput(format!(
                "--run-id '{id}': topic, queue and group names carry it, so give 1 to 40 letters, digits, '-' or '_'"
            ))
            .into());
        }
    }
    let shard = match (args.shard, args.shards) {
        (Some(shard), _) => shard,
        (None, None) => return Ok(None),
        (None, Some(count)) => {
            let (variable, value) = ["JOB_COMPLETION_INDEX", "BROKERBENCH_SHARD_INDEX"]
                .iter()
                .find_map(|v| std::env::var(v).ok().map(|value| (*v, value)))
                .ok_or_else(|| {
                    BadInput(format!(
                        "--shards {count}: which shard is this? Set JOB_COMPLETION_INDEX (a Kubernetes Indexed Job does) or BROKERBENCH_SHARD_INDEX, or give --shard I/{count}"
                    ))
                })?;
            Shard::parse(&format!("{}/{count}", value.trim()))
                .map_err(|e| BadInput(format!("--shards {count} with {variable}={value}: {e}")))?
        }
    };
    let Some(run_id) = args.run_id.clone() else {
        return Err(BadInput(format!(
            "--shard {shard}: give every shard the same --run-id (or BROKERBENCH_RUN_ID), e.g. --run-id {}, so that they use the same topics and groups",
            run_id(Clock::process().now_ns())
        ))
        .into());
    };
    let coordinator = match (&args.coordinator, shard.count) {
        (Some(c), _) => c.clone(),
        (None, 1) => "127.0.0.1:0".to_string(),
        (None, _) => {
            return Err(BadInput(format!(
                "--shard {shard}: give every shard --coordinator HOST:PORT (or BROKERBENCH_COORDINATOR), where shard 0 listens and the others reach it, e.g. --coordinator 127.0.0.1:7878"
            ))
            .into())
        }
    };
    if workload.backlog.is_some() {
        return Err(BadInput(format!(
            "{source}: field `backlog`: backlog mode pauses every consumer at once, which shards do not do yet; run it as one process (drop --shard)"
        ))
        .into());
    }
    Ok(Some(ShardPlan {
        shard,
        run_id,
        coordinator,
    }))
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

/// The broker a run talks to, and how to watch it.
struct BrokerTarget {
    driver: Box<dyn Driver>,
    broker: BrokerInfo,
    /// Process to sample, if known.
    broker_pid: Option<u32>,
    /// How to find the broker's process again after it restarts (a managed broker's status,
    /// or `--broker-process`'s name).
    refind: Option<Box<dyn Fn() -> Option<u32> + Send + Sync>>,
    /// Metrics endpoint to read, if known.
    metrics_url: Option<String>,
    /// What that endpoint serves, from the family.
    metrics: Option<&'static MetricSet>,
}

/// Resolves the driver file and flags into a driver, starting the family's managed broker if
/// the driver file names no broker address.
fn broker_target(driver: &DriverConfig, args: &RunArgs) -> anyhow::Result<BrokerTarget> {
    let family = REGISTRY
        .get(driver.name())
        .expect("a validated driver file names a registered family");
    let mut target = match family.address(driver)? {
        Some(address) => BrokerTarget {
            driver: family.driver(driver, None)?,
            broker: BrokerInfo {
                address,
                version: None,
                managed: false,
            },
            broker_pid: None,
            refind: None,
            metrics_url: None,
            metrics: family.metrics(),
        },
        None => {
            let (status, client_address, metrics_url) = super::broker::managed(family)?;
            BrokerTarget {
                driver: family.driver(driver, Some(&client_address))?,
                broker: BrokerInfo {
                    address: status.address,
                    version: Some(status.version),
                    managed: true,
                },
                broker_pid: Some(status.pid),
                refind: Some(Box::new(move || {
                    let managed = family.managed(&brokerbench_brokers::home());
                    managed.status().ok().flatten().map(|s| s.pid)
                })),
                metrics_url,
                metrics: family.metrics(),
            }
        }
    };
    if let Some(pid) = args.broker_pid {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(BadInput(format!("--broker-pid {pid}: no such process")).into());
        }
        target.broker_pid = Some(pid);
        target.refind = None;
    }
    if let Some(name) = &args.broker_process {
        let pids = brokerbench_monitor::find_pids_by_name(name);
        let again = name.clone();
        target.refind = Some(Box::new(
            move || match brokerbench_monitor::find_pids_by_name(&again).as_slice() {
                [pid] => Some(*pid),
                _ => None,
            },
        ));
        target.broker_pid = Some(match pids.as_slice() {
            [pid] => *pid,
            [] => return Err(BadInput(format!("--broker-process {name}: no running process matches; give --broker-pid PID instead")).into()),
            many => {
                return Err(BadInput(format!(
                    "--broker-process {name}: {} processes match ({many:?}); give --broker-pid PID instead",
                    many.len()
                ))
                .into())
            }
        });
    }
    Ok(target)
}

/// The broker's metrics endpoint and how to read it: the URL from `--broker-metrics`, else
/// the driver file's `broker_metrics.url`, else the managed broker's own; credentials and CA
/// from the URL, then the driver file, then the environment; the timeout from the file. Checked here, before the run starts;
/// nothing is read with `--no-monitor`.
fn metrics_scraper(
    specs: &brokerbench_model::Specs,
    args: &RunArgs,
    managed_url: Option<String>,
    set: Option<&'static MetricSet>,
) -> anyhow::Result<Option<(Scraper, &'static MetricSet)>> {
    if args.no_monitor {
        return Ok(None);
    }
    let spec = specs.driver.broker_metrics();
    let (url, source) = match (&args.broker_metrics, spec.and_then(|s| s.url.clone())) {
        (Some(url), _) => (url.clone(), "--broker-metrics".to_string()),
        (None, Some(url)) => (
            url,
            format!("{}: field `broker_metrics.url`", specs.driver_source),
        ),
        (None, None) => match managed_url {
            Some(url) => (url, "the managed broker".to_string()),
            None => return Ok(None),
        },
    };
    let Some(set) = set else { return Ok(None) };
    let mut endpoint = Endpoint::new(&url).map_err(|e| BadInput(format!("{source}: {e}")))?;
    if let Some(spec) = spec {
        endpoint = endpoint.fill_missing(EndpointSettings {
            username: spec.username.clone(),
            password: spec.password.clone(),
            bearer_token: spec.bearer_token.clone(),
            ca_file: spec.ca_file.clone(),
        });
        if let Some(timeout) = spec.timeout {
            endpoint = endpoint.timeout(timeout);
        }
    }
    let scraper = Scraper::new(endpoint.with_environment())
        .map_err(|e| BadInput(format!("{source}: {e}")))?;
    Ok(Some((scraper, set)))
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
fn run_id(now_ns: u64) -> String {
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
