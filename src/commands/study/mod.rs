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
use brokerbench_study::search::{backlog_points, drive_observed, judge, FindSpec, Search, Step};
use brokerbench_study::secrets::{redacted_definition, redacted_value, SecretSources};
use brokerbench_study::stats::Stats;
use brokerbench_study::tables::{
    cell_stats, cells_table, runs_table, write_atomically, CellStats, RunRecord,
};
use brokerbench_study::{plan_runs, BrokerBetween, OnFailure, PlannedRun, RunKey, Study};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::read_json;

mod broker;
mod cell;
mod executor;
mod folder;
mod lock;
mod state;
mod table;

use crate::cli::StudyArgs;
use crate::families::REGISTRY;
use crate::{exit, BadInput};
use executor::*;
use folder::*;
use lock::*;
use state::*;
use table::*;

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
    let keys = validate_runs(&study, &runs, search.as_ref(), args.quick)?;
    let (runs, keys) = if args.cover {
        brokerbench_study::cover::keep_covering(&study, runs, keys)
    } else {
        (runs, keys)
    };
    let definition = definition_of(&study, &args);
    crate::dashboard::check(&args.dashboard)?;
    if args.dry_run {
        print_plan(&study, &runs, &keys, search.as_ref());
        return Ok(ExitCode::SUCCESS);
    }
    let (dir, mut previous) = study_folder(&study, &args, &definition)?;
    let _lock = Lock::take(&dir)?;
    let live = crate::dashboard::start(&args.dashboard, &dir)?;
    let inputs = write_inline_inputs(&study, &dir)?;
    // The earlier invocation's records go to the executor; the new state starts without runs.
    let earlier: Vec<RunRecord> = previous
        .as_mut()
        .map(|p| std::mem::take(&mut p.runs))
        .unwrap_or_default();
    let mut state = StudyState::start(&study, definition, previous, runs.len(), search.as_ref());
    announce(&study, &runs, search.is_some(), &dir, &earlier);
    let mut executor = Executor {
        study: &study,
        dir: &dir,
        inputs,
        no_monitor: args.no_monitor,
        signals: Signals::install()?,
        earlier,
        executed: 0,
        time_spent: Duration::ZERO,
        search: search.clone(),
        quick: args.quick,
        broker_now: None,
        dashboard: live.as_ref().map(|l| l.dashboard.clone()),
    };
    let mut searches: Vec<Json> = Vec::new();
    let mut outcome = Outcome::Complete;
    for (i, run) in runs.iter().enumerate() {
        let place = (i + 1, runs.len());
        let status = match &search {
            None => executor.grid_run(run, &keys[i], place, &mut state)?,
            Some(spec) => {
                let (found, status) =
                    executor.search_cell(spec, run, place, &mut state, &searches)?;
                searches.push(search_json(run, &found, status));
                write_search(&dir, spec, &searches)?;
                refresh_report(&dir);
                report_search(run, &found);
                status.to_string()
            }
        };
        if status == "interrupted" {
            outcome = Outcome::Interrupted;
            break;
        }
        if status == "failed" && study.on_failure == OnFailure::Stop {
            outcome = Outcome::Failed;
            break;
        }
    }
    let finished = finish(&dir, &mut state, outcome, search.is_some());
    if let Some(live) = live {
        let clean = matches!(&finished, Ok(code) if *code == ExitCode::from(exit::CLEAN));
        live.dashboard
            .end(&format!("The study is over ({}).", state.status), clean);
    }
    finished
}

/// Every run validated before the first starts; their keys, which tell a resumed study what
/// it has done.
fn validate_runs(
    study: &Study,
    runs: &[PlannedRun],
    search: Option<&FindSpec>,
    quick: bool,
) -> anyhow::Result<Vec<RunKey>> {
    let mut keys = Vec::with_capacity(runs.len());
    for run in runs {
        let probe_rate = search.map_or(0.0, |s| s.start);
        let specs = run
            .specs(
                &REGISTRY.schemas(),
                study,
                &step_overrides(search, probe_rate, quick),
            )
            .map_err(|e| BadInput(explain_spec_error(study, run, e)))?;
        if study.between_runs.broker == BrokerBetween::Restart && managed_family(&specs).is_none() {
            return Err(BadInput(format!(
                "{}: between_runs.broker: restart needs the managed local broker, but the driver names an external one ({}); use broker: keep",
                study.file.display(),
                specs.driver_source
            ))
            .into());
        }
        if run.broker.is_set() {
            broker::check_choice(study, run, &specs)?;
        }
        keys.push(RunKey::of(&specs, &run.broker, run.repetition));
    }
    Ok(keys)
}

/// The study file's keys, and the command line's settings beside them; credentials redacted,
/// as everything the study writes.
fn definition_of(study: &Study, args: &StudyArgs) -> Json {
    let mut definition = study.definition.clone();
    if let Json::Object(map) = &mut definition {
        map.insert(
            brokerbench_study::secrets::COMMAND_LINE_SETS.into(),
            Json::from(args.overrides.clone()),
        );
        map.insert("--quick".into(), Json::from(args.quick));
        // Only when given: the folders of studies run without it resume as before.
        if args.cover {
            map.insert("--cover".into(), Json::from(true));
        }
    }
    redacted_definition(&definition)
}

impl StudyState {
    /// The record of a study starting, or resuming `previous`.
    fn start(
        study: &Study,
        definition: Json,
        previous: Option<StudyState>,
        planned: usize,
        search: Option<&FindSpec>,
    ) -> Self {
        let now = rfc3339_utc(now_ns());
        StudyState {
            tool: Tool::brokerbench(env!("CARGO_PKG_VERSION")),
            name: study.name.clone(),
            file: study.file.display().to_string(),
            definition,
            host: Host::detect(),
            broker: previous.as_ref().and_then(|p| p.broker.clone()),
            status: "running".into(),
            started_at: previous.map_or(now.clone(), |p| p.started_at),
            updated_at: now,
            ended_at: None,
            planned,
            search: search.map(|s| serde_json::to_value(s).unwrap_or_default()),
            runs: Vec::new(),
            axes: study.axes.iter().map(|a| a.name()).collect(),
            secrets: SecretSources::of(study, SECRET_VARIABLES, variable_is_set),
        }
    }
}

/// How many cells the runs are of: the grid's, or (`--cover`) how many of them.
fn cells_text(study: &Study, runs: &[PlannedRun]) -> String {
    let grid = study.cells();
    let run = runs
        .iter()
        .map(|r| r.cell)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    if run == grid {
        format!("{grid} cell(s)")
    } else {
        format!("{run} of the {grid} cells (--cover: every value of every axis at least once)")
    }
}

/// One line on what the study will do, or what a resumed one keeps.
fn announce(
    study: &Study,
    runs: &[PlannedRun],
    searching: bool,
    dir: &Path,
    earlier: &[RunRecord],
) {
    if !earlier.is_empty() {
        let done = earlier.iter().filter(|r| r.status == "complete").count();
        println!(
            "resuming study '{}' in {}: {done} completed runs are kept",
            study.name,
            dir.display()
        );
    } else {
        println!(
            "study '{}': {} {} of {} × {} repetition(s); results in {}",
            study.name,
            runs.len(),
            if searching { "searches" } else { "runs" },
            cells_text(study, runs),
            runs.iter().map(|r| r.repetition).max().unwrap_or(1),
            dir.display()
        );
    }
}

/// The study's last record and table, and its exit code.
fn finish(
    dir: &Path,
    state: &mut StudyState,
    outcome: Outcome,
    searching: bool,
) -> anyhow::Result<ExitCode> {
    state.status = match outcome {
        Outcome::Complete => "complete",
        Outcome::Interrupted => "interrupted",
        Outcome::Failed => "failed",
    }
    .into();
    state.ended_at = Some(rfc3339_utc(now_ns()));
    write_state(dir, state, searching)?;
    let cells = cell_stats(&state.axes, searching, &state.runs);
    print!("{}", end_table(&state.axes, &cells));
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
        "study '{}' ({}): {}, {} {}",
        study.name,
        study.file.display(),
        cells_text(study, runs),
        runs.len(),
        if search.is_some() { "searches" } else { "runs" }
    );
    for (path, value) in &study.set {
        let set = format!("{path}={}", brokerbench_study::flow_text(value));
        let _ = writeln!(
            out,
            "every run: {}",
            brokerbench_model::redact::redact_assignment(&set)
        );
    }
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
