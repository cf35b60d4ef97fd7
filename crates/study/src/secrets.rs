//! Credentials of a study. A study folder is written like a run's results: every credential
//! redacted. It keeps where the credentials come from (the study file, driver files,
//! environment variables) but never their values, so a resumed study reads them again from
//! there, and says what is missing when it cannot.

use std::path::Path;

use brokerbench_model::redact::{redact_assignment, redact_json, redact_setting};
use brokerbench_model::yaml::Value;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::file::{Study, StudyInput};

/// The key under which the study's definition keeps the command line's `--set`.
pub const COMMAND_LINE_SETS: &str = "--set";

/// The study's definition (the study file's keys, the command line's settings) with every
/// credential replaced by `***`: what study.json keeps, and what tells whether a resumed study
/// is still the same study (a changed password does not make it another).
pub fn redacted_definition(definition: &Json) -> Json {
    let mut shown = definition.clone();
    if let Some(Json::Array(sets)) = shown.get_mut(COMMAND_LINE_SETS) {
        for set in sets.iter_mut() {
            if let Json::String(text) = set {
                *text = redact_assignment(text);
            }
        }
    }
    redact_json(&mut shown);
    shown
}

/// An axis value or setting as a study writes it: `***` when its path names a secret, else
/// with the secrets inside it (a URL's user and password) replaced.
pub fn redacted_value(path: &str, value: &Value) -> Json {
    let mut json = serde_json::to_value(value).unwrap_or_default();
    redact_setting(path, &mut json);
    json
}

/// Whether a YAML value holds a credential that redaction would hide.
pub fn holds_secret(value: &Value) -> bool {
    let json = serde_json::to_value(value).unwrap_or_default();
    let mut redacted = json.clone();
    redact_json(&mut redacted);
    redacted != json
}

/// Where a study's credentials come from; names and paths only, never a value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretSources {
    /// The study file, when it holds credentials itself (in `set:`, an inline driver, an axis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub study_file: Option<String>,
    /// Driver files (the study's, and those of a `driver` axis) that hold credentials.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub driver_files: Vec<String>,
    /// Environment variables that held credentials for the runs (their names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment: Vec<String>,
}

impl SecretSources {
    /// Finds where `study`'s credentials come from. `variables` are the names of the
    /// environment variables that can hold credentials; `is_set` tells which are set.
    pub fn of(study: &Study, variables: &[&str], is_set: impl Fn(&str) -> bool) -> SecretSources {
        let study_file = (redacted_definition(&study.definition) != study.definition)
            .then(|| study.file.display().to_string());
        let mut files: Vec<&Path> = Vec::new();
        if let StudyInput::File(path) = &study.driver {
            files.push(path);
        }
        for axis in &study.axes {
            for (i, path) in axis.paths.iter().enumerate() {
                if path != "driver" {
                    continue;
                }
                for point in &axis.points {
                    if let Some(Value::String(file)) = point.get(i) {
                        files.push(Path::new(file));
                    }
                }
            }
        }
        let mut driver_files: Vec<String> = files
            .into_iter()
            .filter(|path| file_holds_secret(path))
            .map(|path| path.display().to_string())
            .collect();
        driver_files.dedup();
        SecretSources {
            study_file,
            driver_files,
            environment: variables
                .iter()
                .filter(|name| is_set(name))
                .map(|name| name.to_string())
                .collect(),
        }
    }

    /// The environment variables an earlier invocation took credentials from that are not
    /// set now, each with how to supply it. (A study file or driver file that is gone stops
    /// the study earlier, when it is read.) `is_set` tells which variables are set now.
    pub fn missing(&self, is_set: impl Fn(&str) -> bool) -> Vec<String> {
        self.environment
            .iter()
            .filter(|name| !is_set(name))
            .map(|name| {
                format!("{name} is not set (the runs took credentials from it): export {name}=…")
            })
            .collect()
    }
}

fn file_holds_secret(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| brokerbench_model::yaml::from_str::<Value>(&text).ok())
        .is_some_and(|value| holds_secret(&value))
}
