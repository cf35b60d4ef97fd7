//! What every broker family shares in the model. A driver file is `driver: NAME` plus a map
//! that only the family NAME reads: the family's [`DriverSchema`] checks it, and the model
//! routes `--set` assignments and did-you-mean suggestions by the schema's field list. The
//! families themselves live in their own crates and are listed once, in the binary's registry.

use crate::metrics_endpoint::MetricsEndpointSpec;
use crate::yaml::Value;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::field::FieldError;
use crate::named::SpecError;
use crate::workload::Workload;

/// The driver-file side of a broker family.
pub trait DriverSchema: Sync {
    /// The name written as `driver: NAME` and on the command line, e.g. `"kafka"`.
    fn name(&self) -> &'static str;
    /// Every top-level field of its driver files, `driver` included: `--set` sends an
    /// assignment to the driver file when its first segment is one of these.
    fn fields(&self) -> &'static [&'static str];
    /// The built-in driver file: the family's managed local broker with default settings.
    fn builtin_driver(&self) -> &'static str;
    /// Reads and validates the driver file's map (`driver` removed); returns the resolved
    /// configuration, defaults filled in and every credential redacted, for the manifest.
    /// Errors name `file`, the field path and the fix ([`parse_driver`] does most of it).
    fn check(&self, file: &str, map: &Value) -> Result<serde_json::Value, SpecError>;
    /// Workload settings this family cannot honour, named with the fix.
    fn check_workload(&self, workload: &Workload) -> Result<(), FieldError> {
        let _ = workload;
        Ok(())
    }
    /// The OpenMessaging Benchmark driver classes (`driverClass:`) whose driver files this
    /// family reads unchanged.
    fn omb_driver_classes(&self) -> &'static [&'static str] {
        &[]
    }
    /// Why this family cannot run an OMB driver class it knows of but does not read (say the
    /// driver of a retired predecessor of its broker), with what to use instead; None for any
    /// other class.
    fn omb_driver_refusal(&self, class: &str) -> Option<String> {
        let _ = class;
        None
    }
    /// Every top-level field of such an OMB driver file: `--set` edits the file with these
    /// names before it is translated.
    fn omb_driver_fields(&self) -> &'static [&'static str] {
        &[]
    }
    /// Translates an OMB driver file's mapping into this family's driver mapping (with
    /// `driver: NAME`), and says what it chose. Errors name `file` and OMB's field.
    fn translate_omb_driver(&self, file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        let _ = map;
        Err(no_omb_driver(self.name(), file))
    }
}

/// The refusal of an OMB driver file `file` by the family `name`, which reads none.
pub fn no_omb_driver(name: &str, file: &str) -> SpecError {
    SpecError::Field {
        file: file.to_string(),
        field: "driverClass".into(),
        message: format!("the {name} family reads no OMB driver files"),
    }
}

/// The check of a family whose broker has no partitions: `partitions_per_topic` other than 1
/// is refused, "N has no meaning for " `broker` (who the broker is, and the fix).
pub fn unpartitioned(workload: &Workload, broker: &str) -> Result<(), FieldError> {
    match workload.partitions_per_topic {
        1 => Ok(()),
        n => Err(FieldError::new(
            "partitions_per_topic",
            format!("{n} has no meaning for {broker}"),
        )),
    }
}

/// An OMB driver file translated by its family.
pub struct OmbDriver {
    /// The family's own driver mapping, `driver: NAME` included.
    pub map: Value,
    pub notes: Vec<String>,
}

/// Shows the notes only: the mapping may hold credentials.
impl std::fmt::Debug for OmbDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OmbDriver")
            .field("notes", &self.notes)
            .finish_non_exhaustive()
    }
}

/// Finds the family `name` among `families`.
pub fn find<'a>(families: &[&'a dyn DriverSchema], name: &str) -> Option<&'a dyn DriverSchema> {
    families.iter().copied().find(|f| f.name() == name)
}

/// Deserializes a driver file's map into a family's config type. Unknown fields and variants
/// come back with the allowed names and the closest one; every error names `file` and the
/// field path.
pub fn parse_driver<T: DeserializeOwned>(file: &str, map: &Value) -> Result<T, SpecError> {
    crate::named::deserialize_named(file, map.clone())
}

/// A check a family makes after deserializing, turned into an error naming `file`.
pub fn field_error(file: &str, error: FieldError) -> SpecError {
    SpecError::Field {
        file: file.to_string(),
        field: error.field,
        message: error.message,
    }
}

/// A family's config as the manifest shows it: serialized with `driver: name` first and
/// every credential redacted.
pub fn resolved<T: Serialize>(name: &str, config: &T) -> serde_json::Value {
    let mut value = serde_json::to_value(config).expect("driver config serializes");
    if let serde_json::Value::Object(fields) = &mut value {
        let mut ordered = serde_json::Map::new();
        ordered.insert("driver".into(), serde_json::Value::String(name.into()));
        ordered.append(fields);
        value = serde_json::Value::Object(ordered);
    }
    crate::redact::redact_json(&mut value);
    value
}

/// A validated driver file: its family's name, its map as written (after `--set`), and the
/// resolved, redacted form. The family that checked it turns the map into its own config
/// type with [`DriverConfig::parse`]. Debug shows only the redacted form.
#[derive(Clone, PartialEq)]
pub struct DriverConfig {
    name: String,
    map: Value,
    resolved: serde_json::Value,
    broker_metrics: Option<MetricsEndpointSpec>,
}

impl DriverConfig {
    pub(crate) fn new(
        name: String,
        map: Value,
        resolved: serde_json::Value,
        broker_metrics: Option<MetricsEndpointSpec>,
    ) -> Self {
        DriverConfig {
            name,
            map,
            resolved,
            broker_metrics,
        }
    }

    /// The file's `broker_metrics:` block, which every family's driver files may hold.
    pub fn broker_metrics(&self) -> Option<&MetricsEndpointSpec> {
        self.broker_metrics.as_ref()
    }

    /// The family's name, e.g. `"kafka"`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The configuration with defaults filled in and every credential replaced, fit for
    /// manifests and logs.
    pub fn redacted(&self) -> serde_json::Value {
        self.resolved.clone()
    }

    /// The family's config type, read from the map its schema has already accepted.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, SpecError> {
        parse_driver(&format!("{} driver file", self.name), &self.map)
    }
}

impl std::fmt::Debug for DriverConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DriverConfig({})", self.resolved)
    }
}
