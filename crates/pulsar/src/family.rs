//! The Apache Pulsar family: driver file, driver, managed broker and metrics, as one registry
//! entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::{Driver, DriverError};
use brokerbench_family::{Declaration, Declared};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{field_error, OmbDriver};
use brokerbench_model::yaml::Value;
use brokerbench_model::SpecError;

use crate::config::{PulsarDriverConfig, PulsarUrl, PULSAR_DRIVER_FIELDS};
use crate::managed::ManagedPulsar;
use crate::PulsarDriver;

/// Apache Pulsar through brokerbench's own client on its binary protocol.
pub struct PulsarFamily;

/// The registry entry.
pub static FAMILY: Declared<PulsarFamily> = Declared::new();

impl Declaration for PulsarFamily {
    type Config = PulsarDriverConfig;
    type Address = PulsarUrl;
    const NAME: &'static str = "pulsar";
    const TITLE: &'static str = "Apache Pulsar";
    const ABOUT: &'static str = "Apache Pulsar standalone from Maven Central (fetched on first use), its own on loopback; any Pulsar by service_url";
    const INSTALLED_FROM: &'static str = "Pulsar's release from Maven Central, with Maven";
    const ADDRESS_FIELD: &'static str = "service_url";
    const FIELDS: &'static [&'static str] = PULSAR_DRIVER_FIELDS;
    const BUILTIN_DRIVER: &'static str = include_str!("../driver.yaml");
    const OMB_CLASSES: &'static [&'static str] = &[crate::omb::OMB_DRIVER_CLASS];
    const OMB_FIELDS: &'static [&'static str] = crate::omb::OMB_DRIVER_FIELDS;

    fn validate(file: &str, config: &PulsarDriverConfig) -> Result<(), SpecError> {
        config.validate().map_err(|e| field_error(file, e))
    }
    fn translate_omb(file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        crate::omb::translate_omb_driver(file, map)
    }
    fn named(config: &PulsarDriverConfig) -> Option<&PulsarUrl> {
        config.service_url.as_ref()
    }
    fn parse(address: &str) -> Result<PulsarUrl, String> {
        PulsarUrl::parse(address)
    }
    /// The managed broker's admin API is on its own port + 1430, not always 8080.
    fn driver(
        mut config: PulsarDriverConfig,
        url: PulsarUrl,
        managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        if managed.is_some() && config.http_url.is_none() {
            config.http_url = crate::managed::admin_url(url.port);
        }
        Ok(Box::new(PulsarDriver::new(config, url)))
    }
    fn managed(home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(ManagedPulsar::new(home))
    }
    fn metrics() -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
