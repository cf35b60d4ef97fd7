//! The Kafka family: driver file, driver, managed broker and metrics, as one registry entry.

use std::path::Path;

use crate::managed::Kafka;
use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::family::{config_of, managed_or_named};
use brokerbench_driver::{Driver, DriverError, Family};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{parse_driver, resolved, OmbDriver};
use brokerbench_model::yaml::Value;
use brokerbench_model::{DriverConfig, DriverSchema, SpecError};

use crate::config::{KafkaDriverConfig, KAFKA_DRIVER_FIELDS};
use crate::KafkaDriver;

/// Apache Kafka and Kafka-API brokers, through librdkafka.
pub struct KafkaFamily;

/// The registry entry.
pub static FAMILY: KafkaFamily = KafkaFamily;

impl DriverSchema for KafkaFamily {
    fn name(&self) -> &'static str {
        "kafka"
    }
    fn fields(&self) -> &'static [&'static str] {
        KAFKA_DRIVER_FIELDS
    }
    fn builtin_driver(&self) -> &'static str {
        include_str!("../driver.yaml")
    }
    fn check(&self, file: &str, map: &Value) -> Result<serde_json::Value, SpecError> {
        let config: KafkaDriverConfig = parse_driver(file, map)?;
        if config.replication_factor == 0 {
            return Err(SpecError::Field {
                file: file.to_string(),
                field: "replication_factor".into(),
                message: "must be at least 1".into(),
            });
        }
        for (block, properties) in [
            ("common_config", &config.common_config),
            ("producer_config", &config.producer_config),
            ("consumer_config", &config.consumer_config),
        ] {
            for (key, value) in properties {
                crate::omb::check_property(file, block, key, value)?;
            }
        }
        Ok(resolved("kafka", &config.with_defaults()))
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
}

impl Family for KafkaFamily {
    fn schema(&self) -> &dyn DriverSchema {
        self
    }
    fn title(&self) -> &'static str {
        "Kafka"
    }
    fn about(&self) -> &'static str {
        "Apache Kafka 4.x in KRaft mode, single node on loopback; any Kafka-API broker by bootstrap_servers"
    }
    fn address_field(&self) -> &'static str {
        "bootstrap_servers"
    }
    fn address(&self, config: &DriverConfig) -> Result<Option<String>, DriverError> {
        Ok(config_of::<KafkaDriverConfig>(config)?.bootstrap_servers)
    }
    fn driver(
        &self,
        config: &DriverConfig,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        let config = config_of::<KafkaDriverConfig>(config)?;
        let servers = managed_or_named(
            managed,
            config.bootstrap_servers.as_ref(),
            self.address_field(),
            |address| Ok(address.to_string()),
        )?;
        Ok(Box::new(KafkaDriver::new(config.with_defaults(), servers)))
    }
    fn managed(&self, home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(Kafka::new(home))
    }
    fn metrics(&self) -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
