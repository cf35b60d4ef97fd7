//! The study file: what to vary, how often, in which order. Parsed and checked as a whole
//! before anything runs; every error names the study file, the key and the fix.

use std::path::{Path, PathBuf};
use std::time::Duration;

use brokerbench_model::spec::did_you_mean;
use brokerbench_model::units::parse_duration;
use brokerbench_model::yaml::{Mapping, Value};

use crate::broker::{is_broker_path, BrokerChoice};
use crate::search::FindSpec;
use crate::text::{key_text, show};

/// Keys a study file may have.
pub const STUDY_FIELDS: &[&str] = &[
    "name",
    "workload",
    "driver",
    "set",
    "axes",
    "repetitions",
    "order",
    "seed",
    "between_runs",
    "broker",
    "on_failure",
    "find",
];

/// What is wrong with a study, named by file and key.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    #[error("cannot read study file {file}: {message}")]
    Read { file: String, message: String },
    #[error("{file}: {field}: {message}")]
    Field {
        file: String,
        field: String,
        message: String,
    },
}

impl StudyError {
    fn field(study: &Path, field: impl Into<String>, message: impl Into<String>) -> Self {
        StudyError::Field {
            file: study.display().to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Where a study takes its workload or driver from.
#[derive(Debug, Clone, PartialEq)]
pub enum StudyInput {
    /// The built-in default (quickstart workload, managed Kafka driver).
    Default,
    /// A file, resolved relative to the study file.
    File(PathBuf),
    /// A mapping written in the study file itself.
    Inline(Value),
}

/// One dimension of the grid: one path, or several zipped paths that vary together.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// The `--set` paths this axis sets (`driver` and `workload` take file names).
    pub paths: Vec<String>,
    /// The points of the axis, each with one value per path.
    pub points: Vec<Vec<Value>>,
}

impl Axis {
    /// The axis's name as a column: its paths joined with `+`.
    pub fn name(&self) -> String {
        self.paths.join("+")
    }
}

/// In which order the runs of a study go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Repetition 1 of every cell, then repetition 2, ...: slow drift spreads over all cells.
    Interleaved,
    /// All repetitions of a cell, then the next cell.
    Sequential,
    /// A random order, fixed by the study's `seed`.
    Shuffled,
}

/// What happens to the managed broker between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BrokerBetween {
    Keep,
    Restart,
}

/// Pause and broker handling between two runs.
#[derive(Debug, Clone, PartialEq)]
pub struct BetweenRuns {
    pub cooldown: Duration,
    pub broker: BrokerBetween,
}

/// Whether a failed run stops the study.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    Continue,
    Stop,
}

/// A checked study file.
#[derive(Debug, Clone)]
pub struct Study {
    /// The study file as given.
    pub file: PathBuf,
    pub name: String,
    pub workload: StudyInput,
    pub driver: StudyInput,
    /// Settings applied to every run, in file order.
    pub set: Vec<(String, Value)>,
    /// The grid, first axis outermost.
    pub axes: Vec<Axis>,
    pub repetitions: u32,
    pub order: Order,
    pub seed: u64,
    pub between_runs: BetweenRuns,
    /// The managed broker every run uses (`broker:`), before the axes' `broker.*` values.
    pub broker: BrokerChoice,
    pub on_failure: OnFailure,
    /// Present when the study searches for the maximum sustainable rate (`rate: find`).
    pub find: Option<FindSpec>,
    /// The file's content as JSON, to tell whether a resumed study is still the same study.
    pub definition: serde_json::Value,
}

impl Study {
    /// Reads and checks a study file.
    pub fn load(path: &Path) -> Result<Study, StudyError> {
        let text = std::fs::read_to_string(path).map_err(|e| StudyError::Read {
            file: path.display().to_string(),
            message: e.to_string(),
        })?;
        Study::parse(path, &text)
    }

    /// Checks a study given as text; `path` names it in errors and anchors relative paths.
    pub fn parse(path: &Path, text: &str) -> Result<Study, StudyError> {
        let map = study_mapping(path, text)?;
        let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
        let name = study_name(path, map.get("name"))?;
        let workload = input(path, &dir, "workload", map.get("workload"))?;
        let driver = input(path, &dir, "driver", map.get("driver"))?;
        let set = settings(path, map.get("set"))?;
        let axes = axes(path, &dir, map.get("axes"))?;
        let broker = broker_choice(path, map.get("broker"))?;
        check_axes_unfixed(path, &axes, &broker, &set)?;
        let repetitions = repetitions(path, map.get("repetitions"))?;
        let order = order(path, map.get("order"))?;
        let seed = seed(path, map.get("seed"))?;
        let between_runs = between_runs(path, map.get("between_runs"))?;
        let on_failure = on_failure(path, map.get("on_failure"))?;
        let find = find_spec(path, map.get("find"))?;
        let definition =
            serde_json::to_value(Value::Object(map.clone())).unwrap_or(serde_json::Value::Null);
        Ok(Study {
            file: path.to_path_buf(),
            name,
            workload,
            driver,
            set,
            axes,
            repetitions,
            order,
            seed,
            between_runs,
            broker,
            on_failure,
            find,
            definition,
        })
    }

    /// Number of cells of the grid (1 without axes).
    pub fn cells(&self) -> usize {
        self.axes.iter().map(|a| a.points.len()).product()
    }
}

/// The study file's top-level mapping, read from YAML `text`; every key must be one a study
/// may have.
fn study_mapping(path: &Path, text: &str) -> Result<Mapping, StudyError> {
    let value: Value = brokerbench_model::yaml::from_str(text)
        .map_err(|e| StudyError::field(path, "(top level)", format!("not valid YAML: {e}")))?;
    let map = match value {
        Value::Object(map) => map,
        Value::Null => {
            return Err(StudyError::field(
                path,
                "(top level)",
                "the file is empty; a study needs at least `name:` and `axes:` (see docs/src/studies.md)",
            ))
        }
        _ => {
            return Err(StudyError::field(
                path,
                "(top level)",
                "must be a mapping of key: value",
            ))
        }
    };
    for key in map.keys() {
        let key = key.clone();
        if !STUDY_FIELDS.contains(&key.as_str()) {
            return Err(StudyError::field(
                path,
                &key,
                format!(
                    "unknown key; allowed keys: {}{}",
                    STUDY_FIELDS.join(", "),
                    did_you_mean(&key, STUDY_FIELDS)
                ),
            ));
        }
    }
    Ok(map)
}

/// The study's `name:`, trimmed; it must be there and not blank.
fn study_name(path: &Path, value: Option<&Value>) -> Result<String, StudyError> {
    match value {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_string()),
        Some(other) => Err(StudyError::field(
            path,
            "name",
            format!(
                "{} is not a name; write e.g. name: kafka-batch-size",
                show(other)
            ),
        )),
        None => Err(StudyError::field(
            path,
            "name",
            "missing; add e.g. name: kafka-batch-size (it names the study's folder)",
        )),
    }
}

/// The `set:` settings every run gets, in file order; the broker, the driver and the
/// workload have their own top-level keys instead.
fn settings(path: &Path, value: Option<&Value>) -> Result<Vec<(String, Value)>, StudyError> {
    let set: Vec<(String, Value)> = match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        Some(other) => {
            return Err(StudyError::field(
                path,
                "set",
                format!(
                    "{} is not a mapping; write e.g. set: {{duration: 60s, rate: max}}",
                    show(other)
                ),
            ))
        }
    };
    for (key, _) in &set {
        if is_broker_path(key) {
            return Err(StudyError::field(
                path,
                format!("set.{key}"),
                "the managed broker is chosen with the top-level `broker:` key (e.g. broker: {nodes: 3}), or varied with an axis such as broker.nodes",
            ));
        }
        if key == "driver" || key == "workload" {
            return Err(StudyError::field(
                path,
                format!("set.{key}"),
                format!(
                    "choose the {key} with the top-level `{key}:` key, or vary it with an axis"
                ),
            ));
        }
    }
    Ok(set)
}

/// The managed broker every run uses (`broker:`); the default one when the key is missing.
fn broker_choice(path: &Path, value: Option<&Value>) -> Result<BrokerChoice, StudyError> {
    match value {
        None | Some(Value::Null) => Ok(BrokerChoice::default()),
        Some(value) => BrokerChoice::parse(value)
            .map_err(|(field, message)| StudyError::field(path, field, message)),
    }
}

/// Checks no axis varies a path that `broker` or `set` already fixes for every run.
fn check_axes_unfixed(
    path: &Path,
    axes: &[Axis],
    broker: &BrokerChoice,
    set: &[(String, Value)],
) -> Result<(), StudyError> {
    for axis in axes {
        for p in &axis.paths {
            if broker.chooses(p) {
                return Err(StudyError::field(
                    path,
                    format!("axes.{}", axis.name()),
                    format!("`{p}` is both an axis and in `broker`; remove it from one of them"),
                ));
            }
            if set.iter().any(|(k, _)| k == p) {
                return Err(StudyError::field(
                    path,
                    format!("axes.{}", axis.name()),
                    format!("`{p}` is both an axis and in `set`; remove it from one of them"),
                ));
            }
        }
    }
    Ok(())
}

/// How many runs each cell gets (`repetitions:`, 1 by default, at most 10 000).
fn repetitions(path: &Path, value: Option<&Value>) -> Result<u32, StudyError> {
    match value {
        None => Ok(1),
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| (1..=10_000).contains(&n)) => {
            Ok(n.as_u64().unwrap_or(1) as u32)
        }
        Some(other) => Err(StudyError::field(
            path,
            "repetitions",
            format!(
                "{} is not allowed; give a whole number of runs per cell, at least 1 (e.g. repetitions: 5)",
                show(other)
            ),
        )),
    }
}

/// The order of the runs (`order:`, interleaved by default).
fn order(path: &Path, value: Option<&Value>) -> Result<Order, StudyError> {
    let text = value.map(key_text);
    match text.as_deref() {
        None | Some("interleaved") => Ok(Order::Interleaved),
        Some("sequential") => Ok(Order::Sequential),
        Some("shuffled") => Ok(Order::Shuffled),
        Some(other) => {
            let allowed = ["interleaved", "sequential", "shuffled"];
            Err(StudyError::field(
                path,
                "order",
                format!(
                    "unknown order `{other}`; allowed: {}{}",
                    allowed.join(", "),
                    did_you_mean(other, &allowed)
                ),
            ))
        }
    }
}

/// The seed of the shuffled order (`seed:`, 1 by default).
fn seed(path: &Path, value: Option<&Value>) -> Result<u64, StudyError> {
    match value {
        None => Ok(1),
        Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64().unwrap_or(1)),
        Some(other) => Err(StudyError::field(
            path,
            "seed",
            format!("{} is not a whole number ≥ 0", show(other)),
        )),
    }
}

/// Whether a failed run stops the study (`on_failure:`, continue by default).
fn on_failure(path: &Path, value: Option<&Value>) -> Result<OnFailure, StudyError> {
    let text = value.map(key_text);
    match text.as_deref() {
        None | Some("continue") => Ok(OnFailure::Continue),
        Some("stop") => Ok(OnFailure::Stop),
        Some(other) => Err(StudyError::field(
            path,
            "on_failure",
            format!(
                "unknown value `{other}`; allowed: continue, stop{}",
                did_you_mean(other, &["continue", "stop"])
            ),
        )),
    }
}

/// The search for the maximum sustainable rate (`find:`), when the study has one.
fn find_spec(path: &Path, value: Option<&Value>) -> Result<Option<FindSpec>, StudyError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => FindSpec::parse(v)
            .map(Some)
            .map_err(|(field, message)| StudyError::field(path, format!("find.{field}"), message)),
    }
}

fn input(
    study: &Path,
    dir: &Path,
    key: &str,
    value: Option<&Value>,
) -> Result<StudyInput, StudyError> {
    match value {
        None | Some(Value::Null) => Ok(StudyInput::Default),
        Some(Value::String(file)) => Ok(StudyInput::File(existing_file(study, dir, key, file)?)),
        Some(map @ Value::Object(_)) => Ok(StudyInput::Inline(map.clone())),
        Some(other) => Err(StudyError::field(
            study,
            key,
            format!(
                "{} is neither a file name nor a mapping; write a path relative to the study file (e.g. {key}: ../workloads/{key}.yaml) or the {key}'s fields inline",
                show(other)
            ),
        )),
    }
}

/// A file named in the study, relative to the study file's folder; it must exist.
fn existing_file(study: &Path, dir: &Path, key: &str, file: &str) -> Result<PathBuf, StudyError> {
    let path = dir.join(file);
    if path.is_file() {
        Ok(path)
    } else {
        Err(StudyError::field(
            study,
            key,
            format!(
                "file '{file}' not found (looked for {}); paths are relative to the study file",
                path.display()
            ),
        ))
    }
}

fn axes(study: &Path, dir: &Path, value: Option<&Value>) -> Result<Vec<Axis>, StudyError> {
    let map = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(StudyError::field(
                study,
                "axes",
                format!(
                    "{} is not a mapping; write one line per axis, e.g. axes: {{producer_config.acks: [\"1\", all]}}",
                    show(other)
                ),
            ))
        }
    };
    let mut axes = Vec::new();
    for (key, values) in map {
        axes.push(axis(study, dir, key, values)?);
    }
    check_axes_distinct(study, &axes)?;
    Ok(axes)
}

/// The axis `name` (one path, or zipped paths joined with `+`) with its list of `values`.
fn axis(study: &Path, dir: &Path, name: &str, values: &Value) -> Result<Axis, StudyError> {
    let field = format!("axes.{name}");
    let paths: Vec<String> = name.split('+').map(|p| p.trim().to_string()).collect();
    if paths.iter().any(String::is_empty) {
        return Err(StudyError::field(
            study,
            &field,
            "an empty path; zipped axes join paths with +, e.g. message_size+payload.path",
        ));
    }
    let list = match values {
        Value::Array(list) if !list.is_empty() => list,
        Value::Array(_) => {
            return Err(StudyError::field(
                study,
                &field,
                "the list of values is empty; give at least one value, or remove the axis",
            ))
        }
        other => {
            return Err(StudyError::field(
                study,
                &field,
                format!(
                    "{} is not a list of values; write e.g. {name}: [1, 2, 3]",
                    show(other)
                ),
            ))
        }
    };
    let mut points = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        points.push(axis_point(study, dir, &field, &paths, i, v)?);
    }
    Ok(Axis { paths, points })
}

/// Value `v` (number `i` from 0) of the axis `field` over `paths`: one value per path, file
/// names of the `driver` and `workload` axes resolved relative to the study file.
fn axis_point(
    study: &Path,
    dir: &Path,
    field: &str,
    paths: &[String],
    i: usize,
    v: &Value,
) -> Result<Vec<Value>, StudyError> {
    let point = if paths.len() == 1 {
        vec![v.clone()]
    } else {
        match v {
            Value::Array(tuple) if tuple.len() == paths.len() => tuple.clone(),
            _ => {
                return Err(StudyError::field(
                    study,
                    field,
                    format!(
                    "value {} is {}; a zipped axis of {} paths takes lists of {} values, e.g. [{}]",
                    i + 1,
                    show(v),
                    paths.len(),
                    paths.len(),
                    paths
                        .iter()
                        .map(|p| format!("<{p}>"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                ))
            }
        }
    };
    let mut resolved = Vec::with_capacity(point.len());
    for (p, value) in paths.iter().zip(point) {
        if p == "driver" || p == "workload" {
            let Value::String(file) = &value else {
                return Err(StudyError::field(
                    study,
                    field,
                    format!(
                        "value {} is {}; the {p} axis takes file names relative to the study file",
                        i + 1,
                        show(&value)
                    ),
                ));
            };
            let path = existing_file(study, dir, field, file)?;
            resolved.push(Value::String(path.display().to_string()));
        } else {
            if matches!(value, Value::Null) {
                return Err(StudyError::field(
                    study,
                    field,
                    format!("value {} is empty (null); give a value for `{p}`", i + 1),
                ));
            }
            resolved.push(value);
        }
    }
    Ok(resolved)
}

/// Checks no path is on two axes.
fn check_axes_distinct(study: &Path, axes: &[Axis]) -> Result<(), StudyError> {
    let mut seen = std::collections::HashSet::new();
    for axis in axes {
        for p in &axis.paths {
            if !seen.insert(p.clone()) {
                return Err(StudyError::field(
                    study,
                    format!("axes.{}", axis.name()),
                    format!("`{p}` is on two axes; keep it on one (zip paths that vary together with +)"),
                ));
            }
        }
    }
    Ok(())
}

fn between_runs(study: &Path, value: Option<&Value>) -> Result<BetweenRuns, StudyError> {
    let mut between = BetweenRuns {
        cooldown: Duration::ZERO,
        broker: BrokerBetween::Keep,
    };
    let map = match value {
        None | Some(Value::Null) => return Ok(between),
        Some(Value::Object(m)) => m,
        Some(other) => {
            return Err(StudyError::field(
                study,
                "between_runs",
                format!(
                    "{} is not a mapping; write e.g. between_runs: {{cooldown: 5s, broker: keep}}",
                    show(other)
                ),
            ))
        }
    };
    for (key, v) in map {
        match key.as_str() {
            "cooldown" => {
                between.cooldown = parse_duration(&key_text(v))
                    .map_err(|e| StudyError::field(study, "between_runs.cooldown", e))?
            }
            "broker" => {
                between.broker = match key_text(v).as_str() {
                    "keep" => BrokerBetween::Keep,
                    "restart" => BrokerBetween::Restart,
                    other => {
                        return Err(StudyError::field(
                            study,
                            "between_runs.broker",
                            format!(
                                "unknown value `{other}`; allowed: keep, restart{}",
                                did_you_mean(other, &["keep", "restart"])
                            ),
                        ))
                    }
                }
            }
            other => {
                return Err(StudyError::field(
                    study,
                    format!("between_runs.{other}"),
                    format!(
                        "unknown key; allowed: cooldown, broker{}",
                        did_you_mean(other, &["cooldown", "broker"])
                    ),
                ))
            }
        }
    }
    Ok(between)
}
