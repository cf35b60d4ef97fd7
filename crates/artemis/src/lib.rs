//! ActiveMQ Artemis, the fourth broker family, built only on the family interface.
//!
//! Mapping, as the OpenMessaging Benchmark's Artemis driver has it: a workload topic is a
//! multicast address `<prefix>-<workload>-<run id>-<topic>`; a subscription is a durable
//! queue on it, `<address>.s<subscription>`, shared by the subscription's
//! `consumers_per_topic` members; messages are durable; a send is acknowledged by the broker's
//! receipt, a delivery by the consumer's ACK. Artemis has no partitions: a topic's messages
//! are one queue per subscription, whatever `partitions_per_topic` says (see
//! `check_workload`). The protocol is STOMP 1.2 over brokerbench's own client (see
//! docs/src/artemis.md for why); every producer and consumer owns one connection.

pub mod config;
pub mod conn;
mod consumer;
mod family;
mod limits;
mod manage;
pub mod managed;
mod metrics;
pub mod omb;
mod producer;
pub mod stomp;

use std::time::Duration;

use brokerbench_driver::{Consumer, ConsumerSlot, Dialed, Driver, DriverError, Topology};
use brokerbench_driver::{Producer, ProducerSlot};

use crate::config::{ArtemisDriverConfig, ArtemisUrl};
use crate::conn::Conn;

pub use family::{ArtemisFamily, FAMILY};

/// How long connecting, subscribing and unsubscribing may take.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The Artemis driver.
pub struct ArtemisDriver {
    config: ArtemisDriverConfig,
    url: ArtemisUrl,
    addresses: Vec<String>,
    /// Subscription queues per address (the workload's `subscriptions_per_topic`; none
    /// without consumers).
    subscriptions: u32,
    consumers: bool,
    version: Option<String>,
    /// Whether `cleanup` may delete the run's queues (false on shards other than 0).
    removes: bool,
}

impl ArtemisDriver {
    pub fn new(config: ArtemisDriverConfig, url: ArtemisUrl) -> Self {
        let url = url.with_tls(config.tls.as_ref());
        ArtemisDriver {
            config,
            url,
            addresses: Vec::new(),
            subscriptions: 1,
            consumers: false,
            version: None,
            removes: true,
        }
    }

    /// A connection, named `client_id` when given.
    fn open(&self, client_id: Option<&str>) -> Result<Conn, DriverError> {
        let login_hint = match &self.url.user {
            Some(user) => format!(" (user '{user}'); check the user and password in broker_address"),
            None => " (no user given); the broker wants one: broker_address: tcp://user:password@host:port".into(),
        };
        Conn::connect(&self.url, ADMIN_TIMEOUT, client_id).map_err(|e| {
            e.for_run(Dialed {
                broker: "artemis",
                address: self.url.to_string(),
                noun: "broker",
                field: "broker_address",
                tls_address: "ssl://host:port, a TLS acceptor",
                login_hint,
            })
        })
    }

    /// Address `topic` of a run: `<prefix>-<workload>-<run id>-<topic>`, the workload's name
    /// with what an address name should not hold made `_`.
    fn address_name(&self, run_id: &str, workload: &str, topic: u32) -> String {
        brokerbench_driver::naming::run_object_name(
            &self.config.address_prefix,
            workload,
            run_id,
            topic,
        )
    }

    fn address(&self, topic: u32) -> Result<&String, DriverError> {
        self.addresses
            .get(topic as usize)
            .ok_or_else(|| DriverError::Other(format!("no address for topic {topic}")))
    }
}

impl ArtemisDriver {
    /// Deletes the durable subscription `name` of `address` (UNSUBSCRIBE as its client id).
    /// The run's consumers have just closed their connections, and the broker refuses to
    /// delete a queue while it still counts a consumer: tried again for up to 5 s.
    fn unsubscribe(&self, address: &str, name: &str) -> Result<(), String> {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let removed = self
                .open(Some(address))
                .map_err(|e| e.to_string())
                .and_then(|mut conn| {
                    let headers: [(&[u8], &[u8]); 2] = [
                        (b"id", b"0"),
                        (b"durable-subscription-name", name.as_bytes()),
                    ];
                    conn.request(b"UNSUBSCRIBE", &headers, ADMIN_TIMEOUT)
                });
            if removed.is_ok() || std::time::Instant::now() >= deadline {
                return removed;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl ArtemisDriver {
    /// Sets the driver file's address limit on each of the run's addresses, before anything
    /// is sent to them (Artemis's management API); when one cannot be set, those already set
    /// are removed again (the broker keeps address settings in its journal).
    fn limit_addresses(&self) -> Result<(), DriverError> {
        let Some(settings) = limits::address_settings(&self.config.limit()) else {
            return Ok(());
        };
        let mut conn = self.open(None)?;
        for (done, address) in self.addresses.iter().enumerate() {
            let params = serde_json::json!([address, settings]);
            if let Err(e) = manage_broker(&mut conn, "addAddressSettings", &params) {
                let _ = remove_limits(&mut conn, &self.addresses[..done]);
                return Err(DriverError::Other(format!(
                    "artemis: limiting address {address}: {e}"
                )));
            }
        }
        Ok(())
    }

    /// Removes the address limits [`Self::limit_addresses`] set; what failed, named.
    fn unlimit_addresses(&self) -> Vec<String> {
        if limits::address_settings(&self.config.limit()).is_none() || !self.removes {
            return Vec::new();
        }
        match self.open(None) {
            Ok(mut conn) => remove_limits(&mut conn, &self.addresses),
            Err(e) => vec![format!("artemis: removing address limits: {e}")],
        }
    }
}

/// Removes the settings of `addresses`; what failed, named.
fn remove_limits(conn: &mut Conn, addresses: &[String]) -> Vec<String> {
    addresses
        .iter()
        .filter_map(|address| {
            let params = serde_json::json!([address]);
            manage_broker(conn, "removeAddressSettings", &params)
                .err()
                .map(|e| format!("artemis: removing the limit of {address}: {e}"))
        })
        .collect()
}

/// Invokes the broker's `operation`, waiting at most [`ADMIN_TIMEOUT`].
fn manage_broker(
    conn: &mut Conn,
    operation: &str,
    params: &serde_json::Value,
) -> Result<String, String> {
    let deadline = std::time::Instant::now() + ADMIN_TIMEOUT;
    manage::invoke(conn, "broker", operation, params, deadline)
}

/// A subscription's name; its queue is `<address>.<name>` (the address is the client id
/// every member connects with).
fn subscription_name(subscription: u32) -> String {
    format!("s{subscription}")
}

/// The version in CONNECTED's `server` header (`ActiveMQ-Artemis/2.40.0 ...`).
fn version_of(server: &str) -> Option<String> {
    let product = server.split_whitespace().next()?;
    Some(product.split_once('/')?.1.to_string())
}

impl Driver for ArtemisDriver {
    fn name(&self) -> &'static str {
        "artemis"
    }

    fn connect(&mut self) -> Result<(), DriverError> {
        let conn = self.open(None)?;
        if !conn.server.contains("Artemis") {
            return Err(DriverError::Other(format!(
                "{} answers STOMP as `{}`, not ActiveMQ Artemis: the artemis driver relies on Artemis's multicast addresses and shared durable subscriptions",
                self.url, conn.server
            )));
        }
        self.version = version_of(&conn.server);
        Ok(())
    }

    fn broker_version(&self) -> Option<String> {
        self.version.clone()
    }

    fn prepare(&mut self, topology: &Topology) -> Result<(), DriverError> {
        self.removes = topology.removes();
        self.subscriptions = topology.subscriptions_per_topic.max(1);
        self.consumers = topology.consumers_per_topic > 0;
        self.addresses = (0..topology.topics)
            .map(|topic| self.address_name(&topology.run_id, &topology.workload, topic))
            .collect();
        self.limit_addresses()
    }

    fn producer(&self, slot: ProducerSlot) -> Result<Box<dyn Producer>, DriverError> {
        let ProducerSlot { topic, .. } = slot;
        let reconnector = conn::Reconnector::new(
            (self.url.clone(), None),
            self.config.reconnect,
            Conn::redial,
        );
        Ok(Box::new(producer::ArtemisProducer::new(
            self.open(None)?,
            reconnector,
            self.address(topic)?,
            self.config.durable,
            self.config.max_outstanding,
        )))
    }

    fn consumer(&self, slot: ConsumerSlot) -> Result<Box<dyn Consumer>, DriverError> {
        let address = self.address(slot.topic)?;
        let name = subscription_name(slot.subscription);
        let subscription = consumer::Subscription {
            address: address.clone(),
            name: name.clone(),
            window: self.config.consumer_window_size,
        };
        let reconnector = conn::Reconnector::new(
            (self.url.clone(), Some(address.to_string())),
            self.config.reconnect,
            Conn::redial,
        );
        let conn = self.open(Some(address))?;
        let consumer =
            consumer::ArtemisConsumer::new(conn, reconnector, subscription).map_err(|e| {
                DriverError::Other(format!("artemis: subscribing {address}.{name}: {e}"))
            })?;
        Ok(Box::new(consumer))
    }

    fn subscriptions_per_topic(&self) -> u32 {
        self.subscriptions
    }

    fn broker_drop_policy(&self) -> Option<String> {
        limits::drop_policy(&self.config.limit())
    }

    /// Removes the run's address limits, and deletes every subscription queue of the run
    /// (UNSUBSCRIBE of its durable name, as its client id); the auto-created address goes
    /// with its last queue.
    fn cleanup(&mut self) -> Result<(), DriverError> {
        let mut failed = self.unlimit_addresses();
        if !self.config.delete_subscriptions || !self.removes || !self.consumers {
            return DriverError::unless_failed(failed);
        }
        for address in std::mem::take(&mut self.addresses) {
            for subscription in 0..self.subscriptions {
                let name = subscription_name(subscription);
                if let Err(e) = self.unsubscribe(&address, &name) {
                    failed.push(format!("artemis: deleting {address}.{name}: {e}"));
                }
            }
        }
        DriverError::unless_failed(failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_the_server_header() {
        assert_eq!(
            version_of("ActiveMQ-Artemis/2.40.0 ActiveMQ Artemis Messaging Engine").as_deref(),
            Some("2.40.0")
        );
        assert_eq!(version_of("RabbitMQ"), None);
    }
}
