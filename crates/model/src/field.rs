//! The words every validation speaks: a field's error, a YAML scalar as written, durations
//! written back as text. A leaf (it imports only the YAML reader), so the workload, its faults,
//! the driver schemas and the spec loader can all use it without importing each other.

use serde::Deserialize;

use crate::yaml::Value;

/// A validation failure: the field path (as written in YAML), and what is wrong with how to fix it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: &str, message: impl Into<String>) -> Self {
        FieldError {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// A YAML scalar that may be a number or a string with a unit.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Scalar {
    Number(f64),
    Text(String),
}

impl Scalar {
    pub(crate) fn text(&self) -> String {
        match self {
            Scalar::Number(n) => n.to_string(),
            Scalar::Text(t) => t.clone(),
        }
    }
}

/// Serializes durations as text such as "5s" so that a manifest reads like the workload file.
pub mod duration_text {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        let us = d.as_micros();
        if us.is_multiple_of(1_000_000) {
            s.serialize_str(&format!("{}s", us / 1_000_000))
        } else if us.is_multiple_of(1000) {
            s.serialize_str(&format!("{}ms", us / 1000))
        } else {
            s.serialize_str(&format!("{us}us"))
        }
    }
}

/// A `--set` value as YAML reads it (`3` a number, `all` a string), else the text itself.
pub fn parse_scalar(text: &str) -> Value {
    crate::yaml::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}
