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

/// A value on one line in YAML's flow style, for labels: `[{at: 3s, action: kill}]`.
pub fn flow_text(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(flow_text).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{k}: {}", flow_text(v)))
                .collect();
            format!("{{{}}}", fields.join(", "))
        }
        scalar => key_text(scalar),
    }
}

/// A YAML value as it would be written in a flow, for messages.
pub(crate) fn show(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| key_text(value))
}
