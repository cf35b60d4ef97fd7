//! The ActiveMQ Artemis family: driver file, driver, managed broker and metrics, as one registry
//! entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::family::{config_of, managed_or_named};
use brokerbench_driver::{Driver, DriverError, Family};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{field_error, parse_driver, resolved, OmbDriver};
use brokerbench_model::workload::{FieldError, Workload};
use brokerbench_model::yaml::Value;
use brokerbench_model::{DriverConfig, DriverSchema, SpecError};

use crate::config::{ArtemisDriverConfig, ArtemisUrl, ARTEMIS_DRIVER_FIELDS};
use crate::managed::ManagedArtemis;
use crate::ArtemisDriver;

/// ActiveMQ Artemis through brokerbench's own STOMP client.
pub struct ArtemisFamily;

/// The registry entry.
pub static FAMILY: ArtemisFamily = ArtemisFamily;

impl DriverSchema for ArtemisFamily {
    fn name(&self) -> &'static str {
        "artemis"
    }
    fn fields(&self) -> &'static [&'static str] {
        ARTEMIS_DRIVER_FIELDS
    }
    fn builtin_driver(&self) -> &'static str {
        include_str!("../driver.yaml")
    }
    fn check(&self, file: &str, map: &Value) -> Result<serde_json::Value, SpecError> {
        let config: ArtemisDriverConfig = parse_driver(file, map)?;
        config.validate().map_err(|e| field_error(file, e))?;
        Ok(resolved("artemis", &config))
    }
    fn check_workload(&self, workload: &Workload) -> Result<(), FieldError> {
        if workload.partitions_per_topic != 1 {
            return Err(FieldError::new(
                "partitions_per_topic",
                format!(
                    "{} has no meaning for Artemis, whose addresses are not partitioned (each subscription is one queue); set partitions_per_topic: 1 (more consumers per subscription: consumers_per_topic)",
                    workload.partitions_per_topic
                ),
            ));
        }
        Ok(())
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

impl Family for ArtemisFamily {
    fn schema(&self) -> &dyn DriverSchema {
        self
    }
    fn title(&self) -> &'static str {
        "ActiveMQ Artemis"
    }
    fn about(&self) -> &'static str {
        "ActiveMQ Artemis from Maven Central (fetched on first use), its own instance on loopback; any Artemis by broker_address (STOMP)"
    }
    fn address_field(&self) -> &'static str {
        "broker_address"
    }
    fn address(&self, config: &DriverConfig) -> Result<Option<String>, DriverError> {
        Ok(config_of::<ArtemisDriverConfig>(config)?
            .broker_address
            .map(|url| url.to_string()))
    }
    fn driver(
        &self,
        config: &DriverConfig,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        let config = config_of::<ArtemisDriverConfig>(config)?;
        let url = managed_or_named(
            managed,
            config.broker_address.as_ref(),
            self.address_field(),
            ArtemisUrl::parse,
        )?;
        Ok(Box::new(ArtemisDriver::new(config, url)))
    }
    fn managed(&self, home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(ManagedArtemis::new(home))
    }
    fn metrics(&self) -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
