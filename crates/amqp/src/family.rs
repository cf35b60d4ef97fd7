//! The RabbitMQ family: driver file, driver, managed broker and metrics, as one registry
//! entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::{Driver, DriverError};
use brokerbench_family::{Declaration, Declared};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{field_error, unpartitioned, OmbDriver};
use brokerbench_model::workload::FieldError;
use brokerbench_model::yaml::Value;
use brokerbench_model::{SpecError, Workload};

use crate::config::{AmqpUri, RabbitMqDriverConfig, RABBITMQ_DRIVER_FIELDS};
use crate::managed::RabbitMq;
use crate::AmqpDriver;

/// RabbitMQ and other AMQP 0-9-1 brokers, through brokerbench's own client.
pub struct RabbitMqFamily;

/// The registry entry.
pub static FAMILY: Declared<RabbitMqFamily> = Declared::new();

impl Declaration for RabbitMqFamily {
    type Config = RabbitMqDriverConfig;
    type Address = AmqpUri;
    const NAME: &'static str = "rabbitmq";
    const TITLE: &'static str = "RabbitMQ";
    const ABOUT: &'static str = "RabbitMQ from Debian's rabbitmq-server package, its own node on loopback; any AMQP 0-9-1 broker by uri";
    const INSTALLED_FROM: &'static str = "Debian's rabbitmq-server package with apt-get";
    const ADDRESS_FIELD: &'static str = "uri";
    const FIELDS: &'static [&'static str] = RABBITMQ_DRIVER_FIELDS;
    const BUILTIN_DRIVER: &'static str = include_str!("../driver.yaml");
    const OMB_CLASSES: &'static [&'static str] = &[crate::omb::OMB_DRIVER_CLASS];
    const OMB_FIELDS: &'static [&'static str] = crate::omb::OMB_DRIVER_FIELDS;

    fn validate(file: &str, config: &RabbitMqDriverConfig) -> Result<(), SpecError> {
        config.validate().map_err(|e| field_error(file, e))
    }
    fn check_workload(workload: &Workload) -> Result<(), FieldError> {
        unpartitioned(
            workload,
            "RabbitMQ, whose queues are not partitioned; set partitions_per_topic: 1 (more consumers per queue: consumers_per_topic; more queues per topic: queues_per_topic in the driver file)",
        )
    }
    fn translate_omb(file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        crate::omb::translate_omb_driver(file, map)
    }
    fn named(config: &RabbitMqDriverConfig) -> Option<&AmqpUri> {
        config.uri.as_ref()
    }
    fn shown(uri: &AmqpUri) -> String {
        uri.address()
    }
    fn parse(address: &str) -> Result<AmqpUri, String> {
        AmqpUri::parse(address)
    }
    /// A managed cluster's address is every running node's URI, node 1's first.
    fn first(managed: &str) -> &str {
        managed.split(',').next().unwrap_or(managed)
    }
    /// A run on the managed cluster fails over to its other nodes.
    fn driver(
        mut config: RabbitMqDriverConfig,
        uri: AmqpUri,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        if config.uri.is_none() {
            config.failover_uris = managed
                .map(|m| m.split(',').skip(1))
                .into_iter()
                .flatten()
                .map(AmqpUri::parse)
                .collect::<Result<_, _>>()
                .map_err(DriverError::Other)?;
        }
        Ok(Box::new(AmqpDriver::new(config, uri)))
    }
    fn managed(home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(RabbitMq::new(home))
    }
    fn metrics() -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
