//! The `broker_metrics:` block that any driver file may hold, whatever its family: where the
//! broker's own metrics are scraped and how to authenticate. The family never sees it; the
//! model takes it out of the driver file before the family's check.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::field::FieldError;

/// The driver-file field that holds the block.
pub const BROKER_METRICS_FIELD: &str = "broker_metrics";

/// As written in the driver file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEndpoint {
    url: Option<String>,
    ca_file: Option<PathBuf>,
    username: Option<String>,
    password: Option<String>,
    bearer_token: Option<String>,
    bearer_token_file: Option<PathBuf>,
    timeout: Option<String>,
}

/// Where and how to scrape the broker's metrics. Debug and Serialize never show a secret.
#[derive(Clone, Default, PartialEq, Serialize)]
pub struct MetricsEndpointSpec {
    /// http:// or https:// URL; None: the managed broker's own endpoint (or none).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "without_password"
    )]
    pub url: Option<String>,
    /// PEM file of the CAs to trust instead of the system's; relative to the driver file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// Basic auth user.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// Basic auth password.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "hidden")]
    pub password: Option<String>,
    /// A bearer token, given or read from `bearer_token_file`.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "hidden")]
    pub bearer_token: Option<String>,
    /// Longest a scrape may take (default 2 s).
    #[serde(skip_serializing_if = "Option::is_none", with = "optional_duration")]
    pub timeout: Option<Duration>,
}

fn without_password<S: serde::Serializer>(url: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::redact::redact_uri(
        url.as_deref().unwrap_or_default(),
    ))
}

fn hidden<S: serde::Serializer>(_: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str("***")
}

mod optional_duration {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => crate::field::duration_text::serialize(d, s),
            None => s.serialize_none(),
        }
    }
}

impl std::fmt::Debug for MetricsEndpointSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = serde_json::to_string(self).unwrap_or_default();
        write!(f, "MetricsEndpointSpec({shown})")
    }
}

impl MetricsEndpointSpec {
    /// Reads and checks the block; `base` is the driver file's folder, for relative paths.
    /// Errors name the field below `broker_metrics` and the fix.
    pub(crate) fn from_value(
        value: serde_json::Value,
        base: Option<&Path>,
        file: &str,
    ) -> Result<MetricsEndpointSpec, crate::SpecError> {
        let raw: RawEndpoint =
            crate::named::deserialize_named(file, value).map_err(|e| match e {
                crate::SpecError::Field {
                    file,
                    field,
                    message,
                } => crate::SpecError::Field {
                    file,
                    // serde's message quotes the bad value: never for a secret.
                    message: if crate::redact::is_secret_key(&field) {
                        "must be text; put it in quotes".into()
                    } else {
                        message
                    },
                    field: if field == "(top level)" {
                        BROKER_METRICS_FIELD.into()
                    } else {
                        format!("{BROKER_METRICS_FIELD}.{field}")
                    },
                },
                other => other,
            })?;
        raw.validate(base).map_err(|e| crate::SpecError::Field {
            file: file.to_string(),
            field: format!("{BROKER_METRICS_FIELD}.{}", e.field),
            message: e.message,
        })
    }
}

impl RawEndpoint {
    fn validate(self, base: Option<&Path>) -> Result<MetricsEndpointSpec, FieldError> {
        check_url(self.url.as_deref())?;
        if self.password.is_some() && self.username.is_none() {
            return Err(field_error(
                "password",
                "a password needs a username: add broker_metrics.username".into(),
            ));
        }
        let bearer_token = read_bearer_token(self.bearer_token, self.bearer_token_file, base)?;
        if bearer_token.is_some() && self.username.is_some() {
            return Err(field_error(
                "bearer_token",
                "give either a bearer token or a username and password, not both".into(),
            ));
        }
        let ca_file = checked_ca_file(self.ca_file, base)?;
        let timeout = scrape_timeout(self.timeout)?;
        Ok(MetricsEndpointSpec {
            url: self.url,
            ca_file,
            username: self.username,
            password: self.password,
            bearer_token,
            timeout,
        })
    }
}

/// What is wrong with field `field` of the block.
fn field_error(field: &str, message: String) -> FieldError {
    FieldError {
        field: field.into(),
        message,
    }
}

/// A path named in the driver file: a relative one starts at the driver file's folder `base`.
fn resolve_path(base: Option<&Path>, path: PathBuf) -> PathBuf {
    match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path,
    }
}

/// Checks the URL, when given, is one (`scheme://…`); whether its scheme is one the family's
/// metrics are read from (http:// or https://, or the family's own) is checked with the family.
fn check_url(url: Option<&str>) -> Result<(), FieldError> {
    if let Some(url) = url {
        let scheme = url.split_once("://").map(|(s, _)| s);
        let named = scheme.is_some_and(|s| {
            s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
        });
        if !named {
            return Err(field_error(
                "url",
                format!(
                    "'{}' is not a URL, e.g. https://broker:9404/metrics",
                    crate::redact::redact_uri(url)
                ),
            ));
        }
    }
    Ok(())
}

/// The bearer token: as given, or read from `token_file` (relative to `base`), not both.
fn read_bearer_token(
    token: Option<String>,
    token_file: Option<PathBuf>,
    base: Option<&Path>,
) -> Result<Option<String>, FieldError> {
    match (token, token_file) {
        (Some(_), Some(_)) => Err(field_error(
            "bearer_token_file",
            "give bearer_token or bearer_token_file, not both".into(),
        )),
        (Some(token), None) => Ok(Some(token)),
        (None, Some(path)) => {
            let path = resolve_path(base, path);
            let token = std::fs::read_to_string(&path).map_err(|e| {
                field_error(
                    "bearer_token_file",
                    format!("cannot read {}: {e}", path.display()),
                )
            })?;
            Ok(Some(token.trim().to_string()))
        }
        (None, None) => Ok(None),
    }
}

/// The CA file, when given, resolved relative to `base`; it must be a file.
fn checked_ca_file(
    ca_file: Option<PathBuf>,
    base: Option<&Path>,
) -> Result<Option<PathBuf>, FieldError> {
    let ca_file = ca_file.map(|path| resolve_path(base, path));
    if let Some(path) = &ca_file {
        if !path.is_file() {
            return Err(field_error(
                "ca_file",
                format!(
                    "{} is not a file; give the PEM file of the CA that signed the endpoint's certificate",
                    path.display()
                ),
            ));
        }
    }
    Ok(ca_file)
}

/// The longest a scrape may take, when given: a duration above 0.
fn scrape_timeout(timeout: Option<String>) -> Result<Option<Duration>, FieldError> {
    let timeout = timeout
        .map(|t| crate::units::parse_duration(&t))
        .transpose()
        .map_err(|e| field_error("timeout", e))?;
    if timeout == Some(Duration::ZERO) {
        return Err(field_error("timeout", "must be above 0, e.g. 2s".into()));
    }
    Ok(timeout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(value: serde_json::Value) -> Result<MetricsEndpointSpec, String> {
        MetricsEndpointSpec::from_value(value, None, "d.yaml").map_err(|e| e.to_string())
    }

    #[test]
    fn secrets_are_never_shown() {
        let spec = read(json!({
            "url": "https://u:urlpass@broker:9404/metrics",
            "username": "u", "password": "filepass", "timeout": "5s"
        }))
        .unwrap();
        assert_eq!(spec.timeout, Some(Duration::from_secs(5)));
        let shown = format!("{spec:?} {}", serde_json::to_string(&spec).unwrap());
        assert!(
            !shown.contains("filepass") && !shown.contains("urlpass"),
            "{shown}"
        );
        let mut resolved = serde_json::to_value(&spec).unwrap();
        crate::redact::redact_json(&mut resolved);
        assert!(!resolved.to_string().contains("urlpass"), "{resolved}");
    }

    #[test]
    fn bad_blocks_name_the_field_and_the_fix() {
        let e = read(json!({"url": "broker:9404/metrics"})).unwrap_err();
        assert!(
            e.contains("broker_metrics.url") && e.contains("https://"),
            "{e}"
        );
        let e = read(json!({"password": "p"})).unwrap_err();
        assert!(
            e.contains("broker_metrics.password") && e.contains("username"),
            "{e}"
        );
        let e = read(json!({"username": "u", "bearer_token": "t"})).unwrap_err();
        assert!(e.contains("not both"), "{e}");
        let e = read(json!({"ca_file": "/nonexistent/ca.pem"})).unwrap_err();
        assert!(e.contains("broker_metrics.ca_file"), "{e}");
        let e = read(json!({"bearer_tokn": "t"})).unwrap_err();
        assert!(
            e.contains("broker_metrics") && e.contains("did you mean `bearer_token`"),
            "{e}"
        );
        let e = read(json!({"username": "u", "password": 12345678})).unwrap_err();
        assert!(e.contains("password") && !e.contains("12345678"), "{e}");
        let e = read(json!({"timeout": "0s"})).unwrap_err();
        assert!(e.contains("broker_metrics.timeout"), "{e}");
    }

    #[test]
    fn a_token_file_is_read_relative_to_the_driver_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "abc\n").unwrap();
        let spec = MetricsEndpointSpec::from_value(
            json!({"bearer_token_file": "token"}),
            Some(dir.path()),
            "d.yaml",
        )
        .unwrap();
        assert_eq!(spec.bearer_token.as_deref(), Some("abc"));
    }
}
