//! Server settings given with `broker up NAME --config KEY=VALUE`: read from the command line,
//! recorded in the broker's folder by the start that applies them (so `status`, and the runs
//! that use the broker, can say what it runs with), and compared with what a running broker
//! was started with. Each family writes them into its own configuration format, on every node.

use std::path::Path;

use crate::BrokerError;

/// The file, in the broker's folder, that holds the settings of its last start.
const SETTINGS_FILE: &str = "settings";

/// Server settings, in the order given.
pub type Settings = Vec<(String, String)>;

/// `KEY=VALUE` arguments as settings; the first that is not one, as an error to show.
pub fn parse(arguments: &[String]) -> Result<Settings, String> {
    arguments
        .iter()
        .map(|argument| match argument.split_once('=') {
            Some((key, value)) if valid_key(key.trim()) && !value.contains(['\n', '\r']) => {
                Ok((key.trim().to_string(), value.trim().to_string()))
            }
            _ => Err(format!(
                "--config {argument}: give a server setting as KEY=VALUE, e.g. --config num.io.threads=4"
            )),
        })
        .collect()
}

/// A setting's name: letters, digits and `._-` (what Kafka, RabbitMQ and NATS name theirs
/// with); nothing that could end a line of a configuration file or start a comment.
fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Records the settings the start in `dir` applies (none: the file goes).
pub fn record(dir: &Path, settings: &Settings) -> Result<(), BrokerError> {
    let file = dir.join(SETTINGS_FILE);
    if settings.is_empty() {
        return crate::process::remove_if_present(&file);
    }
    let text: String = settings.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    std::fs::write(&file, text).map_err(BrokerError::io("writing", &file))
}

/// The settings the last start in `dir` applied.
pub fn recorded(dir: &Path) -> Settings {
    std::fs::read_to_string(dir.join(SETTINGS_FILE))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A running broker answers `up --config …` only when it runs with exactly those settings.
pub fn check_running(
    broker: &'static str,
    running: &Settings,
    asked: Option<&Settings>,
) -> Result<(), BrokerError> {
    match asked {
        Some(asked) if asked != running => Err(BrokerError::SettingsDiffer {
            broker,
            running: describe(running),
            asked: describe(asked),
        }),
        _ => Ok(()),
    }
}

/// `a=1, b=2`, or `none`.
pub fn describe(settings: &Settings) -> String {
    if settings.is_empty() {
        return "none".into();
    }
    settings
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn settings_are_key_value_pairs_with_plain_keys() {
        let parsed = parse(&strings(&["num.io.threads=4", "a_b-c = x=y"])).unwrap();
        assert_eq!(
            parsed,
            [
                ("num.io.threads".to_string(), "4".to_string()),
                ("a_b-c".into(), "x=y".into())
            ]
        );
        for bad in ["novalue", "=4", "a b=1", "a#b=1", "x\ny=1", "x=1\ny=2"] {
            let error = parse(&strings(&[bad])).unwrap_err();
            assert!(error.contains("KEY=VALUE"), "{bad}: {error}");
        }
    }

    #[test]
    fn recorded_settings_come_back_and_none_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let settings = parse(&strings(&["max_payload=4MB", "x=1"])).unwrap();
        record(dir.path(), &settings).unwrap();
        assert_eq!(recorded(dir.path()), settings);
        record(dir.path(), &Vec::new()).unwrap();
        assert!(recorded(dir.path()).is_empty());
        assert!(!dir.path().join(SETTINGS_FILE).exists());
    }

    #[test]
    fn other_settings_than_the_running_ones_are_refused() {
        let running = parse(&strings(&["x=1"])).unwrap();
        assert!(check_running("nats", &running, None).is_ok());
        assert!(check_running("nats", &running, Some(&running)).is_ok());
        let error = check_running("nats", &running, Some(&Vec::new()))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("x=1") && error.contains("none") && error.contains("broker down nats"),
            "{error}"
        );
    }
}
