//! `brokerbench study FILE`: every run of a grid × repetitions (or of a maximum-throughput
//! search) validated first, then carried out one by one as ordinary `brokerbench run`
//! processes into `runs/`, with study.json, runs.csv and cells.csv rewritten after each run so
//! that an interrupted study is usable and resumable.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use brokerbench_model::units::{format_nanos, format_rate};
use brokerbench_model::{SpecError, Specs};
use brokerbench_report::{folder_name, rfc3339_utc, Host, Tool};
use brokerbench_study::metrics::{self, HEADLINE};
use brokerbench_study::plan::is_rate_find;
use brokerbench_study::search::{backlog_points, drive, judge, FindSpec, Search, Step};
use brokerbench_study::secrets::{redacted_definition, redacted_value, SecretSources};
use brokerbench_study::stats::Stats;
use brokerbench_study::tables::{
    cell_stats, cells_table, runs_table, write_atomically, CellStats, RunRecord,
};
use brokerbench_study::{plan_runs, BrokerBetween, OnFailure, PlannedRun, RunKey, Study};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::read_json;
use crate::cli::StudyArgs;
use crate::families::REGISTRY;
use crate::{exit, BadInput};

/// The study's own record, study.json.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StudyState {
    tool: Tool,
    name: String,
    /// The study file as given.
    file: String,
    /// The study file's content (as JSON), the command line's `--set` and `--quick`: what
    /// must stay the same for the folder to be resumed.
    definition: Json,
    host: Host,
    /// The broker of the first run that reached one.
    broker: Option<Json>,
    /// running | complete | interrupted | failed
    status: String,
    started_at: String,
    updated_at: String,
    ended_at: Option<String>,
    /// Planned runs (grid) or searches (cells × repetitions).
    planned: usize,
    /// The search's settings, for `rate: find`.
    search: Option<Json>,
    /// The axes' names (paths joined with `+` when zipped), first axis first.
    #[serde(default)]
    axes: Vec<String>,
    /// Where the runs' credentials come from, so that resuming can ask for them again.
    #[serde(default)]
    secrets: SecretSources,
    runs: Vec<RunRecord>,
}

/// Environment variables that may hold credentials for the runs (which inherit them).
const SECRET_VARIABLES: &[&str] = &[
    brokerbench_metrics::ENV_USERNAME,
    brokerbench_metrics::ENV_PASSWORD,
    brokerbench_metrics::ENV_BEARER_TOKEN,
];

fn variable_is_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

const STUDY_FILE: &str = "study.json";
const LOCK_FILE: &str = "study.lock";

pub fn study(args: StudyArgs) -> anyhow::Result<ExitCode> {
    let study = Study::load(&args.file).map_err(|e| BadInput(e.to_string()))?;
    let search = search_spec(&study, &args.overrides)?;
    let runs =
        plan_runs(&study, &args.overrides, args.quick).map_err(|e| BadInput(e.to_string()))?;
    let extra = |rate: f64| step_overrides(search.as_ref(), rate, args.quick);
    // Every run is validated before the first starts.
    let mut keys = Vec::with_capacity(runs.len());
    for run in &runs {
        let probe_rate = search.as_ref().map_or(0.0, |s| s.start);
        let specs = run
            .specs(&REGISTRY.schemas(), &study, &extra(probe_rate))
            .map_err(|e| BadInput(explain_spec_error(&study, run, e)))?;
        if study.between_runs.broker == BrokerBetween::Restart && managed_family(&specs).is_none() {
            return Err(BadInput(format!(
                "{}: between_runs.broker: restart needs the managed local broker, but the driver names an external one ({}); use broker: keep",
                study.file.display(),
                specs.driver_source
            ))
            .into());
        }
        keys.push(RunKey::of(&specs, run.repetition));
    }
    // The study file's keys, and the command line's settings beside them; credentials
    // redacted, as everything the study writes.
    let mut definition = study.definition.clone();
    if let Json::Object(map) = &mut definition {
        map.insert(
            brokerbench_study::secrets::COMMAND_LINE_SETS.into(),
            Json::from(args.overrides.clone()),
        );
        map.insert("--quick".into(), Json::from(args.quick));
    }
    let definition = redacted_definition(&definition);

    if args.dry_run {
        print_plan(&study, &runs, &keys, search.as_ref());
        return Ok(ExitCode::SUCCESS);
    }

    let (dir, previous) = study_folder(&study, &args, &definition)?;
    let _lock = Lock::take(&dir)?;
    let inputs = write_inline_inputs(&study, &dir)?;
    let now = rfc3339_utc(now_ns());
    let mut state = StudyState {
        tool: Tool::brokerbench(env!("CARGO_PKG_VERSION")),
        name: study.name.clone(),
        file: study.file.display().to_string(),
        definition,
        host: Host::detect(),
        broker: previous.as_ref().and_then(|p| p.broker.clone()),
        status: "running".into(),
        started_at: previous
            .as_ref()
            .map_or(now.clone(), |p| p.started_at.clone()),
        updated_at: now,
        ended_at: None,
        planned: runs.len(),
        search: search
            .as_ref()
            .map(|s| serde_json::to_value(s).unwrap_or_default()),
        runs: Vec::new(),
        axes: study.axes.iter().map(|a| a.name()).collect(),
        secrets: SecretSources::of(&study, SECRET_VARIABLES, variable_is_set),
    };
    let earlier: Vec<RunRecord> = previous.map(|p| p.runs).unwrap_or_default();
    if !earlier.is_empty() {
        let done = earlier.iter().filter(|r| r.status == "complete").count();
        println!(
            "resuming study '{}' in {}: {done} completed runs are kept",
            study.name,
            dir.display()
        );
    } else {
        println!(
            "study '{}': {} {} of {} cell(s) × {} repetition(s); results in {}",
            study.name,
            runs.len(),
            if search.is_some() { "searches" } else { "runs" },
            study.cells(),
            runs.iter().map(|r| r.repetition).max().unwrap_or(1),
            dir.display()
        );
    }

    let signals = Signals::install()?;
    let mut executor = Executor {
        study: &study,
        dir: &dir,
        inputs,
        no_monitor: args.no_monitor,
        signals,
        earlier,
        executed: 0,
        time_spent: Duration::ZERO,
        search: search.clone(),
        quick: args.quick,
    };
    let axis_names: Vec<String> = study.axes.iter().map(|a| a.name()).collect();
    let mut searches: Vec<Json> = Vec::new();
    let mut outcome = Outcome::Complete;
    'runs: for (i, run) in runs.iter().enumerate() {
        match &search {
            None => {
                let record = executor.run(run, &keys[i], None, &mut state)?;
                let failed = record.status == "failed";
                let interrupted = record.status == "interrupted";
                executor.progress(i + 1, runs.len(), run, &record);
                state.runs.push(record);
                write_state(&dir, &mut state, &axis_names, false)?;
                if interrupted {
                    outcome = Outcome::Interrupted;
                    break 'runs;
                }
                if failed && study.on_failure == OnFailure::Stop {
                    outcome = Outcome::Failed;
                    break 'runs;
                }
            }
            Some(spec) => {
                let mut status = "complete";
                let s = drive(
                    spec,
                    |rate, step, attempt| -> anyhow::Result<Option<Step>> {
                        let specs = run
                            .specs(&REGISTRY.schemas(), &study, &extra(rate))
                            .map_err(|e| BadInput(explain_spec_error(&study, run, e)))?;
                        // A retry is a run of its own, with a key of its own.
                        let key = match attempt {
                            1 => RunKey::of(&specs, run.repetition),
                            n => RunKey(format!("{}-t{n}", RunKey::of(&specs, run.repetition))),
                        };
                        let mut record =
                            executor.run(run, &key, Some((step, attempt, rate)), &mut state)?;
                        if record.status != "complete" {
                            status = if record.status == "interrupted" {
                                "interrupted"
                            } else {
                                "failed"
                            };
                            executor.progress(i + 1, runs.len(), run, &record);
                            state.runs.push(record);
                            return Ok(None);
                        }
                        let folder = dir.join(&record.results);
                        let summary = read_json(&folder.join(brokerbench_report::SUMMARY_FILE))?;
                        let backlog =
                            backlog_points(&folder.join(brokerbench_report::TIMESERIES_FILE))
                                .unwrap_or_default();
                        let verdict = judge(spec, rate, &summary, &backlog);
                        record.sustainable = Some(verdict.sustainable);
                        record.reason =
                            (!verdict.reasons.is_empty()).then(|| verdict.reasons.join("; "));
                        let measured = Step::new(rate, &summary, verdict, record.results.clone());
                        if spec.will_retry(&measured, attempt) {
                            let why = record.reason.take().unwrap_or_default();
                            record.reason = Some(format!("{why}; nearly held: measured again"));
                        }
                        executor.progress(i + 1, runs.len(), run, &record);
                        state.runs.push(record);
                        write_state(&dir, &mut state, &axis_names, true)?;
                        Ok(Some(measured))
                    },
                )?;
                searches.push(search_json(run, &s, status));
                write_search(&dir, spec, &searches)?;
                if let Err(e) = brokerbench_report::html::write_folder_report(&dir) {
                    eprintln!("warning: no study report.html: {e}");
                }
                report_search(run, &s);
                if status == "interrupted" {
                    outcome = Outcome::Interrupted;
                    break 'runs;
                }
                if status == "failed" && study.on_failure == OnFailure::Stop {
                    outcome = Outcome::Failed;
                    break 'runs;
                }
            }
        }
    }
    state.status = match outcome {
        Outcome::Complete => "complete",
        Outcome::Interrupted => "interrupted",
        Outcome::Failed => "failed",
    }
    .into();
    state.ended_at = Some(rfc3339_utc(now_ns()));
    write_state(&dir, &mut state, &axis_names, search.is_some())?;
    let cells = cell_stats(&axis_names, search.is_some(), &state.runs);
    print!("{}", end_table(&axis_names, &cells));
    let failed = state.runs.iter().filter(|r| r.status == "failed").count();
    println!("study {}: {}", state.status, dir.display());
    Ok(ExitCode::from(match outcome {
        Outcome::Interrupted => exit::INTERRUPTED,
        _ if failed > 0 || outcome == Outcome::Failed => exit::WITH_ERRORS,
        _ => exit::CLEAN,
    }))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Complete,
    Interrupted,
    Failed,
}

/// The search's settings when the study asks for `rate: find` (in `set`, on the command
/// line, or by a `find:` block).
fn search_spec(study: &Study, cli_sets: &[String]) -> anyhow::Result<Option<FindSpec>> {
    let in_set = study
        .set
        .iter()
        .any(|(k, v)| k == "rate" && v.as_str() == Some("find"));
    let on_cli = cli_sets.iter().any(|s| is_rate_find(s));
    if !(in_set || on_cli || study.find.is_some()) {
        return Ok(None);
    }
    if study
        .axes
        .iter()
        .any(|a| a.paths.iter().any(|p| p == "rate"))
    {
        return Err(BadInput(format!(
            "{}: axes.rate: a search (rate: find) chooses the rate itself; remove the rate axis",
            study.file.display()
        ))
        .into());
    }
    if let Some((_, v)) = study.set.iter().find(|(k, _)| k == "rate") {
        if v.as_str() != Some("find") {
            return Err(BadInput(format!(
                "{}: set.rate: the study has a `find:` block but sets rate to {}; write rate: find",
                study.file.display(),
                serde_json::to_string(v).unwrap_or_default()
            ))
            .into());
        }
    }
    Ok(Some(study.find.clone().unwrap_or_default()))
}

/// Overrides a search step adds: its rate, and its measurement length.
fn step_overrides(search: Option<&FindSpec>, rate: f64, quick: bool) -> Vec<String> {
    let Some(spec) = search else {
        return Vec::new();
    };
    let mut sets = vec![format!("rate={rate}")];
    if let (Some(d), false) = (spec.step_duration, quick) {
        sets.push(format!("duration={}ms", d.as_millis()));
    }
    sets
}

/// A spec error of one run, said in the study's words: which axis or setting caused it.
fn explain_spec_error(study: &Study, run: &PlannedRun, error: SpecError) -> String {
    let file = study.file.display();
    let key = match &error {
        SpecError::Override { assignment, .. } => assignment
            .split_once('=')
            .map_or("", |(k, _)| k)
            .trim()
            .to_string(),
        SpecError::Field { field, .. } => field.clone(),
        _ => String::new(),
    };
    let touches = |path: &str| {
        !key.is_empty()
            && (key == path
                || key.starts_with(&format!("{path}."))
                || path.starts_with(&format!("{key}.")))
    };
    if let Some(axis) = study
        .axes
        .iter()
        .find(|a| a.paths.iter().any(|p| touches(p)))
    {
        return format!(
            "{file}: axis `{}`, in cell {}: {error}; fix the axis's values",
            axis.name(),
            run.cell_label()
        );
    }
    if let Some((k, _)) = study.set.iter().find(|(k, _)| touches(k)) {
        return format!("{file}: set.{k}: {error}");
    }
    format!(
        "{file}: cell {} (repetition {}): {error}",
        run.cell_label(),
        run.repetition
    )
}

/// The managed broker family a run uses, if it uses one.
fn managed_family(specs: &Specs) -> Option<&'static str> {
    let family = REGISTRY.get(specs.driver.name())?;
    matches!(family.address(&specs.driver), Ok(None)).then(|| family.name())
}

/// Lists the runs; a closed pipe (`| head`) ends the listing quietly.
fn print_plan(study: &Study, runs: &[PlannedRun], keys: &[RunKey], search: Option<&FindSpec>) {
    use std::fmt::Write as _;
    use std::io::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "study '{}' ({}): {} cell(s), {} {}",
        study.name,
        study.file.display(),
        study.cells(),
        runs.len(),
        if search.is_some() { "searches" } else { "runs" }
    );
    if let Some(s) = search {
        let slo: Vec<String> = s
            .slo
            .iter()
            .map(|o| format!("{} ≤ {}", o.name, format_nanos(o.limit_ns)))
            .collect();
        let _ = writeln!(
            out,
            "each search: open-loop steps from {} msg/s, ×{} until a step fails, then bisection to {}%, at most {} steps{}",
            format_rate(s.start),
            s.growth,
            s.precision * 100.0,
            s.max_steps,
            if slo.is_empty() {
                String::new()
            } else {
                format!("; SLO {}", slo.join(", "))
            }
        );
    }
    let width = runs.len().to_string().len();
    for (i, (run, key)) in runs.iter().zip(keys).enumerate() {
        let _ = writeln!(
            out,
            "{:>width$}. cell {} rep {}: {}  [{}]",
            i + 1,
            run.cell + 1,
            run.repetition,
            run.cell_label(),
            key
        );
    }
    let _ = std::io::stdout().lock().write_all(out.as_bytes());
}

/// Finds the folder to resume, or makes a new one; checks that a resumed study is unchanged.
fn study_folder(
    study: &Study,
    args: &StudyArgs,
    definition: &Json,
) -> anyhow::Result<(PathBuf, Option<StudyState>)> {
    let candidate = match &args.out {
        Some(out) => {
            if args.fresh && out.join(STUDY_FILE).exists() {
                return Err(BadInput(format!(
                    "--fresh: {} already holds a study; choose another --out or leave out --fresh to resume it",
                    out.display()
                ))
                .into());
            }
            Some(out.clone())
        }
        None if args.fresh => None,
        None => newest_study_folder(Path::new("studies"), &study.name),
    };
    if let Some(dir) = candidate.filter(|d| d.join(STUDY_FILE).exists()) {
        let previous: StudyState = serde_json::from_value(read_json(&dir.join(STUDY_FILE))?)
            .with_context(|| format!("reading {}", dir.join(STUDY_FILE).display()))?;
        let mut changed = Vec::new();
        // Folders of earlier versions kept credentials in their definition.
        let before = redacted_definition(&previous.definition);
        diff_paths("", &before, definition, &mut changed);
        if !changed.is_empty() {
            return Err(BadInput(format!(
                "{}: the study changed since {} was started ({}); run it with --fresh to start a new study folder, or restore the file to resume",
                study.file.display(),
                dir.display(),
                changed.join(", ")
            ))
            .into());
        }
        let missing = previous.secrets.missing(variable_is_set);
        if !missing.is_empty() {
            return Err(BadInput(format!(
                "{}: cannot resume, credentials are missing (a study folder never keeps them): {}; supply them and run the study again, or start anew with --fresh",
                dir.display(),
                missing.join("; ")
            ))
            .into());
        }
        return Ok((dir, Some(previous)));
    }
    let dir = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("studies").join(folder_name(now_ns(), &study.name)));
    fs::create_dir_all(dir.join("runs"))
        .with_context(|| format!("creating the study folder '{}'", dir.display()))?;
    Ok((dir, None))
}

/// The newest folder under `root` made for a study of this name.
fn newest_study_folder(root: &Path, name: &str) -> Option<PathBuf> {
    let suffix = folder_name(0, name);
    let suffix = suffix
        .split_once('-')
        .map(|(_, rest)| rest)?
        .split_once('-')?
        .1
        .to_string();
    let mut folders: Vec<PathBuf> = fs::read_dir(root)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.get(16..) == Some(suffix.as_str()))
                && p.join(STUDY_FILE).exists()
        })
        .collect();
    folders.sort();
    folders.pop()
}

/// The paths at which two JSON values differ (objects compared key by key).
fn diff_paths(prefix: &str, a: &Json, b: &Json, out: &mut Vec<String>) {
    match (a, b) {
        (Json::Object(x), Json::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                match (x.get(k), y.get(k)) {
                    (Some(va), Some(vb)) => diff_paths(&path, va, vb, out),
                    (None, Some(_)) => out.push(format!("`{path}` added")),
                    (Some(_), None) => out.push(format!("`{path}` removed")),
                    (None, None) => {}
                }
            }
        }
        _ if a != b => out.push(format!(
            "`{prefix}` was {} and is now {}",
            short_json(a),
            short_json(b)
        )),
        _ => {}
    }
}

fn short_json(v: &Json) -> String {
    let text = v.to_string();
    if text.len() > 60 {
        format!(
            "{}…",
            &text[..text.char_indices().nth(57).map_or(text.len(), |(i, _)| i)]
        )
    } else {
        text
    }
}

/// Inline workload or driver maps become files in the study folder, so that every run can be
/// read and repeated by hand. Those files are redacted like everything the study writes: a
/// driver that holds credentials reaches its runs on their standard input instead
/// (`brokerbench run --driver -`), read from the study file by each invocation.
struct Inputs {
    workload: Option<PathBuf>,
    /// The inline driver as YAML, credentials included: never written to a file.
    driver: Option<String>,
}

/// The first lines of an inline input written to the study folder.
const INPUT_HEADER: &str = "# Written by brokerbench study from the study file's inline map, credentials replaced\n# by ***. Its runs read an inline driver on standard input (brokerbench run --driver -).\n";

fn write_inline_inputs(study: &Study, dir: &Path) -> anyhow::Result<Inputs> {
    // The record of an inline map, and the map as YAML with its credentials.
    let write = |name: &str,
                 input: &brokerbench_study::StudyInput|
     -> anyhow::Result<Option<(PathBuf, String)>> {
        let brokerbench_study::StudyInput::Inline(value) = input else {
            return Ok(None);
        };
        let folder = dir.join("inputs");
        fs::create_dir_all(&folder)?;
        let path = folder.join(name);
        let shown = brokerbench_model::yaml::to_string(&redacted_value("", value))?;
        fs::write(&path, format!("{INPUT_HEADER}{shown}"))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Some((path, brokerbench_model::yaml::to_string(value)?)))
    };
    Ok(Inputs {
        // A workload has no credential fields: its record is what the runs read.
        workload: write("workload.yaml", &study.workload)?.map(|(path, _)| path),
        driver: write("driver.yaml", &study.driver)?.map(|(_, text)| text),
    })
}

/// Keeps two study processes out of one folder.
struct Lock(PathBuf);

impl Lock {
    fn take(dir: &Path) -> anyhow::Result<Lock> {
        let path = dir.join(LOCK_FILE);
        if let Ok(text) = fs::read_to_string(&path) {
            if let Ok(pid) = text.trim().parse::<u32>() {
                if pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists() {
                    return Err(BadInput(format!(
                        "{}: another brokerbench study (pid {pid}) is running in this folder",
                        dir.display()
                    ))
                    .into());
                }
            }
        }
        fs::write(&path, std::process::id().to_string())
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Lock(path))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Counts SIGINT/SIGTERM; the study forwards each to the running run, whose first one ends
/// it with a drain and whose second ends it at once, as for `brokerbench run`.
struct Signals {
    count: Arc<AtomicUsize>,
}

impl Signals {
    fn install() -> anyhow::Result<Signals> {
        let count = Arc::new(AtomicUsize::new(0));
        let mut signals = signal_hook::iterator::Signals::new([
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
        ])?;
        let counter = count.clone();
        std::thread::Builder::new()
            .name("study-signals".into())
            .spawn(move || {
                for _ in signals.forever() {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            })?;
        Ok(Signals { count })
    }

    fn received(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }
}

struct Executor<'a> {
    study: &'a Study,
    dir: &'a Path,
    inputs: Inputs,
    no_monitor: bool,
    signals: Signals,
    /// Records of an earlier invocation on this folder.
    earlier: Vec<RunRecord>,
    /// Runs carried out by this invocation, and the time they took (for the ETA).
    executed: usize,
    time_spent: Duration,
    search: Option<FindSpec>,
    quick: bool,
}

impl Executor<'_> {
    /// Runs one planned run (or search step), unless an earlier invocation completed it.
    fn run(
        &mut self,
        run: &PlannedRun,
        key: &RunKey,
        step: Option<(u32, u32, f64)>,
        state: &mut StudyState,
    ) -> anyhow::Result<RunRecord> {
        let name = match step {
            None => format!("c{:03}-r{}", run.cell + 1, run.repetition),
            Some((s, 1, _)) => format!("c{:03}-r{}-s{:02}", run.cell + 1, run.repetition, s),
            Some((s, attempt, _)) => format!(
                "c{:03}-r{}-s{:02}-t{attempt}",
                run.cell + 1,
                run.repetition,
                s
            ),
        };
        let results = format!("runs/{name}");
        let folder = self.dir.join(&results);
        let mut record = RunRecord {
            key: key.clone(),
            cell: run.cell,
            repetition: run.repetition,
            values: run
                .values
                .iter()
                .map(|(p, v)| (p.clone(), redacted_value(p, v)))
                .collect(),
            step: step.map(|(s, _, _)| s),
            sustainable: None,
            reason: None,
            status: "running".into(),
            results: results.clone(),
            exit_code: None,
            error: None,
            headline: Vec::new(),
        };
        // Done before? Identified by the key, confirmed by the run's own manifest.
        if let Some(done) = self.earlier.iter().rev().find(|r| {
            r.key == *key && manifest_status(&self.dir.join(&r.results)) == Some("complete".into())
        }) {
            let mut kept = done.clone();
            kept.status = "complete".into();
            kept.step = record.step;
            return Ok(kept);
        }
        if self.signals.received() > 0 {
            record.status = "interrupted".into();
            return Ok(record);
        }
        if self.executed > 0 {
            self.between_runs(run)?;
        }
        let log_path = self.dir.join("runs").join(format!("{name}.log"));
        set_aside(&folder, &log_path)?;
        // Recorded as running before it starts: a study killed now knows where to look.
        state.runs.push(record.clone());
        write_state_file(self.dir, state)?;
        state.runs.pop();

        let log = fs::File::create(&log_path)
            .with_context(|| format!("creating {}", log_path.display()))?;
        let mut command = Command::new(std::env::current_exe()?);
        command.arg("run");
        match (&self.inputs.workload, &run.workload) {
            (Some(inline), _) => {
                command.arg(inline);
            }
            (None, brokerbench_study::StudyInput::File(p)) => {
                command.arg(p);
            }
            _ => {}
        }
        match (&self.inputs.driver, &run.driver) {
            (Some(_), _) => {
                command.arg("--driver").arg(super::run::STDIN_DRIVER);
            }
            (None, brokerbench_study::StudyInput::File(p)) => {
                command.arg("--driver").arg(p);
            }
            _ => {}
        }
        for o in &run.overrides {
            command.arg("--set").arg(o);
        }
        if let Some((_, _, rate)) = step {
            for o in step_overrides(self.search.as_ref(), rate, self.quick) {
                command.arg("--set").arg(o);
            }
        }
        command.arg("--out").arg(&folder).arg("--quiet");
        if self.no_monitor {
            command.arg("--no-monitor");
        }
        command.stdout(log.try_clone()?).stderr(log);
        let started = Instant::now();
        let status = spawn_and_wait(command, self.inputs.driver.as_deref(), &self.signals)?;
        self.executed += 1;
        self.time_spent += started.elapsed();

        record.exit_code = status.code();
        let interrupted = self.signals.received() > 0 || status.code() == Some(130);
        record.status = match manifest_status(&folder).as_deref() {
            Some("complete") => "complete".into(),
            _ if interrupted => "interrupted".into(),
            _ => "failed".into(),
        };
        if folder.exists() {
            let _ = fs::rename(&log_path, folder.join("run.log"));
            if let Ok(manifest) = read_json(&folder.join(brokerbench_report::MANIFEST_FILE)) {
                if state.broker.is_none() {
                    state.broker = manifest.get("broker").cloned().filter(|b| !b.is_null());
                }
                record.error = manifest
                    .get("error")
                    .and_then(Json::as_str)
                    .map(str::to_string);
            }
        }
        if record.status == "failed" && record.error.is_none() {
            let log = fs::read_to_string(folder.join("run.log"))
                .or_else(|_| fs::read_to_string(&log_path))
                .unwrap_or_default();
            record.error = log
                .lines()
                .rev()
                .find(|l| l.starts_with("error:"))
                .map(|l| l.trim_start_matches("error:").trim().to_string())
                .or_else(|| Some(format!("the run exited with {status}")));
        }
        Ok(record)
    }

    fn between_runs(&self, run: &PlannedRun) -> anyhow::Result<()> {
        // A smoke test (--quick) does not wait for the machine to settle.
        let pause = if self.quick {
            Duration::ZERO
        } else {
            self.study.between_runs.cooldown
        };
        let until = Instant::now() + pause;
        while Instant::now() < until && self.signals.received() == 0 {
            std::thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
        }
        if self.study.between_runs.broker == BrokerBetween::Restart && self.signals.received() == 0
        {
            let specs = run
                .specs(&REGISTRY.schemas(), self.study, &[])
                .map_err(|e| BadInput(e.to_string()))?;
            if let Some(family) = managed_family(&specs) {
                for action in ["down", "up"] {
                    let out = Command::new(std::env::current_exe()?)
                        .args(["broker", action, family])
                        .stdin(std::process::Stdio::null())
                        .output()?;
                    if !out.status.success() {
                        anyhow::bail!(
                            "between runs: `brokerbench broker {action} {family}` failed: {}",
                            String::from_utf8_lossy(&out.stderr).trim()
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// One line per finished run: index, cell, repetition, headline numbers, ETA.
    fn progress(&self, index: usize, total: usize, run: &PlannedRun, record: &RunRecord) {
        let width = total.to_string().len();
        let step = record
            .step
            .map(|s| format!(" step {s}"))
            .unwrap_or_default();
        let what = if self.search.is_some() { "search " } else { "" };
        let values = if run.values.is_empty() {
            String::new()
        } else {
            format!(" ({})", run.cell_label())
        };
        let mut line = format!(
            "[{what}{index:>width$}/{total}] cell {} rep {}{step}{values}: ",
            run.cell + 1,
            run.repetition,
        );
        match record.status.as_str() {
            "complete" => {
                let summary = read_json(
                    &self
                        .dir
                        .join(&record.results)
                        .join(brokerbench_report::SUMMARY_FILE),
                )
                .unwrap_or_default();
                let v = |p: &str| metrics::value(&summary, p);
                if let Some(target) = v("target_rate").filter(|_| record.step.is_some()) {
                    line.push_str(&format!("offered {} → ", format_rate(target)));
                }
                match v("total.acknowledged") {
                    Some(a) if a == 0.0 && v("total.sent").unwrap_or(0.0) > 0.0 => {
                        line.push_str(&format!(
                            "{} msg/s sent (unconfirmed), {} received",
                            format_rate(v("throughput.sent_per_s").unwrap_or(0.0)),
                            format_rate(v("throughput.received_per_s").unwrap_or(0.0))
                        ))
                    }
                    _ => line.push_str(&format!(
                        "{} msg/s acknowledged",
                        format_rate(v("throughput.acknowledged_per_s").unwrap_or(0.0))
                    )),
                }
                for (label, path) in [
                    ("publish p99", "latency.publish.p99_ns"),
                    ("e2e p99", "latency.end_to_end.p99_ns"),
                ] {
                    if let Some(ns) = v(path) {
                        line.push_str(&format!(", {label} {}", format_nanos(ns as u64)));
                    }
                }
                let lost = v("integrity.lost").unwrap_or(0.0);
                if lost > 0.0 {
                    line.push_str(&format!(", LOST {lost:.0}"));
                }
                if let Some(ok) = record.sustainable {
                    line.push_str(if ok {
                        " — sustained"
                    } else {
                        " — NOT sustained"
                    });
                    if let Some(reason) = &record.reason {
                        line.push_str(&format!(": {reason}"));
                    }
                }
            }
            other => {
                line.push_str(&other.to_uppercase());
                if let Some(e) = &record.error {
                    line.push_str(&format!(": {e}"));
                }
            }
        }
        if self.executed > 0
            && self.search.is_none()
            && index < total
            && record.status != "interrupted"
        {
            let cooldown = if self.quick {
                Duration::ZERO
            } else {
                self.study.between_runs.cooldown
            };
            let per_run = self.time_spent / self.executed as u32 + cooldown;
            line.push_str(&format!(
                "; ETA {}",
                human_duration(per_run * (total - index) as u32)
            ));
        }
        println!("{line}");
    }
}

/// Moves an earlier, unfinished attempt (and its log) out of the way: kept, never deleted.
fn set_aside(folder: &Path, log: &Path) -> anyhow::Result<()> {
    if !folder.exists() {
        return Ok(());
    }
    for n in 1.. {
        let aside = PathBuf::from(format!("{}.try{n}", folder.display()));
        if !aside.exists() {
            fs::rename(folder, &aside)
                .with_context(|| format!("moving {} aside", folder.display()))?;
            if log.exists() {
                let _ = fs::rename(log, aside.join("run.log"));
            }
            return Ok(());
        }
    }
    Ok(())
}

/// Starts the run in its own process group (so the terminal's Ctrl-C reaches only the study,
/// which forwards it once), tied to the study's life (a killed study kills its run); `input`
/// is written to its standard input.
fn spawn_and_wait(
    mut command: Command,
    input: Option<&str>,
    signals: &Signals,
) -> anyhow::Result<std::process::ExitStatus> {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.stdin(match input {
        Some(_) => std::process::Stdio::piped(),
        None => std::process::Stdio::null(),
    });
    let mut child = command.spawn().context("starting brokerbench run")?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        use std::io::Write as _;
        // The run reads it before anything else; one that exits before reading it says why
        // in its log (the failed write is then of no consequence).
        let _ = stdin.write_all(text.as_bytes());
    }
    let mut forwarded = 0;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        let received = signals.received();
        while forwarded < received {
            // SAFETY: signalling a child process we started and have not reaped.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGINT);
            }
            forwarded += 1;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn manifest_status(folder: &Path) -> Option<String> {
    read_json(&folder.join(brokerbench_report::MANIFEST_FILE))
        .ok()?
        .get("status")?
        .as_str()
        .map(str::to_string)
}

/// Now, ns since the UNIX epoch, on the process clock every timestamp of a run uses.
fn now_ns() -> u64 {
    brokerbench_engine::Clock::process().now_ns()
}

fn write_state_file(dir: &Path, state: &mut StudyState) -> anyhow::Result<()> {
    state.updated_at = rfc3339_utc(now_ns());
    let text = serde_json::to_string_pretty(state)?;
    write_atomically(&dir.join(STUDY_FILE), text.as_bytes())
        .with_context(|| format!("writing {}", dir.join(STUDY_FILE).display()))
}

/// Reads the headline numbers of the runs that do not have them yet from their summaries:
/// each run's summary.json is read once, not after every run of the study.
fn fill_headlines(dir: &Path, runs: &mut [RunRecord]) {
    for r in runs.iter_mut().filter(|r| r.headline.is_empty()) {
        if let Ok(summary) = read_json(&dir.join(&r.results).join(brokerbench_report::SUMMARY_FILE))
        {
            r.headline = metrics::headline(&summary);
        }
    }
}

/// Rewrites study.json, runs.csv/json and cells.csv/json.
fn write_state(
    dir: &Path,
    state: &mut StudyState,
    axis_names: &[String],
    search: bool,
) -> anyhow::Result<()> {
    write_state_file(dir, state)?;
    fill_headlines(dir, &mut state.runs);
    let records = &state.runs;
    let runs = runs_table(axis_names, search, records);
    let cells = cells_table(axis_names, search, &cell_stats(axis_names, search, records));
    for (table, name) in [(&runs, "runs"), (&cells, "cells")] {
        let csv = dir.join(format!("{name}.csv"));
        table
            .write_csv(&csv)
            .with_context(|| format!("writing {}", csv.display()))?;
        table
            .write_json(&dir.join(format!("{name}.json")))
            .with_context(|| format!("writing {name}.json"))?;
    }
    if let Err(e) = brokerbench_report::html::write_folder_report(dir) {
        eprintln!("warning: no study report.html: {e}");
    }
    Ok(())
}

fn search_json(run: &PlannedRun, search: &Search, status: &str) -> Json {
    serde_json::json!({
        "cell": run.cell + 1,
        "axes": run.values.iter().map(|(p, v)| (p.clone(), redacted_value(p, v))).collect::<serde_json::Map<_, _>>(),
        "repetition": run.repetition,
        "status": status,
        "found_rate": search.found_rate(),
        "bracket": [search.last_pass, search.first_fail],
        "steps": search.steps,
    })
}

/// search.json: the definition, every search, and for a single search its result at the top.
fn write_search(dir: &Path, spec: &FindSpec, searches: &[Json]) -> anyhow::Result<()> {
    let mut doc = serde_json::json!({
        "definition": {
            "sustainable_when": [
                format!("acknowledged rate >= {}% of the offered rate (received rate when publishing is unconfirmed)", brokerbench_study::search::MIN_DELIVERED_SHARE * 100.0),
                format!("consumer backlog slope over the measurement window < {}% of the offered rate per second", brokerbench_study::search::MAX_BACKLOG_SLOPE_SHARE * 100.0),
                "not client-bound (the generator kept its schedule)".to_string(),
                "no message lost, no send failed".to_string(),
                "every SLO holds".to_string(),
            ],
            "settings": spec,
        },
        "searches": searches,
    });
    if let [only] = searches {
        for key in ["found_rate", "bracket", "steps"] {
            doc[key] = only[key].clone();
        }
    }
    write_atomically(
        &dir.join("search.json"),
        serde_json::to_string_pretty(&doc)?.as_bytes(),
    )
    .context("writing search.json")
}

fn report_search(run: &PlannedRun, search: &Search) {
    let bracket = |v: Option<f64>| v.map_or("none".into(), format_rate);
    match search.found_rate() {
        Some(rate) => println!(
            "cell {} rep {}: maximum sustainable rate {} msg/s (bracket {} … {}, {} steps)",
            run.cell + 1,
            run.repetition,
            format_rate(rate),
            bracket(search.last_pass),
            bracket(search.first_fail),
            search.steps.len()
        ),
        None => println!(
            "cell {} rep {}: no offered rate was sustained (lowest tried {} msg/s)",
            run.cell + 1,
            run.repetition,
            bracket(search.first_fail)
        ),
    }
}

fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// The end-of-study table: per cell, mean ± 95% CI of the acknowledged rate and p99 latencies.
fn end_table(axis_names: &[String], cells: &[CellStats]) -> String {
    if cells.is_empty() {
        return "no run completed\n".into();
    }
    let index = |name: &str| HEADLINE.iter().position(|h| *h == name);
    let columns: Vec<(&str, usize, bool)> = [
        ("ack msg/s", "throughput.acknowledged_per_s", false),
        ("publish p99", "latency.publish.p99_ns", true),
        ("e2e p99", "latency.end_to_end.p99_ns", true),
    ]
    .into_iter()
    .filter_map(|(label, path, ns)| index(path).map(|i| (label, i, ns)))
    .collect();
    let fmt = |v: f64, ns: bool| {
        if ns {
            format_nanos(v.max(0.0) as u64)
        } else {
            format_rate(v)
        }
    };
    let sent = index("throughput.sent_per_s");
    let cell_text = |s: &Option<Stats>, ns: bool| match s {
        None => "—".to_string(),
        Some(s) => match s.ci95_half() {
            Some(h) => format!("{} ± {}", fmt(s.mean, ns), fmt(h, ns)),
            None => fmt(s.mean, ns),
        },
    };
    let mut header: Vec<String> = vec!["cell".into()];
    header.extend(axis_names.iter().cloned());
    if cells.iter().any(|c| c.offered_rate.is_some()) {
        header.push("offered".into());
    }
    header.push("n".into());
    header.extend(
        columns
            .iter()
            .map(|(l, _, _)| format!("{l} (mean ± 95% CI)")),
    );
    let mut rows = vec![header];
    for c in cells {
        let mut row = vec![(c.cell + 1).to_string()];
        row.extend(c.values.iter().map(|v| {
            match v {
                Json::String(s) => Path::new(s)
                    .file_name()
                    .filter(|_| s.contains('/'))
                    .map_or(s.clone(), |n| n.to_string_lossy().into_owned()),
                other => other.to_string(),
            }
        }));
        if let Some(r) = c.offered_rate {
            row.push(format_rate(r));
        }
        row.push(c.n.to_string());
        row.extend(columns.iter().map(|(_, i, ns)| {
            let unconfirmed = !ns
                && c.stats[*i].as_ref().is_some_and(|s| s.max == 0.0)
                && sent
                    .and_then(|j| c.stats[j].as_ref())
                    .is_some_and(|s| s.mean > 0.0);
            match (unconfirmed, sent) {
                (true, Some(j)) => format!("{} sent", cell_text(&c.stats[j], false)),
                _ => cell_text(&c.stats[*i], *ns),
            }
        }));
        rows.push(row);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::from("\n");
    for (n, row) in rows.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(t, w)| format!("{t:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
        if n == 0 {
            out.push_str(&"-".repeat(widths.iter().sum::<usize>() + 2 * (widths.len() - 1)));
            out.push('\n');
        }
    }
    out
}
