//! The Kafka family: driver file, driver, managed broker and metrics, as one registry entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::{Driver, DriverError};
use brokerbench_family::{Declaration, Declared};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::OmbDriver;
use brokerbench_model::yaml::Value;
use brokerbench_model::SpecError;

use crate::config::{KafkaDriverConfig, KAFKA_DRIVER_FIELDS};
use crate::driver::KafkaDriver;
use crate::managed::Kafka;

/// Apache Kafka and Kafka-API brokers, through librdkafka.
pub struct KafkaFamily;

/// The registry entry.
pub static FAMILY: Declared<KafkaFamily> = Declared::new();

impl Declaration for KafkaFamily {
    type Config = KafkaDriverConfig;
    /// `bootstrap_servers`, as written.
    type Address = String;
    const NAME: &'static str = "kafka";
    const TITLE: &'static str = "Kafka";
    const ABOUT: &'static str = "Apache Kafka 4.x in KRaft mode, single node on loopback; any Kafka-API broker by bootstrap_servers";
    const INSTALLED_FROM: &'static str = "Kafka's jars from Maven Central, with Maven";
    const ADDRESS_FIELD: &'static str = "bootstrap_servers";
    const FIELDS: &'static [&'static str] = KAFKA_DRIVER_FIELDS;
    const BUILTIN_DRIVER: &'static str = include_str!("../driver.yaml");
    const OMB_CLASSES: &'static [&'static str] = &[crate::omb::OMB_DRIVER_CLASS];
    const OMB_FIELDS: &'static [&'static str] = crate::omb::OMB_DRIVER_FIELDS;

    fn validate(file: &str, config: &KafkaDriverConfig) -> Result<(), SpecError> {
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
        Ok(())
    }
    fn resolve(config: KafkaDriverConfig) -> KafkaDriverConfig {
        config.with_defaults()
    }
    fn translate_omb(file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        crate::omb::translate_omb_driver(file, map)
    }
    fn named(config: &KafkaDriverConfig) -> Option<&String> {
        config.bootstrap_servers.as_ref()
    }
    fn parse(address: &str) -> Result<String, String> {
        Ok(address.to_string())
    }
    fn driver(
        config: KafkaDriverConfig,
        servers: String,
        _managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        Ok(Box::new(KafkaDriver::new(config, servers)))
    }
    fn managed(home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(Kafka::new(home))
    }
    fn metrics() -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
