//! The Kafka driver: topics through the admin API, producers whose acknowledgements are
//! stamped as librdkafka receives them, consumers in a group per subscription (spanning the
//! run's topics when clients are shared, else one per topic). Works with any Kafka-API broker.

use std::collections::BTreeMap;

use futures_executor::block_on;
use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::error::RDKafkaErrorCode;

use brokerbench_driver::{
    one_consumer_per_slot, Consumer, ConsumerGroup, ConsumerSlot, Driver, DriverError, Led,
    Producer, ProducerSlot, Topology,
};

mod cluster;
pub mod config;
mod driver;
mod error_kinds;
mod family;
mod in_flight;
pub mod java_client;
mod mailbox;
pub mod managed;
pub mod metrics;
pub mod omb;
mod probe;
mod producer;
mod producer_client;
mod scram;
mod seen_offsets;
mod shared_consumer;
mod statistics;
mod topic_handle;

pub use config::{ConsumerClients, KafkaDriverConfig, ProducerClients};
pub use driver::KafkaDriver;
pub use family::{KafkaFamily, FAMILY};
pub use topic_handle::TopicHandle;

use driver::ADMIN_TIMEOUT;
use error_kinds::FAILURE_SETTINGS;
use producer::KafkaProducer;
use shared_consumer::SharedConsumer;

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

    fn producer(&self, slot: ProducerSlot) -> Result<Box<dyn Producer>, DriverError> {
        let ProducerSlot {
            topic,
            producer,
            thread,
        } = slot;
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
        Ok(Box::new(KafkaProducer::new(
            topic,
            client,
            shared,
            slot,
            producer,
            self.config.producer_config.get("acks").cloned(),
        )))
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

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
