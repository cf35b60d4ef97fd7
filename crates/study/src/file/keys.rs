//! The top-level keys of a study file other than the grid, each checked on its own: the
//! workload and driver inputs, `set:`, `broker:`, the repetitions, order and seed, the pause
//! between runs, failure handling and the search.

use std::path::{Path, PathBuf};
use std::time::Duration;

use brokerbench_model::spec::did_you_mean;
use brokerbench_model::units::parse_duration;
use brokerbench_model::yaml::Value;

use super::parts::{BetweenRuns, BrokerBetween, OnFailure, Order, StudyError, StudyInput};
use crate::broker::{is_broker_path, BrokerChoice};
use crate::search::FindSpec;
use crate::text::{key_text, show};

/// The `set:` settings every run gets, in file order; the broker, the driver and the
/// workload have their own top-level keys instead.
pub(super) fn settings(
    path: &Path,
    value: Option<&Value>,
) -> Result<Vec<(String, Value)>, StudyError> {
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
pub(super) fn broker_choice(
    path: &Path,
    value: Option<&Value>,
) -> Result<BrokerChoice, StudyError> {
    match value {
        None | Some(Value::Null) => Ok(BrokerChoice::default()),
        Some(value) => BrokerChoice::parse(value)
            .map_err(|(field, message)| StudyError::field(path, field, message)),
    }
}

/// How many runs each cell gets (`repetitions:`, 1 by default, at most 10 000).
pub(super) fn repetitions(path: &Path, value: Option<&Value>) -> Result<u32, StudyError> {
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
pub(super) fn order(path: &Path, value: Option<&Value>) -> Result<Order, StudyError> {
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
pub(super) fn seed(path: &Path, value: Option<&Value>) -> Result<u64, StudyError> {
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
pub(super) fn on_failure(path: &Path, value: Option<&Value>) -> Result<OnFailure, StudyError> {
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
pub(super) fn find_spec(
    path: &Path,
    value: Option<&Value>,
) -> Result<Option<FindSpec>, StudyError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => FindSpec::parse(v)
            .map(Some)
            .map_err(|(field, message)| StudyError::field(path, format!("find.{field}"), message)),
    }
}

pub(super) fn input(
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
pub(super) fn existing_file(
    study: &Path,
    dir: &Path,
    key: &str,
    file: &str,
) -> Result<PathBuf, StudyError> {
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

pub(super) fn between_runs(study: &Path, value: Option<&Value>) -> Result<BetweenRuns, StudyError> {
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
