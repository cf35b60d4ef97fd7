//! The ActiveMQ Artemis family: driver file, driver, managed broker and metrics, as one registry
//! entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::{Driver, DriverError};
use brokerbench_family::{Declaration, Declared};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{field_error, unpartitioned, OmbDriver};
use brokerbench_model::workload::{FieldError, Workload};
use brokerbench_model::yaml::Value;
use brokerbench_model::SpecError;

use crate::config::{ArtemisDriverConfig, ArtemisUrl, ARTEMIS_DRIVER_FIELDS};
use crate::managed::ManagedArtemis;
use crate::ArtemisDriver;

/// ActiveMQ Artemis through brokerbench's own STOMP client.
pub struct ArtemisFamily;

/// The registry entry.
pub static FAMILY: Declared<ArtemisFamily> = Declared::new();

impl Declaration for ArtemisFamily {
    type Config = ArtemisDriverConfig;
    type Address = ArtemisUrl;
    const NAME: &'static str = "artemis";
    const TITLE: &'static str = "ActiveMQ Artemis";
    const ABOUT: &'static str = "ActiveMQ Artemis from Maven Central (fetched on first use), its own instance on loopback; any Artemis by broker_address (STOMP)";
    const INSTALLED_FROM: &'static str = "Artemis's release from Maven Central, with Maven";
    const ADDRESS_FIELD: &'static str = "broker_address";
    const FIELDS: &'static [&'static str] = ARTEMIS_DRIVER_FIELDS;
    const BUILTIN_DRIVER: &'static str = include_str!("../driver.yaml");
    const OMB_CLASSES: &'static [&'static str] = &[crate::omb::OMB_DRIVER_CLASS];
    const OMB_FIELDS: &'static [&'static str] = crate::omb::OMB_DRIVER_FIELDS;

    fn validate(file: &str, config: &ArtemisDriverConfig) -> Result<(), SpecError> {
        config.validate().map_err(|e| field_error(file, e))
    }
    fn check_workload(workload: &Workload) -> Result<(), FieldError> {
        unpartitioned(
            workload,
            "Artemis, whose addresses are not partitioned (each subscription is one queue); set partitions_per_topic: 1 (more consumers per subscription: consumers_per_topic)",
        )
    }
    fn translate_omb(file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        crate::omb::translate_omb_driver(file, map)
    }
    fn named(config: &ArtemisDriverConfig) -> Option<&ArtemisUrl> {
        config.broker_address.as_ref()
    }
    fn parse(address: &str) -> Result<ArtemisUrl, String> {
        ArtemisUrl::parse(address)
    }
    fn driver(
        config: ArtemisDriverConfig,
        url: ArtemisUrl,
        _managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        Ok(Box::new(ArtemisDriver::new(config, url)))
    }
    fn managed(home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(ManagedArtemis::new(home))
    }
    fn metrics() -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
