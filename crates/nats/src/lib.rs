//! NATS JetStream, the third broker family, built only on the family interface.
//!
//! Mapping: a workload topic is a stream `<prefix>-<workload>-<run id>-<topic>` whose
//! subjects are `<stream>.<partition>` (partitions are subjects of one stream: the stream
//! keeps one order over all of them); a subscription is a durable pull consumer shared by
//! `consumers_per_topic` members; publish latency ends at the `PubAck`. Every producer,
//! consumer and the admin side own one connection each.

pub mod config;
pub mod conn;
mod consumer;
mod family;
pub mod managed;
pub mod metrics;
pub mod omb;
mod placement;
mod producer;
mod reconnect;
mod unread;

use std::time::Duration;

use brokerbench_driver::{Consumer, ConsumerSlot, Dialed, Driver, DriverError, Led, Topology};
use brokerbench_driver::{Producer, ProducerSlot};

use crate::config::{AckPolicy, Discard, NatsDriverConfig, NatsUrl, Storage};
use crate::conn::Conn;

pub use family::{NatsFamily, FAMILY};

/// How long connecting may take.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a JetStream API request may take: a cluster on a busy host can take longer than
/// 5 s to create a stream of three replicas (its meta group assigns it, then the stream's own
/// group elects a leader), which a server without JetStream refuses at once instead.
pub const API_TIMEOUT: Duration = Duration::from_secs(20);

/// The NATS JetStream driver.
pub struct NatsDriver {
    config: NatsDriverConfig,
    url: NatsUrl,
    admin: Option<Conn>,
    inbox: String,
    requests: u64,
    streams: Vec<String>,
    partitions: u32,
    /// Durable consumers per stream (the workload's `subscriptions_per_topic`).
    subscriptions: u32,
    version: Option<String>,
    /// Whether `cleanup` may delete the run's streams (false on shards other than 0).
    removes: bool,
}

impl NatsDriver {
    pub fn new(config: NatsDriverConfig, url: NatsUrl) -> Self {
        NatsDriver {
            config,
            url,
            admin: None,
            inbox: unique_inbox(),
            requests: 0,
            streams: Vec::new(),
            partitions: 1,
            subscriptions: 1,
            version: None,
            removes: true,
        }
    }

    fn open(&self) -> Result<Conn, DriverError> {
        let login_hint = match (&self.url.user, self.url.password()) {
            (Some(_), None) => {
                " (a token given as the URL's user); check the token in servers".into()
            }
            (Some(user), Some(_)) => {
                format!(" (user '{user}'); check the user and password in servers")
            }
            (None, _) => {
                " (no user given); the server wants one: servers: nats://user:password@host:port"
                    .into()
            }
        };
        Conn::connect(&self.url, ADMIN_TIMEOUT).map_err(|e| {
            e.for_run(Dialed {
                broker: "nats",
                address: self.url.to_string(),
                noun: "server",
                field: "servers",
                tls_address: "tls://host:port",
                login_hint,
            })
        })
    }

    /// A JetStream API request: the reply's JSON, or its `error.description`; after a lost admin connection (a server restart), once more
    /// on a new one.
    fn request(
        &mut self,
        subject: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, DriverError> {
        match self.request_once(subject, body) {
            Err(DriverError::Other(text))
                if text.ends_with(conn::CONNECTION_CLOSED) && self.config.reconnect.enabled =>
            {
                let mut admin = self.open()?;
                admin.subscribe(&format!("{}.*", self.inbox), 1);
                self.admin = Some(admin);
                self.request_once(subject, body)
            }
            answer => answer,
        }
    }

    fn request_once(
        &mut self,
        subject: &str,
        body: &serde_json::Value,
    ) -> Result<serde_json::Value, DriverError> {
        self.requests += 1;
        let reply = format!("{}.{}", self.inbox, self.requests);
        let admin = self
            .admin
            .as_mut()
            .ok_or_else(|| DriverError::Other("not connected".into()))?;
        admin
            .publish(
                subject.as_bytes(),
                Some(reply.as_bytes()),
                None,
                body.to_string().as_bytes(),
            )
            .map_err(|_| DriverError::Other(format!("nats: {}", conn::CONNECTION_CLOSED)))?;
        let deadline = std::time::Instant::now() + API_TIMEOUT;
        let mut answer: Option<Result<serde_json::Value, String>> = None;
        while answer.is_none() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(DriverError::Other(format!(
                    "nats: no answer to {subject} within {API_TIMEOUT:?}; is JetStream enabled (nats-server -js), and its cluster's meta group led?"
                )));
            }
            admin
                .poll(left, &mut |msg, _| {
                    if msg.subject == reply.as_bytes() {
                        answer = Some(if msg.headers.is_some_and(|h| h.windows(3).any(|w| w == b"503")) {
                            Err("no responders: the server has no JetStream (start it with -js)".into())
                        } else {
                            serde_json::from_slice(msg.payload).map_err(|e| e.to_string())
                        });
                    }
                })
                .map_err(|e| DriverError::Other(format!("nats: {e}")))?;
        }
        let value = answer
            .expect("loop ends with an answer")
            .map_err(|e| DriverError::Other(format!("nats {subject}: {e}")))?;
        if let Some(error) = value.get("error") {
            let text = error
                .get("description")
                .and_then(|d| d.as_str())
                .unwrap_or("error")
                .to_string();
            return Err(DriverError::Other(format!("nats {subject}: {text}")));
        }
        Ok(value)
    }

    /// Stream `topic` of a run: `<prefix>-<workload>-<run id>-<topic>`, the workload's name
    /// with what a stream name cannot hold made `_`.
    fn stream_name(&self, run_id: &str, workload: &str, topic: u32) -> String {
        brokerbench_driver::naming::run_object_name(
            &self.config.stream_prefix,
            workload,
            run_id,
            topic,
        )
    }
}

/// Streams of `replicas` replicas need a JetStream cluster of as many servers: said at connect,
/// before anything is created. A server's INFO names its cluster, if it is in one, and lists
/// the client addresses of the servers it knows (`connect_urls`).
fn check_replicas(replicas: u32, info: &serde_json::Value) -> Result<(), DriverError> {
    if replicas <= 1 {
        return Ok(());
    }
    let servers = servers_listed(info);
    if replicas as usize <= servers {
        return Ok(());
    }
    let what = if servers == 1 {
        "this server is not in a cluster".to_string()
    } else {
        format!("this server's cluster lists {servers} servers")
    };
    Err(DriverError::Unsatisfiable(format!(
        "field `replicas` (OMB's replicationFactor): {replicas} replicas need a JetStream cluster of at least {replicas} servers, and {what}; to run here: --set replicas={servers}; or, as it is, on a managed cluster: `brokerbench broker up nats --nodes {replicas}` and no servers in the driver file"
    )))
}

/// How many servers a server's INFO tells a client of: 1 outside a cluster, else the client
/// addresses it lists (`connect_urls`, its own among them).
pub(crate) fn servers_listed(info: &serde_json::Value) -> usize {
    match info.get("cluster").and_then(|c| c.as_str()) {
        None => 1,
        Some(_) => info
            .get("connect_urls")
            .and_then(|u| u.as_array())
            .map_or(1, |u| u.len().max(1)),
    }
}

/// A subscription's durable consumer name.
fn durable(stream: &str, subscription: u32) -> String {
    format!("{stream}-s{subscription}")
}

/// An inbox prefix no other connection uses.
pub(crate) fn unique_inbox() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let now = brokerbench_driver::Clock::process().now_ns();
    format!("_INBOX.bb{:x}{:x}{n:x}", std::process::id(), now)
}

impl Driver for NatsDriver {
    fn name(&self) -> &'static str {
        "nats"
    }

    fn failure_settings(&self) -> &'static [(&'static str, &'static str)] {
        &[(
            "no_responders",
            "that the NATS server runs JetStream and the stream exists",
        )]
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        let mut admin = self.open()?;
        if admin.info.get("jetstream").and_then(|j| j.as_bool()) != Some(true) {
            return Err(DriverError::Other(format!(
                "nats at {} has JetStream off: start nats-server with -js (the managed server has it on)",
                self.url
            )));
        }
        check_replicas(self.config.replicas, &admin.info)?;
        self.version = admin
            .info
            .get("version")
            .and_then(|v| v.as_str())
            .map(str::to_string);
        admin.subscribe(&format!("{}.*", self.inbox), 1);
        self.admin = Some(admin);
        Ok(())
    }

    fn broker_version(&self) -> Option<String> {
        self.version.clone()
    }

    fn leader_object(&self, run_id: &str, workload: &str) -> Option<Led> {
        Some(Led {
            kind: "stream",
            name: self.stream_name(run_id, workload, 0),
        })
    }

    fn prepare(&mut self, topology: &Topology) -> Result<(), DriverError> {
        if self.admin.is_none() {
            self.connect()?;
        }
        self.removes = topology.removes();
        self.partitions = topology.partitions_per_topic.max(1);
        self.subscriptions = topology.subscriptions_per_topic.max(1);
        for topic in 0..topology.topics {
            let name = self.stream_name(&topology.run_id, &topology.workload, topic);
            let mut stream = serde_json::json!({
                "name": name,
                "subjects": [format!("{name}.*")],
                "retention": "limits",
                "storage": match self.config.storage { Storage::File => "file", Storage::Memory => "memory" },
                "num_replicas": self.config.replicas,
                "discard": match self.config.discard { Discard::Old => "old", Discard::New => "new" },
                "max_msgs": self.config.max_msgs.map_or(-1, |m| m as i64),
                "max_bytes": self.config.max_bytes.map_or(-1, |b| b as i64),
            });
            if let Some(window) = self.config.duplicate_window {
                stream["duplicate_window"] = window.into();
            }
            let create = format!("$JS.API.STREAM.CREATE.{name}");
            let replicas = self.config.replicas;
            placement::placed(placement::PLACEMENT_WAIT, replicas, || {
                self.request(&create, &stream)
            })?;
            if replicas > 1 {
                let info = format!("$JS.API.STREAM.INFO.{name}");
                placement::led(placement::PLACEMENT_WAIT, || {
                    self.request(&info, &serde_json::json!({}))
                })?;
            }
            self.streams.push(name.clone());
            for subscription in (0..self.subscriptions).filter(|_| topology.consumers_per_topic > 0)
            {
                let consumer = serde_json::json!({
                    "stream_name": name,
                    "config": {
                        "durable_name": durable(&name, subscription),
                        "deliver_policy": "all",
                        "ack_policy": match self.config.ack_policy { AckPolicy::Explicit => "explicit", AckPolicy::None => "none" },
                        "ack_wait": 30_000_000_000u64,
                        "max_ack_pending": self.config.max_ack_pending,
                        "max_waiting": 512,
                    }
                });
                self.request(
                    &format!(
                        "$JS.API.CONSUMER.DURABLE.CREATE.{name}.{}",
                        durable(&name, subscription)
                    ),
                    &consumer,
                )?;
            }
        }
        Ok(())
    }

    fn producer(&self, slot: ProducerSlot) -> Result<Box<dyn Producer>, DriverError> {
        let ProducerSlot {
            topic, producer, ..
        } = slot;
        let stream = self
            .streams
            .get(topic as usize)
            .ok_or_else(|| DriverError::Other(format!("no stream for topic {topic}")))?;
        Ok(Box::new(producer::NatsProducer::new(
            self.open()?,
            &self.url,
            stream,
            self.partitions,
            producer,
            &self.config,
        )))
    }

    fn consumer(&self, slot: ConsumerSlot) -> Result<Box<dyn Consumer>, DriverError> {
        let stream = self
            .streams
            .get(slot.topic as usize)
            .ok_or_else(|| DriverError::Other(format!("no stream for topic {}", slot.topic)))?;
        Ok(Box::new(consumer::NatsConsumer::new(
            self.open()?,
            &self.url,
            stream,
            &durable(stream, slot.subscription),
            &self.config,
        )))
    }

    fn subscriptions_per_topic(&self) -> u32 {
        self.subscriptions
    }

    fn broker_drop_policy(&self) -> Option<String> {
        self.config.drop_policy()
    }

    fn cleanup(&mut self) -> Result<(), DriverError> {
        if !self.config.delete_streams || !self.removes {
            return Ok(());
        }
        let streams = std::mem::take(&mut self.streams);
        let mut failed = Vec::new();
        for name in &streams {
            if let Err(e) = self.request(
                &format!("$JS.API.STREAM.DELETE.{name}"),
                &serde_json::json!({}),
            ) {
                failed.push(e.to_string());
            }
        }
        DriverError::unless_failed(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_beyond_the_cluster_are_refused_at_connect() {
        let alone = serde_json::json!({"jetstream": true});
        assert!(check_replicas(1, &alone).is_ok());
        let e = check_replicas(3, &alone).unwrap_err().to_string();
        assert!(
            e.contains("not in a cluster") && e.contains("--set replicas=1"),
            "{e}"
        );
        let three = serde_json::json!({"cluster": "c", "connect_urls": ["a:1", "b:1", "c:1"]});
        assert!(check_replicas(3, &three).is_ok());
        let e = check_replicas(5, &three).unwrap_err().to_string();
        assert!(
            e.contains("lists 3 servers") && e.contains("--set replicas=3"),
            "{e}"
        );
    }
}
