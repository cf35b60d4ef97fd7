//! The Kafka driver file: how to reach the cluster and configure librdkafka.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A config map value as written in YAML; librdkafka wants every value as a string.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum ConfigValue {
    Text(String),
    Integer(i64),
    Float(f64),
    Bool(bool),
}

impl ConfigValue {
    pub fn as_text(&self) -> String {
        match self {
            ConfigValue::Text(t) => t.clone(),
            ConfigValue::Integer(i) => i.to_string(),
            ConfigValue::Float(f) => f.to_string(),
            ConfigValue::Bool(b) => b.to_string(),
        }
    }
}

fn text_map<'de, D: serde::Deserializer<'de>>(d: D) -> Result<BTreeMap<String, String>, D::Error> {
    let raw: Option<BTreeMap<String, ConfigValue>> = Option::deserialize(d)?;
    Ok(raw
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.as_text()))
        .collect())
}

fn default_replication() -> u16 {
    1
}
fn default_true() -> bool {
    true
}
pub(crate) fn default_prefix() -> String {
    "brokerbench".to_string()
}

/// Kafka (and Kafka-API brokers such as Redpanda), driven through librdkafka.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaDriverConfig {
    /// Comma-separated host:port list; absent means "start and use the managed local broker".
    #[serde(default)]
    pub bootstrap_servers: Option<String>,
    /// Replication factor of the topics brokerbench creates.
    #[serde(default = "default_replication")]
    pub replication_factor: u16,
    /// Topic-level configs set at creation, e.g. `flush.messages: "1"`.
    #[serde(default, deserialize_with = "text_map")]
    pub topic_config: BTreeMap<String, String>,
    /// Passed to every librdkafka client of the run — the admin client that creates topics,
    /// producers and consumers: security (security.protocol, sasl.*, ssl.*) and anything
    /// else they share. producer_config and consumer_config win over it.
    #[serde(default, deserialize_with = "text_map")]
    pub common_config: BTreeMap<String, String>,
    /// Passed to librdkafka producers: acks, batch.size, linger.ms, compression.type, ...
    #[serde(default, deserialize_with = "text_map")]
    pub producer_config: BTreeMap<String, String>,
    /// Passed to librdkafka consumers.
    #[serde(default, deserialize_with = "text_map")]
    pub consumer_config: BTreeMap<String, String>,
    /// Delete the topics after the run.
    #[serde(default = "default_true")]
    pub delete_topics: bool,
    /// Topic names start with this.
    #[serde(default = "default_prefix")]
    pub topic_prefix: String,
    /// true: topics are named `<prefix>-<workload>-<run id>-<n>`, new for every run;
    /// false: `<prefix>-<workload>-<n>`, reused if they exist with the same settings.
    #[serde(default = "default_true")]
    pub unique_topics: bool,
    /// `shared` (the default): one librdkafka producer serves every producer task of the
    /// run, as an application shares one client across its topics; `per_thread`: one per
    /// producer thread of the engine (the workload's `producer_threads`, 4 by default) for
    /// the tasks of that thread; `per_producer`: a client of its own for each producer task
    /// (its own connection and batches, as OMB's Kafka driver does).
    #[serde(default)]
    pub producer_clients: ProducerClients,
    /// `shared`: one librdkafka consumer per member of a subscription reads every topic of
    /// the run (one consumer group per subscription); `per_consumer`: a client and a group of
    /// its own for each topic's consumers.
    #[serde(default)]
    pub consumer_clients: ConsumerClients,
}

/// How consumer tasks map onto librdkafka consumer clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConsumerClients {
    /// With more than one topic: one client per (subscription, member), reading all topics.
    #[default]
    Shared,
    /// One client per consumer task, in a group per (topic, subscription).
    PerConsumer,
}

/// How producer tasks map onto librdkafka producer clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProducerClients {
    /// One client for the whole run: its threads and connections do not grow with the number
    /// of topics or producers; messages of all tasks for one partition share its batches.
    #[default]
    Shared,
    /// One client per producer thread of the engine, for the tasks it serves: clients grow
    /// to `producer_threads` at most, and the threads do not contend for one client's queues
    /// and locks (at max rate with 4 producers, 15% less CPU per message than `shared`).
    PerThread,
    /// One client per producer task.
    PerProducer,
}

/// Top-level Kafka driver field names, used for `--set` routing and did-you-mean.
pub const KAFKA_DRIVER_FIELDS: &[&str] = &[
    "driver",
    "bootstrap_servers",
    "replication_factor",
    "topic_config",
    "common_config",
    "producer_config",
    "consumer_config",
    "delete_topics",
    "topic_prefix",
    "unique_topics",
    "producer_clients",
    "consumer_clients",
];

/// librdkafka producer settings brokerbench chooses when the driver file does not: the Java
/// client's `max.in.flight.requests.per.connection` of 5 instead of librdkafka's 1,000,000.
/// With an unbounded pipeline, a broker that falls behind (100 topics on one connection)
/// lets small requests pile up, and latency grows to seconds, while 5 outstanding requests
/// make the client wait and send fewer, larger ones; it also keeps a retry from reordering
/// more than 5 requests' worth of messages.
pub const PRODUCER_DEFAULTS: &[(&str, &[&str], &str)] = &[(
    "max.in.flight.requests.per.connection",
    &["max.in.flight.requests.per.connection", "max.in.flight"],
    "5",
)];

impl KafkaDriverConfig {
    /// The config with brokerbench's producer defaults filled in where the file (under any
    /// of librdkafka's names for the setting) says nothing.
    pub fn with_defaults(mut self) -> Self {
        for (key, names, value) in PRODUCER_DEFAULTS {
            if !names.iter().any(|n| self.producer_config.contains_key(*n)) {
                self.producer_config
                    .insert((*key).to_string(), (*value).to_string());
            }
        }
        self
    }
}

impl Default for KafkaDriverConfig {
    fn default() -> Self {
        brokerbench_model::yaml::from_str("{}").expect("defaults parse")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn brokerbench_defaults_fill_only_what_the_file_leaves_out() {
        let config = KafkaDriverConfig::default().with_defaults();
        assert_eq!(
            config.producer_config["max.in.flight.requests.per.connection"],
            "5"
        );
        for name in ["max.in.flight", "max.in.flight.requests.per.connection"] {
            let mut given = KafkaDriverConfig::default();
            given
                .producer_config
                .insert(name.to_string(), "1000000".into());
            let config = given.with_defaults();
            assert_eq!(config.producer_config.len(), 1, "{name}: {config:?}");
            assert_eq!(config.producer_config[name], "1000000");
        }
    }
}
