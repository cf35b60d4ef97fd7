//! The RabbitMQ family: driver file, driver, managed broker and metrics, as one registry
//! entry.

use std::path::Path;

use crate::managed::RabbitMq;
use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::family::{config_of, managed_or_named};
use brokerbench_driver::{Driver, DriverError, Family};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{field_error, parse_driver, resolved, OmbDriver};
use brokerbench_model::workload::FieldError;
use brokerbench_model::yaml::Value;
use brokerbench_model::{DriverConfig, DriverSchema, SpecError, Workload};

use crate::config::{AmqpUri, RabbitMqDriverConfig, RABBITMQ_DRIVER_FIELDS};
use crate::AmqpDriver;

/// RabbitMQ and other AMQP 0-9-1 brokers, through brokerbench's own client.
pub struct RabbitMqFamily;

/// The registry entry.
pub static FAMILY: RabbitMqFamily = RabbitMqFamily;

impl DriverSchema for RabbitMqFamily {
    fn name(&self) -> &'static str {
        "rabbitmq"
    }
    fn fields(&self) -> &'static [&'static str] {
        RABBITMQ_DRIVER_FIELDS
    }
    fn builtin_driver(&self) -> &'static str {
        include_str!("../driver.yaml")
    }
    fn check(&self, file: &str, map: &Value) -> Result<serde_json::Value, SpecError> {
        let config: RabbitMqDriverConfig = parse_driver(file, map)?;
        config.validate().map_err(|e| field_error(file, e))?;
        Ok(resolved("rabbitmq", &config))
    }
    fn omb_driver_classes(&self) -> &'static [&'static str] {
        &[crate::omb::OMB_DRIVER_CLASS]
    }
    fn omb_driver_fields(&self) -> &'static [&'static str] {
        crate::omb::OMB_DRIVER_FIELDS
    }
    fn translate_omb_driver(&self, file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        crate::omb::translate_omb_driver(file, map)
    }
    fn check_workload(&self, workload: &Workload) -> Result<(), FieldError> {
        if workload.partitions_per_topic != 1 {
            return Err(FieldError::new(
                "partitions_per_topic",
                format!(
                    "{} has no meaning for RabbitMQ, whose queues are not partitioned; set partitions_per_topic: 1 (more consumers per queue: consumers_per_topic; more queues per topic: queues_per_topic in the driver file)",
                    workload.partitions_per_topic
                ),
            ));
        }
        Ok(())
    }
}

impl Family for RabbitMqFamily {
    fn schema(&self) -> &dyn DriverSchema {
        self
    }
    fn title(&self) -> &'static str {
        "RabbitMQ"
    }
    fn about(&self) -> &'static str {
        "RabbitMQ from Debian's rabbitmq-server package, its own node on loopback; any AMQP 0-9-1 broker by uri"
    }
    fn address_field(&self) -> &'static str {
        "uri"
    }
    fn address(&self, config: &DriverConfig) -> Result<Option<String>, DriverError> {
        Ok(config_of::<RabbitMqDriverConfig>(config)?
            .uri
            .map(|uri| uri.address()))
    }
    fn driver(
        &self,
        config: &DriverConfig,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        let mut config = config_of::<RabbitMqDriverConfig>(config)?;
        // A managed cluster's address is every running node's URI, node 1's first.
        let mut nodes = managed.map(|m| m.split(',')).into_iter().flatten();
        let uri = managed_or_named(
            nodes.next(),
            config.uri.as_ref(),
            self.address_field(),
            AmqpUri::parse,
        )?;
        if config.uri.is_none() {
            config.failover_uris = nodes
                .map(AmqpUri::parse)
                .collect::<Result<_, _>>()
                .map_err(DriverError::Other)?;
        }
        Ok(Box::new(AmqpDriver::new(config, uri)))
    }
    fn managed(&self, home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(RabbitMq::new(home))
    }
    fn metrics(&self) -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
