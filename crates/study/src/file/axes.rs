//! The grid of a study file (`axes:`): each axis's paths and values, zipped axes, file names
//! of the `driver` and `workload` axes, and no path on two axes.

use std::path::Path;

use brokerbench_model::yaml::Value;

use super::keys::existing_file;
use super::parts::{Axis, StudyError};
use crate::broker::BrokerChoice;
use crate::text::show;

pub(super) fn axes(
    study: &Path,
    dir: &Path,
    value: Option<&Value>,
) -> Result<Vec<Axis>, StudyError> {
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

/// Checks no axis varies a path that `broker` or `set` already fixes for every run.
pub(super) fn check_axes_unfixed(
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
