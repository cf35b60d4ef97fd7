//! YAML keys and values as a study's messages and settings write them.

use brokerbench_model::yaml::Value;

/// A YAML key or scalar as text.
pub(crate) fn key_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => "null".into(),
        other => brokerbench_model::yaml::to_string(other)
            .unwrap_or_default()
            .trim()
            .to_string(),
    }
}

/// A YAML value as it would be written in a flow, for messages.
pub(crate) fn show(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| key_text(value))
}
