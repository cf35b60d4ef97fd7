//! What went wrong with a file the user brought ([`SpecError`]), and the deserialiser that
//! names the file and the field in every error and suggests the closest allowed name.

use crate::yaml::Value;
use serde::de::DeserializeOwned;

/// What went wrong with a workload or driver specification.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("cannot read {file}: {source}")]
    Read {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not valid YAML: {message}")]
    Syntax { file: String, message: String },
    #[error("{file} is empty; write its fields (e.g. `rate: 20000`), or `{{}}` for all defaults")]
    Empty { file: String },
    #[error("{file}: field `{field}`: {message}")]
    Field {
        file: String,
        field: String,
        message: String,
    },
    #[error("--set {assignment}: {message}")]
    Override { assignment: String, message: String },
}

impl SpecError {
    /// What is wrong with field `field` of file `file`.
    pub fn field(file: &str, field: &str, message: impl Into<String>) -> SpecError {
        SpecError::Field {
            file: file.to_string(),
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// Deserializes `value`, naming `file` and the field path in any error.
pub(crate) fn deserialize_named<T: DeserializeOwned>(
    file: &str,
    value: Value,
) -> Result<T, SpecError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        let message = explain(&e.inner().to_string());
        SpecError::Field {
            file: file.to_string(),
            field: if field == "." {
                "(top level)".into()
            } else {
                field
            },
            message,
        }
    })
}

/// Rewrites serde's "unknown field/variant `x`, expected one of `a`, `b`" into a message with
/// the allowed values and the closest one.
fn explain(message: &str) -> String {
    let ticked: Vec<&str> = message.split('`').skip(1).step_by(2).collect();
    let unknown_kind = ["unknown field", "unknown variant"]
        .into_iter()
        .find(|p| message.starts_with(p));
    match (unknown_kind, ticked.split_first()) {
        (Some(kind), Some((bad, allowed))) => {
            let what = if kind == "unknown field" {
                "fields"
            } else {
                "values"
            };
            let allowed_list = if allowed.is_empty() {
                "none".to_string()
            } else {
                allowed.join(", ")
            };
            format!(
                "{kind} `{bad}`; allowed {what}: {allowed_list}{}",
                did_you_mean(bad, allowed)
            )
        }
        _ => message.to_string(),
    }
}

/// "; did you mean `x`?" for the closest candidate, or nothing when none is close.
pub fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    candidates
        .iter()
        .map(|c| (strsim::levenshtein(word, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min()
        .map(|(_, c)| format!("; did you mean `{c}`?"))
        .unwrap_or_default()
}
