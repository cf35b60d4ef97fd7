//! Apache Pulsar, the fifth broker family, built only on the family interface.
//!
//! Mapping, as the OpenMessaging Benchmark's Pulsar driver has it: a workload topic is a
//! topic `<domain>://<namespace>/<prefix>-<workload>-<run id>-<topic>`, partitioned (created
//! through the admin API) when `partitions_per_topic` > 1; a subscription is a durable
//! subscription `s<subscription>` of the driver file's type, shared by the subscription's
//! `consumers_per_topic` members; a send is acknowledged by the broker's SEND_RECEIPT, a
//! delivery by the consumer's ACK. The protocol is Pulsar's binary protocol over brokerbench's
//! own client (see docs/src/pulsar.md for why); every producer and consumer owns one
//! connection.

mod admin;
mod commands;
pub mod config;
mod conn;
mod consumer;
mod family;
pub mod managed;
mod message;
mod metrics;
pub mod omb;
mod producer;
mod proto;
mod quota;
mod topic;
mod unread;

use std::time::Duration;

use brokerbench_driver::{Consumer, ConsumerSlot, Dialed, Driver, DriverError, Topology};
use brokerbench_driver::{Producer, ProducerSlot};

use crate::admin::Admin;
use crate::config::{PulsarDriverConfig, PulsarUrl};
use crate::conn::Conn;
use crate::topic::Topic;

pub use family::{PulsarFamily, FAMILY};

/// How long connecting may take.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The Pulsar driver.
pub struct PulsarDriver {
    config: PulsarDriverConfig,
    url: PulsarUrl,
    admin: Admin,
    topics: Vec<Topic>,
    /// The run's own namespace, when the driver file's persistence asked for one.
    own_namespace: Option<String>,
    subscriptions: u32,
    version: Option<String>,
    /// Whether `cleanup` may delete the run's topics (false on shards other than 0).
    removes: bool,
}

impl PulsarDriver {
    pub fn new(config: PulsarDriverConfig, url: PulsarUrl) -> Self {
        let url = url
            .with_token(config.auth_token.as_ref())
            .with_tls(config.tls.as_ref());
        let admin = Admin::new(&config.admin_url(&url), config.auth_token.as_ref());
        PulsarDriver {
            config,
            url,
            admin,
            topics: Vec::new(),
            own_namespace: None,
            subscriptions: 1,
            version: None,
            removes: true,
        }
    }

    fn open(&self) -> Result<Conn, DriverError> {
        let login_hint = match self.url.token() {
            Some(_) => "; check auth_token".into(),
            None => " (no token given); the broker wants one: auth_token in the driver file".into(),
        };
        Conn::connect(&self.url, ADMIN_TIMEOUT).map_err(|e| {
            e.for_run(Dialed {
                broker: "pulsar",
                address: self.url.to_string(),
                noun: "broker",
                field: "service_url",
                tls_address: "pulsar+ssl://host:port, the broker's TLS port",
                login_hint,
            })
        })
    }

    fn topic(&self, index: u32) -> Result<&Topic, DriverError> {
        self.topics
            .get(index as usize)
            .ok_or_else(|| DriverError::Other(format!("no topic {index}")))
    }

    /// Topic `index` of a run: `<domain>://<namespace>/<prefix>-<workload>-<run id>-<index>`,
    /// the workload's name with what a topic name should not hold made `_`.
    fn topic_name(&self, namespace: &str, topology: &Topology, index: u32) -> String {
        let name = brokerbench_driver::naming::run_object_name(
            &self.config.topic_prefix,
            &topology.workload,
            &topology.run_id,
            index,
        );
        format!("{}://{namespace}/{name}", self.config.topic_type.domain())
    }

    /// The namespace of the run's topics: the driver file's, or one of the run's own
    /// (`<namespace>-<run id>`, its tenant created if missing) with the persistence policies
    /// and backlog quota the driver file sets.
    fn namespace(&mut self, topology: &Topology) -> Result<String, DriverError> {
        if !self.config.own_namespace() {
            return Ok(self.config.namespace.clone());
        }
        self.check_bookies()?;
        let admin = |e: String| DriverError::Other(format!("pulsar admin API: {e}"));
        let namespace = format!("{}-{}", self.config.namespace, topology.run_id);
        let tenant = self.config.namespace.split('/').next().unwrap_or_default();
        self.admin.ensure_tenant(tenant).map_err(admin)?;
        self.admin.create_namespace(&namespace).map_err(admin)?;
        self.own_namespace = Some(namespace.clone());
        if let Some(persistence) = &self.config.persistence {
            self.admin
                .set_persistence(&namespace, persistence)
                .map_err(admin)?;
        }
        if let Some((size, policy)) = quota::quota(&self.config.backlog_quota()) {
            self.admin
                .set_backlog_quota(&namespace, size, policy.wire())
                .map_err(admin)?;
        }
        Ok(namespace)
    }

    /// BookKeeper's quorums need as many bookies as the ensemble: asked before anything is
    /// created.
    fn check_bookies(&self) -> Result<(), DriverError> {
        let Some(persistence) = self.config.persistence else {
            return Ok(());
        };
        let bookies = self
            .admin
            .bookies()
            .map_err(|e| DriverError::Other(format!("pulsar admin API: {e}")))?;
        if persistence.ensemble_size as usize <= bookies {
            return Ok(());
        }
        let ensemble = persistence.ensemble_size;
        let more = if ensemble <= 3 {
            format!(", or give the managed Pulsar {ensemble} bookies: brokerbench broker down pulsar; brokerbench broker up pulsar --nodes {ensemble}")
        } else {
            String::new()
        };
        Err(DriverError::Unsatisfiable(format!(
            "persistence.ensemble_size is {ensemble} but the cluster has {bookies} bookie{}: run with --set persistence.ensemble_size={bookies} --set persistence.write_quorum={bookies} --set persistence.ack_quorum={bookies}{more}",
            if bookies == 1 { "" } else { "s" }
        )))
    }

    /// Deletes the run's topics (and their subscriptions), then its own namespace.
    fn delete_all(&mut self) -> Vec<String> {
        let mut failed = Vec::new();
        for topic in std::mem::take(&mut self.topics) {
            if let Err(e) = self
                .admin
                .delete_topic(&topic.admin_path(), topic.partitions > 1)
            {
                failed.push(format!("pulsar: deleting {}: {e}", topic.name));
            }
        }
        if let Some(namespace) = self.own_namespace.take() {
            if let Err(e) = self.admin.delete_namespace(&namespace) {
                failed.push(format!("pulsar: deleting namespace {namespace}: {e}"));
            }
        }
        failed
    }
}

/// The version in CONNECTED's `server_version` (`Pulsar Server4.0.8`).
fn version_of(server: &str) -> Option<String> {
    let version = server.trim_start_matches("Pulsar Server").trim();
    (!version.is_empty() && version != server).then(|| version.to_string())
}

impl Driver for PulsarDriver {
    fn name(&self) -> &'static str {
        "pulsar"
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        let conn = self.open()?;
        self.version = version_of(&conn.server).or(Some(conn.server));
        Ok(())
    }

    fn broker_version(&self) -> Option<String> {
        self.version.clone()
    }

    fn prepare(&mut self, topology: &Topology) -> Result<(), DriverError> {
        self.removes = topology.removes();
        self.subscriptions = topology.subscriptions_per_topic.max(1);
        let exclusive = self.config.subscription_type == config::SubscriptionType::Exclusive;
        if exclusive && topology.consumers_per_topic > 1 {
            return Err(DriverError::Unsatisfiable(format!(
                "subscription_type: Exclusive takes one consumer per subscription, and consumers_per_topic is {}: run with --set subscription_type=Failover (one active consumer per partition, the others standing by) or --set subscription_type=Shared",
                topology.consumers_per_topic
            )));
        }
        let namespace = self.namespace(topology)?;
        for index in 0..topology.topics {
            let topic = Topic {
                name: self.topic_name(&namespace, topology, index),
                partitions: topology.partitions_per_topic.max(1),
            };
            if topic.partitions > 1 {
                self.admin
                    .create_partitioned(&topic.admin_path(), topic.partitions)
                    .map_err(|e| DriverError::Other(format!("pulsar admin API: {e}")))?;
            }
            self.topics.push(topic);
        }
        Ok(())
    }

    fn producer(&self, slot: ProducerSlot) -> Result<Box<dyn Producer>, DriverError> {
        let ProducerSlot { topic, .. } = slot;
        let topic = self.topic(topic)?;
        let batching = producer::Batching {
            enabled: self.config.batching,
            max_delay: self.config.batching_max_publish_delay.0,
            max_messages: self.config.batching_max_messages as usize,
            max_bytes: self.config.batching_max_bytes as usize,
        };
        let reconnector =
            conn::Reconnector::new(self.url.clone(), self.config.reconnect, Conn::redial);
        let producer = producer::PulsarProducer::new(
            self.open()?,
            reconnector,
            topic.parts(),
            batching,
            self.config.max_pending_messages,
        )
        .map_err(|e| DriverError::Other(format!("pulsar: producer on {}: {e}", topic.name)))?;
        Ok(Box::new(producer))
    }

    fn consumer(&self, slot: ConsumerSlot) -> Result<Box<dyn Consumer>, DriverError> {
        let topic = self.topic(slot.topic)?;
        let name = format!("s{}", slot.subscription);
        let subscription = consumer::Subscription {
            topics: topic.parts(),
            consumer_name: format!("{name}-{}", slot.member),
            name,
            sub_type: self.config.subscription_type.wire(),
            queue: self.config.receiver_queue_size,
            ack: self.config.ack,
            batched: self.config.batching,
        };
        let reconnector =
            conn::Reconnector::new(self.url.clone(), self.config.reconnect, Conn::redial);
        let admin = self.admin.clone();
        let consumer =
            consumer::PulsarConsumer::new(self.open()?, reconnector, subscription, admin).map_err(
                |e| DriverError::Other(format!("pulsar: subscribing {}: {e}", topic.name)),
            )?;
        Ok(Box::new(consumer))
    }

    fn subscriptions_per_topic(&self) -> u32 {
        self.subscriptions
    }

    fn broker_drop_policy(&self) -> Option<String> {
        quota::drop_policy(&self.config.backlog_quota())
    }

    /// With one active consumer per partition (Exclusive, Failover), a subscription is ready
    /// once each partition has its active consumer; otherwise once every member has them all.
    fn subscription_ready(&self, topic: u32, assigned: &[usize]) -> bool {
        if !self.config.subscription_type.one_active() {
            return assigned.iter().all(|&a| a > 0);
        }
        let partitions = self.topic(topic).map_or(1, |t| t.partitions as usize);
        assigned.iter().sum::<usize>() >= partitions
    }

    /// Deletes the run's topics (their subscriptions with them) and its own namespace.
    fn cleanup(&mut self) -> Result<(), DriverError> {
        if !self.config.delete_topics || !self.removes {
            return Ok(());
        }
        let failed = self.delete_all();
        DriverError::unless_failed(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_the_server_version() {
        assert_eq!(version_of("Pulsar Server4.0.8").as_deref(), Some("4.0.8"));
        assert_eq!(version_of("something"), None);
    }
}
