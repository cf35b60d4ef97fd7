//! The managed broker a study's runs use, when the study says: `broker: {nodes: N, config:
//! {KEY: VALUE}}` in the study file, `broker.nodes` and `broker.config.KEY` as axes (or
//! `--set`). These are not run settings: before a run whose cell asks for another broker than
//! the one running, the study restarts the managed broker with exactly these (see the
//! `study` command's executor).

use std::collections::BTreeMap;

use brokerbench_model::spec::did_you_mean;
use brokerbench_model::yaml::Value;

use crate::text::{key_text, show};

/// The managed broker of a cell: how many nodes and which server settings. Empty: whatever
/// broker runs (or one node with the family's defaults, started by the run).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BrokerChoice {
    /// `broker.nodes`; 1 when only settings are given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes: Option<u32>,
    /// `broker.config.KEY`: server settings on every node, by key.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,
}

/// Whether a study path is about the managed broker (`broker.nodes`, `broker.config.KEY`).
pub fn is_broker_path(path: &str) -> bool {
    path == "broker" || path.starts_with("broker.")
}

impl BrokerChoice {
    /// Whether the study chose a broker at all.
    pub fn is_set(&self) -> bool {
        self.nodes.is_some() || !self.config.is_empty()
    }

    /// Whether `path` (`broker.nodes`, `broker.config.KEY`) is chosen already.
    pub fn chooses(&self, path: &str) -> bool {
        match path.strip_prefix("broker.config.") {
            Some(key) => self.config.contains_key(key),
            None => path == "broker.nodes" && self.nodes.is_some(),
        }
    }

    /// The nodes `broker up` is asked for: those chosen, else 1.
    pub fn node_count(&self) -> u32 {
        self.nodes.unwrap_or(1)
    }

    /// The settings as `KEY=VALUE`, sorted by key, as `broker up --config` takes them.
    pub fn config_arguments(&self) -> Vec<String> {
        self.config
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect()
    }

    /// The top-level `broker:` mapping of a study file; errors name the field under `broker`.
    pub fn parse(value: &Value) -> Result<BrokerChoice, (String, String)> {
        let mut choice = BrokerChoice::default();
        let Value::Object(map) = value else {
            return Err((
                "broker".into(),
                format!(
                    "{} is not a mapping; write e.g. broker: {{nodes: 3, config: {{num.io.threads: 4}}}}",
                    show(value)
                ),
            ));
        };
        for (key, value) in map {
            match (key.as_str(), value) {
                ("nodes", _) => choice.set("broker.nodes", value),
                ("config", Value::Object(settings)) => settings
                    .iter()
                    .try_for_each(|(k, v)| choice.set(&format!("broker.config.{k}"), v)),
                ("config", other) => Err((
                    "broker.config".into(),
                    format!(
                        "{} is not a mapping of server settings; write e.g. config: {{num.io.threads: 4}}",
                        show(other)
                    ),
                )),
                (other, _) => Err((
                    format!("broker.{other}"),
                    format!(
                        "unknown key; allowed: nodes, config{}",
                        did_you_mean(other, &["nodes", "config"])
                    ),
                )),
            }?;
        }
        Ok(choice)
    }

    /// Sets `path` (`broker.nodes` or `broker.config.KEY`) to `value`; errors name the path.
    pub fn set(&mut self, path: &str, value: &Value) -> Result<(), (String, String)> {
        let error = |message: String| Err((path.to_string(), message));
        if path == "broker.nodes" {
            return match value.as_u64() {
                Some(n @ 1..=1000) => {
                    self.nodes = Some(n as u32);
                    Ok(())
                }
                _ => error(format!(
                    "{} is not a number of nodes; give 1 or more (e.g. 3)",
                    show(value)
                )),
            };
        }
        let Some(key) = path.strip_prefix("broker.config.") else {
            return error("unknown broker setting; use broker.nodes or broker.config.KEY".into());
        };
        match value {
            Value::Object(_) | Value::Array(_) | Value::Null => error(format!(
                "{} is not a server setting's value; give one value, e.g. {path}: 4",
                show(value)
            )),
            scalar => {
                self.config.insert(key.to_string(), key_text(scalar));
                Ok(())
            }
        }
    }

    /// The choice as one line, e.g. `3 nodes, num.io.threads=4`.
    pub fn describe(&self) -> String {
        let mut parts = vec![match self.node_count() {
            1 => "1 node".to_string(),
            n => format!("{n} nodes"),
        }];
        parts.extend(self.config_arguments());
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Value {
        brokerbench_model::yaml::from_str(text).unwrap()
    }

    #[test]
    fn a_broker_mapping_gives_nodes_and_settings() {
        let choice =
            BrokerChoice::parse(&yaml("{nodes: 3, config: {num.io.threads: 4, a: x}}")).unwrap();
        assert_eq!(choice.nodes, Some(3));
        assert_eq!(choice.config_arguments(), ["a=x", "num.io.threads=4"]);
        assert_eq!(choice.describe(), "3 nodes, a=x, num.io.threads=4");
        assert!(choice.is_set());
        assert!(!BrokerChoice::default().is_set());
        assert!(choice.chooses("broker.nodes") && choice.chooses("broker.config.num.io.threads"));
        assert!(
            !choice.chooses("broker.config.b") && !BrokerChoice::default().chooses("broker.nodes")
        );
    }

    #[test]
    fn bad_broker_values_name_their_path() {
        for (text, field) in [
            ("{nodes: 0}", "broker.nodes"),
            ("{nodes: three}", "broker.nodes"),
            ("{config: [a]}", "broker.config"),
            ("{config: {a: {b: 1}}}", "broker.config.a"),
            ("{replicas: 3}", "broker.replicas"),
            ("3", "broker"),
        ] {
            let (path, message) = BrokerChoice::parse(&yaml(text)).unwrap_err();
            assert_eq!(path, field, "{text}: {message}");
        }
        let mut choice = BrokerChoice::default();
        assert!(choice.set("broker.tls", &yaml("true")).is_err());
        assert!(is_broker_path("broker.nodes") && !is_broker_path("brokers.x"));
    }
}
