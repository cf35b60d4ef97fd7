//! The MQTT family: driver file, driver and managed broker, as one registry entry.

use std::path::Path;

use brokerbench_brokers::ManagedBroker;
use brokerbench_driver::{Driver, DriverError};
use brokerbench_family::{Declaration, Declared};
use brokerbench_metrics::MetricSet;
use brokerbench_model::family::{field_error, OmbDriver};
use brokerbench_model::yaml::Value;
use brokerbench_model::SpecError;

use crate::config::{MqttDriverConfig, MQTT_DRIVER_FIELDS};
use crate::url::MqttUrl;
use crate::MqttDriver;

/// MQTT through brokerbench's own client.
pub struct MqttFamily;

/// The registry entry.
pub static FAMILY: Declared<MqttFamily> = Declared::new();

impl Declaration for MqttFamily {
    type Config = MqttDriverConfig;
    type Address = MqttUrl;
    const NAME: &'static str = "mqtt";
    const TITLE: &'static str = "MQTT";
    const ABOUT: &'static str = "Debian's mosquitto, its own broker on loopback (QoS 1, MQTT 5); any MQTT 3.1.1 or 5 broker by mqtt_url";
    const INSTALLED_FROM: &'static str = "Debian's mosquitto package with apt-get";
    const ADDRESS_FIELD: &'static str = "mqtt_url";
    const FIELDS: &'static [&'static str] = MQTT_DRIVER_FIELDS;
    const BUILTIN_DRIVER: &'static str = include_str!("../driver.yaml");
    const OMB_CLASSES: &'static [&'static str] =
        &[crate::omb::OMB_V3_CLASS, crate::omb::OMB_V5_CLASS];
    const OMB_FIELDS: &'static [&'static str] = crate::omb::OMB_DRIVER_FIELDS;

    fn validate(file: &str, config: &MqttDriverConfig) -> Result<(), SpecError> {
        config.validate().map_err(|e| field_error(file, e))
    }
    fn translate_omb(file: &str, map: &Value) -> Result<OmbDriver, SpecError> {
        crate::omb::translate_omb_driver(file, map)
    }
    fn named(config: &MqttDriverConfig) -> Option<&MqttUrl> {
        config.mqtt_url.as_ref()
    }
    fn parse(address: &str) -> Result<MqttUrl, String> {
        MqttUrl::parse(address)
    }
    fn driver(
        config: MqttDriverConfig,
        url: MqttUrl,
        _managed: Option<&str>,
    ) -> Result<Box<dyn Driver>, DriverError> {
        Ok(Box::new(MqttDriver::new(config, url)))
    }
    fn managed(home: &Path) -> Box<dyn ManagedBroker> {
        Box::new(crate::managed::managed(home))
    }
    fn metrics() -> Option<&'static MetricSet> {
        Some(&crate::metrics::METRICS)
    }
}
