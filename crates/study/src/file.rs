//! The study file: what to vary, how often, in which order. Parsed and checked as a whole
//! before anything runs; every error names the study file, the key and the fix.

use std::path::{Path, PathBuf};
use std::time::Duration;

use brokerbench_model::spec::did_you_mean;
use brokerbench_model::units::parse_duration;
use brokerbench_model::yaml::Value;

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
        let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
        let name = match map.get("name") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            Some(other) => {
                return Err(StudyError::field(
                    path,
                    "name",
                    format!(
                        "{} is not a name; write e.g. name: kafka-batch-size",
                        show(other)
                    ),
                ))
            }
            None => {
                return Err(StudyError::field(
                    path,
                    "name",
                    "missing; add e.g. name: kafka-batch-size (it names the study's folder)",
                ))
            }
        };
        let workload = input(path, &dir, "workload", map.get("workload"))?;
        let driver = input(path, &dir, "driver", map.get("driver"))?;
        let set = match map.get("set") {
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
        let axes = axes(path, &dir, map.get("axes"))?;
        let broker = match map.get("broker") {
            None | Some(Value::Null) => BrokerChoice::default(),
            Some(value) => BrokerChoice::parse(value)
                .map_err(|(field, message)| StudyError::field(path, field, message))?,
        };
        for axis in &axes {
            for p in &axis.paths {
                if broker.chooses(p) {
                    return Err(StudyError::field(
                        path,
                        format!("axes.{}", axis.name()),
                        format!(
                            "`{p}` is both an axis and in `broker`; remove it from one of them"
                        ),
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
        let repetitions = match map.get("repetitions") {
            None => 1,
            Some(Value::Number(n)) if n.as_u64().is_some_and(|n| (1..=10_000).contains(&n)) => {
                n.as_u64().unwrap_or(1) as u32
            }
            Some(other) => {
                return Err(StudyError::field(
                    path,
                    "repetitions",
                    format!(
                        "{} is not allowed; give a whole number of runs per cell, at least 1 (e.g. repetitions: 5)",
                        show(other)
                    ),
                ))
            }
        };
        let order = match map.get("order").map(key_text).as_deref() {
            None | Some("interleaved") => Order::Interleaved,
            Some("sequential") => Order::Sequential,
            Some("shuffled") => Order::Shuffled,
            Some(other) => {
                let allowed = ["interleaved", "sequential", "shuffled"];
                return Err(StudyError::field(
                    path,
                    "order",
                    format!(
                        "unknown order `{other}`; allowed: {}{}",
                        allowed.join(", "),
                        did_you_mean(other, &allowed)
                    ),
                ));
            }
        };
        let seed = match map.get("seed") {
            None => 1,
            Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64().unwrap_or(1),
            Some(other) => {
                return Err(StudyError::field(
                    path,
                    "seed",
                    format!("{} is not a whole number ≥ 0", show(other)),
                ))
            }
        };
        let between_runs = between_runs(path, map.get("between_runs"))?;
        let on_failure = match map.get("on_failure").map(key_text).as_deref() {
            None | Some("continue") => OnFailure::Continue,
            Some("stop") => OnFailure::Stop,
            Some(other) => {
                return Err(StudyError::field(
                    path,
                    "on_failure",
                    format!(
                        "unknown value `{other}`; allowed: continue, stop{}",
                        did_you_mean(other, &["continue", "stop"])
                    ),
                ))
            }
        };
        let find = match map.get("find") {
            None | Some(Value::Null) => None,
            Some(v) => Some(FindSpec::parse(v).map_err(|(field, message)| {
                StudyError::field(path, format!("find.{field}"), message)
            })?),
        };
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
        let name = key.clone();
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
            let point = if paths.len() == 1 {
                vec![v.clone()]
            } else {
                match v {
                    Value::Array(tuple) if tuple.len() == paths.len() => tuple.clone(),
                    _ => {
                        return Err(StudyError::field(
                            study,
                            &field,
                            format!(
                                "value {} is {}; a zipped axis of {} paths takes lists of {} values, e.g. [{}]",
                                i + 1,
                                show(v),
                                paths.len(),
                                paths.len(),
                                paths.iter().map(|p| format!("<{p}>")).collect::<Vec<_>>().join(", ")
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
                            &field,
                            format!(
                                "value {} is {}; the {p} axis takes file names relative to the study file",
                                i + 1,
                                show(&value)
                            ),
                        ));
                    };
                    let path = existing_file(study, dir, &field, file)?;
                    resolved.push(Value::String(path.display().to_string()));
                } else {
                    if matches!(value, Value::Null) {
                        return Err(StudyError::field(
                            study,
                            &field,
                            format!("value {} is empty (null); give a value for `{p}`", i + 1),
                        ));
                    }
                    resolved.push(value);
                }
            }
            points.push(resolved);
        }
        axes.push(Axis { paths, points });
    }
    let mut seen = std::collections::HashSet::new();
    for axis in &axes {
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
    Ok(axes)
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
