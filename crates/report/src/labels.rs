//! Names for the runs of a comparison, shown in table headers and chart legends. Two runs whose
//! folders are both called `out` (as `--out` makes them) must still be told apart, so a run is
//! named by what sets it apart from the others — its family, its workload, the settings that
//! differ — as the manifests record them, unless the person comparing named the runs.

use serde_json::{Map, Value as Json};

/// At most this many differing settings in a name; more would make table headers unreadable.
const MAX_SETTINGS: usize = 3;

/// At most this many characters of one setting's value.
const MAX_VALUE_CHARS: usize = 24;

/// One input of a comparison, as far as naming it goes.
#[derive(Debug, Clone)]
pub struct RunToName {
    /// The folder's own name (its last path component), or `STUDY#N` for a study cell.
    pub name: String,
    /// Whether `name` was made by brokerbench (a time stamp, a study's run or cell) rather
    /// than chosen by a person, who may have put in it what no manifest knows.
    pub generated: bool,
    /// The run's manifest.json; None when unreadable.
    pub manifest: Option<Json>,
}

impl RunToName {
    /// A results folder known by its path: its last component, generated or not.
    pub fn folder(path: &std::path::Path, manifest: Option<Json>) -> Self {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        RunToName {
            generated: generated_folder_name(&name),
            name,
            manifest,
        }
    }
}

/// Why the given names cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LabelError {
    #[error("{inputs} inputs but {given} --label: give --label once per input, in the inputs' order, or not at all")]
    Count { given: usize, inputs: usize },
    #[error("--label `{0}` is given twice; each run needs a label of its own")]
    Repeated(String),
    #[error("--label is empty; give a name such as --label acks-all")]
    Empty,
}

/// The name of each run, in the inputs' order, all different: the `given` labels when there
/// are any (one per input); else the folder names when a person chose them and they differ;
/// else what differs between the manifests; else the folder names when they differ; and where
/// names still collide, their position in the comparison (`#2`) is added.
pub fn comparison_labels(runs: &[RunToName], given: &[String]) -> Result<Vec<String>, LabelError> {
    if !given.is_empty() {
        return checked_given(given, runs.len());
    }
    let names: Vec<String> = runs.iter().map(|r| r.name.clone()).collect();
    if runs.iter().all(|r| !r.generated) && all_distinct(&names) {
        return Ok(names);
    }
    let manifests: Option<Vec<&Json>> = runs.iter().map(|r| r.manifest.as_ref()).collect();
    let differences = manifests.map(|m| difference_labels(&m)).unwrap_or_default();
    if !differences.is_empty() && differences.iter().all(|d| !d.is_empty()) {
        return Ok(numbered_where_repeated(differences));
    }
    Ok(numbered_where_repeated(names))
}

/// Whether brokerbench made this folder name: `YYYYMMDD-HHMMSS-workload` (see
/// [`crate::folder_name`]), a study's run folder `c001-r1…`, or a merged folder `…-merged`.
pub fn generated_folder_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|b| b.iter().all(u8::is_ascii_digit))
    };
    let time_stamp = digits(0..8) && bytes.get(8) == Some(&b'-') && digits(9..15);
    let study_run = bytes.first() == Some(&b'c')
        && digits(1..4)
        && name.get(4..6) == Some("-r")
        && digits(6..7);
    time_stamp || study_run || name.ends_with("-merged")
}

/// Whether `given` labels (`--label`, none or one per input) can name `inputs` runs: checked
/// before any input is read, so a mistyped command fails at once.
pub fn check_given_labels(given: &[String], inputs: usize) -> Result<(), LabelError> {
    checked_given(given, inputs).map(drop)
}

fn checked_given(given: &[String], inputs: usize) -> Result<Vec<String>, LabelError> {
    if given.is_empty() {
        return Ok(Vec::new());
    }
    if given.len() != inputs {
        return Err(LabelError::Count {
            given: given.len(),
            inputs,
        });
    }
    for (i, label) in given.iter().enumerate() {
        if label.trim().is_empty() {
            return Err(LabelError::Empty);
        }
        if given[..i].contains(label) {
            return Err(LabelError::Repeated(label.clone()));
        }
    }
    Ok(given.to_vec())
}

fn all_distinct(labels: &[String]) -> bool {
    labels
        .iter()
        .enumerate()
        .all(|(i, l)| !labels[..i].contains(l))
}

/// Adds ` #N` (N = position, from 1) to every label that another one repeats.
fn numbered_where_repeated(labels: Vec<String>) -> Vec<String> {
    let repeated = |l: &String| labels.iter().filter(|other| *other == l).count() > 1;
    labels
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if repeated(l) {
                format!("{l} #{}", i + 1)
            } else {
                l.clone()
            }
        })
        .collect()
}

/// Per run, what sets it apart as `family · workload · key=value, …`, only the parts that
/// differ between the runs; empty strings when nothing does. A driver's settings are compared
/// only between runs of one family: across families they have different keys anyway, and the
/// family's name says it.
pub(crate) fn difference_labels(manifests: &[&Json]) -> Vec<String> {
    let text_at = |m: &Json, a: &str, b: &str| m[a][b].as_str().unwrap_or("?").to_string();
    let families: Vec<String> = manifests
        .iter()
        .map(|m| text_at(m, "driver", "driver"))
        .collect();
    let workloads: Vec<String> = manifests
        .iter()
        .map(|m| text_at(m, "workload", "name"))
        .collect();
    let mut parts: Vec<Vec<String>> = vec![Vec::new(); manifests.len()];
    for column in [&families, &workloads] {
        if !all_same(column) {
            for (part, value) in parts.iter_mut().zip(column) {
                part.push(value.clone());
            }
        }
    }
    let mut settings = Vec::new();
    let sections: &[(&str, &str)] = if all_same(&families) {
        &[("workload", "name"), ("driver", "driver")]
    } else {
        &[("workload", "name")]
    };
    for (section, identity) in sections {
        let values: Option<Vec<Json>> = manifests
            .iter()
            .map(|m| m.get(*section).filter(|s| s.is_object()))
            .map(|s| s.map(|s| without(s, identity)))
            .collect();
        // A manifest without the section (an old or damaged one) has nothing to compare.
        if let Some(values) = values {
            let values: Vec<Option<&Json>> = values.iter().map(Some).collect();
            differing_settings(&values, "", &mut settings);
        }
    }
    for (i, part) in parts.iter_mut().enumerate() {
        let mut shown: Vec<String> = settings
            .iter()
            .take(MAX_SETTINGS)
            .map(|(key, values)| format!("{key}={}", values[i]))
            .collect();
        if settings.len() > MAX_SETTINGS {
            shown.push(format!("+{} more", settings.len() - MAX_SETTINGS));
        }
        if !shown.is_empty() {
            part.push(shown.join(", "));
        }
    }
    parts.into_iter().map(|p| p.join(" · ")).collect()
}

fn all_same(values: &[String]) -> bool {
    values.windows(2).all(|w| w[0] == w[1])
}

/// The section without its identity key (the workload's name, the driver's family), which
/// is named on its own.
fn without(section: &Json, key: &str) -> Json {
    match section {
        Json::Object(fields) => {
            let mut fields = fields.clone();
            fields.shift_remove(key);
            Json::Object(fields)
        }
        other => other.clone(),
    }
}

/// Appends `(dotted.key, value text per run)` for every setting whose value is not the same in
/// every run, descending into objects that all runs have, so `producer_config.acks` is named
/// rather than the whole `producer_config`.
fn differing_settings(
    values: &[Option<&Json>],
    prefix: &str,
    out: &mut Vec<(String, Vec<String>)>,
) {
    if values.windows(2).all(|w| w[0] == w[1]) {
        return;
    }
    let objects: Option<Vec<&Map<String, Json>>> =
        values.iter().map(|v| v.and_then(Json::as_object)).collect();
    match objects {
        Some(objects) => {
            let mut keys: Vec<&String> = Vec::new();
            for key in objects.iter().flat_map(|o| o.keys()) {
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
            for key in keys {
                let inner: Vec<Option<&Json>> = objects.iter().map(|o| o.get(key)).collect();
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                differing_settings(&inner, &path, out);
            }
        }
        None => out.push((
            prefix.to_string(),
            values.iter().map(|v| value_text(*v)).collect(),
        )),
    }
}

/// A setting's value as `--set` would take it; `default` where the manifest leaves it out
/// (a setting at its default is not written).
fn value_text(value: Option<&Json>) -> String {
    let text = match value {
        None => "default".to_string(),
        Some(Json::String(s)) => s.clone(),
        Some(Json::Null) => "none".to_string(),
        // Rates are written as floats (`50000.0`); `--set rate=50000` is how a person says it.
        Some(Json::Number(n))
            if n.as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f.abs() < 1e15) =>
        {
            format!("{:.0}", n.as_f64().unwrap_or_default())
        }
        Some(other) => other.to_string(),
    };
    if text.chars().count() > MAX_VALUE_CHARS {
        let cut: String = text.chars().take(MAX_VALUE_CHARS - 1).collect();
        format!("{cut}…")
    } else {
        text
    }
}
