//! MQTT, the seventh broker family, built only on the family interface.
//!
//! Mapping: a workload topic is a branch of the topic tree,
//! `<prefix>/<workload>-<run id>/<topic>` (and `/<partition>` below it when the topic has
//! more than one partition, read through the filter `…/<topic>/+`); a message is one PUBLISH at
//! the driver file's QoS; a subscription is one client subscribed to the filter, or, when the
//! subscription has several members, a shared subscription `$share/s<subscription>/<filter>`
//! whose members the broker deals the messages among. Every producer and consumer is one
//! client with one connection, through brokerbench's own MQTT client (see docs/src/mqtt.md).

pub mod config;
pub mod conn;
mod consumer;
mod family;
pub mod managed;
mod metrics;
pub mod omb;
pub mod packet;
mod producer;
mod reconnect;
mod server;
mod store_count;
pub mod url;

use std::sync::Mutex;
use std::time::Duration;

use brokerbench_driver::{Consumer, ConsumerSlot, Dialed, Driver, DriverError, Topology};
use brokerbench_driver::{Producer, ProducerSlot};

use crate::config::{MqttDriverConfig, Version};
use crate::conn::{Conn, ConnectError, Session};
use crate::url::MqttUrl;

pub use family::{MqttFamily, FAMILY};

/// How long connecting and subscribing may take.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The MQTT driver.
pub struct MqttDriver {
    config: MqttDriverConfig,
    url: MqttUrl,
    /// Each topic's partition topics, partition 0 first.
    topics: Vec<Vec<String>>,
    /// Client ids start with this: the prefix, the run and the shard.
    client_prefix: String,
    /// Members per subscription (more than one: a shared subscription).
    members: u32,
    subscriptions: u32,
    /// What the broker says it is, once connected.
    broker: Option<String>,
    /// The client ids of the consumers with a persistent session, ended by cleanup.
    persistent: Mutex<Vec<String>>,
    /// Where the broker counts what it stores, and the count before the first consumer
    /// subscribed (a run of one topic and one subscription).
    store: std::sync::OnceLock<Option<store_count::StoreCount>>,
}

impl MqttDriver {
    pub fn new(config: MqttDriverConfig, url: MqttUrl) -> Self {
        let url = url.with_tls(config.tls.as_ref());
        MqttDriver {
            config,
            url,
            topics: Vec::new(),
            client_prefix: String::new(),
            members: 1,
            subscriptions: 1,
            broker: None,
            persistent: Mutex::new(Vec::new()),
            store: std::sync::OnceLock::new(),
        }
    }

    /// A new connection as client `client_id` with a clean session that ends with it.
    fn session(&self, client_id: String) -> Session {
        Session {
            version: self.config.protocol,
            client_id,
            clean: true,
            keep_alive_s: self.config.keep_alive_seconds,
            session_expiry_s: None,
            receive_maximum: None,
        }
    }

    /// A consumer's session: persistent unless `clean_session`, with its receive maximum.
    fn consumer_session(&self, client_id: String) -> Session {
        let v5 = self.config.protocol == Version::V5;
        let clean = self.config.clean_session;
        Session {
            clean,
            session_expiry_s: (v5 && !clean).then_some(self.config.session_expiry_seconds),
            receive_maximum: v5.then_some(self.config.receive_maximum),
            ..self.session(client_id)
        }
    }

    fn open(&self, session: &Session) -> Result<Conn, DriverError> {
        Conn::connect(&self.url, session, ADMIN_TIMEOUT).map_err(|e| self.connect_error(e))
    }

    fn connect_error(&self, e: ConnectError) -> DriverError {
        e.for_run(Dialed {
            broker: "mqtt",
            address: self.url.to_string(),
            noun: "broker",
            field: "mqtt_url",
            tls_address: "mqtts://host:port, the broker's TLS listener",
            login_hint: String::new(),
        })
    }

    fn topic_names(&self, topic: u32) -> Result<&[String], DriverError> {
        self.topics
            .get(topic as usize)
            .map(Vec::as_slice)
            .ok_or_else(|| DriverError::Other(format!("no topic names for topic {topic}")))
    }

    /// What a member of subscription `subscription` subscribes to.
    fn filter(&self, topics: &[String], subscription: u32) -> String {
        let filter = match topics {
            [one] => one.clone(),
            many => format!("{}/+", parent(&many[0])),
        };
        if self.members > 1 {
            format!("$share/s{subscription}/{filter}")
        } else {
            filter
        }
    }

    /// Connects as each persistent consumer's client with a clean session, so that the
    /// broker forgets what it kept for it.
    fn end_sessions(&self) -> Vec<String> {
        let ids = std::mem::take(&mut *self.persistent.lock().unwrap_or_else(|e| e.into_inner()));
        let mut failed = Vec::new();
        for id in ids {
            match self.open(&self.session(id.clone())) {
                Ok(mut conn) => conn.disconnect(true),
                Err(e) => failed.push(format!("mqtt: ending the session of {id}: {e}")),
            }
        }
        failed
    }
}

/// A topic name's parent level (`a/b/c` → `a/b`).
fn parent(topic: &str) -> &str {
    topic.rsplit_once('/').map(|(p, _)| p).unwrap_or(topic)
}

/// The partition topics of topic `topic`: `<prefix>/<workload>-<run id>/<topic>`, and
/// `/<partition>` below it when there are several.
fn topic_names(
    prefix: &str,
    workload: &str,
    run_id: &str,
    topic: u32,
    partitions: u32,
) -> Vec<String> {
    let workload = brokerbench_driver::naming::safe_name(workload);
    let base = format!("{prefix}/{workload}-{run_id}/{topic}");
    match partitions {
        0 | 1 => vec![base],
        n => (0..n).map(|p| format!("{base}/{p}")).collect(),
    }
}

impl Driver for MqttDriver {
    fn name(&self) -> &'static str {
        "mqtt"
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        let id = format!(
            "{}-check-{}",
            client_safe(&self.config.topic_prefix),
            std::process::id()
        );
        let mut conn = self.open(&self.session(id))?;
        if let Some(max) = conn.connack.maximum_qos {
            if self.config.qos.max(self.config.subscription_qos()) > max {
                return Err(DriverError::Unsatisfiable(format!(
                    "mqtt at {}: the broker takes at most QoS {max}: set qos (and subscribe_qos) to {max} or lower in the driver file",
                    self.url
                )));
            }
        }
        self.broker = server::describe(&mut conn, self.config.protocol);
        conn.disconnect(false);
        Ok(())
    }

    fn broker_version(&self) -> Option<String> {
        self.broker.clone()
    }

    fn prepare(&mut self, topology: &Topology) -> Result<(), DriverError> {
        let shard = topology.shard.map(|(i, _)| i).unwrap_or(0);
        self.client_prefix = format!(
            "{}-{}-{shard}",
            client_safe(&self.config.topic_prefix),
            topology.run_id
        );
        self.subscriptions = topology.subscriptions_per_topic.max(1);
        self.members = topology.consumers_per_topic.max(1);
        self.topics = (0..topology.topics)
            .map(|topic| {
                topic_names(
                    &self.config.topic_prefix,
                    &topology.workload,
                    &topology.run_id,
                    topic,
                    topology.partitions_per_topic,
                )
            })
            .collect();
        Ok(())
    }

    fn producer(&self, slot: ProducerSlot) -> Result<Box<dyn Producer>, DriverError> {
        let ProducerSlot {
            topic, producer, ..
        } = slot;
        let session = self.session(format!("{}-p{producer}", self.client_prefix));
        let publishing = producer::Publishing {
            topics: self.topic_names(topic)?.to_vec(),
            qos: self.config.qos,
            expiry_s: self.config.message_expiry_seconds,
            max_outstanding: self.config.max_outstanding,
        };
        Ok(Box::new(producer::MqttProducer::new(
            self.open(&session)?,
            reconnect::Reconnector::new(
                reconnect::Target {
                    url: self.url.clone(),
                    session: session.clone(),
                    subscription: None,
                },
                self.config.reconnect,
                reconnect::redial,
            ),
            publishing,
        )))
    }

    fn consumer(&self, slot: ConsumerSlot) -> Result<Box<dyn Consumer>, DriverError> {
        let id = format!(
            "{}-c{}.{}.{}",
            self.client_prefix, slot.topic, slot.subscription, slot.member
        );
        let session = self.consumer_session(id.clone());
        let topics = self.topic_names(slot.topic)?;
        // Taken before the first subscription, so that nothing of the run is in it. Not with
        // message expiry: the store holds expired messages until it purges them (one counted
        // as unconsumed once).
        let counted = self.topics.len() == 1
            && self.subscriptions == 1
            && self.config.message_expiry_seconds.is_none();
        let store = counted
            .then(|| {
                let session = self.session(format!("{}-store", self.client_prefix));
                let start = || store_count::StoreCount::start(&self.url, session);
                self.store.get_or_init(start).clone()
            })
            .flatten();
        let subscription = reconnect::Subscription {
            filters: vec![self.filter(topics, slot.subscription)],
            qos: self.config.subscription_qos(),
        };
        let mut conn = self.open(&session)?;
        if !session.clean {
            self.persistent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(id);
        }
        let granted = conn
            .subscribe(&subscription.filters, subscription.qos, ADMIN_TIMEOUT)
            .map_err(|e| {
                DriverError::Other(format!(
                    "mqtt: subscribing to {}: {e}",
                    subscription.filters[0]
                ))
            })?;
        if let Some(&code) = granted
            .iter()
            .find(|&&g| g >= 0x80)
            .or(granted.is_empty().then_some(&0x80))
        {
            return Err(DriverError::Other(format!(
                "mqtt: the broker refused the subscription to {} (SUBACK code {code:#04x}){}",
                subscription.filters[0],
                if self.members > 1 {
                    ": does it take shared subscriptions ($share/…)? Give each subscription one consumer otherwise"
                } else {
                    ": may the user read these topics?"
                }
            )));
        }
        let target = reconnect::Target {
            url: self.url.clone(),
            session: session.clone(),
            subscription: Some(subscription),
        };
        let reconnector =
            reconnect::Reconnector::new(target, self.config.reconnect, reconnect::redial);
        Ok(Box::new(consumer::MqttConsumer::new(
            conn,
            reconnector,
            topics,
            (session.clean, store),
        )))
    }

    fn subscriptions_per_topic(&self) -> u32 {
        self.subscriptions
    }

    fn broker_dropped(&self) -> Option<(u64, String)> {
        let dropped = self.store.get()?.as_ref()?.dropped()?;
        Some((dropped, store_count::DROPPED_LIMITS.to_string()))
    }

    fn broker_drop_policy(&self) -> Option<String> {
        self.config.message_expiry_seconds.map(|s| {
            format!("each message expires after {s} s (MQTT 5 message expiry): the broker discards what it has not delivered by then")
        })
    }

    fn failure_settings(&self) -> &'static [(&'static str, &'static str)] {
        &[
            (
                producer::PACKET_TOO_LARGE,
                "message_size: the broker's maximum packet size (its CONNACK's) is smaller than a message",
            ),
            (
                "mqtt_quota_exceeded",
                "the broker's limits (mosquitto: max_queued_messages, max_queued_bytes, memory_limit)",
            ),
            (
                "mqtt_not_authorized",
                "the user's rights on the broker: may it publish below topic_prefix?",
            ),
        ]
    }

    /// Ends the persistent sessions of the run's consumers (clean sessions end by themselves;
    /// MQTT topics need no removing).
    fn cleanup(&mut self) -> Result<(), DriverError> {
        let failed = self.end_sessions();
        DriverError::unless_failed(failed)
    }
}

/// A topic prefix as the start of a client id (no `/`).
fn client_safe(prefix: &str) -> String {
    prefix.replace('/', "-")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_topic_is_a_branch_with_a_level_per_partition() {
        assert_eq!(
            super::topic_names("bb", "1 topic/x", "r1", 0, 1),
            vec!["bb/1_topic_x-r1/0"]
        );
        assert_eq!(
            super::topic_names("bb", "w", "r1", 2, 2),
            vec!["bb/w-r1/2/0", "bb/w-r1/2/1"]
        );
        assert_eq!(super::parent("bb/w-r1/2/0"), "bb/w-r1/2");
    }
}
