//! The driver's state, and the librdkafka clients it makes from the driver file's settings:
//! admin, producer and consumer clients, and the names of the run's topics.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::client::DefaultClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer as _};

use brokerbench_driver::DriverError;

use crate::config::KafkaDriverConfig;
use crate::producer_client::{self, ProducerClient};
use crate::shared_consumer;

/// brokerbench's default for librdkafka's `reconnect.backoff.max.ms` (librdkafka's: 10000).
const RECONNECT_BACKOFF_MAX_MS: &str = "1000";
/// How long topic creation and metadata propagation may take.
pub(crate) const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The Kafka driver.
pub struct KafkaDriver {
    pub(crate) config: KafkaDriverConfig,
    pub(crate) bootstrap: String,
    pub(crate) topics: Vec<String>,
    /// Topics this run created (and so may delete, and may read from the beginning).
    pub(crate) created: Vec<String>,
    pub(crate) partitions: u32,
    /// Consumer groups per topic (the workload's `subscriptions_per_topic`).
    pub(crate) subscriptions: u32,
    pub(crate) run_id: String,
    /// Whether `cleanup` may delete what the run created (false on shards other than 0).
    pub(crate) removes: bool,
    /// This process is one shard of a run: a topic of the run another shard created is the
    /// run's own.
    pub(crate) sharded: bool,
    /// The producer clients tasks share (`producer_clients: per_thread`, by thread; `shared`,
    /// all under 0), each made with its first producer.
    pub(crate) shared_clients: Mutex<BTreeMap<u32, Arc<ProducerClient>>>,
    /// Every producer client's router, for the requests each retried.
    pub(crate) routers: Mutex<Vec<Arc<producer_client::AckRouter>>>,
    /// When consumers had partitions taken away (rebalances), ns since the UNIX epoch.
    pub(crate) revoked: Arc<Mutex<Vec<u64>>>,
}

impl KafkaDriver {
    /// A driver for the brokers at `bootstrap` (host:port list).
    pub fn new(config: KafkaDriverConfig, bootstrap: String) -> Self {
        KafkaDriver {
            config,
            bootstrap,
            topics: Vec::new(),
            created: Vec::new(),
            partitions: 1,
            subscriptions: 1,
            run_id: String::new(),
            removes: true,
            sharded: false,
            shared_clients: Mutex::new(BTreeMap::new()),
            routers: Mutex::new(Vec::new()),
            revoked: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// A consumer in `group`, subscribed to `topics`; `shared` by the tasks of all of them.
    pub(crate) fn new_consumer_client(
        &self,
        group: &str,
        topics: &[&str],
        shared: bool,
    ) -> Result<BaseConsumer<shared_consumer::Rebalances>, DriverError> {
        let mut config = self.base_config();
        config
            .set("group.id", group)
            .set("auto.offset.reset", self.default_offset_reset(topics))
            .set("enable.partition.eof", "false");
        if shared {
            // The range assignor gives each topic's first partitions to the same member of a
            // group that spans many topics; round robin spreads them over the members.
            config.set("partition.assignment.strategy", "roundrobin");
        }
        for (key, value) in &self.config.consumer_config {
            config.set(key, value);
        }
        let consumer: BaseConsumer<shared_consumer::Rebalances> = config
            .create_with_context(shared_consumer::Rebalances(self.revoked.clone()))
            .map_err(|e| {
                DriverError::Other(format!(
                    "creating a Kafka consumer (check consumer_config): {e}"
                ))
            })?;
        consumer.subscribe(topics).map_err(|e| {
            DriverError::Other(format!("subscribing to {}: {e}", topics.join(", ")))
        })?;
        Ok(consumer)
    }

    /// A topic this run created holds only this run's messages: reading it from the start
    /// cannot miss the first ones. A reused topic is read from its end.
    fn default_offset_reset(&self, topics: &[&str]) -> &'static str {
        if topics.iter().all(|t| self.created.iter().any(|c| c == t)) {
            "earliest"
        } else {
            "latest"
        }
    }

    /// Where a new consumer of `topics` starts, for its count of what it left unread.
    pub(crate) fn start_of(&self, topics: &[&str]) -> shared_consumer::Start {
        let reset = self
            .config
            .consumer_config
            .get("auto.offset.reset")
            .map_or(self.default_offset_reset(topics), String::as_str);
        shared_consumer::Start {
            from_start: matches!(reset, "earliest" | "smallest" | "beginning"),
            watermarks: self.base_config(),
        }
    }

    pub(crate) fn new_producer_client(&self) -> Result<Arc<ProducerClient>, DriverError> {
        let mut config = self.base_config();
        for (key, value) in &self.config.producer_config {
            config.set(key, value);
        }
        let client = ProducerClient::new(&config).map(Arc::new).map_err(|e| {
            DriverError::Other(format!(
                "creating a Kafka producer (check producer_config): {e}"
            ))
        })?;
        if let Ok(mut routers) = self.routers.lock() {
            routers.push(client.router_handle());
        }
        Ok(client)
    }

    pub(crate) fn base_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap)
            .set("client.id", "brokerbench")
            // librdkafka's backoff between reconnects grows to 10 s by default, so the first
            // acknowledgement after a broker restart could come up to 10 s after the broker
            // was back: 1 s keeps that time the broker's (a driver file's setting wins).
            .set("reconnect.backoff.max.ms", RECONNECT_BACKOFF_MAX_MS)
            .set_log_level(RDKafkaLogLevel::Emerg);
        for (key, value) in &self.config.common_config {
            c.set(key, value);
        }
        c
    }

    pub(crate) fn admin(&self) -> Result<AdminClient<DefaultClientContext>, DriverError> {
        self.base_config()
            .create()
            .map_err(|e| DriverError::Other(format!("creating a Kafka admin client: {e}")))
    }

    /// Names of the run's topics, in topic-index order.
    pub fn topic_names(&self) -> &[String] {
        &self.topics
    }

    /// Topic `index` of a run: `<prefix>-<workload>-<run id>-<index>`, without the run id
    /// when the driver file shares topics between runs (`unique_topics: false`).
    pub(crate) fn topic_name(&self, run_id: &str, workload: &str, index: u32) -> String {
        let prefix = &self.config.topic_prefix;
        match self.config.unique_topics {
            true => format!("{prefix}-{workload}-{run_id}-{index}"),
            false => format!("{prefix}-{workload}-{index}"),
        }
    }
}
