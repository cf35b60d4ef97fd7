//! The Apache Pulsar family: driver file, driver, managed broker and metrics, as one registry
//! entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::family::{config_of, managed_or_named};
use brokerbench_driver::{Driver, DriverError, Family};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{field_error, parse_driver, resolved, OmbDriver};
use brokerbench_model::yaml::Value;
use brokerbench_model::{DriverConfig, DriverSchema, SpecError};

use crate::config::{PulsarDriverConfig, PulsarUrl, PULSAR_DRIVER_FIELDS};
use crate::managed::ManagedPulsar;
use crate::PulsarDriver;

/// Apache Pulsar through brokerbench's own client on its binary protocol.
pub struct PulsarFamily;

/// The registry entry.
pub static FAMILY: PulsarFamily = PulsarFamily;

impl DriverSchema for PulsarFamily {
    fn name(&self) -> &'static str {
        "pulsar"
    }
    fn fields(&self) -> &'static [&'static str] {
        PULSAR_DRIVER_FIELDS
    }
    fn builtin_driver(&self) -> &'static str {
        include_str!("../driver.yaml")
    }
    fn check(&self, file: &str, map: &Value) -> Result<serde_json::Value, SpecError> {
        let config: PulsarDriverConfig = parse_driver(file, map)?;
        config.validate().map_err(|e| field_error(file, e))?;
        Ok(resolved("pulsar", &config))
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

impl Family for PulsarFamily {
    fn schema(&self) -> &dyn DriverSchema {
        self
    }
    fn title(&self) -> &'static str {
        "Apache Pulsar"
    }
    fn about(&self) -> &'static str {
        "Apache Pulsar standalone from Maven Central (fetched on first use), its own on loopback; any Pulsar by service_url"
    }
    fn address_field(&self) -> &'static str {
        "service_url"
    }
    fn address(&self, config: &DriverConfig) -> Result<Option<String>, DriverError> {
        Ok(config_of::<PulsarDriverConfig>(config)?
            .service_url
            .map(|url| url.to_string()))
    }
    fn driver(
        &self,
        config: &DriverConfig,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        let mut config = config_of::<PulsarDriverConfig>(config)?;
        let url = managed_or_named(
            managed,
            config.service_url.as_ref(),
            self.address_field(),
            PulsarUrl::parse,
        )?;
        // The managed broker's admin API is on its own port + 1430, not always 8080.
        if managed.is_some() && config.http_url.is_none() {
            config.http_url = crate::managed::admin_url(url.port);
        }
        Ok(Box::new(PulsarDriver::new(config, url)))
    }
    fn managed(&self, home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(ManagedPulsar::new(home))
    }
    fn metrics(&self) -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
