//! The study file: what to vary, how often, in which order. Parsed and checked as a whole
//! before anything runs; every error names the study file, the key and the fix.

mod axes;
mod keys;
mod parts;

use std::path::{Path, PathBuf};

use brokerbench_model::spec::did_you_mean;
use brokerbench_model::yaml::{Mapping, Value};

use self::axes::{axes, check_axes_unfixed};
use self::keys::{
    between_runs, broker_choice, find_spec, input, on_failure, order, repetitions, seed, settings,
};
use crate::broker::BrokerChoice;
use crate::search::FindSpec;
use crate::text::show;

pub use self::parts::{Axis, BetweenRuns, BrokerBetween, OnFailure, Order, StudyError, StudyInput};

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
