//! The exchange each topic publishes to and the queues bound to it: their types, durability,
//! length limits and what the broker does when a limit is reached.

use serde::{Deserialize, Serialize};

use super::defaults::default_true;

fn default_prefix() -> String {
    "brokerbench".to_string()
}

/// The exchange of each topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExchangeConfig {
    /// Exchange names start with this; the rest is `-<workload>-<run id>-<topic>`.
    #[serde(default = "default_prefix")]
    pub name: String,
    /// Exchange type, which decides how messages reach the queues.
    #[serde(default, rename = "type")]
    pub kind: ExchangeKind,
}

impl Default for ExchangeConfig {
    fn default() -> Self {
        ExchangeConfig {
            name: default_prefix(),
            kind: ExchangeKind::Direct,
        }
    }
}

/// AMQP exchange types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ExchangeKind {
    /// Queues bound with the topic's name as routing key.
    #[default]
    Direct,
    /// Every bound queue gets every message; the routing key is ignored.
    Fanout,
    /// Queues bound with the topic's name as binding pattern.
    Topic,
    /// Queues bound on a `topic` message header (x-match: any).
    Headers,
}

impl ExchangeKind {
    /// The name AMQP uses for the type.
    pub fn as_str(&self) -> &'static str {
        match self {
            ExchangeKind::Direct => "direct",
            ExchangeKind::Fanout => "fanout",
            ExchangeKind::Topic => "topic",
            ExchangeKind::Headers => "headers",
        }
    }
}

/// How each queue is declared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueConfig {
    /// `x-queue-type`.
    #[serde(default, rename = "type")]
    pub kind: QueueKind,
    /// Survives a broker restart (quorum and stream queues always are).
    #[serde(default = "default_true")]
    pub durable: bool,
    /// `x-queue-mode: lazy`: a classic queue that keeps messages on disk (RabbitMQ 3.12 and
    /// later ignore it: their classic queues always behave so).
    #[serde(default)]
    pub lazy: bool,
    /// `x-max-length` in messages, or none.
    #[serde(default)]
    pub max_length: Option<u64>,
    /// `x-max-length-bytes` in bytes (units such as 64MiB allowed), or none.
    #[serde(default, deserialize_with = "brokerbench_model::units::optional_bytes")]
    pub max_length_bytes: Option<u64>,
    /// `x-overflow`: what the broker does when a length limit is reached.
    #[serde(default)]
    pub overflow: Overflow,
    /// `x-quorum-initial-group-size`: how many members (copies) a quorum queue starts with;
    /// none: the broker's default (RabbitMQ 3.10: 3, or every node of a smaller cluster).
    #[serde(default)]
    pub initial_group_size: Option<u32>,
}

impl Default for QueueConfig {
    fn default() -> Self {
        brokerbench_model::yaml::from_str("{}").expect("defaults parse")
    }
}

/// Queue types (`x-queue-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueKind {
    #[default]
    Classic,
    Quorum,
    Stream,
}

impl QueueKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            QueueKind::Classic => "classic",
            QueueKind::Quorum => "quorum",
            QueueKind::Stream => "stream",
        }
    }
}

/// `x-overflow` behaviours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Overflow {
    /// Discard the oldest messages (they are reported as dropped by the broker).
    #[default]
    DropHead,
    /// Refuse new messages; with confirms each refusal is a nack, counted as `rejected`.
    RejectPublish,
}

impl Overflow {
    pub fn as_str(&self) -> &'static str {
        match self {
            Overflow::DropHead => "drop-head",
            Overflow::RejectPublish => "reject-publish",
        }
    }
}
