//! Loading workload and driver files: read YAML, apply `--set field=value` overrides, reject
//! unknown fields with a did-you-mean, deserialize, validate. Every error names the file, the
//! field path, the bad value and what is allowed.

use std::path::Path;

use crate::yaml::{Mapping, Value};
use serde::de::DeserializeOwned;

use crate::family::{self, DriverConfig, DriverSchema};
use crate::field::parse_scalar;
use crate::metrics_endpoint::{MetricsEndpointSpec, BROKER_METRICS_FIELD};
use crate::named::deserialize_named;
pub use crate::named::{did_you_mean, SpecError};
use crate::workload::{RawWorkload, Workload, WORKLOAD_FIELDS};

/// The bundled default workload (`workloads/quickstart.yaml`).
pub const QUICKSTART_WORKLOAD: &str = include_str!("../../../workloads/quickstart.yaml");
/// A validated pair of workload and driver configuration, with where each came from.
#[derive(Debug, Clone)]
pub struct Specs {
    pub workload: Workload,
    pub driver: DriverConfig,
    /// File path of the workload, or "built-in quickstart".
    pub workload_source: String,
    /// File path of the driver file, or "built-in NAME driver".
    pub driver_source: String,
    /// What reading the files chose that a user should know (e.g. how an OpenMessaging
    /// Benchmark workload was translated).
    pub notes: Vec<String>,
}

/// One source text with its display name.
struct Source {
    name: String,
    value: Value,
    /// Folder of the file it came from: relative paths inside it (payload.path) start there.
    base: Option<std::path::PathBuf>,
}

/// Where a workload or driver specification comes from.
#[derive(Debug, Clone, Copy)]
pub enum SpecInput<'a> {
    /// The built-in default (the quickstart workload; the first family's managed broker).
    Default,
    /// A YAML file.
    File(&'a Path),
    /// A mapping already parsed, e.g. written inline in a study file; `name` says where.
    Inline { name: &'a str, value: &'a Value },
}

impl<'a> From<Option<&'a Path>> for SpecInput<'a> {
    fn from(path: Option<&'a Path>) -> Self {
        path.map_or(SpecInput::Default, SpecInput::File)
    }
}

fn read_input(
    input: SpecInput<'_>,
    builtin_name: &str,
    builtin: &str,
) -> Result<Source, SpecError> {
    match input {
        SpecInput::Default => read_source(None, builtin_name, builtin),
        SpecInput::File(path) => read_source(Some(path), builtin_name, builtin),
        SpecInput::Inline { name, value } => match value {
            Value::Object(_) => Ok(Source {
                name: name.to_string(),
                value: value.clone(),
                base: None,
            }),
            _ => Err(SpecError::Syntax {
                file: name.to_string(),
                message: "must be a mapping of field: value".into(),
            }),
        },
    }
}

fn read_source(
    path: Option<&Path>,
    builtin_name: &str,
    builtin: &str,
) -> Result<Source, SpecError> {
    let (name, text) = match path {
        Some(p) => {
            let name = p.display().to_string();
            let text = std::fs::read_to_string(p).map_err(|source| SpecError::Read {
                file: name.clone(),
                source,
            })?;
            (name, text)
        }
        None => (builtin_name.to_string(), builtin.to_string()),
    };
    let mut source = parse_source(name, &text)?;
    source.base = path.and_then(Path::parent).map(Path::to_path_buf);
    Ok(source)
}

fn parse_source(name: String, text: &str) -> Result<Source, SpecError> {
    let value: Value = crate::yaml::from_str(text).map_err(|e| SpecError::Syntax {
        file: name.clone(),
        message: e.to_string(),
    })?;
    let value = match value {
        // An empty file is a mistake (a wrong path, an unsaved editor); `{}` asks for defaults.
        Value::Null => return Err(SpecError::Empty { file: name }),
        Value::Object(_) => value,
        _ => {
            return Err(SpecError::Syntax {
                file: name,
                message: "the top level must be a mapping of field: value".into(),
            })
        }
    };
    Ok(Source {
        name,
        value,
        base: None,
    })
}

/// Loads the workload and driver files (or the built-in defaults), applies overrides and
/// validates everything before any I/O towards a broker.
///
/// Overrides go to the workload when they name a workload field, else to the driver file when
/// they name a field of the driver in use: the driver file's `driver:` value after any
/// `--set driver=...`. Without a driver file, `--set driver=NAME` starts from that driver's
/// built-in file (the managed local broker). `families` are the driver families this build
/// knows; the first one's built-in driver file is the default.
pub fn load_specs(
    families: &[&dyn DriverSchema],
    workload: Option<&Path>,
    driver: Option<&Path>,
    overrides: &[String],
) -> Result<Specs, SpecError> {
    load_specs_from(families, workload.into(), driver.into(), overrides)
}

/// [`load_specs`] for specifications that may also be inline mappings.
pub fn load_specs_from(
    families: &[&dyn DriverSchema],
    workload: SpecInput<'_>,
    driver: SpecInput<'_>,
    overrides: &[String],
) -> Result<Specs, SpecError> {
    let default = families
        .first()
        .expect("at least one driver family is registered");
    let mut assignments = split_assignments(overrides)?;
    let mut workload_source = read_input(workload, "built-in quickstart", QUICKSTART_WORKLOAD)?;
    let mut driver_source = read_driver(families, *default, driver, &assignments)?;
    // An OMB driver file: OMB's names in --set edit it, then its family translates it.
    let mut notes = Vec::new();
    if driver_source.value.get("driverClass").is_some() {
        translate_omb_driver_file(families, &mut driver_source, &mut assignments, &mut notes)?;
    }
    // `driver` first: it decides where the other driver fields go.
    for (assignment, key, value) in assignments.iter().filter(|(_, k, _)| *k == "driver") {
        apply(&mut driver_source, assignment, key, value)?;
    }
    // An OMB workload takes OMB's field names; brokerbench's own are set on its translation.
    let omb = crate::omb::is_omb_workload(&workload_source.value);
    let native_sets = route_assignments(
        families,
        &assignments,
        &mut workload_source,
        &mut driver_source,
        omb,
    )?;
    if omb {
        translate_omb_workload(&mut workload_source, native_sets, &mut notes)?;
    }
    let workload = workload_from(&workload_source)?;
    let (driver, schema) = driver_from(families, &driver_source)?;
    schema
        .check_workload(&workload)
        .map_err(|e| family::field_error(&workload_source.name, e))?;
    Ok(Specs {
        workload,
        driver,
        workload_source: workload_source.name,
        driver_source: driver_source.name,
        notes,
    })
}

/// One `--set` override: the assignment as written, the field path, the value text.
type Assignment<'a> = (&'a str, &'a str, &'a str);

/// The `--set` overrides split at their first `=` into field path and value, in order.
fn split_assignments(overrides: &[String]) -> Result<Vec<Assignment<'_>>, SpecError> {
    let mut assignments = Vec::with_capacity(overrides.len());
    for assignment in overrides {
        let (key, value) = assignment
            .split_once('=')
            .ok_or_else(|| SpecError::Override {
                // No '=': the whole text may be a URI with a password (`uri:amqp://u:p@h`).
                assignment: crate::redact::redact_uri(assignment),
                message: "write it as field=value, e.g. --set rate=20000".into(),
            })?;
        assignments.push((assignment.as_str(), key.trim(), value));
    }
    Ok(assignments)
}

/// The driver file: the one given; without one, the built-in file of the driver the last
/// `--set driver=NAME` names, else the `default` family's built-in file.
fn read_driver(
    families: &[&dyn DriverSchema],
    default: &dyn DriverSchema,
    driver: SpecInput<'_>,
    assignments: &[Assignment<'_>],
) -> Result<Source, SpecError> {
    let driver_override = assignments
        .iter()
        .rev()
        .find(|(_, key, _)| *key == "driver")
        .map(|(_, _, value)| value.trim());
    let chosen = driver_override.and_then(|name| family::find(families, name));
    match (driver, chosen) {
        (SpecInput::Default, Some(family)) => parse_source(
            format!("built-in {} driver", family.name()),
            family.builtin_driver(),
        ),
        _ => read_input(
            driver,
            &format!("built-in {} driver", default.name()),
            default.builtin_driver(),
        ),
    }
}

/// Translates an OMB driver file (`driver_source`): the overrides naming OMB's fields of it
/// leave `assignments` and edit it first; what the translation chose goes to `notes`.
fn translate_omb_driver_file(
    families: &[&dyn DriverSchema],
    driver_source: &mut Source,
    assignments: &mut Vec<Assignment<'_>>,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    let family = omb_driver_family(families, driver_source)?;
    let fields = family.omb_driver_fields();
    let (omb_sets, rest): (Vec<_>, Vec<_>) =
        std::mem::take(assignments)
            .into_iter()
            .partition(|(_, key, _)| {
                let top = key.split('.').next().unwrap_or_default();
                top != "name" && fields.contains(&top) && !WORKLOAD_FIELDS.contains(&top)
            });
    *assignments = rest;
    for (assignment, key, value) in omb_sets {
        apply(driver_source, assignment, key, value)?;
    }
    let translated = family.translate_omb_driver(&driver_source.name, &driver_source.value)?;
    driver_source.value = translated.map;
    notes.extend(translated.notes);
    Ok(())
}

/// Applies every override but `driver` to the file with its field: the workload, or the
/// driver file when it names a field of the driver in use. On an OMB workload (`omb`),
/// brokerbench's own workload fields are returned, to be set on its translation.
fn route_assignments<'a>(
    families: &[&dyn DriverSchema],
    assignments: &[Assignment<'a>],
    workload_source: &mut Source,
    driver_source: &mut Source,
    omb: bool,
) -> Result<Vec<Assignment<'a>>, SpecError> {
    let in_use = driver_source
        .value
        .get("driver")
        .and_then(Value::as_str)
        .map(str::to_string);
    let fields_of = |name: &str| family::find(families, name).map(|f| f.fields());
    let in_use_fields = in_use.as_deref().and_then(fields_of);
    let mut native_sets = Vec::new();
    for (assignment, key, value) in assignments.iter().filter(|(_, k, _)| *k != "driver") {
        let top = key.split('.').next().unwrap_or_default();
        let target = if omb && crate::omb::OMB_FIELDS.contains(&top) {
            &mut *workload_source
        } else if omb && WORKLOAD_FIELDS.contains(&top) {
            native_sets.push((*assignment, *key, *value));
            continue;
        } else if WORKLOAD_FIELDS.contains(&top) {
            &mut *workload_source
        } else if top == BROKER_METRICS_FIELD
            || in_use_fields.map_or_else(
                // An unknown or missing driver name is reported by the driver file check; until
                // then a field of any driver goes to the driver file.
                || families.iter().any(|f| f.fields().contains(&top)),
                |fields| fields.contains(&top),
            )
        {
            &mut *driver_source
        } else {
            return Err(SpecError::Override {
                assignment: crate::redact::redact_assignment(assignment),
                message: unknown_override(
                    families,
                    top,
                    in_use.as_deref(),
                    &driver_source.name,
                    omb,
                ),
            });
        };
        apply(target, assignment, key, value)?;
    }
    Ok(native_sets)
}

/// Translates an OMB workload (`workload_source`), then sets on the translation the
/// brokerbench workload fields the command line gives (`native_sets`); what the translation
/// chose goes to `notes`.
fn translate_omb_workload(
    workload_source: &mut Source,
    native_sets: Vec<Assignment<'_>>,
    notes: &mut Vec<String>,
) -> Result<(), SpecError> {
    let set: Vec<&str> = native_sets
        .iter()
        .map(|(_, key, _)| key.split('.').next().unwrap_or_default())
        .collect();
    let translated = crate::omb::translate(
        &workload_source.name,
        workload_source.base.as_deref(),
        &workload_source.value,
        &set,
    )?;
    workload_source.value = translated.workload;
    notes.extend(translated.notes);
    for (assignment, key, value) in native_sets {
        apply(workload_source, assignment, key, value)?;
    }
    Ok(())
}

fn apply(target: &mut Source, assignment: &str, key: &str, value: &str) -> Result<(), SpecError> {
    set_path(&mut target.value, key, parse_scalar(value)).map_err(|message| SpecError::Override {
        assignment: crate::redact::redact_assignment(assignment),
        message,
    })
}

/// Why an override names no field of the workload or of the driver in use, with the fix.
fn unknown_override(
    families: &[&dyn DriverSchema],
    top: &str,
    in_use: Option<&str>,
    driver_file: &str,
    omb: bool,
) -> String {
    let in_use_fields = in_use
        .and_then(|name| family::find(families, name))
        .map(|f| f.fields())
        .unwrap_or_default();
    if let Some(owner) = families.iter().map(|f| f.name()).find(|d| {
        Some(*d) != in_use && family::find(families, d).is_some_and(|f| f.fields().contains(&top))
    }) {
        return format!(
            "`{top}` is a field of the {owner} driver, but the driver in use is {} ({driver_file}); choose a {owner} driver file with --driver, or add --set driver={owner}",
            in_use.unwrap_or("not set"),
        );
    }
    let omb_fields: &[&str] = if omb { crate::omb::OMB_FIELDS } else { &[] };
    let all: Vec<&str> = WORKLOAD_FIELDS
        .iter()
        .chain(omb_fields)
        .chain(in_use_fields)
        .chain(&[BROKER_METRICS_FIELD])
        .copied()
        .collect();
    format!("unknown field `{top}`{}", did_you_mean(top, &all))
}

/// The family that reads the OMB driver file `source` (by its `driverClass`).
fn omb_driver_family<'a>(
    families: &[&'a dyn DriverSchema],
    source: &Source,
) -> Result<&'a dyn DriverSchema, SpecError> {
    let class = source
        .value
        .get("driverClass")
        .and_then(Value::as_str)
        .unwrap_or_default();
    families
        .iter()
        .copied()
        .find(|f| f.omb_driver_classes().contains(&class))
        .ok_or_else(|| {
            let known: Vec<&str> = families
                .iter()
                .flat_map(|f| f.omb_driver_classes().iter().copied())
                .collect();
            let message = families
                .iter()
                .find_map(|f| f.omb_driver_refusal(class))
                .unwrap_or_else(|| {
                    format!(
                        "`{class}` is not an OpenMessaging Benchmark driver brokerbench reads; it reads {}",
                        known.join(", ")
                    )
                });
            SpecError::Field {
                file: source.name.clone(),
                field: "driverClass".into(),
                message,
            }
        })
}

/// Validates one file on its own: a driver file if it has a `driver` field, else a workload.
pub fn validate_file(
    families: &[&dyn DriverSchema],
    path: &Path,
) -> Result<&'static str, SpecError> {
    validate_file_noting(families, path).map(|(kind, _)| kind)
}

/// As [`validate_file`], with what reading the file chose (an OpenMessaging Benchmark file's
/// translation), as a run prints it with `note:`.
pub fn validate_file_noting(
    families: &[&dyn DriverSchema],
    path: &Path,
) -> Result<(&'static str, Vec<String>), SpecError> {
    let source = read_source(Some(path), "", "")?;
    if source.value.get("driverClass").is_some() {
        let family = omb_driver_family(families, &source)?;
        let translated = family.translate_omb_driver(&source.name, &source.value)?;
        driver_from(
            families,
            &Source {
                value: translated.map,
                ..source
            },
        )?;
        Ok(("OpenMessaging Benchmark driver", translated.notes))
    } else if source.value.get("driver").is_some() {
        driver_from(families, &source)?;
        Ok(("driver", Vec::new()))
    } else if crate::omb::is_omb_workload(&source.value) {
        let translated =
            crate::omb::translate(&source.name, source.base.as_deref(), &source.value, &[])?;
        workload_from(&Source {
            value: translated.workload,
            ..source
        })?;
        Ok(("OpenMessaging Benchmark workload", translated.notes))
    } else {
        workload_from(&source)?;
        Ok(("workload", Vec::new()))
    }
}

/// Sets `key` (dot-separated) in a YAML tree. Inside a `*_config` map the rest of the key is
/// one config name that may itself contain dots (`producer_config.batch.size`).
fn set_path(root: &mut Value, key: &str, value: Value) -> Result<(), String> {
    let mut segments: Vec<String> = Vec::new();
    let mut parts = key.split('.');
    while let Some(part) = parts.next() {
        if part.is_empty() {
            return Err(format!("`{key}` has an empty field name"));
        }
        segments.push(part.to_string());
        if part.ends_with("_config") {
            let rest: Vec<&str> = parts.by_ref().collect();
            if !rest.is_empty() {
                segments.push(rest.join("."));
            }
            break;
        }
    }
    let (last, parents) = segments.split_last().expect("at least one segment");
    let mut node = root;
    for segment in parents {
        let map = node.as_object_mut().ok_or_else(|| {
            format!("cannot set `{key}`: the value above `{segment}` is not a mapping")
        })?;
        let entry = map
            .entry(segment.clone())
            .or_insert_with(|| Value::Object(Mapping::new()));
        if entry.is_null() {
            *entry = Value::Object(Mapping::new());
        }
        node = entry;
    }
    let map = node
        .as_object_mut()
        .ok_or_else(|| format!("cannot set `{key}`: its parent is not a mapping"))?;
    map.insert(last.clone(), value);
    Ok(())
}

fn deserialize<T: DeserializeOwned>(source: &Source, value: Value) -> Result<T, SpecError> {
    deserialize_named(&source.name, value)
}

fn workload_from(source: &Source) -> Result<Workload, SpecError> {
    let raw: RawWorkload = deserialize(source, source.value.clone())?;
    let mut workload = raw.validate().map_err(|e| SpecError::Field {
        file: source.name.clone(),
        field: e.field,
        message: e.message,
    })?;
    // A data file named relative to a workload file lives beside it.
    if let (crate::Payload::File { path, .. } | crate::Payload::Binary { path }, Some(base)) =
        (&mut workload.payload, &source.base)
    {
        if path.is_relative() {
            *path = base.join(&*path);
        }
    }
    Ok(workload)
}

fn driver_from<'a>(
    families: &[&'a dyn DriverSchema],
    source: &Source,
) -> Result<(DriverConfig, &'a dyn DriverSchema), SpecError> {
    let names: Vec<&str> = families.iter().map(|f| f.name()).collect();
    let mut map = source.value.as_object().cloned().unwrap_or_default();
    let name = match map.shift_remove("driver") {
        Some(Value::String(name)) => name,
        Some(other) => {
            return Err(SpecError::Field {
                file: source.name.clone(),
                field: "driver".into(),
                message: format!(
                    "{other:?} is not a driver name; use one of: {}",
                    names.join(", ")
                ),
            })
        }
        None => {
            return Err(SpecError::Field {
                file: source.name.clone(),
                field: "driver".into(),
                message: format!(
                    "missing; add `driver: NAME`, one of: {}",
                    names
                        .iter()
                        .map(|n| format!("`driver: {n}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })
        }
    };
    let Some(schema) = family::find(families, &name) else {
        return Err(SpecError::Field {
            file: source.name.clone(),
            field: "driver".into(),
            message: format!(
                "unknown driver `{name}`; known drivers: {}{}",
                names.join(", "),
                did_you_mean(&name, &names)
            ),
        });
    };
    // The metrics endpoint is the same block in every family's files; the family never sees it.
    let metrics = map
        .shift_remove(BROKER_METRICS_FIELD)
        .filter(|v| !v.is_null())
        .map(|v| MetricsEndpointSpec::from_value(v, source.base.as_deref(), &source.name))
        .transpose()?;
    let map = Value::Object(map);
    let mut resolved = schema.check(&source.name, &map)?;
    if let (Some(metrics), Some(fields)) = (&metrics, resolved.as_object_mut()) {
        let mut shown = serde_json::to_value(metrics).expect("the endpoint serializes");
        crate::redact::redact_json(&mut shown);
        fields.insert(BROKER_METRICS_FIELD.into(), shown);
    }
    Ok((DriverConfig::new(name, map, resolved, metrics), schema))
}

#[cfg(test)]
mod tests;
