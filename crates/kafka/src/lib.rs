//! The Kafka driver: topics through the admin API, producers whose acknowledgements are
//! stamped as librdkafka receives them, consumers in a group per subscription (spanning the
//! run's topics when clients are shared, else one per topic). Works with any Kafka-API broker.

use std::collections::BTreeMap;
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

use brokerbench_driver::{
    one_consumer_per_slot, Ack, Consumer, ConsumerGroup, ConsumerSlot, Driver, DriverError,
    Envelope, Led, OutgoingMessage, Producer, SendError, Topology,
};

pub mod config;
mod family;
mod in_flight;
pub mod java_client;
mod mailbox;
pub mod managed;
pub mod metrics;
pub mod omb;
mod producer_client;
mod scram;
mod seen_offsets;
mod shared_consumer;
mod statistics;
mod topic_handle;

pub use config::{ConsumerClients, KafkaDriverConfig, ProducerClients};
pub use family::{KafkaFamily, FAMILY};
pub use topic_handle::TopicHandle;

use in_flight::InFlight;
use producer_client::{AckSlot, ProducerClient, RawAck};
use shared_consumer::SharedConsumer;

/// A librdkafka context that keeps the last error event (code and librdkafka's words) and
/// drops log lines: the connection probe reads it to tell refused credentials and failed
/// TLS handshakes from a broker that is not there yet.
#[derive(Default)]
struct ErrorWatch {
    last: Mutex<Option<(RDKafkaErrorCode, String)>>,
}

impl ErrorWatch {
    fn last(&self) -> Option<(RDKafkaErrorCode, String)> {
        self.last.lock().map(|last| last.clone()).unwrap_or(None)
    }
}

impl rdkafka::ClientContext for ErrorWatch {
    fn log(&self, _level: RDKafkaLogLevel, _facility: &str, _message: &str) {}

    fn error(&self, error: KafkaError, reason: &str) {
        if let (Some(code), Ok(mut last)) = (error.rdkafka_error_code(), self.last.lock()) {
            *last = Some((code, reason.to_string()));
        }
    }
}

impl rdkafka::consumer::ConsumerContext for ErrorWatch {}

/// brokerbench's default for librdkafka's `reconnect.backoff.max.ms` (librdkafka's: 10000).
const RECONNECT_BACKOFF_MAX_MS: &str = "1000";

/// How long the broker has to answer a metadata request before the run fails as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long topic creation and metadata propagation may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a run waits for a node that listens to be listed in the cluster's metadata.
const REJOIN_WAIT: Duration = Duration::from_secs(30);
/// A producer task serves its client's queue at most this often after acknowledgements...
const SERVE_AT_MOST: Duration = Duration::from_millis(1);
/// ... and at least this often (errors, logs).
const SERVE_AT_LEAST: Duration = Duration::from_millis(100);

/// The Kafka driver.
pub struct KafkaDriver {
    config: KafkaDriverConfig,
    bootstrap: String,
    topics: Vec<String>,
    /// Topics this run created (and so may delete, and may read from the beginning).
    created: Vec<String>,
    partitions: u32,
    /// Consumer groups per topic (the workload's `subscriptions_per_topic`).
    subscriptions: u32,
    run_id: String,
    /// Whether `cleanup` may delete what the run created (false on shards other than 0).
    removes: bool,
    /// This process is one shard of a run: a topic of the run another shard created is the
    /// run's own.
    sharded: bool,
    /// The producer clients tasks share (`producer_clients: per_thread`, by thread; `shared`,
    /// all under 0), each made with its first producer.
    shared_clients: Mutex<BTreeMap<u32, Arc<ProducerClient>>>,
    /// Every producer client's router, for the requests each retried.
    routers: Mutex<Vec<Arc<producer_client::AckRouter>>>,
    /// When consumers had partitions taken away (rebalances), ns since the UNIX epoch.
    revoked: Arc<Mutex<Vec<u64>>>,
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
    fn new_consumer_client(
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
    fn start_of(&self, topics: &[&str]) -> shared_consumer::Start {
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

    fn new_producer_client(&self) -> Result<Arc<ProducerClient>, DriverError> {
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

    fn base_config(&self) -> ClientConfig {
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

    fn admin(&self) -> Result<AdminClient<DefaultClientContext>, DriverError> {
        self.base_config()
            .create()
            .map_err(|e| DriverError::Other(format!("creating a Kafka admin client: {e}")))
    }

    fn unreachable(&self, reason: String) -> DriverError {
        DriverError::Unreachable {
            broker: "kafka",
            address: self.bootstrap.clone(),
            reason,
            hint: "start a local broker with `brokerbench broker up kafka`, or leave bootstrap_servers out of the driver file to use the managed one".into(),
        }
    }

    /// Asks for metadata until the broker answers; fails at once when librdkafka reports that
    /// the broker refused the credentials or the TLS handshake failed, naming the user (never
    /// the password) and the setting to fix.
    fn probe_metadata(&self) -> Result<rdkafka::metadata::Metadata, DriverError> {
        let probe: BaseConsumer<ErrorWatch> = self
            .base_config()
            .create_with_context(ErrorWatch::default())
            .map_err(|e| DriverError::Other(format!("creating a Kafka client: {e}")))?;
        let deadline = Instant::now() + CONNECT_TIMEOUT;
        loop {
            let outcome = probe.fetch_metadata(None, Duration::from_millis(500));
            // Error events reach the context only while the client is polled.
            let _ = probe.poll(Duration::ZERO);
            let seen = probe.context().last();
            if let Some((code, reason)) = &seen {
                if let Some(error) = self.refusal(*code, reason) {
                    return Err(error);
                }
            }
            match outcome {
                Ok(metadata) => return Ok(metadata),
                Err(e) if Instant::now() >= deadline => {
                    let said = seen
                        .map(|(_, reason)| format!("; librdkafka said: {reason}"))
                        .unwrap_or_default();
                    return Err(self.unreachable(format!(
                        "no answer to a metadata request within {CONNECT_TIMEOUT:?} ({e}){said}"
                    )));
                }
                Err(_) => {}
            }
        }
    }

    /// A setting that can be read from the driver file, wherever it was given.
    fn client_setting(&self, key: &str) -> Option<&str> {
        [&self.config.producer_config, &self.config.common_config]
            .into_iter()
            .find_map(|map| map.get(key))
            .map(String::as_str)
    }

    /// What a librdkafka error event means for connecting: refused credentials or a failed
    /// TLS handshake stop the run at once; anything else is retried until the timeout.
    fn refusal(&self, code: RDKafkaErrorCode, reason: &str) -> Option<DriverError> {
        let reason = brokerbench_model::redact::redact_uri(reason);
        match code {
            RDKafkaErrorCode::Authentication => {
                let user = self.client_setting("sasl.username").unwrap_or("(none)");
                let mechanism = self
                    .client_setting("sasl.mechanisms")
                    .or_else(|| self.client_setting("sasl.mechanism"))
                    .unwrap_or("GSSAPI");
                Some(DriverError::Authentication {
                    broker: "kafka",
                    address: self.bootstrap.clone(),
                    reason: format!(
                        "user `{user}` (SASL {mechanism}): {reason}; check sasl.username and sasl.password in the driver file's common_config (for the managed broker, `brokerbench broker status kafka --driver-file` prints a working one)"
                    ),
                })
            }
            // The broker's alert about the client's certificate arrives as a failed read.
            _ if reason.contains("SSL alert") => Some(DriverError::Unreachable {
                broker: "kafka",
                address: self.bootstrap.clone(),
                reason: format!("the TLS handshake failed: {reason}"),
                hint: "the broker refused the client's certificate: set ssl.certificate.location and ssl.key.location in common_config to a certificate signed by a CA the broker trusts (the managed broker's: `brokerbench broker status kafka --driver-file` names them)".into(),
            }),
            RDKafkaErrorCode::SSL => {
                let hint = if reason.contains("certificate verify failed")
                    || reason.contains("could not be verified")
                {
                    "the broker's certificate is not signed by a CA the client trusts: set ssl.ca.location in common_config to the CA certificate that signed it (the managed broker's is <brokerbench home>/kafka/tls/ca.pem; `brokerbench broker status kafka --driver-file` names it)"
                } else {
                    "check security.protocol and the ssl.* settings in the driver file's common_config"
                };
                Some(DriverError::Unreachable {
                    broker: "kafka",
                    address: self.bootstrap.clone(),
                    reason: format!("the TLS handshake failed: {reason}"),
                    hint: hint.into(),
                })
            }
            _ => None,
        }
    }

    /// Names of the run's topics, in topic-index order.
    pub fn topic_names(&self) -> &[String] {
        &self.topics
    }

    fn check_existing(
        &self,
        admin: &AdminClient<DefaultClientContext>,
        name: &str,
    ) -> Result<(), DriverError> {
        let metadata = admin
            .inner()
            .fetch_metadata(Some(name), ADMIN_TIMEOUT)
            .map_err(|e| DriverError::Other(format!("reading metadata of topic '{name}': {e}")))?;
        let topic = metadata
            .topics()
            .iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| {
                DriverError::Other(format!("topic '{name}' exists but has no metadata"))
            })?;
        let fix = "delete the topic, choose another topic_prefix, or set unique_topics: true";
        let partitions = topic.partitions().len() as u32;
        if partitions != self.partitions {
            return Err(DriverError::Conflict(format!(
                "topic '{name}' exists with {partitions} partitions, the workload asks for partitions_per_topic: {}; {fix}",
                self.partitions
            )));
        }
        let replicas = topic
            .partitions()
            .first()
            .map(|p| p.replicas().len())
            .unwrap_or(0) as u16;
        if replicas != self.config.replication_factor {
            return Err(DriverError::Conflict(format!(
                "topic '{name}' exists with replication factor {replicas}, the driver asks for replication_factor: {}; {fix}",
                self.config.replication_factor
            )));
        }
        if !self.config.topic_config.is_empty() {
            let resource = ResourceSpecifier::Topic(name);
            let described = block_on(admin.describe_configs([&resource], &AdminOptions::new()))
                .map_err(|e| DriverError::Other(format!("describing topic '{name}': {e}")))?;
            let Some(Ok(resource)) = described.into_iter().next() else {
                return Err(DriverError::Other(format!(
                    "describing topic '{name}' failed"
                )));
            };
            let entries = resource.entry_map();
            for (key, want) in &self.config.topic_config {
                let have = entries.get(key.as_str()).and_then(|e| e.value.clone());
                if have.as_deref() != Some(want.as_str()) {
                    return Err(DriverError::Conflict(format!(
                        "topic '{name}' exists with {key}={}, the driver asks for topic_config.{key}: {want}; {fix}",
                        have.unwrap_or_else(|| "(unset)".into())
                    )));
                }
            }
        }
        Ok(())
    }

    /// How many bootstrap servers accept a TCP connection (at one of their addresses); an error
    /// naming each refusal when none does (a refused connection is known at once; librdkafka
    /// alone would retry until the timeout).
    fn open_bootstrap_servers(&self) -> Result<usize, DriverError> {
        let mut reasons = Vec::new();
        let mut open = 0;
        for server in self
            .bootstrap
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match server.to_socket_addrs() {
                Ok(addrs) => {
                    let mut accepts = false;
                    for addr in addrs {
                        match TcpStream::connect_timeout(&addr, Duration::from_secs(3)) {
                            Ok(_) => accepts = true,
                            Err(e) => reasons.push(format!("{addr}: {e}")),
                        }
                    }
                    open += usize::from(accepts);
                }
                Err(e) => reasons.push(format!("{server}: {e}")),
            }
        }
        if open == 0 {
            return Err(self.unreachable(if reasons.is_empty() {
                "no bootstrap server given".into()
            } else {
                reasons.join("; ")
            }));
        }
        Ok(open)
    }

    /// The brokers the metadata lists, waiting up to [`REJOIN_WAIT`] while fewer are listed than
    /// the replicas need and than bootstrap servers listen: a node started again or reconnected
    /// (after a fault) registers with the controller a few seconds after it listens.
    fn wait_for_listening_brokers(&self, listed: usize, open: usize) -> usize {
        let wanted = usize::from(self.config.replication_factor).min(open);
        let deadline = Instant::now() + REJOIN_WAIT;
        let mut brokers = listed;
        while brokers < wanted && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(500));
            // A node rejoining may refuse a request meanwhile: the answer that counts is the
            // next one.
            if let Ok(metadata) = self.probe_metadata() {
                brokers = metadata.brokers().len();
            }
        }
        brokers
    }

    /// What the driver file asks of the cluster that `brokers` brokers cannot give, before
    /// anything is created: more replicas than brokers, or `min.insync.replicas` above the
    /// replication factor with `acks=all` (every message would be refused).
    fn check_cluster(&self, brokers: usize) -> Result<(), DriverError> {
        let replicas = self.config.replication_factor as usize;
        let mut problems = Vec::new();
        let mut fixes = Vec::new();
        if replicas > brokers {
            problems.push(format!(
                "replication_factor {replicas} needs {replicas} brokers, and the cluster at {} has {brokers}",
                self.bootstrap
            ));
            fixes.push(format!("--set replication_factor={brokers}"));
        }
        let acks_all = self
            .config
            .producer_config
            .get("acks")
            .or_else(|| self.config.producer_config.get("request.required.acks"))
            .is_none_or(|a| a == "all" || a == "-1");
        let min_insync = self
            .config
            .topic_config
            .get("min.insync.replicas")
            .and_then(|v| v.trim().parse::<usize>().ok());
        if let Some(min) = min_insync {
            let possible = replicas.min(brokers);
            if acks_all && min > possible {
                problems.push(format!(
                    "topic_config min.insync.replicas={min} with acks=all needs {min} in-sync replicas, and the topics can have {possible}: the broker would refuse every message (NOT_ENOUGH_REPLICAS)"
                ));
                fixes.push(format!("--set topic_config.min.insync.replicas={possible}"));
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        // Enough nodes for the replicas asked for, and for min.insync.replicas.
        let nodes = replicas.max(min_insync.unwrap_or(0)).min(5);
        Err(DriverError::Unsatisfiable(format!(
            "the driver file asks for what this cluster cannot give: {}; nothing was created. To run here: {} (these names work on OpenMessaging Benchmark driver files too); or, as it is, on a managed cluster of {nodes} nodes: `brokerbench broker up kafka --nodes {nodes}` and no bootstrap servers in the driver file",
            problems.join("; "),
            fixes.join(" ")
        )))
    }

    fn wait_for_leaders(
        &self,
        admin: &AdminClient<DefaultClientContext>,
    ) -> Result<(), DriverError> {
        let deadline = Instant::now() + ADMIN_TIMEOUT;
        loop {
            let ready = admin
                .inner()
                .fetch_metadata(None, Duration::from_secs(5))
                .map(|m| {
                    self.topics.iter().all(|name| {
                        m.topics().iter().any(|t| {
                            t.name() == name
                                && t.error().is_none()
                                && t.partitions().len() as u32 == self.partitions
                                && t.partitions().iter().all(|p| p.leader() >= 0)
                        })
                    })
                })
                .unwrap_or(false);
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(DriverError::Other(format!(
                    "topics {:?} did not get partition leaders within {ADMIN_TIMEOUT:?}",
                    self.topics
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// `MessageTimedOut` → `msg_timed_out`-style snake case for error kinds.
fn kind_of(code: RDKafkaErrorCode) -> String {
    let name = format!("{code:?}");
    let mut kind = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                kind.push('_');
            }
            kind.push(c.to_ascii_lowercase());
        } else {
            kind.push(c);
        }
    }
    kind
}

fn error_kind(error: &KafkaError) -> String {
    match error.rdkafka_error_code() {
        Some(code) => kind_of(code),
        None => "client_error".into(),
    }
}

/// The settings behind the error kinds that refuse every message (see
/// `Driver::failure_settings`); librdkafka names some errors two ways.
const FAILURE_SETTINGS: &[(&str, &str)] = &[
    (
        "invalid_required_acks",
        "producer_config.acks (Kafka takes all, -1, 0 or 1)",
    ),
    ("message_size_too_large", MESSAGE_SIZE),
    ("msg_size_too_large", MESSAGE_SIZE),
    ("record_list_too_large", MESSAGE_SIZE),
    ("topic_authorization_failed", CREDENTIALS),
    ("cluster_authorization_failed", CREDENTIALS),
    ("unknown_topic_or_partition", TOPICS),
    ("unknown_topic_or_part", TOPICS),
];
const MESSAGE_SIZE: &str = "message_size against the broker's limit (Kafka: producer_config.message.max.bytes and the topic's max.message.bytes)";
const CREDENTIALS: &str = "the credentials in producer_config (sasl.username, sasl.password)";
const TOPICS: &str =
    "the topic settings (topics, partitions_per_topic) and whether the broker creates topics";

impl KafkaDriver {
    /// Topic `index` of a run: `<prefix>-<workload>-<run id>-<index>`, without the run id
    /// when the driver file shares topics between runs (`unique_topics: false`).
    fn topic_name(&self, run_id: &str, workload: &str, index: u32) -> String {
        let prefix = &self.config.topic_prefix;
        match self.config.unique_topics {
            true => format!("{prefix}-{workload}-{run_id}-{index}"),
            false => format!("{prefix}-{workload}-{index}"),
        }
    }
}

impl Driver for KafkaDriver {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn failure_settings(&self) -> &'static [(&'static str, &'static str)] {
        FAILURE_SETTINGS
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        let open = self.open_bootstrap_servers()?;
        let metadata = self.probe_metadata()?;
        if metadata.brokers().is_empty() {
            return Err(self.unreachable("the metadata lists no brokers".into()));
        }
        let brokers = self.wait_for_listening_brokers(metadata.brokers().len(), open);
        self.check_cluster(brokers)
    }

    fn leader_object(&self, run_id: &str, workload: &str) -> Option<Led> {
        Some(Led {
            kind: "topic",
            name: self.topic_name(run_id, workload, 0),
        })
    }

    fn prepare(&mut self, topology: &Topology) -> Result<(), DriverError> {
        self.partitions = topology.partitions_per_topic;
        self.subscriptions = topology.subscriptions_per_topic.max(1);
        self.run_id = topology.run_id.clone();
        self.removes = topology.removes();
        self.sharded = topology.shard.is_some();
        self.topics = (0..topology.topics)
            .map(|i| self.topic_name(&topology.run_id, &topology.workload, i))
            .collect();
        let admin = self.admin()?;
        let new_topics: Vec<NewTopic> = self
            .topics
            .iter()
            .map(|name| {
                let mut topic = NewTopic::new(
                    name,
                    self.partitions as i32,
                    TopicReplication::Fixed(self.config.replication_factor as i32),
                );
                for (key, value) in &self.config.topic_config {
                    topic = topic.set(key, value);
                }
                topic
            })
            .collect();
        let options = AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT));
        let results = block_on(admin.create_topics(&new_topics, &options))
            .map_err(|e| DriverError::Other(format!("creating topics: {e}")))?;
        for result in results {
            match result {
                Ok(name) => self.created.push(name),
                Err((name, RDKafkaErrorCode::TopicAlreadyExists)) => {
                    self.check_existing(&admin, &name)?;
                    // Named after the run: another shard of it created the topic.
                    if self.sharded && self.config.unique_topics {
                        self.created.push(name);
                    }
                }
                Err((name, code)) => {
                    return Err(DriverError::Other(format!(
                        "creating topic '{name}' failed: {code} (check replication_factor against the number of brokers, and topic_config names)"
                    )))
                }
            }
        }
        self.wait_for_leaders(&admin)
    }

    fn producer(
        &self,
        topic: u32,
        producer: u32,
        thread: u32,
    ) -> Result<Box<dyn Producer>, DriverError> {
        let key = match self.config.producer_clients {
            ProducerClients::PerThread => Some(thread),
            ProducerClients::Shared => Some(0),
            ProducerClients::PerProducer => None,
        };
        let (client, shared) = match key {
            Some(key) => {
                let mut clients = self
                    .shared_clients
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                let client = match clients.get(&key) {
                    Some(client) => client.clone(),
                    None => {
                        let client = self.new_producer_client()?;
                        clients.insert(key, client.clone());
                        client
                    }
                };
                (client, true)
            }
            None => (self.new_producer_client()?, false),
        };
        let slot = client.router().register(producer);
        let topic = TopicHandle::new(client.client(), &self.topics[topic as usize])
            .map_err(|e| DriverError::Other(format!("creating a topic handle: {e}")))?;
        Ok(Box::new(KafkaProducer {
            topic,
            client,
            shared,
            slot,
            id: producer,
            times: InFlight::default(),
            served: Instant::now(),
            acknowledged_since_served: false,
            in_flight: 0,
            batch: Vec::with_capacity(1024),
            acks: self.config.producer_config.get("acks").cloned(),
        }))
    }

    fn consumer(&self, slot: ConsumerSlot) -> Result<Box<dyn Consumer>, DriverError> {
        let topic = self.topics[slot.topic as usize].as_str();
        let group = format!(
            "{}-{}-{}-{}",
            self.config.topic_prefix, self.run_id, slot.topic, slot.subscription
        );
        let consumer = self.new_consumer_client(&group, &[topic], false)?;
        let start = self.start_of(&[topic]);
        Ok(Box::new(SharedConsumer::new(consumer, &[topic], start)))
    }

    fn consumers(&self, slots: &[ConsumerSlot]) -> Result<Vec<ConsumerGroup>, DriverError> {
        // A shared client has one auto.offset.reset for all its topics: only when the run
        // created every topic (read from the beginning) is that right for each of them.
        let shared = self.config.consumer_clients == ConsumerClients::Shared
            && self.topics.len() > 1
            && self.created.len() == self.topics.len();
        if !shared {
            return one_consumer_per_slot(self, slots);
        }
        // One client per (subscription, member), reading every topic: its slots in topic order.
        let mut members: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
        for (i, slot) in slots.iter().enumerate() {
            members
                .entry((slot.subscription, slot.member))
                .or_default()
                .push(i);
        }
        members
            .into_iter()
            .map(|((subscription, _), mut group)| {
                group.sort_by_key(|&i| slots[i].topic);
                let topics: Vec<&str> = group
                    .iter()
                    .map(|&i| self.topics[slots[i].topic as usize].as_str())
                    .collect();
                let name = format!(
                    "{}-{}-s{subscription}",
                    self.config.topic_prefix, self.run_id
                );
                let consumer = self.new_consumer_client(&name, &topics, true)?;
                Ok(ConsumerGroup {
                    slots: group,
                    consumer: Box::new(SharedConsumer::new(
                        consumer,
                        &topics,
                        self.start_of(&topics),
                    )),
                })
            })
            .collect()
    }

    fn subscriptions_per_topic(&self) -> u32 {
        self.subscriptions
    }

    fn subscription_ready(&self, _topic: u32, assigned: &[usize]) -> bool {
        let partitions = self.partitions as usize;
        let total: usize = assigned.iter().sum();
        // Every partition owned once, and no consumer still waiting for its share.
        total == partitions && (assigned.len() > partitions || assigned.iter().all(|&a| a > 0))
    }

    fn client_events(&self) -> Option<brokerbench_driver::ClientEvents> {
        let of_routers = |each: fn(&producer_client::AckRouter) -> Vec<(u64, u64)>| {
            let mut all: Vec<(u64, u64)> = self
                .routers
                .lock()
                .map(|routers| routers.iter().flat_map(|r| each(r)).collect())
                .unwrap_or_default();
            all.sort_unstable();
            all
        };
        let rebalances = self.revoked.lock().map(|r| r.clone()).unwrap_or_default();
        Some(brokerbench_driver::ClientEvents {
            retries: of_routers(|r| r.requests_sent_again()),
            retried:
                "requests the producer client sent again (librdkafka's txretries and req_timeouts)",
            resends: of_routers(|r| r.messages_sent_again()),
            resent: "messages it transmitted again (its partitions' txmsgs beyond msgs: after an error answer, which librdkafka counts as no retried request, or a timeout)",
            rebalances,
        })
    }

    fn cleanup(&mut self) -> Result<(), DriverError> {
        // The producer tasks have ended: the last of them destroys each shared client.
        self.shared_clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        if !self.config.delete_topics || self.created.is_empty() || !self.removes {
            return Ok(());
        }
        let admin = self.admin()?;
        let names: Vec<&str> = self.created.iter().map(String::as_str).collect();
        let results = block_on(admin.delete_topics(
            &names,
            &AdminOptions::new().operation_timeout(Some(ADMIN_TIMEOUT)),
        ))
        .map_err(|e| DriverError::Other(format!("deleting topics: {e}")))?;
        for result in results {
            if let Err((name, code)) = result {
                return Err(DriverError::Other(format!(
                    "deleting topic '{name}' failed: {code}"
                )));
            }
        }
        self.created.clear();
        Ok(())
    }
}

struct KafkaProducer {
    /// Declared before `client` so that it is dropped first, as librdkafka requires (a
    /// shared client is destroyed with the last task's handle already gone).
    topic: TopicHandle,
    client: Arc<ProducerClient>,
    /// Whether other tasks send through `client` too.
    shared: bool,
    slot: Arc<AckSlot>,
    /// Run-wide producer id.
    id: u32,
    /// Send times of the messages in flight.
    times: InFlight,
    /// When this task last served the client's queue.
    served: Instant,
    acknowledged_since_served: bool,
    in_flight: usize,
    /// Reused buffer the collected acknowledgements are swapped into.
    batch: Vec<RawAck>,
    acks: Option<String>,
}

impl Producer for KafkaProducer {
    #[inline]
    fn send(&mut self, message: OutgoingMessage<'_>) -> Result<(), SendError> {
        let envelope =
            Envelope::read(message.payload).map_err(|_| SendError::Failed("no_envelope".into()))?;
        let opaque = in_flight::opaque(self.id, envelope.sequence);
        match self
            .topic
            .produce(message.payload, message.key, opaque as usize)
        {
            Ok(()) => {
                self.in_flight += 1;
                self.times
                    .sent(envelope.sequence, envelope.intended_ns, message.sent_ns);
                Ok(())
            }
            // A full queue while a broker is unreachable is the outage's doing.
            Err(RDKafkaErrorCode::QueueFull) => Err(match self.client.router().lost_since() {
                Some(_) => SendError::Unavailable("broker_unreachable".into()),
                None => SendError::Backpressure,
            }),
            Err(code) => Err(SendError::Failed(kind_of(code))),
        }
    }

    fn poll(&mut self, timeout: Duration, acks: &mut dyn FnMut(Ack)) {
        // The client's queue holds the acknowledged messages to free (and errors and logs):
        // served after acknowledgements came, at most once a millisecond (tasks sharing a
        // client share the queue), and at least every SERVE_AT_LEAST.
        let since = self.served.elapsed();
        if since >= SERVE_AT_LEAST || (since >= SERVE_AT_MOST && self.acknowledged_since_served) {
            self.client.serve();
            self.served = Instant::now();
            self.acknowledged_since_served = false;
        }
        // A task that waits wants room for more messages, or the last ones of its drain:
        // woken by a share of what is in flight, not by every response (the wake-up costs
        // librdkafka's broker thread a system call).
        let want = (self.in_flight / 64).clamp(1, 1024);
        self.slot.take(timeout, want, &mut self.batch);
        if self.batch.is_empty() {
            return;
        }
        self.in_flight -= self.batch.len().min(self.in_flight);
        self.acknowledged_since_served = true;
        for raw in self.batch.drain(..) {
            let Some((sequence, intended_ns, sent_ns)) = self.times.acknowledged(raw.opaque) else {
                continue;
            };
            acks(Ack {
                envelope: Envelope {
                    producer: self.id,
                    sequence,
                    intended_ns,
                },
                sent_ns,
                bytes: raw.bytes,
                acknowledged_ns: Some(raw.arrived_ns),
                result: raw.error.map_or(Ok(()), |code| Err(kind_of(code))),
            });
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn abandon(&mut self) {
        // A purge covers the whole client and would fail other tasks' messages still within
        // their drain: a shared client is purged when the last task drops it.
        if self.shared {
            return;
        }
        self.client.purge();
    }

    fn stamps_acknowledgements(&self) -> bool {
        true
    }

    fn sends_in_background(&self) -> bool {
        true
    }

    fn disconnected_since(&self) -> Option<u64> {
        self.client.router().lost_since()
    }

    fn ack_note(&self) -> Option<String> {
        match self.acks.as_deref() {
            Some("0") => Some(
                "acks=0: an acknowledgement means librdkafka wrote the message to the socket; the broker confirmed nothing, so publish latency is not broker latency".into(),
            ),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_are_snake_case() {
        assert_eq!(
            kind_of(RDKafkaErrorCode::MessageTimedOut),
            "message_timed_out"
        );
        assert_eq!(kind_of(RDKafkaErrorCode::QueueFull), "queue_full");
    }

    #[test]
    fn a_subscription_is_ready_when_every_partition_is_owned_once() {
        let mut d = KafkaDriver::new(KafkaDriverConfig::default(), "127.0.0.1:1".into());
        d.partitions = 3;
        assert!(d.subscription_ready(0, &[1, 1, 1]));
        assert!(
            !d.subscription_ready(0, &[3, 0, 0]),
            "rebalance still to come"
        );
        assert!(!d.subscription_ready(0, &[2, 0]));
        assert!(d.subscription_ready(0, &[2, 1]));
        d.partitions = 1;
        assert!(
            d.subscription_ready(0, &[1, 0]),
            "more consumers than partitions"
        );
    }

    #[test]
    fn what_the_cluster_cannot_give_is_refused_with_the_fix() {
        let mut config = KafkaDriverConfig {
            replication_factor: 3,
            ..KafkaDriverConfig::default()
        };
        config
            .topic_config
            .insert("min.insync.replicas".into(), "2".into());
        config.producer_config.insert("acks".into(), "all".into());
        let d = KafkaDriver::new(config.clone(), "127.0.0.1:9092".into());
        let e = d.check_cluster(1).unwrap_err().to_string();
        assert!(
            e.contains("has 1")
                && e.contains("--set replication_factor=1")
                && e.contains("--set topic_config.min.insync.replicas=1")
                && e.contains("`brokerbench broker up kafka --nodes 3`"),
            "{e}"
        );
        assert!(d.check_cluster(3).is_ok());
        // acks=1 does not wait for in-sync replicas.
        config.replication_factor = 1;
        config.producer_config.insert("acks".into(), "1".into());
        assert!(KafkaDriver::new(config.clone(), String::new())
            .check_cluster(1)
            .is_ok());
        // librdkafka's default is acks=all.
        config.producer_config.clear();
        let e = KafkaDriver::new(config, String::new())
            .check_cluster(1)
            .unwrap_err()
            .to_string();
        assert!(e.contains("NOT_ENOUGH_REPLICAS"), "{e}");
    }

    #[test]
    fn refused_connection_fails_fast_naming_the_address() {
        let mut d = KafkaDriver::new(KafkaDriverConfig::default(), "127.0.0.1:1".into());
        let started = Instant::now();
        let e = d.connect().unwrap_err().to_string();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(
            e.contains("127.0.0.1:1") && e.contains("brokerbench broker up kafka"),
            "{e}"
        );
    }
}
