//! The RabbitMQ driver file's top level: its fields and their defaults, and the names `--set`
//! routes to it.

use serde::{Deserialize, Serialize};

use super::acks::{AckConfig, ConfirmsConfig};
use super::defaults::{default_one, default_true};
use super::queue::{ExchangeConfig, QueueConfig};
use super::uri::AmqpUri;

/// Top-level RabbitMQ driver field names, used for `--set` routing and did-you-mean.
pub const RABBITMQ_DRIVER_FIELDS: &[&str] = &[
    "driver",
    "uri",
    "failover_uris",
    "exchange",
    "queues_per_topic",
    "queue",
    "persistent",
    "confirms",
    "ack",
    "prefetch",
    "channels_per_connection",
    "delete_queues",
    "reconnect",
];

fn default_prefetch() -> u16 {
    1000
}

/// RabbitMQ (and other AMQP 0-9-1 brokers), driven through brokerbench's own AMQP client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RabbitMqDriverConfig {
    /// `amqp://user:password@host:port/vhost`; absent means "start and use the managed local
    /// broker". Its password never appears in Debug output, errors or the serialized form.
    #[serde(default)]
    pub uri: Option<AmqpUri>,
    /// Other nodes of `uri`'s cluster: a connection that cannot be opened (its node is down)
    /// moves every later one to the next of these, in turn. Without `uri`, the managed
    /// cluster's other nodes.
    #[serde(default)]
    pub failover_uris: Vec<AmqpUri>,
    /// The exchange each topic publishes to.
    #[serde(default)]
    pub exchange: ExchangeConfig,
    /// Queues bound to each topic's exchange; each is a subscription that receives every
    /// message routed to it (with a fanout, or several queues on one key, every queue gets all).
    #[serde(default = "default_one")]
    pub queues_per_topic: u32,
    /// How the queues are declared.
    #[serde(default)]
    pub queue: QueueConfig,
    /// Publish with delivery mode 2 (persistent) rather than 1 (transient).
    #[serde(default = "default_true")]
    pub persistent: bool,
    /// Publisher confirms: with them an acknowledgement is the broker's basic.ack.
    #[serde(default)]
    pub confirms: ConfirmsConfig,
    /// How consumers acknowledge deliveries.
    #[serde(default)]
    pub ack: AckConfig,
    /// basic.qos prefetch count per consumer channel (unacknowledged deliveries at most);
    /// 0 means no limit. Not applied by the broker to auto-ack consumers.
    #[serde(default = "default_prefetch")]
    pub prefetch: u16,
    /// Producers (or consumers) sharing one AMQP connection, each on its own channel.
    #[serde(default = "default_one")]
    pub channels_per_connection: u32,
    /// Delete the run's exchanges and queues after the run.
    #[serde(default = "default_true")]
    pub delete_queues: bool,
    /// After a lost connection, producers and consumers reconnect with backoff, declare
    /// their exchange and queues again and go on; `reconnect: false` leaves them failed.
    #[serde(default)]
    pub reconnect: brokerbench_model::reconnect::Reconnect,
}

impl Default for RabbitMqDriverConfig {
    fn default() -> Self {
        brokerbench_model::yaml::from_str("{}").expect("defaults parse")
    }
}
